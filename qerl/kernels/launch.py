"""Programmatic dependent launch (PDL, Hopper and later) for the decode-path kernels.

A kernel launched this way may start while the kernel before it on the stream is still running: its CTAs are
scheduled once every CTA of the previous kernel has signalled (``griddepcontrol.launch_dependents``) or exited, and
it must execute ``griddepcontrol.wait`` before it reads anything the previous kernel wrote. The forward GEMM
(``nvfp4_gemm_ws._ws_fwd_kernel``) uses the gap to copy its first stages of weight codes and scales, which no
previous kernel writes, before it waits and copies X; the decode attention kernels wait first and signal after
their loads, so the projection after them can start its weight copies under their tail.

Off by default: a launch that copies weights before waiting is only correct while no kernel just before it writes
those weights (true during generation; not while ``prepare_weight`` or a weight update writes them on the same
stream right before). Switch it on with ``set_programmatic_launch(True)`` or ``QERL_PDL=1`` for rollouts and
benchmarks; torch.compile's own kernels take part with ``torch._inductor.config.triton.enable_pdl``.
"""

from __future__ import annotations

import os

import torch

_ENABLED = os.environ.get("QERL_PDL", "0") == "1"


def set_programmatic_launch(enabled: bool) -> None:
    """Launch the decode-path kernels with programmatic dependent launch from now on (see the module docstring)."""
    global _ENABLED
    _ENABLED = bool(enabled)


def programmatic_launch(device: torch.device) -> bool:
    """Whether launches on ``device`` use PDL: switched on, a CUDA device of compute capability 9.0 or later, and not
    Triton's CPU interpreter (which cannot run the ``griddepcontrol`` instructions)."""
    if not _ENABLED or device.type != "cuda" or os.environ.get("TRITON_INTERPRET") == "1":
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9

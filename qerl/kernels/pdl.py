"""Programmatic dependent launch (PDL, Hopper's ``griddepcontrol``) for the kernels of a decode step.

A kernel launched with PDL may start its CTAs while the kernel before it in the stream finishes; it must wait
(``griddepcontrol.wait``) before it reads what that kernel writes or writes what it reads, and it lets the kernel
after it start early (``griddepcontrol.launch_dependents``). In a decode step's chain of small launches that hides a
launch's set-up and, in the NVFP4 projections (``nvfp4_gemm_ws``), the first copies of W (which no kernel writes)
under the previous kernel's last CTAs: run 36 (benchmarks/RESULTS.md) measured the rollout's forward 0.87 / 0.89 /
0.96 of its time at M = 1 / 8 / 64 in a chain of projections, and the 7B-shaped decode harness 1.07-1.08x faster at
batch 1 / 8. But a launch with PDL after a kernel without it took 1.06x the time at M = 1 / 8 (up to 1.10x;
``benchmarks/pdl_neighbours.py``), so every kernel of the chain must take part: the small Triton kernels between the
projections here (attention, the residual add + RMSNorm, SiLU x up) launch with it too, each waiting first.

Off by default, since vLLM's engine and training put kernels of their own between the projections; on where the
whole step is this project's kernels (benchmarks/decode_nvfp4.py ``--pdl``): ``QERL_PDL=1`` (read at each launch,
so a CUDA graph keeps what was set while it was captured), or ``pdl(True)`` around a block of code.
"""

from __future__ import annotations

import contextlib
import functools
import os

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - CPU-only installs
    triton = None


def pdl_enabled() -> bool:
    """Whether the kernels launch with programmatic dependent launch (``QERL_PDL=1``; off by default)."""
    return os.environ.get("QERL_PDL", "0") == "1"


@contextlib.contextmanager
def pdl(enabled: bool):
    """``QERL_PDL`` set to ``enabled`` inside the block (launches and CUDA-graph captures made there), then restored:
    how the benchmarks time the same calls with and without programmatic dependent launch in one process."""
    before = os.environ.get("QERL_PDL")
    os.environ["QERL_PDL"] = "1" if enabled else "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("QERL_PDL", None)
        else:
            os.environ["QERL_PDL"] = before


def launch_options(device: torch.device) -> dict:
    """A Triton kernel's launch options for PDL: ``{"PDL": True, "launch_pdl": True}`` (the kernel's ``PDL``
    constexpr calls ``grid_dependency`` first) on a Hopper or later GPU outside the interpreter when enabled, else
    none (the constexpr's default, False)."""
    on = (device.type == "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1" and pdl_enabled()
          and _major(device.index if device.index is not None else torch.cuda.current_device()) >= 9)
    return {"PDL": True, "launch_pdl": True} if on else {}


@functools.cache
def _major(index: int) -> int:
    return torch.cuda.get_device_capability(index)[0]


if triton is not None:

    @triton.jit
    def grid_dependency(PDL: tl.constexpr):
        """With ``PDL``: wait for the launch before this one to complete (its writes visible), then let the launch
        after this one start. Called before the kernel's first load, so that nothing it reads or writes races."""
        if PDL:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()

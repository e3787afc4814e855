"""Launch configs for vLLM's LoRA shrink / expand kernels in the rollout engine.

vLLM 0.26-0.32 launch the adapter's Triton kernels with one default config for every shape unless
``VLLM_TUNED_CONFIG_FOLDER`` names a folder of per-GPU tables (``{GPU}_SHRINK.json``, ``{GPU}_EXPAND_TRUE.json``, ...).
With an active adapter those kernels are a fixed cost per decode step on either base, so they decide how much of the
NVFP4 base's speed-up survives (benchmarks/RESULTS.md). ``benchmarks/tune_vllm_lora.py`` writes such tables;
the ones it wrote on the project's benchmark GPUs ship in ``lora_kernel_configs/`` next to this file.
Setting the (public) environment variable before the engine starts is all this module does; vLLM reads the files
once per process, at the first LoRA kernel launch.
"""

from __future__ import annotations

import os
from pathlib import Path

from qerl.errors import UserError

ENV = "VLLM_TUNED_CONFIG_FOLDER"
SHIPPED_DIR = Path(__file__).with_name("lora_kernel_configs")
CHOICES_HELP = "auto | vllm | a folder in vLLM's VLLM_TUNED_CONFIG_FOLDER format"


def gpu_file_stem(gpu_name: str) -> str:
    """The GPU part of vLLM's config file names (``torch.cuda.get_device_name()`` with ' ' and '-' as '_')."""
    return gpu_name.replace(" ", "_").replace("-", "_")


def resolve(choice: str, gpu_name: str | None) -> str | None:
    """The folder to hand vLLM, or None for vLLM's defaults.

    ``auto``: a folder already set in the environment wins; else the shipped tables when they cover this GPU.
    ``vllm``: vLLM's defaults. Anything else: a folder that must hold at least one ``*_SHRINK.json``."""
    if choice == "vllm":
        return None
    if choice == "auto":
        if os.environ.get(ENV):
            return os.environ[ENV]
        if gpu_name and (SHIPPED_DIR / f"{gpu_file_stem(gpu_name)}_SHRINK.json").is_file():
            return str(SHIPPED_DIR)
        return None
    folder = Path(choice)
    if not folder.is_dir() or not any(folder.glob("*_SHRINK.json")):
        raise UserError(f"vllm_lora_kernel_configs {choice!r} is not a folder of vLLM LoRA kernel tables "
                        "(*_SHRINK.json, *_EXPAND_TRUE.json): write one with benchmarks/tune_vllm_lora.py --out DIR, "
                        "or use 'auto' / 'vllm'")
    return str(folder.resolve())


def apply(choice: str, gpu_name: str | None) -> str | None:
    """Point vLLM at the resolved folder (before the engine starts); returns it (None: vLLM's defaults)."""
    folder = resolve(choice, gpu_name)
    if folder is None:
        if choice == "vllm":
            os.environ.pop(ENV, None)
        return None
    os.environ[ENV] = folder
    return folder

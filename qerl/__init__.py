"""qerl: RL post-training of LLMs on a 4-bit NVFP4 base with LoRA adapters and adaptive quantization noise.

The main entry points, importable from the package (loaded on first use, so that ``import qerl`` stays light in the
quantize env, which has no peft):

    from qerl import load_policy, attach_lora, load_adapter, quantize_
    model, tokenizer = load_policy("outputs/Qwen2.5-7B-Instruct-NVFP4", load="nvfp4", device="cuda")
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "load_policy": "qerl.loading",
    "attach_lora": "qerl.lora",
    "load_adapter": "qerl.lora",
    "quantize_": "qerl.modules",
    "NVFP4Linear": "qerl.modules",
    "QeRLConfig": "qerl.config",
    "QeRLTrainer": "qerl.trainer",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'qerl' has no attribute {name!r}")

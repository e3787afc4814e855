"""Diagnostic: a captured prefill (``qerl.rollout.static_decode._PrefillGraph``) replayed against its warm-up call on a
tiny NVFP4 + LoRA Qwen2 on CUDA, with left padding or without, under each SDPA backend: NaNs and differences in the
logits and in the keys / values of real (not padding) positions."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qerl.rollout.static_decode import _PrefillGraph  # noqa: E402
from tests.conftest import random_prompts  # noqa: E402
from tests.test_rollout_hf import _tiny_policy  # noqa: E402


def check(widths, backend, own_mask) -> str:
    model = _tiny_policy("cuda", torch.bfloat16).get_base_model()
    prompts = random_prompts(widths)
    width = 32
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts], device="cuda")
    mask = (torch.arange(width, device="cuda")[None] >= torch.tensor([width - len(p) for p in prompts],
                                                                     device="cuda")[:, None]).long()
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    ctx = sdpa_kernel(backend) if backend is not None else nullcontext()
    with torch.no_grad(), ctx:
        graph = _PrefillGraph(model, len(prompts), width, {"logits_to_keep": 1}, own_mask=own_mask)
        warm, layers = graph.run(ids, mask, pos)
        warm, warm_keys = warm.clone(), [k.clone() for k, _ in layers]
        replay, layers = graph.run(ids, mask, pos)
        real = mask.bool()[:, None, :, None]
        key_diff = max((k - w).abs().where(real, 0).max().item() for (k, _), w in zip(layers, warm_keys))
        pad_nan_warm = sum(torch.isnan(w).where(~real, False).sum().item() for w in warm_keys)
        pad_nan_replay = sum(torch.isnan(k).where(~real, False).sum().item() for k, _ in layers)
    return (f"widths {widths} sdpa {backend} own mask {own_mask}: warm logits nan {torch.isnan(warm).sum().item()}, replay logits nan "
            f"{torch.isnan(replay).sum().item()}, logits diff {(replay - warm).abs().max().item():.3g}, real keys diff "
            f"{key_diff:.3g}, pad-position NaNs in keys warm {pad_nan_warm} replay {pad_nan_replay}")


if __name__ == "__main__":
    for widths, own_mask in (((32, 32), False), ((6, 9), False), ((6, 9), True)):
        for backend in (None, SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION):
            try:
                print(check(widths, backend, own_mask), flush=True)
            except Exception as e:  # a backend that cannot take the mask
                print(f"widths {widths} sdpa {backend}: {type(e).__name__}: {str(e)[:200]}", flush=True)

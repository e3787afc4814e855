"""A decode step's fused QKV projection with what follows it before attention in the NVFP4 kernel's epilogue: the
bias, rotary embedding of q and k, and the new k and v written into the KV cache (what
``qerl.kernels.decode_attention.rope_and_cache`` does as a second kernel), optionally after an RMSNorm folded into
the projection (``qerl.kernels.fused_norm``).

The epilogue needs each output tile to be one head (its 128 rows: a thread holds rows d and d + 64, rotate-half's
pairs, in registers), and the whole tile in one CTA (no stream-K; splits of K summed by the last CTA). Where the
warp-specialized kernel cannot run it (no Hopper GPU, M above ``ROPE_MAX_M``, other head sizes, CPU) the same call
runs the projection and then ``rope_and_cache`` (or its torch reference on CPU).
"""

from __future__ import annotations

import torch

from qerl.kernels.fused_norm import NormStats, _project, nvfp4_matmul_normed
from qerl.kernels.nvfp4_gemm import CHUNK, KernelWeight, _as_2d

# Rows of X up to which the epilogue runs (one 8-row tile of X); above, the projection and ``rope_and_cache``.
# Measured per 7B layer on an H200 (benchmarks/epilogues.py --rope-search, run 17): 0.7 / 1.0 us saved at M = 1 / 8,
# 0.8 us lost at M = 16 (one-head tiles on split-K against the table's stream-K config).
ROPE_MAX_M = 8


def nvfp4_qkv_rope_cache(x: torch.Tensor, w: KernelWeight, bias: torch.Tensor | None, cos: torch.Tensor,
                         sin: torch.Tensor, positions: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         heads: int, norm: NormStats | None = None) -> torch.Tensor:
    """q [B, H, D] of one decode token per sequence from ``x`` [B, K] and the fused QKV weight ``w`` [(H + 2 KV) D,
    K]: ``bias`` [(H + 2 KV) D] (or None) added, q and k rotated at ``positions`` ([B] or [1], on the device) with
    the ``cos`` / ``sin`` tables [L, D], k and v written into ``k_cache`` / ``v_cache`` [B, KV, L, D] there.
    ``norm``: ``x`` is an RMSNorm's input times its weight and these its statistics (``fused_norm``; without
    statistics ``x`` is already normalized)."""
    x2 = _as_2d(x, w.k, "x")
    b = x2.shape[0]
    _, kv, _, d = k_cache.shape
    if w.n != (heads + 2 * kv) * d or k_cache.shape[0] != b:
        raise ValueError(f"nvfp4_qkv_rope_cache: a weight of {w.n} rows does not fit {heads} query heads and "
                         f"caches {tuple(k_cache.shape)} ([B = {b}, KV, L, D], rows (H + 2 KV) D)")
    cfg = _rope_config(x2, w, d)
    if cfg is not None:
        from qerl.kernels import nvfp4_gemm_ws as ws

        rope = ws.RopeEpilogue(bias, cos, sin, positions, k_cache, v_cache, heads)
        row_norm = None if norm is None or norm.sumsq is None else (norm.sumsq.float().contiguous(), norm.eps)
        return ws.ws_matmul(x2, w, cfg, row_norm=row_norm, rope=rope).view(b, heads, d)
    qkv = nvfp4_matmul_normed(x2, w, norm) if norm is not None else _project(x2, w)
    if qkv.is_cuda:
        from qerl.kernels.decode_attention import rope_and_cache

        return rope_and_cache(qkv, bias, cos, sin, positions, k_cache, v_cache, heads)
    from qerl.kernels.decode_attention import rope_and_cache_reference

    return rope_and_cache_reference(qkv, bias, cos, sin, positions, k_cache, v_cache, heads)


def _rope_config(x2: torch.Tensor, w: KernelWeight, head_dim: int):
    """The warp-specialized forward's config for the epilogue, or None: one head per 8-row tile of X (BN = D, one
    consumer), chunks retired one at a time on 80 registers, K split so that the heads' tiles about fill two CTAs per
    SM (7 for Qwen2.5-7B's 36 heads), summed by the last CTA. The fastest of 18 one-head configs at M = 1 and 8 on an
    H200 (benchmarks/epilogues.py --rope-search, run 17: 10.1 us at M = 8 against 10.9 with chunks in flight on 128
    registers; 8 or more splits 11.4-15.3 us)."""
    m = x2.shape[0]
    if not x2.is_cuda or m == 0 or m > ROPE_MAX_M or head_dim != 128:
        return None
    from qerl.kernels import nvfp4_gemm as kern
    from qerl.kernels import nvfp4_gemm_ws as ws

    if ws.pick(x2, w.n, w.k, w.k_pad, w.words) is None:  # not a Hopper GPU, a layout or input TMA cannot read
        return None
    tiles = -(-m // 8) * (w.n // head_dim)
    split = max(1, min(w.k_pad // CHUNK // 4, 2 * kern._sms(x2.device) // tiles))
    if split > 1 and kern._split_counters(x2.device, tiles) is None:  # during a graph capture, before any launch
        return None
    return ws.WsConfig(8, head_dim, 4, split, 1, False, 80, split > 1)


__all__ = ["ROPE_MAX_M", "nvfp4_qkv_rope_cache"]

"""A LoRA adapter's shrink at decode batches in one Triton launch: ``u[s] = scale_s * x @ A_s^T`` for the (up to
three) slices of a fused projection group, fp32 [S, M, R], the layout the NVFP4 kernels' expand epilogue reads.

Why a kernel: written in torch, the shrink at M = 8 on Qwen2.5-7B's shapes became one torch.compile reduction per
group whose programs each reduce one output element, so every row of x re-reads A (about 0.44 ms a step over the
28 layers), plus pointwise kernels that scale u and lay it out per slice (benchmarks/RESULTS.md, run 45). Here a
program reads one K-range of A once for up to 16 rows of x and keeps the [rows, R] partial in registers; the
K-ranges are split so that about ``TARGET_PROGRAMS`` programs stream A at once, and the program that finishes a
tile's splits last sums their partials in split order (deterministic), scales them and stores u (the tile
counters of ``qerl.kernels.nvfp4_gemm``, which stay zero between launches and so between CUDA-graph replays).

A is read in its own dtype (peft keeps trained adapters in fp32) and every product is accumulated in fp32, so u
is what the fp32 torch formulation gives, up to summation order.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from qerl.kernels.nvfp4_gemm import _even_split, _interpreting, _last_split, _split_counters, _sum_splits

MAX_SLICES = 3  # q / k / v: the largest group the decode step fuses
TARGET_PROGRAMS = 128  # enough programs to stream A at bandwidth on an H100 / H200 (132 SMs)
_PRODUCT_TILE = 8192  # BM * BR * BK: the fp32 [rows, ranks, k] products one step holds in registers


@triton.jit
def _shrink_kernel(x_ptr, a0_ptr, a1_ptr, a2_ptr, scale_ptr, ws_ptr, u_ptr, cnt_ptr, M, K, R, stride_xm, stride_a,
                   stride_split, k_per_split, SPLIT: tl.constexpr, BM: tl.constexpr, BR: tl.constexpr,
                   BK: tl.constexpr):
    tile = tl.program_id(0)  # (slice, block of rows)
    split = tl.program_id(1)
    m_blocks = tl.cdiv(M, BM)
    s = tile // m_blocks
    rows = (tile % m_blocks) * BM + tl.arange(0, BM)
    ranks = tl.arange(0, BR)
    a_ptr = a0_ptr
    if s == 1:
        a_ptr = a1_ptr
    if s == 2:
        a_ptr = a2_ptr
    row_ok = rows < M
    rank_ok = ranks < R
    acc = tl.zeros((BM, BR), dtype=tl.float32)
    k0 = split * k_per_split
    for kk in range(0, k_per_split, BK):
        ks = k0 + kk + tl.arange(0, BK)
        k_ok = ks < K
        x = tl.load(x_ptr + rows[:, None].to(tl.int64) * stride_xm + ks[None, :],
                    mask=row_ok[:, None] & k_ok[None, :], other=0.0).to(tl.float32)
        a = tl.load(a_ptr + ranks[:, None].to(tl.int64) * stride_a + ks[None, :],
                    mask=rank_ok[:, None] & k_ok[None, :], other=0.0).to(tl.float32)
        acc += tl.sum(x[:, None, :] * a[None, :, :], axis=2)
    scale = tl.load(scale_ptr + s)
    offs = s * M * R + rows[:, None] * R + ranks[None, :]
    mask = row_ok[:, None] & rank_ok[None, :]
    if SPLIT == 1:
        tl.store(u_ptr + offs, acc * scale, mask=mask)
    else:
        tl.store(ws_ptr + split * stride_split + offs, acc, mask=mask)
        if _last_split(cnt_ptr, tile, SPLIT):
            total = _sum_splits(ws_ptr + offs, stride_split, mask, SPLIT, acc)
            tl.store(u_ptr + offs, total * scale, mask=mask)


def lora_shrink(x: torch.Tensor, a: Sequence[torch.Tensor], scales: torch.Tensor,
                split: int | None = None) -> torch.Tensor:
    """``u`` fp32 [S, M, R] with ``u[s] = scales[s] * x @ a[s]^T``: ``x`` [M, K] (any float dtype, unit last stride),
    ``a`` 1..3 contiguous [R, K] tensors of one dtype, ``scales`` fp32 [S] on x's device. ``split``: how many
    K-ranges per tile (default: about ``TARGET_PROGRAMS`` programs in all)."""
    if x.dim() != 2 or x.stride(-1) != 1:
        raise ValueError(f"x must be 2-D with a unit last stride, got shape {tuple(x.shape)} strides {x.stride()}")
    m, k = x.shape
    if not 1 <= len(a) <= MAX_SLICES:
        raise ValueError(f"{len(a)} adapter slices: the kernel takes 1 to {MAX_SLICES}")
    r = a[0].shape[0]
    for t in a:
        if t.shape != (r, k) or not t.is_contiguous() or t.dtype != a[0].dtype or t.device != x.device:
            raise ValueError(f"every A must be a contiguous [{r}, {k}] tensor of one dtype on {x.device}, "
                             f"got {tuple(t.shape)} {t.dtype} on {t.device}")
    if scales.shape != (len(a),) or scales.dtype != torch.float32 or scales.device != x.device:
        raise ValueError(f"scales must be fp32 [{len(a)}] on {x.device}")
    u = torch.empty((len(a), m, r), dtype=torch.float32, device=x.device)
    if m == 0:
        return u
    bm = min(16, triton.next_power_of_2(m))
    br = max(8, triton.next_power_of_2(r))
    bk = max(16, min(128, _PRODUCT_TILE // (bm * br)))
    tiles = len(a) * triton.cdiv(m, bm)
    steps = triton.cdiv(k, bk)
    split = _even_split(steps, max(1, TARGET_PROGRAMS // tiles)) if split is None else max(1, min(split, steps))
    counters = _split_counters(x.device, tiles) if split > 1 else None
    if split > 1 and counters is None:  # during a capture that would have to allocate the counters
        split = 1
    ws = torch.empty((split, len(a), m, r), dtype=torch.float32, device=x.device) if split > 1 else u
    a0 = a[0]
    a1 = a[1] if len(a) > 1 else a0
    a2 = a[2] if len(a) > 2 else a0
    _shrink_kernel[(tiles, split)](
        x, a0, a1, a2, scales, ws, u, u if counters is None else counters, m, k, r, x.stride(0), k, len(a) * m * r,
        triton.cdiv(steps, split) * bk, SPLIT=split, BM=bm, BR=br, BK=bk,
        num_warps=1 if _interpreting() else (4 if bm * br * bk <= _PRODUCT_TILE else 8))
    return u


__all__ = ["MAX_SLICES", "lora_shrink"]

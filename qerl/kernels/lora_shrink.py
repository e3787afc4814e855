"""A LoRA adapter's shrink at decode batches in one Triton launch: ``u[s] = scale_s * x @ A_s^T`` for the (up to
three) slices of a fused projection group, fp32 [S, M, R], the layout the NVFP4 kernels' expand epilogue reads.

Why a kernel: written in torch, the shrink at M = 8 on Qwen2.5-7B's shapes became one torch.compile reduction per
group whose programs each reduce one output element, so every row of x re-reads A (about 0.44 ms a step over the
28 layers), plus pointwise kernels that scale u and lay it out per slice (benchmarks/RESULTS.md, run 45). Here a
program reads a K-range of A once for a block of rows of x (``tl.dot`` tiles, the loads pipelined over the range's
steps); the K-ranges are split so that about ``TARGET_PROGRAMS`` programs stream A at once (L2 serves the blocks
after the first), and the program that
finishes a tile's splits last sums their scaled partials in split order (deterministic) and stores u, through the
tile counters of ``qerl.kernels.nvfp4_gemm``, which stay zero between launches and so between CUDA-graph replays
(``SPLIT_SUMS`` for the alternative). The decode step runs it from 17 rows on: at 8 rows torch.compile's
multiply-sum stays faster (benchmarks/RESULTS.md, run 46).

A is read in its own dtype. Where it is fp32 (peft keeps trained adapters in fp32) the products run on the tensor
cores as three tf32 products each ("tf32x3", about fp32's precision); where A has x's 16-bit dtype (a copy of it in
the model's dtype, as vLLM's engine holds an adapter) as one product of the 16-bit operands, whose products are exact
in fp32. Either way they accumulate in fp32, so u is what the fp32 torch formulation gives on the same A up to
rounding of order 1e-6.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from qerl.kernels.nvfp4_gemm import _interpreting, _last_split, _split_counters

MAX_SLICES = 3  # q / k / v: the largest group the decode step fuses
# Programs per launch by how the splits meet (an H100 / H200 has 132 SMs). The last program's sum has shorter tails
# with small blocks of rows, which take more programs to cover K as finely (benchmarks/RESULTS.md, run 47).
TARGET_PROGRAMS = {"last": 256, "atomic": 128}
MIN_STEPS = 2  # K steps per program at least: the loop's loads pipeline (``num_stages``) over them
MAX_SPLITS = 32  # K-splits per tile at most with reduce="last": its last program reads every partial


BLOCK_MS = (16, 32, 64)  # rows of x per program: tl.dot's smallest tile is 16 rows


def default_block_m(m: int, reduce: str = "last") -> int:
    """Rows of x per program for ``m`` rows: 16 where the last program sums a tile's splits (it reads every split's
    partial of the tile: a [16, R] block each keeps that tail short), else all of them in one block up to 64 (each
    block re-reads A). All 28 layers' shrinks of a 7B step, rank 32, at M = 24 / 64 / 128: the last program's sum
    1001 / 953 / 982 us on blocks of up to 64 rows, 724 / 776 / 914 on blocks of 16 (256 programs); atomic adds 754 /
    692 / 770 on blocks of up to 64 rows, 666 / 776 / 1059 on blocks of 16 (benchmarks/RESULTS.md, run 47)."""
    if reduce == "last":
        return 16
    return 16 if m <= 16 else (32 if m <= 32 else 64)


# How a tile's K-splits meet in u (the kernel's REDUCE): the only split stores it; the program that finishes a tile
# last sums the partials in split order (deterministic); or atomic adds into a zeroed u (as vLLM's own split-K
# shrink; the summation order varies between launches).
REDUCE_MODES = {"store": 0, "atomic": 1, "last": 2}
# The callers' choice of ``reduce`` among them ("store" follows from a single split): "last" (the default) or
# "atomic". A 7B step's shrinks at M = 64 alone: 776 against 692 us; 7B rollouts at batch 64 with a rank-32 adapter:
# 0.98x the tokens a second of atomic adds (benchmarks/RESULTS.md, run 47).
SPLIT_SUMS = ("last", "atomic")
# tl.dot's precision on the fp32 operands: three tf32 products per step ("tf32x3") are about as exact as fp32 FMAs
# ("ieee") and run on the tensor cores; the products are a sliver of the kernel's time either way. Operands of one
# 16-bit dtype (x and A both bf16 or both fp16) skip the cast to fp32 and multiply as they are.
PRECISIONS = ("tf32x3", "ieee", "tf32")
NATIVE_DTYPES = (torch.bfloat16, torch.float16)


def multiplies_natively(x_dtype: torch.dtype, a_dtype: torch.dtype) -> bool:
    """Whether ``lora_shrink`` multiplies x and A in their own dtype (one 16-bit dtype) rather than as fp32."""
    return x_dtype == a_dtype and x_dtype in NATIVE_DTYPES


@triton.jit
def _lora_shrink_kernel(x_ptr, a0_ptr, a1_ptr, a2_ptr, scale_ptr, ws_ptr, u_ptr, cnt_ptr, M, K, R, stride_xm,
                        stride_a, stride_split, k_per_split, SPLIT: tl.constexpr, REDUCE: tl.constexpr,
                        PRECISION: tl.constexpr, CAST: tl.constexpr, BM: tl.constexpr, BR: tl.constexpr,
                        BK: tl.constexpr, STAGES: tl.constexpr):
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
    for kk in tl.range(0, k_per_split, BK, num_stages=STAGES):
        ks = k0 + kk + tl.arange(0, BK)
        k_ok = ks < K
        x = tl.load(x_ptr + rows[:, None].to(tl.int64) * stride_xm + ks[None, :],
                    mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        a = tl.load(a_ptr + ranks[:, None].to(tl.int64) * stride_a + ks[None, :],
                    mask=rank_ok[:, None] & k_ok[None, :], other=0.0)
        if CAST:
            acc = tl.dot(x.to(tl.float32), tl.trans(a.to(tl.float32)), acc, input_precision=PRECISION)
        else:  # one 16-bit dtype: its products are exact in the fp32 accumulator
            acc = tl.dot(x, tl.trans(a), acc)
    acc = acc * tl.load(scale_ptr + s)
    offs = s * M * R + rows[:, None] * R + ranks[None, :]
    mask = row_ok[:, None] & rank_ok[None, :]
    if REDUCE == 0:
        tl.store(u_ptr + offs, acc, mask=mask)
    elif REDUCE == 1:
        tl.atomic_add(u_ptr + offs, acc, mask=mask, sem="relaxed")
    else:
        tl.store(ws_ptr + split * stride_split + offs, acc, mask=mask)
        if _last_split(cnt_ptr, tile, SPLIT):
            total = tl.zeros_like(acc)
            for sp in tl.static_range(SPLIT):  # unrolled: the partials' loads issue together
                total += tl.load(ws_ptr + sp * stride_split + offs, mask=mask, other=0.0, cache_modifier=".cg")
            tl.store(u_ptr + offs, total, mask=mask)


def lora_shrink(x: torch.Tensor, a: Sequence[torch.Tensor], scales: torch.Tensor, programs: int | None = None,
                reduce: str = "last", precision: str = "tf32x3", block_m: int | None = None,
                max_splits: int | None = None) -> torch.Tensor:
    """``u`` fp32 [S, M, R] with ``u[s] = scales[s] * x @ a[s]^T``: ``x`` [M, K] (any float dtype, unit last stride),
    ``a`` 1..3 contiguous [R, K] tensors of one dtype, ``scales`` fp32 [S] on x's device. ``programs``: about how
    many programs share the work (default ``TARGET_PROGRAMS[reduce]``); ``reduce``: how their K-splits meet
    (``SPLIT_SUMS``); ``precision``: tl.dot's on fp32 operands (``PRECISIONS``; x and A of one 16-bit dtype multiply
    as they are, ``multiplies_natively``); ``block_m``: rows of x per
    program (16, 32 or 64; default ``default_block_m``); ``max_splits``: K-splits per tile at most with "last"
    (default ``MAX_SPLITS``)."""
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
    if reduce not in SPLIT_SUMS:
        raise ValueError(f"reduce {reduce!r}: use one of {SPLIT_SUMS}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: use one of {PRECISIONS}")
    if block_m not in (None, *BLOCK_MS):
        raise ValueError(f"block_m {block_m}: use one of {BLOCK_MS}")
    bm = block_m or default_block_m(m, reduce)
    br = max(16, triton.next_power_of_2(r))
    bk = 128 if bm * br <= 512 else 64
    tiles = len(a) * triton.cdiv(m, bm)
    steps = triton.cdiv(k, bk)
    per_program = max(MIN_STEPS, triton.cdiv(steps * tiles, programs or TARGET_PROGRAMS[reduce]))
    split = triton.cdiv(steps, per_program)
    split = min(split, max_splits or MAX_SPLITS) if reduce == "last" else split
    per_program = triton.cdiv(steps, split)
    counters = _split_counters(x.device, tiles) if split > 1 and reduce == "last" else None
    if split > 1 and reduce == "last" and counters is None:  # during a capture that would have to allocate them
        reduce = "atomic"
    mode = REDUCE_MODES[reduce] if split > 1 else REDUCE_MODES["store"]
    u = (torch.zeros if mode == REDUCE_MODES["atomic"] else torch.empty)((len(a), m, r), dtype=torch.float32,
                                                                         device=x.device)
    if m == 0:
        return u
    ws = torch.empty((split, len(a), m, r), dtype=torch.float32, device=x.device) if mode == REDUCE_MODES["last"] else u
    a0 = a[0]
    a1 = a[1] if len(a) > 1 else a0
    a2 = a[2] if len(a) > 2 else a0
    _lora_shrink_kernel[(tiles, split)](
        x, a0, a1, a2, scales, ws, u, u if counters is None else counters, m, k, r, x.stride(0), k, len(a) * m * r,
        per_program * bk, SPLIT=split, REDUCE=mode, PRECISION=precision,
        CAST=not multiplies_natively(x.dtype, a[0].dtype), BM=bm, BR=br, BK=bk,
        STAGES=1 if _interpreting() else 3, num_warps=4)
    return u


__all__ = ["BLOCK_MS", "MAX_SLICES", "NATIVE_DTYPES", "PRECISIONS", "REDUCE_MODES", "SPLIT_SUMS", "default_block_m",
           "lora_shrink", "multiplies_natively"]

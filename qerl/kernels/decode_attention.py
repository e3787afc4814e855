"""Decode attention over a static KV cache (one new query token per sequence, grouped-query heads), in Triton, and
the step before it: the fused QKV projection's bias and rotary embedding, with the new K / V written into the cache.

Why a kernel: ``F.scaled_dot_product_attention`` with a length mask and grouped-query heads can use only its cuDNN
or math backend (flash and memory-efficient attention reject the call), with the mask built and expanded by kernels
of its own; on an H200 at Qwen2.5-7B's heads that took 14.4 us per layer at batch 8 against 5.5 us here
(benchmarks/RESULTS.md, run 15). Here one program reads one KV head's cache once for all the query heads that share
it (their rows padded to a 16-row ``tl.dot`` tile), with an online softmax; for long caches the sequence is split
into slices (more programs when the batch is small) whose partial results a second small kernel merges. With one
slice per program the first kernel writes the output itself.

The valid length is read on the device (``lengths``), so a captured CUDA graph stays valid as the cache fills.

Layouts: ``q`` [B, H, D], ``k_cache`` / ``v_cache`` [B, KV, L, D] (the last dim contiguous), ``lengths`` int32 or
int64 [B] or [1] (positions ``0 .. length-1`` are attended to). Output [B, H, D] in ``q``'s dtype.

``rope_and_cache`` does in one kernel what otherwise takes a bias add, two rotary kernels and two cache scatters per
layer (five launches of a few microseconds each, on a few kilobytes): one program per (sequence, head) of the fused
QKV output adds the bias, rotates q and k (the rotate-half convention of Qwen2 / Llama) in fp32, and stores q to
its output and k, v into the caches at the position read on the device.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from qerl.kernels.pdl import grid_dependency, launch_options

_LOG2E = 1.4426950408889634


@triton.jit
def _decode_attn_part_kernel(q_ptr, k_ptr, v_ptr, len_ptr, start_ptr, out_ptr, part_acc_ptr, part_ml_ptr,
                             stride_qb, stride_qh, stride_kb, stride_kh, stride_kl, stride_vb, stride_vh, stride_vl,
                             stride_ob, stride_oh, len_stride, start_stride, group, chunk, qk_scale,
                             KV_HEADS: tl.constexpr, SPLITS: tl.constexpr, GROUP_PAD: tl.constexpr,
                             HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, HAS_START: tl.constexpr,
                             PDL: tl.constexpr = False):
    grid_dependency(PDL)
    bh = tl.program_id(0)  # (batch, kv head)
    split = tl.program_id(1)
    b = bh // KV_HEADS
    kvh = bh % KV_HEADS
    length = tl.load(len_ptr + b * len_stride).to(tl.int32)
    rows = tl.arange(0, GROUP_PAD)
    cols = tl.arange(0, HEAD_DIM)
    row_ok = rows < group
    heads = kvh * group + rows
    q = tl.load(q_ptr + b * stride_qb + heads[:, None] * stride_qh + cols[None, :], mask=row_ok[:, None], other=0.0)

    start = split * chunk
    stop = tl.minimum(start + chunk, length)
    if HAS_START:  # a left-padded prompt's pads: cache positions below the row's start are not attended to
        start = tl.maximum(start, tl.load(start_ptr + b * start_stride).to(tl.int32))
    m = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_sum = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    k_base = k_ptr + b * stride_kb + kvh * stride_kh
    v_base = v_ptr + b * stride_vb + kvh * stride_vh
    for n0 in range(start, stop, BLOCK_N):
        pos = n0 + tl.arange(0, BLOCK_N)
        ok = pos < stop
        k = tl.load(k_base + pos[:, None] * stride_kl + cols[None, :], mask=ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # [GROUP_PAD, BLOCK_N], in log2 units
        s = tl.where(ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_sum = l_sum * alpha + tl.sum(p, 1)
        v = tl.load(v_base + pos[:, None] * stride_vl + cols[None, :], mask=ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new

    if SPLITS == 1:
        out = acc / l_sum[:, None]
        tl.store(out_ptr + b * stride_ob + heads[:, None] * stride_oh + cols[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])
    else:
        # Partials in fp32: [B*KV, SPLITS, GROUP_PAD, D] and (max, sum) pairs [B*KV, SPLITS, 2, GROUP_PAD]. A slice
        # past the length (or before the start) leaves m = -inf and l = 0, which the merge weighs by zero.
        part = bh * SPLITS + split
        tl.store(part_acc_ptr + part * GROUP_PAD * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :], acc)
        tl.store(part_ml_ptr + part * 2 * GROUP_PAD + rows, m)
        tl.store(part_ml_ptr + part * 2 * GROUP_PAD + GROUP_PAD + rows, l_sum)


@triton.jit
def _decode_attn_merge_kernel(part_acc_ptr, part_ml_ptr, out_ptr, stride_ob, stride_oh, group,
                              KV_HEADS: tl.constexpr, SPLITS: tl.constexpr, GROUP_PAD: tl.constexpr,
                              HEAD_DIM: tl.constexpr, PDL: tl.constexpr = False):
    grid_dependency(PDL)
    bh = tl.program_id(0)
    r = tl.program_id(1)  # one query head of the group
    b = bh // KV_HEADS
    kvh = bh % KV_HEADS
    sp = tl.arange(0, SPLITS)
    cols = tl.arange(0, HEAD_DIM)
    ml = part_ml_ptr + (bh * SPLITS + sp) * 2 * GROUP_PAD + r
    m = tl.load(ml)
    l_sum = tl.load(ml + GROUP_PAD)
    m_all = tl.max(m, 0)  # finite: the slice holding the last position (the new token's) is never empty
    w = tl.exp2(m - m_all)
    acc = tl.load(part_acc_ptr + ((bh * SPLITS + sp[:, None]) * GROUP_PAD + r) * HEAD_DIM + cols[None, :])
    out = tl.sum(acc * w[:, None], 0) / tl.sum(l_sum * w, 0)
    tl.store(out_ptr + b * stride_ob + (kvh * group + r) * stride_oh + cols, out.to(out_ptr.dtype.element_ty))


@triton.jit
def _rope_and_cache_kernel(qkv_ptr, bias_ptr, cos_ptr, sin_ptr, pos_ptr, slot_ptr, q_ptr, k_ptr, v_ptr,
                           stride_xb, stride_qb, stride_qh, stride_kb, stride_kh, stride_kl, stride_vb, stride_vh,
                           stride_vl, stride_cos, pos_stride, slot_stride,
                           HEADS: tl.constexpr, KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, HAS_BIAS: tl.constexpr):
    b = tl.program_id(0)
    head = tl.program_id(1)  # q heads, then k heads, then v heads, as in the fused projection's output
    pos = tl.load(pos_ptr + b * pos_stride)
    slot = tl.load(slot_ptr + b * slot_stride)  # the cache position written (the rotary position unless given)
    d = tl.arange(0, HEAD_DIM)
    half: tl.constexpr = HEAD_DIM // 2
    partner = (d + half) % HEAD_DIM  # rotate-half: out[d] = x[d] cos - x[d + D/2] sin (d < D/2), + x[d - D/2] sin
    row = qkv_ptr + b * stride_xb + head * HEAD_DIM
    x = tl.load(row + d).to(tl.float32)
    x_p = tl.load(row + partner).to(tl.float32)
    if HAS_BIAS:
        x += tl.load(bias_ptr + head * HEAD_DIM + d).to(tl.float32)
        x_p += tl.load(bias_ptr + head * HEAD_DIM + partner).to(tl.float32)
    if head < HEADS + KV_HEADS:
        cos = tl.load(cos_ptr + pos * stride_cos + d).to(tl.float32)
        sin = tl.load(sin_ptr + pos * stride_cos + d).to(tl.float32)
        x = x * cos + tl.where(d < half, -x_p, x_p) * sin
    if head < HEADS:
        tl.store(q_ptr + b * stride_qb + head * stride_qh + d, x.to(q_ptr.dtype.element_ty))
    elif head < HEADS + KV_HEADS:
        kvh = head - HEADS
        tl.store(k_ptr + b * stride_kb + kvh * stride_kh + slot * stride_kl + d, x.to(k_ptr.dtype.element_ty))
    else:
        kvh = head - HEADS - KV_HEADS
        tl.store(v_ptr + b * stride_vb + kvh * stride_vh + slot * stride_vl + d, x.to(v_ptr.dtype.element_ty))


def rope_and_cache(qkv: torch.Tensor, bias: torch.Tensor | None, cos: torch.Tensor, sin: torch.Tensor,
                   positions: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, heads: int,
                   slots: torch.Tensor | None = None) -> torch.Tensor:
    """One decode token per sequence: ``qkv`` [B, (H + 2 KV) D] (the fused projection's output without its bias),
    ``bias`` [(H + 2 KV) D] or None, ``cos`` / ``sin`` [L, D] tables, ``positions`` [B] or [1] on the device. Adds the
    bias, rotates q and k, writes k and v into ``k_cache`` / ``v_cache`` [B, KV, L, D] at the position (at ``slots``
    [B] or [1] where given: left-padded prompts rotate by a row's own position but share the cache slot) and returns
    q [B, H, D] (in ``qkv``'s dtype)."""
    b, width = qkv.shape
    kb, kv, max_len, d = k_cache.shape
    if v_cache.shape != k_cache.shape or kb != b or width != (heads + 2 * kv) * d:
        raise ValueError(f"rope_and_cache: qkv {tuple(qkv.shape)} does not fit {heads} query heads and caches "
                         f"{tuple(k_cache.shape)} / {tuple(v_cache.shape)} ([B, KV, L, D], width (H + 2 KV) D)")
    if d & (d - 1) or cos.shape != (max_len, d) or sin.shape != cos.shape:
        raise ValueError(f"rope_and_cache: head dim {d} must be a power of two and the cos / sin tables [L, D] = "
                         f"[{max_len}, {d}]; got {tuple(cos.shape)} / {tuple(sin.shape)}")
    if positions.numel() not in (1, b) or (slots is not None and slots.numel() not in (1, b)):
        raise ValueError(f"rope_and_cache: positions and slots need 1 entry or one per sequence ({b})")
    if qkv.stride(-1) != 1 or cos.stride(-1) != 1 or sin.stride() != cos.stride() or k_cache.stride(-1) != 1 \
            or v_cache.stride(-1) != 1 or (bias is not None and not bias.is_contiguous()):
        raise ValueError("rope_and_cache: qkv, the tables and the caches need a contiguous last dim (the bias "
                         "contiguous, the cos and sin tables of one stride)")
    q = torch.empty((b, heads, d), device=qkv.device, dtype=qkv.dtype)
    slots = positions if slots is None else slots
    _rope_and_cache_kernel[(b, heads + 2 * kv)](
        qkv, qkv if bias is None else bias, cos, sin, positions, slots, q, k_cache, v_cache,
        qkv.stride(0), q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), cos.stride(0),
        0 if positions.numel() == 1 else positions.stride(0), 0 if slots.numel() == 1 else slots.stride(0),
        HEADS=heads, KV_HEADS=kv, HEAD_DIM=d, HAS_BIAS=bias is not None, num_warps=1)
    return q


def rope_and_cache_reference(qkv: torch.Tensor, bias: torch.Tensor | None, cos: torch.Tensor, sin: torch.Tensor,
                             positions: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                             heads: int, slots: torch.Tensor | None = None) -> torch.Tensor:
    """``rope_and_cache`` in fp32 torch (writes the caches the same way): the tests' reference and the CPU path."""
    b = qkv.shape[0]
    kv, d = k_cache.shape[1], k_cache.shape[3]
    x = qkv.float() + (0 if bias is None else bias.float())
    pos = positions.reshape(-1).expand(b)
    slot = pos if slots is None else slots.reshape(-1).expand(b)
    c, s = cos.float()[pos][:, None, :], sin.float()[pos][:, None, :]

    def rot(t):
        return t * c + torch.cat([-t[..., d // 2:], t[..., :d // 2]], -1) * s

    q, k, v = x.split([heads * d, kv * d, kv * d], -1)
    k = rot(k.view(b, kv, d))
    for i in range(b):
        k_cache[i, :, slot[i]] = k[i].to(k_cache.dtype)
        v_cache[i, :, slot[i]] = v.view(b, kv, d)[i].to(v_cache.dtype)
    return rot(q.view(b, heads, d)).to(qkv.dtype)


def decode_attention_splits(batch: int, kv_heads: int, max_len: int, min_slice: int = 256,
                            num_sms: int | None = None) -> int:
    """How many sequence slices per (sequence, KV head): enough programs for one per SM, a power of two, and slices
    of at least ``min_slice`` cache positions. Measured on an H200 with Qwen2.5-7B heads: with a 385-position cache
    one slice beat 2, 4 and 8 at batch 1, 8 and 64 (shorter slices do not pay for the merge kernel); with 2049
    positions 8 slices (256 positions each) were fastest at batch 1 (9.2 us against 31 for one slice) and 4-8 at
    batch 8."""
    if num_sms is None:
        num_sms = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1
    want = max(1, -(-num_sms // (batch * kv_heads)))
    most = max(1, max_len // min_slice)
    splits = 1
    while splits * 2 <= min(want, most):
        splits *= 2
    return splits


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lengths: torch.Tensor, *,
                     scale: float | None = None, splits: int | None = None, block_n: int = 64,
                     starts: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax attention of one query token per sequence over the first ``lengths[b]`` cache positions
    (see the module docstring for the layouts), from position ``starts[b]`` on where given ([B] or [1], on the
    device: a left-padded prompt's pad count, so that its pads are not attended to; each row's start must lie below
    its length). ``splits``: sequence slices per KV head (default: enough for the GPU); ``scale``: defaults to
    ``1/sqrt(D)``."""
    if q.dim() != 3 or k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(f"decode_attention wants q [B, H, D] and caches [B, KV, L, D] of one shape; got q "
                         f"{tuple(q.shape)}, k {tuple(k_cache.shape)}, v {tuple(v_cache.shape)}")
    b, h, d = q.shape
    kb, kv, max_len, kd = k_cache.shape
    if kb != b or kd != d or h % kv:
        raise ValueError(f"decode_attention: q {tuple(q.shape)} does not fit caches {tuple(k_cache.shape)} "
                         "(same batch and head dim; query heads a multiple of KV heads)")
    if d & (d - 1) or d < 16:
        raise ValueError(f"decode_attention: head dim {d} must be a power of two >= 16")
    if lengths.numel() not in (1, b):
        raise ValueError(f"decode_attention: lengths has {lengths.numel()} entries; give 1 or one per sequence ({b})")
    if starts is not None and starts.numel() not in (1, b):
        raise ValueError(f"decode_attention: starts has {starts.numel()} entries; give 1 or one per sequence ({b})")
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1:
        raise ValueError("decode_attention: q and the caches need a contiguous last dim")
    group = h // kv
    group_pad = max(16, triton.next_power_of_2(group))
    if splits is None:
        splits = decode_attention_splits(b, kv, max_len)
    if splits & (splits - 1):
        raise ValueError(f"decode_attention: splits={splits} must be a power of two")
    chunk = -(-max_len // splits)
    chunk = -(-chunk // block_n) * block_n  # whole blocks per slice
    # The o projection's X: rows past B in its storage let the GEMM read whole tiles (``nvfp4_gemm_ws.tma_rows``).
    from qerl.kernels.nvfp4_gemm_ws import padded_rows

    out = torch.empty((padded_rows(b), h, d), device=q.device, dtype=q.dtype)[:b]
    if splits > 1:
        part_acc = torch.empty((b * kv, splits, group_pad, d), device=q.device, dtype=torch.float32)
        part_ml = torch.empty((b * kv, splits, 2, group_pad), device=q.device, dtype=torch.float32)
    else:
        part_acc = part_ml = out  # unused
    qk_scale = (d ** -0.5 if scale is None else scale) * _LOG2E
    pdl = launch_options(q.device)  # (the QKV projection before, the o projection after: qerl.kernels.pdl)
    len_stride = 0 if lengths.numel() == 1 else lengths.stride(0)
    start_stride = 0 if starts is None or starts.numel() == 1 else starts.stride(0)
    _decode_attn_part_kernel[(b * kv, splits)](
        q, k_cache, v_cache, lengths, lengths if starts is None else starts, out, part_acc, part_ml,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), out.stride(0), out.stride(1), len_stride,
        start_stride, group, chunk, qk_scale,
        KV_HEADS=kv, SPLITS=splits, GROUP_PAD=group_pad, HEAD_DIM=d, BLOCK_N=block_n, HAS_START=starts is not None,
        num_warps=4, **pdl)
    if splits > 1:
        _decode_attn_merge_kernel[(b * kv, group)](
            part_acc, part_ml, out, out.stride(0), out.stride(1), group,
            KV_HEADS=kv, SPLITS=splits, GROUP_PAD=group_pad, HEAD_DIM=d, num_warps=4, **pdl)
    return out


def decode_attention_reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                               lengths: torch.Tensor, scale: float | None = None,
                               starts: torch.Tensor | None = None) -> torch.Tensor:
    """The same attention in fp32 torch (per sequence, its own start and length): the tests' reference and the
    CPU path."""
    b, h, d = q.shape
    kv = k_cache.shape[1]
    lens = lengths.reshape(-1).expand(b) if lengths.numel() == 1 else lengths.reshape(-1)
    firsts = torch.zeros(b, dtype=torch.long) if starts is None else starts.reshape(-1).expand(b)
    scale = 1 / math.sqrt(d) if scale is None else scale
    out = torch.empty(b, h, d, dtype=torch.float32, device=q.device)
    for i in range(b):
        lo, n = int(firsts[i]), int(lens[i])
        k = k_cache[i, :, lo:n].float().repeat_interleave(h // kv, 0)  # [H, n - lo, D]
        v = v_cache[i, :, lo:n].float().repeat_interleave(h // kv, 0)
        s = torch.einsum("hd,hnd->hn", q[i].float(), k) * scale
        out[i] = torch.einsum("hn,hnd->hd", s.softmax(-1), v)
    return out

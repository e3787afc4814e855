"""The NVFP4 matmul, the LoRA shrink and the decode step's attention kernels as torch custom ops, so compiled graphs
(torch.compile, vLLM's piecewise CUDA graphs) treat each launcher as one opaque call instead of tracing its Python
(launch-config lookup, workspace and counter buffers)."""

from __future__ import annotations

import torch

from qerl.kernels.nvfp4_gemm import KernelWeight, LoRAEpilogue, nvfp4_matmul


@torch.library.custom_op("qerl::nvfp4_linear", mutates_args=())
def nvfp4_linear(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, global_scale: torch.Tensor, n: int,
                 k: int, layout: str = "pairs") -> torch.Tensor:
    """``x @ W^T`` for a kernel-layout NVFP4 weight given by its tensors and code layout
    (``qerl.kernels.nvfp4_gemm``)."""
    return nvfp4_matmul(x, KernelWeight(codes, scales, global_scale, n, k, layout))


@nvfp4_linear.register_fake
def _(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, global_scale: torch.Tensor, n: int,
      k: int, layout: str = "pairs") -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], n), dtype=torch.bfloat16)


@torch.library.custom_op("qerl::nvfp4_lora_linear", mutates_args=())
def nvfp4_lora_linear(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, global_scale: torch.Tensor, n: int,
                      k: int, bias: torch.Tensor | None, lora_u: torch.Tensor, lora_b: list[torch.Tensor],
                      no_lora: torch.Tensor | None = None, layout: str = "pairs") -> torch.Tensor:
    """``x @ W^T + bias`` plus a LoRA adapter's expand ``u_s @ B_s^T`` per output slice, in one kernel launch where
    the tiles allow (``nvfp4_matmul`` with a ``LoRAEpilogue``): ``lora_u`` fp32 [slices, M, R], ``lora_b`` bf16
    [N_s, R] per slice. ``no_lora``: a one-element CPU bool tensor; when true no token has an adapter and ``lora_u``
    was not written (vLLM's shrink returns early then), so only ``x @ W^T + bias`` is computed. It is read when the
    op runs (inside a CUDA-graph capture: at capture time, as vLLM's own LoRA ops read it). ``layout``: the weight's
    code layout, as ``nvfp4_linear``'s."""
    skip = no_lora is not None and bool(no_lora.item())
    return nvfp4_matmul(x, KernelWeight(codes, scales, global_scale, n, k, layout), bias=bias,
                        lora=None if skip else LoRAEpilogue(lora_u, tuple(lora_b)))


@nvfp4_lora_linear.register_fake
def _(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, global_scale: torch.Tensor, n: int, k: int,
      bias: torch.Tensor | None, lora_u: torch.Tensor, lora_b: list[torch.Tensor],
      no_lora: torch.Tensor | None = None, layout: str = "pairs") -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], n), dtype=torch.bfloat16)


def lora_shrink_reference(x: torch.Tensor, a: list[torch.Tensor], scales: torch.Tensor) -> torch.Tensor:
    """``qerl.kernels.lora_shrink.lora_shrink`` in fp32 torch: [S, M, R] with ``u[s] = scales[s] * x @ a[s]^T``."""
    x = x.float()
    return torch.stack([(x @ t.float().T) * scales[s] for s, t in enumerate(a)])


@torch.library.custom_op("qerl::lora_shrink", mutates_args=())
def lora_shrink_op(x: torch.Tensor, a: list[torch.Tensor], scales: torch.Tensor, reduce: str = "last") -> torch.Tensor:
    """A LoRA adapter's scaled shrink for 1-3 output slices, fp32 [S, M, R] (``nvfp4_lora_linear``'s ``lora_u``): the
    kernel of ``qerl.kernels.lora_shrink`` on CUDA (``reduce``: how its K-splits meet, ``SPLIT_SUMS``), its torch
    reference elsewhere."""
    if x.is_cuda:
        from qerl.kernels.lora_shrink import lora_shrink

        return lora_shrink(x, a, scales, reduce=reduce)
    return lora_shrink_reference(x, a, scales)


@lora_shrink_op.register_fake
def _(x: torch.Tensor, a: list[torch.Tensor], scales: torch.Tensor, reduce: str = "last") -> torch.Tensor:
    return x.new_empty((len(a), x.shape[0], a[0].shape[0]), dtype=torch.float32)


@torch.library.custom_op("qerl::rope_and_cache", mutates_args=("k_cache", "v_cache"))
def rope_and_cache_op(qkv: torch.Tensor, bias: torch.Tensor | None, cos: torch.Tensor, sin: torch.Tensor,
                      positions: torch.Tensor, slots: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      heads: int) -> torch.Tensor:
    """``qerl.kernels.decode_attention.rope_and_cache`` (its torch reference off CUDA): q [B, H, D], k and v written
    into the caches at ``slots``."""
    from qerl.kernels import decode_attention as da

    fn = da.rope_and_cache if qkv.is_cuda else da.rope_and_cache_reference
    return fn(qkv, bias, cos, sin, positions, k_cache, v_cache, heads, slots=slots)


@rope_and_cache_op.register_fake
def _(qkv: torch.Tensor, bias: torch.Tensor | None, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
      slots: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, heads: int) -> torch.Tensor:
    return qkv.new_empty((qkv.shape[0], heads, k_cache.shape[-1]))


@torch.library.custom_op("qerl::decode_attention", mutates_args=())
def decode_attention_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lengths: torch.Tensor,
                        starts: torch.Tensor, scale: float) -> torch.Tensor:
    """``qerl.kernels.decode_attention.decode_attention`` over cache positions ``starts[b] .. lengths[b] - 1`` (its
    torch reference off CUDA): [B, H, D] in ``q``'s dtype."""
    from qerl.kernels import decode_attention as da

    if q.is_cuda:
        return da.decode_attention(q, k_cache, v_cache, lengths, scale=scale, starts=starts)
    return da.decode_attention_reference(q, k_cache, v_cache, lengths, scale, starts).to(q.dtype)


@decode_attention_op.register_fake
def _(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lengths: torch.Tensor, starts: torch.Tensor,
      scale: float) -> torch.Tensor:
    return torch.empty_like(q)

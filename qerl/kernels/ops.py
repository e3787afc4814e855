"""The NVFP4 matmul as torch custom ops, so compiled graphs (torch.compile, vLLM's piecewise CUDA graphs) treat the
launcher as one opaque call instead of tracing its Python (launch-config lookup, workspace and counter buffers)."""

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

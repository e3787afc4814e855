"""The NVFP4 matmul as a torch custom op, so compiled graphs (torch.compile, vLLM's piecewise CUDA graphs) treat the
launcher as one opaque call instead of tracing its Python (launch-config lookup, workspace and counter buffers)."""

from __future__ import annotations

import torch

from qerl.kernels.nvfp4_gemm import KernelWeight, nvfp4_matmul


@torch.library.custom_op("qerl::nvfp4_linear", mutates_args=())
def nvfp4_linear(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, global_scale: torch.Tensor, n: int,
                 k: int) -> torch.Tensor:
    """``x @ W^T`` for a kernel-layout NVFP4 weight given by its tensors (``qerl.kernels.nvfp4_gemm``)."""
    return nvfp4_matmul(x, KernelWeight(codes, scales, global_scale, n, k))


@nvfp4_linear.register_fake
def _(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, global_scale: torch.Tensor, n: int,
      k: int) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], n), dtype=torch.bfloat16)

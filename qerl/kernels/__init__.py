"""Fast NVFP4 x BF16 kernels (Triton; Gluon kernels for Hopper). See ``nvfp4_gemm`` for the layout and the kernels,
``nvfp4_gemm_ws`` for the warp-specialized forward and input-gradient kernels, ``decode_attention`` for the decode
step around attention (bias + rotary + KV-cache write, grouped-query attention over a static cache) that
benchmarks/decode_nvfp4.py runs; ``fused_norm`` (RMSNorm folded into the projections around it) and ``fused_qkv``
(the QKV projection with bias + rotary + KV-cache write in its epilogue) for that decode step on NVFP4 weights;
``pdl`` (programmatic dependent launch of that step's kernels, off by default)."""

from qerl.kernels.nvfp4_gemm import (
    BwdConfig,
    FwdConfig,
    KernelWeight,
    NVFP4MatmulFn,
    codec_from_kernel_weight,
    interleave_gate_up,
    nvfp4_matmul,
    nvfp4_matmul_grad_input,
    nvfp4_matmul_swiglu,
    prepare_weight,
    reserve_split_counters,
    triton_available,
    with_layout,
)

__all__ = [
    "BwdConfig",
    "FwdConfig",
    "KernelWeight",
    "NVFP4MatmulFn",
    "codec_from_kernel_weight",
    "interleave_gate_up",
    "nvfp4_matmul",
    "nvfp4_matmul_grad_input",
    "nvfp4_matmul_swiglu",
    "prepare_weight",
    "reserve_split_counters",
    "triton_available",
    "with_layout",
]

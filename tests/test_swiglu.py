"""A gate and an up projection as one weight of interleaved rows (``interleave_gate_up``), and SiLU(gate) * up read
from its output (``swiglu_interleaved``), on CPU; the kernel epilogue that applies it is checked on the GPU
(tests/test_kernels_ws_gpu.py)."""

from __future__ import annotations

import pytest
import torch

from qerl.kernels.nvfp4_gemm import (
    GLU_BLOCK,
    KernelWeight,
    interleave_gate_up,
    nvfp4_matmul_swiglu,
    swiglu_interleaved,
)


def test_interleaved_rows_alternate_blocks_of_gate_and_up():
    gate = torch.arange(24 * 3).reshape(24, 3)
    up = -gate
    both = interleave_gate_up(gate, up)
    assert both.shape == (48, 3)
    for b in range(24 // GLU_BLOCK):
        assert torch.equal(both[16 * b:16 * b + 8], gate[8 * b:8 * b + 8])
        assert torch.equal(both[16 * b + 8:16 * b + 16], up[8 * b:8 * b + 8])


def test_swiglu_of_the_interleaved_product_is_the_mlp_activation():
    torch.manual_seed(0)
    gate, up, x = torch.randn(40, 24), torch.randn(40, 24), torch.randn(3, 5, 24)
    y = x @ interleave_gate_up(gate, up).T
    want = torch.nn.functional.silu(x @ gate.T) * (x @ up.T)
    assert torch.allclose(swiglu_interleaved(y), want, atol=1e-5, rtol=1e-5)
    # Per-row codec tensors interleave the same way: the rows of packed codes and of scales follow their weight's.
    packed = torch.randint(0, 256, (80, 12), dtype=torch.uint8)
    assert torch.equal(interleave_gate_up(packed[:40], packed[40:])[8:16], packed[40:48])


def test_rejects_rows_that_do_not_pair():
    with pytest.raises(ValueError, match="multiple of 8"):
        interleave_gate_up(torch.zeros(12, 4), torch.zeros(12, 4))
    with pytest.raises(ValueError, match="same shape"):
        interleave_gate_up(torch.zeros(16, 4), torch.zeros(16, 5))
    # A weight whose rows cannot hold whole gate / up blocks: one error naming the rule, before any kernel runs.
    w = KernelWeight(torch.zeros(40, 64, dtype=torch.uint8), torch.zeros(1, 320, dtype=torch.uint8), torch.ones(1),
                     40, 128)
    with pytest.raises(ValueError, match="multiple of 16 rows"):
        nvfp4_matmul_swiglu(torch.zeros(2, 128, dtype=torch.bfloat16), w)

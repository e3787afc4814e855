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
    swiglu_triton,
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


_SWIGLU_SCRIPT = r"""
import json, os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from qerl.kernels.nvfp4_gemm import swiglu_torch, swiglu_triton
from qerl.kernels.nvfp4_gemm_ws import padded_rows

gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
out = []
for shape in ((5, 48), (2, 3, 32), (1, 2080), (0, 16)):
    y = (torch.randn(*shape, generator=gen) * 3).to(torch.bfloat16)
    got, want = swiglu_triton(y), swiglu_torch(y)
    rows = got.reshape(-1, got.shape[-1]).shape[0]
    held = got.untyped_storage().nbytes() // 2 // max(1, got.shape[-1])
    out.append({"shape": list(got.shape), "want": list(want.shape),
                "max_ulps": float(((got.float() - want.float()).abs() / want.float().abs().clamp_min(2**-100)).max()
                                  * 2**7) if got.numel() else 0.0,
                "finite": bool(torch.isfinite(got).all()), "held": held, "padded": padded_rows(rows)})
# A column slice (rows not dense): the same values.
y = (torch.randn(4, 64, generator=gen)).to(torch.bfloat16)
out.append({"slice_equal": bool(torch.equal(swiglu_triton(y[:, :32]), swiglu_triton(y[:, :32].contiguous())))})
print(json.dumps(out))
"""


def test_swiglu_kernel_matches_torch_under_interpreter():
    """``swiglu_triton`` (the Triton kernel ``swiglu_interleaved`` takes for bf16 on CUDA) under Triton's CPU
    interpreter against the torch version: the same shape, within one bf16 rounding of every value, on 2D and 3D
    inputs, several column blocks, no rows, a column slice; the output's storage holds whole tiles of rows for the
    down projection (``padded_rows``)."""
    from tests.conftest import run_interpreted

    pytest.importorskip("triton")
    *cases, sliced = run_interpreted(_SWIGLU_SCRIPT)
    for c in cases:
        assert c["shape"] == c["want"] and c["finite"], c
        assert c["max_ulps"] <= 1.0, c
        assert c["held"] >= c["padded"] or c["shape"][0] == 0, c
    assert sliced["slice_equal"]


def test_swiglu_kernel_refuses_columns_that_are_not_whole_blocks():
    with pytest.raises(ValueError, match="whole blocks of 8 gate and 8 up"):
        swiglu_triton(torch.zeros(2, 24, dtype=torch.bfloat16))

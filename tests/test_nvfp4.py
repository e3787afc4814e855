"""The NVFP4 codec: code table, packing, rounding rules, scales, error bounds."""

from __future__ import annotations

import pytest
import torch

from qerl import nvfp4


def test_code_table_and_sign_bit():
    codes = torch.arange(16, dtype=torch.uint8)
    values = nvfp4.e2m1_decode(codes)
    assert values[:8].tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert values[8:].tolist() == [-0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
    # encoding the table's own values gives back the codes (the sign of -0.0 included)
    assert torch.equal(nvfp4.e2m1_codes(values), codes)


def test_pack_layout_low_nibble_first():
    codes = torch.tensor([[1, 2, 15, 0]], dtype=torch.uint8)
    packed = nvfp4.pack(codes)
    assert packed.tolist() == [[0x21, 0x0F]]  # element 0 low nibble, element 1 high nibble
    assert torch.equal(nvfp4.unpack(packed), codes)


def test_pack_unpack_roundtrip_random():
    codes = torch.randint(0, 16, (7, 64), dtype=torch.uint8)
    assert torch.equal(nvfp4.unpack(nvfp4.pack(codes)), codes)
    with pytest.raises(ValueError, match="even"):
        nvfp4.pack(codes[:, :3])


def test_rounding_ties_go_to_even_code():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.26, 5.01, 7.0, -0.1, 0.0])
    got = nvfp4.e2m1_decode(nvfp4.e2m1_codes(x)).tolist()
    assert got == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 0.5, 6.0, 6.0, -0.0, 0.0]
    assert nvfp4.e2m1_codes(torch.tensor([-0.1])).item() == 8  # tiny negatives keep their sign bit (-0)


def test_exactly_representable_weights_roundtrip_exactly():
    # Values on the E2M1 grid times one power-of-two step per group, with 6 present so the group amax maps to 6.
    torch.manual_seed(0)
    grid = torch.tensor(nvfp4.E2M1_VALUES)
    vals = grid[torch.randint(0, 8, (4, 32))] * torch.where(torch.rand(4, 32) < 0.5, -1.0, 1.0)
    vals[:, 0] = 6.0
    vals[:, 16] = 6.0
    w = vals * 2.0**-6
    q = nvfp4.quantize(w)
    assert torch.equal(q.dequantize(torch.float32), w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_quantization_error_bound(dtype):
    torch.manual_seed(1)
    w = (torch.randn(64, 256) * 0.02).to(dtype)
    q = nvfp4.quantize(w)
    deq = q.dequantize(torch.float32)
    step = (q.scale.float() / q.global_scale).repeat_interleave(16, dim=1)
    err = (deq - w.float()).abs()
    # The largest gap between neighbouring E2M1 values is 2 (4 -> 6), so rounding moves a value by at most one step;
    # E4M3 rounding of the scale adds at most 2^-4 relative to the group max (6 steps).
    assert (err <= step * (1.0 + 6 * 2**-4) + 1e-12).all()
    rel = (deq - w.float()).norm() / w.float().norm()
    assert 0.02 < rel < 0.15, rel  # 4-bit: visibly lossy, but a bounded fraction of the signal


def test_global_scale_and_fused_sharing():
    a = torch.randn(16, 32)
    b = torch.randn(16, 32) * 3
    gs = nvfp4.global_scale_for([a, b])
    expected = 448.0 * 6.0 / torch.maximum(a.abs().max(), b.abs().max())
    assert torch.allclose(gs, expected.reshape(1))
    # the shared scale is the smaller of the two individual ones (the larger amax wins)
    assert gs.item() == min(nvfp4.global_scale_for(a).item(), nvfp4.global_scale_for(b).item())
    qa = nvfp4.quantize(a, gs)
    assert torch.equal(qa.global_scale, gs)


def test_zero_groups_get_the_minimum_scale():
    w = torch.zeros(2, 32)
    w[0, :16] = torch.linspace(-1, 1, 16)
    q = nvfp4.quantize(w)
    assert q.scale[0, 1].float().item() == nvfp4.ZERO_GROUP_SCALE
    assert torch.equal(q.dequantize(torch.float32)[:, 16:], torch.zeros(2, 16))


def test_bad_shapes_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="multiple of 16.*BF16"):
        nvfp4.quantize(torch.randn(8, 24))
    with pytest.raises(ValueError, match="2-D"):
        nvfp4.check_quantizable((8,))


def test_storage_cost_is_4_5_bits():
    assert abs(nvfp4.packed_bits_per_weight(4096, 4096) - 4.5) < 1e-5


@pytest.mark.gpu
def test_codec_agrees_on_cuda():
    torch.manual_seed(2)
    w = torch.randn(128, 512, dtype=torch.bfloat16)
    cpu = nvfp4.quantize(w)
    gpu = nvfp4.quantize(w.cuda())
    assert torch.equal(cpu.packed, gpu.packed.cpu())
    assert torch.equal(cpu.scale.view(torch.uint8), gpu.scale.view(torch.uint8).cpu())
    assert torch.equal(cpu.dequantize(), gpu.dequantize().cpu())

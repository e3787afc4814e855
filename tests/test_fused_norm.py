"""RMSNorm folded into the projections around it (``qerl.kernels.fused_norm``): on CPU the torch path against
RMSNorm-then-projection; on a Hopper GPU the kernel epilogues through the same functions, at Qwen2.5-7B decode shapes,
against the unfused calls and under a CUDA graph (the kernels' own checks are in tests/test_kernels_ws_gpu.py)."""

from __future__ import annotations

import pytest
import torch

from qerl import nvfp4
from qerl.kernels import interleave_gate_up, prepare_weight
from qerl.kernels.fused_norm import (
    NormStats,
    add_rms_norm,
    nvfp4_matmul_add_norm,
    nvfp4_matmul_normed,
    rms_norm_input,
)
from tests.conftest import capture_graph, hopper_gpu, same_bits_with_and_without_pdl


def _weight(n: int, k: int, device: str = "cpu", glu: bool = False, layout: str = "pairs"):
    q = nvfp4.quantize(torch.randn(n, k, device=device) * 0.05)
    ref = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    packed, scale = q.packed, q.scale
    if glu:
        packed = interleave_gate_up(packed[: n // 2], packed[n // 2:])
        scale = interleave_gate_up(scale[: n // 2], scale[n // 2:])
    return prepare_weight(packed, scale, q.global_scale, **({} if layout == "pairs" else {"layout": layout})), ref


def _rms_norm(h: torch.Tensor, g: torch.Tensor, eps: float) -> torch.Tensor:
    hf = h.float()
    return hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps) * g.float()


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


def test_a_layer_with_folded_norms_equals_norm_then_projection_on_cpu():
    """attention output -> o (+ residual) -> RMSNorm -> gate_up -> SiLU x up -> down (+ residual) -> RMSNorm -> qkv,
    both ways, in fp32 references: the folded path agrees to bf16 rounding."""
    torch.manual_seed(0)
    hidden, inter, eps = 96, 160, 1e-6
    o_w, o_ref = _weight(hidden, 64)
    gu_w, gu_ref = _weight(2 * inter, hidden, glu=True)
    down_w, down_ref = _weight(hidden, inter)
    qkv_w, qkv_ref = _weight(128, hidden)
    g2, g1 = (1 + 0.2 * torch.randn(hidden)).to(torch.bfloat16), (1 + 0.2 * torch.randn(hidden)).to(torch.bfloat16)
    att, hdn = torch.randn(3, 64).to(torch.bfloat16), (4 * torch.randn(3, hidden)).to(torch.bfloat16)

    h1 = hdn.float() + att.float() @ o_ref.T
    gu = _rms_norm(h1, g2, eps) @ gu_ref.T
    act = torch.nn.functional.silu(gu[:, :inter]) * gu[:, inter:]
    h2 = h1 + act @ down_ref.T
    want_qkv = _rms_norm(h2, g1, eps) @ qkv_ref.T

    # On CPU the projection that produces h hands on the normalized input (no kernel epilogue to defer it to).
    h, u, stats = nvfp4_matmul_add_norm(att, o_w, hdn, g2, eps)
    assert _rel(h, h1) < 1e-2 and isinstance(stats, NormStats) and stats.sumsq is None
    assert _rel(u, _rms_norm(h1, g2, eps)) < 1e-2
    act_f = nvfp4_matmul_normed(u, gu_w, stats, swiglu=True)
    assert act_f.shape == (3, inter) and _rel(act_f, act) < 2e-2
    h, u, stats = nvfp4_matmul_add_norm(act_f, down_w, h, g1, eps)
    assert _rel(h, h2) < 1e-2
    assert _rel(nvfp4_matmul_normed(u, qkv_w, stats), want_qkv) < 2e-2
    # The deferred form (the norm's input times its weight, with statistics) gives the same projection.
    u, stats = rms_norm_input(h, g1, eps)
    assert stats.sumsq.shape == (1, 3)
    assert _rel(nvfp4_matmul_normed(u, qkv_w, stats), want_qkv) < 2e-2


def test_add_rms_norm_rounds_as_the_model_does():
    torch.manual_seed(2)
    res, delta = torch.randn(4, 80).to(torch.bfloat16), torch.randn(4, 80).to(torch.bfloat16)
    w = (1 + 0.1 * torch.randn(80)).to(torch.bfloat16)
    h, x = add_rms_norm(res, delta, w, 1e-6)
    want_h = (res.float() + delta.float()).to(torch.bfloat16)
    assert torch.equal(h, want_h)
    hf = want_h.float()
    assert torch.equal(x, (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16) * w)


def test_statistics_are_partial_sums_the_consumer_adds_up():
    torch.manual_seed(1)
    h, g = torch.randn(4, 64).to(torch.bfloat16), torch.ones(64, dtype=torch.bfloat16)
    u, stats = rms_norm_input(h, g, 1e-5)
    assert torch.equal(u, h)
    # The same norm's statistics split into column blocks (as the kernels write them) give the same scale.
    parts = NormStats(torch.stack([c.float().pow(2).sum(-1) for c in h.chunk(4, dim=1)]), 1e-5)
    assert torch.allclose(parts.scale(64), stats.scale(64), rtol=1e-6)
    assert torch.allclose(stats.scale(64), torch.rsqrt(h.float().pow(2).mean(-1) + 1e-5), rtol=1e-6)


def test_bad_input_is_refused_with_the_fix_named():
    w, _ = _weight(64, 32)
    x = torch.randn(2, 32).to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"residual must be bf16 \[2, 64\]"):
        nvfp4_matmul_add_norm(x, w, torch.zeros(2, 32, dtype=torch.bfloat16), torch.ones(64), 1e-6)
    with pytest.raises(ValueError, match=r"RMSNorm weight must be \[64\]"):
        nvfp4_matmul_add_norm(x, w, torch.zeros(2, 64, dtype=torch.bfloat16), torch.ones(32), 1e-6)
    with pytest.raises(ValueError, match=r"stats.sumsq must be \[T, 2\]"):
        nvfp4_matmul_normed(x, w, NormStats(torch.ones(1, 3), 1e-6))
    with pytest.raises(ValueError, match="u last dim must be 32"):
        nvfp4_matmul_normed(torch.zeros(2, 31), w, NormStats(torch.ones(1, 2), 1e-6))


# ------------------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.skipif(not hopper_gpu(), reason="needs a Hopper GPU and Triton's Gluon")
@pytest.mark.parametrize("m", [1, 8, 16, 64])
def test_7b_decode_layer_runs_the_epilogues_and_matches_the_unfused_calls(m, monkeypatch):
    """Qwen2.5-7B shapes on the words layout at decode M: every call launches the warp-specialized kernel with its
    epilogue (counted; above NORM_EPILOGUE_MAX_M none, the norm in ``add_rms_norm``'s kernel), the results match the
    unfused projections + torch norms, and a CUDA graph of the layer replays to the same bits."""
    from qerl.kernels import nvfp4_gemm_ws as ws
    from qerl.kernels.fused_norm import NORM_EPILOGUE_MAX_M
    from qerl.kernels.nvfp4_gemm import nvfp4_matmul, swiglu_interleaved

    torch.manual_seed(m)
    hidden, inter, eps = 3584, 18944, 1e-6
    o_w, _ = _weight(hidden, hidden, "cuda", layout="words")
    gu_w, _ = _weight(2 * inter, hidden, "cuda", glu=True, layout="words")
    down_w, _ = _weight(hidden, inter, "cuda", layout="words")
    qkv_w, _ = _weight(4608, hidden, "cuda", layout="words")
    g2 = (1 + 0.2 * torch.randn(hidden, device="cuda")).to(torch.bfloat16)
    g1 = (1 + 0.2 * torch.randn(hidden, device="cuda")).to(torch.bfloat16)
    att = torch.randn(m, hidden, device="cuda").to(torch.bfloat16)
    hdn = (4 * torch.randn(m, hidden, device="cuda")).to(torch.bfloat16)

    def folded():
        h, u, stats = nvfp4_matmul_add_norm(att, o_w, hdn, g2, eps)
        act = nvfp4_matmul_normed(u, gu_w, stats, swiglu=True)
        h, u, stats = nvfp4_matmul_add_norm(act, down_w, h, g1, eps)
        return h, nvfp4_matmul_normed(u, qkv_w, stats)

    def norm(h, g):
        return _rms_norm(h, g, eps).to(torch.bfloat16)

    calls = []
    real = ws.ws_matmul
    monkeypatch.setattr(ws, "ws_matmul", lambda *a, **kw: calls.append(
        sorted(k for k in ("glu", "row_norm", "add_norm") if kw.get(k) not in (None, False))) or real(*a, **kw))
    h, qkv = folded()
    if m <= NORM_EPILOGUE_MAX_M:
        assert calls == [["add_norm"], ["glu", "row_norm"], ["add_norm"], ["row_norm"]]
    else:
        assert all("row_norm" not in c and "add_norm" not in c for c in calls)
    monkeypatch.setattr(ws, "ws_matmul", real)

    h1 = (hdn.float() + nvfp4_matmul(att, o_w).float()).to(torch.bfloat16)
    act = swiglu_interleaved(nvfp4_matmul(norm(h1, g2), gu_w))
    h2 = (h1.float() + nvfp4_matmul(act, down_w).float()).to(torch.bfloat16)
    want = nvfp4_matmul(norm(h2, g1), qkv_w)
    # Two roundings apart (the norm's input is rounded to bf16 after the weight, not after the scale) through
    # gate_up, SiLU x up and down: measured 0.6% on h.
    assert torch.isfinite(qkv).all()
    assert _rel(h, h2) < 1.2e-2
    assert _rel(qkv, want) < 2e-2

    graph, (g_h, g_qkv) = capture_graph(folded)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(g_h, h) and torch.equal(g_qkv, qkv)


@pytest.mark.gpu
@pytest.mark.skipif(not hopper_gpu(), reason="needs a Hopper GPU and Triton's Gluon")
@pytest.mark.parametrize("m", [1, 8, 16, 40, 64])
def test_decode_layers_under_pdl_give_the_bits_of_serial_launches(m):
    """Three 7B-shaped MLP blocks on the epilogues (gate_up with the norm's row scale and SiLU x up, down adding the
    residual and writing the next norm's input; past ``NORM_EPILOGUE_MAX_M`` rows the add + RMSNorm and SiLU x up
    kernels between the projections), each reading what the one before wrote, captured in a CUDA graph with
    programmatic dependent launch (the launches overlap on the GPU) and without: the same bits."""
    torch.manual_seed(m)
    hidden, inter, eps = 3584, 18944, 1e-6
    gu_w, _ = _weight(2 * inter, hidden, "cuda", glu=True, layout="words")
    down_w, _ = _weight(hidden, inter, "cuda", layout="words")
    g = (1 + 0.2 * torch.randn(hidden, device="cuda")).to(torch.bfloat16)
    hdn = (4 * torch.randn(m, hidden, device="cuda")).to(torch.bfloat16)

    def blocks():
        u, stats = rms_norm_input(hdn, g, eps)
        h = hdn
        for _ in range(3):
            act = nvfp4_matmul_normed(u, gu_w, stats, swiglu=True)
            h, u, stats = nvfp4_matmul_add_norm(act, down_w, h, g, eps)
        return h

    same_bits_with_and_without_pdl(blocks)


@pytest.mark.gpu
@pytest.mark.skipif(not hopper_gpu(), reason="needs a Hopper GPU and Triton's Gluon")
@pytest.mark.parametrize("m", [12, 24, 40, 100])
def test_outputs_read_as_the_next_x_hold_whole_tiles(m):
    """Run 28: what a decode step hands its next projection as X (``add_rms_norm``'s x, decode attention's output,
    SiLU x up from gate_up's epilogue) holds ``padded_rows(M)`` rows, so that projection's X descriptor declares whole
    tiles (``nvfp4_gemm_ws.tma_rows``); the values are those of the unpadded paths, and the next product on the
    padded X equals the product on a copy of X of its own."""
    from qerl.kernels import nvfp4_gemm_ws as ws
    from qerl.kernels.decode_attention import decode_attention, decode_attention_reference
    from qerl.kernels.nvfp4_gemm import nvfp4_matmul

    def holds(t: torch.Tensor) -> bool:
        return t.untyped_storage().nbytes() >= ws.padded_rows(m) * t[0].numel() * t.element_size()

    torch.manual_seed(m)
    hidden, inter = 1024, 2048
    res, delta = (torch.randn(m, hidden, device="cuda").to(torch.bfloat16) for _ in range(2))
    g = (1 + 0.1 * torch.randn(hidden, device="cuda")).to(torch.bfloat16)
    h, x = add_rms_norm(res, delta, g, 1e-6)
    h_cpu, x_cpu = add_rms_norm(res.cpu(), delta.cpu(), g.cpu(), 1e-6)
    assert holds(x) and torch.equal(h.cpu(), h_cpu) and _rel(x.cpu(), x_cpu) < 1e-2
    gu_w, _ = _weight(2 * inter, hidden, "cuda", glu=True, layout="words")
    cfg = ws.WsConfig(64, 64, 4, 1, 1, True, 128)
    act = ws.ws_matmul(x, gu_w, cfg, glu=True)
    assert holds(act) and ws.tma_rows(act, 64) == min(ws.padded_rows(m), -(-m // 64) * 64)
    down_w, _ = _weight(hidden, inter, "cuda", layout="words")
    assert torch.allclose(nvfp4_matmul(act, down_w).float(), nvfp4_matmul(act.clone(), down_w).float(), rtol=2**-7, atol=1e-6)
    q = torch.randn(m, 8, 64, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(m, 2, 96, 64, device="cuda").to(torch.bfloat16) for _ in range(2))
    lengths = torch.randint(1, 97, (m,), device="cuda", dtype=torch.int32)
    out = decode_attention(q, k, v, lengths)
    assert holds(out) and _rel(out, decode_attention_reference(q, k, v, lengths)) < 1e-2

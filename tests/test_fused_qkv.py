"""The QKV projection with bias + RoPE + KV-cache write (``qerl.kernels.fused_qkv``): on CPU its torch path against
the projection then ``rope_and_cache_reference``; on a Hopper GPU the kernel epilogue at Qwen2.5-7B decode shapes
against the projection then ``rope_and_cache``, and under a CUDA graph whose position advances on the device (the
kernel's own checks are in tests/test_kernels_ws_gpu.py)."""

from __future__ import annotations

import pytest
import torch

from qerl import nvfp4
from qerl.kernels import prepare_weight
from qerl.kernels.decode_attention import rope_and_cache_reference
from qerl.kernels.fused_norm import rms_norm_input
from qerl.kernels.fused_qkv import nvfp4_qkv_rope_cache
from tests.conftest import capture_graph, hopper_gpu


def _tables(length: int, d: int, device: str):
    ang = torch.arange(length, device=device).float()[:, None] / 1e4 ** (torch.arange(0, d, 2, device=device) / d)
    return (torch.cat([ang.cos(), ang.cos()], -1).to(torch.bfloat16),
            torch.cat([ang.sin(), ang.sin()], -1).to(torch.bfloat16))


def _case(b: int, heads: int, kv: int, d: int, k: int, length: int, device: str, layout: str = "pairs"):
    q = nvfp4.quantize(torch.randn((heads + 2 * kv) * d, k, device=device) * 0.05)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w = prepare_weight(q.packed, q.scale, q.global_scale, **({} if layout == "pairs" else {"layout": layout}))
    x = torch.randn(b, k, device=device).to(torch.bfloat16)
    bias = (torch.randn((heads + 2 * kv) * d, device=device) * 0.1).to(torch.bfloat16)
    kc = torch.randn(b, kv, length, d, device=device).to(torch.bfloat16)
    return x, w, ref_w, bias, kc, torch.randn_like(kc)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


def test_cpu_path_is_the_projection_then_rope_and_cache():
    torch.manual_seed(0)
    heads, kv, d, length = 4, 2, 32, 20
    x, w, ref_w, bias, kc, vc = _case(3, heads, kv, d, 96, length, "cpu")
    cos, sin = _tables(length, d, "cpu")
    pos = torch.tensor([4, 11, 19])
    want_k, want_v = kc.clone(), vc.clone()
    want = rope_and_cache_reference(x.float() @ ref_w.T, bias, cos, sin, pos, want_k, want_v, heads)
    q = nvfp4_qkv_rope_cache(x, w, bias, cos, sin, pos, kc, vc, heads)
    assert q.shape == (3, heads, d) and _rel(q, want) < 1e-2
    assert _rel(kc, want_k) < 1e-2 and _rel(vc, want_v) < 1e-2
    # With a folded RMSNorm: x is the norm's input times its weight.
    g = torch.full((96,), 0.5, dtype=torch.bfloat16)
    u, stats = rms_norm_input(x, g, 1e-6)
    xn = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * 0.5
    want = rope_and_cache_reference(xn @ ref_w.T, bias, cos, sin, pos, kc.clone(), vc.clone(), heads)
    assert _rel(nvfp4_qkv_rope_cache(u, w, bias, cos, sin, pos, kc, vc, heads, norm=stats), want) < 1e-2


def test_refuses_a_weight_that_does_not_fit_the_heads():
    x, w, _, bias, kc, vc = _case(2, 4, 2, 32, 64, 8, "cpu")
    cos, sin = _tables(8, 32, "cpu")
    with pytest.raises(ValueError, match="does not fit 5 query heads"):
        nvfp4_qkv_rope_cache(x, w, bias, cos, sin, torch.tensor([1]), kc, vc, 5)


@pytest.mark.gpu
@pytest.mark.skipif(not hopper_gpu(), reason="needs a Hopper GPU and Triton's Gluon")
@pytest.mark.parametrize("b", [1, 8, 16])
def test_7b_epilogue_matches_rope_and_cache_and_replays_in_a_graph(b, monkeypatch):
    """The epilogue up to ROPE_MAX_M rows (the projection and ``rope_and_cache`` above): the same q and cache
    writes, also from a graph replayed at a new device-side position."""
    from qerl.kernels import nvfp4_gemm_ws as ws
    from qerl.kernels.decode_attention import rope_and_cache
    from qerl.kernels.fused_qkv import ROPE_MAX_M
    from qerl.kernels.nvfp4_gemm import nvfp4_matmul

    torch.manual_seed(b)
    heads, kv, d, length = 28, 4, 128, 300
    x, w, _, bias, kc, vc = _case(b, heads, kv, d, 3584, length, "cuda", layout="words")
    cos, sin = _tables(length, d, "cuda")
    pos = torch.tensor([100], device="cuda")
    calls = []
    real = ws.ws_matmul
    monkeypatch.setattr(ws, "ws_matmul", lambda *a, **kw: calls.append(kw.get("rope") is not None) or real(*a, **kw))
    k1, v1 = kc.clone(), vc.clone()
    q = nvfp4_qkv_rope_cache(x, w, bias, cos, sin, pos, k1, v1, heads)
    assert calls == ([True] if b <= ROPE_MAX_M else [False])
    monkeypatch.setattr(ws, "ws_matmul", real)
    k2, v2 = kc.clone(), vc.clone()
    want = rope_and_cache(nvfp4_matmul(x, w), bias, cos, sin, pos, k2, v2, heads)
    assert torch.isfinite(q).all() and _rel(q, want) < 5e-3
    assert _rel(k1, k2) < 5e-3 and _rel(v1, v2) < 5e-3

    # A graph captured at one position writes where the device-side position points at each replay.
    graph, g_q = capture_graph(lambda: nvfp4_qkv_rope_cache(x, w, bias, cos, sin, pos, k1, v1, heads))
    pos.fill_(257)
    graph.replay()
    want = rope_and_cache(nvfp4_matmul(x, w), bias, cos, sin, pos, k2, v2, heads)
    torch.cuda.synchronize()
    assert _rel(g_q, want) < 5e-3 and _rel(k1[:, :, 257], k2[:, :, 257]) < 5e-3
    assert _rel(v1[:, :, 257], v2[:, :, 257]) < 5e-3

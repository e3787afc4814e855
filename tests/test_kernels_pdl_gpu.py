"""Programmatic dependent launch of the warp-specialized forward (``qerl.kernels.pdl``): a launch's CTAs
may start while the launch before it finishes, so every read of X and every write must wait for it. Chains of
products where each reads the output of the one before and writes over that one's input, replayed from a CUDA graph
(back to back on the GPU, where the launches overlap), give the bits of the same chain launched one after another.
The decode epilogues' chain (RMSNorm row scale, SiLU x up, residual + next norm) likewise: tests/test_fused_norm.py."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from qerl import nvfp4  # noqa: E402
from qerl.kernels import nvfp4_gemm as kern  # noqa: E402
from qerl.kernels import nvfp4_gemm_ws as ws  # noqa: E402
from qerl.kernels.pdl import pdl  # noqa: E402
from tests.conftest import same_bits_with_and_without_pdl  # noqa: E402

hopper = pytest.mark.skipif(not ws.available(), reason="needs a Hopper GPU and Triton's Gluon")

D = 3584  # square weights (7B's o projection), so that each product's output is the next one's input
LINKS = 8


def _weights(layout: str) -> list:
    out = []
    for _ in range(LINKS):
        q = nvfp4.quantize(torch.randn(D, D, device="cuda") / D**0.5)
        out.append(kern.prepare_weight(q.packed, q.scale, q.global_scale, layout=layout))
    return out


def _chain(x0: torch.Tensor, weights: list, cfg, a: torch.Tensor, b: torch.Tensor) -> None:
    """a <- x0, then a -> b -> a -> ...: product i reads what product i - 1 wrote and overwrites its input."""
    a.copy_(x0)
    for i, w in enumerate(weights):
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        ws.ws_matmul(src, w, cfg, out=dst)


@hopper
@pytest.mark.parametrize("cfg,m", [
    (ws.WsConfig(8, 128, 6, 7, 1, True, 128, True), 1),  # split-K summed by the last CTA (7B qkv's M = 1 entry)
    # split-K summed by a second kernel (both launched without PDL: ``_pdl_args``) between launches with it
    (ws.WsConfig(16, 128, 5, 5, 1, False, 80), 13),
    (ws.WsConfig(8, 64, 6, 1, 1, False, 64, stream_k=4), 8),  # stream-K, four CTAs per SM
    (ws.WsConfig(16, 64, 6, 1, 1, True, 96, stream_k=2), 16),  # stream-K, chunks in flight
    (ws.WsConfig(64, 64, 5, 1, 1, True, 128), 64),  # whole tiles, two CTAs per SM
    (ws.WsConfig(128, 64), 128),  # whole tiles stored by TMA
    (ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1), 200),  # stream-K, two consumers, tiles stored by TMA
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
@pytest.mark.parametrize("layout", ["words", "pairs"])
def test_chained_products_under_pdl_give_the_bits_of_serial_launches(cfg, m, layout):
    torch.manual_seed(m)
    weights = _weights(layout)
    x0 = torch.randn(m, D, device="cuda").to(torch.bfloat16)
    a = torch.empty(m, D, device="cuda", dtype=torch.bfloat16)
    b = torch.empty_like(a)
    with pdl(False):
        _chain(x0, weights, cfg, a, b)
        want = a.clone() if LINKS % 2 == 0 else b.clone()
        _chain(x0, weights, cfg, a, b)  # (and the tile counters any split needs exist before the capture)
    assert torch.isfinite(want).all() and want.abs().max() > 0
    with pdl(True):
        _chain(x0, weights, cfg, a, b)  # eager: launched from the host, mostly after the kernel before completed
        assert torch.equal(a if LINKS % 2 == 0 else b, want)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _chain(x0, weights, cfg, a, b)
    for _ in range(5):
        a.fill_(float("nan"))
        b.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(a if LINKS % 2 == 0 else b, want)


@hopper
@pytest.mark.parametrize("batch,splits", [(1, 4), (8, 1), (8, 2)])
def test_projection_attention_projection_under_pdl_give_the_bits_of_serial_launches(batch, splits):
    """The decode step's chain across attention: a projection writing q, the decode attention (its slices and their
    merge, launched with PDL too) reading it and the caches, the o projection reading its output."""
    from qerl.kernels.decode_attention import decode_attention

    torch.manual_seed(batch)
    heads, kv, hd, cache = 28, 4, 128, 300
    w_q, w_o = _weights("words")[:2]
    x = torch.randn(batch, D, device="cuda").to(torch.bfloat16)
    k = torch.randn(batch, kv, cache, hd, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(batch, kv, cache, hd, device="cuda", dtype=torch.bfloat16)
    lengths = torch.tensor([257], device="cuda")
    cfg = ws.WsConfig(8, 128, 6, 7, 1, True, 128, True)

    def step():
        q = ws.ws_matmul(x, w_q, cfg).view(batch, heads, hd)
        att = decode_attention(q, k, v, lengths, splits=splits)
        return ws.ws_matmul(att.reshape(batch, D), w_o, cfg)

    same_bits_with_and_without_pdl(step)

"""The warp-specialized kernels (Gluon, Hopper), forward and input gradient, against dequantize-then-matmul in fp32:
fresh random inputs each check, M, N and K that are not multiples of the tiles, split-K / split-N, outputs poisoned
with NaN before each run; the default dispatch through autograd, and launches from a thread that did not compile."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from qerl import nvfp4  # noqa: E402
from qerl.kernels import nvfp4_gemm_ws as ws  # noqa: E402
from qerl.kernels.nvfp4_gemm import prepare_weight  # noqa: E402

hopper = pytest.mark.skipif(not ws.available(), reason="needs a Hopper GPU and Triton's Gluon")


def _fp32_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def _case(m: int, n: int, k: int, layout: str = "pairs"):
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    w = prepare_weight(q.packed, q.scale, q.global_scale, **({} if layout == "pairs" else {"layout": layout}))
    return x, w, _fp32_matmul(x.float(), ref_w.T)


CONFIGS = [ws.WsConfig(64, 128, 4), ws.WsConfig(64, 64, 4), ws.WsConfig(128, 64, 4), ws.WsConfig(64, 128, 6),
           ws.WsConfig(64, 128, 3, split_k=4), ws.WsConfig(128, 64, 4, split_k=3),
           ws.WsConfig(64, 64, 4, in_flight=False, maxnreg=128), ws.WsConfig(64, 128, 4, 2, 2, False),
           ws.WsConfig(128, 256, 3, 1, 2, False), ws.WsConfig(64, 256, 4, 1, 2, False),
           # Chunks in flight on 128 registers (two CTAs per SM), as most M <= 512 entries of the tables.
           ws.WsConfig(64, 64, 5, 3, maxnreg=128), ws.WsConfig(128, 64, 3, 2, maxnreg=128),
           # Decode and occupancy tiles (8-32 columns of X, 64-80 registers), split partials summed in the kernel.
           ws.WsConfig(8, 128, 6, 1, 1, True, 128), ws.WsConfig(16, 64, 6, 4, 1, True, 80, True),
           ws.WsConfig(8, 64, 6, 8, 1, False, 64, True), ws.WsConfig(16, 256, 4, 3, 2, False, None, True),
           ws.WsConfig(32, 64, 4, 2, 1, True, 80), ws.WsConfig(64, 64, 3, 1, 1, False, 80),
           # Splits that do not divide the chunk count (runs one chunk apart), summed in the kernel or not; a split
           # larger than the count (clamped to it).
           ws.WsConfig(8, 64, 6, 7, 1, True, 80, True), ws.WsConfig(16, 128, 5, 5, 1, False, 80),
           ws.WsConfig(8, 64, 6, 40, 1, True, 80, True),
           # Stream-K: CTAs taking equal runs of (tile, chunk) steps across tiles, a split tile summed by the CTA
           # holding its first chunk.
           ws.WsConfig(128, 256, 3, 1, 2, False, stream_k=1), ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1),
           ws.WsConfig(64, 64, 3, 1, 1, False, 128, stream_k=2),
           # ... three or four CTAs per SM on the decode tiles' 80 / 64 registers.
           ws.WsConfig(16, 128, 5, 1, 1, False, 80, stream_k=3), ws.WsConfig(8, 64, 6, 1, 1, False, 64, stream_k=4),
           # ... with whole waves of tiles one per CTA and the leftover tiles split (here mostly all leftover).
           ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1, dp_waves=True),
           # ... on tiles of fewer rows of X than a slice of the split tiles' sum (the sum must stay inside the tile).
           ws.WsConfig(32, 64, 3, 1, 1, False, 128, stream_k=1),
           # ... with one consumer's chunks in flight (run 34), one or two CTAs per SM, pure or with whole waves.
           ws.WsConfig(64, 64, 5, 1, 1, True, 128, stream_k=2), ws.WsConfig(16, 64, 6, 1, 1, True, 96, stream_k=2),
           ws.WsConfig(128, 64, 4, 1, 1, True, None, stream_k=1),
           ws.WsConfig(8, 128, 6, 1, 1, True, 168, stream_k=1, dp_waves=True)]


@hopper
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("m,n,k", [(64, 256, 512), (100, 96, 1008), (1, 160, 2048), (300, 4608, 3584),
                                   (129, 352, 1424)])
def test_matches_fp32_reference(cfg, m, n, k):
    x, w, ref = _case(m, n, k)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = ws.ws_matmul(x, w, cfg, out=out)
    assert y.data_ptr() == out.data_ptr()
    assert torch.isfinite(y).all()
    assert float((y.float() - ref).norm() / ref.norm()) < 4e-3


TMA_STORE_CONFIGS = [ws.WsConfig(256, 128, 3, 1, 2, False), ws.WsConfig(128, 128, 4, 1, 2, False),
                     ws.WsConfig(128, 64, 4, 1, 1, True, 128), ws.WsConfig(128, 256, 3, 1, 2, False),
                     # Run 31: the stream-K kernel's whole tiles (``_sk_tma_store_tile``; pure stream-K puts two or
                     # more whole tiles and split ones on a CTA, so a tile's copies run under the next's chunks).
                     ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1),
                     ws.WsConfig(256, 128, 2, 1, 2, False, stream_k=1, dp_waves=True),
                     ws.WsConfig(128, 256, 3, 1, 2, False, stream_k=1, dp_waves=True),
                     # ... through the ring's stage of the tile's last chunk (``_sk_ring_store_tile``).
                     ws.WsConfig(256, 128, 3, 1, 2, False, stream_k=1),
                     ws.WsConfig(256, 128, 3, 1, 2, False, stream_k=1, dp_waves=True)]


@hopper
@pytest.mark.parametrize("cfg", TMA_STORE_CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("m,n,spare", [(1024, 4608, False), (1000, 352, False), (300, 4608, False), (129, 1056, False),
                                        (300, 4608, True), (1000, 352, True)])
def test_tma_store_gives_the_bits_of_the_register_store(cfg, m, n, spare, monkeypatch):
    """Run 30's tiles stored by TMA from shared memory (``_tma_store_tile``; shifted last tiles and those copied in
    small boxes keep the stores from registers): the same bits as the stores from registers (N = 352: the last box
    of 64 columns reaches past N, whose columns TMA must not write: the next row's; a last tile past M, whose rows
    there it must not write either: with ``spare`` X's storage holds NaN rows past M that the tile multiplies), the
    fp32 reference, every output written (NaN-poisoned before), with and without the RMSNorm row scale."""
    k = 1024
    y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    assert ws.sk_tma_store(cfg, y) if cfg.stream_k else ws.tma_store_tiles(cfg, 1, False, y)
    for row_norm in (False, True):
        if row_norm:
            x, w, norm, ref = _norm_case(m, n, k, layout="pairs")
        else:
            (x, w, ref), norm = _case(m, n, k), None
        if spare:
            x = _spare(x, 256)
        outs = []
        for tma in (True, False):
            monkeypatch.setattr(ws, "TMA_STORE", tma)
            y = ws.ws_matmul(x, w, cfg, out=torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16),
                             row_norm=norm)
            assert torch.isfinite(y).all()
            outs.append(y)
        assert torch.equal(outs[0], outs[1])
        assert float((outs[0].float() - ref).norm() / ref.norm()) < 4e-3


@hopper
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("m,n,k", [(100, 96, 1008), (1, 160, 2048), (300, 4608, 3584)])
def test_words_layout_gives_the_same_bits_as_pairs(cfg, m, n, k):
    # Same exact bf16 operand tiles in the same K order, same wgmmas: the two code layouts must agree bit for bit.
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    pairs = prepare_weight(q.packed, q.scale, q.global_scale)
    words = prepare_weight(q.packed, q.scale, q.global_scale, layout="words")
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = ws.ws_matmul(x, words, cfg, out=out)
    assert torch.isfinite(y).all()
    assert torch.equal(y, ws.ws_matmul(x, pairs, cfg))
    ref = _fp32_matmul(x.float(), ref_w.T)
    assert float((y.float() - ref).norm() / ref.norm()) < 4e-3


@hopper
@pytest.mark.parametrize("cfg", [ws.WsConfig(64, 64, 3, 1, 1, False, 80), ws.WsConfig(64, 128, 4, 3, 1, False, 128),
                                 ws.WsConfig(64, 64, 5, 3, 1, True, 128, True), ws.WsConfig(128, 128, 4, 3, 2, False),
                                 ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1),
                                 ws.WsConfig(64, 64, 3, 1, 1, False, 128, stream_k=2)], ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("m", [129, 200, 136])
@pytest.mark.parametrize("layout", ["pairs", "words"])
def test_last_tile_shift_matches_the_tile_past_m(cfg, m, layout, monkeypatch):
    """Run 27's last M tile ending at row M (``SHIFT_LAST_TILE``; it repeats rows of the tile before it, both store
    them): every output written (NaN-poisoned before), the fp32 reference, and the kernel whose last tile reads past M
    within a bf16 rounding (splits summed in the kernel and by the second kernel, stream-K's parts)."""
    x, w, ref = _case(m, 4608, 1424, layout)
    out = torch.full((m, 4608), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = ws.ws_matmul(x, w, cfg, out=out)
    assert torch.isfinite(y).all() and float((y.float() - ref).norm() / ref.norm()) < 4e-3
    monkeypatch.setattr(ws, "SHIFT_LAST_TILE", False)
    past = ws.ws_matmul(x, w, cfg)
    assert torch.allclose(y.float(), past.float(), rtol=2**-7, atol=1e-6)


@hopper
@pytest.mark.parametrize("cfg", [ws.WsBwdConfig(128, 4, 2, in_flight=True), ws.WsBwdConfig(256, 4, 1, consumers=2),
                                 ws.WsBwdConfig(128, 4, 8, 128), ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2),
                                 ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2, dp_waves=True)],
                         ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("m", [264, 520])
def test_input_gradient_last_tile_shift_matches_the_tile_past_m(cfg, m, monkeypatch):
    """The input gradient's last M tile ending at row M: every output written (NaN-poisoned before), the fp32
    reference, and the kernel whose last tile reads past M within a bf16 rounding."""
    q = nvfp4.quantize(torch.randn(1024, 1424, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w = prepare_weight(q.packed, q.scale, q.global_scale)
    dy = torch.randn(m, 1024, device="cuda").to(torch.bfloat16)
    out = torch.full((m, 1424), float("nan"), device="cuda", dtype=torch.bfloat16)
    dx = ws.ws_matmul_grad_input(dy, w, cfg, out=out)
    ref = _fp32_matmul(dy.float(), ref_w)
    assert torch.isfinite(dx).all() and float((dx.float() - ref).norm() / ref.norm()) < 4e-3
    monkeypatch.setattr(ws, "SHIFT_LAST_TILE", False)
    past = ws.ws_matmul_grad_input(dy, w, cfg)
    assert torch.allclose(dx.float(), past.float(), rtol=2**-7, atol=1e-6)


def _spare(x: torch.Tensor, bm: int) -> torch.Tensor:
    """``x`` copied into the first rows of a buffer of whole ``bm``-row tiles whose rows past M hold NaN."""
    buf = torch.full((-(-x.shape[0] // bm) * bm, x.shape[1]), float("nan"), device="cuda", dtype=torch.bfloat16)
    buf[: x.shape[0]].copy_(x)
    return buf[: x.shape[0]]


@hopper
@pytest.mark.parametrize("cfg", [ws.WsConfig(64, 64, 3, 1, 1, False, 80), ws.WsConfig(64, 128, 4, 3, 1, False, 128),
                                 ws.WsConfig(64, 64, 5, 3, 1, True, 128, True), ws.WsConfig(128, 128, 4, 3, 2, False),
                                 ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1), ws.WsConfig(8, 64, 6, 4, 1, True, 80),
                                 ws.WsConfig(16, 64, 6, 4, 1, True, 80, True), ws.WsConfig(128, 256, 3, 1, 2, False),
                                 ws.WsConfig(64, 64, 3, 1, 1, False, 128, stream_k=2)], ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("m", [3, 40, 129])
@pytest.mark.parametrize("layout", ["pairs", "words"])
def test_rows_past_m_in_the_storage_reach_no_output(cfg, m, layout):
    """X a row slice of a buffer of whole tiles whose rows past M hold NaN (``tma_rows`` declares them): every output
    written (NaN-poisoned before) and finite, the fp32 reference, and the same kernel on X of its own (the last tile
    past the descriptor's end, or shifted) within a bf16 rounding; also with the SiLU x up epilogue where the config
    allows it."""
    x, w, ref = _case(m, 4608, 1424, layout)
    spare = _spare(x, cfg.bm)
    assert ws.tma_rows(spare, cfg.bm) == -(-m // cfg.bm) * cfg.bm
    out = torch.full((m, 4608), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = ws.ws_matmul(spare, w, cfg, out=out)
    assert torch.isfinite(y).all() and float((y.float() - ref).norm() / ref.norm()) < 4e-3
    assert torch.allclose(y.float(), ws.ws_matmul(x, w, cfg).float(), rtol=2**-7, atol=1e-6)
    if ws.tile_epilogue(cfg, w):
        g = torch.full((m, 2304), float("nan"), device="cuda", dtype=torch.bfloat16)
        assert torch.isfinite(ws.ws_matmul(spare, w, cfg, out=g, glu=True)).all()


@hopper
@pytest.mark.parametrize("cfg", [ws.WsBwdConfig(128, 4, 2, in_flight=True), ws.WsBwdConfig(256, 4, 1, consumers=2),
                                 ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2), ws.WsBwdConfig(8, 6, 8, 64),
                                 ws.WsBwdConfig(16, 4, 3, 80, True), ws.WsBwdConfig(64, 4, 5, 128, in_flight=True),
                                 ws.WsBwdConfig(8, 6, 1, stream_k=2, consumers=2)], ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("m", [3, 40, 136])
@pytest.mark.parametrize("layout", ["pairs", "rows"])
def test_input_gradient_rows_past_m_in_the_storage_reach_no_output(cfg, m, layout):
    """The input gradient on dY a row slice of a NaN-filled buffer of whole tiles, as the forward's test above."""
    q = nvfp4.quantize(torch.randn(1024, 1424, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w = prepare_weight(q.packed, q.scale, q.global_scale, **({} if layout == "pairs" else {"layout": layout}))
    dy = torch.randn(m, 1024, device="cuda").to(torch.bfloat16)
    spare = _spare(dy, cfg.bm)
    assert ws.tma_rows(spare, cfg.bm) == -(-m // cfg.bm) * cfg.bm
    out = torch.full((m, 1424), float("nan"), device="cuda", dtype=torch.bfloat16)
    dx = ws.ws_matmul_grad_input(spare, w, cfg, out=out)
    ref = _fp32_matmul(dy.float(), ref_w)
    assert torch.isfinite(dx).all() and float((dx.float() - ref).norm() / ref.norm()) < 4e-3
    assert torch.allclose(dx.float(), ws.ws_matmul_grad_input(dy, w, cfg).float(), rtol=2**-7, atol=1e-6)


def _boxes_from_one_row_past(monkeypatch) -> None:
    """Small boxes wherever the last tile reaches past M at all (the dispatch takes them from 24 / 32 rows past,
    ``nvfp4_gemm_ws.sub_box_rows``): the kernels' paths for 1 to 31 rows past M under test."""
    monkeypatch.setattr(ws, "SUB_BOX_MIN_PAST", 1)
    monkeypatch.setattr(ws, "SUB_BOX_MIN_PAST_NARROW", 1)


@hopper
@pytest.mark.parametrize("cfg,m", [(ws.WsConfig(64, 64, 3, 1, 1, False, 80), 40), (ws.WsConfig(64, 64, 3, 1, 1, False, 80), 63),
                                   (ws.WsConfig(64, 64, 5, 3, 1, True, 128, True), 33),
                                   (ws.WsConfig(64, 128, 4, 3, 1, False, 128), 110),
                                   (ws.WsConfig(128, 64, 4, split_k=3), 66), (ws.WsConfig(128, 64, 3, 2, maxnreg=128), 90),
                                   (ws.WsConfig(128, 64, 3, 2, maxnreg=128), 127),
                                   (ws.WsConfig(128, 128, 4, 3, 2, False), 66), (ws.WsConfig(128, 128, 4, 1, 2, False), 200),
                                   (ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1), 66),
                                   (ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1), 200),
                                   (ws.WsConfig(256, 128, 3, 1, 2, False), 136), (ws.WsConfig(128, 256, 3, 1, 2, False), 66)],
                         ids=lambda c: "x".join(map(str, c)) if isinstance(c, tuple) else str(c))
@pytest.mark.parametrize("layout", ["pairs", "words"])
def test_last_tile_in_small_boxes_matches_whole_boxes(cfg, m, layout, monkeypatch):
    """The last tile copied in boxes of 32 rows (``_x_box``; boxes reaching past M re-read the last 32 rows below
    it, stored where they belong, ``_rows_held``): every output written (NaN-poisoned before) and finite, the fp32
    reference, and the kernel on whole boxes within a bf16 rounding (one tile per CTA, splits summed in the kernel
    and by the second kernel, stream-K, two consumers, an M below one tile, 1 to 31 rows past M, and a multi-tile
    M whose last tile is too full to shift); the SiLU x up epilogue where the config allows."""
    _boxes_from_one_row_past(monkeypatch)
    assert ws.sub_box_rows(m, cfg.bm, m, ws.shift_last_tile(m, cfg.bm, cfg.bn), cfg.bn) == ws.SUB_BOX_ROWS
    x, w, ref = _case(m, 4608, 1424, layout)
    out = torch.full((m, 4608), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = ws.ws_matmul(x, w, cfg, out=out)
    assert torch.isfinite(y).all() and float((y.float() - ref).norm() / ref.norm()) < 4e-3
    if ws.tile_epilogue(cfg, w):
        g = torch.full((m, 2304), float("nan"), device="cuda", dtype=torch.bfloat16)
        glu = ws.ws_matmul(x, w, cfg, out=g, glu=True)
        assert torch.isfinite(glu).all()
    monkeypatch.setattr(ws, "SUB_BOX_ROWS", 0)
    assert torch.allclose(y.float(), ws.ws_matmul(x, w, cfg).float(), rtol=2**-7, atol=1e-6)
    if ws.tile_epilogue(cfg, w):
        assert torch.allclose(glu.float(), ws.ws_matmul(x, w, cfg, glu=True).float(), rtol=2**-7, atol=1e-6)


@hopper
@pytest.mark.parametrize("cfg,m", [(ws.WsBwdConfig(128, 4, 2, in_flight=True), 66), (ws.WsBwdConfig(64, 4, 5, 128, in_flight=True), 40),
                                   (ws.WsBwdConfig(128, 4, 2, in_flight=True), 100), (ws.WsBwdConfig(64, 4, 5, 128, True), 63),
                                   (ws.WsBwdConfig(256, 4, 1, consumers=2), 136), (ws.WsBwdConfig(128, 4, 8, 128), 200),
                                   (ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2), 136),
                                   (ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2, dp_waves=True), 600),
                                   (ws.WsBwdConfig(128, 6, 3, consumers=2), 66), (ws.WsBwdConfig(64, 4, 3, 128, True), 33)],
                         ids=lambda c: "x".join(map(str, c)) if isinstance(c, tuple) else str(c))
@pytest.mark.parametrize("layout", ["pairs", "rows"])
def test_input_gradient_last_tile_in_small_boxes_matches_whole_boxes(cfg, m, layout, monkeypatch):
    """The input gradient's last tile in boxes of 32 rows of dY, as the forward's test above (split sums in the
    kernel and by the second kernel, stream-K, two consumers, 1 to 31 rows past M)."""
    _boxes_from_one_row_past(monkeypatch)
    assert ws.sub_box_rows(m, cfg.bm, m, ws.shift_last_tile(m, cfg.bm)) == ws.SUB_BOX_ROWS
    q = nvfp4.quantize(torch.randn(1024, 1424, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w = prepare_weight(q.packed, q.scale, q.global_scale, **({} if layout == "pairs" else {"layout": layout}))
    dy = torch.randn(m, 1024, device="cuda").to(torch.bfloat16)
    out = torch.full((m, 1424), float("nan"), device="cuda", dtype=torch.bfloat16)
    dx = ws.ws_matmul_grad_input(dy, w, cfg, out=out)
    ref = _fp32_matmul(dy.float(), ref_w)
    assert torch.isfinite(dx).all() and float((dx.float() - ref).norm() / ref.norm()) < 4e-3
    monkeypatch.setattr(ws, "SUB_BOX_ROWS", 0)
    assert torch.allclose(dx.float(), ws.ws_matmul_grad_input(dy, w, cfg).float(), rtol=2**-7, atol=1e-6)


@hopper
@pytest.mark.parametrize("cfg,m", [(ws.WsConfig(64, 64, 5, 1, 1, True, 128), 40), (ws.WsConfig(64, 128, 4, 3, 1, False, 128, True), 57),
                                   (ws.WsConfig(128, 128, 4, 1, 2, False), 100), (ws.WsConfig(256, 128, 3, 1, 2, False), 136),
                                   (ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1), 66)],
                         ids=lambda c: "x".join(map(str, c)) if isinstance(c, tuple) else str(c))
@pytest.mark.parametrize("epilogue", ["row_norm", "glu", "add_norm"])
def test_epilogues_on_boxes_reaching_past_m_match_whole_tiles(cfg, m, epilogue, monkeypatch):
    """The epilogues that read operands per row of X (the RMSNorm row scale, SiLU x up after it, the residual + the
    next norm's input and statistics) on X of its own, whose last tile's boxes reaching past M copy rows below M
    (``_x_box``, ``_rows_held``), against X with spare rows (whole tiles, no small boxes): every output NaN-poisoned
    before, the same values within a bf16 rounding, and the fp32 reference."""
    _boxes_from_one_row_past(monkeypatch)
    assert ws.sub_box_rows(m, cfg.bm, m, ws.shift_last_tile(m, cfg.bm, cfg.bn), cfg.bn) == ws.SUB_BOX_ROWS
    if epilogue != "row_norm" and cfg.stream_k:
        pytest.skip("stream-K takes the row scale only")
    if epilogue == "add_norm" and cfg.bm == 256:
        pytest.skip("the residual epilogue on 256 x 128 tiles needs more shared memory than a Hopper SM has")
    n, k = 4608, 1424
    x, w, stats, ref = _norm_case(m, n, k, glu=epilogue == "glu")
    spare = _spare(x, cfg.bm)
    assert ws.sub_box_rows(m, cfg.bm, ws.tma_rows(spare, cfg.bm), False) == 0

    def run(xx):
        if epilogue == "add_norm":
            residual = torch.linspace(-1, 1, m * n, device="cuda").reshape(m, n).to(torch.bfloat16)
            g = torch.linspace(0.5, 1.5, n, device="cuda").to(torch.bfloat16)
            u = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            sumsq = torch.full((ws.norm_slots(cfg, n), m), float("nan"), device="cuda")
            y = ws.ws_matmul(xx, w, cfg, out=torch.full_like(residual, float("nan")), add_norm=(residual, g, u, sumsq))
            return (y - residual).float(), u, sumsq
        width = n // 2 if epilogue == "glu" else n
        out = torch.full((m, width), float("nan"), device="cuda", dtype=torch.bfloat16)
        return (ws.ws_matmul(xx, w, cfg, out=out, glu=epilogue == "glu", row_norm=stats).float(),)

    own, whole = run(x), run(spare)
    for a, b in zip(own, whole):
        assert torch.isfinite(a).all() and torch.allclose(a.float(), b.float(), rtol=2**-7, atol=1e-2), epilogue
    if epilogue != "add_norm":
        assert float((own[0] - ref).norm() / ref.norm()) < 4e-3


@hopper
def test_rejects_unsupported_shapes():
    x, w, _ = _case(64, 100, 512)  # N not a multiple of 32
    assert not ws.supports(64, 100, 512)
    with pytest.raises(ValueError, match="N % 32"):
        ws.ws_matmul(x, w, ws.WsConfig(64, 128))
    x, w, _ = _case(64, 256, 512)
    with pytest.raises(ValueError, match="unsupported config"):
        ws.ws_matmul(x, w, ws.WsConfig(64, 128, consumers=2))  # two consumers cannot keep wgmmas in flight


BWD_CONFIGS = [ws.WsBwdConfig(256, 4, 1, consumers=2), ws.WsBwdConfig(128, 6, 3, consumers=2),
               ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2), ws.WsBwdConfig(128, 6, 1, stream_k=1, consumers=2),
               ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2, dp_waves=True),
               ws.WsBwdConfig(64), ws.WsBwdConfig(128, 4), ws.WsBwdConfig(64, 4, 3, 128),
               ws.WsBwdConfig(128, 6, 2, 128), ws.WsBwdConfig(8, 6, 8, 64), ws.WsBwdConfig(16, 4, 3, 80),
               ws.WsBwdConfig(32, 6, 1, 80), ws.WsBwdConfig(8, 4, 4, 80, True), ws.WsBwdConfig(32, 4, 3, 80, True),
               # a step's wgmmas in flight under the next step's dequantization (odd and even step counts per split)
               ws.WsBwdConfig(8, 6, 3, 80, True, in_flight=True), ws.WsBwdConfig(16, 8, 1, 80, in_flight=True),
               ws.WsBwdConfig(64, 4, 3, 128, in_flight=True), ws.WsBwdConfig(128, 6, 1, in_flight=True),
               # two consumers on decode tiles, split (summed by the second kernel) and as stream-K
               ws.WsBwdConfig(8, 6, 3, consumers=2), ws.WsBwdConfig(16, 6, 1, stream_k=1, consumers=2),
               ws.WsBwdConfig(8, 6, 1, stream_k=2, consumers=2),
               # splits that do not divide the step count (runs one step apart), summed in the kernel or not
               ws.WsBwdConfig(16, 6, 5, 80, in_flight=True), ws.WsBwdConfig(8, 6, 7, 80, True),
               ws.WsBwdConfig(64, 4, 5, 128, in_flight=True),
               # 48 registers, five CTAs per SM (ptxas serializes the wgmmas), split or not (run 23)
               ws.WsBwdConfig(8, 4, 3, 48), ws.WsBwdConfig(16, 6, 1, 48)]


@hopper
@pytest.mark.parametrize("cfg", BWD_CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("m,n,k", [(64, 256, 512), (100, 96, 1008), (1, 160, 2048), (300, 4608, 3584),
                                   (129, 352, 1424)])
def test_input_gradient_matches_fp32_reference(cfg, m, n, k):
    dy = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w = prepare_weight(q.packed, q.scale, q.global_scale)
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        ref = dy.float() @ ref_w
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    out = torch.full((m, k), float("nan"), device="cuda", dtype=torch.bfloat16)
    dx = ws.ws_matmul_grad_input(dy, w, cfg, out=out)
    assert dx.data_ptr() == out.data_ptr()
    assert torch.isfinite(dx).all()
    assert float((dx.float() - ref).norm() / ref.norm()) < 4e-3


@hopper
@pytest.mark.parametrize("cfg", BWD_CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("m,n,k", [(100, 96, 1008), (1, 160, 2048), (300, 4608, 3584), (129, 352, 1424)])
def test_rows_layout_input_gradient_gives_the_same_bits_as_pairs(cfg, m, n, k):
    # The "rows" layout decodes the same exact bf16 operand tiles (as words) for the same wgmmas: bit for bit.
    dy = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    pairs = prepare_weight(q.packed, q.scale, q.global_scale)
    rows = prepare_weight(q.packed, q.scale, q.global_scale, layout="rows")
    out = torch.full((m, k), float("nan"), device="cuda", dtype=torch.bfloat16)
    dx = ws.ws_matmul_grad_input(dy, rows, cfg, out=out)
    assert torch.isfinite(dx).all()
    assert torch.equal(dx, ws.ws_matmul_grad_input(dy, pairs, cfg))
    ref = _fp32_matmul(dy.float(), nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32))
    assert float((dx.float() - ref).norm() / ref.norm()) < 4e-3


@hopper
@pytest.mark.parametrize("m", [1, 16, 64, 128])
def test_rows_layout_default_dispatch_and_its_refusals(m):
    """``nvfp4_matmul_grad_input`` on a "rows" weight takes the table's kernel (same bits as on "pairs") and refuses,
    with the fix named, the products no kernel reads that layout for: the forward, and an input gradient past the
    table (M = 2048)."""
    from qerl.kernels import nvfp4_matmul, nvfp4_matmul_grad_input

    n, k = 3584, 3584
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    pairs = prepare_weight(q.packed, q.scale, q.global_scale)
    rows = prepare_weight(q.packed, q.scale, q.global_scale, layout="rows")
    dy = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    cfg = ws.pick_grad_input(dy, n, k, rows.k_pad, rows=True)
    assert cfg is not None
    assert torch.equal(nvfp4_matmul_grad_input(dy, rows), ws.ws_matmul_grad_input(dy, pairs, cfg))
    with pytest.raises(ValueError, match="layout='pairs' or 'words'"):
        nvfp4_matmul(torch.randn(m, k, device="cuda").to(torch.bfloat16), rows)
    with pytest.raises(ValueError, match="read only by the warp-specialized input-gradient kernel"):
        nvfp4_matmul_grad_input(torch.randn(4096, n, device="cuda").to(torch.bfloat16), rows)


@hopper
@pytest.mark.parametrize("m", [16, 64, 2048, 4096])
def test_module_backward_takes_the_rows_copy_where_the_kernel_covers_it(m, monkeypatch):
    """A packed layer with the "rows" copy: the same output as without it and the input gradient of the fp32 product
    (bit for bit where both layouts' tables pick the same config); it runs on "rows" where the kernel's table covers M
    (16, 64, 2048: run 33's stream-K key) and on "pairs" past it (4096: the slab path)."""
    from torch import nn

    from qerl.modules import NVFP4Linear

    torch.manual_seed(6)
    lin = nn.Linear(3584, 3584)
    plain = NVFP4Linear.from_linear(lin).to("cuda", torch.bfloat16)
    with_rows = NVFP4Linear.from_linear(lin).to("cuda", torch.bfloat16)
    plain.to_kernel_layout()
    with_rows.to_kernel_layout(input_grad_rows=True)
    layouts = []
    real = ws.ws_matmul_grad_input
    monkeypatch.setattr(ws, "ws_matmul_grad_input", lambda dy2, w, *a, **kw: layouts.append(w.layout)
                        or real(dy2, w, *a, **kw))
    x = torch.randn(m, 3584, device="cuda", dtype=torch.bfloat16)
    g = torch.randn(m, 3584, device="cuda", dtype=torch.bfloat16)
    grads = []
    for layer in (plain, with_rows):
        xi = x.clone().requires_grad_(True)
        y = layer(xi)
        y.backward(g)
        grads.append((y.detach(), xi.grad))
    assert torch.equal(grads[0][0], grads[1][0])
    ref = _fp32_matmul(g.float(), plain.dequantized_weight(torch.float32))
    for _, dx in grads:
        assert float((dx.float() - ref).norm() / ref.norm()) < 4e-3
    dy = g.reshape(-1, 3584)
    if ws.pick_grad_input(dy, 3584, 3584, 3584) == ws.pick_grad_input(dy, 3584, 3584, 3584, rows=True):
        assert torch.equal(grads[0][1], grads[1][1])
    assert layouts == ([] if m == 4096 else ["pairs", "rows"])


@hopper
@pytest.mark.parametrize("direction,m,n,k,route", [
    ("fwd", 700, 5120, 5120, 768),  # 14B / 32B o: the key between the buckets, not the tile loop (M = 1024 declined)
    ("fwd", 800, 5120, 5120, "slab"),  # ... and SLAB_RANGES past it
    ("fwd", 600, 3584, 3584, "slab"),  # 7B o
    ("bwd", 600, 3584, 3584, "slab"),
    ("bwd", 1100, 4608, 3584, "slab"),  # run 33: 7B qkv's M = 1025-1152 below its M = 2048 stream-K key ...
    ("bwd", 1200, 4608, 3584, 2048),  # ... which serves M = 1153-2048
    ("bwd", 1000, 5120, 5120, 1024),  # 14B / 32B o: run 33's M = 1024 key (declined before)
    ("bwd", 300, 37888, 3584, 384),  # 7B gate_up's input gradient on its M = 384 key
    ("words", 700, 4608, 3584, 896),  # 7B qkv on "words": the M = 896 key (the tile loop's M before)
    ("words", 960, 4608, 3584, "slab"),
    ("words", 136, 4608, 3584, 192),  # run 27's keys: 7B qkv's M = 129-192 on its 64-row tiles (the 256 entry's before)
    ("words", 72, 5120, 5120, 96),  # 14B / 32B o's M = 65-96
    ("fwd", 160, 7168, 5120, 192),  # 14B / 32B qkv on "pairs"
])
def test_default_dispatch_follows_the_keys_between_buckets(direction, m, n, k, route, monkeypatch):
    """Runs 26-27's routes between the buckets: the default dispatch runs the config of the smallest key at or above M, or
    the slab path in ``SLAB_RANGES`` (also for a layer with the "rows" copy), and its result matches fp32."""
    from qerl.kernels import nvfp4_gemm as kern

    calls = []
    for mod, name in ((ws, "ws_matmul"), (ws, "ws_matmul_grad_input"), (kern, "_matmul_large_m"),
                      (kern, "_grad_input_large_m")):
        real = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, _real=real, _name=name, **kw: calls.append(
            a[2] if _name.startswith("ws") else "slab") or _real(*a, **kw))
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w = prepare_weight(q.packed, q.scale, q.global_scale, layout="words" if direction == "words" else "pairs")
    fwd = direction != "bwd"
    inp = torch.randn(m, k if fwd else n, device="cuda").to(torch.bfloat16)
    out = kern.nvfp4_matmul(inp, w) if fwd else kern.nvfp4_matmul_grad_input(inp, w)
    ref = _fp32_matmul(inp.float(), ref_w.T if fwd else ref_w)
    table = {"fwd": ws.TUNED, "bwd": ws.TUNED_BWD, "words": ws.TUNED_WORDS}[direction]
    assert calls == ["slab" if route == "slab" else table[(route, n, w.k_pad)]]
    assert float((out.float() - ref).norm() / ref.norm()) < 4e-3
    if direction == "bwd":  # a layer with the "rows" copy hands the slab path its "pairs" weight
        rows = prepare_weight(q.packed, q.scale, q.global_scale, layout="rows")
        assert (kern.grad_input_weight(inp, w, rows) is w) == (route == "slab")


@hopper
@pytest.mark.parametrize("m", [64, 200])
def test_default_dispatch_takes_the_kernels_on_tuned_shapes(m, monkeypatch):
    # Qwen2.5-7B o projection (3584 x 3584): tuned for both directions at these M, so the default path (here through
    # autograd, with a bias) runs the warp-specialized kernels; counted by wrapping them, checked against fp32.
    from qerl.kernels import NVFP4MatmulFn

    calls = []
    for name in ("ws_matmul", "ws_matmul_grad_input"):
        real = getattr(ws, name)
        monkeypatch.setattr(ws, name, lambda *a, _real=real, _name=name, **kw: calls.append(_name) or _real(*a, **kw))
    n = k = 3584
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w = prepare_weight(q.packed, q.scale, q.global_scale)
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16).requires_grad_(True)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    dy = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    y = NVFP4MatmulFn.apply(x, w, bias)
    y.backward(dy)
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        ref_y = x.detach().float() @ ref_w.T + bias.float()
        ref_dx = dy.float() @ ref_w
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    assert calls == ["ws_matmul", "ws_matmul_grad_input"]
    assert float((y.float() - ref_y).norm() / ref_y.norm()) < 4e-3
    assert float((x.grad.float() - ref_dx).norm() / ref_dx.norm()) < 4e-3


@hopper
def test_kernels_launch_from_a_thread_that_never_compiled_them():
    # Compiled on this thread first; then called from a fresh thread with no current CUDA context (as autograd's
    # backward thread): Triton 3.6 builds the TMA descriptors before its launcher sets a context.
    import threading

    x, w, ref = _case(64, 256, 512)
    dy = torch.randn(64, 256, device="cuda").to(torch.bfloat16)
    ws.ws_matmul(x, w, ws.WsConfig(64, 64, 4))
    ws.ws_matmul_grad_input(dy, w, ws.WsBwdConfig(64, 4))
    torch.cuda.synchronize()
    results, errors = {}, []

    def run():
        try:
            results["y"] = ws.ws_matmul(x, w, ws.WsConfig(64, 64, 4))
            results["dx"] = ws.ws_matmul_grad_input(dy, w, ws.WsBwdConfig(64, 4))
            torch.cuda.synchronize()
        except Exception as e:  # reported below, on the test's thread
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert not errors, errors
    assert float((results["y"].float() - ref).norm() / ref.norm()) < 4e-3
    assert torch.isfinite(results["dx"]).all()


@hopper
def test_fused_split_sum_leaves_counters_zero_and_repeats_exactly():
    # The last CTA of each tile sums the splits in split order and resets its counter: repeated launches (as CUDA
    # graph replays) give bitwise the same output, and the counters are zero after each.
    from qerl.kernels import nvfp4_gemm as kern

    x, w, ref = _case(5, 4608, 3584)
    dy = torch.randn(5, 4608, device="cuda").to(torch.bfloat16)
    for run, cfg in ((ws.ws_matmul, ws.WsConfig(16, 64, 6, 4, 1, True, 80, True)),
                     (ws.ws_matmul, ws.WsConfig(8, 64, 6, 5, 1, True, 80, True)),  # 28 chunks in runs of 5 and 6
                     (ws.ws_matmul_grad_input, ws.WsBwdConfig(8, 4, 8, 80, True))):
        inp = x if run is ws.ws_matmul else dy
        first = run(inp, w, cfg)
        for _ in range(3):
            again = run(inp, w, cfg, out=torch.full_like(first, float("nan")))
            assert torch.equal(again, first)
        torch.cuda.synchronize()
        assert int(kern._split_counters(x.device, 1).abs().sum()) == 0
    y = ws.ws_matmul(x, w, ws.WsConfig(16, 64, 6, 4, 1, True, 80, True))
    assert float((y.float() - ref).norm() / ref.norm()) < 4e-3


@hopper
@pytest.mark.parametrize("split", [2, 3, 4, 5, 7, 9, 16])
def test_fused_split_sum_gives_the_bits_of_the_second_kernel(split):
    # The last CTA's sum is the one-by-one sum in split order from +0.0 that ``nvfp4_gemm._reduce`` computes for the
    # same partials: bit for bit, whatever the split count.
    x, w, _ = _case(5, 4608, 3584)
    dy = torch.randn(5, 4608, device="cuda").to(torch.bfloat16)
    fwd = [ws.WsConfig(8, 64, 6, split, 1, True, 80, fused) for fused in (True, False)]
    bwd = [ws.WsBwdConfig(8, 4, split, 80, fused) for fused in (True, False)]
    for run, inp, (fused, second) in ((ws.ws_matmul, x, fwd), (ws.ws_matmul_grad_input, dy, bwd)):
        a = run(inp, w, fused, out=torch.full((5, w.n if run is ws.ws_matmul else w.k), float("nan"),
                                              device="cuda", dtype=torch.bfloat16))
        b = run(inp, w, second)
        assert torch.isfinite(a).all() and torch.equal(a, b)


@hopper
@pytest.mark.parametrize("cfg", [ws.WsConfig(128, 256, 3, 1, 2, False, stream_k=1),
                                 ws.WsConfig(64, 64, 3, 1, 1, False, 128, stream_k=2)], ids=["2x128", "1x64"])
@pytest.mark.parametrize("m,n,k", [(1000, 3584, 3584), (300, 96, 18944)])
def test_stream_k_leaves_counters_zero_and_repeats_exactly(cfg, m, n, k):
    """Tiles split between CTAs (shapes whose steps do not divide evenly among the SMs' CTAs): the same bits on every
    launch, whichever CTA finishes a tile, and the tile counters back at zero; the input gradient likewise."""
    from qerl.kernels import nvfp4_gemm as kern

    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w = prepare_weight(q.packed, q.scale, q.global_scale)
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    dy = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    tiles = -(-m // cfg.bm) * -(-n // cfg.bn)
    assert (tiles * (w.k_pad // kern.CHUNK)) % (cfg.stream_k * kern._sms(x.device)) != 0
    bwd = ws.WsBwdConfig(256 if cfg.consumers == 2 else 128, 4, 1, stream_k=1, consumers=2)
    for run, inp, cfg_, want in ((ws.ws_matmul, x, cfg, _fp32_matmul(x.float(), ref_w.T)),
                                 (ws.ws_matmul_grad_input, dy, bwd, _fp32_matmul(dy.float(), ref_w))):
        first = run(inp, w, cfg_)
        for _ in range(3):
            again = run(inp, w, cfg_, out=torch.full_like(first, float("nan")))
            assert torch.equal(again, first)
        assert float((first.float() - want).norm() / want.norm()) < 4e-3
        torch.cuda.synchronize()
        assert int(kern._split_counters(x.device, 1).abs().sum()) == 0


def _check_stream_k_launch(inp, w, ref_w, cfg) -> None:
    """The forward (``cfg`` a ``WsConfig``; ``inp`` X) or the input gradient (a ``WsBwdConfig``; ``inp`` dY) into a
    NaN-poisoned output: finite, the fp32 reference, the same bits on two more launches, the tile counters back at
    zero."""
    from qerl.kernels import nvfp4_gemm as kern

    bwd = isinstance(cfg, ws.WsBwdConfig)
    run = ws.ws_matmul_grad_input if bwd else ws.ws_matmul
    first = run(inp, w, cfg, out=torch.full((inp.shape[0], w.k if bwd else w.n), float("nan"), device="cuda",
                                            dtype=torch.bfloat16))
    assert torch.isfinite(first).all()
    want = _fp32_matmul(inp.float(), ref_w if bwd else ref_w.T)
    assert float((first.float() - want).norm() / want.norm()) < 4e-3
    for _ in range(2):
        assert torch.equal(run(inp, w, cfg, out=torch.full_like(first, float("nan"))), first)
    torch.cuda.synchronize()
    assert int(kern._split_counters(inp.device, 1).abs().sum()) == 0


def _stream_k_case(cfg, m: int, n: int, k: int) -> tuple:
    """A random weight [n, k] and the launch's input for ``cfg`` (X [m, k] for the forward, dY [m, n] for the input
    gradient), with the stream-K plan's tiles and steps per tile (``_stream_k`` / ``_stream_k_grad_input``)."""
    from qerl.kernels import nvfp4_gemm as kern

    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w = prepare_weight(q.packed, q.scale, q.global_scale)
    if isinstance(cfg, ws.WsBwdConfig):
        inp = torch.randn(m, n, device="cuda").to(torch.bfloat16)
        tiles, steps = -(-m // cfg.bm) * (w.k_pad // kern.CHUNK), -(-n // 64)
    else:
        inp = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        tiles, steps = -(-m // cfg.bm) * -(-n // cfg.bn), w.k_pad // kern.CHUNK
    return inp, w, ref_w, tiles, steps


SK_BWD = ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2)


@hopper
@pytest.mark.parametrize("cfg,m,n", [(ws.WsConfig(256, 128, 3, 1, 2, False, stream_k=1), 1024, 4608),
                                     (ws.WsConfig(64, 64, 3, 1, 1, False, 128, stream_k=2), 128, 1024),
                                     (SK_BWD, 1024, 5120)],
                         ids=["2x128", "1x64", "grad_input"])
def test_stream_k_completes_with_more_ctas_than_the_gpu_holds(cfg, m, n, monkeypatch):
    """A split tile is summed by the CTA holding its first chunk, which waits for the later CTAs' parts
    (``_sk_add_parts``); each CTA stores its part before it waits for any, so a launch planned for four times the
    CTAs the SMs hold (not all resident at once: later CTAs start only as earlier ones exit) completes too: tiles
    split into several parts each, the fp32 reference, the same bits on every launch, the counters back at zero
    (the forward and the input gradient)."""
    from qerl.kernels import nvfp4_gemm as kern

    inp, w, ref_w, tiles, steps = _stream_k_case(cfg, m, n, 3584)
    sms = kern._sms(inp.device)
    monkeypatch.setattr(kern, "_sms", lambda device=None: 4 * sms)
    iters, _, grid = ws.sk_plan(tiles, steps, cfg.stream_k * 4 * sms)
    assert grid > 2 * cfg.stream_k * sms and iters < steps // 2, (iters, grid)
    _check_stream_k_launch(inp, w, ref_w, cfg)


@hopper
@pytest.mark.parametrize("cfg,m,n,k", [(ws.WsConfig(256, 128, 3, 1, 2, False, stream_k=1), 1024, 4608, 3584),
                                       (ws.WsConfig(256, 128, 3, 1, 2, False, stream_k=1), 1024, 5120, 5120),
                                       (ws.WsConfig(64, 64, 3, 1, 1, False, 128, stream_k=2), 1000, 3584, 3584),
                                       (SK_BWD, 1024, 5120, 5120), (SK_BWD, 1024, 3584, 18944)],
                         ids=["7b_qkv", "o_5120", "1x64", "grad_input_o_5120", "grad_input_7b_down"])
def test_stream_k_seeded_sum_matches_fp32(cfg, m, n, k):
    """Runs at least a tile long (run 32's 7B qkv / 14B o entries at M = 1024; the input gradient of 14B o and 7B
    down there): a split tile's summing CTA seeds its accumulator with the next CTA's part (``_sk_seed_part``): the
    fp32 reference, the same bits on every launch, the counters back at zero."""
    from qerl.kernels import nvfp4_gemm as kern

    inp, w, ref_w, tiles, steps = _stream_k_case(cfg, m, n, k)
    iters, total, _ = ws.sk_plan(tiles, steps, cfg.stream_k * kern._sms(inp.device))
    assert iters >= steps and iters % steps and total > iters, (iters, steps)  # runs a tile long, tiles split
    _check_stream_k_launch(inp, w, ref_w, cfg)


@hopper
@pytest.mark.parametrize("cfg,m,n,k", [(ws.WsConfig(64, 64, 5, 1, 1, True, 128, stream_k=2), 64, 4608, 3584),
                                       (ws.WsConfig(128, 64, 4, 1, 1, True, None, stream_k=1), 128, 3584, 3584),
                                       (ws.WsConfig(16, 64, 6, 1, 1, True, 96, stream_k=2), 16, 7168, 5120),
                                       (ws.WsConfig(8, 64, 6, 1, 1, True, 96, stream_k=2), 1, 37888, 3584),
                                       (ws.WsConfig(64, 64, 5, 1, 1, True, 128, stream_k=2), 100, 1024, 3584),
                                       (ws.WsConfig(8, 128, 6, 1, 1, True, 168, stream_k=1, dp_waves=True), 1, 37888,
                                        3584)],
                         ids=["runs_of_8", "runs_of_12", "runs_of_17", "runs_of_63", "two_m_tiles", "dp_waves"])
@pytest.mark.parametrize("layout", ["pairs", "words"])
def test_stream_k_in_flight_gives_the_bits_of_chunks_retired_one_by_one(cfg, m, n, k, layout):
    """Stream-K with a chunk's wgmmas in flight under the next one's dequantization (run 34): each CTA's part of a
    tile accumulates its chunks in the same order either way, and in flight every part (also the one a run a tile
    long or more would seed with) is added after the chunks in CTA order, as retired chunks do with runs shorter
    than a tile. So where runs are shorter than a tile the bits equal the retiring kernel's; everywhere the fp32
    reference, the same bits on every launch and the counters back at zero. Runs of odd and even chunk counts per
    tile (the two-chunk trips and the last odd chunk), a tile's stages released across tile boundaries."""
    from qerl.kernels import nvfp4_gemm as kern

    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w = prepare_weight(q.packed, q.scale, q.global_scale, **({} if layout == "pairs" else {"layout": layout}))
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    tiles, steps = -(-m // cfg.bm) * -(-n // cfg.bn), w.k_pad // kern.CHUNK
    iters, total, _ = ws.sk_plan(tiles, steps, cfg.stream_k * kern._sms(x.device), cfg.dp_waves)
    assert total % iters or iters % steps, (iters, steps)  # some tile split between CTAs
    _check_stream_k_launch(x, w, ref_w, cfg)
    if iters < steps:
        retired = cfg._replace(in_flight=False)
        assert torch.equal(ws.ws_matmul(x, w, cfg), ws.ws_matmul(x, w, retired))


@hopper
def test_dp_waves_runs_whole_waves_and_splits_the_leftover_tiles():
    """``dp_waves`` on shapes with more tiles than a wave of CTAs and a leftover that is split (checked on the plan
    the launcher makes): the fp32 reference, the same bits on every launch, the tile counters back at zero."""
    from qerl.kernels import nvfp4_gemm as kern

    m, n, k = 1024, 1152, 5120  # forward 144 tiles of 64 x 128, input gradient 160 of 256 x 128
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w = prepare_weight(q.packed, q.scale, q.global_scale)
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    dy = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    wave = kern._sms(x.device)
    fwd = ws.WsConfig(64, 128, 4, 1, 2, False, stream_k=1, dp_waves=True)
    bwd = ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2, dp_waves=True)
    cases = ((ws.ws_matmul, x, fwd, -(-m // 64) * (n // 128), w.k_pad // kern.CHUNK, _fp32_matmul(x.float(), ref_w.T)),
             (ws.ws_matmul_grad_input, dy, bwd, -(-m // 256) * (w.k_pad // kern.CHUNK), n // 64,
              _fp32_matmul(dy.float(), ref_w)))
    for run, inp, cfg, tiles, steps, want in cases:
        iters, sk_total, grid = ws.sk_plan(tiles, steps, wave, dp_waves=True)
        assert tiles > wave and 0 < sk_total < tiles * steps and iters < steps and grid > wave, (cfg, tiles, steps)
        first = run(inp, w, cfg, out=torch.full((m, want.shape[1]), float("nan"), device="cuda",
                                                dtype=torch.bfloat16))
        assert torch.isfinite(first).all()
        assert float((first.float() - want).norm() / want.norm()) < 4e-3
        for _ in range(3):
            assert torch.equal(run(inp, w, cfg, out=torch.full_like(first, float("nan"))), first)
        torch.cuda.synchronize()
        assert int(kern._split_counters(x.device, 1).abs().sum()) == 0


@hopper
@pytest.mark.parametrize("m", [1, 8, 13])
def test_default_dispatch_takes_small_m_entries(m, monkeypatch):
    # A decode-shape entry (M < MIN_M) routes nvfp4_matmul to this kernel (bias added in its epilogue), checked in
    # fp32.
    from qerl.kernels import nvfp4_gemm as kern

    n, k = 4608, 3584
    monkeypatch.setattr(ws, "TUNED", dict(ws.TUNED))
    cfg = ws.WsConfig(8 if m <= 8 else 16, 64, 6, 4, 1, True, 80, True)
    ws.TUNED[(kern._m_bucket(m), n, k)] = cfg
    calls = []
    real = ws.ws_matmul
    monkeypatch.setattr(ws, "ws_matmul", lambda *a, **kw: calls.append(a[2]) or real(*a, **kw))
    x, w, ref = _case(m, n, k)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    y = kern.nvfp4_matmul(x, w, bias=bias)
    assert calls == [cfg]
    ref = ref + bias.float()
    assert float((y.float() - ref).norm() / ref.norm()) < 4e-3


@hopper
@pytest.mark.parametrize("m", [8, 64])
def test_adapter_expand_after_the_kernel_from_lora_ws_min_m(m, monkeypatch):
    # Without the expand in the warp-specialized kernel's epilogue (``BIAS_LORA_EPILOGUE`` off): below
    # LORA_WS_MIN_M the Triton kernel adds it in its epilogue, from there on the warp-specialized kernel (tuned
    # shape: 14B / 32B qkv, three slices) runs and the expand is added after it.
    from qerl.kernels import nvfp4_gemm as kern

    monkeypatch.setattr(ws, "BIAS_LORA_EPILOGUE", False)
    n, k, r = 7168, 5120, 32
    assert ws.pick(torch.empty(64, k, device="cuda", dtype=torch.bfloat16), n, k, k) is not None
    calls = []
    real = ws.ws_matmul
    monkeypatch.setattr(ws, "ws_matmul", lambda *a, **kw: calls.append(m) or real(*a, **kw))
    x, w, ref = _case(m, n, k)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    u = torch.randn(3, m, r, device="cuda") * 0.1
    b = tuple(torch.randn(s, r, device="cuda").to(torch.bfloat16) * 0.1 for s in (5120, 1024, 1024))
    y = kern.nvfp4_matmul(x, w, bias=bias, lora=kern.LoRAEpilogue(u, b))
    assert calls == ([m] if m >= kern.LORA_WS_MIN_M else [])
    expand = torch.cat([u[s].to(torch.bfloat16).float() @ b[s].float().T for s in range(3)], dim=1)
    ref = ref + bias.float() + expand
    assert torch.isfinite(y).all()
    assert float((y.float() - ref).norm() / ref.norm()) < 4e-3


@hopper
def test_split_sum_takes_the_expand_after_the_kernel_on_the_7b_decode_shapes(monkeypatch):
    """7B's o and down at M = 64 on the words layout (the transformers backend's decode step at batch 64 with an
    adapter): where their table config's split partials are summed by a second kernel, that kernel also adds the bias
    and the expand (one launch: ``nvfp4_gemm._reduce`` through ``_launch_bias_lora`` with the partials), and the
    result is the fp32 reference's."""
    from qerl.kernels import nvfp4_gemm as kern

    launches = []
    real = kern._launch_bias_lora
    monkeypatch.setattr(kern, "_launch_bias_lora", lambda *a, **kw: launches.append(len(a) > 3) or real(*a, **kw))
    split_shapes = 0
    for n, k in ((3584, 3584), (3584, 18944)):
        x, w, ref = _case(64, n, k, layout="words")
        cfg = ws.pick(x, w.n, w.k, w.k_pad, w.words)
        second_kernel = cfg is not None and not cfg.stream_k and min(cfg.split_k, w.k_pad // 128) > 1 and not cfg.fused
        split_shapes += second_kernel
        bias = torch.randn(n, device="cuda").to(torch.bfloat16)
        u = torch.randn(1, 64, 32, device="cuda") * 0.1
        b = (torch.randn(n, 32, device="cuda").to(torch.bfloat16) * 0.1,)
        launches.clear()
        y = kern.nvfp4_matmul(x, w, bias=bias, lora=kern.LoRAEpilogue(u, b))
        # the partials handed to the epilogue's kernel; else the epilogue in the product or after it alone
        assert launches == [True] if second_kernel else True not in launches, (n, k, cfg, launches)
        ref = ref + bias.float() + u[0].to(torch.bfloat16).float() @ b[0].float().T
        assert torch.isfinite(y).all() and float((y.float() - ref).norm() / ref.norm()) < 4e-3, (n, k, cfg)
    assert split_shapes, "neither shape sums its splits in a second kernel: the test no longer covers the path"


def _lora_case(m: int, sizes: tuple[int, ...], rank: int, dtype=torch.bfloat16):
    """An adapter's expand operands for output slices of ``sizes`` columns: u fp32 [S, M, R] (the shrink's output,
    scaled), B's bf16 [N_s, R] (every other one a column slice of a wider tensor: rows not contiguous), the bias, and
    the fp32 reference of bias + u_s (rounded to bf16, as vLLM's expand) @ B_s^T side by side."""
    from qerl.kernels import nvfp4_gemm as kern

    u = torch.randn(len(sizes), m, rank, device="cuda") * 0.5
    bs = tuple(torch.randn(s, rank + (8 if i % 2 else 0), device="cuda").to(torch.bfloat16)[:, :rank] * 0.05
               for i, s in enumerate(sizes))
    bias = torch.randn(sum(sizes), device="cuda").to(dtype)
    expand = torch.cat([_fp32_matmul(u[i].to(torch.bfloat16).float(), b.float().T) for i, b in enumerate(bs)], 1)
    return kern.LoRAEpilogue(u, bs), bias, bias.float() + expand


LORA_CONFIGS = [ws.WsConfig(8, 64, 6, 1, 1, True, 80), ws.WsConfig(16, 64, 6, 4, 1, True, 80, True),
                ws.WsConfig(8, 128, 6, 7, 1, True, 128, True), ws.WsConfig(8, 64, 6, 1, 1, False, 64),
                ws.WsConfig(32, 64, 4, 3, 1, True, 80, True), ws.WsConfig(64, 64, 4, 1, 1, True, 128),
                ws.WsConfig(64, 128, 4, 1, 2, False), ws.WsConfig(128, 256, 3, 1, 2, False),
                ws.WsConfig(128, 64, 4, 1, 1, True, 128)]


@hopper
@pytest.mark.parametrize("cfg", LORA_CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("m,sizes,rank,k", [(1, (384, 128, 128), 32, 3584), (5, (640,), 16, 1008),
                                            (13, (512, 128), 64, 2048), (40, (384, 128, 128), 32, 1424),
                                            (100, (256, 256), 16, 3584)])
@pytest.mark.parametrize("layout", ["pairs", "words"])
def test_bias_and_adapter_expand_in_the_epilogue_match_fp32_reference(cfg, m, sizes, rank, k, layout):
    """``ws_matmul(bias=, lora=)``: x W^T + bias + the slices' expand in fp32 before the one rounding, against the
    fp32 reference; one to three slices (inner ends on the tiles of 128 columns), ranks 16 / 32 / 64, B's rows
    strided, M not a multiple of the tile (the u rows past M read as zero), N ending inside a tile (640 on 256-row
    tiles), K padded (1008, 1424); split tiles summed in the kernel, two consumers, the TMA store (128-row tiles);
    every output written (NaN-poisoned before)."""
    n = sum(sizes)
    x, w, ref = _case(m, n, k, layout)
    lora, bias, extra = _lora_case(m, sizes, rank)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = ws.ws_matmul(x, w, cfg, out=out, bias=bias, lora=lora)
    assert y.data_ptr() == out.data_ptr() and torch.isfinite(y).all()
    ref = ref + extra
    assert float((y.float() - ref).norm() / ref.norm()) < 4e-3
    # The expand is there: without it the same product is off by its size.
    plain = ws.ws_matmul(x, w, cfg, bias=bias)
    assert float((plain.float() - ref).norm() / ref.norm()) > 2e-2
    assert float((plain.float() - (ref - extra + bias.float())).norm() / ref.norm()) < 4e-3


@hopper
def test_bias_and_adapter_epilogue_refusals():
    from qerl.kernels import nvfp4_gemm as kern

    x, w, ref = _case(8, 640, 1024, "words")
    lora, bias, _ = _lora_case(8, (384, 256), 32)
    with pytest.raises(ValueError, match="stream-K"):
        ws.ws_matmul(x, w, ws.WsConfig(8, 64, 6, 1, 1, False, 64, stream_k=4), lora=lora)
    with pytest.raises(ValueError, match="stream-K"):  # splits summed by a second kernel
        ws.ws_matmul(x, w, ws.WsConfig(8, 64, 6, 4, 1, True, 80), bias=bias)
    with pytest.raises(ValueError, match="plain epilogue"):
        ws.ws_matmul(x, w, ws.WsConfig(8, 64, 6, 1, 1, True, 80), glu=True, lora=lora)
    odd = _lora_case(8, (384, 256), 8)  # a rank the wgmma cannot take
    with pytest.raises(ValueError, match="R in"):
        ws.ws_matmul(x, w, ws.WsConfig(8, 64, 6, 1, 1, True, 80), lora=odd[0])
    split = _lora_case(8, (352, 288), 32)  # an inner slice ending inside a tile
    with pytest.raises(ValueError, match="inner slices"):
        ws.ws_matmul(x, w, ws.WsConfig(8, 64, 6, 1, 1, True, 80), lora=split[0])
    # The dispatch, which has a config for the bias alone, adds what the epilogue refuses after the product.
    assert ws.bias_lora_config(x, w, bias, None) is not None
    for bad, bad_bias, extra in (odd, split):
        assert ws.bias_lora_config(x, w, bad_bias, bad) is None
        y = kern.nvfp4_matmul(x, w, bias=bad_bias, lora=bad)
        assert torch.isfinite(y).all() and float((y.float() - ref - extra).norm() / (ref + extra).norm()) < 4e-3


# Shapes of Qwen2.5 7B / 32B / 3B projections with their adapter's slices (vLLM's and the rollout backend's fused q/k/v
# and gate/up groups).
LORA_SHAPES = {"7b qkv": (3584, (3584, 512, 512)), "7b o": (3584, (3584,)), "7b gate_up": (3584, (18944, 18944)),
               "7b down": (18944, (3584,)), "32b qkv": (5120, (5120, 1024, 1024)), "32b o": (5120, (5120,)),
               "3b qkv": (2048, (2048, 256, 256)), "3b gate_up": (2048, (11008, 11008)), "3b down": (11008, (2048,))}


@hopper
@pytest.mark.parametrize("shape", list(LORA_SHAPES))
@pytest.mark.parametrize("m", [1, 8, 16, 33, 64])
@pytest.mark.parametrize("layout", ["pairs", "words"])
def test_default_dispatch_puts_bias_and_adapter_in_the_epilogue(shape, m, layout, monkeypatch):
    """``nvfp4_matmul`` with an adapter at decode batches on the tuned shapes: one launch of the warp-specialized
    kernel with the bias and expand in its epilogue wherever ``bias_lora_config`` gives a config (whole tiles), the
    product and then the expand elsewhere; either matching the fp32 reference, and the same with the epilogue
    switched off (the expand after)."""
    from qerl.kernels import nvfp4_gemm as kern

    k, sizes = LORA_SHAPES[shape]
    n = sum(sizes)
    x, w, ref = _case(m, n, k, layout)
    lora, bias, extra = _lora_case(m, sizes, 32)
    ref = ref + extra
    calls = []
    real = ws.ws_matmul
    monkeypatch.setattr(ws, "ws_matmul", lambda *a, **kw: calls.append((a[2], "lora" in kw)) or real(*a, **kw))
    kern.nvfp4_matmul(x, w, bias=bias, lora=lora)  # (allocates the split tiles' counters)
    calls.clear()
    fused = ws.bias_lora_config(x, w, bias, lora)
    y = kern.nvfp4_matmul(x, w, bias=bias, lora=lora)
    assert torch.isfinite(y).all() and float((y.float() - ref).norm() / ref.norm()) < 4e-3
    if fused is not None:
        assert calls == [(fused, True)] and ws.tile_epilogue(fused, w)
    else:
        assert all(not with_lora for _, with_lora in calls)
    if layout == "words" and m <= 16 and shape != "7b qkv":  # every decode entry but 7B qkv's stream-K ones
        assert fused is not None
    calls.clear()
    monkeypatch.setattr(ws, "BIAS_LORA_EPILOGUE", False)
    after = kern.nvfp4_matmul(x, w, bias=bias, lora=lora)
    assert all(not with_lora for _, with_lora in calls)
    assert float((after.float() - ref).norm() / ref.norm()) < 4e-3


def _glu_case(m: int, inter: int, k: int, layout: str):
    """A gate and an up projection quantized as one [2I, K] weight (one global scale), rows interleaved for the
    epilogue; the fp32 reference SiLU(x G^T) * (x U^T) from the dequantized rows."""
    from qerl.kernels.nvfp4_gemm import interleave_gate_up

    q = nvfp4.quantize(torch.randn(2 * inter, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    packed = interleave_gate_up(q.packed[:inter], q.packed[inter:])
    scale = interleave_gate_up(q.scale[:inter], q.scale[inter:])
    w = prepare_weight(packed, scale, q.global_scale, **({} if layout == "pairs" else {"layout": layout}))
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    xf = x.float()
    ref = torch.nn.functional.silu(_fp32_matmul(xf, ref_w[:inter].T)) * _fp32_matmul(xf, ref_w[inter:].T)
    return x, w, ref


@hopper
@pytest.mark.parametrize("cfg", [ws.WsConfig(8, 64, 6, 1, 1, True, 80), ws.WsConfig(16, 64, 6, 1, 1, True, 80),
                                 ws.WsConfig(8, 128, 5, 1, 1, False, 80), ws.WsConfig(64, 64, 4, 1, 1, True, 128),
                                 ws.WsConfig(128, 256, 3, 1, 2, False)], ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("m,inter,k", [(1, 208, 1008), (5, 208, 3584), (16, 1024, 512), (100, 528, 1424)])
@pytest.mark.parametrize("layout", ["pairs", "words"])
def test_swiglu_epilogue_matches_fp32_reference(cfg, m, inter, k, layout):
    """SiLU(gate) * up stored by the kernel: the fp32 reference, every output written (NaN-poisoned before), tiles
    whose rows run past N (2 x 208 rows on 64- / 128- / 256-row tiles)."""
    x, w, ref = _glu_case(m, inter, k, layout)
    out = torch.full((m, inter), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = ws.ws_matmul(x, w, cfg, out=out, glu=True)
    assert y.data_ptr() == out.data_ptr() and torch.isfinite(y).all()
    assert float((y.float() - ref).norm() / ref.norm()) < 4e-3


@hopper
def test_swiglu_dispatch_fuses_where_the_table_allows_and_falls_back_elsewhere():
    from qerl.kernels.nvfp4_gemm import nvfp4_matmul, nvfp4_matmul_swiglu, swiglu_interleaved

    # 7B gate_up: the unsplit decode tile at M = 8, a stream-K entry at M = 128 (and at M = 257-384, run 26's key),
    # two consumers at M = 400 (bucket 512; 128-row tiles, the last one shifted to end at row M: 16 rows of its own).
    for m, want_fused in ((8, True), (128, False), (300, False), (400, True)):
        x, w, ref = _glu_case(m, 18944, 3584, "words")
        assert (ws.epilogue_config(x, w, reshape=False) is not None) == want_fused
        y = nvfp4_matmul_swiglu(x, w)
        assert y.shape == (m, 18944) and torch.isfinite(y).all()
        assert float((y.float() - ref).norm() / ref.norm()) < 4e-3
        after = swiglu_interleaved(nvfp4_matmul(x, w))
        assert float((y.float() - after.float()).norm() / after.float().norm()) < 4e-3
    with pytest.raises(ValueError, match="SiLU x up epilogue needs a config without stream-K"):
        ws.ws_matmul(x, w, ws.WsConfig(8, 64, 6, 4, 1, True, 80), glu=True)  # splits summed by a second kernel


@hopper
def test_swiglu_after_the_product_is_one_kernel_matching_torch(monkeypatch):
    """Where the epilogue does not apply (7B gate_up at M = 100 / 128: stream-K entries), SiLU x up after the product
    runs the Triton kernel (``swiglu_triton``): within one bf16 rounding of the torch version on the same product,
    its output's storage holding whole tiles for the down projection, and the down projection on it matching the
    same product on a copy of X of its own."""
    from qerl.kernels import nvfp4_gemm as kern

    for m in (100, 128):
        x, w, ref = _glu_case(m, 18944, 3584, "words")
        assert ws.epilogue_config(x, w, reshape=False) is None
        y = kern.nvfp4_matmul_swiglu(x, w)
        assert ws.tma_rows(y, 128) == -(-m // 128) * 128
        product = kern.nvfp4_matmul(x, w)
        want = kern.swiglu_torch(product)
        assert torch.isfinite(y).all() and float((y.float() - ref).norm() / ref.norm()) < 4e-3
        assert torch.allclose(y.float(), want.float(), rtol=2**-7, atol=1e-6)
        monkeypatch.setattr(kern, "SWIGLU_KERNEL", False)
        assert torch.equal(kern.nvfp4_matmul_swiglu(x, w), want)
        monkeypatch.setattr(kern, "SWIGLU_KERNEL", True)
        q = nvfp4.quantize(torch.randn(3584, 18944, device="cuda") * 0.02)
        down = prepare_weight(q.packed, q.scale, q.global_scale, layout="words")
        assert torch.allclose(kern.nvfp4_matmul(y, down).float(), kern.nvfp4_matmul(y.clone(), down).float(),
                              rtol=2**-7, atol=1e-3)
    odd = torch.randn(3, 2, 208, device="cuda").to(torch.bfloat16)
    assert torch.allclose(kern.swiglu_interleaved(odd).float(), kern.swiglu_torch(odd).float(), rtol=2**-7, atol=1e-6)


# --------------------------------------------------------------------------------- RMSNorm in the epilogues
def _case_words(m: int, n: int, k: int):
    """``_case`` on the "words" code layout (the rollout forward's)."""
    return _case(m, n, k, layout="words")


def _norm_case(m: int, n: int, k: int, layout: str = "words", glu: bool = False):
    """A projection whose input is an RMSNorm's input times its weight (u = h * g) with its statistics; the fp32
    reference rmsnorm(h) * g @ W^T (SiLU(gate) * up for ``glu``: rows interleaved for the epilogue)."""
    from qerl.kernels.nvfp4_gemm import interleave_gate_up

    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    packed, scale = q.packed, q.scale
    if glu:
        packed = interleave_gate_up(packed[: n // 2], packed[n // 2:])
        scale = interleave_gate_up(scale[: n // 2], scale[n // 2:])
    w = prepare_weight(packed, scale, q.global_scale, **({} if layout == "pairs" else {"layout": layout}))
    h = (torch.randn(m, k, device="cuda") * 3).to(torch.bfloat16)
    g = (1 + 0.3 * torch.randn(k, device="cuda")).to(torch.bfloat16)
    u = (h.float() * g.float()).to(torch.bfloat16)
    # Statistics as a producing kernel leaves them: partial sums over column blocks, to be summed by the consumer.
    sumsq = torch.stack([c.float().pow(2).sum(-1) for c in h.chunk(5, dim=1)]).contiguous()
    eps = 1e-6
    x = h.float() * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + eps) * g.float()
    ref = _fp32_matmul(x, ref_w.T)
    if glu:
        ref = torch.nn.functional.silu(ref[:, : n // 2]) * ref[:, n // 2:]
    return u, w, (sumsq, eps), ref


NORM_CONFIGS = [ws.WsConfig(8, 64, 6, 1, 1, True, 80), ws.WsConfig(16, 64, 6, 4, 1, True, 80, True),
                ws.WsConfig(8, 64, 6, 7, 1, True, 80, True), ws.WsConfig(8, 128, 6, 7, 1, True, 128, True),
                ws.WsConfig(64, 64, 4, 1, 1, True, 128), ws.WsConfig(128, 256, 3, 1, 2, False),
                ws.WsConfig(16, 256, 4, 3, 2, False, None, True)]
NORM_SK_CONFIGS = [ws.WsConfig(8, 64, 6, 1, 1, False, 64, stream_k=4), ws.WsConfig(16, 64, 6, 1, 1, False, 64,
                                                                                     stream_k=2),
                   ws.WsConfig(8, 128, 5, 1, 1, False, 80, stream_k=2, dp_waves=True),
                   ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1),
                   # run 34: chunks in flight on stream-K (the row scale held across the tiles)
                   ws.WsConfig(16, 64, 6, 1, 1, True, 96, stream_k=2),
                   ws.WsConfig(64, 64, 5, 1, 1, True, 128, stream_k=2)]
_ids = lambda c: "x".join(map(str, c))  # noqa: E731


@hopper
@pytest.mark.parametrize("cfg", NORM_CONFIGS + NORM_SK_CONFIGS, ids=_ids)
@pytest.mark.parametrize("m,n,k", [(1, 320, 1008), (5, 4608, 3584), (100, 544, 1424)])
def test_row_norm_epilogue_matches_rmsnorm_then_matmul(cfg, m, n, k):
    """The RMSNorm's row scale applied to the stored tiles (unsplit, splits summed in the kernel, stream-K parts and
    whole tiles): the fp32 reference of norm-then-projection, every output written (NaN-poisoned before)."""
    u, w, row_norm, ref = _norm_case(m, n, k)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = ws.ws_matmul(u, w, cfg, out=out, row_norm=row_norm)
    assert y.data_ptr() == out.data_ptr() and torch.isfinite(y).all()
    assert float((y.float() - ref).norm() / ref.norm()) < 4e-3


@hopper
@pytest.mark.parametrize("cfg", NORM_CONFIGS, ids=_ids)
@pytest.mark.parametrize("row_norm", [False, True])
def test_swiglu_epilogue_with_and_without_the_row_norm(cfg, row_norm):
    """SiLU x up from the whole tile of one CTA, now also after splits summed in the kernel, with the norm's row
    scale applied before SiLU."""
    m, inter, k = 5, 208, 3584
    if row_norm:
        x, w, stats, ref = _norm_case(m, 2 * inter, k, glu=True)
    else:
        (x, w, ref), stats = _glu_case(m, inter, k, "words"), None
    out = torch.full((m, inter), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = ws.ws_matmul(x, w, cfg, out=out, glu=True, row_norm=stats)
    assert y.data_ptr() == out.data_ptr() and torch.isfinite(y).all()
    assert float((y.float() - ref).norm() / ref.norm()) < 4e-3


@hopper
@pytest.mark.parametrize("cfg", NORM_CONFIGS, ids=_ids)
@pytest.mark.parametrize("m,n,k", [(1, 320, 1008), (8, 3584, 3584), (100, 544, 1424)])
@pytest.mark.parametrize("in_place", [False, True])
def test_add_norm_epilogue_writes_the_sum_the_next_norm_input_and_its_statistics(cfg, m, n, k, in_place):
    """h = residual + x @ W^T, u = h * g and the partial sums of h**2 (one row per tile of the config's columns),
    all NaN-poisoned before; h may overwrite the residual."""
    x, w, ref = _case_words(m, n, k)
    residual = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    g = (1 + 0.3 * torch.randn(n, device="cuda")).to(torch.bfloat16)
    want_h = residual.float() + ref
    out = residual if in_place else torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    u = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    sumsq = torch.full((ws.norm_slots(cfg, n), m), float("nan"), device="cuda")
    y = ws.ws_matmul(x, w, cfg, out=out, add_norm=(residual.clone() if not in_place else residual, g, u, sumsq))
    assert y.data_ptr() == out.data_ptr() and torch.isfinite(y).all() and torch.isfinite(u).all()
    assert float((y.float() - want_h).norm() / want_h.norm()) < 4e-3
    # u and the statistics follow the stored (bf16) h exactly, up to the product's rounding to bf16.
    assert torch.allclose(u.float(), (y.float() * g.float()).to(torch.bfloat16).float(), rtol=1e-2, atol=1e-2)
    assert torch.isfinite(sumsq).all()
    assert torch.allclose(sumsq.sum(0), y.float().pow(2).sum(-1), rtol=1e-4)


@hopper
def test_epilogues_refuse_configs_that_split_a_tile_across_ctas():
    x, w, _ = _case_words(8, 3584, 3584)
    residual = torch.zeros(8, 3584, device="cuda", dtype=torch.bfloat16)
    g = torch.ones(3584, device="cuda", dtype=torch.bfloat16)
    u = torch.empty_like(residual)
    for cfg in (ws.WsConfig(8, 64, 6, 4, 1, True, 80), ws.WsConfig(8, 64, 6, 1, 1, False, 64, stream_k=4)):
        sumsq = torch.empty(ws.norm_slots(cfg, 3584), 8, device="cuda")
        with pytest.raises(ValueError, match="residual \\+ RMSNorm epilogue needs a config"):
            ws.ws_matmul(x, w, cfg, add_norm=(residual, g, u, sumsq))
    with pytest.raises(ValueError, match="row scale needs"):
        ws.ws_matmul(x, w, ws.WsConfig(8, 64, 6, 4, 1, True, 80), row_norm=(torch.zeros(1, 8, device="cuda"), 1e-6))
    with pytest.raises(ValueError, match="sumsq must be a contiguous"):
        ws.ws_matmul(x, w, ws.WsConfig(8, 64, 6, 1, 1, True, 80),
                     add_norm=(residual, g, u, torch.empty(3, 8, device="cuda")))


# ------------------------------------------------------------------------- bias + RoPE + KV cache in the epilogue
ROPE_CONFIGS = [ws.WsConfig(8, 128, 4, 7, 1, False, 80, True), ws.WsConfig(8, 128, 6, 7, 1, True, 128, True),
                ws.WsConfig(8, 128, 6, 1, 1, True, 128),
                ws.WsConfig(16, 128, 6, 3, 1, True, 128, True), ws.WsConfig(32, 128, 4, 2, 1, True, 128, True),
                ws.WsConfig(64, 128, 4, 3, 1, False, None, True), ws.WsConfig(128, 256, 3, 1, 2, False)]


@hopper
@pytest.mark.parametrize("cfg", ROPE_CONFIGS, ids=_ids)
@pytest.mark.parametrize("m", [1, 5, 16, 40])
@pytest.mark.parametrize("per_row_pos,bias,row_norm", [(False, True, False), (True, False, False),
                                                       (True, True, True)])
def test_rope_epilogue_matches_rope_and_cache_on_the_fp32_product(cfg, m, per_row_pos, bias, row_norm):
    """q rotated and stored, k rotated and v written into the caches at each row's position (one for all, or one per
    row), the bias and the RMSNorm row scale applied first; q NaN-poisoned, every cache position but the written ones
    left as it was."""
    from qerl.kernels.decode_attention import rope_and_cache_reference

    heads, kv, d, k, length = 4, 2, 128, 1008, 50
    n = (heads + 2 * kv) * d
    if row_norm:
        x, w, stats, ref = _norm_case(m, n, k)
    else:
        (x, w, ref), stats = _case_words(m, n, k), None
    b = (torch.randn(n, device="cuda") * 0.1).to(torch.bfloat16) if bias else None
    ang = torch.arange(length, device="cuda").float()[:, None] / 10 ** (torch.arange(0, d, 2, device="cuda") / d)
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(torch.bfloat16)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(torch.bfloat16)
    pos = (torch.randperm(length, device="cuda")[:m] if per_row_pos else torch.tensor([length - 3], device="cuda"))
    kc = torch.randn(m, kv, length, d, device="cuda").to(torch.bfloat16)
    vc = torch.randn_like(kc)
    want_k, want_v = kc.clone(), vc.clone()
    want_q = rope_and_cache_reference(ref, b, cos, sin, pos, want_k, want_v, heads)
    q = torch.full((m, heads * d), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = ws.ws_matmul(x, w, cfg, out=q, row_norm=stats, rope=ws.RopeEpilogue(b, cos, sin, pos, kc, vc, heads))
    assert y.data_ptr() == q.data_ptr() and torch.isfinite(q).all()
    assert _rel(q.view(m, heads, d), want_q) < 4e-3
    rows = torch.arange(m, device="cuda")
    p = pos.expand(m) if pos.numel() == 1 else pos
    for got, want in ((kc, want_k), (vc, want_v)):
        assert _rel(got[rows, :, p], want[rows, :, p]) < 4e-3
        got[rows, :, p] = want[rows, :, p]
        assert torch.equal(got, want)  # nothing else written


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


@hopper
def test_rope_epilogue_refuses_tiles_that_are_not_one_head():
    x, w, _ = _case_words(8, 1024, 1008)
    kc = torch.zeros(8, 2, 16, 128, device="cuda", dtype=torch.bfloat16)
    cos = torch.ones(16, 128, device="cuda", dtype=torch.bfloat16)
    rope = ws.RopeEpilogue(None, cos, cos, torch.tensor([3], device="cuda"), kc, kc.clone(), 4)
    with pytest.raises(ValueError, match="tiles of one head"):
        ws.ws_matmul(x, w, ws.WsConfig(8, 64, 6, 1, 1, True, 80), rope=rope)
    with pytest.raises(ValueError, match="RoPE \\+ KV-cache epilogue needs a config"):
        ws.ws_matmul(x, w, ws.WsConfig(8, 128, 5, 1, 1, False, 80, stream_k=2), rope=rope)

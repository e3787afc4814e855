"""The warp-specialized kernels (``qerl.kernels.nvfp4_gemm_ws``, forward and input gradient) without a GPU: every
shipped launch config compiled ahead of time for Hopper (sm_90a) keeps its wgmmas unserialized and spill-free, the
configs that keep a chunk's wgmmas in flight wait for 2 pending groups in the loop, and the dispatch of
``nvfp4_matmul`` / ``nvfp4_matmul_grad_input`` picks the kernels only where their tables say."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")
pytest.importorskip("triton.experimental.gluon")

from qerl.kernels import aot  # noqa: E402
from qerl.kernels import nvfp4_gemm as kern  # noqa: E402
from qerl.kernels import nvfp4_gemm_ws as ws  # noqa: E402
from qerl.kernels.pdl import pdl  # noqa: E402

needs_ptxas = pytest.mark.skipif(aot.ptxas_path() is None, reason="this Triton build ships no ptxas")


def _assert_spills_allowed(cfg, r):
    """No spills, except in the 256-column tiles (their epilogue) and the stream-K kernels (their loop over tiles
    holds more values): at most 1 KiB, outside the chunk loop but for one value each way (ptxas, sm_90a)."""
    if cfg.bm <= 128 and not cfg.stream_k:
        assert r["spill_bytes"] == 0, (cfg, r)
        return
    assert r["spill_bytes"] <= 1024, (cfg, r)
    loop = r["mma_loop_opcodes"]
    assert loop.get("HGMMA", 0) > 0 and loop.get("LDL", 0) <= 1 and loop.get("STL", 0) <= 1, (cfg, loop)


@needs_ptxas
def test_shipped_configs_compile_for_hopper_without_serialized_wgmma_or_spills():
    configs = [c for c in ws.TUNED.values() if c is not None]
    # split-K changes only the epilogue's output type
    aot.ws_reports([(key, {}) for key in {(c._replace(split_k=1), c.split_k > 1) for c in configs}])
    seen = set()
    for cfg in configs:
        key = (cfg._replace(split_k=1), cfg.split_k > 1)
        if key in seen:
            continue
        seen.add(key)
        r = aot.ws_report(*key)
        assert not r["wgmma_serialized"], (cfg, r)
        _assert_spills_allowed(cfg, r)
        if cfg.maxnreg is not None:
            assert r["registers"] <= cfg.maxnreg, (cfg, r)  # two CTAs per SM need the cap to hold
        # In flight: the loop waits until at most this chunk's two wgmma groups are pending; otherwise for none.
        assert r["wgmma_waits"] == ([0, 2] if cfg.in_flight else [0]), (cfg, r)
    assert len(seen) >= 8


@needs_ptxas
def test_shipped_input_gradient_configs_compile_for_hopper_without_serialized_wgmma_or_spills():
    configs = [c for c in ws.TUNED_BWD.values() if c is not None]
    aot.ws_reports([(key, {}) for key in {(c._replace(split_n=1), c.split_n > 1) for c in configs}])
    seen = set()
    for cfg in configs:
        key = (cfg._replace(split_n=1), cfg.split_n > 1)
        if key in seen:
            continue
        seen.add(key)
        r = aot.ws_report(*key)
        assert not r["wgmma_serialized"], (cfg, r)
        _assert_spills_allowed(cfg, r)
        if cfg.maxnreg is not None:
            assert r["registers"] <= cfg.maxnreg, (cfg, r)
        # Each step's wgmmas retire before its stage is released, or (in_flight) under the next step's dequantization.
        assert r["wgmma_waits"] == ([0, 2] if cfg.in_flight else [0]), (cfg, r)
        # The code bytes by two ldmatrix.trans per step; a thread's scales, already bf16 (the scale warp converts
        # them), by two 16-byte loads per half of the chunk (one consumer: both halves) or, with two consumers, one
        # per half of the step; the only PRMTs left spread the code bytes (two per word), none converts scales (a
        # PRMT and a LEA per two scales before run 21). The in-flight loop decodes two steps per trip (its densest
        # wgmma loop; the odd last step follows it).
        loop = r["chunk_loop_opcodes"]
        steps = 2 if cfg.in_flight else 1
        assert loop.get("HGMMA") == steps * (8 if cfg.consumers == 1 else 4), (cfg, loop)
        assert loop.get("LDSM") == 2 * steps, (cfg, loop)
        assert loop.get("LDS") == (4 if cfg.consumers == 1 else 2) * steps, (cfg, loop)
        assert loop.get("PRMT") == 16 * steps, (cfg, loop)
    assert len(seen) >= 3
    assert any(c.consumers == 2 for c, _ in seen) and any(c.stream_k for c, _ in seen)
    assert any(c.in_flight for c, _ in seen)


@needs_ptxas
def test_last_tile_shift_stays_out_of_the_chunk_loop():
    """Run 27's shifted last M tile (``_tile_m0``) moves only the tile's first row: the chunk loop keeps its wgmmas,
    decode and barriers with and without it (at most two integer instructions of scheduling apart on stream-K), on
    the one-tile-per-CTA kernel and on stream-K, forward and input gradient, and nothing spills inside it."""
    for cfg in (ws.WsConfig(64, 64, 3, 1, 1, False, 80), ws.WsConfig(64, 128, 4, 3, 1, False, 128),
                ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1)):
        shifted, plain = (aot.ws_report(cfg, words=True, out_f32=cfg.split_k > 1, shift_last=v) for v in (True, False))
        loop, ref = shifted["chunk_loop_opcodes"], plain["chunk_loop_opcodes"]
        for op in ("HGMMA", "LDS", "LDSM", "PRMT", "HMUL2", "HFMA2", "SYNCS"):
            assert loop.get(op) == ref.get(op), (cfg, op, loop, ref)
        assert sum(loop.values()) <= sum(ref.values()) + 2, (cfg, loop, ref)
        assert shifted["spill_bytes"] == 0 and not shifted["wgmma_serialized"], (cfg, shifted)
        if cfg.maxnreg is not None:
            assert shifted["registers"] <= cfg.maxnreg
    for cfg in (ws.WsBwdConfig(128, 4, 2, in_flight=True), ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2)):
        shifted, plain = (aot.ws_report(cfg, shift_last=v) for v in (True, False))
        loop, ref = shifted["chunk_loop_opcodes"], plain["chunk_loop_opcodes"]
        # (the stream-K input gradient sits at Triton's 168-register cap: a few bytes spill outside the loop either way)
        assert loop.get("HGMMA") == ref.get("HGMMA") and "LDL" not in loop and "STL" not in loop, (cfg, loop, ref)
        assert sum(loop.values()) <= sum(ref.values()) + 2 and not shifted["wgmma_serialized"], (cfg, loop, ref)


@needs_ptxas
def test_small_boxes_of_x_stay_in_the_loader():
    """Run 28's last tile copied in boxes of 32 rows (``_x_box``, XB = 32; 8 also compiles) adds TMA copies to the
    loader warp only: the consumers' chunk loop keeps its wgmmas, decode and barriers, nothing spills inside it,
    registers stay under the config's cap; the loader issues BM / XB copies per box more (forward: two boxes of X
    per chunk; input gradient: one of dY per step), on the one-tile-per-CTA kernels and on stream-K."""
    cases = ((ws.WsConfig(64, 64, 3, 1, 1, False, 80), 8), (ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1), 32),
             (ws.WsConfig(256, 128, 3, 1, 2, False), 32), (ws.WsBwdConfig(128, 4, 2, in_flight=True), 32),
             (ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2), 32))
    aot.ws_reports([((cfg,), {"sub_box": v, **({} if isinstance(cfg, ws.WsBwdConfig) else {"words": True})})
                    for cfg, xb in cases for v in (xb, 0)])
    for cfg, xb in cases:
        kw = {} if isinstance(cfg, ws.WsBwdConfig) else {"words": True}
        boxes, plain = (aot.ws_report(cfg, sub_box=v, **kw) for v in (xb, 0))
        loop, ref = boxes["chunk_loop_opcodes"], plain["chunk_loop_opcodes"]
        for op in ("HGMMA", "LDS", "LDSM", "PRMT", "HMUL2", "HFMA2", "SYNCS"):
            assert loop.get(op) == ref.get(op), (cfg, op, loop, ref)
        assert "LDL" not in loop and "STL" not in loop and not boxes["wgmma_serialized"], (cfg, loop)
        assert boxes["registers"] <= (cfg.maxnreg or 255) and boxes["shared_bytes"] <= plain["shared_bytes"] + 64
        per_chunk = 2 if isinstance(cfg, ws.WsConfig) else 1
        extra = boxes["loop_opcodes"].get("UTMALDG", 0) - plain["loop_opcodes"].get("UTMALDG", 0)
        assert extra == per_chunk * cfg.bm // xb, (cfg, extra)


@needs_ptxas
def test_tma_store_of_tiles_stays_out_of_the_chunk_loop():
    """Run 30's TMA store of tiles (``_tma_store_tile``) adds one TMA store per consumer after the chunk loop
    (the stores from registers stay for the tiles it does not take) and leaves the loop's wgmmas, decode and
    barriers as they were; no spill, at most 64 bytes more shared memory (the tile goes through a free
    X stage)."""
    configs = (ws.WsConfig(256, 128, 3, 1, 2, False), ws.WsConfig(128, 128, 4, 1, 2, False),
               ws.WsConfig(128, 64, 4, 1, 1, True, 128), ws.WsConfig(128, 256, 3, 1, 2, False))
    aot.ws_reports([((cfg,), kw) for cfg in configs for kw in ({"tma_store": True}, {"tma_store": False},
                                                                {"tma_store": True, "shift_last": True},
                                                                {"tma_store": True, "sub_box": 32})])
    for cfg in configs:
        tma, plain = (aot.ws_report(cfg, tma_store=v) for v in (True, False))
        loop, ref = tma["chunk_loop_opcodes"], plain["chunk_loop_opcodes"]
        for op in ("HGMMA", "LDS", "LDSM", "PRMT", "HMUL2", "HFMA2", "SYNCS"):
            assert loop.get(op) == ref.get(op), (cfg, op, loop, ref)
        assert sum(loop.values()) <= sum(ref.values()) + 8, (cfg, loop, ref)
        # One copy per 64 rows of W (a 128-row consumer's two halves, its accumulator's own registers: no layout
        # conversion through shared memory).
        assert tma["tma_stores"] == cfg.bn // 64 and plain["tma_stores"] == 0, (cfg, tma)
        # Without a shifted last tile or small boxes every tile goes by TMA (rows past M dropped by Y's bounds); with
        # either, the stores from registers stay for the tile concerned.
        assert tma["global_stores"] == 0 < plain["global_stores"], (cfg, tma, plain)
        for kw in ({"shift_last": True}, {"sub_box": 32}):
            assert aot.ws_report(cfg, tma_store=True, **kw)["global_stores"] == plain["global_stores"], (cfg, kw)
        assert tma["spill_bytes"] <= plain["spill_bytes"] and not tma["wgmma_serialized"], (cfg, tma, plain)
        assert tma["shared_bytes"] <= plain["shared_bytes"] + 64 <= 232448, (cfg, tma["shared_bytes"])
        if cfg.maxnreg is not None:
            assert tma["registers"] <= cfg.maxnreg


SK_TMA_STORE_CONFIGS = [ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1),
                        ws.WsConfig(256, 128, 2, 1, 2, False, stream_k=1, dp_waves=True),
                        ws.WsConfig(128, 256, 3, 1, 2, False, stream_k=1, dp_waves=True)]
SK_RING_STORE_CONFIGS = [ws.WsConfig(256, 128, 3, 1, 2, False, stream_k=1),
                         ws.WsConfig(256, 128, 3, 1, 2, False, stream_k=1, dp_waves=True)]


@needs_ptxas
def test_stream_k_tma_store_leaves_the_chunk_loop_as_it_was():
    """Run 31's TMA store of the stream-K kernel's whole tiles: one TMA store per 64 W rows, the chunk loop's
    wgmmas, decode and barriers unchanged, the split tiles' parts and sums still stored from registers, no more
    spills. From boxes of their own (``_sk_tma_store_tile``): the tile's BN x BM bf16 added to the shared memory,
    within sm_90's 227 KB (``sk_tma_store``'s estimate covers the compiler's). Through the ring's stage
    (``_sk_ring_store_tile``, configs whose ring leaves no room): only the ``stored`` barriers added."""
    cases = [(c, 1) for c in SK_TMA_STORE_CONFIGS] + [(c, 2) for c in SK_RING_STORE_CONFIGS]
    aot.ws_reports([((cfg,), {"tma_store": v}) for cfg, mode in cases for v in (mode, 0)])
    for cfg, mode in cases:
        tma, plain = (aot.ws_report(cfg, tma_store=v) for v in (mode, 0))
        loop, ref = tma["chunk_loop_opcodes"], plain["chunk_loop_opcodes"]
        for op in ("HGMMA", "LDS", "LDSM", "PRMT", "HMUL2", "HFMA2", "SYNCS"):
            assert loop.get(op) == ref.get(op), (cfg, op, loop, ref)
        assert tma["tma_stores"] == cfg.bn // 64 and plain["tma_stores"] == 0, (cfg, tma)
        assert 0 < tma["global_stores"] < plain["global_stores"], (cfg, tma, plain)
        extra = tma["shared_bytes"] - plain["shared_bytes"]
        tile = cfg.bn * cfg.bm * 2 if mode == 1 else 8 * cfg.stages
        assert extra in range(tile, tile + 65), (cfg, extra)
        assert tma["shared_bytes"] <= ws.fwd_ring_bytes(cfg) + tile + 1024 <= ws.SMEM_PER_CTA
        assert tma["spill_bytes"] <= plain["spill_bytes"] and not tma["wgmma_serialized"], (cfg, tma, plain)


def test_stream_k_tma_store_from_own_boxes_where_they_fit_else_through_the_ring(monkeypatch):
    """``sk_tma_store``: stream-K configs only, on ``tma_store_tiles``' rows and outputs; boxes of the tile's own
    where the ring and they fit the CTA's shared memory for ``stream_k`` CTAs per SM, else the ring's stage where
    it holds two consumers' 64-row halves, else none."""
    y = torch.empty(256, 512, dtype=torch.bfloat16)
    for cfg in SK_TMA_STORE_CONFIGS:
        assert ws.sk_tma_store(cfg, y) == 1
        assert ws.sk_tma_store(cfg, y.float()) == 0
        assert ws.sk_tma_store(cfg._replace(stream_k=0), y) == 0  # one tile per CTA: ``tma_store_tiles``
    for cfg in SK_RING_STORE_CONFIGS:
        assert ws.sk_tma_store(cfg, y) == 2  # 219 KB of ring
    assert ws.sk_tma_store(ws.WsConfig(128, 64, 3, 1, 1, False, 128, stream_k=2), y) == 0  # two CTAs, one consumer
    assert ws.sk_tma_store(ws.WsConfig(128, 64, 3, 1, 1, False, 128, stream_k=1), y) == 1
    assert ws.sk_tma_store(ws.WsConfig(64, 64, 4, 1, 1, False, stream_k=1), y) == 0  # below TMA_STORE_MIN_BM
    monkeypatch.setattr(ws, "TMA_STORE", False)
    assert ws.sk_tma_store(SK_TMA_STORE_CONFIGS[0], y) == 0


def test_tma_store_only_for_plain_unsplit_tiles_of_64_row_consumers(monkeypatch):
    """``tma_store_tiles``: the forward's plain epilogue of an unsplit one-tile-per-CTA launch with 64 or 128 W rows
    per consumer and 128+ rows of X per tile, into a bf16 output TMA can address; nothing else."""
    y = torch.empty(256, 512, dtype=torch.bfloat16)
    big = ws.WsConfig(256, 128, 3, 1, 2, False)
    assert ws.tma_store_tiles(big, 1, False, y)
    assert ws.tma_store_tiles(ws.WsConfig(128, 64, 4, 1, 1, True, 128), 1, False, y)
    assert not ws.tma_store_tiles(big, 2, False, y)  # split partials go out as fp32
    assert not ws.tma_store_tiles(big, 1, True, y)  # SiLU x up, residual + norm, RoPE store their own way
    assert not ws.tma_store_tiles(big._replace(stream_k=1), 1, False, y)
    assert ws.tma_store_tiles(ws.WsConfig(128, 256, 3, 1, 2, False), 1, False, y)  # 128 rows per consumer
    assert not ws.tma_store_tiles(ws.WsConfig(64, 64, 4), 1, False, y)  # below TMA_STORE_MIN_BM
    assert not ws.tma_store_tiles(big, 1, False, y.float())
    assert not ws.tma_store_tiles(big, 1, False, y[:, 1:])  # base not 16-byte aligned
    assert not ws.tma_store_tiles(big, 1, False, torch.empty(256, 516, dtype=torch.bfloat16)[:, :500])  # row pitch
    assert ws.tma_store_tiles(big, 1, False, torch.empty(256, 520, dtype=torch.bfloat16)[:, :500])
    monkeypatch.setattr(ws, "TMA_STORE", False)
    assert not ws.tma_store_tiles(big, 1, False, y)


def test_small_boxes_only_where_the_last_tile_reaches_past_m(monkeypatch):
    """``sub_box_rows``: boxes of 32 rows where the last tile (not shifted) of 64 rows or more reaches past the rows
    X's descriptor declares by 32 or more (the input gradient, and the forward on tiles of 128+ rows of X and of W)
    or by 24 or more (the forward on 64-row tiles of X or of W), and M holds a whole small box (the box reaching past
    M copies the last 32 rows below it); ``x_boxes`` builds the second descriptor only then; with boxes of 8 rows
    (a switch) likewise."""
    assert (ws.SUB_BOX_ROWS, ws.SUB_BOX_MIN_PAST, ws.SUB_BOX_MIN_PAST_NARROW) == (32, 32, 24)
    for m, bm, bn, rows, shifted, want in (
            (40, 64, 64, 40, False, 32), (40, 64, 128, 40, False, 32), (40, 64, None, 40, False, 0),
            (33, 64, None, 33, False, 0), (41, 64, 64, 41, False, 0), (63, 64, 64, 63, False, 0),
            (40, 64, 64, 64, False, 0), (3, 64, 64, 3, False, 0), (31, 64, 64, 31, False, 0),
            (32, 64, 64, 32, False, 32), (32, 64, None, 32, False, 32), (66, 128, None, 66, False, 32),
            (100, 128, 64, 100, False, 32), (100, 128, 128, 100, False, 0), (100, 128, None, 100, False, 0),
            (104, 128, 64, 104, False, 32), (105, 128, 64, 105, False, 0), (100, 128, 64, 110, False, 0),
            (136, 256, 128, 136, False, 32), (136, 256, None, 256, False, 0), (1, 8, 64, 1, False, 0),
            (16, 32, 64, 16, False, 0), (200, 128, 128, 200, False, 32), (235, 128, 64, 235, False, 0),
            (129, 64, 64, 129, True, 0), (600, 256, None, 600, False, 32)):
        assert ws.sub_box_rows(m, bm, rows, shifted, bn) == want, (m, bm, bn, rows, shifted)
    monkeypatch.setattr(ws, "SUB_BOX_MIN_PAST_NARROW", 1)
    assert ws.sub_box_rows(63, 64, 63, False, 64) == 32 and ws.sub_box_rows(63, 64, 63, False) == 0
    layout = ws.dy_layout(128)
    x = torch.empty(66, 128, dtype=torch.bfloat16)
    desc, sub, shift, xb = ws.x_boxes(x, 128, layout)
    assert (xb, shift, desc.shape, desc.block_shape, sub.block_shape) == (32, False, [66, 128], [128, 64], [32, 64])
    desc, sub, shift, xb = ws.x_boxes(torch.empty(128, 128, dtype=torch.bfloat16)[:66], 128, layout)
    assert (xb, desc.shape, sub is desc) == (0, [128, 128], True)  # rows past M in the storage: whole tiles
    desc, sub, shift, xb = ws.x_boxes(torch.empty(129, 128, dtype=torch.bfloat16), 64, ws.dy_layout(64))
    assert (xb, shift, sub is desc) == (0, True, True)
    assert ws.x_boxes(torch.empty(40, 128, dtype=torch.bfloat16), 64, ws.dy_layout(64), bn=64)[3] == 32
    assert ws.x_boxes(torch.empty(40, 128, dtype=torch.bfloat16), 64, ws.dy_layout(64))[3] == 0
    monkeypatch.setattr(ws, "SUB_BOX_ROWS", 8)
    assert ws.sub_box_rows(40, 64, 40, False, 64) == 8 and ws.sub_box_rows(7, 64, 7, False, 64) == 0
    monkeypatch.setattr(ws, "SUB_BOX_ROWS", 0)
    assert ws.x_boxes(x, 128, layout)[3] == 0


def test_rows_held_match_the_boxes_the_loader_copies():
    """``_rows_held`` (the epilogues' row of X per tile row) and ``_x_box`` (the loader's box starts) written out in
    torch from the same formulas: each row of X below M is held and stored by exactly one tile row, that row holds
    its own row of X, and no box copies a row past M, for tiles of 64-256 rows, one or more tiles, 1-31 rows past
    M and beyond."""
    xb = ws.SUB_BOX_ROWS
    for bm in (64, 128, 256):
        for m in range(xb, 3 * bm + 1):
            if m % bm == 0 or m < xb:
                continue
            m0 = (m // bm) * bm  # the last tile, which reaches past M
            r = torch.arange(bm)
            box0 = m0 + (r // xb) * xb
            starts = torch.minimum(m0 + torch.arange(0, bm, xb), torch.tensor(m - xb))  # _x_box's copies
            assert int((starts + xb).max()) <= m and int(starts.min()) >= 0
            copied = starts.repeat_interleave(xb) + r % xb  # the row of X in each tile row's shared memory
            tail = m - xb + r % xb
            held = torch.where(box0 + xb <= m, m0 + r, torch.where(tail >= box0, tail, torch.tensor(m)))
            stored = held < m
            assert torch.equal(held[stored], copied[stored]), (bm, m)
            assert sorted(held[stored].tolist()) == list(range(m0, m)), (bm, m)


@needs_ptxas
def test_serialization_check_sees_register_pressure():
    # One consumer of 128 rows with 128 columns of X keeps two chunks' operands and a 128 x 128 accumulator: more
    # than a thread's 255 registers allow, so ptxas serializes the wgmmas (the check above must be able to fail).
    r = aot.ws_report(ws.WsConfig(128, 128, 3, 1, 1, True))
    assert r["wgmma_serialized"]


def _x(m: int, k: int, dtype=torch.bfloat16) -> torch.Tensor:
    return torch.zeros(m, k, dtype=dtype)


def test_whole_tile_epilogues_keep_the_entries_before_stream_k(monkeypatch):
    """Run 34's in-flight stream-K entries ("words") and run 35's gate_up stream-K entries split tiles among CTAs.
    The residual + RMSNorm and SiLU x up epilogues need each tile whole in one CTA: they take the entry before
    (``WHOLE_TILE_WORDS``, its split summed by the last CTA) instead of the stream-K config made one CTA per tile;
    the RMSNorm row scale alone, which runs on stream-K, and the plain product keep the stream-K entry."""
    from types import SimpleNamespace

    monkeypatch.setattr(ws, "available", lambda device=None: True)
    sk = {key for key, cfg in ws.TUNED_WORDS.items() if cfg is not None and cfg.stream_k}
    in_flight = {key for key in sk if ws.TUNED_WORDS[key].in_flight}
    run35 = {(64, 37888, 3584), (64, 55296, 5120), (128, 55296, 5120)}
    assert in_flight and in_flight | run35 == set(ws.WHOLE_TILE_WORDS) and set(ws.WHOLE_TILE_WORDS) <= sk
    for (bucket, n, k), before in ws.WHOLE_TILE_WORDS.items():
        w = SimpleNamespace(n=n, k=k, k_pad=k, words=True)
        for m in {bucket, bucket // 2 + 1}:
            x = _x(m, k)
            if ws.words_key(m, n, k) != (bucket, n, k):
                continue  # a key between the buckets (FINE_MS) serves this M
            assert ws.pick(x, n, k, k, words=True) == ws.TUNED_WORDS[(bucket, n, k)]
            whole = ws.epilogue_config(x, w)
            assert whole == before._replace(fused=before.split_k > 1) and ws.tile_epilogue(whole, w)
            assert ws.epilogue_config(x, w, whole=False) == ws.TUNED_WORDS[(bucket, n, k)]
    # The older stream-K entries (chunks retired one by one) are still made one CTA per tile (7B qkv at M = 8).
    w = SimpleNamespace(n=4608, k=3584, k_pad=3584, words=True)
    assert ws.epilogue_config(_x(8, 3584), w) == ws.TUNED_WORDS[(8, 4608, 3584)]._replace(stream_k=0)


def test_pick_follows_the_tuned_buckets(monkeypatch):
    monkeypatch.setattr(ws, "available", lambda device=None: True)
    n, k = 37888, 3584  # Qwen2.5-7B gate_up
    assert ws.pick(_x(64, k), n, k, k) == ws.TUNED[(64, n, k)]
    assert ws.pick(_x(100, k), n, k, k) == ws.TUNED[(128, n, k)]  # M's bucket is the next power of two
    assert ws.pick(_x(17, k), n, k, k) == ws.TUNED[(32, n, k)]
    assert ws.pick(_x(16, k), n, k, k) == ws.TUNED[(16, n, k)]  # a 16-row decode tile beat the decode kernels
    assert ws.TUNED[(8, n, k)] is None and ws.pick(_x(8, k), n, k, k) is None  # they keep M <= 8 here
    assert ws.pick(_x(5000, k), n, k, k) is None  # no entry at 8192 or above: the slab path's M
    assert ws.pick(_x(64, k, torch.float16), n, k, k) is None
    assert ws.pick(_x(64, 2 * k)[:, :k], n, k, k) is None  # rows not dense: TMA would need a copy
    assert ws.pick(_x(64, 512), 96, 512, 512) is None  # no tuned entry for this shape
    assert ws.pick(_x(300, k), n, k, k) == ws.TUNED[(512, n, k)]
    # A bucket where the search found the other path faster is declined, also for M that round up to it ...
    assert ws.TUNED[(16, 4608, 3584)] is None
    assert ws.pick(_x(16, 3584), 4608, 3584, 3584) is None and ws.pick(_x(12, 3584), 4608, 3584, 3584) is None
    # ... and a key between the buckets (run 26) is nearer than the bucket: M = 513-768 take the M = 768 entry, M =
    # 769-1024 the M = 1024 one (run 32's stream-K; nvfp4_matmul's slab range sends M = 769-896 elsewhere first).
    assert ws.pick(_x(700, 5120), 5120, 5120, 5120) == ws.TUNED[(768, 5120, 5120)] is not None
    assert ws.pick(_x(1000, 5120), 5120, 5120, 5120) == ws.TUNED[(1024, 5120, 5120)] == ws._SK_RING
    # Above the largest measured bucket the slab path keeps M (7B o: no entry above 2048, run 32's key) ...
    assert ws.pick(_x(1500, 3584), 3584, 3584, 3584) == ws.TUNED[(2048, 3584, 3584)] == ws._SK_RING
    assert ws.pick(_x(3000, 3584), 3584, 3584, 3584) is None
    # ... and where run 31 measured stream-K through the ring faster up to M = 4096, its keys take M (7B gate_up).
    assert ws.pick(_x(1500, k), n, k, k) == ws.TUNED[(1536, n, k)] == ws.TUNED[(4096, n, k)] == ws._SK_RING


def test_keys_between_the_buckets_serve_the_m_down_to_the_next_key(monkeypatch):
    """Run 26's keys between the powers of two: an M takes the smallest key at or above it, so each key serves the M
    from the next lower key (or bucket) on; every table key is a power of two or one of ``FINE_MS`` (any other would
    never be looked up), and the "rows" layout's lookup keeps to the powers of two (the keys between were measured on
    "pairs")."""
    monkeypatch.setattr(ws, "available", lambda device=None: True)
    n, k = 37888, 3584  # 7B gate_up: forward keys at 640 / 768 / 896
    served = {m: ws.pick(_x(m, k), n, k, k) for m in (257, 385, 512, 513, 640, 641, 768, 769, 896, 897, 1024)}
    for m, key in ((257, 512), (385, 512), (512, 512), (513, 640), (640, 640), (641, 768), (768, 768), (769, 896),
                   (896, 896), (897, 1024), (1024, 1024)):
        assert served[m] == ws.TUNED[(key, n, k)], m
    assert ws.TUNED[(640, n, k)] != ws.TUNED[(768, n, k)]  # so the checks above can tell the keys apart
    for table in (ws.TUNED, ws.TUNED_BWD, ws.TUNED_BWD_ROWS, ws.TUNED_WORDS):
        for m, _, _ in table:
            assert m & (m - 1) == 0 or m in kern.FINE_MS, m
    dy = _x(300, 37888)
    assert ws.pick_grad_input(dy, n, k, k) == ws.TUNED_BWD[(384, n, k)]
    rows = {**ws.TUNED_BWD, **ws.TUNED_BWD_ROWS}[(512, n, k)]
    assert ws.pick_grad_input(dy, n, k, k, rows=True) == rows != ws.TUNED_BWD[(384, n, k)]


def test_words_table_keys_every_decode_bucket_of_its_shapes(monkeypatch):
    """A shape in ``TUNED_WORDS`` has an entry at every bucket of M = 1-128: a missing one would send its M to the
    next larger bucket's entry (``words_key``), e.g. M = 17-32 to a 64-row tile tuned for M = 64, instead of the
    default config. On 3B qkv (runs 40-41) M = 2-8 take the M = 8 entry, 9-16 the M = 16 one, 33-64 / 65-128 theirs,
    and so on to the last bucket, which serves every larger M."""
    monkeypatch.setattr(ws, "available", lambda device=None: True)
    for n, k in {(n, k) for _, n, k in ws.TUNED_WORDS}:
        assert all((b, n, k) in ws.TUNED_WORDS for b in (1, 8, 16, 32, 64, 128)), (n, k)
        # A shape keyed above 128 (the prefill's M, run 41 for 3B) is keyed at every power of two to the last bucket.
        if any(m > 128 and (nn, kk) == (n, k) for m, nn, kk in ws.TUNED_WORDS):
            assert all((b, n, k) in ws.TUNED_WORDS for b in (256, 512, 1024, 2048, ws.WORDS_MAX_BUCKET)), (n, k)
    n, k = 2560, 2048
    for m, bucket in ((1, 1), (2, 8), (8, 8), (9, 16), (16, 16), (17, 32), (32, 32), (33, 64), (64, 64), (65, 128),
                      (128, 128), (129, 192), (200, 256), (300, 384), (400, 512), (1100, 1280), (1500, 1536),
                      (1600, 2048), (3000, 4096), (9000, 4096)):
        assert ws.words_key(m, n, k) == (bucket, n, k), m
        assert ws.pick(_x(m, k), n, k, k, words=True) == ws.TUNED_WORDS[(bucket, n, k)], m
    # A shape the table lacks runs the default config.
    assert ws.words_key(200, 1536, 1024) is None
    assert ws.pick(_x(200, 1024), 1536, 1024, 1024, words=True) == ws.default_words_config(200, 1536, 1024)


def test_3b_pairs_tables_key_every_bucket_and_keep_small_m_on_the_kernels_before(monkeypatch):
    """Run 40's 3B entries on the trainer's "pairs" layout: every bucket from M = 32 (forward) / 1 (input gradient) to
    2048 is keyed, so no M takes a bucket's entry measured for another; the forward below ``MIN_M`` and the input
    gradient to M = 16 keep the kernels of before (no config), and above M = 2048 the slab path serves both."""
    monkeypatch.setattr(ws, "available", lambda device=None: True)
    shapes = ((2560, 2048), (2048, 2048), (22016, 2048), (2048, 11008))
    for n, k in shapes:
        assert all((b, n, k) in ws.TUNED for b in (32, 64, 128, 256, 512, 1024, 2048)), (n, k)
        assert all((b, n, k) in ws.TUNED_BWD for b in (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)), (n, k)
        for m in (1, 5, 16):
            assert ws.pick(_x(m, k), n, k, k) is None and ws.pick_grad_input(_x(m, n), n, k, k) is None
        for m in (2049, 4096):
            assert ws.pick(_x(m, k), n, k, k) is None and ws.pick_grad_input(_x(m, n), n, k, k) is None
    n, k = 2048, 11008  # down: M = 17-32 take the M = 32 entry, 257-512 the M = 512 one
    assert ws.pick(_x(17, k), n, k, k) == ws.TUNED[(32, n, k)] is not None
    assert ws.pick(_x(300, k), n, k, k) == ws.TUNED[(512, n, k)] != ws.TUNED[(256, n, k)]
    # gate_up's input gradient at M = 641-768 goes back to the slab path (its fine key), 769-1024 to the M = 1024 entry.
    n, k = 22016, 2048
    assert ws.pick_grad_input(_x(700, n), n, k, k) is None
    assert ws.pick_grad_input(_x(900, n), n, k, k) == ws.TUNED_BWD[(1024, n, k)] is not None


def test_last_tile_shifts_only_when_short(monkeypatch):
    """Run 27: the kernels shift the last M tile to end at row M only where M spans several tiles and the last one
    holds at most ``SHIFT_MAX_ROWS`` real rows (where reading past M was measured slow), not on the forward's 256-row
    tiles of W; never when switched off."""
    assert ws.SHIFT_MAX_ROWS == 32
    for m, bm, want in ((129, 64, True), (160, 64, True), (161, 64, False), (192, 64, False), (520, 256, True),
                        (700, 256, False), (136, 256, False), (64, 64, False), (33, 32, True), (8, 8, False)):
        assert ws.shift_last_tile(m, bm) is want, (m, bm)
    assert not ws.shift_last_tile(264, 128, 256) and ws.shift_last_tile(264, 256, 128)
    monkeypatch.setattr(ws, "SHIFT_LAST_TILE", False)
    assert not ws.shift_last_tile(129, 64)


def test_tma_rows_declares_only_rows_the_storage_holds(monkeypatch):
    """X's descriptor declares rows past M only where X's storage holds them (a row slice of a larger buffer), up to
    whole tiles; a tensor of its own, a switched-off ``SPARE_ROWS`` or a too-short buffer get M (or what fits), and
    the last tile is then shifted only where the descriptor stops short of whole tiles."""
    fresh = torch.empty(129, 64, dtype=torch.bfloat16)
    assert ws.tma_rows(fresh, 64) == 129 and ws.shift_last_tile(129, 64, rows=129)
    buf = torch.empty(300, 64, dtype=torch.bfloat16)
    assert ws.tma_rows(buf[:129], 64) == 192 and not ws.shift_last_tile(129, 64, rows=192)
    assert ws.tma_rows(buf[:129], 256) == 256 and ws.tma_rows(buf[:1], 8) == 8
    assert ws.tma_rows(buf[200:280], 64) == 100  # rows 200-299 held: 100 of the 128 whole tiles' rows
    assert ws.shift_last_tile(129, 64, rows=150)  # still short of 192
    # A last row needs only its own columns: rows of a wider pitch whose storage ends after row 5's 64 elements.
    wide = torch.empty(6 * 128, dtype=torch.bfloat16)[: 5 * 128 + 64].as_strided((2, 64), (128, 1))
    assert ws.tma_rows(wide, 8) == 6
    monkeypatch.setattr(ws, "SPARE_ROWS", False)
    assert ws.tma_rows(buf[:129], 64) == 129


def test_padded_empty_holds_whole_tiles_of_every_config_the_dispatch_picks(monkeypatch):
    """``padded_empty``'s rows cover whole tiles of the BM the dispatch runs M on, for every table's layer at M =
    1-300 and a grid above (forward on both layouts, input gradient on both), so a product that reads it as X needs
    no tile past its storage."""
    monkeypatch.setattr(ws, "available", lambda device=None: True)
    monkeypatch.setattr(kern, "_sms", lambda device=None: 132)
    shapes = {(n, k) for table in (ws.TUNED, ws.TUNED_WORDS, ws.TUNED_BWD, ws.TUNED_BWD_ROWS) for _, n, k in table}
    for m in [*range(1, 301), 383, 520, 700, 1025, 2100, 4095]:
        for n, k in shapes:
            for cfg in (ws.pick(_x(m, k), n, k, k), ws.pick(_x(m, k), n, k, k, words=True),
                        ws.pick_grad_input(_x(m, n), n, k, k), ws.pick_grad_input(_x(m, n), n, k, k, rows=True)):
                if cfg is not None:
                    assert ws.padded_rows(m) >= -(-m // cfg.bm) * cfg.bm, (m, n, k, cfg)
    t = ws.padded_empty(5, 96, torch.empty(0))
    assert t.shape == (5, 96) and t.is_contiguous() and ws.tma_rows(t, 8) == 8
    assert ws.padded_rows(257) == 512 and ws.padded_rows(4097) == 4352


def test_slab_ranges_follow_the_keys_and_stay_off_the_other_layouts():
    """``SLAB_RANGES`` covers whole intervals between keys (each one measured at its upper end), never overlaps, and
    names a (direction, N, K) of the measured layers."""
    keys = set(kern.FINE_MS) | {1 << i for i in range(14)}
    for (direction, n, k), ranges in kern.SLAB_RANGES.items():
        assert direction in ("fwd", "bwd", "words")
        for lo, hi in ranges:
            assert lo - 1 in keys and hi in keys and lo <= hi
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))
        assert kern._slab_range(direction, ranges[0][0], n, k) and not kern._slab_range(direction, ranges[0][0] - 1, n, k)
    assert kern._slab_range("fwd", 700, 3584, 3584) and not kern._slab_range("fwd", 800, 3584, 3584)
    assert not kern._slab_range("bwd", 700, 3584, 3584) and not kern._slab_range("fwd", 700, 3584, 18944)
    assert kern._slab_range("words", 960, 4608, 3584) and not kern._slab_range("fwd", 960, 4608, 3584 + 128)


def test_words_lookup_takes_the_keys_between_buckets(monkeypatch):
    """The forward on "words" looks up ``TUNED_WORDS`` the same way: 7B qkv's M = 513-896 take its M = 896 key (before
    run 26 they fell past the declined M = 1024 bucket to the tile loop), M = 897-1024 decline the kernel (the slab
    path, ``SLAB_RANGES``)."""
    monkeypatch.setattr(ws, "available", lambda device=None: True)
    n, k = 4608, 3584
    assert ws.TUNED_WORDS[(1024, n, k)] is None
    for m in (513, 700, 896):
        assert ws.pick(_x(m, k), n, k, k, words=True) == ws.TUNED_WORDS[(896, n, k)] is not None
    assert ws.pick(_x(897, k), n, k, k, words=True) is None and kern._slab_range("words", 897, n, k)
    assert ws.pick(_x(400, k), n, k, k, words=True) == ws.TUNED_WORDS[(512, n, k)]
    # Run 27's keys at M = 96 / 192: M = 65-96 and 129-192 take them, M = 97-128 and 193-256 the buckets' entries.
    for m, key in ((65, 96), (96, 96), (97, 128), (128, 128), (129, 192), (192, 192), (193, 256), (256, 256)):
        assert ws.pick(_x(m, k), n, k, k, words=True) == ws.TUNED_WORDS[(key, n, k)], m
    assert len({ws.TUNED_WORDS[(key, n, k)] for key in (96, 128, 192, 256)}) == 4  # so the checks can tell them apart


def test_pick_below_min_m_takes_only_small_buckets(monkeypatch):
    # Decode shapes (M < MIN_M) take entries measured at M = 1 / 8 / 16 against the decode kernels, never a larger
    # bucket's (a 64-row tile measured 1.4x slower there), and fall back to those kernels without one.
    monkeypatch.setattr(ws, "available", lambda device=None: True)
    monkeypatch.setattr(ws, "TUNED", dict(ws.TUNED))
    n, k = 37888, 3584
    small8, small16 = ws.WsConfig(8, 128, 6, 1, 1, True, 128), ws.WsConfig(16, 64, 6, 4, 1, True, 80, True)
    for bucket in (1, 8, 16):
        ws.TUNED.pop((bucket, n, k), None)
    assert ws.TUNED[(32, n, k)] is not None
    assert all(ws.pick(_x(m, k), n, k, k) is None for m in (1, 4, 8, 12, 16))
    ws.TUNED[(8, n, k)] = small8
    ws.TUNED[(16, n, k)] = small16
    assert ws.pick(_x(3, k), n, k, k) == small8 and ws.pick(_x(8, k), n, k, k) == small8
    assert ws.pick(_x(12, k), n, k, k) == small16 and ws.pick(_x(16, k), n, k, k) == small16
    assert ws.pick(_x(1, k), n, k, k) is None  # buckets 1, 2, 4 hold nothing
    ws.TUNED[(16, n, k)] = None  # declined at 16: M = 9-16 keeps the decode kernels, not the M = 32 entry
    assert ws.pick(_x(12, k), n, k, k) is None
    assert ws.pick(_x(17, k), n, k, k) == ws.TUNED[(32, n, k)]


@needs_ptxas
def test_reports_compiled_together_match_one_by_one_and_the_cache_hands_out_copies(monkeypatch):
    """``aot.ws_reports`` (threads overlapping ptxas) gives what ``ws_report`` gives alone; a report taken from the
    cache is a copy, so a test editing one cannot change what the next one reads."""
    monkeypatch.setattr(aot, "_WS_REPORTS", {})
    cfgs = [ws.WsConfig(8, 64, 6, 1, 1, True, 80), ws.WsConfig(16, 64, 6, 4, 1, True, 80, True)]
    together = aot.ws_reports([((c, c.split_k > 1), {"words": True}) for c in cfgs])
    assert len(aot._WS_REPORTS) == 2
    monkeypatch.setattr(aot, "_WS_REPORTS", {})
    alone = [aot.ws_report(c, c.split_k > 1, words=True) for c in cfgs]
    assert together == alone and alone[0] != alone[1]
    alone[0]["registers"] = -1
    assert aot.ws_report(cfgs[0], False, words=True)["registers"] == together[0]["registers"] > 0


@needs_ptxas
def test_words_layout_configs_compile_to_fewer_loop_instructions():
    # Every TUNED_WORDS config builds for the words layout without spills or serialized wgmmas; on the same config the
    # words layout's loop is shorter than the pairs layout's (12 instructions per 8 weights instead of 20, two scales
    # per conversion), and putting its registers back in K order moved no data (no shuffles).
    configs = [c for c in ws.TUNED_WORDS.values() if c is not None]
    aot.ws_reports([(key, {"words": True}) for key in {(c._replace(split_k=1), c.split_k > 1) for c in configs}])
    seen = set()
    for cfg in configs:
        key = (cfg._replace(split_k=1), cfg.split_k > 1)
        if key in seen:
            continue
        seen.add(key)
        r = aot.ws_report(*key, words=True)
        assert not r["wgmma_serialized"], (cfg, r)
        _assert_spills_allowed(cfg, r)
        if cfg.maxnreg is not None:
            assert r["registers"] <= cfg.maxnreg, (cfg, r)
        assert r["wgmma_waits"] == ([0, 2] if cfg.in_flight else [0]), (cfg, r)
    assert len(seen) >= 10
    for cfg in (ws.WsConfig(16, 64, 6, 1, 1, True, 80), ws.WsConfig(64, 64, 5, 1, 1, True, 128)):
        pairs, words = aot.ws_report(cfg), aot.ws_report(cfg, words=True)
        n_pairs, n_words = sum(pairs["loop_opcodes"].values()), sum(words["loop_opcodes"].values())
        assert n_words < 0.9 * n_pairs, (cfg, n_pairs, n_words)
        assert "SHFL" not in words["loop_opcodes"] and words["loop_opcodes"].get("SHF", 0) > 0, words


def test_pick_on_the_words_layout_always_finds_a_config(monkeypatch):
    # A words-layout weight has no other fast path on a Hopper GPU: table entries, the default elsewhere, the slab
    # path (None) only where the table says so, buckets above the largest measured one take its entries.
    monkeypatch.setattr(ws, "available", lambda device=None: True)
    n, k = 4608, 3584  # Qwen2.5-7B qkv
    assert ws.pick(_x(1, k), n, k, k, words=True) == ws.TUNED_WORDS[(1, n, k)]
    assert ws.pick(_x(3, k), n, k, k, words=True) == ws.TUNED_WORDS[(8, n, k)]  # buckets 2 / 4 take 8's
    assert ws.pick(_x(100, k), n, k, k, words=True) == ws.TUNED_WORDS[(128, n, k)]
    assert ws.TUNED_WORDS[(4096, n, k)] is None and ws.pick(_x(3000, k), n, k, k, words=True) is None
    assert ws.pick(_x(9000, k), n, k, k, words=True) is None  # above 4096: the 4096 bucket's entry
    big = ws.pick(_x(9000, 5120), 5120, 5120, 5120, words=True)
    assert big is not None and big == ws.TUNED_WORDS[(4096, 5120, 5120)]
    cfg = ws.pick(_x(5, 512), 96, 512, 512, words=True)  # no entry for this shape: the default
    assert cfg == ws.default_words_config(5, 96, 512) and cfg.bm == 8 and cfg.split_k >= 1
    assert ws.default_words_config(24, 4096, 4096).bm == 32
    assert ws.default_words_config(300, 4096, 4096)[:2] == (128, 64)
    assert ws.default_words_config(2000, 4096, 4096) == ws.WsConfig(128, 256, 3, 1, 2, False)
    small = ws.default_words_config(1, 3584, 3584)  # 56 tiles of 64 rows: split until about 2 x 132 programs
    assert small.split_k == 4 and small.fused


@needs_ptxas
def test_fused_split_sum_compiles_with_counters_and_partition_barriers():
    # Split-K partials summed by the last CTA: two atomics on the tile counter per consumer (add, then the reset) and
    # the epilogue's barrier scoped to the consumer warpgroup's 128 threads (a CTA-wide one would wait for the loader).
    for cfg in (ws.WsConfig(16, 64, 6, 4, 1, True, 80, True), ws.WsConfig(8, 256, 4, 4, 2, False, None, True),
                ws.WsBwdConfig(8, 4, 8, 80, True)):
        fused = aot.ws_report(cfg, out_f32=True)
        plain = aot.ws_report(cfg._replace(fused=False), out_f32=True)
        consumers = getattr(cfg, "consumers", 1)
        assert fused["counter_atomics"] == 2 * consumers and plain["counter_atomics"] == 0, (cfg, fused, plain)
        assert fused["consumer_barriers"] > plain["consumer_barriers"], (cfg, fused, plain)
        assert not fused["wgmma_serialized"] and fused["spill_bytes"] == 0
        assert fused["registers"] <= (cfg.maxnreg or 168)


@needs_ptxas
def test_stream_k_compiles_with_tile_counters_and_a_clean_chunk_loop():
    # The stream-K forward: per consumer one atomic add on a tile's counter (a part stored) and its reset by the CTA
    # that sums the tile, before the tile's chunks or after them (two places; its wait on the count is an acquiring
    # load, not counted), the epilogue
    # barrier scoped to the consumer warpgroup, and the same chunk loop as the one-tile-per-CTA kernel (the same
    # wgmmas, nothing spilled inside it) on both code layouts.
    for cfg in (ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1), ws.WsConfig(64, 64, 3, 1, 1, False, 128, stream_k=2)):
        for words in (False, True):
            sk = aot.ws_report(cfg, words=words)
            tiled = aot.ws_report(cfg._replace(stream_k=0), words=words)
            assert sk["counter_atomics"] == 3 * cfg.consumers and tiled["counter_atomics"] == 0, (cfg, sk)
            assert sk["consumer_barriers"] > tiled["consumer_barriers"], (cfg, sk, tiled)
            assert not sk["wgmma_serialized"] and sk["spill_bytes"] == 0, (cfg, sk)
            loop, ref = sk["mma_loop_opcodes"], tiled["mma_loop_opcodes"]
            assert loop["HGMMA"] == ref["HGMMA"] and "LDL" not in loop and "STL" not in loop, (cfg, loop, ref)
            if cfg.maxnreg is not None:
                assert sk["registers"] <= cfg.maxnreg


@needs_ptxas
def test_pdl_copies_only_w_before_waiting_for_the_launch_before():
    # Programmatic dependent launch: every partition (the loader's two paths, the consumer) waits for the launches
    # before this one (griddepcontrol.wait) and then lets the next one start (launch_dependents); before the loader's
    # wait only W's code and scale copies are issued (X's two boxes per stage come after it: the kernel before may be
    # writing X). The chunk loop (but for a register move or two) and the registers are those of the launch without
    # PDL, which has neither instruction.
    for cfg, words, out_f32 in ((ws.WsConfig(8, 128, 6, 7, 1, True, 128, True), True, True),  # 7B qkv, M = 1
                                (ws.WsConfig(16, 64, 6, 1, 1, True, 96, stream_k=2), True, False),  # 7B o, M = 16
                                (ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1), False, False)):
        off = aot.ws_report(cfg, out_f32=out_f32, words=words)
        assert off["grid_waits"] == 0 and off["dependent_launches"] == 0 and off["copies_before_wait"] == []
        for on in (aot.ws_report(cfg, out_f32=out_f32, words=words, pdl=True),):
            assert on["grid_waits"] >= 1 + cfg.consumers and on["dependent_launches"] >= 1 + cfg.consumers, (cfg, on)
            # (0 on the path of a stream-K CTA whose run is empty.)
            assert max(on["copies_before_wait"], default=0) == 2 and set(on["copies_before_wait"]) <= {0, 2}, (cfg, on)
            loop, ref = on["mma_loop_opcodes"], off["mma_loop_opcodes"]
            assert all(loop.get(op) == ref.get(op) for op in ("HGMMA", "LOP3", "HMUL2", "PRMT", "LDS")), (cfg, loop)
            assert abs(sum(loop.values()) - sum(ref.values())) <= 2, (cfg, loop, ref)  # (a register move or two)
            assert on["registers"] <= (cfg.maxnreg or 232) and not on["wgmma_serialized"] and on["spill_bytes"] == 0


def test_pdl_launches_except_where_it_measured_slower(monkeypatch):
    plain, sk, sk_waves = ws.WsConfig(8, 128, 6, 7, 1, True, 128, True), ws.WsConfig(16, 64, 6, stream_k=2), \
        ws.WsConfig(8, 128, 5, 1, 1, False, 80, stream_k=2, dp_waves=True)
    monkeypatch.delenv("QERL_PDL", raising=False)
    assert ws._pdl_args(plain) == {"PDL": False, "launch_pdl": False}  # off by default (qerl.kernels.pdl)
    with pdl(True):
        assert ws._pdl_args(plain) == ws._pdl_args(sk) == {"PDL": True, "launch_pdl": True}
        # (A split summed by the second kernel, stream-K with whole waves: 1.01-1.25x the time with PDL, run 36.)
        assert ws._pdl_args(plain, True) == ws._pdl_args(sk_waves) == {"PDL": False, "launch_pdl": False}


@needs_ptxas
def test_rmsnorm_epilogues_compile_on_the_7b_decode_configs_and_leave_the_chunk_loop_alone():
    # The residual + RMSNorm epilogue (o / down: unsplit and splits summed in the kernel), the norm's row scale
    # (qkv / gate_up, with SiLU x up, and on stream-K) and qkv's bias + RoPE + KV-cache write: within the decode tiles' register caps, nothing spilled or
    # serialized, and the chunk loop of the kernel without them up to register moves (only the stores after it
    # change; the loop found as the densest in wgmmas: waits in the epilogue close other stretches that hold some).
    cases = [(ws.WsConfig(8, 64, 6, 4, 1, True, 80, True), True, {"add_norm": True}),
             (ws.WsConfig(8, 64, 6, 7, 1, True, 80, True), True, {"add_norm": True}),
             (ws.WsConfig(8, 64, 6, 1, 1, True, 80), False, {"add_norm": True}),
             (ws.WsConfig(8, 64, 6, 1, 1, True, 80), False, {"glu": True, "row_norm": True}),
             (ws.WsConfig(16, 64, 6, 4, 1, True, 80, True), True, {"glu": True, "row_norm": True}),
             (ws.WsConfig(8, 128, 6, 7, 1, True, 128, True), True, {"row_norm": True}),
             (ws.WsConfig(8, 64, 6, 1, 1, False, 64, stream_k=4), False, {"row_norm": True}),
             (ws.WsConfig(8, 128, 6, 7, 1, True, 128, True), True, {"rope": True, "row_norm": True}),
             (ws.WsConfig(8, 128, 4, 7, 1, False, 80, True), True, {"rope": True, "row_norm": True}),
             (ws.WsConfig(16, 128, 6, 1, 1, True, 128), False, {"rope": True})]
    aot.ws_reports([((cfg,), {"out_f32": out_f32, "words": True, **extra}) for cfg, out_f32, kw in cases
                    for extra in (kw, {})])
    for cfg, out_f32, kw in cases:
        with_epi = aot.ws_report(cfg, out_f32=out_f32, words=True, **kw)
        without = aot.ws_report(cfg, out_f32=out_f32, words=True)
        assert not with_epi["wgmma_serialized"] and with_epi["spill_bytes"] == 0, (cfg, kw, with_epi)
        assert with_epi["registers"] <= cfg.maxnreg, (cfg, kw, with_epi)
        loop, ref = with_epi["chunk_loop_opcodes"], without["chunk_loop_opcodes"]
        assert loop["HGMMA"] == ref["HGMMA"] >= 8 and "LDL" not in loop and "STL" not in loop, (cfg, kw, loop)
        for op in ("LDS", "HMUL2", "HFMA2", "PRMT", "SYNCS"):  # the decode and the barriers, as before
            assert loop.get(op) == ref.get(op), (cfg, kw, op, loop, ref)
        assert sum(loop.values()) <= 1.05 * sum(ref.values()), (cfg, kw, loop, ref)


def _runs(plan: tuple[int, int, int], steps: int) -> list[tuple[int, int]]:
    """The [begin, end) runs of the (tile, step) sequence that ``_sk_run`` gives each CTA of a launch of ``plan``."""
    iters, sk_total, grid = plan
    sk_ctas = -(-sk_total // iters)
    return [(g * iters, min(g * iters + iters, sk_total)) if g < sk_ctas
            else (sk_total + (g - sk_ctas) * steps, sk_total + (g - sk_ctas + 1) * steps) for g in range(grid)]


@pytest.mark.parametrize("tiles,steps", [(160, 112), (160, 864), (160, 80), (133, 16), (264, 50), (320, 80),
                                         (40, 100), (112, 296), (7, 5), (300, 7)])
def test_stream_k_plans_cover_every_step_once(tiles, steps):
    # Pure stream-K as before (every step, evenly over one wave of CTAs); with dp_waves: the leftover tiles' runs
    # each inside one tile and as long as each other (the same stretch of the reduction in every split tile), at
    # most a wave of them, at least SK_MIN_RUN steps unless a tile is not split, then one whole tile per CTA.
    wave = 132
    total = tiles * steps
    pure = ws.sk_plan(tiles, steps, wave)
    iters = -(-total // min(total, wave))
    assert pure == (iters, total, -(-total // iters))
    for plan in (pure, ws.sk_plan(tiles, steps, wave, dp_waves=True)):
        runs = _runs(plan, steps)
        covered = sorted(i for b, e in runs for i in range(b, e))
        assert covered == list(range(total)), plan
        assert all(e > b for b, e in runs), plan
    iters, sk_total, grid = ws.sk_plan(tiles, steps, wave, dp_waves=True)
    runs = _runs((iters, sk_total, grid), steps)
    sk = runs[: -(-sk_total // iters)] if sk_total else []
    assert len(sk) <= wave and (tiles - sk_total // steps) % wave == 0
    assert all(b // steps == (e - 1) // steps and e - b == iters for b, e in sk), (iters, sk_total)
    assert iters == steps or iters >= ws.SK_MIN_RUN
    assert all(e - b == steps and b % steps == 0 for b, e in runs[len(sk):])
    if tiles > wave and tiles % wave and steps >= 4 * ws.SK_MIN_RUN and steps % 4 == 0 and tiles % wave <= wave // 4:
        assert iters < steps  # a leftover this small is split


@needs_ptxas
@pytest.mark.parametrize("tiles,steps", [(144, 28), (160, 40), (112, 28), (112, 40), (1184, 28), (200, 108),
                                         (36, 28), (3, 16),
                                         # the input gradient's (256-row tiles of dY by 128 columns of K, steps of 64
                                         # rows of W) at M = 1024: 7B down, 14B o, 14B qkv, 32B gate_up; 7B down at 256
                                         (592, 56), (160, 80), (160, 112), (160, 864), (148, 56)])
def test_stream_k_split_tiles_are_summed_where_their_first_chunk_is(tiles, steps):
    """Run 32's sum of a split tile (``_sk_add_parts`` / ``_sk_seed_part``; the input gradient's since run 33) on the
    runs ``sk_plan`` makes for a wave of 132 CTAs: the CTA whose run holds the tile's first chunk ends its run inside the tile; each other CTA holding
    part of it starts its run inside it (its part, its run's first tile, is stored before it waits for anything), and
    their number is the count the summing CTA waits for. Where runs are at least a tile long there is one such CTA,
    the next, and its part is stored (in steps from the runs' common start) before the summing CTA reaches the tile,
    so the seed's wait costs nothing in a wave that runs together."""
    for dp_waves in (False, True):
        iters, sk_total, grid = plan = ws.sk_plan(tiles, steps, 132, dp_waves=dp_waves)
        runs = _runs(plan, steps)
        for t in range(sk_total // steps):
            holders = [g for g, (b, e) in enumerate(runs) if b < (t + 1) * steps and e > t * steps]
            if len(holders) == 1:
                continue
            head, others = holders[0], holders[1:]
            b, e = runs[head]
            assert b <= t * steps < e < (t + 1) * steps, (t, runs[head])
            assert all(t * steps < runs[g][0] for g in others)
            assert ((t + 1) * steps - 1) // iters - head == len(others)  # the kernel's count of the other parts
            if iters >= steps:
                assert others == [head + 1]
                assert (t + 1) * steps - runs[head + 1][0] <= t * steps - b, (t, runs[head], runs[head + 1])


def test_two_consumer_input_gradient_decodes_one_half_each():
    # One consumer per half of the chunk: each dequantizes one nibble of the code bytes (half the scale products of the
    # one-consumer step, which dequantizes both) and issues the wgmmas of one accumulator; as stream-K too.
    one = aot.ws_report(ws.WsBwdConfig(128, 4, 1))
    for cfg in (ws.WsBwdConfig(128, 6, 1, consumers=2), ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2)):
        two = aot.ws_report(cfg)
        loop, ref = two["mma_loop_opcodes"], one["mma_loop_opcodes"]
        assert not two["wgmma_serialized"] and "LDL" not in loop and "STL" not in loop, (cfg, two)
        assert loop["HGMMA"] * 2 == ref["HGMMA"], (loop, ref)
        assert loop["HMUL2"] * 2 == ref["HMUL2"], (loop, ref)  # the FMAs with -0: multiplies in SASS
        # Stream-K: per consumer a part's count (``_sk_put_part``) and the summing CTA's two resets (seeded, added).
        assert two["counter_atomics"] == (6 if cfg.stream_k else 0), (cfg, two)


@needs_ptxas
def test_input_gradient_in_flight_keeps_a_steps_wgmmas_under_the_next():
    # WsBwdConfig.in_flight: the wait after a step's wgmmas leaves that step's two groups outstanding (DEPBAR 2) and
    # retires them under the next step's dequantization, at the register caps the "fill" search gives each tile
    # (benchmarks/gemm_ws.py: 80 for BM = 8 / 16, 96 for 32, 128 for 64, none for 128) without spills or serialized
    # wgmmas; the loop decodes two steps per trip (twice the wgmmas of the per-step loop's trip). Split partials are
    # summed in the kernel on the decode tiles (as the search tries them: ``nvfp4_gemm._fuse_reduction``), by the
    # second kernel on the others.
    cases = [(ws.WsBwdConfig(bm, 6, 4 if out_f32 else 1, reg, fused=out_f32 and bm <= 16, in_flight=True), out_f32)
             for bm, reg in ((8, 80), (16, 80), (32, 96), (64, 128), (128, None)) for out_f32 in (False, True)]
    aot.ws_reports([((c,), {"out_f32": out_f32}) for cfg, out_f32 in cases
                    for c in (cfg, cfg._replace(in_flight=False))])
    for cfg, out_f32 in cases:
        r = aot.ws_report(cfg, out_f32=out_f32)
        per_step = aot.ws_report(cfg._replace(in_flight=False), out_f32=out_f32)
        assert r["wgmma_waits"] == [0, 2] and per_step["wgmma_waits"] == [0], (cfg, r, per_step)
        assert not r["wgmma_serialized"] and r["spill_bytes"] == 0, (cfg, r)
        assert r["chunk_loop_opcodes"]["HGMMA"] == 2 * per_step["chunk_loop_opcodes"]["HGMMA"], (cfg, r)
    # Below those caps ptxas serializes them (so the search does not try them).
    assert aot.ws_report(ws.WsBwdConfig(8, 6, 1, 64, in_flight=True))["wgmma_serialized"]


@needs_ptxas
def test_two_consumer_input_gradient_takes_decode_tiles():
    # Two consumers (one per half of the chunk) on 8- to 32-row tiles of dY, split or as stream-K: each issues the
    # wgmmas of its half only (four per step against the one-consumer tile's eight), no spills.
    one = aot.ws_report(ws.WsBwdConfig(8, 6, 1, 64))
    for cfg in (ws.WsBwdConfig(8, 6, 1, consumers=2, stream_k=1), ws.WsBwdConfig(16, 6, 1, consumers=2, stream_k=2),
                ws.WsBwdConfig(32, 6, 4, consumers=2)):
        r = aot.ws_report(cfg, out_f32=cfg.split_n > 1)
        assert not r["wgmma_serialized"] and r["spill_bytes"] == 0, (cfg, r)
        assert r["mma_loop_opcodes"]["HGMMA"] * 2 == one["mma_loop_opcodes"]["HGMMA"], (cfg, r, one)


def test_pick_grad_input_follows_its_own_table(monkeypatch):
    monkeypatch.setattr(ws, "available", lambda device=None: True)
    n, k = 5120, 27648  # Qwen2.5-32B down: dY [M, 5120], dX [M, 27648]
    assert ws.pick_grad_input(_x(128, n), n, k, k) == ws.TUNED_BWD[(128, n, k)]
    assert ws.pick_grad_input(_x(16, n), n, k, k) == ws.TUNED_BWD[(16, n, k)]  # measured at M = 1 / 8 / 16 too
    assert ws.pick_grad_input(_x(1, n), n, k, k) == ws.TUNED_BWD[(1, n, k)]
    # 32B down at M = 2049-4096: declined (run 33: the slab path faster under sustained load)
    assert ws.TUNED_BWD[(4096, n, k)] is None and ws.pick_grad_input(_x(3000, n), n, k, k) is None
    assert ws.pick_grad_input(_x(2000, n), n, k, k) == ws.TUNED_BWD[(2048, n, k)]
    n, k = 5120, 5120  # 14B / 32B o: run 33's stream-K at M = 1024 (declined before), taken at 256 and at M = 3
    assert ws.pick_grad_input(_x(1024, n), n, k, k) == ws.TUNED_BWD[(1024, n, k)] == ws._SK_BWD
    assert ws.pick_grad_input(_x(256, n), n, k, k) == ws.TUNED_BWD[(256, n, k)]
    assert ws.pick_grad_input(_x(3, n), n, k, k) == ws.TUNED_BWD[(8, n, k)]
    n, k = 3584, 18944  # 7B down: M = 9-16 takes the M = 16 entry, not the M = 32 one
    assert ws.TUNED_BWD[(16, n, k)] != ws.TUNED_BWD[(32, n, k)]
    assert ws.pick_grad_input(_x(12, n), n, k, k) == ws.TUNED_BWD[(16, n, k)]
    # A declined bucket is not skipped either: with M = 9-16 declined, such M takes the other path
    monkeypatch.setitem(ws.TUNED_BWD, (16, n, k), None)
    assert ws.pick_grad_input(_x(12, n), n, k, k) is None


def test_pick_grad_input_on_rows_replaces_only_its_own_buckets(monkeypatch):
    """A "rows" weight takes ``TUNED_BWD_ROWS``' entry where that table has M's nearest bucket, else
    ``TUNED_BWD``'s: a rows entry of a larger bucket never replaces a nearer ``TUNED_BWD`` entry."""
    monkeypatch.setattr(ws, "available", lambda device=None: True)
    n, k = 3584, 3584  # 7B o: a rows entry at M = 64 only
    assert (64, n, k) in ws.TUNED_BWD_ROWS and (16, n, k) not in ws.TUNED_BWD_ROWS
    assert ws.pick_grad_input(_x(64, n), n, k, k, rows=True) == ws.TUNED_BWD_ROWS[(64, n, k)]
    assert ws.pick_grad_input(_x(40, n), n, k, k, rows=True) == ws.TUNED_BWD_ROWS[(64, n, k)]
    assert ws.pick_grad_input(_x(64, n), n, k, k) == ws.TUNED_BWD[(64, n, k)] != ws.TUNED_BWD_ROWS[(64, n, k)]
    assert ws.pick_grad_input(_x(16, n), n, k, k, rows=True) == ws.TUNED_BWD[(16, n, k)]
    n, k = 5120, 5120  # 14B o: rows entries at M = 16-128; M = 1 and M = 1024 keep TUNED_BWD's buckets
    assert (16, n, k) in ws.TUNED_BWD_ROWS and (1, n, k) not in ws.TUNED_BWD_ROWS
    assert ws.pick_grad_input(_x(1, n), n, k, k, rows=True) == ws.TUNED_BWD[(1, n, k)]
    assert ws.pick_grad_input(_x(1024, n), n, k, k, rows=True) == ws.TUNED_BWD[(1024, n, k)]
    # A table loaded for a shape only the rows table knows still serves it.
    monkeypatch.setattr(ws, "TUNED_BWD_ROWS", dict(ws.TUNED_BWD_ROWS))
    cfg = ws.WsBwdConfig(64, 4, 1, 128, in_flight=True)
    assert kern.load_tuned_configs({"wsbwdr|64|96|512": cfg._asdict()}) == 1
    assert ws.pick_grad_input(_x(64, 96), 96, 512, 512, rows=True) == cfg
    assert ws.pick_grad_input(_x(64, 96), 96, 512, 512) is None
    with pytest.raises(ValueError, match="rows-layout weight has no other fast path"):
        kern.load_tuned_configs({"wsbwdr|32|96|512": None})


@needs_ptxas
def test_rows_layout_input_gradient_decodes_words():
    """On the "rows" layout the input gradient decodes each ldmatrix.trans word as the forward's words (12
    instructions per 8 weights, no PRMT spreading the bytes) instead of 18: about a quarter fewer instructions in
    the step loop, the same loads and wgmmas, no serialized wgmmas (but at 48 registers) and spills only where
    "pairs" allows them; for every shipped config (both tables)."""
    configs = [c for c in list(ws.TUNED_BWD.values()) + list(ws.TUNED_BWD_ROWS.values()) if c is not None]
    keys = {(c._replace(split_n=1), c.split_n > 1) for c in configs}
    aot.ws_reports([(key, opts) for key in keys for opts in ({"rows": True}, {})])  # compiled two at a time
    seen = set()
    for cfg in configs:
        key = (cfg._replace(split_n=1), cfg.split_n > 1)
        if key in seen:
            continue
        seen.add(key)
        rows, pairs = aot.ws_report(*key, rows=True), aot.ws_report(*key)
        # 48 registers (five CTAs per SM, run 23's entries where that fits a layer's CTAs in one wave): ptxas
        # serializes the wgmmas of the 8-row tile, which measured faster there all the same.
        assert not rows["wgmma_serialized"] or cfg.maxnreg == 48, (cfg, rows)
        _assert_spills_allowed(cfg, rows)
        r, p = rows["chunk_loop_opcodes"], pairs["chunk_loop_opcodes"]
        for op in ("HGMMA", "LDSM", "LDS", "HMUL2"):
            assert r.get(op) == p.get(op), (cfg, op, r, p)
        assert "PRMT" not in r and p["PRMT"] > 0, (cfg, r, p)
        assert sum(r.values()) <= 0.8 * sum(p.values()), (cfg, sum(r.values()), sum(p.values()))
    assert len(seen) >= 3


def test_environment_switch_turns_the_kernels_off(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(ws, "_hopper", lambda index: True)
    monkeypatch.setattr(ws, "_usable", lambda t, cols: ws.available())  # no real device behind the tensor here
    n, k = 37888, 3584
    assert ws.pick(_x(64, k), n, k, k) == ws.TUNED[(64, n, k)]
    monkeypatch.setenv("QERL_WS_KERNELS", "0")
    assert not ws.available() and ws.pick(_x(64, k), n, k, k) is None


def test_pick_declines_without_a_hopper_gpu():
    assert not ws.available(torch.device("cpu"))
    assert ws.pick(_x(64, 3584), 37888, 3584, 3584) is None
    assert ws.pick_grad_input(_x(64, 37888), 37888, 3584, 3584) is None


def test_load_tuned_configs_adds_kernel_entries(monkeypatch):
    monkeypatch.setattr(ws, "TUNED", dict(ws.TUNED))
    monkeypatch.setattr(kern, "TUNED", dict(kern.TUNED))
    fields = ws.WsConfig(64, 64, 4, 2, 1, True, 128)._asdict()
    assert kern.load_tuned_configs({"ws|64|96|512": fields}) == 1
    assert ws.TUNED[(64, 96, 512)] == ws.WsConfig(**fields)
    monkeypatch.setattr(ws, "TUNED_BWD", dict(ws.TUNED_BWD))
    bwd = ws.WsBwdConfig(128, 4, 2, 128)._asdict()
    assert kern.load_tuned_configs({"wsbwd|64|96|512": bwd, "ws|128|96|512": None}) == 2
    assert ws.TUNED_BWD[(64, 96, 512)] == ws.WsBwdConfig(**bwd) and ws.TUNED[(128, 96, 512)] is None
    with pytest.raises(ValueError, match="unknown direction"):
        kern.load_tuned_configs({"sideways|64|96|512": fields})
    monkeypatch.setattr(ws, "TUNED_WORDS", dict(ws.TUNED_WORDS))
    assert kern.load_tuned_configs({"wsw|64|96|512": fields}) == 1
    assert ws.TUNED_WORDS[(64, 96, 512)] == ws.WsConfig(**fields)
    with pytest.raises(ValueError, match="no other fast path"):  # a words weight cannot decline this kernel
        kern.load_tuned_configs({"wsw|32|96|512": None})


def test_the_dispatch_reads_the_launch_tables_of_ws_tables_by_its_own_names(monkeypatch):
    """The tables live in ``qerl.kernels.ws_tables``; the dispatch reads them as ``nvfp4_gemm_ws``'s names, which are
    the same dicts (entries added in place reach both), and a table swapped on ``nvfp4_gemm_ws`` (as
    benchmarks/routes.py does with another tree's tables) is the one ``pick`` reads."""
    from qerl.kernels import ws_tables

    for name in ("TUNED", "TUNED_BWD", "TUNED_BWD_ROWS", "TUNED_WORDS", "WHOLE_TILE_WORDS", "WsConfig", "WsBwdConfig"):
        assert getattr(ws, name) is getattr(ws_tables, name), name
    monkeypatch.setattr(ws, "available", lambda device=None: True)
    n, k = 37888, 3584
    mine = ws.WsConfig(64, 64, 7, 3, 1, False, 80)  # no table holds this
    assert ws.pick(_x(64, k), n, k, k) != mine
    monkeypatch.setattr(ws, "TUNED", {(64, n, k): mine})
    assert ws.pick(_x(64, k), n, k, k) == mine and ws_tables.TUNED.get((64, n, k)) != mine


def test_engine_code_layout_follows_the_device_and_the_override(monkeypatch):
    from qerl.errors import UserError
    from qerl.rollout.vllm_nvfp4 import code_layout

    monkeypatch.delenv("QERL_CODE_LAYOUT", raising=False)
    assert code_layout(True) == "words" and code_layout(False) == "pairs"
    monkeypatch.setenv("QERL_CODE_LAYOUT", "pairs")
    assert code_layout(True) == "pairs"
    monkeypatch.setenv("QERL_CODE_LAYOUT", "nibbles")
    with pytest.raises(UserError, match="QERL_CODE_LAYOUT must be"):
        code_layout(True)


def test_rejects_configs_it_cannot_build():
    x = torch.zeros(64, 512, dtype=torch.bfloat16)
    w = kern.KernelWeight(torch.zeros(128, 256, dtype=torch.uint8), torch.zeros(4, 1024, dtype=torch.uint8),
                          torch.ones(1), 128, 512)
    for cfg in (ws.WsConfig(64, 128, consumers=2), ws.WsConfig(24, 64), ws.WsConfig(64, 96),
                ws.WsConfig(64, 256, consumers=3, in_flight=False), ws.WsConfig(128, 128, 4, 1, 2, True, stream_k=1),
                ws.WsConfig(64, 64, 4, 2, in_flight=False, stream_k=1), ws.WsConfig(128, 256, 3, 1, 2, False, stream_k=5),
                ws.WsConfig(128, 128, 4, 1, 2, False, dp_waves=True)):  # whole waves without stream-K
        with pytest.raises(ValueError, match="unsupported config"):
            ws.ws_matmul(x, w, cfg)
    with pytest.raises(ValueError, match="N % 32"):
        ws.ws_matmul(x, kern.KernelWeight(w.codes[:100], w.scales, w.global_scale, 100, 512), ws.WsConfig(64, 64))
    # Input gradient: 256 rows of dY and stream-K with two consumers only, no split or fused sum with stream-K.
    dy = torch.zeros(64, 128, dtype=torch.bfloat16)
    for cfg in (ws.WsBwdConfig(256), ws.WsBwdConfig(128, 4, 1, stream_k=1),
                ws.WsBwdConfig(32, 4, consumers=2, in_flight=True),
                ws.WsBwdConfig(16, 6, 1, stream_k=1, consumers=2, in_flight=True),
                ws.WsBwdConfig(256, 4, 2, stream_k=1, consumers=2), ws.WsBwdConfig(128, 4, 2, fused=True, consumers=2),
                ws.WsBwdConfig(256, 4, 1, consumers=2, dp_waves=True)):
        with pytest.raises(ValueError, match="unsupported config"):
            ws.ws_matmul_grad_input(dy, w, cfg)


def test_weight_descriptors_address_each_chunks_codes_and_scales():
    # The loaders copy a chunk's code bytes at [n0, c * 64] and its scale bytes at [c * N / 32 + n0 / 32, 0] of the
    # descriptors' tensors: on a real kernel-layout weight those boxes must hold exactly rows n0 .. n0 + BN of chunk c.
    from qerl import nvfp4

    n, k = 96, 384  # 3 chunks; N not a multiple of 64
    q = nvfp4.quantize(torch.randn(n, k) * 0.02)
    w = kern.prepare_weight(q.packed, q.scale, q.global_scale)
    scales = w.scales.view(w.k_pad // kern.CHUNK, n, 8)
    for rows in (64, 128):
        w_desc, s_desc = ws.weight_descriptors(w, rows)
        assert list(w_desc.block_shape) == [rows, 64] and list(s_desc.block_shape) == [rows // 32, 256]
        assert w_desc.base.data_ptr() == w.codes.data_ptr() and list(w_desc.strides) == [k // 2, 1]
        for c in range(w.k_pad // kern.CHUNK):
            for n0 in range(0, n, rows):
                r0 = c * n // 32 + n0 // 32
                box = s_desc.base[r0 : r0 + rows // 32].reshape(-1, 8)  # rows past N: TMA fills zeros there
                valid = min(rows, n - n0)
                assert torch.equal(box[:valid], scales[c, n0 : n0 + valid])
                codes = w_desc.base[n0 : n0 + rows, c * 64 : c * 64 + 64]
                assert torch.equal(codes, w.codes[n0 : n0 + valid, c * 64 : (c + 1) * 64])


def test_split_counters_grow_without_freeing_the_old_buffer(monkeypatch):
    """A larger launch replaces the tile counters; the old buffer stays allocated, since CUDA graphs captured
    before still write there on replay. ``reserve_split_counters`` makes room ahead of time."""
    from qerl.kernels import nvfp4_gemm

    monkeypatch.setattr(nvfp4_gemm, "_COUNTERS", {})
    monkeypatch.setattr(nvfp4_gemm, "_RETIRED_COUNTERS", [])
    cpu = torch.device("cpu")
    first = nvfp4_gemm._split_counters(cpu, 10)
    assert first.numel() == 4096 and not first.any()
    assert nvfp4_gemm._split_counters(cpu, 4000) is first
    nvfp4_gemm.reserve_split_counters(cpu)
    grown = nvfp4_gemm._split_counters(cpu, 1)
    assert grown is not first and grown.numel() == nvfp4_gemm.COUNTERS_RESERVE and not grown.any()
    assert len(nvfp4_gemm._RETIRED_COUNTERS) == 1 and nvfp4_gemm._RETIRED_COUNTERS[0] is first


@needs_ptxas
def test_fill_searches_count_the_ctas_an_sm_holds():
    """benchmarks/gemm_ws.py aims its splits at whole waves of the CTAs an SM holds at each register cap: its tables
    must match the compiled kernels' threads and shared memory on Hopper (64K registers, 227 KiB of shared memory
    an SM). Runs 21-22 counted 192 threads for the input gradient's CTA (it has 256), one CTA per SM too many."""
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("bench_gemm_ws_ctas", root / "benchmarks" / "gemm_ws.py")
        gw = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gw)
    finally:
        sys.path.remove(str(root / "benchmarks"))

    def fit(r: dict, cap: int) -> int:
        return min(65536 // (r["threads"] * cap), (227 * 1024) // (r["shared_bytes"] + 1024))

    for cap, ctas in gw.BWD_CTAS_PER_SM.items():
        if cap is not None:
            assert fit(aot.ws_report(ws.WsBwdConfig(8, 6, 1, cap), rows=True), cap) == ctas, cap
    for cap, ctas in gw.CTAS_PER_SM.items():
        if cap is not None:
            assert fit(aot.ws_report(ws.WsConfig(8, 64, 6, 1, 1, True, cap), words=True), cap) == ctas, cap


def _lora(m: int, sizes: tuple[int, ...], rank: int) -> kern.LoRAEpilogue:
    return kern.LoRAEpilogue(torch.zeros(len(sizes), m, rank),
                             tuple(torch.zeros(s, rank, dtype=torch.bfloat16) for s in sizes))


@needs_ptxas
def test_bias_and_adapter_epilogue_compile_on_the_decode_configs(monkeypatch):
    """The bias and the adapter's expand in the forward's epilogue (``ws_matmul(bias=, lora=)``) on the decode
    configs the dispatch gives them (``bias_lora_config``: whole tiles, splits summed in the kernel) and two
    consumers: no spills, no serialized wgmma, registers within the cap, the chunk loop's decode and waits as without
    (its shared-memory loads no more), and shared memory for B's rows and u's per consumer."""
    from types import SimpleNamespace

    monkeypatch.setattr(ws, "available", lambda device=None: True)
    configs = {ws.bias_lora_config(_x(m, k), SimpleNamespace(n=n, k=k, k_pad=k, words=True), None,
                                   _lora(m, (n,), 32))
               for (m, n, k) in ws.TUNED_WORDS if m in (1, 8, 16, 32, 64) and ws.TUNED_WORDS[(m, n, k)]}
    configs.discard(None)
    configs.add(ws.WsConfig(64, 128, 4, 1, 2, False))
    assert configs and all(ws.tile_epilogue(c, SimpleNamespace(k_pad=3584)) for c in configs)
    aot.ws_reports([((cfg,), {"out_f32": cfg.split_k > 1, "words": True, **extra}) for cfg in configs
                    for extra in ({}, *({"bias": True, "lora_slices": 3, "lora_rank": r} for r in (16, 32)))])
    for cfg in sorted(configs):
        out_f32 = cfg.split_k > 1
        plain = aot.ws_report(cfg, out_f32=out_f32, words=True)
        for rank in (16, 32):
            r = aot.ws_report(cfg, out_f32=out_f32, words=True, bias=True, lora_slices=3, lora_rank=rank)
            assert not r["wgmma_serialized"] and r["spill_bytes"] == 0, (cfg, rank, r)
            assert r["registers"] <= (cfg.maxnreg or 255), (cfg, rank, r)
            rows = cfg.bn // cfg.consumers
            assert r["shared_bytes"] - plain["shared_bytes"] >= cfg.consumers * (rows + cfg.bm) * rank * 2
            loop, ref = r["chunk_loop_opcodes"], plain["chunk_loop_opcodes"]
            for op in ("HGMMA", "HMUL2", "HFMA2", "PRMT", "SYNCS"):
                assert loop.get(op) == ref.get(op), (cfg, rank, op, loop, ref)
            assert loop.get("LDS", 0) <= ref.get("LDS", 0) and "LDL" not in loop, (cfg, rank, loop, ref)


def test_bias_and_adapter_go_into_the_epilogue_at_decode_batches(monkeypatch):
    """``bias_lora_config``: up to BIAS_LORA_MAX_M rows the table's config where it hands each tile whole to one CTA
    (for a stream-K entry the whole-tile entry kept for it, up to BIAS_LORA_FUSE_SPLIT_MAX_M rows splits summed by the
    last CTA), where the operands' shared memory leaves the CTAs per SM as they are; never a stream-K config, nor for
    a rank the kernel's wgmma cannot take, slices ending inside its tiles, a bias of the wrong shape, more rows, or
    with the switch (or QERL_WS_LORA_EPILOGUE=0) off."""
    from types import SimpleNamespace

    monkeypatch.setattr(ws, "available", lambda device=None: True)
    seen = 0
    for (bucket, n, k), cfg in ws.TUNED_WORDS.items():
        if cfg is None or bucket > 128:
            continue
        w = SimpleNamespace(n=n, k=k, k_pad=k, words=True)
        x = _x(bucket, k)
        lora = _lora(bucket, (n // 2, n // 2), 32)
        got = ws.bias_lora_config(x, w, None, lora)
        if bucket > ws.BIAS_LORA_MAX_M:
            assert got is None
            continue
        base = ws.WHOLE_TILE_WORDS.get((bucket, n, k)) if cfg.stream_k else cfg
        if base is None or (not ws.tile_epilogue(base, w) and bucket > ws.BIAS_LORA_FUSE_SPLIT_MAX_M):
            assert got is None, (bucket, n, k, got)
            continue
        want = base if ws.tile_epilogue(base, w) else base._replace(fused=True)
        fits = ws._ctas_per_sm(want, ws.lora_smem_bytes(want, 32)) >= ws._ctas_per_sm(want)
        assert got == (want if fits else None), (bucket, n, k, got)
        if got is None:
            continue
        seen += 1
        assert not got.stream_k and ws.tile_epilogue(got, w)
        bias = torch.zeros(n)
        assert ws.bias_lora_config(x, w, bias, None) == got
        assert ws.bias_lora_config(x, w, bias[1:], None) is None
        assert ws.bias_lora_config(x, w, None, _lora(bucket, (n // 2, n // 2), 8)) is None
        assert ws.bias_lora_config(x, w, None, _lora(bucket, (n // 2 - 32, n // 2 + 32), 32)) is None
        assert ws.bias_lora_config(x, w, None, None) is None
        monkeypatch.setattr(ws, "BIAS_LORA_EPILOGUE", False)
        assert ws.bias_lora_config(x, w, bias, lora) is None
        monkeypatch.setattr(ws, "BIAS_LORA_EPILOGUE", True)
        monkeypatch.setenv("QERL_WS_LORA_EPILOGUE", "0")
        assert ws.bias_lora_config(x, w, bias, lora) is None
        monkeypatch.setenv("QERL_WS_LORA_EPILOGUE", "1")
        assert ws.bias_lora_config(x, w, bias, lora) == got
    assert seen >= 30

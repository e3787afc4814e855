"""The warp-specialized forward kernel (``qerl.kernels.nvfp4_gemm_ws``, Gluon) against the shipped forward path
(``nvfp4_matmul``'s default dispatch: the Triton tile loop with its ``TUNED`` configs, or the slab path at large M)
and cuBLAS BF16, on the Qwen2.5-7B / 14B / 32B layer shapes, all in one run on one device.

Timing as benchmarks/gemm_nvfp4.py (CUDA-graph replays over enough weight copies that L2 does not serve them; median).
Every launch config is first checked on a NaN-poisoned output against dequantize-then-matmul in fp32; the fastest
correct config per cell is reported with the time of every config tried.

    python benchmarks/gemm_ws.py --models 7b,14b,32b --ms 64,128,256,1024

Writes gemm_ws.json, gemm_ws.md and tuned_ws.json (per cell the pick if at least 3% faster than the shipped path,
else null: decline the kernel there; ``load_tuned_configs``' format) under $OUT (or --out).

``--layouts pairs,words`` times every forward candidate on the weight in both code layouts (``prepare_weight``'s
``layout``; the shipped path keeps "pairs"): per cell the best config of each layout, and every config's time on both.
The input gradient's layouts are "pairs" and "rows" (``--layouts pairs,rows``; ``--shipped-bwd-layout rows`` for the
default dispatch on "rows"); a search with "rows" first writes its picks as "wsbwdr" entries (``TUNED_BWD_ROWS``).

``--marlin`` also times vLLM's Marlin NVFP4 GEMM on the same weights in the forward cells (needs vLLM; as in
benchmarks/gemm_nvfp4.py), so the default dispatch on the rollout layout is compared with it in the same run:

    python benchmarks/gemm_ws.py --dispatch-only --shipped-layout words --marlin --ms 1,4,8,16,32,64,128
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import NamedTuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import (  # noqa: E402
    SHAPES,
    bench,
    bf16_copies,
    checked,
    fp32_matmul,
    marlin_copies,
    marlin_factory,
    rel_err,
)

from qerl import nvfp4  # noqa: E402
from qerl.kernels import nvfp4_gemm as kern  # noqa: E402

try:  # absent from trees before the kernel existed (--dispatch-only then times their default path alone)
    from qerl.kernels import nvfp4_gemm_ws as ws
except ImportError:
    ws = None

# (BM, BN, stages, consumers, in_flight, maxnreg): one consumer with its wgmmas in flight (one CTA per SM, or two
# with 128 registers), one consumer retiring them per chunk with 128 registers (two CTAs per SM), two consumers
# retiring them per chunk.
TILES = [(64, 64, 6, 1, True, None), (64, 128, 4, 1, True, None), (128, 64, 4, 1, True, None),
         (64, 64, 4, 1, True, 128), (64, 64, 5, 1, True, 128), (128, 64, 3, 1, True, 128),
         (64, 64, 4, 1, False, 128), (64, 128, 4, 1, False, 128), (128, 64, 3, 1, False, 128),
         (64, 128, 4, 2, False, None), (128, 128, 4, 2, False, None), (64, 256, 4, 2, False, None),
         (128, 256, 3, 2, False, None)]


# 256-row tiles of X for M >= 1024: two consumers of 64 W rows each (wgmma 64 x 256), so each dequantized weight
# feeds twice the products of a 128-row tile; 2 or 3 stages (72 KiB each).
WIDE_TILES = [(256, 128, 2, 2, False, None), (256, 128, 3, 2, False, None)]


# Three or four CTAs per SM (80 / 64 registers; the CTA is two warpgroups): 64- and 32-row tiles of X for M = 32-128.
OCCUPANCY_TILES = [(64, 64, 3, 1, False, 80), (32, 64, 4, 1, True, 80), (32, 64, 4, 1, False, 64),
                   (32, 128, 4, 1, True, 128)]


def _splits(tiles: int, sms: int, doubled: bool, wide_splits: bool) -> list[int]:
    """Splits to try for ``tiles`` output tiles: none, and where they are fewer than the SMs the power of two that
    first gives a program per SM (``doubled``: and twice that, for tiles of which several CTAs fit an SM);
    ``wide_splits`` adds 2-4."""
    splits = [1]
    if tiles < sms:
        first = 1 << math.ceil(math.log2(sms / tiles))
        splits += [first, 2 * first] if doubled else [first]
    return sorted(set(splits) | {2, 3, 4}) if wide_splits else splits


def small_tiles(m: int) -> list[tuple]:
    """Decode shapes (M <= 16): X^T as wgmma's 8- or 16-wide operand; 64-row tiles with chunks in flight (three
    CTAs per SM) or not (four), 128-row tiles (two or three), two consumers of 128 rows (one CTA)."""
    bm = 8 if m <= 8 else 16
    return [(bm, 64, 6, 1, True, 80), (bm, 64, 6, 1, False, 64), (bm, 128, 6, 1, True, 128),
            (bm, 128, 5, 1, False, 80), (bm, 256, 4, 2, False, None)]


# CTAs of one consumer warpgroup (plus the loader) that fit an SM at each register cap of the decode tiles.
CTAS_PER_SM = {64: 4, 80: 3, 128: 2, None: 1}


def wave_splits(tiles: int, slots: int, chunks: int, best: int = 2, min_fill: float = 0.9) -> list[int]:
    """Splits of K (2-16, at least two chunks a run; a split need not divide the chunk count) whose programs
    (``tiles`` x split) fill whole waves of ``slots`` CTAs to at least ``min_fill`` of the last wave's, the ``best``
    fullest (fewer splits first among equals): e.g. 7B down's 56 tiles of 64 rows on three CTAs per SM (396
    slots) in 7 splits, 7B gate_up's 592 tiles in 2 (2.99 waves)."""
    fills = []
    for sp in range(2, min(16, chunks // 2) + 1):
        waves = tiles * sp / slots
        fill = waves / math.ceil(waves)
        if fill >= min_fill:
            fills.append((-round(fill, 3), sp))
    return [sp for _, sp in sorted(fills)[:best]]


def mid_fill_candidates(m: int, n: int, k_pad: int, sms: int) -> list[ws.WsConfig]:
    """M >= ``MIN_M`` (run 21): every tile of ``TILES`` and ``OCCUPANCY_TILES`` no taller than M needs (at least 64
    rows) without split-K and with the splits of ``few_wave_splits`` (runs of at least two chunks) for the CTAs of
    that tile an SM holds (one per CTA of two consumers or uncapped registers, else ``CTAS_PER_SM``), summed as
    ``nvfp4_gemm`` sums its own."""
    out = []
    chunks = k_pad // kern.CHUNK
    fused = kern._fuse_reduction(m, n)
    for bm, bn, st, cons, inf, reg in TILES + OCCUPANCY_TILES:
        if bm > max(64, m):
            continue
        tiles = -(-m // bm) * -(-n // bn)
        slots = (1 if cons == 2 else CTAS_PER_SM[reg]) * sms
        for sp in [1] + few_wave_splits(tiles, slots, chunks, False, 2):
            out.append(ws.WsConfig(bm, bn, st, sp, cons, inf, reg, fused and sp > 1))
    return out


def fill_candidates(m: int, n: int, k_pad: int, sms: int) -> list[ws.WsConfig]:
    """M <= 16 (run 16): each decode tile of ``small_tiles`` without split-K, with the splits of ``wave_splits`` for
    its CTAs per SM (``CTAS_PER_SM``; split sums in the kernel and by the second kernel, whichever
    ``nvfp4_gemm._fuse_reduction`` names: at M = 16 the second kernel's won on narrow layers too, run 23) and, where it retires chunks one by one, as stream-K with as many CTAs per
    SM as fit (3 on 80 registers, 4 on 64). From M = ``MIN_M`` on: ``mid_fill_candidates``."""
    if m >= ws.MIN_M:
        return mid_fill_candidates(m, n, k_pad, sms)
    out = []
    chunks = k_pad // kern.CHUNK
    fused = kern._fuse_reduction(m, n)
    for bm, bn, st, cons, inf, reg in small_tiles(m):
        tiles = -(-m // bm) * -(-n // bn)
        ctas = CTAS_PER_SM[reg]
        out.append(ws.WsConfig(bm, bn, st, 1, cons, inf, reg))
        for sp in wave_splits(tiles, ctas * sms, chunks):
            out.append(ws.WsConfig(bm, bn, st, sp, cons, inf, reg, fused))
            out.append(ws.WsConfig(bm, bn, st, sp, cons, inf, reg, not fused))  # the other sum (the rule is run 4's)
        if not inf and cons == 1:
            out.append(ws.WsConfig(bm, bn, st, 1, cons, False, reg, stream_k=ctas))
    return out


# Stream-K with a consumer's chunks in flight (run 34), per tile height: (BN, stages, maxnreg, CTAs per SM), at the
# register caps where the stream-K consumer keeps its wgmmas in flight without spills (an ahead-of-time compile:
# 80 registers serialize them on every tile, 128 on 128-row tiles of W below 64 rows of X) and rings that fit.
SK_IN_FLIGHT_TILES = {8: [(64, 6, 96, 2), (128, 6, 168, 1)], 16: [(64, 6, 96, 2), (128, 6, 168, 1)],
                      32: [(64, 4, 96, 2), (64, 4, 168, 1)], 64: [(64, 5, 128, 2), (64, 5, None, 1)],
                      128: [(64, 4, None, 1), (64, 3, 128, 2)]}


def sk_in_flight_candidates(m: int, n: int, k_pad: int, sms: int) -> list[ws.WsConfig]:
    """M <= 128: one consumer with its chunks in flight on stream-K (``WsConfig.in_flight`` with ``stream_k``), on
    the tile of the fewest rows of X that holds M (at M = 65-128 also 64 rows: two tiles) at each cap of
    ``SK_IN_FLIGHT_TILES``, pure and with whole waves one tile per CTA (``dp_waves``) where the tiles fill a wave."""
    out = []
    heights = [bm for bm in (8, 16, 32, 64, 128) if bm >= m][:1] + ([64] if 64 < m <= 128 else [])
    for bm in heights:
        for bn, st, reg, ctas in SK_IN_FLIGHT_TILES[bm]:
            cfg = ws.WsConfig(bm, bn, st, 1, 1, True, reg, stream_k=ctas)
            out.append(cfg)
            if -(-m // bm) * -(-n // bn) >= ctas * sms:
                out.append(cfg._replace(dp_waves=True))
    return out


def candidates(m: int, n: int, k_pad: int, sms: int, wide_splits: bool = False,
               tile_set: str = "default", words: bool = False, stream_k: bool = False,
               dp_waves: bool = False) -> list[ws.WsConfig]:
    """Every tile of the set without split-K and, where its tiles are fewer than the SMs, with the power-of-two
    split that first gives a program per SM (at M <= 16 also twice that: several CTAs fit an SM); ``wide_splits``
    adds splits 2-4 everywhere (finer work against the last wave's idle SMs). Tile sets: "default" (``TILES``, or
    ``small_tiles`` at M <= 16), "occupancy" (``OCCUPANCY_TILES`` only), "all" (``TILES`` and ``OCCUPANCY_TILES``),
    "table" (only the config ``nvfp4_gemm_ws.TUNED``, or with ``words`` ``TUNED_WORDS``, holds for this M bucket, if
    any: the shipped kernel itself), "wide" (``WIDE_TILES``), "table+wide" (both), "fill" (``fill_candidates``: at
    M <= 16 splits and stream-K that fill whole waves, from M = 17 on splits of every tile that fill whole waves; and
    the table's config), "stages" (the table's config with 4, 8 and 10 stages too), "sk_in_flight" (the table's
    config and ``sk_in_flight_candidates``), "split_sum" (the table's config and ``split_sum_candidates``), "deep" (the
    table's config and ``deep_ring_candidates``, M <= 32). Split partials
    are summed in the
    kernel where ``nvfp4_gemm`` fuses its own (``_fuse_reduction``). ``stream_k``: each candidate that retires its
    chunks one by one without split-K also as stream-K (``WsConfig.stream_k``: one CTA per SM, and two with 128
    registers), and the two-consumer 128 x 128 / 128 x 256 and one-consumer 128 x 64 tiles with it; ``dp_waves``:
    each stream-K candidate also with its whole waves of tiles one per CTA (``WsConfig.dp_waves``)."""
    out = []
    if tile_set in ("table", "table+wide"):
        cfg = _table_config(m, n, k_pad, sms, words)
        out = [] if cfg is None else [cfg]
        if tile_set == "table":
            return _with_stream_k(out, stream_k, dp_waves)
    if tile_set == "stages":  # the table's config with deeper or shallower rings of stages (run 16)
        cfg = _table_config(m, n, k_pad, sms, words)
        return [] if cfg is None else [cfg] + [cfg._replace(stages=st) for st in (4, 8, 10) if st != cfg.stages]
    if tile_set == "fill":
        cfg = _table_config(m, n, k_pad, sms, words)
        fill = fill_candidates(m, n, k_pad, sms)
        return ([cfg] if cfg is not None and cfg not in fill else []) + fill
    if tile_set == "sk_in_flight":
        cfg = _table_config(m, n, k_pad, sms, words)
        sk = sk_in_flight_candidates(m, n, k_pad, sms)
        return ([cfg] if cfg is not None and cfg not in sk else []) + sk
    if tile_set == "split_sum":
        cfg = _table_config(m, n, k_pad, sms, words)
        sp = split_sum_candidates(m, n, k_pad)
        return ([cfg] if cfg is not None and cfg not in sp else []) + sp
    if tile_set == "deep":
        cfg = _table_config(m, n, k_pad, sms, words)
        deep = deep_ring_candidates(m)
        return ([cfg] if cfg is not None and cfg not in deep else []) + deep
    small = m < ws.MIN_M
    tiles_of = {"default": small_tiles(m) if small else TILES, "occupancy": OCCUPANCY_TILES,
                "all": TILES + OCCUPANCY_TILES, "wide": WIDE_TILES, "table+wide": WIDE_TILES}
    if tile_set not in tiles_of:
        raise ValueError(f"unknown tile set {tile_set!r}: default, occupancy, all, table, wide, table+wide, fill, "
                         "stages or sk_in_flight")
    chunks = k_pad // kern.CHUNK
    fused = kern._fuse_reduction(m, n)
    for bm, bn, st, cons, inf, reg in tiles_of[tile_set]:
        for sp in _splits(-(-m // bm) * -(-n // bn), sms, small, wide_splits):
            if sp <= chunks // 2:
                out.append(ws.WsConfig(bm, bn, st, sp, cons, inf, reg, fused and sp > 1))
    return _with_stream_k(out, stream_k, dp_waves)


# Run 42: at decode M the ring's copies stream W slower than a plain TMA loop over the same boxes (run 23), and the
# searches so far kept 4-10 stages. Deeper rings on fewer CTAs per SM, persistent (stream-K) or one tile per CTA:
# (BN, stages, maxnreg, stream-K CTAs per SM, in_flight).
DEEP_RINGS = [(64, st, None, 1, False) for st in (12, 16, 24, 30)] + [(128, st, None, 1, False) for st in (8, 12, 16)] \
    + [(64, st, 128, 2, False) for st in (8, 12, 16)] + [(64, st, None, 0, True) for st in (12, 16)] \
    + [(64, st, 80, 0, True) for st in (8, 10)]


def deep_ring_candidates(m: int) -> list[ws.WsConfig]:
    """M <= 32: ``DEEP_RINGS`` on the tile of the fewest rows of X that holds M, where the CTAs per SM it means fit
    shared memory."""
    bm = next(b for b in (8, 16, 32) if b >= m)
    out = []
    for bn, st, reg, sk, inf in DEEP_RINGS:
        cfg = ws.WsConfig(bm, bn, st, 1, 1, inf, reg, stream_k=sk)
        per_sm = max(sk, 1) if reg is None or reg > 128 else (2 if reg == 128 else 3)
        if ws.fwd_ring_bytes(cfg) + 2048 <= ws.SMEM_PER_CTA and per_sm * (ws.fwd_ring_bytes(cfg) + 2048) <= \
                ws.SMEM_PER_SM:
            out.append(cfg)
    return out


def split_sum_candidates(m: int, n: int, k_pad: int) -> list[ws.WsConfig]:
    """Run 38: at M > 16 the searches so far summed split partials with the second kernel only
    (``nvfp4_gemm._fuse_reduction``). Two consumers of 64 rows of W each (X copied once for 128 rows) and the
    one-consumer 64-row tile with chunks in flight, split 2-6 ways (runs of at least two chunks); the two consumers'
    splits summed both ways, the in-flight tile's by the last CTA."""
    bm = 64 if m <= 64 else 128
    chunks = k_pad // kern.CHUNK
    out = []
    for sp in range(2, min(6, chunks // 2) + 1):
        out += [ws.WsConfig(bm, 128, 4, sp, 2, False, None, True), ws.WsConfig(bm, 128, 4, sp, 2, False, None, False)]
        out.append(ws.WsConfig(bm, 64, 4, sp, 1, True, None if bm == 128 else 128, True))
    return out


def _table_config(m: int, n: int, k_pad: int, sms: int, words: bool) -> ws.WsConfig | None:
    """The config the table (``TUNED``, or with ``words`` ``TUNED_WORDS``) holds for this M bucket, the shipped
    kernel itself; on words also the config for cells the table lacks or sends to the slab path."""
    cfg = (ws.TUNED_WORDS if words else ws.TUNED).get((m, n, k_pad))
    if cfg is None and words:
        cfg = ws.default_words_config(m, n, k_pad, sms)
    return cfg


def _with_stream_k(cfgs: list, stream_k: bool, dp_waves: bool = False) -> list:
    if not stream_k:
        return cfgs
    out = list(cfgs)
    for cfg in cfgs + [ws.WsConfig(128, 128, 4, 1, 2, False), ws.WsConfig(128, 256, 3, 1, 2, False),
                       ws.WsConfig(128, 64, 3, 1, 1, False, 128)]:
        if not cfg.in_flight and cfg.split_k == 1 and not cfg.stream_k:
            for ctas in (1, 2) if cfg.maxnreg is not None and cfg.maxnreg <= 128 else (1,):
                for v in (cfg, cfg._replace(stream_k=ctas)) + ((cfg._replace(stream_k=ctas, dp_waves=True),)
                                                               if dp_waves else ()):
                    if v not in out:
                        out.append(v)
    return out


def bwd_candidates(m: int, n: int, k_pad: int, sms: int, wide_splits: bool = False,
                   tile_set: str = "default", stream_k: bool = False, two_consumers: bool = False,
                   dp_waves: bool = False) -> list:
    """Input gradient: BM 64 / 128, 4 or 6 stages, 128 registers (two CTAs per SM) or not; at M <= 128 also BM = 8 /
    16 / 32 (M's own power of two, at most 32) on 64 or 80 registers (four or three CTAs per SM), the only tiles of
    the "occupancy" set. Split-N none, or the power of two that first gives a program per SM (twice that too for the
    small tiles, whose splits are also tried summed in the kernel; ``wide_splits``: and 2-4). ``two_consumers``: also
    the tiles of two consumers (one per half of the chunk, ``WsBwdConfig.consumers``), BM = 128 / 256, and with
    ``stream_k`` each of them as stream-K (one CTA per SM; the one-consumer stream-K tiles of run 12 were removed),
    with ``dp_waves`` also with whole waves of tiles one per CTA (``WsBwdConfig.dp_waves``)."""
    if tile_set == "fill":
        return bwd_fill_candidates(m, n, k_pad, sms)
    if tile_set == "table":  # the shipped entry alone (e.g. to compare code layouts on it)
        cfg = ws.TUNED_BWD.get((m, n, k_pad))
        return [] if cfg is None else [cfg]
    if tile_set not in ("default", "occupancy", "all"):
        raise ValueError(f"unknown tile set {tile_set!r}: default, occupancy, all, fill or table")
    tiles_of = [] if tile_set == "occupancy" else [(bm, st, reg) for bm in (64, 128) for st in (4, 6)
                                                   for reg in (128, None)]
    if m <= 128:
        small = min(32, max(8, 1 << max(0, (m - 1).bit_length())))
        tiles_of += [(small, 6, 64 if small <= 16 else 80), (small, 4, 80)]  # 32 rows on 64 serialize the wgmmas
    out = []
    steps = -(-n // 64)
    for bm, st, reg in tiles_of:
        for sp in _splits(-(-m // bm) * (k_pad // kern.CHUNK), sms, bm <= 32, wide_splits):
            if sp <= steps // 2:
                out.append(ws.WsBwdConfig(bm, st, sp, reg))
                if sp > 1 and bm <= 32:  # the split partials summed in the kernel, too
                    out.append(ws.WsBwdConfig(bm, st, sp, reg, True))
    if two_consumers and tile_set != "occupancy":
        for bm, st in ((128, 6), (256, 4), (256, 5)):
            for sp in _splits(-(-m // bm) * (k_pad // kern.CHUNK), sms, False, wide_splits):
                if sp <= steps // 2:
                    out.append(ws.WsBwdConfig(bm, st, sp, consumers=2))
            if stream_k:
                out.append(ws.WsBwdConfig(bm, st, 1, stream_k=1, consumers=2))
                if dp_waves:
                    out.append(ws.WsBwdConfig(bm, st, 1, stream_k=1, consumers=2, dp_waves=True))
    return out


# CTAs of the one-consumer input gradient (its consumer warpgroup, loader and scale warps: 192 threads) that fit an SM
# at each register cap.
# CTAs of the input gradient's kernel (one consumer warpgroup, the loader and scale warps padded to a second
# warpgroup: 256 threads) that fit an SM at each register cap: 65536 / (256 x cap). Before run 23 this table counted
# 192 threads (64: 5, 80: 4, 96: 3), so the "fill" searches of runs 21-22 aimed their splits at waves one CTA per SM
# too wide; benchmarks/ws_occupancy.py reads the driver's count.
BWD_CTAS_PER_SM = {48: 5, 64: 4, 80: 3, 96: 2, 128: 2, None: 1}


def few_wave_splits(tiles: int, slots: int, steps: int, even: bool, min_run: int, best: int = 2) -> list[int]:
    """Splits of a reduction of ``steps`` steps (``even``: divisors of it only, as the input gradient's launcher
    split before run 22) with runs of at least ``min_run`` steps and at most two waves of ``slots`` CTAs, whose programs
    fill whole waves best: the ``best`` fullest (fewer splits first), and the smallest split that gives every slot a
    program."""
    fills = []
    for sp in range(2, steps // min_run + 1):
        if (not even or steps % sp == 0) and tiles * sp <= 2 * slots:
            waves = tiles * sp / slots
            fills.append((-round(waves / math.ceil(waves), 3), sp))
    picks = [sp for _, sp in sorted(fills)[:best]]
    enough = [sp for _, sp in sorted(fills, key=lambda f: f[1]) if tiles * sp >= slots]
    return sorted(set(picks + enough[:1]))


def bwd_fill_candidates(m: int, n: int, k_pad: int, sms: int) -> list:
    """The input gradient's "fill" set (run 21): the table's config, and one-consumer tiles with their wgmmas
    retired per step or kept in flight under the next step's dequantization (``WsBwdConfig.in_flight``), each
    unsplit (where its tiles fill half the slots) and with the splits of N that fill whole waves of the CTAs that fit
    an SM (``few_wave_splits``: runs of at least four steps, as even as the count allows since run 22, divisors of
    it before; summed in the kernel where
    ``nvfp4_gemm._fuse_reduction`` says so, and at M <= 16 by the other sum too); at M <= 32 also two consumers of an 8- to 32-row tile as stream-K on one
    or two CTAs per SM. The register caps are those at which ptxas neither spills nor serializes the wgmmas
    (``aot.ws_report``): retired per step, 64 registers hold BM = 8 / 16 and 80 BM = 32; in flight, 80 hold BM = 8 /
    16, 96 BM = 32, 128 BM = 64; since run 23 also 48 registers at BM = 8 / 16 (five CTAs per SM, the wgmmas
    serialized, no spills)."""
    steps = -(-n // 64)
    fused = kern._fuse_reduction(m, k_pad)
    if m <= 32:
        bm = min(32, max(8, 1 << max(0, (m - 1).bit_length())))
        reg_in_flight = 80 if bm <= 16 else 96
        tiles_of = [(bm, 6, 64 if bm <= 16 else 80, False), (bm, 4, 80, False), (bm, 8, 80, False),
                    (bm, 6, reg_in_flight, True), (bm, 8, reg_in_flight, True), (bm, 6, 128, True)]
        if bm <= 16:  # five CTAs per SM (run 23): ptxas serializes the wgmmas, which an 8- / 16-row tile barely feels
            tiles_of += [(bm, 6, 48, False), (bm, 4, 48, False)]
    else:
        tiles_of = [(64, 4, 128, False), (64, 4, 128, True), (64, 6, 128, True), (128, 4, None, True),
                    (128, 6, None, True)]
    out = []
    table = ws.TUNED_BWD.get((m, n, k_pad))
    if table is not None:
        out.append(table)
    for bm, st, reg, inf in tiles_of:
        tiles = -(-m // bm) * (k_pad // kern.CHUNK)
        slots = BWD_CTAS_PER_SM[reg] * sms
        for sp in ([1] if 2 * tiles >= slots else []) + few_wave_splits(tiles, slots, steps, False, 4):
            cfg = ws.WsBwdConfig(bm, st, sp, reg, fused and sp > 1, in_flight=inf)
            # At M <= 16 the other split sum too (run 23: the second kernel's won at M = 16 where the rule fuses).
            for c in [cfg] + ([cfg._replace(fused=not cfg.fused)] if sp > 1 and m <= 16 else []):
                if c not in out:
                    out.append(c)
    if m <= 32:
        for sk in (1, 2):
            out.append(ws.WsBwdConfig(bm, 6, 1, stream_k=sk, consumers=2))
    return out


def _copies(kw0, l2_bytes: int) -> list:
    """``kw0`` and enough copies of it that cycling through them, L2 serves none (3x its size in all)."""
    return [kw0] + [kw0._replace(codes=kw0.codes.clone(), scales=kw0.scales.clone(),
                                 global_scale=kw0.global_scale.clone())
                    for _ in range(max(1, math.ceil(3 * l2_bytes / kw0.nbytes())) - 1)]


class Cell(NamedTuple):
    """One benchmark cell's operands (``cell_operands``)."""

    fwd: bool  # forward (Y = X W^T) or input gradient (dX = dY W)
    wbs: list  # W in bf16, copies past L2 (``bf16_copies``)
    kws: list  # W in the kernels' layout, copies past L2 (``_copies``)
    inp: torch.Tensor  # X [M, K] or dY [M, N], bf16
    out_shape: tuple[int, int]
    ref: torch.Tensor  # the product in fp32 (dequantize-then-matmul)
    out: torch.Tensor  # an output buffer, bf16


def cell_operands(model: str, layer: str, n: int, k: int, direction: str, m: int, l2_bytes: int,
                  layout: str = "pairs") -> Cell:
    """A random NVFP4 weight [n, k] (seeded by the cell) in bf16 (dequantized) and kernel-layout (``layout``) copies
    that cycling through L2 does not serve, a random bf16 input, the fp32 reference product and an output buffer."""
    torch.manual_seed(hash((model, layer, direction, m)) % 2**31)
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    wbs = bf16_copies(ref_w.to(torch.bfloat16), l2_bytes)
    kws = _copies(kern.prepare_weight(q.packed, q.scale, q.global_scale, layout=layout), l2_bytes)
    fwd = direction == "fwd"
    inp = torch.randn(m, k if fwd else n, device="cuda", dtype=torch.bfloat16)
    out_shape = (m, n if fwd else k)
    ref = fp32_matmul(inp.float(), ref_w.T if fwd else ref_w)
    return Cell(fwd, wbs, kws, inp, out_shape, ref, torch.empty(out_shape, device="cuda", dtype=torch.bfloat16))


def run_shape(model, layer, n, k, direction, ms, l2_bytes, sms, log, dispatch_only: bool = False,
              wide_splits: bool = False, tile_set: str = "default", layouts: tuple = ("pairs",),
              shipped_layout: str = "pairs", stream_k: bool = False, two_consumers: bool = False,
              dp_waves: bool = False, marlin_make=None, shipped_bwd_layout: str = "pairs",
              warm_only: bool | tuple[int, int] = False) -> list[dict]:
    """One layer shape in one direction (fwd: Y = X W^T, bwd: dX = dY W) at every M: BF16, the default dispatch
    (``nvfp4_matmul`` / ``nvfp4_matmul_grad_input``) on the weight in ``shipped_layout``, vLLM's Marlin when
    ``marlin_make`` is given (forward) and, unless ``dispatch_only``, every candidate of the kernel on the weight in
    each of ``layouts`` (the first one's best is the row's pick; the input gradient on its own, "pairs" and "rows", the
    default dispatch on ``shipped_bwd_layout``). ``warm_only``: launch each candidate once (compiling it into
    Triton's cache) and time nothing; (i, n): only the candidates of shard i of n (``warm_shard``)."""
    fwd = direction == "fwd"
    layouts = tuple(lay for lay in layouts if lay in (("pairs", "words") if fwd else ("pairs", "rows"))) or ("pairs",)
    if not fwd:
        shipped_layout = shipped_bwd_layout

    def cell_candidates(m: int, k_pad: int) -> list:
        if fwd:
            return candidates(m, n, k_pad, sms, wide_splits, tile_set, layouts[0] == "words", stream_k, dp_waves)
        return bwd_candidates(m, n, k_pad, sms, wide_splits, tile_set, stream_k, two_consumers, dp_waves)

    torch.manual_seed(hash((model, layer)) % 2**31)
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    if warm_only:
        kernel = ws.ws_matmul if fwd else ws.ws_matmul_grad_input
        weights = {lay: kern.prepare_weight(q.packed, q.scale, q.global_scale,
                                            **({} if lay == "pairs" else {"layout": lay})) for lay in layouts}
        for m in ms:
            x = torch.randn(m, k if fwd else n, device="cuda").to(torch.bfloat16)
            for lay, w in weights.items():
                for cfg in cell_candidates(m, w.k_pad):
                    if warm_only is not True and not warm_shard(cfg, *warm_only):
                        continue
                    try:
                        kernel(x, w, cfg)
                    except Exception as e:  # the timed run reports it
                        log(f"  warm-up: {model} {layer} M={m} {lay} {cfg}: {type(e).__name__}")
        torch.cuda.synchronize()
        return []
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    by_layout = {lay: _copies(kern.prepare_weight(q.packed, q.scale, q.global_scale,
                                                  **({} if lay == "pairs" else {"layout": lay})), l2_bytes)
                 for lay in set(layouts) | {shipped_layout} | ({"pairs"} if shipped_layout == "rows" else set())}
    kws = by_layout[shipped_layout]
    kw0 = kws[0]
    w_bf16 = ref_w.to(torch.bfloat16)
    wbs = bf16_copies(w_bf16, l2_bytes)
    marlins, marlin_note = [], None
    if fwd and marlin_make is not None:
        try:
            marlins = marlin_copies(marlin_make, q, ref_w, len(kws))
        except Exception as e:  # reported in the rows, the run goes on
            marlin_note = f"{type(e).__name__}: {str(e)[:200]}"
            log(f"  marlin failed on {model} {layer}: {marlin_note}")
    shipped = kern.nvfp4_matmul if fwd else kern.nvfp4_matmul_grad_input
    kernel = None if ws is None else (ws.ws_matmul if fwd else ws.ws_matmul_grad_input)
    rows = []
    for m in ms:
        x = torch.randn(m, k if fwd else n, device="cuda").to(torch.bfloat16)
        ref = fp32_matmul(x.float(), ref_w.T if fwd else ref_w)
        out_shape = (m, n if fwd else k)
        t_bf16 = bench([(lambda wb=wb, x=x: torch.nn.functional.linear(x, wb)) if fwd else
                        (lambda wb=wb, x=x: torch.matmul(x, wb)) for wb in wbs])
        picked = None
        if ws is not None and hasattr(ws, "pick"):
            words = {"words": True} if shipped_layout == "words" else {}
            rows_kw = {"rows": True} if shipped_layout == "rows" else {}
            picked = (ws.pick(x, n, k, kw0.k_pad, **words) if fwd
                      else ws.pick_grad_input(x, n, k, kw0.k_pad, **rows_kw))
        # A "rows" weight serves only the kernel's table: elsewhere a module takes its "pairs" copy, so does this cell.
        cell_layout = "pairs" if shipped_layout == "rows" and picked is None else shipped_layout
        cell_kws = by_layout[cell_layout]
        t_ship = bench([lambda kw=kw, x=x: shipped(x, kw) for kw in cell_kws])
        err_ship, _ = checked(lambda out, x=x, w0=cell_kws[0]: shipped(x, w0, out=out), out_shape, ref)
        tried, bests = [], {}
        cands = [] if dispatch_only else cell_candidates(m, kw0.k_pad)
        for cfg in cands:
            for lay in layouts:
                copies = by_layout[lay]
                try:
                    err, finite = checked(lambda out, x=x, cfg=cfg, w=copies[0]: kernel(x, w, cfg, out=out),
                                          out_shape, ref)
                except Exception as e:  # e.g. a config the kernel cannot compile: reported, the search goes on
                    tried.append({"config": cfg._asdict(), "layout": lay, "error": f"{type(e).__name__}: {str(e)[:200]}"})
                    log(f"  FAILED {model} {layer} {direction} M={m} {lay} {cfg}: {type(e).__name__}: {str(e)[:200]}")
                    continue
                if not finite or err > 1e-2:
                    tried.append({"config": cfg._asdict(), "layout": lay, "error": f"rel {err:.3g} finite {finite}"})
                    log(f"  WRONG {model} {layer} {direction} M={m} {lay} {cfg}: rel {err:.3g} finite {finite}")
                    continue
                t = bench([lambda kw=kw, cfg=cfg, x=x: kernel(x, kw, cfg) for kw in copies])
                tried.append({"config": cfg._asdict(), "layout": lay, "us": t * 1e6, "rel_err": err})
                if lay not in bests or t < bests[lay][0]:
                    bests[lay] = (t, cfg, err)
        first = layouts[0]
        best = bests.get(first)
        row = {"model": model, "layer": layer, "dir": direction, "n": n, "k": k, "m": m, "bf16_us": t_bf16 * 1e6,
               "shipped_us": t_ship * 1e6, "shipped_rel_err": err_ship, "shipped_over_bf16": t_bf16 / t_ship,
               "shipped_path": "ws " + str(tuple(picked)) if picked is not None else "nvfp4_gemm", "tried": tried,
               "shipped_layout": cell_layout}
        if fwd and "words" in by_layout and m >= kern.LARGE_M_FWD:
            # The slab path (dequantize slabs of W, then cuBLAS) on the words layout, for the large-M dispatch.
            slab = by_layout["words"]
            err, finite = checked(lambda out, x=x, w=slab[0]: kern._matmul_large_m(x, w, out), out_shape, ref)
            if finite and err <= 1e-2:
                y = torch.empty(out_shape, dtype=torch.bfloat16, device="cuda")
                row["slab_words_us"] = bench([lambda kw=kw, x=x, y=y: kern._matmul_large_m(x, kw, y)
                                              for kw in slab]) * 1e6
        line = (f"{model:4} {layer:8} {direction} M={m:5}  bf16 {t_bf16*1e6:8.1f}  shipped {t_ship*1e6:8.1f} "
                f"({t_bf16/t_ship:.2f}x, rel {err_ship:.1e}, {row['shipped_path']})")
        if marlins:
            t_m = bench([lambda f=f, x=x: f(x) for f in marlins])
            row.update(marlin_us=t_m * 1e6, marlin_rel_err=rel_err(marlins[0](x), ref), bf16_over_marlin=t_bf16 / t_m,
                       shipped_over_marlin=t_m / t_ship)
            line += f"  marlin {t_m*1e6:8.1f} (shipped {t_m/t_ship:.2f}x of it)"
        elif marlin_note:
            row["marlin_error"] = marlin_note
        if best is not None:
            t, cfg, err = best
            row.update(ws_us=t * 1e6, ws_config=cfg._asdict(), ws_rel_err=err, ws_over_bf16=t_bf16 / t,
                       ws_over_shipped=t_ship / t)
            line += f"  ws {t*1e6:8.1f} ({t_bf16/t:.2f}x, {t_ship/t:.2f}x of shipped) {tuple(cfg)}"
        if len(bests) > 1:
            row["by_layout"] = {lay: {"us": t * 1e6, "config": cfg._asdict()} for lay, (t, cfg, _) in bests.items()}
            line += "  " + "  ".join(f"{lay} {t*1e6:.1f} {tuple(cfg)}" for lay, (t, cfg, _) in bests.items()
                                     if lay != first)
        log(line)
        rows.append(row)
    return rows


def warm_shard(cfg, i: int, n: int) -> bool:
    """Whether ``cfg`` is in shard i of n: by a checksum of the config, the same in every process, so that n
    processes each compile their share of a search's configs (a config recurs in many cells)."""
    return zlib.crc32(repr(tuple(cfg)).encode()) % n == i


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"# Warp-specialized forward GEMM, {meta['device']}, {meta['date']}", "",
             f"`{meta['command']}` (torch {meta['torch']}, triton {meta['triton']})", "",
             "| model | layer | dir | M | BF16 us | shipped us (x BF16) | warp-specialized us (x BF16) | ws / shipped | "
             "config |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "ws_us" not in r:
            lines.append(f"| {r['model']} | {r['layer']} | {r['dir']} | {r['m']} | {r['bf16_us']:.1f} | {r['shipped_us']:.1f} | "
                         "no correct config | | |")
            continue
        c = r["ws_config"]
        lines.append(f"| {r['model']} | {r['layer']} | {r['dir']} | {r['m']} | {r['bf16_us']:.1f} | {r['shipped_us']:.1f} "
                     f"({r['shipped_over_bf16']:.2f}x) | {r['ws_us']:.1f} ({r['ws_over_bf16']:.2f}x) | "
                     f"{r['ws_over_shipped']:.2f} | {', '.join(str(v) for v in c.values())} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="7b,14b,32b")
    ap.add_argument("--layers", default="qkv,o,gate_up,down")
    ap.add_argument("--ms", default="64,128,256,1024")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--dirs", default="fwd", help="fwd, bwd (input gradient) or both, comma-separated")
    ap.add_argument("--wide-splits", action="store_true", help="also split K (forward) / N (input gradient) 2-4 ways")
    ap.add_argument("--tile-set", default="default",
                    choices=["default", "occupancy", "all", "table", "wide", "table+wide", "fill", "stages",
                             "sk_in_flight", "split_sum", "deep"],
                    help="forward tiles searched (see candidates()); input gradient: default, occupancy, all, "
                         "fill, table (see bwd_candidates())")
    ap.add_argument("--layouts", default="pairs",
                    help="code layouts the candidates run on, comma-separated (forward: pairs, words; input "
                         "gradient: pairs, rows); the first one's picks go to tuned_ws.json")
    ap.add_argument("--shipped-layout", default="pairs", choices=["pairs", "words"],
                    help="the code layout of the weight the default dispatch (the shipped path) runs on")
    ap.add_argument("--shipped-bwd-layout", default="pairs", choices=["pairs", "rows"],
                    help="the same for the input gradient")
    ap.add_argument("--stream-k", action="store_true", help="forward and input-gradient candidates also as stream-K (see "
                    "candidates(), bwd_candidates())")
    ap.add_argument("--dp-waves", action="store_true",
                    help="stream-K candidates also with whole waves of tiles one per CTA (WsConfig.dp_waves)")
    ap.add_argument("--bwd-two-consumers", action="store_true",
                    help="input-gradient candidates also with two consumers (see bwd_candidates())")
    ap.add_argument("--marlin", action="store_true",
                    help="also time vLLM's Marlin NVFP4 GEMM on the same weights (forward; needs vLLM)")
    ap.add_argument("--warm-only", action="store_true",
                    help="launch each candidate once and time nothing: compiles them into Triton's cache, e.g. in "
                         "parallel processes (one per --models / --layers) ahead of the timed search")
    ap.add_argument("--warm-shard", default="", metavar="I/N",
                    help="with --warm-only: launch only the candidates of shard I of N (by config, see warm_shard), "
                         "one process per shard")
    ap.add_argument("--dispatch-only", action="store_true",
                    help="time only nvfp4_matmul's default dispatch and BF16 (also on trees without this kernel)")
    args = ap.parse_args()
    if not torch.cuda.is_available() or (not args.dispatch_only and (ws is None or not ws.available())):
        sys.exit("needs a Hopper GPU and a Triton build with Gluon (or --dispatch-only and a CUDA GPU)")
    props = torch.cuda.get_device_properties(0)
    meta = {"device": props.name, "sms": props.multi_processor_count, "date": time.strftime("%Y-%m-%d"),
            "torch": torch.__version__, "triton": __import__("triton").__version__,
            "command": "python benchmarks/gemm_ws.py " + " ".join(sys.argv[1:])}
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    marlin_make = None
    if args.marlin:
        marlin_make, why = marlin_factory()
        if marlin_make is None:
            sys.exit(f"--marlin: vLLM's Marlin kernels are not importable ({why}); install vLLM or drop --marlin")
        meta["vllm"] = __import__("vllm").__version__
    ms = [int(v) for v in args.ms.split(",")]
    layers = set(args.layers.split(","))
    warm = args.warm_only
    if args.warm_shard:
        i, n = (int(v) for v in args.warm_shard.split("/"))
        if not args.warm_only or not 0 <= i < n:
            sys.exit("--warm-shard I/N needs --warm-only and 0 <= I < N")
        warm = (i, n)
    rows = []
    for model in args.models.split(","):
        for layer, n, k in SHAPES[model]:
            if layer not in layers:
                continue
            for d in args.dirs.split(","):
                rows += run_shape(model, layer, n, k, d, ms, l2, meta["sms"], lambda s: print(s, flush=True),
                                  args.dispatch_only, args.wide_splits, args.tile_set,
                                  tuple(args.layouts.split(",")), args.shipped_layout, args.stream_k,
                                  args.bwd_two_consumers, args.dp_waves, marlin_make, args.shipped_bwd_layout,
                                  warm)
    if args.warm_only:
        return
    geo = {}
    for d in args.dirs.split(","):
        for m in ms:
            sel = [r for r in rows if r["m"] == m and r["dir"] == d]
            g = {"shipped_over_bf16": statistics.geometric_mean([r["shipped_over_bf16"] for r in sel])}
            vs_marlin = [r["shipped_over_marlin"] for r in sel if "shipped_over_marlin" in r]
            if vs_marlin:
                g["shipped_over_marlin"] = statistics.geometric_mean(vs_marlin)
                g["shipped_over_marlin_min"] = min(vs_marlin)
            done = [r for r in sel if "ws_us" in r]
            if done:
                g["ws_over_shipped"] = statistics.geometric_mean([r["ws_over_shipped"] for r in done])
                g["ws_over_bf16"] = statistics.geometric_mean([r["ws_over_bf16"] for r in done])
            geo[f"{d}|{m}"] = g
            print(f"{d} M={m}: geomean " + ", ".join(f"{key} {v:.2f}" for key, v in g.items()), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gemm_ws.json").write_text(json.dumps({"meta": meta, "geomean": geo, "rows": rows}, indent=1))
    if not args.dispatch_only:
        (out / "gemm_ws.md").write_text(markdown(rows, meta))
    # The picks that beat the shipped path by at least 3%, in ``load_tuned_configs``' format ("ws|M|N|K_pad"); null
    # (decline this kernel) where they did not and the shipped path is the other module's, nothing where the shipped
    # path is already this kernel (a search over some tiles only must not decline a shipped entry). With "words"
    # first in --layouts: every forward pick, as "wsw|..." (that layout has no other fast path).
    tuned = {}
    words_first = args.layouts.split(",")[0] == "words"
    rows_first = [lay for lay in args.layouts.split(",") if lay in ("pairs", "rows")][:1] == ["rows"]
    for r in rows:
        if "ws_us" not in r:
            continue
        kind = ("wsbwdr" if rows_first else "wsbwd") if r["dir"] != "fwd" else "wsw" if words_first else "ws"
        key = f"{kind}|{r['m']}|{r['n']}|{-(-r['k'] // kern.CHUNK) * kern.CHUNK}"
        if kind in ("wsw", "wsbwdr") or r["ws_over_shipped"] >= 1.03:
            tuned[key] = r["ws_config"]
        elif r["shipped_path"] == "nvfp4_gemm":
            tuned[key] = None
    (out / "tuned_ws.json").write_text(json.dumps(tuned, indent=1))


if __name__ == "__main__":
    main()

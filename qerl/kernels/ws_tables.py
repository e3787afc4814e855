"""Launch tables of the warp-specialized kernels (``qerl.kernels.nvfp4_gemm_ws``): their launch-config types and
the configs searched per layer shape and M bucket on H200s (benchmarks/RESULTS.md names the run behind each entry).

Data only. ``nvfp4_gemm_ws`` imports these names and its dispatch (``pick``, ``pick_grad_input``, ``words_key``,
``epilogue_config``) reads them there: code that swaps a whole table (benchmarks/routes.py's tables of another tree,
tests) rebinds ``nvfp4_gemm_ws.TUNED`` and the like, and entries added in place (``nvfp4_gemm.load_tuned_configs``)
reach both names, which hold the same dicts.
"""

from __future__ import annotations

from typing import NamedTuple


class WsConfig(NamedTuple):
    """Launch parameters of ``nvfp4_gemm_ws._ws_fwd_kernel``: BN rows of W by BM rows of X (8-256: wgmma's N) per CTA,
    ``stages`` shared-memory stages of one 128-element chunk each, ``split_k`` programs along K (runs of the chunks
    as even as their count allows; the splits of entries made before run 16 are the divisors of the count that
    ``nvfp4_gemm._even_split`` took then); ``consumers`` warpgroups (1 or 2) share each stage, each taking BN /
    consumers rows (64 or 128). ``in_flight``: a chunk's wgmmas stay in flight under the next chunk's dequantization
    (two sets of operand registers; one consumer only: with two, the 168 registers a thread of three warpgroups gets
    made ptxas serialize the wgmmas); otherwise they retire first. ``maxnreg`` caps registers per thread (a CTA is
    two warpgroups, the loader's padded): 128 lets two single-consumer CTAs share an SM (64-row tiles fit it with
    chunks in flight), 80 three, 64 four (the 8- and 16-row decode tiles, whose accumulator is 4-8 registers)."""

    bm: int
    bn: int
    stages: int = 4
    split_k: int = 1
    consumers: int = 1
    in_flight: bool = True
    maxnreg: int | None = None
    # Split-K partials summed by the last CTA of each tile (an atomic counter per tile and consumer, as
    # ``nvfp4_gemm.FwdConfig.fused``) instead of a second kernel (``nvfp4_gemm._reduce``).
    fused: bool = False
    # Stream-K (``_ws_fwd_sk_kernel``): ``stream_k`` CTAs per SM (1-4; 3 or 4 need ``maxnreg`` 80 / 64 and the
    # stages to fit), each taking an equal run of the (tile, chunk) steps
    # of the whole product, across tile boundaries; 0: one CTA per tile (and split), as above. With ``in_flight``
    # (one consumer, run 34) its loop over tiles needs more registers than the tile kernel's: 96 for 64 rows of W
    # below 64 rows of X, 168 for 128 rows (at fewer ptxas serializes the wgmmas).
    stream_k: int = 0
    # With ``stream_k``: whole waves of tiles one per CTA, stream-K only over the tiles left after them, each split
    # into equal runs aligned to the tile (``sk_plan``). Pure stream-K puts every CTA at another point of the
    # reduction, so CTAs sharing an operand tile no longer read it at the same time and L2 stops serving it.
    dp_waves: bool = False


class WsBwdConfig(NamedTuple):
    """Launch parameters of ``nvfp4_gemm_ws._ws_bwd_kernel`` (input gradient): BM rows of dY (8-128, 256 with two
    consumers) by one 128-column chunk of K per CTA, ``stages`` shared-memory stages of 64 rows of W each,
    ``split_n`` programs along N (runs of the 64-row steps as even as their count allows; fp32 partials summed by
    ``nvfp4_gemm._reduce``, or in the kernel with ``fused``; the splits of entries made before run 22 divide their
    step count), ``maxnreg`` as in ``WsConfig``."""

    bm: int
    stages: int = 6
    split_n: int = 1
    maxnreg: int | None = None
    fused: bool = False  # split-N partials summed by the last CTA of each tile, as ``WsConfig.fused``
    stream_k: int = 0  # CTAs per SM sharing the (tile, step) sequence evenly, as ``WsConfig.stream_k`` (two consumers)
    # 2: two consumer warpgroups, one per half of the chunk (the code bytes' low / high nibbles), each dequantizing
    # only its half into one accumulator: half the registers per row of dY, so BM reaches 256.
    consumers: int = 1
    dp_waves: bool = False  # with ``stream_k``: whole waves of tiles one per CTA, as ``WsConfig.dp_waves``
    # One consumer: a step's wgmmas stay in flight under the next step's dequantization (two operand sets), as
    # ``WsConfig.in_flight``; False retires them before the next step (the CTAs sharing the SM fill the gap).
    in_flight: bool = False


# Launch configs from the searches of ``benchmarks/gemm_ws.py`` on H200s (benchmarks/RESULTS.md, run 9) for the
# Qwen2.5-7B / 14B / 32B layer shapes: {(m_bucket, n, k_pad): config, or None where this kernel was not at least 3%
# faster than ``nvfp4_gemm``'s default path}. Entries marked "searched later" come from the searches with splits
# 2-4 on every tile, taken where at least 10% faster and then checked against the previous code in alternating passes.
# Run 10 (benchmarks/RESULTS.md): M = 1 / 8 / 16 searched with the 8- and 16-row decode tiles against the decode
# kernels (taken at M = 16 on four wide layers, declined elsewhere), and M = 32 with 32-row tiles on 80 registers
# (three CTAs per SM), which replaced every M = 32 entry; the input gradient at M = 1-32 with 8-32 rows of dY on 64 or
# 80 registers (three or four CTAs per SM), taken on 7 of the 8 shapes, then with the split sums in the kernel where
# those measured at least 3% faster (narrow layers at M = 1 / 8).
# ``nvfp4_gemm.nvfp4_matmul`` (``TUNED``) and ``nvfp4_matmul_grad_input`` (``TUNED_BWD``, also measured at
# M = 1 / 8 / 16) take these kernels where the nearest measured bucket holds a config (``pick``; forward from
# M = ``MIN_M``); add entries with ``nvfp4_gemm.load_tuned_configs`` ("ws|M|N|K_pad", "wsbwd|..."). Entries marked
# "run 12" (M = 256-1024): searches with 256-row tiles of X, stream-K and (input gradient) two consumers, taken where
# at least 5% faster than the previous entry (8% than the slab path) and checked against the previous commit in
# alternating passes (benchmarks/RESULTS.md, run 12). Entries marked "run 13" (input gradient, M = 256-1024): its
# search after the ldmatrix loads, the scale warp and the split step, taken where a different config was at least 8%
# faster than the entry (the same config measured up to 16% apart in that search, an order effect), then checked in
# alternating passes (run 13). Entries marked "run 21": the "fill" searches (``benchmarks/gemm_ws.py --tile-set
# fill``: splits that fill whole waves of the CTAs an SM holds, which the earlier searches never tried where a
# layer's tiles outnumber the SMs, e.g. 7B down's 148 chunks; for the input gradient also a step's wgmmas in flight,
# ``WsBwdConfig.in_flight``) at M = 1-512, taken where at least 3% faster than the entry in the same pass and not the
# entry itself, then checked against the previous tables in alternating passes (every changed cell faster); at M = 8
# the input gradient takes M = 1's pick where that changed (the same 8-row tile, so the same work). Input-gradient
# entries marked "run 23": its "fill" search at M = 1-32 again with the CTAs an SM really holds (the earlier searches
# counted one more per SM, ``benchmarks/gemm_ws.py``'s ``BWD_CTAS_PER_SM``), taken as in run 21 but where the
# alternating passes ran them level (H200) or an H100 ran them 10% slower.
TUNED: dict[tuple[int, int, int], WsConfig | None] = {
    (1, 3584, 3584): None,  # 0.95x of the decode kernels
    (8, 3584, 3584): None,  # 0.92x of the decode kernels
    (16, 3584, 3584): None,  # 0.89x of the decode kernels
    (32, 3584, 3584): WsConfig(32, 64, 4, 4, maxnreg=80),  # run 10: 1.16x the previous entry
    (64, 3584, 3584): WsConfig(64, 64, 4, 4, maxnreg=128),
    (128, 3584, 3584): WsConfig(128, 64, 4, 2),  # run 21: 1.06x the previous entry
    (256, 3584, 3584): WsConfig(128, 64, 4, 1),
    (512, 3584, 3584): WsConfig(128, 64, 3, 1, maxnreg=128),
    (1024, 3584, 3584): WsConfig(256, 128, 3, 1, 2, False),  # run 12: 1.09x the previous entry
    (1, 3584, 18944): None,  # 0.98x of the decode kernels
    (8, 3584, 18944): None,  # 1.01x of the decode kernels
    (16, 3584, 18944): WsConfig(16, 64, 6, 4, maxnreg=80, fused=True),  # run 10: 1.18x the decode kernels
    (32, 3584, 18944): WsConfig(32, 128, 4, 9, maxnreg=128),  # run 21: 1.10x the previous entry
    (64, 3584, 18944): WsConfig(64, 64, 5, 4, maxnreg=128),
    (128, 3584, 18944): WsConfig(128, 128, 4, 4, consumers=2, in_flight=False),
    (256, 3584, 18944): WsConfig(256, 128, 3, 4, 2, False),  # run 12: 1.06x the previous entry
    (512, 3584, 18944): WsConfig(256, 128, 3, 4, 2, False),  # run 12: 1.08x the previous entry
    (1024, 3584, 18944): WsConfig(256, 128, 3, 1, 2, False),  # run 12: 1.19x the previous entry
    (1, 4608, 3584): None,  # 0.85x of the decode kernels
    (8, 4608, 3584): None,  # 0.82x of the decode kernels
    (16, 4608, 3584): None,  # 0.83x of the decode kernels
    (32, 4608, 3584): WsConfig(32, 64, 4, 4, maxnreg=80),  # run 10: 1.10x the previous entry
    (64, 4608, 3584): WsConfig(64, 64, 4, 3, maxnreg=128),  # run 21: 1.04x the previous entry
    (128, 4608, 3584): WsConfig(128, 64, 3, 3, maxnreg=128),  # run 21: 1.05x the previous entry
    (256, 4608, 3584): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 14: 1.11x the previous entry
    (512, 4608, 3584): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 14: 1.07x the previous entry
    (1024, 4608, 3584): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 12: stream-K, 1.11x the previous entry
    (1, 5120, 5120): None,  # 0.92x of the decode kernels
    (8, 5120, 5120): None,  # 0.89x of the decode kernels
    (16, 5120, 5120): None,  # 0.90x of the decode kernels
    (32, 5120, 5120): WsConfig(32, 64, 4, 4, maxnreg=80),  # run 10: 1.35x the previous entry
    (64, 5120, 5120): WsConfig(64, 64, 5, 3, maxnreg=128),  # run 21: 1.14x the previous entry
    (128, 5120, 5120): WsConfig(128, 64, 3, 3, maxnreg=128),  # run 21: 1.15x the previous entry
    (256, 5120, 5120): WsConfig(128, 256, 3, 3, consumers=2, in_flight=False),  # run 21: 1.06x the previous entry
    (512, 5120, 5120): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 12: stream-K, 1.08x the previous entry
    (1024, 5120, 5120): None,  # 0.87x of the previous path
    (1, 5120, 13824): None,  # 0.89x of the decode kernels
    (8, 5120, 13824): None,  # 0.86x of the decode kernels
    (16, 5120, 13824): None,  # 0.94x of the decode kernels
    (32, 5120, 13824): WsConfig(32, 128, 4, 6, maxnreg=128),  # run 21: 1.03x the previous entry
    (64, 5120, 13824): WsConfig(64, 64, 5, 3, maxnreg=128),  # split 3 searched later in run 9
    (128, 5120, 13824): WsConfig(128, 128, 4, 3, consumers=2, in_flight=False),  # likewise
    (256, 5120, 13824): WsConfig(128, 256, 3, 3, consumers=2, in_flight=False),  # run 21: 1.19x the previous entry
    (512, 5120, 13824): WsConfig(256, 128, 3, 1, 2, False, stream_k=1),  # run 14: 1.14x the previous entry
    (1024, 5120, 13824): WsConfig(256, 128, 2, 1, 2, False, stream_k=1, dp_waves=True),  # run 14: 1.11x the one before
    (1, 5120, 27648): None,  # 0.93x of the decode kernels
    (8, 5120, 27648): None,  # 0.89x of the decode kernels
    (16, 5120, 27648): None,  # 0.97x of the decode kernels
    (32, 5120, 27648): WsConfig(32, 128, 4, 6, maxnreg=128),  # run 21: 1.08x the previous entry
    (64, 5120, 27648): WsConfig(64, 64, 4, 3, maxnreg=128),  # likewise
    (128, 5120, 27648): WsConfig(128, 128, 4, 3, consumers=2, in_flight=False),  # likewise
    (256, 5120, 27648): WsConfig(256, 128, 3, 1, 2, False, stream_k=1, dp_waves=True),  # run 14: 1.14x the one before
    (512, 5120, 27648): WsConfig(256, 128, 3, 1, 2, False, stream_k=1),  # run 12: stream-K, 1.24x the previous entry
    (1024, 5120, 27648): WsConfig(256, 128, 3, 1, 2, False, stream_k=1, dp_waves=True),  # run 14: 1.17x the one before
    (2048, 5120, 27648): WsConfig(256, 128, 3, 1, 2, False, stream_k=1, dp_waves=True),  # run 25: M = 1024's, 0.94x the slab path's time
    (4096, 5120, 27648): WsConfig(256, 128, 3, 1, 2, False, stream_k=1, dp_waves=True),  # run 25: M = 1024's, 0.95x the slab path's time
    (1, 7168, 5120): None,  # 0.93x of the decode kernels
    (8, 7168, 5120): None,  # 0.89x of the decode kernels
    (16, 7168, 5120): None,  # 0.96x of the decode kernels
    (32, 7168, 5120): WsConfig(32, 64, 4, 2, maxnreg=80),  # run 10: 1.23x the previous entry
    (64, 7168, 5120): WsConfig(64, 64, 5, 1, maxnreg=128),
    (128, 7168, 5120): WsConfig(128, 64, 4, 1),
    (256, 7168, 5120): WsConfig(128, 64, 3, 1, maxnreg=128),  # run 21: 1.14x the previous entry
    (512, 7168, 5120): WsConfig(256, 128, 3, 1, 2, False),  # run 12: 1.21x the previous entry
    (1024, 7168, 5120): WsConfig(256, 128, 3, 1, 2, False),  # run 12: 1.09x the previous entry
    (1, 27648, 5120): None,  # 0.90x of the decode kernels
    (8, 27648, 5120): None,  # 0.92x of the decode kernels
    (16, 27648, 5120): WsConfig(16, 128, 6, 1, maxnreg=128),  # run 10: 1.08x the decode kernels
    (32, 27648, 5120): WsConfig(32, 128, 4, 1, maxnreg=128),  # run 10: 1.28x the previous entry
    (64, 27648, 5120): WsConfig(64, 256, 4, 1, consumers=2, in_flight=False),  # run 21: 1.04x the previous entry
    (128, 27648, 5120): WsConfig(128, 256, 3, 1, consumers=2, in_flight=False),
    (256, 27648, 5120): WsConfig(256, 128, 3, 1, 2, False),  # run 12: 1.12x the previous entry
    (512, 27648, 5120): WsConfig(256, 128, 3, 1, 2, False),  # run 12: 1.12x the previous entry
    (1024, 27648, 5120): WsConfig(256, 128, 3, 1, 2, False),  # run 12: 1.08x the previous entry
    (1, 37888, 3584): None,  # 0.91x of the decode kernels
    (8, 37888, 3584): None,  # 0.91x of the decode kernels
    (16, 37888, 3584): WsConfig(16, 64, 6, 1, maxnreg=80),  # run 10: 1.04x the decode kernels
    (32, 37888, 3584): WsConfig(32, 64, 4, 1, maxnreg=80),  # run 10: 1.44x the previous entry
    (64, 37888, 3584): WsConfig(64, 64, 3, 1, in_flight=False, maxnreg=80),  # run 21: 1.12x the previous entry
    (128, 37888, 3584): WsConfig(128, 64, 3, 1, maxnreg=128),
    (256, 37888, 3584): WsConfig(256, 128, 3, 1, 2, False, stream_k=1),  # run 14: 1.14x the previous entry
    (512, 37888, 3584): WsConfig(128, 256, 3, 1, consumers=2, in_flight=False),
    (1024, 37888, 3584): WsConfig(256, 128, 3, 1, 2, False),  # run 12: 1.13x the previous entry
    # Run 30 (whole tiles stored by TMA): 0.95-0.96 (H200) / 0.91-0.93 (H100) of the slab path's time at M = 1536-2048;
    # M = 1025-1536 keep the slab path (the same config 1.03-1.05x slower at M = 1152 / 1408 on the H200). Run 31
    # replaced these keys and M = 1024's (below: ``_SK_RING``).
    (1536, 37888, 3584): None,
    (2048, 37888, 3584): WsConfig(256, 128, 3, 1, 2, False),
    (1, 55296, 5120): None,  # 0.84x of the decode kernels
    (8, 55296, 5120): None,  # 0.86x of the decode kernels
    (16, 55296, 5120): None,  # 1.02x of the decode kernels
    (32, 55296, 5120): WsConfig(32, 64, 4, 1, maxnreg=80),  # run 10: 1.32x the previous entry
    (64, 55296, 5120): WsConfig(64, 64, 3, 1, in_flight=False, maxnreg=80),  # run 21: 1.06x the previous entry
    (128, 55296, 5120): WsConfig(128, 256, 3, 1, consumers=2, in_flight=False),
    (256, 55296, 5120): WsConfig(256, 128, 3, 1, 2, False, stream_k=1),  # run 12: stream-K, 1.07x the previous entry
    (512, 55296, 5120): WsConfig(256, 128, 3, 1, 2, False),  # run 12: 1.15x the previous entry
    # Run 30: one tile per CTA with the TMA store, 0.97 / 0.96 of the stream-K entry's time (run 26's, M = 256's) at
    # M = 1024 on the H200 / H100, and 0.87-0.99 / 0.84-0.92 of the slab path's at M = 1152-2048 (run 31 replaced
    # both, below).
    (1024, 55296, 5120): WsConfig(256, 128, 3, 1, 2, False),
    (2048, 55296, 5120): WsConfig(256, 128, 3, 1, 2, False),
}
# Run 26: keys between the powers of two (``nvfp4_gemm.FINE_MS``; an M takes the smallest key at or above it).
# ``benchmarks/routes.py`` timed every route at M = 384 / 640 / 768 / 896 / 1024 / 1536 / 2048 on an H200 (the table's
# configs from M / 4 to 4 M, the slab path, the tile loop): at an M between two buckets the larger bucket's tiles
# often fill the last wave of CTAs poorly. Taken where another table config was at least 3% faster than the default
# dispatch (and more than twice the gap between two graphs of the same calls); where the slab path won,
# ``nvfp4_gemm.SLAB_RANGES`` sends the M there instead. A key marked "kept" holds the config the default dispatch
# already took there, so that a changed key above it does not take its M. Left out after the check at M off the
# measured grid (M = 320-1792): 7B gate_up's M = 384 key (1.07x at 384, 1.44x slower at 320) and 14B down's M = 1536
# key (1.05x at 1536, 1.19x slower at 1152); the input gradient's 14B / 32B o M = 1536 key (1.06x slower at 1152) and
# 7B qkv's M = 2048 key (1.05x at 2048, 1.19x slower at 1792); 7B gate_up's M = 2048 key (1.05x at 2048, 1.09-1.10x
# slower at 1152 / 1408) serves only M = 1537-2048.
TUNED.update({
    (640, 37888, 3584): WsConfig(128, 256, 3, 1, consumers=2, in_flight=False),  # M = 512's, 1.10x
    (768, 37888, 3584): WsConfig(256, 128, 3, 1, 2, False),  # kept (M = 1024's)
    (896, 37888, 3584): WsConfig(128, 256, 3, 1, consumers=2, in_flight=False),  # M = 512's, 1.05x
    (384, 3584, 18944): WsConfig(128, 128, 4, 4, 2, False),  # M = 128's, 1.19x
    (768, 3584, 18944): WsConfig(256, 128, 3, 4, 2, False),  # M = 512's, 1.08-1.09x at 640 / 768
    (768, 5120, 5120): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # M = 512's, 2.0-2.1x (the tile loop's)
    (384, 5120, 13824): WsConfig(128, 128, 4, 3, 2, False),  # M = 128's, 1.28x
    (896, 5120, 13824): WsConfig(256, 128, 3, 1, 2, False, stream_k=1),  # M = 512's, 1.05-1.07x at 640-896
    (384, 27648, 5120): WsConfig(128, 256, 3, 1, 2, False),  # M = 128's, 1.24x
    (384, 55296, 5120): WsConfig(128, 256, 3, 1, 2, False),  # M = 128's, 1.36x
    (640, 55296, 5120): WsConfig(128, 256, 3, 1, consumers=2, in_flight=False),  # kept (M = 1024's before run 26)
    (768, 55296, 5120): WsConfig(256, 128, 3, 1, 2, False),  # M = 512's, 1.07x
    (896, 55296, 5120): WsConfig(128, 256, 3, 1, consumers=2, in_flight=False),  # kept (M = 1024's before run 26)
})
# Run 27 (benchmarks/gemm_ws.py --tile-set fill at M = 192, then routes.py --verify at M = 136-192 off the grid):
# the M = 256 entries' 128-row tiles and stream-K left M = 129-192 at 0.46-0.76x of BF16 on some layers (gains: the
# search's). Left out after the check: 32B down's M = 192 key (1.15x in the search, 1.06x slower at 192), and 7B o's
# (1.08-1.10x slower at M = 136-160 than the M = 256 entry with the last tile shifted).
TUNED.update({
    (192, 4608, 3584): WsConfig(64, 64, 5, 1, 1, True, 128),  # 1.25x the previous route (7B qkv)
    (192, 37888, 3584): WsConfig(64, 128, 4, 1, 1, False, 128),  # 1.07x (7B gate_up)
    (192, 7168, 5120): WsConfig(128, 128, 4, 1, 2, False),  # 1.60x (14B / 32B qkv)
    (192, 5120, 5120): WsConfig(64, 64, 4, 1, 1, True, 128),  # 1.19x (14B / 32B o)
})
# Run 31 (benchmarks/tma_store.py, H200): stream-K on 256 x 128 tiles with whole tiles stored by TMA through the ring
# (``_sk_ring_store_tile``): pure stream-K gives each CTA a run of whole tiles (e.g. 9 of 7B gate_up's 1184 at
# M = 1024), so a tile's copies and the next tile's first loads overlap its neighbours' work instead of waiting at the
# CTA's exit. Time against the dispatch before, at M = 1024 / 2048 (65b) and off the grid (65c): gate_up 7B
# 0.96 / 0.96 (1.02 at 1152, 0.90-0.95 at 1536-1792, 0.96 at 4096), 14B 0.96 / 0.90 (0.99 at 1152, 0.88 at
# 1536-1792, 0.92 at 4096), 32B 0.93 / 0.93 (1.01 at 1152, 0.96-0.97 at 1536-1792, 0.90 at 4096); 14B down with whole
# waves 0.97 / 0.93 (0.88 / 0.83 at 1536 / 1792, 0.95 at 4096; pure stream-K at 1152 0.96, whole waves 1.12 slower).
_SK_RING = WsConfig(256, 128, 3, 1, 2, False, stream_k=1)
TUNED.update({
    (1024, 37888, 3584): _SK_RING,
    (1536, 37888, 3584): _SK_RING,
    (2048, 37888, 3584): _SK_RING,
    (4096, 37888, 3584): _SK_RING,
    (1024, 27648, 5120): _SK_RING,
    (2048, 27648, 5120): _SK_RING,
    (4096, 27648, 5120): _SK_RING,
    (1024, 55296, 5120): _SK_RING,
    (2048, 55296, 5120): _SK_RING,
    (4096, 55296, 5120): _SK_RING,
    (1024, 5120, 13824): _SK_RING._replace(dp_waves=True),
    (1280, 5120, 13824): _SK_RING,
    (2048, 5120, 13824): _SK_RING._replace(dp_waves=True),
    (4096, 5120, 13824): _SK_RING._replace(dp_waves=True),
})
# Run 32 (benchmarks/sk_fixup.py, H200, 66f): pure stream-K on 256 x 128 tiles where about one tile falls to each SM,
# now that a split tile is summed by the CTA holding its first chunk, its accumulator seeded with the next CTA's part
# (``_sk_seed_part``): time against the dispatch before at M = 1024 / 2048 (the slab path unless said): 7B qkv 0.96,
# 14B / 32B o 0.91 (both at M = 897-1024: ``nvfp4_gemm.SLAB_RANGES`` keeps M = 769-896, where the slab path's time
# falls with M and this kernel's, on four row tiles, does not), 7B down 0.96 (the one-tile entry's; back on it since
# run 33, below), 14B / 32B qkv 0.94
# (one tile per CTA before), 7B o at M = 2048 0.89 (M = 1025-2048). Below 0.97 only; 7B o at M = 1024 (112 tiles, runs
# of 24 steps: shorter than a tile, so the parts are added at the runs' end) stays one tile per CTA (1.08x its time).
TUNED.update({
    (768, 4608, 3584): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # M = 513-768: M = 1024's entry before
    (1024, 4608, 3584): _SK_RING,
    (1024, 7168, 5120): _SK_RING,
    (1024, 5120, 5120): _SK_RING,
    (2048, 3584, 3584): _SK_RING,
})
# Run 33 (benchmarks/sustained.py, H200): under sustained load (each variant replayed back to back for seconds, at the
# power limit, as a training step's products run) three stream-K picks of short passes ran at 1226-1290 MHz against
# 1429-1638 MHz for their routes before, which then took 0.84-0.89 / 0.94-0.96 / 0.92-0.95 of their time: 7B down's
# forward at M = 1024 back on one tile per CTA (run 31's entry; short passes had stream-K at 0.96 of its time), 32B
# gate_up's forward and 32B down's input gradient at M = 2049-4096 back on the slab path (TUNED_BWD below).
TUNED.update({
    (1024, 3584, 18944): WsConfig(256, 128, 3, 1, 2, False),
    (4096, 55296, 5120): None,
})
TUNED_BWD: dict[tuple[int, int, int], WsBwdConfig | None] = {
    (1, 3584, 3584): WsBwdConfig(8, 4, 8, maxnreg=80, fused=True),  # run 10: 1.05x the entry without
    (8, 3584, 3584): WsBwdConfig(8, 4, 8, maxnreg=80),  # run 10: 1.11x the Triton kernels
    (16, 3584, 3584): WsBwdConfig(16, 6, 9, 128, in_flight=True),  # run 24: 1.04x, the second kernel's sum
    (32, 3584, 3584): WsBwdConfig(32, 6, 9, 96, in_flight=True),  # run 23: 1.04x the previous entry
    (64, 3584, 3584): WsBwdConfig(64, 4, 8, maxnreg=128),
    (128, 3584, 3584): WsBwdConfig(128, 4, 4, in_flight=True),  # run 21: 1.14x the previous entry
    (256, 3584, 3584): WsBwdConfig(128, 4, 2, in_flight=True),  # run 21: 1.07x the previous entry
    (512, 3584, 3584): WsBwdConfig(128, 4, 1, in_flight=True),  # run 21: 1.05x the previous entry
    (1024, 3584, 3584): WsBwdConfig(256, 4, 1, consumers=2),  # run 12: 1.14x the previous entry
    (1, 3584, 18944): WsBwdConfig(8, 6, 3, 64),  # run 23: 1.03x the previous entry
    (8, 3584, 18944): WsBwdConfig(8, 6, 3, 64),  # run 23: M = 1's pick
    (16, 3584, 18944): WsBwdConfig(16, 4, 4, 80),  # run 21: 1.54x the previous path
    (32, 3584, 18944): WsBwdConfig(32, 4, 4, 80),  # run 21: 1.31x the previous entry
    (64, 3584, 18944): WsBwdConfig(64, 4, 2, 128, in_flight=True),  # run 21: 1.27x the previous path
    (128, 3584, 18944): WsBwdConfig(128, 4, 1, maxnreg=128),
    (256, 3584, 18944): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2),  # run 12: 1.16x the previous entry
    (512, 3584, 18944): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2),  # run 12: 1.12x the previous path
    (1024, 3584, 18944): WsBwdConfig(256, 5, 1, stream_k=1, consumers=2),  # run 13: 1.20x the previous path
    (2048, 3584, 18944): WsBwdConfig(256, 5, 1, stream_k=1, consumers=2),  # run 25: M = 1024's, 0.91x the slab path's time
    (1, 4608, 3584): WsBwdConfig(8, 4, 8, maxnreg=80, fused=True),  # run 10: 1.16x; run 23: summed in the kernel
    (8, 4608, 3584): WsBwdConfig(8, 4, 8, maxnreg=80),  # run 10: 1.14x the Triton kernels
    (16, 4608, 3584): WsBwdConfig(16, 6, 9, 128, in_flight=True),  # run 24: 1.07x, the second kernel's sum
    (32, 4608, 3584): WsBwdConfig(32, 8, 9, 96, in_flight=True),  # run 21: 1.09x the previous entry
    (64, 4608, 3584): WsBwdConfig(64, 4, 9, 128, in_flight=True),  # run 21: 1.11x the previous entry
    (128, 4608, 3584): WsBwdConfig(128, 4, 4, in_flight=True),  # run 21: 1.14x the previous entry
    (256, 4608, 3584): WsBwdConfig(128, 4, 2, in_flight=True),  # run 21: 1.05x the previous entry
    (512, 4608, 3584): WsBwdConfig(128, 4, 1, in_flight=True),  # run 21: 1.05x the previous entry
    (1024, 4608, 3584): WsBwdConfig(256, 4, 1, consumers=2),  # run 12: 1.16x the previous entry
    (1, 5120, 5120): WsBwdConfig(8, 4, 8, maxnreg=80, fused=True),  # run 10: 1.03/1.03x the entry without
    (8, 5120, 5120): WsBwdConfig(8, 4, 8, maxnreg=80, fused=True),  # run 10: 1.03/1.03x the entry without
    (16, 5120, 5120): WsBwdConfig(16, 6, 6, 128, in_flight=True),  # run 23: 1.04x / 1.05x, summed by a 2nd kernel
    (32, 5120, 5120): WsBwdConfig(32, 8, 6, 96, in_flight=True),  # run 23: 1.07x / 1.06x the previous entry
    (64, 5120, 5120): WsBwdConfig(64, 4, 5, 128, in_flight=True),  # run 21: 1.18x the previous entry
    (128, 5120, 5120): WsBwdConfig(128, 4, 4, maxnreg=128),
    (256, 5120, 5120): WsBwdConfig(128, 6, 1, stream_k=1, consumers=2),  # run 12: 1.08x the previous entry
    (512, 5120, 5120): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2),  # run 14: stream-K, 1.10x the previous entry
    (1024, 5120, 5120): None,  # 0.65x of the previous path (run 33: stream-K, below)
    (1, 5120, 13824): WsBwdConfig(8, 6, 4, maxnreg=64),  # run 10: 1.22x (run 23: its pick ran level, not taken)
    (8, 5120, 13824): WsBwdConfig(8, 6, 4, maxnreg=64),  # run 10: 1.43x the previous entry
    (16, 5120, 13824): WsBwdConfig(16, 4, 2, maxnreg=80),  # run 10: 1.20x (run 23: its pick 0.90-0.97x on an H100)
    (32, 5120, 13824): WsBwdConfig(32, 8, 2, 96, in_flight=True),  # run 21: 1.05x the previous entry
    (64, 5120, 13824): WsBwdConfig(64, 4, 2, 128, in_flight=True),  # run 21: 1.05x the previous entry
    (128, 5120, 13824): WsBwdConfig(128, 4, 1, in_flight=True),  # run 21: 1.08x the previous entry
    (256, 5120, 13824): WsBwdConfig(256, 4, 1, consumers=2),  # run 12: 1.17x the previous entry
    (512, 5120, 13824): WsBwdConfig(256, 4, 1, consumers=2),  # run 12: 1.21x the previous path
    (1024, 5120, 13824): WsBwdConfig(256, 5, 1, stream_k=1, consumers=2),  # run 12: 1.10x the previous path
    (2048, 5120, 13824): WsBwdConfig(256, 5, 1, stream_k=1, consumers=2),  # run 25: M = 1024's, 0.94x the slab path's time
    (1, 5120, 27648): WsBwdConfig(8, 4, 3, 80),  # run 23: 1.05x the previous entry
    (8, 5120, 27648): WsBwdConfig(8, 4, 3, 80),  # run 23: M = 1's pick
    (16, 5120, 27648): WsBwdConfig(16, 4, 3, 80),  # run 23: 1.06x the previous entry
    (32, 5120, 27648): WsBwdConfig(32, 8, 1, 96, in_flight=True),  # run 21: 1.04x the previous entry
    (64, 5120, 27648): WsBwdConfig(64, 4, 1, 128, in_flight=True),  # run 21: 1.08x the previous entry
    (128, 5120, 27648): WsBwdConfig(128, 4, 1, maxnreg=128),
    (256, 5120, 27648): WsBwdConfig(256, 4, 1, consumers=2),  # run 13: 1.14x the previous entry
    (512, 5120, 27648): WsBwdConfig(256, 5, 1, stream_k=1, consumers=2),  # run 12: 1.18x the previous entry
    (1024, 5120, 27648): WsBwdConfig(256, 5, 1, stream_k=1, consumers=2),  # run 12: 1.16x the previous entry
    (2048, 5120, 27648): WsBwdConfig(256, 5, 1, stream_k=1, consumers=2),  # run 25: M = 1024's, 0.91x the slab path's time
    (4096, 5120, 27648): WsBwdConfig(256, 5, 1, stream_k=1, consumers=2),  # run 25: M = 1024's, 0.93x the slab path's time
    (1, 7168, 5120): WsBwdConfig(8, 6, 6, 128, True, in_flight=True),  # run 23: 1.04x / 1.03x (14B / 32B)
    (8, 7168, 5120): WsBwdConfig(8, 6, 6, 128, True, in_flight=True),  # run 23: M = 1's pick
    (16, 7168, 5120): WsBwdConfig(16, 6, 6, 128, in_flight=True),  # run 24: 1.09x / 1.10x (32B's / 14B's pick)
    (32, 7168, 5120): WsBwdConfig(32, 8, 6, 96, in_flight=True),  # run 23: 1.11x the previous entry (14B and 32B)
    (64, 7168, 5120): WsBwdConfig(64, 4, 4, 128, in_flight=True),  # run 21: 1.05x the previous entry
    (128, 7168, 5120): WsBwdConfig(128, 4, 4, maxnreg=128),
    (256, 7168, 5120): WsBwdConfig(128, 6, 1, stream_k=1, consumers=2),  # run 12: 1.14x the previous entry
    (512, 7168, 5120): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2),  # run 12: 1.33x the previous entry
    (1024, 7168, 5120): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2),  # run 14: 1.03-1.06x the slab path
    (1, 27648, 5120): WsBwdConfig(8, 6, 13, 64, True),  # run 23: 1.14x the previous entry
    (8, 27648, 5120): WsBwdConfig(8, 6, 13, 64, True),  # run 23: M = 1's pick
    (16, 27648, 5120): WsBwdConfig(16, 6, 6, 128, True, in_flight=True),  # run 21: 1.08x (runs 23-24: picks slower on H100)
    (32, 27648, 5120): WsBwdConfig(32, 6, 6, 128, in_flight=True),  # run 21: 1.10x the previous entry
    (64, 27648, 5120): WsBwdConfig(64, 4, 6, 128, in_flight=True),  # run 21: 1.61x the previous path
    (128, 27648, 5120): WsBwdConfig(128, 4, 3, in_flight=True),  # run 21: 1.25x the previous entry
    (256, 27648, 5120): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2),  # run 12: 1.43x the previous entry
    (512, 27648, 5120): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2),  # run 12: 1.24x the previous path
    (1024, 27648, 5120): WsBwdConfig(256, 5, 1, stream_k=1, consumers=2, dp_waves=True),  # run 14: 1.24x the slab path
    (2048, 27648, 5120): WsBwdConfig(256, 5, 1, stream_k=1, consumers=2, dp_waves=True),  # run 25: M = 1024's, 0.92x the slab path's time
    (4096, 27648, 5120): WsBwdConfig(256, 5, 1, stream_k=1, consumers=2, dp_waves=True),  # run 25: M = 1024's, 0.96x the slab path's time
    (1, 37888, 3584): WsBwdConfig(8, 8, 14, 80, True, in_flight=True),  # run 23: 1.13x the previous entry
    (8, 37888, 3584): WsBwdConfig(8, 8, 14, 80, True, in_flight=True),  # run 23: M = 1's pick
    (16, 37888, 3584): WsBwdConfig(16, 4, 14, 80, True),  # run 23: 1.10x the previous entry
    (32, 37888, 3584): WsBwdConfig(32, 4, 14, 80),  # run 23: 1.14x the previous entry
    (64, 37888, 3584): WsBwdConfig(64, 4, 8, 128, in_flight=True),  # run 21: 1.06x the previous entry
    (128, 37888, 3584): WsBwdConfig(128, 4, 8, maxnreg=128),
    (256, 37888, 3584): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2, dp_waves=True),  # run 14: 1.07x the one before
    (512, 37888, 3584): WsBwdConfig(256, 4, 4, consumers=2),  # run 12: 1.18x the previous path
    (1024, 37888, 3584): WsBwdConfig(256, 5, 1, consumers=2),  # run 13: 1.17x the previous path
    (1, 55296, 5120): WsBwdConfig(8, 6, 13, 64, True),  # run 23: 1.03x the previous entry
    (8, 55296, 5120): WsBwdConfig(8, 6, 13, 64, True),  # run 23: M = 1's pick
    (16, 55296, 5120): WsBwdConfig(16, 6, 13, 64, True),  # run 23: 1.05x the previous entry
    (32, 55296, 5120): WsBwdConfig(32, 4, 9, 80),  # run 23: 1.12x the previous entry
    (64, 55296, 5120): WsBwdConfig(64, 4, 6, 128, in_flight=True),  # run 21: 1.59x the previous path
    (128, 55296, 5120): WsBwdConfig(128, 4, 3, in_flight=True),  # run 21: 1.20x the previous entry
    (256, 55296, 5120): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2),  # run 12: 1.54x the previous entry
    (512, 55296, 5120): WsBwdConfig(128, 6, 1, stream_k=1, consumers=2, dp_waves=True),  # run 14: 1.07x the one before
    (1024, 55296, 5120): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2, dp_waves=True),  # run 14: 1.18x the slab path
    (2048, 55296, 5120): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2, dp_waves=True),  # run 25: M = 1024's, 0.87x the slab path's time
    (4096, 55296, 5120): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2, dp_waves=True),  # run 25: M = 1024's, 0.91x the slab path's time
}
# Run 26: keys between the powers of two, as ``TUNED``'s (M = 384 / 640 / 768 / 1536, and 2048).
TUNED_BWD.update({
    (384, 37888, 3584): WsBwdConfig(128, 4, 8, maxnreg=128),  # M = 128's, 1.13x
    (768, 37888, 3584): WsBwdConfig(256, 4, 4, consumers=2),  # M = 512's, 1.15-1.16x at 640 / 768
    (2048, 37888, 3584): WsBwdConfig(256, 4, 4, consumers=2),  # M = 512's, 1.05x (slab); M <= 1536 SLAB_RANGES
    (384, 3584, 18944): WsBwdConfig(128, 4, 1, maxnreg=128),  # M = 128's, 1.12x
    (384, 5120, 5120): WsBwdConfig(128, 6, 1, stream_k=1, consumers=2),  # M = 256's, 1.44x
    (640, 5120, 5120): WsBwdConfig(128, 6, 1, stream_k=1, consumers=2),  # M = 256's, 1.69x (the tile loop's)
    (768, 5120, 5120): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2),  # M = 512's, 1.07x (slab)
    (384, 7168, 5120): WsBwdConfig(128, 6, 1, stream_k=1, consumers=2),  # M = 256's, 1.30x
    (1536, 7168, 5120): WsBwdConfig(256, 4, 1, stream_k=1, consumers=2),  # M = 512's, 1.03x (slab)
    (384, 5120, 13824): WsBwdConfig(128, 4, 1, in_flight=True),  # M = 128's, 1.04x
    (384, 5120, 27648): WsBwdConfig(128, 4, 1, maxnreg=128),  # M = 128's, 1.18x
})

# Run 33: pure stream-K on 256-row tiles, its split tiles now summed by the CTA holding their first step (as the
# forward's since run 32): time against the dispatch before, H200 (benchmarks/RESULTS.md run 33): 14B / 32B o at M =
# 1024 0.90 (the slab path's; declined above before) and 2048 0.95, 7B qkv / o at 2048 0.88 / 0.91 (the slab path's).
_SK_BWD = WsBwdConfig(256, 4, 1, stream_k=1, consumers=2)
TUNED_BWD.update({
    (1024, 5120, 5120): _SK_BWD,
    (2048, 5120, 5120): _SK_BWD,
    (2048, 4608, 3584): _SK_BWD,
    (2048, 3584, 3584): _SK_BWD,
    (4096, 5120, 27648): None,  # 32B down at M = 2049-4096: the slab path (sustained load, see TUNED's run 33 entries)
})

# The input gradient on weights of the "rows" code layout (``prepare_weight(layout="rows")``), where it differs from
# ``TUNED_BWD`` (which serves both layouts otherwise): {(m_bucket, n, k_pad): config}. Run 22's "fill" search on this
# layout (H200, benchmarks/RESULTS.md): the picks at least 3% faster than ``TUNED_BWD``'s config on the same weights,
# other than that config itself (the same config can time a few percent apart between the two); the splits of N of
# the second search need not divide the step count (7B o's 56 steps in 9 runs of 6-7). Entries marked "run 23": the
# "fill" search again with the CTAs an SM really holds (three at 80 registers, four at 64, five at 48: the earlier
# searches counted one more, so their wave-filling splits overfilled the last wave) and 48-register candidates, taken
# where at least 3% faster than the shipped config in the same pass; at M = 8 M = 1's pick (the same 8-row tile);
# 14B down's M = 16 pick left out (0.90x on an H100 against 1.04x on the H200). Entries marked "run 24": the "fill"
# search at M = 16 timing both split sums (in the kernel, by a second kernel) for every split candidate.
TUNED_BWD_ROWS: dict[tuple[int, int, int], WsBwdConfig] = {
    # 7B o (3584 x 3584); the factors: the search's, over the shipped config in the same pass
    (32, 3584, 3584): WsBwdConfig(32, 6, 9, 128, False, in_flight=True),  # 1.05x (56 steps in 9 runs of 6-7)
    (64, 3584, 3584): WsBwdConfig(64, 4, 9, 128, False, in_flight=True),  # 1.04x
    # 7B gate_up (37888 x 3584)
    (1, 37888, 3584): WsBwdConfig(8, 4, 14, 80, True),  # run 23: 1.14x (392 CTAs, one wave of 3 per SM)
    (8, 37888, 3584): WsBwdConfig(8, 4, 14, 80, True),  # run 23: M = 1's pick
    (16, 37888, 3584): WsBwdConfig(16, 4, 14, 80),  # run 24: the second kernel's sum, 1.04x
    (32, 37888, 3584): WsBwdConfig(32, 6, 9, 128, False, in_flight=True),  # 1.05x
    (64, 37888, 3584): WsBwdConfig(64, 4, 9, 128, False, in_flight=True),  # 1.06x
    # 7B down (3584 x 18944)
    (1, 3584, 18944): WsBwdConfig(8, 6, 3, 64),  # run 23: 1.06x (444 CTAs, one wave of 4 per SM)
    (8, 3584, 18944): WsBwdConfig(8, 6, 3, 64),  # run 23: M = 1's pick
    (16, 3584, 18944): WsBwdConfig(16, 6, 3, 64),  # run 23: 1.04x
    (64, 3584, 18944): WsBwdConfig(64, 4, 1, 128, False, in_flight=True),  # 1.12x
    # 14B / 32B qkv (7168 x 5120)
    (16, 7168, 5120): WsBwdConfig(16, 6, 6, 128, in_flight=True),  # 1.04x; run 23: the second kernel's sum, 1.05x
    (32, 7168, 5120): WsBwdConfig(32, 6, 6, 128, False, in_flight=True),  # 1.09x
    (64, 7168, 5120): WsBwdConfig(64, 4, 6, 128, False, in_flight=True),  # 1.22x
    # 14B / 32B o (5120 x 5120)
    (16, 5120, 5120): WsBwdConfig(16, 6, 6, 128, in_flight=True),  # run 23: 1.03x, the second kernel's sum 1.06x
    (32, 5120, 5120): WsBwdConfig(32, 6, 6, 128, False, in_flight=True),  # run 23: 1.05x (14B o)
    (64, 5120, 5120): WsBwdConfig(64, 4, 6, 128, False, in_flight=True),  # 1.04x
    (128, 5120, 5120): WsBwdConfig(128, 4, 2, None, False, in_flight=True),  # 1.06x
    # 14B gate_up (27648 x 5120)
    (1, 27648, 5120): WsBwdConfig(8, 4, 9, 80, True),  # run 23: 1.06x over run 22's entry
    (8, 27648, 5120): WsBwdConfig(8, 4, 9, 80, True),  # run 23: M = 1's pick
    (16, 27648, 5120): WsBwdConfig(16, 4, 9, 80),  # run 24: 1.08x, the second kernel's sum
    (32, 27648, 5120): WsBwdConfig(32, 8, 6, 96, False, in_flight=True),  # run 23: 1.03x
    # 14B down (5120 x 13824)
    (1, 5120, 13824): WsBwdConfig(8, 4, 3, 80),  # run 23: 1.03x
    (8, 5120, 13824): WsBwdConfig(8, 4, 3, 80),  # run 23: M = 1's pick
    (16, 5120, 13824): WsBwdConfig(16, 4, 3, 80),  # run 24: 1.04x
    # 32B gate_up (55296 x 5120)
    (1, 55296, 5120): WsBwdConfig(8, 6, 13, 64, True),  # run 23: 1.09x (520 CTAs, one wave of 4 per SM)
    (8, 55296, 5120): WsBwdConfig(8, 6, 13, 64, True),  # run 23: M = 1's pick
    (16, 55296, 5120): WsBwdConfig(16, 6, 13, 64, True),  # run 23: 1.09x
    (32, 55296, 5120): WsBwdConfig(32, 4, 16, 80, False),  # 1.13x
    # 32B down (5120 x 27648)
    (1, 5120, 27648): WsBwdConfig(8, 4, 3, 48),  # run 23: 1.04x over run 22's entry (648 CTAs, one wave of 5 per SM)
    (8, 5120, 27648): WsBwdConfig(8, 4, 3, 48),  # run 23: M = 1's pick
    (16, 5120, 27648): WsBwdConfig(16, 6, 1, 128, False, in_flight=True),  # 1.08x
}

# Run 40: Qwen2.5-3B's layers on the trainer's "pairs" layout, which had no entries (the Triton tile loop served them
# at 0.23-0.90x of BF16 at M = 32-1024, but gate_up's forward 1.15-1.26x at M = 32-64): the searches of 74e / 74g (``benchmarks/gemm_ws.py --models 3b --stream-k``,
# default tiles, M = 32-2048), every bucket keyed, the pick where at least 3% faster than the shipped route in the same
# pass (its factor over that route noted), else None (the route before: tile loop, or the slab path from
# ``LARGE_M_FWD`` / ``LARGE_M_BWD``). The input gradient's M = 1-16 buckets are None so that those M keep the small-M
# kernels (a missing bucket would send them to the M = 32 entry). Then every layer against the tables before in
# interleaved rounds (74h, ``routes.py --verify`` at M = 24-2048): the four picks that lost there are None (noted).
TUNED.update({
    # 3B qkv (2560 x 2048)
    (32, 2560, 2048): None,  # best 0.93x
    (64, 2560, 2048): WsConfig(64, 64, 4, 1, 1, False, 128, stream_k=1),  # 1.10x
    (128, 2560, 2048): WsConfig(64, 64, 5, 1, 1, True, 128),  # 1.50x
    (256, 2560, 2048): WsConfig(128, 64),  # 1.63x
    (512, 2560, 2048): WsConfig(128, 64, 3, 1, 1, True, 128),  # 2.31x
    (1024, 2560, 2048): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.53x
    (2048, 2560, 2048): None,  # best 0.91x
    # 3B o (2048 x 2048)
    (32, 2048, 2048): None,  # best 0.93x
    (64, 2048, 2048): None,  # best 1.01x
    (128, 2048, 2048): WsConfig(64, 64, 5, 1, 1, True, 128),  # 1.49x
    (256, 2048, 2048): WsConfig(64, 64, 5, 1, 1, True, 128),  # 1.56x
    (512, 2048, 2048): WsConfig(128, 64),  # 3.30x
    (1024, 2048, 2048): WsConfig(128, 64, 3, 1, 1, True, 128),  # 2.15x
    (2048, 2048, 2048): None,  # best 1.02x
    # 3B gate_up (22016 x 2048)
    # 74e's pick (stream-K, 1.04x at M = 32) took 1.33x the tile loop's time at M = 24 in 74h: None.
    (32, 22016, 2048): None,
    (64, 22016, 2048): WsConfig(64, 64, 4, 1, 1, False, 128, stream_k=2),  # 1.15x
    (128, 22016, 2048): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.81x
    (256, 22016, 2048): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.88x
    (512, 22016, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.42x
    (1024, 22016, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.20x
    (2048, 22016, 2048): None,  # 74e: 1.09x; 74h: 0.99 / 1.01 of the slab path's time at M = 1536 / 2048
    # 3B down (2048 x 11008)
    (32, 2048, 11008): WsConfig(64, 64, 4, 8, 1, True, 128),  # 1.56x
    (64, 2048, 11008): WsConfig(64, 64, 4, 8, 1, True, 128),  # 1.99x
    (128, 2048, 11008): WsConfig(128, 64, 3, 8, 1, True, 128),  # 2.57x
    (256, 2048, 11008): WsConfig(128, 64, 3, 4, 1, True, 128),  # 1.87x
    (512, 2048, 11008): WsConfig(128, 64),  # 4.31x
    (1024, 2048, 11008): WsConfig(128, 128, 4, 1, 2, False),  # 1.10x
    (2048, 2048, 11008): None,  # 74e: 1.09x; 74h: 1.24 / 1.01 of the slab path's time at M = 1536 / 2048
})
TUNED_BWD.update({
    # 3B qkv (2560 x 2048)
    (1, 2560, 2048): None, (8, 2560, 2048): None, (16, 2560, 2048): None,  # as before (not searched)
    (32, 2560, 2048): WsBwdConfig(32, 4, 16, 80),  # 1.16x
    (64, 2560, 2048): WsBwdConfig(32, 4, 8, 80),  # 1.28x
    (128, 2560, 2048): WsBwdConfig(32, 4, 4, 80),  # 1.52x
    (256, 2560, 2048): WsBwdConfig(64, 4, 4, 128),  # 1.85x
    (512, 2560, 2048): WsBwdConfig(64, 4, 2, 128),  # 2.68x
    (1024, 2560, 2048): WsBwdConfig(64, 4, 1, 128),  # 2.03x
    (2048, 2560, 2048): None,  # best 1.01x
    # 3B o (2048 x 2048)
    (1, 2048, 2048): None, (8, 2048, 2048): None, (16, 2048, 2048): None,  # as before (not searched)
    (32, 2048, 2048): WsBwdConfig(32, 4, 16, 80),  # 1.15x
    (64, 2048, 2048): WsBwdConfig(32, 4, 8, 80),  # 1.20x
    (128, 2048, 2048): WsBwdConfig(32, 4, 4, 80),  # 1.33x
    (256, 2048, 2048): WsBwdConfig(64, 4, 4, 128),  # 1.40x
    (512, 2048, 2048): WsBwdConfig(64, 4),  # 2.51x
    (1024, 2048, 2048): WsBwdConfig(64, 4, 1, 128),  # 1.99x
    (2048, 2048, 2048): None,  # best 1.00x
    # 3B gate_up (22016 x 2048)
    (1, 22016, 2048): None, (8, 22016, 2048): None, (16, 22016, 2048): None,  # as before (not searched)
    (32, 22016, 2048): WsBwdConfig(32, 4, 16, 80),  # 1.90x
    (64, 22016, 2048): WsBwdConfig(64, 4, 16, 128),  # 1.66x
    (128, 22016, 2048): WsBwdConfig(128, 4, 16, 128),  # 2.13x
    (256, 22016, 2048): WsBwdConfig(128, 4, 8, 128),  # 1.79x
    (512, 22016, 2048): WsBwdConfig(128, 4, 4, 128),  # 1.30x
    (768, 22016, 2048): None,  # 74h: M = 1024's entry took 1.10x the slab path's time at M = 768
    (1024, 22016, 2048): WsBwdConfig(128, 4, 2, 128),  # 1.15x
    (2048, 22016, 2048): None,  # 74g: 1.05x; 74h: 1.34 / 1.08 of the slab path's time at M = 1536 / 2048
    # 3B down (2048 x 11008)
    (1, 2048, 11008): None, (8, 2048, 11008): None, (16, 2048, 11008): None,  # as before (not searched)
    (32, 2048, 11008): WsBwdConfig(32, 4, 4, 80),  # 1.95x
    (64, 2048, 11008): WsBwdConfig(64, 4),  # 1.17x
    (128, 2048, 11008): WsBwdConfig(64, 4, 1, 128),  # 1.70x
    (256, 2048, 11008): WsBwdConfig(128, 4, 1, 128),  # 1.75x
    (512, 2048, 11008): WsBwdConfig(128, 4, 1, 128),  # 1.61x
    (1024, 2048, 11008): WsBwdConfig(128, 4, 1, 128),  # 1.14x
    (2048, 2048, 11008): None,  # best 0.95x
})

# The forward on weights of the "words" code layout (``prepare_weight(layout="words")``), which only this kernel
# decodes with PTX (the Triton kernels take their plain-Triton path on it): {(m_bucket, n, k_pad): config, or None
# for the slab path (dequantized slabs of W, then cuBLAS)}, from run 11's searches on an H200 (benchmarks/RESULTS.md:
# per cell the fastest config of the decode-tile search at M = 1-16, of the search at M = 32-4096 or of the shipped
# "pairs" config on this layout, and the slab path where it was at least 3% faster than all of them). Buckets above
# ``WORDS_MAX_BUCKET`` take its entries; ``default_words_config`` covers other shapes, so on a Hopper GPU such a weight
# runs here at every M below LARGE_M_FWD. Entries marked "run 12": as in ``TUNED``.
TUNED_WORDS: dict[tuple[int, int, int], WsConfig | None] = {
    (1, 3584, 3584): WsConfig(8, 64, 6, 4, 1, True, 80, True),
    (8, 3584, 3584): WsConfig(8, 64, 6, 1, 1, True, 96, stream_k=2),  # run 34: in flight on stream-K, 1.04x
    (16, 3584, 3584): WsConfig(16, 64, 6, 1, 1, True, 96, stream_k=2),  # run 34: in flight on stream-K, 1.04x
    (32, 3584, 3584): WsConfig(32, 64, 4, 4, 1, True, 80),
    (64, 3584, 3584): WsConfig(64, 64, 4, 4, 1, True, 128),
    (128, 3584, 3584): WsConfig(64, 64, 5, 1, 1, True, 128),
    (256, 3584, 3584): WsConfig(128, 64),
    (512, 3584, 3584): WsConfig(128, 128, 4, 1, 2, False),
    (1024, 3584, 3584): WsConfig(128, 256, 3, 1, 2, False),
    (2048, 3584, 3584): WsConfig(128, 256, 3, 1, 2, False),
    (4096, 3584, 3584): None,  # the slab path
    (1, 3584, 18944): WsConfig(8, 64, 6, 7, 1, True, 80, True),  # run 16: 7 splits, 1.09x the previous entry
    (8, 3584, 18944): WsConfig(8, 64, 6, 7, 1, True, 80, True),  # run 16: 7 splits, 1.06x the previous entry
    (16, 3584, 18944): WsConfig(16, 64, 6, 7, 1, True, 80, True),  # run 16: 7 splits (run 23: unfused 0.97x)
    (32, 3584, 18944): WsConfig(32, 128, 4, 9, 1, True, 128),  # run 27: TUNED's, 1.11x the previous entry
    (64, 3584, 18944): WsConfig(64, 64, 5, 4, 1, True, 128),
    (128, 3584, 18944): WsConfig(128, 128, 4, 4, 2, False),
    (256, 3584, 18944): WsConfig(128, 256, 3, 4, 2, False),
    (512, 3584, 18944): WsConfig(128, 128, 4, 1, 2, False),
    (1024, 3584, 18944): WsConfig(256, 128, 3, 1, 2, False),  # run 14: 1.04x the previous entry
    (2048, 3584, 18944): WsConfig(128, 256, 3, 1, 2, False),
    (4096, 3584, 18944): WsConfig(128, 256, 3, 1, 2, False),
    (1, 4608, 3584): WsConfig(8, 128, 6, 7, 1, True, 128, True),
    (8, 4608, 3584): WsConfig(8, 64, 6, 1, 1, False, 64, stream_k=4),  # run 16: 1.04-1.06x the previous entry
    (16, 4608, 3584): WsConfig(16, 64, 6, 1, 1, False, 64, stream_k=2),  # run 15: 1.13x the previous entry
    (32, 4608, 3584): WsConfig(32, 64, 4, 1, 1, True, 96, stream_k=2),  # run 34: in flight on stream-K, 1.09x
    (64, 4608, 3584): WsConfig(64, 64, 5, 1, 1, True, 128),  # run 34: not in-flight stream-K (0.97x at M = 48)
    (128, 4608, 3584): WsConfig(128, 64, 4, 1, 1, True, stream_k=1),  # run 34: in flight on stream-K, 1.04x
    (256, 4608, 3584): WsConfig(128, 64, 3, 1, 1, False, 128, stream_k=2),  # run 14: 1.03x the previous entry
    (512, 4608, 3584): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 14: 1.18x the previous entry
    (1024, 4608, 3584): None,  # the slab path
    (2048, 4608, 3584): None,  # the slab path
    (4096, 4608, 3584): None,  # the slab path
    (1, 5120, 5120): WsConfig(8, 64, 6, 4, 1, True, 80, True),
    (8, 5120, 5120): WsConfig(8, 64, 6, 4, 1, True, 80, True),
    (16, 5120, 5120): WsConfig(16, 64, 6, 1, 1, True, 96, stream_k=2),  # run 34: in flight on stream-K, 1.06x
    (32, 5120, 5120): WsConfig(32, 64, 4, 4, 1, True, 80),
    (64, 5120, 5120): WsConfig(64, 64, 5, 3, 1, True, 128),  # run 27: TUNED's, 1.14x the previous entry
    (128, 5120, 5120): WsConfig(128, 64, 3, 3, 1, False, 128),  # run 27: 1.12x the previous entry
    (256, 5120, 5120): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 14: 1.10-1.12x the previous entry
    (512, 5120, 5120): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 12: stream-K, 1.10x the previous entry
    (1024, 5120, 5120): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 14: stream-K, 1.04-1.07x the slab path
    (2048, 5120, 5120): None,  # run 26: the slab path, 1.06x
    (4096, 5120, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (1, 5120, 13824): WsConfig(8, 128, 6, 6, 1, True, 128, True),  # run 16: 1.06x the previous entry
    (8, 5120, 13824): WsConfig(8, 128, 6, 6, 1, True, 128, True),  # run 16: 1.04x the previous entry
    (16, 5120, 13824): WsConfig(16, 128, 6, 6, 1, True, 128),  # run 16; run 23: the second kernel's sum, 1.07x
    (32, 5120, 13824): WsConfig(32, 128, 4, 6, 1, True, 128),  # run 27: TUNED's, 1.10x the previous entry
    (64, 5120, 13824): WsConfig(64, 64, 5, 3, 1, True, 128),
    (128, 5120, 13824): WsConfig(128, 128, 4, 3, 2, False),
    (256, 5120, 13824): WsConfig(128, 256, 3, 3, 2, False),  # run 27: TUNED's, 1.04x the previous entry
    (512, 5120, 13824): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 12: stream-K, 1.23x the previous entry
    # run 14: dp_waves, 1.05x the previous entry
    (1024, 5120, 13824): WsConfig(128, 256, 3, 1, 2, False, stream_k=1, dp_waves=True),
    (2048, 5120, 13824): WsConfig(128, 128, 4, 1, 2, False),
    (4096, 5120, 13824): WsConfig(128, 256, 3, 1, 2, False),
    (1, 5120, 27648): WsConfig(8, 128, 6, 6, 1, True, 128, True),  # run 16: 1.10x the previous entry
    (8, 5120, 27648): WsConfig(8, 128, 5, 1, 1, False, 80, stream_k=2, dp_waves=True),  # run 15: 1.13x
    (16, 5120, 27648): WsConfig(16, 128, 5, 1, 1, False, 80, stream_k=2, dp_waves=True),  # run 15: 1.09x
    (32, 5120, 27648): WsConfig(32, 128, 4, 6, 1, True, 128),  # run 27: TUNED's, 1.12x the previous entry
    (64, 5120, 27648): WsConfig(64, 128, 4, 6, 1, False, 128),  # run 27: 1.05x the previous entry
    (128, 5120, 27648): WsConfig(128, 128, 4, 3, 2, False),
    (256, 5120, 27648): WsConfig(128, 256, 3, 3, 2, False),  # run 27: 1.13x the previous entry
    (512, 5120, 27648): WsConfig(256, 128, 3, 1, 2, False, stream_k=1),  # run 14: 1.06x the previous entry
    # run 14: dp_waves, 1.04x the previous entry
    (1024, 5120, 27648): WsConfig(128, 256, 3, 1, 2, False, stream_k=1, dp_waves=True),
    (2048, 5120, 27648): WsConfig(128, 128, 4, 1, 2, False),
    (4096, 5120, 27648): WsConfig(128, 256, 3, 1, 2, False),
    (1, 7168, 5120): WsConfig(8, 128, 6, 4, 1, True, 128, True),
    (8, 7168, 5120): WsConfig(8, 128, 6, 4, 1, True, 128, True),
    (16, 7168, 5120): WsConfig(16, 64, 6, 1, 1, True, 96, stream_k=2),  # run 34: in flight on stream-K, 1.05x
    (32, 7168, 5120): WsConfig(32, 128, 4, 4, 1, True, 128),
    (64, 7168, 5120): WsConfig(64, 64, 5, 1, 1, True, 128),
    (128, 7168, 5120): WsConfig(128, 64),
    (256, 7168, 5120): WsConfig(128, 128, 4, 1, 2, False),
    (512, 7168, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (1024, 7168, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (2048, 7168, 5120): None,  # run 26: the slab path, 1.12x / 1.08x at 1536 / 2048
    (4096, 7168, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (1, 27648, 5120): WsConfig(8, 128, 5, 1, 1, False, 80),
    (8, 27648, 5120): WsConfig(8, 128, 5, 1, 1, False, 80),
    (16, 27648, 5120): WsConfig(16, 128, 6, 1, 1, True, 128),
    (32, 27648, 5120): WsConfig(32, 128, 4, 1, 1, True, 128),
    # (Run 35: these two on stream-K, as 32B gate_up's below, took 1.02-1.04x the time at M = 33-64, 0.97-1.01x at
    # 72-128, 69l.)
    (64, 27648, 5120): WsConfig(64, 128, 4, 1, 1, False, 128),
    (128, 27648, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (256, 27648, 5120): WsConfig(128, 256, 3, 1, 2, False),  # run 27: 1.08x the previous entry
    (512, 27648, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (1024, 27648, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (2048, 27648, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (4096, 27648, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (1, 37888, 3584): WsConfig(8, 64, 6, 1, 1, True, 80),
    (8, 37888, 3584): WsConfig(8, 64, 6, 1, 1, True, 80),
    (16, 37888, 3584): WsConfig(16, 64, 6, 1, 1, True, 80),
    (32, 37888, 3584): WsConfig(32, 64, 4, 1, 1, True, 80),
    # Run 35: stream-K on two CTAs per SM (69j: 0.74-0.94 of the entry before's time at M = 33-64).
    (64, 37888, 3584): WsConfig(64, 128, 4, 1, 1, False, 128, stream_k=2),
    (128, 37888, 3584): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 15: 1.20x the previous entry
    (256, 37888, 3584): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 14: 1.09x the previous entry
    (512, 37888, 3584): WsConfig(128, 256, 3, 1, 2, False),
    (1024, 37888, 3584): WsConfig(128, 256, 3, 1, 2, False),
    (2048, 37888, 3584): WsConfig(128, 256, 3, 1, 2, False),
    (4096, 37888, 3584): WsConfig(128, 256, 3, 1, 2, False),
    (1, 55296, 5120): WsConfig(8, 64, 6, 1, 1, False, 64),
    (8, 55296, 5120): WsConfig(8, 64, 6, 1, 1, False, 64),
    (16, 55296, 5120): WsConfig(16, 64, 6, 1, 1, False, 64),
    (32, 55296, 5120): WsConfig(32, 64, 4, 1, 1, False, 64),
    # Run 35: the entries before on stream-K (69j: 0.91-0.93 / 0.87-0.90 of their time at M = 33-64 / 72-128).
    (64, 55296, 5120): WsConfig(64, 128, 4, 1, 1, False, 128, stream_k=2),
    (128, 55296, 5120): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),
    (256, 55296, 5120): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # run 12: stream-K, 1.15x the previous entry
    (512, 55296, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (1024, 55296, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (2048, 55296, 5120): WsConfig(128, 256, 3, 1, 2, False),
    (4096, 55296, 5120): WsConfig(128, 256, 3, 1, 2, False),
}
# Run 31: the rollout's prefill ("words") on gate_up likewise: 0.93 / 0.94 (7B), 0.92 / 0.91 (14B), 0.89 / 0.91 (32B)
# of the entries' time at M = 1024 / 2048 (65c).
TUNED_WORDS.update({(m, n, k): _SK_RING for m in (1024, 2048)
                    for n, k in ((37888, 3584), (27648, 5120), (55296, 5120))})
# Run 26: keys between the powers of two, as ``TUNED``'s (benchmarks/routes.py --layout words at M = 384-2048, H200;
# the same rule). 7B qkv's M = 1024 bucket sends M = 1024 to the slab path but left M = 513-1023 to the tile loop,
# which decodes words in plain Triton (0.33-0.38x of BF16 at M = 640-896): its M = 512 config takes them to M = 896,
# ``nvfp4_gemm.SLAB_RANGES`` the rest (the M = 2048 buckets of 14B / 32B qkv / o, now the slab path, are in the table
# above). The M = 1536 keys lost at M = 1152 (1.13-1.27x slower) and won at 1408 / 1536
# (0.72-0.92 of the time): M = 1025-1280 keep the route of before on "kept" M = 1280 keys.
TUNED_WORDS.update({
    (896, 4608, 3584): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # M = 512's, 2.1-2.6x (the tile loop's)
    (384, 37888, 3584): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # M = 128's, 1.10x
    (384, 3584, 18944): WsConfig(128, 128, 4, 4, 2, False),  # M = 128's, 1.08x
    (896, 3584, 18944): WsConfig(128, 256, 3, 4, 2, False),  # M = 256's, 1.10-1.12x at 640-896
    (1280, 3584, 18944): WsConfig(128, 256, 3, 1, 2, False),  # kept (M = 2048's; the slab path 1.27x slower at 1152)
    (1536, 3584, 18944): None,  # the slab path, 1.25x
    (1280, 3584, 3584): WsConfig(128, 256, 3, 1, 2, False),  # kept (M = 2048's; the slab path 1.13x slower at 1152)
    (1536, 3584, 3584): None,  # the slab path, 1.34x
    (1280, 7168, 5120): WsConfig(128, 128, 4, 1, 2, False),  # kept (M = 2048's before run 26)
    (896, 7168, 5120): WsConfig(128, 128, 4, 1, 2, False),  # M = 256's, 1.19-1.20x at 768 / 896
    (1280, 5120, 5120): WsConfig(128, 128, 4, 1, 2, False),  # kept (M = 2048's before run 26)
    (1536, 5120, 5120): WsConfig(128, 256, 3, 1, 2, False),  # M = 4096's, 1.10x
    (640, 5120, 13824): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # M = 256's, 1.14x
    (768, 5120, 13824): WsConfig(128, 256, 3, 1, 2, False, stream_k=1, dp_waves=True),  # kept (M = 1024's)
    (896, 5120, 13824): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # M = 256's, 1.09x
    (1280, 5120, 13824): WsConfig(128, 128, 4, 1, 2, False),  # kept (M = 2048's)
    (1536, 5120, 13824): WsConfig(128, 256, 3, 1, 2, False),  # M = 4096's, 1.09x
    (640, 55296, 5120): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # M = 256's, 1.04x
    (384, 5120, 27648): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # M = 256's, 1.24x
    (640, 5120, 27648): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # M = 256's, 1.09x
    (1280, 5120, 27648): WsConfig(128, 128, 4, 1, 2, False),  # kept (M = 2048's)
    (1536, 5120, 27648): WsConfig(128, 256, 3, 1, 2, False),  # M = 4096's, 1.08x
})
# Run 27: the fill search on "words" at M = 32-256 (the entries above marked run 27) and keys at M = 96 / 192, the
# gain over the previous route in the search; with the last tile shifted (``_tile_m0``) 7B o's, 7B gate_up's and 32B
# down's M = 192 keys no longer beat the M = 256 entries at M = 136-192 (0.98-1.04x) and were left out.
TUNED_WORDS.update({
    (96, 4608, 3584): WsConfig(32, 128, 4, 1, 1, True, 128),  # 1.11x the previous route (7B qkv)
    (96, 7168, 5120): WsConfig(64, 128, 4, 1, 2, False),  # 1.05x (14B / 32B qkv)
    (96, 5120, 5120): WsConfig(64, 128, 4, 3, 1, False, 128),  # 1.17x (14B / 32B o)
    (192, 4608, 3584): WsConfig(64, 64, 4, 1, 1, True, 128),  # 2.12x (7B qkv)
    (192, 3584, 18944): WsConfig(64, 128, 4, 3, 1, False, 128),  # 1.29x (7B down)
    (192, 5120, 5120): WsConfig(64, 64, 4, 1, 1, True, 128),  # 1.52x (14B / 32B o)
    (192, 27648, 5120): WsConfig(64, 64, 4, 1, 1, True, 128),  # 1.07x (14B gate_up)
    (192, 5120, 13824): WsConfig(64, 128, 4, 2, 1, False, 128),  # 1.17x (14B down)
    (192, 55296, 5120): WsConfig(64, 128, 4, 1, 1, False, 128),  # 1.26x (32B gate_up)
})
# Run 40: Qwen2.5-3B's layers (qkv 2560 x 2048, o 2048 x 2048, gate_up 22016 x 2048, down 2048 x 11008), which ran
# on ``default_words_config`` before: every bucket to M = 128 is keyed (a missing bucket would send M to the next
# larger one's entry), the cells where no searched config beat that default by 3% keep it (marked "default").
# Gains: the search's best over the default in the same pass (74a-74b), then checked in interleaved rounds (74c).
TUNED_WORDS.update({
    (1, 2560, 2048): WsConfig(8, 64, 6, 4, 1, True, 80, True),  # default
    (8, 2560, 2048): WsConfig(8, 64, 6, 4, 1, True, 80, True),  # default
    (16, 2560, 2048): WsConfig(16, 64, 6, 1, 1, True, 96, stream_k=2),  # 1.13x: in flight on stream-K
    (32, 2560, 2048): WsConfig(32, 64, 4, 4, 1, True, 80),  # default
    # 1.07x; whole tiles (the bias and an adapter's expand go into its epilogue), within 3% of the best (split 3)
    (64, 2560, 2048): WsConfig(32, 64, 4, 1, 1, True, 80),
    (128, 2560, 2048): WsConfig(64, 64, 5, 1, 1, True, 128),  # 1.29x
    (1, 2048, 2048): WsConfig(8, 64, 6, 4, 1, True, 80, True),  # default
    (8, 2048, 2048): WsConfig(8, 64, 6, 4, 1, True, 80, True),  # default
    (16, 2048, 2048): WsConfig(16, 64, 6, 4, 1, True, 80, True),  # default
    (32, 2048, 2048): WsConfig(32, 64, 4, 4, 1, True, 80),  # default
    (64, 2048, 2048): WsConfig(64, 64, 5, 4, 1, True, 128),  # default
    (128, 2048, 2048): WsConfig(64, 64, 5, 1, 1, True, 128),  # 1.05x
    (1, 22016, 2048): WsConfig(8, 64, 6, 1, 1, True, 80),  # default
    (8, 22016, 2048): WsConfig(8, 64, 6, 1, 1, True, 80),  # default
    (16, 22016, 2048): WsConfig(16, 64, 6, 1, 1, True, 80),  # default
    (32, 22016, 2048): WsConfig(32, 64, 4, 1, 1, True, 80),  # default
    (64, 22016, 2048): WsConfig(64, 64, 3, 1, 1, False, 80),  # 1.27x
    (128, 22016, 2048): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.12x
    (1, 2048, 11008): WsConfig(8, 64, 6, 8, 1, True, 80, True),  # default
    (8, 2048, 11008): WsConfig(8, 64, 6, 8, 1, True, 80, True),  # default
    (16, 2048, 11008): WsConfig(16, 64, 6, 1, 1, True, 96, stream_k=2),  # 1.11x: in flight on stream-K
    (32, 2048, 11008): WsConfig(32, 64, 4, 8, 1, True, 80),  # default
    (64, 2048, 11008): WsConfig(64, 64, 6, 4, 1, True, None),  # 1.04x
    (128, 2048, 11008): WsConfig(128, 64, 4, 4, 1, True, None),  # 1.08x
    # Run 41: the 3B layers above M = 128 (the rollout's prefill), over ``default_words_config``; every bucket to
    # 4096 keyed (as below 128), the default where no tile was 3% faster. The slab path, timed from M = 1024, was
    # slower on every cell but o at 1280 (within 1%).
    # Keys between the buckets (``nvfp4_gemm.FINE_MS``) where a tile beat the bucket's entry above by 3% at the key.
    (192, 2560, 2048): WsConfig(64, 64, 6, 1, 1, True),  # 1.22x, key between buckets
    (256, 2560, 2048): WsConfig(128, 64, 4, 1, 1, True),  # 1.25x
    (384, 2560, 2048): WsConfig(128, 64, 4, 1, 1, True),  # 1.17x, key between buckets
    (512, 2560, 2048): WsConfig(128, 64, 3, 1, 1, True, 128),  # default
    (640, 2560, 2048): WsConfig(128, 64, 3, 1, 1, True, 128),  # 1.17x, key between buckets
    (768, 2560, 2048): WsConfig(128, 64, 3, 1, 1, True, 128),  # 1.22x, key between buckets
    (1024, 2560, 2048): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.21x
    (1280, 2560, 2048): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.11x, key between buckets
    (1536, 2560, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1, dp_waves=True),  # 1.19x, key between buckets
    (2048, 2560, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.40x
    (4096, 2560, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.18x
    (256, 2048, 2048): WsConfig(64, 64, 5, 1, 1, True, 128),  # 1.37x
    (512, 2048, 2048): WsConfig(128, 64, 4, 1, 1, True),  # 1.34x
    (1024, 2048, 2048): WsConfig(128, 128, 4, 1, 2, False),  # 1.64x
    (1280, 2048, 2048): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.22x, key between buckets
    (1536, 2048, 2048): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.16x, key between buckets
    (2048, 2048, 2048): WsConfig(128, 256, 3, 1, 2, False),  # default
    (4096, 2048, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.10x
    (192, 22016, 2048): WsConfig(64, 128, 4, 1, 1, False, 128, stream_k=2),  # 1.13x, key between buckets
    (256, 22016, 2048): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.18x
    (512, 22016, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.34x
    (640, 22016, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.10x, key between buckets
    (768, 22016, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.06x, key between buckets
    (896, 22016, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.23x, key between buckets
    (1024, 22016, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.36x
    (1280, 22016, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.22x, key between buckets
    (1536, 22016, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.11x, key between buckets
    (2048, 22016, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.25x
    (4096, 22016, 2048): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.15x
    (192, 2048, 11008): WsConfig(128, 64, 3, 4, 1, False, 128),  # 1.07x, key between buckets
    (256, 2048, 11008): WsConfig(128, 64, 3, 4, 1, True, 128),  # default
    (384, 2048, 11008): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.18x, key between buckets
    (512, 2048, 11008): WsConfig(128, 128, 4, 1, 2, False, stream_k=1, dp_waves=True),  # 1.09x
    (640, 2048, 11008): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.40x, key between buckets
    (768, 2048, 11008): WsConfig(128, 128, 4, 1, 2, False, stream_k=1),  # 1.12x, key between buckets
    (1024, 2048, 11008): WsConfig(128, 128, 4, 1, 2, False),  # 1.87x
    (1280, 2048, 11008): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.51x, key between buckets
    (1536, 2048, 11008): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.28x, key between buckets
    (2048, 2048, 11008): WsConfig(128, 256, 3, 1, 2, False),  # default
    (4096, 2048, 11008): WsConfig(128, 256, 3, 1, 2, False, stream_k=1),  # 1.07x
})
WORDS_MAX_BUCKET = 4096
# Run 34's in-flight stream-K entries and run 35's gate_up stream-K entries split tiles among CTAs; launches whose
# epilogue needs each tile whole in one CTA (``epilogue_config``: the decode step's residual + RMSNorm and SiLU x up)
# keep the entries of before (their splits summed by the last CTA), which runs 16-23 measured with those epilogues,
# rather than one CTA per tile. (Older stream-K entries are made one CTA per tile.)
WHOLE_TILE_WORDS: dict[tuple[int, int, int], WsConfig] = {
    (8, 3584, 3584): WsConfig(8, 64, 6, 4, 1, True, 80, True),
    (16, 3584, 3584): WsConfig(16, 64, 6, 4, 1, True, 80),
    (32, 4608, 3584): WsConfig(32, 64, 4, 4, 1, True, 80),
    (128, 4608, 3584): WsConfig(128, 64),
    (16, 5120, 5120): WsConfig(16, 64, 6, 4, 1, True, 80),
    (16, 7168, 5120): WsConfig(16, 64, 6, 2, 1, True, 80, True),
    # Run 35's stream-K entries of gate_up (SiLU x up after the product in the decode step).
    (64, 37888, 3584): WsConfig(64, 64, 3, 1, 1, False, 80),
    (64, 55296, 5120): WsConfig(64, 128, 4, 1, 1, False, 128),
    (128, 55296, 5120): WsConfig(128, 256, 3, 1, 2, False),
    # Run 40's in-flight stream-K entries of 3B qkv / down: the whole tile measured fastest in the same pass (qkv:
    # 0.94 of the default's time), the default (down).
    (16, 2560, 2048): WsConfig(16, 64, 6, 1, 1, True, 80),
    (16, 2048, 11008): WsConfig(16, 64, 6, 8, 1, True, 80, True),
}

"""Warp-specialized NVFP4 x BF16 kernels for Hopper (Gluon): the forward GEMM and the input gradient, M = 1-1024.

Why second kernels: the Triton tile loops (``nvfp4_gemm._fwd_kernel`` / ``_bwd_kernel``) run each step's copies,
dequantization and wgmma mostly in turn. Their copies are ``cp.async`` groups that every warp waits for at a
CTA-wide barrier, and Triton 3.6 cannot split these loops into producer and consumer warps. Gluon (Triton's
lower-level dialect) can: here one warp only issues TMA copies into a ring of shared-memory stages, and consumer
warpgroups wait on per-stage mbarriers, dequantize the weight into wgmma's register operand and (``in_flight``) keep
a chunk's wgmmas running under the next chunk's dequantization. No CTA-wide barrier remains in the loop; two CTAs
per SM (128 registers) or two consumers per CTA interleave dequantization and tensor-core work.

Forward (``_ws_fwd_kernel``): Y^T tile = W tile [BN, K] @ X^T [K, BM], so the dequantized weight is the register
operand A of wgmma (64 or 128 rows per consumer warpgroup) and X^T, read by TMA as two [BM, 64] boxes per
128-element chunk (the chunk's low and high nibbles' halves, see ``nvfp4_gemm``'s layout), is the shared-memory
operand B. Per stage the loader copies those two X boxes, the chunk's code bytes [BN, 64] and its scale bytes
[BN, 8] (``KernelWeight.scales`` viewed as rows of 256 bytes, 32 W rows each, which keeps the copy's innermost box
dimension within TMA's 256 elements: N must be a multiple of 32).

Input gradient (``_ws_bwd_kernel``): dX^T for one chunk (128 columns of K) = W^T [128, N] @ dY^T, over N in steps of 64
rows of W, two accumulators (the code bytes' low and high nibbles); with ``in_flight`` (one consumer) a step's wgmmas
retire under the next step's dequantization, as the forward's chunks do. The operand wants pairs along N (rows n and n +
1 of W in one register), the transpose of the stored bytes: ``ldmatrix.trans`` on the code bytes seen as 16-bit pairs
hands each thread rows n and n + 1 of two adjacent columns in one word (two loads per thread and step), and the
accumulator's rows take the chunk's columns in the order that puts them where the operand wants them (the stores undo
it). A scale warp rearranges each stage's scale bytes so that a consumer thread's 16 lie together, and converts them to
the bf16 factors the dequantization multiplies by (once per stage, not in every consumer thread that holds them). On a
weight of the "rows" code layout (``nvfp4_gemm``'s docstring) the same ``ldmatrix.trans`` word holds its 8 codes where
the words decoding reads them: 12 instructions per word instead of 18 (``TUNED_BWD_ROWS``: its own table entries).

Dequantization is the same exact ``e2m1 * scale * 2**-14`` (inline PTX on code-byte pairs, ``_dequant_ptx(2)``) as
the Triton kernels; the codes are loaded from shared memory straight in the operand's register layout and the scales
in a slice of it, so no layout conversion moves data. On a weight of the "words" code layout (``nvfp4_gemm``'s
docstring) the forward loads each thread's operand bytes as whole 32-bit words, decodes one word in 12 instructions
(``_word_dequant_ptx``) and converts two scales per instruction; back in K order the operand differs from wgmma's
only in register order (``TUNED_WORDS``: its launch table, which also covers M <= 16 and M > 1024). Split-K /
split-N write fp32 partials that ``_reduce`` sums.

Stream-K (``WsConfig.stream_k`` / ``WsBwdConfig.stream_k``; ``_ws_fwd_sk_kernel``, ``_ws_bwd_sk_kernel``): one or
two CTAs per SM, each taking an equal run of the product's (tile, chunk) steps across tile boundaries, so no SM idles
in a last partial wave (e.g. 160 tiles on 132 SMs), and the loader fetches the next tile's chunks while the consumers
write the previous one. A tile split between CTAs is summed by the CTA whose run holds its first chunk (run 32,
``_sk_add_parts``): that run ends inside the tile, while each later CTA's part of it is the start of its run, stored
early; the CTA adds them to its accumulator in CTA order and stores the tile as a whole one (by TMA where whole tiles
go so); the input gradient's split tiles the same way since run 33. Before that the CTA that completed the tile's
count of steps stored its own part too and summed all of them at the end of its run. With
``dp_waves`` the whole waves of tiles run one per CTA and only the leftover tiles are split, in runs aligned to the
tile (``sk_plan``), so that the CTAs of a wave read the same operand tiles at the same time (L2 serves them). The
forward's stream-K consumer keeps a chunk's wgmmas in flight too (``in_flight``, one consumer, run 34), then adds
every part after the chunks (a seed loaded into the accumulator ahead of the wgmmas serializes them). The
input gradient also runs two consumer warpgroups per CTA, one per half of the chunk (``WsBwdConfig.consumers``), so
that a 256-row tile of dY fits the registers. ``TUNED`` / ``TUNED_BWD`` (with ``TUNED_WORDS``, ``TUNED_BWD_ROWS``:
the launch tables, kept in ``qerl.kernels.ws_tables``) say where ``nvfp4_matmul`` / ``nvfp4_matmul_grad_input`` take
these kernels; measured speed in benchmarks/RESULTS.md (runs 9-14).

Epilogues of the forward for a decode step (``ws_matmul``'s ``glu`` / ``row_norm`` / ``add_norm`` / ``rope``; the
whole tile in one CTA: unsplit, or split tiles summed by the last CTA, ``tile_epilogue``): SiLU x up of interleaved
gate / up rows; an RMSNorm's row scale (``qerl.kernels.fused_norm``, also on stream-K); the residual add with the
next RMSNorm's input and statistics; a QKV projection's bias, RoPE and KV-cache write (``qerl.kernels.fused_qkv``).
On the decode tiles (BM <= 32) their operands are loaded before the chunk loop, so that the loads' latency hides
under it (``_epilogue_operands``).

The plain bf16 store of a tile (``TMA_STORE``, ``tma_store_tiles``): the accumulator's rows are W's, so each thread's
values lie N apart in Y and stored from registers they go out as 2-byte pieces; instead, once both consumers are done
with the ring, each writes its [BM, 64] slices of Y (one per 64 rows of W) into free X boxes (the layout of Y's TMA
box) and TMA copies store them, the rows past M and columns past N dropped by Y's descriptor (a shifted last tile, or
one whose X came in small boxes, stores from registers). Run 30: the stores from registers took 9-16% of the forward's time at M = 1024.
The stream-K kernel (``sk_tma_store``, run 31), whose ring holds the next tile's chunks while a tile is written, stores
its whole tiles from boxes of their own where shared memory holds them, else through the stage of the tile's last
chunk, which the loader refills only after the copy (``stored`` barriers); on runs of whole tiles (pure stream-K over
many tiles) it is a persistent kernel whose tiles' copies overlap the next tiles' work.

With programmatic dependent launch (``qerl.kernels.pdl``, off by default; ``_pdl_args``) the forward's loader issues
the ring's first pass of W's copies before it waits for the launch before it (``_grid_dependency``), and X's after:
in a chain of launches (a decode step) W's first bytes and the launch's set-up overlap the previous kernel's end.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import threading
from typing import NamedTuple

import torch

from qerl.kernels import nvfp4_gemm as kern
from qerl.kernels.pdl import pdl_enabled

# The launch-config types and the tables the dispatch below reads (as names of this module: see ws_tables' docstring).
from qerl.kernels.ws_tables import (  # noqa: F401 (_SK_RING / _SK_BWD: the tables' shared stream-K entries)
    _SK_BWD,
    _SK_RING,
    TUNED,
    TUNED_BWD,
    TUNED_BWD_ROWS,
    TUNED_WORDS,
    WHOLE_TILE_WORDS,
    WORDS_MAX_BUCKET,
    WsBwdConfig,
    WsConfig,
)

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
except ImportError:  # pragma: no cover - Triton builds without Gluon (or no Triton): the Triton kernels serve
    gluon = None


@functools.cache
def _hopper(index: int) -> bool:
    return torch.cuda.get_device_capability(index) == (9, 0)


def available(device: torch.device | None = None) -> bool:
    """Gluon is importable, ``QERL_WS_KERNELS`` is not "0", and ``device`` (default: the current CUDA device) is a
    Hopper (sm_90): the kernel uses wgmma and TMA. ``QERL_WS_KERNELS=0`` (read at each call) turns the dispatch to
    these kernels off, e.g. to compare with the Triton kernels in one process (vLLM's engine included)."""
    if os.environ.get("QERL_WS_KERNELS", "1") == "0":
        return False
    if gluon is None or not torch.cuda.is_available() or kern._interpreting():
        return False
    if device is not None and device.type != "cuda":
        return False
    index = device.index if device is not None and device.index is not None else torch.cuda.current_device()
    return _hopper(index)


def supports(m: int, n: int, k: int) -> bool:
    """Shapes the kernel takes: N a multiple of 32 (the scale copies' row view) and K a multiple of 8 (TMA wants
    16-byte row strides of X)."""
    return m >= 1 and n % 32 == 0 and k % 8 == 0



# Below this many rows the forward takes only entries of buckets below it (1, 8, 16: measured with the 8- and 16-row
# tiles against the decode kernels of ``nvfp4_gemm``), never a larger bucket's: a 64-row tile took 1.4x the decode
# kernels' time at M = 16 (geomean of the 12 layers, run 9).
MIN_M = 17

# The last M tile of the forward and of the input gradient ends at row M, repeating rows of the tile before it,
# instead of reading rows past M (``_tile_m0``; run 27), where it holds at most ``SHIFT_MAX_ROWS`` rows of X: with
# up to 32 real rows such a tile cost up to 1.75x (forward) / 1.45x (input gradient) the time of whole tiles, with
# 48 or more nothing, and shifting a fuller tile (188 of 256 rows at M = 700) cost 2-4%. Not on the forward's
# 256-row tiles of W (BN = 256), where the tile past M cost nothing and the shift 2-2.5% (M = 264 / 520).
# ``SHIFT_LAST_TILE`` is a switch for benchmarks/partial_tiles.py, which times both.
SHIFT_LAST_TILE = True
SHIFT_MAX_ROWS = 32


def shift_last_tile(m: int, bm: int, bn: int = 128, rows: int | None = None) -> bool:
    """Whether the kernels run M rows in tiles of ``bm`` with the last tile shifted to end at row M: M spans more
    than one tile, the last one holds 1 to ``SHIFT_MAX_ROWS`` of them, the tiles of W (forward) are narrower
    than 256 rows, and the TMA descriptor of X declares fewer than whole tiles (``rows``: ``tma_rows``'s count)."""
    whole = rows is not None and rows >= -(-m // bm) * bm
    return SHIFT_LAST_TILE and m > bm and 0 < m % bm <= SHIFT_MAX_ROWS and bn < 256 and not whole


# ``tma_rows`` declares rows past M that X's storage holds: a switch for benchmarks/partial_tiles.py.
SPARE_ROWS = True


def tma_rows(t: torch.Tensor, bm: int) -> int:
    """The rows the TMA descriptor of ``t`` [M, C] (rows ``t.stride(0)`` elements apart) declares: M, or more, up
    to M rounded up to whole ``bm``-row tiles, where ``t``'s storage holds them (``t`` a row slice of a larger
    buffer, as ``padded_empty`` makes). The last tile then reads memory past row M instead of a box past the
    descriptor's end, which cost up to 1.8x the time of whole tiles (run 27, ``benchmarks/partial_tiles.py``) and,
    where M lies below the only tile's rows, up to 1.57x (run 28; M = 1-24 on 8- to 32-row tiles: nothing).
    Rows past M reach only the output rows past M, which no kernel stores (each output row is its own row of X
    times W), so what they hold does not matter."""
    m = t.shape[0]
    if not SPARE_ROWS or m == 0:
        return m
    pitch = t.stride(0)
    held = t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()  # elements from t's first on
    fit = (held - t.shape[1]) // pitch + 1 if pitch > 0 else m  # the last row needs only its own C elements
    return max(m, min(fit, -(-m // bm) * bm))


# A last tile of rows of 64 or more whose box of X reaches far enough past the descriptor's end, and is not shifted (an
# M below the tile's rows, or a last tile too full to shift), copies X in boxes of ``SUB_BOX_ROWS`` rows (``_x_box``;
# 0: off, a switch for benchmarks/partial_tiles.py): the boxes that reach past M copy the last ``SUB_BOX_ROWS`` rows
# below M instead, and the epilogues store those rows where they belong (``_rows_held``). Far enough:
# ``SUB_BOX_MIN_PAST_NARROW`` rows in the forward on 64-row tiles of X or of W, else ``SUB_BOX_MIN_PAST``.
# Run 28 (H200 / H100, ``benchmarks/partial_tiles.py``; only the boxes starting past M moved then): with boxes of 32
# rows 0.72-1.02 of the time of whole boxes where a whole box lay past M (geomean 0.90 on both; 14B / 32B gate_up's
# forward at M = 136, 32B / 7B down's input gradient, 7B gate_up's "words" forward at M = 66), 0.99-1.01 elsewhere;
# boxes of 8 rows 0.71-1.43x (the loader's many copies on 256-row tiles). Run 29 (H200, the box reaching past M
# moved too), 1 to 31 rows past M: the forward on 64-row tiles of X 0.72-0.91 of the time at 31 rows past (M =
# 33, "words", geomean 0.82), 0.80-1.02 at 24 (M = 40, both layouts, geomean 0.93 / 0.92), 0.90-1.03 at 16, 0.99-1.05
# at 1-8; on 128-row tiles at 28 rows past (M = 100) 0.80-0.98 with 64 rows of W, 1.01-1.03 with 128 / 256; the
# input gradient 0.96-1.03 at 1-28 rows past on both layouts.
SUB_BOX_ROWS = 32
SUB_BOX_MIN_PAST = 32
SUB_BOX_MIN_PAST_NARROW = 24


def sub_box_rows(m: int, bm: int, rows: int, shifted: bool, bn: int | None = None) -> int:
    """XB of a launch over M rows in tiles of ``bm`` whose X descriptor declares ``rows`` rows (``bn``: the
    forward's rows of W per tile; None: the input gradient): ``SUB_BOX_ROWS`` where the last tile (not ``shifted``)
    of 64 or more rows reaches ``SUB_BOX_MIN_PAST`` or more rows past them (``SUB_BOX_MIN_PAST_NARROW`` in the
    forward where the tiles of X or of W have 64 rows) and M holds a whole small box, else 0."""
    past = -(-m // bm) * bm - rows
    xb = SUB_BOX_ROWS
    need = SUB_BOX_MIN_PAST_NARROW if bn is not None and 64 in (bm, bn) else SUB_BOX_MIN_PAST
    return xb if xb and not shifted and bm >= 64 and bm > xb and m >= xb and past >= max(1, need) else 0


def x_boxes(x2: torch.Tensor, bm: int, layout, shift_ok: bool = True, bn: int | None = None) -> tuple:
    """(descriptor of ``bm``-row boxes, descriptor of ``sub_box_rows`` boxes or the first again, SHIFT_LAST, XB)
    of X (dY) [M, C] for a launch in tiles of ``bm`` rows (``bn``: the forward's rows of W per tile, None for the
    input gradient; ``shift_ok``: False where the epilogue cannot take a shifted tile): rows past M that its storage
    holds declared (``tma_rows``), else the last tile shifted (``shift_last_tile``) or copied in small boxes."""
    m, cols = x2.shape
    rows = tma_rows(x2, bm)
    shift = shift_ok and shift_last_tile(m, bm, bn or 128, rows)
    xb = sub_box_rows(m, bm, rows, shift, bn)
    desc = TensorDescriptor(x2, [rows, cols], [cols, 1], [bm, 64], layout)
    return desc, TensorDescriptor(x2, [rows, cols], [cols, 1], [xb, 64], layout) if xb else desc, shift, xb


def padded_rows(m: int) -> int:
    """Rows ``padded_empty`` allocates for M: whole tiles of any BM the dispatch runs M on (8 rows at least, at most
    the next power of two up to M = 16; from M = 17 at least 64, a 64-row tile serving M = 17-32 in run 40's 3B down
    entry; the next power of two up to M = 256, whole 256-row tiles above)."""
    if m <= 16:
        return max(8, _pow2(m))
    return max(64, _pow2(m)) if m <= 256 else -(-m // 256) * 256


def padded_empty(m: int, n: int, like: torch.Tensor) -> torch.Tensor:
    """An uninitialised bf16 [M, N] tensor on ``like``'s device whose storage holds ``padded_rows(M)`` rows, so
    that a product reading it as X (``tma_rows``) runs whole tiles: the outputs of one kernel that another's TMA
    reads (SiLU x up into the down projection, the decode step's RMSNorm into q/k/v and gate/up)."""
    return torch.empty((padded_rows(m), n), dtype=torch.bfloat16, device=like.device)[:m]


def _lookup(table: dict, m: int, n: int, k_pad: int, max_bucket: int | None = None, fine: bool = True):
    """The entry of the nearest measured M bucket at or above M's own (the next power of two), up to 4x larger (a
    config is valid at any M; the tables were measured at powers of two and, with ``fine``, at the keys between them,
    ``nvfp4_gemm.FINE_MS``), and at most ``max_bucket``. None if none
    or declined: above the largest measured bucket (1024; 2048 / 4096 for the layers where run 25 measured this
    kernel faster than the slab path there) the slab path of ``nvfp4_gemm`` serves, as measured in runs 4-8 and 25."""
    return kern._nearest_bucket(
        table, m, lambda bucket: (bucket, n, k_pad) if max_bucket is None or bucket <= max_bucket else None, fine)


def _usable(t: torch.Tensor, cols: int) -> bool:
    """A bf16 [M, cols] input TMA reads in place: dense rows, 16-byte aligned, on a Hopper GPU."""
    return (t.dtype == torch.bfloat16 and t.stride(-1) == 1 and t.stride(0) == cols and t.data_ptr() % 16 == 0
            and available(t.device))


def words_key(m: int, n: int, k_pad: int) -> tuple[int, int, int] | None:
    """The ``TUNED_WORDS`` key that serves M rows (the nearest bucket at or above M's, as ``_lookup``), or None."""
    key = lambda bucket: (min(bucket, WORDS_MAX_BUCKET), n, k_pad)  # noqa: E731
    return next((key(v) for v in kern._bucket_keys(m, True) if key(v) in TUNED_WORDS), None)


def pick(x2: torch.Tensor, n: int, k: int, k_pad: int, words: bool = False) -> WsConfig | None:
    """The config ``nvfp4_matmul`` runs this kernel with for ``x2`` [M, K] against an N x K weight, or None (no or a
    declined ``TUNED`` entry, M below ``MIN_M`` without an entry of a small bucket, not a Hopper, an input TMA cannot
    read in place). ``words``: a weight of the "words" layout (``TUNED_WORDS``, else ``default_words_config``; None
    where the table sends M to the slab path)."""
    m = x2.shape[0]
    if not supports(m, n, k):
        return None
    if words:
        hit = words_key(m, n, k_pad)
        if hit is not None:
            cfg = TUNED_WORDS[hit]  # None: the slab path (``nvfp4_matmul``)
        else:
            cfg = default_words_config(m, n, k_pad, kern._sms(x2.device))
    else:
        cfg = _lookup(TUNED, m, n, k_pad, max_bucket=MIN_M - 1 if m < MIN_M else None)
    return cfg if cfg is not None and _usable(x2, k) else None


def default_words_config(m: int, n: int, k_pad: int, sms: int = 132) -> WsConfig:
    """A launch config for shapes ``TUNED_WORDS`` lacks, following its picks (run 11): 8- / 16- / 32-row tiles of
    X on 64 rows of W with chunks in flight on 80 registers (three CTAs per SM) up to M = 32, 64- and 128-row tiles
    on 128 registers (two) to M = 512, two consumers of 128 x 256 above; split-K until the tiles about fill the GPU
    twice over, keeping at least 4 chunks per split (summed in the kernel at M <= 16 on up to 8192 columns)."""
    if m <= 32:
        bm, stages, regs = max(8, 1 << max(0, (m - 1).bit_length())), 6 if m <= 16 else 4, 80
    elif m <= 512:
        bm, stages, regs = (64, 5, 128) if m <= 64 else (128, 3, 128)
    else:
        return WsConfig(128, 256, 3, 1, 2, False)
    tiles = -(-m // bm) * -(-n // 64)
    chunks = k_pad // kern.CHUNK
    split = 1
    while tiles * split * 2 <= 2 * sms and chunks // (split * 2) >= 4:
        split *= 2
    return WsConfig(bm, 64, stages, split, 1, True, regs, kern._fuse_reduction(m, n) and split > 1)


def pick_grad_input(dy2: torch.Tensor, n: int, k: int, k_pad: int, rows: bool = False) -> WsBwdConfig | None:
    """The same for ``nvfp4_matmul_grad_input`` with ``dy2`` [M, N] (``TUNED_BWD``; any M with an entry: the input
    gradient's small-M kernels are slower than these on some layers, e.g. 7B gate_up at M = 1-16). ``rows``: a weight
    of the "rows" layout, whose own entries (``TUNED_BWD_ROWS``) replace those of the same bucket (the nearest bucket
    is chosen among both tables' keys, so a rows entry never stands in for a nearer ``TUNED_BWD`` one)."""
    m = dy2.shape[0]
    if not supports(m, n, k):
        return None
    both = {**TUNED_BWD, **TUNED_BWD_ROWS} if rows else TUNED_BWD
    # On "rows" only the powers of two: the keys between them were measured on "pairs" and would stand in for a
    # nearer "rows" entry.
    cfg = _lookup(both, m, n, k_pad, fine=not rows)
    return cfg if cfg is not None and _usable(dy2, n) else None


if gluon is not None:

    _DQ_PAIR_ASM = gl.constexpr(kern._dequant_ptx(2))
    _DQ_ROWS_LOW_ASM = gl.constexpr(kern._dequant_rows_ptx((False,)))
    _DQ_ROWS_HIGH_ASM = gl.constexpr(kern._dequant_rows_ptx((True,)))
    _DQ_ROWS_BOTH_ASM = gl.constexpr(kern._dequant_rows_ptx((False, True)))
    _DQ_WORD_ASM = gl.constexpr(kern._word_dequant_ptx())
    # The input gradient on the "rows" layout: the words decoding of an ldmatrix.trans word, one scale pair per half.
    _DQ_RW_LOW_ASM = gl.constexpr(kern._word_dequant_ptx((0, 1), scale_per_half=True))
    _DQ_RW_HIGH_ASM = gl.constexpr(kern._word_dequant_ptx((2, 3), scale_per_half=True))
    _DQ_RW_BOTH_ASM = gl.constexpr(kern._word_dequant_ptx((0, 1, 2, 3), scale_per_half=True))

    @gluon.constexpr_function
    def _mma_layout(BM):
        return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BM, 16])

    @gluon.constexpr_function
    def _codes_layout_3d(BN, WORDS=False):
        """The wgmma A-operand register layout of a [BN, 64] bf16 tile (``DotOperandLayout(0, .., k_width=2)`` on one
        warpgroup), written for the same tile seen as [BN, 4, 16] (row, scale group, element of the group): a
        thread's pairs along K stay pairs, and the group index is its own dimension so the scales broadcast over it.
        (Its linear layout, from Triton 3.6's ``to_linear_layout``: registers k+1, row+8, k+8, k+16, k+32(, row+64);
        lanes k+2, k+4, row+1, row+2, row+4; warps row+16, row+32.)

        WORDS: the code bytes of the "words" layout, indexed by byte (byte 16q + 4u + 2h + p holds element 16q + 8h +
        2u + p), with each thread's elements as in the operand (K positions 2u, 2u + 1, 2u + 8, 2u + 9 of a group are
        the 4 bytes of one word: element bases k+1, k+8, k+2, k+4 become bytes +1, +2, +4, +8) but the registers
        ordered so that a word's 4 bytes are consecutive (``pack=4`` hands the PTX one word); back in K order the
        operand differs from wgmma's only in register order, which costs no instruction."""
        if WORDS:
            reg = [[0, 0, 1], [0, 0, 2], [8, 0, 0], [0, 1, 0], [0, 2, 0]]
        else:
            reg = [[0, 0, 1], [8, 0, 0], [0, 0, 8], [0, 1, 0], [0, 2, 0]]
        if BN == 128:
            reg.append([64, 0, 0])
        lanes = [[0, 0, 4], [0, 0, 8]] if WORDS else [[0, 0, 2], [0, 0, 4]]
        return gl.DistributedLinearLayout(reg_bases=reg, lane_bases=lanes + [[1, 0, 0], [2, 0, 0], [4, 0, 0]],
                                          warp_bases=[[16, 0, 0], [32, 0, 0]], block_bases=[], shape=[BN, 4, 16])

    @gluon.constexpr_function
    def _words_load_layout(BN):
        """``_codes_layout_3d(BN, WORDS=True)`` for the [BN, 64] code bytes as they sit in shared memory: each
        thread reads whole 4-byte words (one per row and group)."""
        reg = [[0, 1], [0, 2], [8, 0], [0, 16], [0, 32]]
        if BN == 128:
            reg.append([64, 0])
        return gl.DistributedLinearLayout(reg_bases=reg, lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]],
                                          warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[BN, 64])

    @gluon.jit
    def _words_to_k(v, RB: gl.constexpr):
        """[RB, 64] values of a "words" tile in byte order -> K order: no data moves (``_codes_layout_3d``; the SASS
        check is in tests/test_kernels_ws.py)."""
        v = gl.reshape(v, [RB, 4, 4, 2, 2])  # row, group q, word u, byte pair h, byte p
        return gl.reshape(gl.permute(v, (0, 1, 3, 2, 4)), [RB, 64])

    _SCALES_ASM = gl.constexpr(kern._SCALES_PTX)
    _U_STAGED_MAX_BM = gl.constexpr(32)  # ``LORA_U_STAGED_MAX_BM``
    _TRANSPOSE_ASM = gl.constexpr(kern._TRANSPOSE_4X4_PTX)

    @gluon.jit
    def _scale_bits_pairs(u):
        """As ``_scale_bits``, two scales per instruction (``nvfp4_gemm._SCALES_PTX``; any 4 bytes of ``u``)."""
        return gl.inline_asm_elementwise(_SCALES_ASM, "=r,=r,r", [u], dtype=gl.bfloat16, is_pure=True, pack=4)

    @gluon.jit
    def _scale_bits(u):
        """E5M3 scale bytes -> bf16 ``scale * 2**112`` (as ``nvfp4_gemm._scale_x2pow112``)."""
        return ((u.to(gl.int16) << 4) + 29440).to(gl.bfloat16, bitcast=True)

    @gluon.jit
    def _last_split(cnt_ptr, tile):
        """Count this CTA's split of ``tile`` as done (the fused split sum, as ``nvfp4_gemm._last_split``); True in
        the one that finished it last, which resets the counter (counters stay zero between launches). The barrier
        (the calling warpgroup's own, inside a partition) orders its partial's stores before the release; the
        acquire lets the last one read the other splits' partials."""
        gl.thread_barrier()
        arrived = gl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
        last = arrived == gl.num_programs(1) - 1
        if last:
            gl.atomic_xchg(cnt_ptr + tile, 0, sem="relaxed", scope="gpu")
        return last

    @gluon.jit
    def _sum_splits(ptrs, stride_split, mask, like):
        """The fp32 partials at ``ptrs`` of every split, summed in split order (through L2: ``.cg``)."""
        total = gl.zeros_like(like)
        for sp in range(gl.num_programs(1)):
            total += gl.load(ptrs + sp * stride_split, mask=mask, other=0.0, cache_modifier=".cg")
        return total

    @gluon.jit
    def _fwd_stages(x_desc, w_desc, s_desc, BM: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr,
                    CONSUMERS: gl.constexpr):
        """The forward's ring of shared-memory stages (two X boxes, the code and scale bytes of one chunk each) and
        its barriers: ``ready`` completed by the loader's copies, ``empty`` by each consumer's release."""
        x_smem = gl.allocate_shared_memory(gl.bfloat16, [2 * STAGES, BM, 64], x_desc.layout)
        w_smem = gl.allocate_shared_memory(gl.uint8, [STAGES, BN, 64], w_desc.layout)
        s_smem = gl.allocate_shared_memory(gl.uint8, [STAGES, BN // 32, 256], s_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=CONSUMERS)
        return x_smem, w_smem, s_smem, ready, empty

    @gluon.jit
    def _bwd_stages(dy_desc, w_desc, s_desc, BM: gl.constexpr, STAGES: gl.constexpr, CONSUMERS: gl.constexpr):
        """The input gradient's ring of stages and its barriers: dY's box and 64 rows of W's code bytes (TMA), their
        scale bytes as copied (``s_raw``, completing ``s_ready``) and as ``_bwd_scale_worker`` rearranges them for
        the consumers (``s_t``, already as bf16). ``ready`` completes on two arrivals: the copies' bytes and the
        rearranged scales."""
        plain: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[2, 1, 0])  # per stage [8, 4, 16]
        dy_smem = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BM, 64], dy_desc.layout)
        w_smem = gl.allocate_shared_memory(gl.uint8, [STAGES, 64, 64], w_desc.layout)
        s_raw = gl.allocate_shared_memory(gl.uint8, [STAGES, 2, 256], s_desc.layout)
        s_t = gl.allocate_shared_memory(gl.bfloat16, [STAGES, 8, 4, 16], plain)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        s_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=2)
            mbarrier.init(empty.index(s), count=CONSUMERS)
            mbarrier.init(s_ready.index(s), count=1)
        return dy_smem, w_smem, s_raw, s_t, ready, empty, s_ready

    @gluon.jit
    def _tile_m0(tile_m, M, BM: gl.constexpr, SHIFT_LAST: gl.constexpr):
        """The first row of X (dY in the input gradient) of M tile ``tile_m``; with ``SHIFT_LAST`` the last tile ends
        at row M (when M >= BM), so that no tile reads rows past M: it repeats rows of the tile before it, which both
        store alike. Run 27: TMA boxes of X reaching past M cost the forward up to 1.75x its time on whole tiles (7B
        gate_up at M = 129 on 64-row tiles), more the fewer rows of the last tile are real, and the input gradient up
        to 1.45x (``benchmarks/partial_tiles.py``)."""
        m0 = tile_m * BM
        if SHIFT_LAST:
            m0 = gl.maximum(gl.minimum(m0, M - BM), 0)
        return m0

    @gluon.jit
    def _own_rows(offs_m, m0, M, BM: gl.constexpr, SHIFT_LAST: gl.constexpr):
        """The rows ``offs_m`` (of a tile starting at row m0) this tile stores: those below M and, in a shifted last
        tile, none the tile before it stores (the rows from the last multiple of BM on), so that no row is written
        twice (a shifted tile writing them all cost 2-4% at 256-row tiles and splits, run 27)."""
        rows = offs_m < M
        if SHIFT_LAST:
            rows = rows & (offs_m >= gl.cdiv(m0, BM) * BM)
        return rows

    @gluon.jit
    def _rows_held(m0, r, M, XB: gl.constexpr):
        """The rows of X (dY) whose products rows ``r`` of a tile starting at row m0 hold: m0 + r, except where
        ``_x_box`` copied the tile's X in boxes of XB rows and a box reached past row M: that box and those after it
        hold the last XB rows below M, so a row there holds M - XB + r % XB where no box before it holds that row,
        else M (no row: masked at the store like the rows past M)."""
        rows = m0 + r
        if XB != 0:
            box0 = m0 + (r // XB) * XB
            tail = M - XB + r % XB
            rows = gl.where(box0 + XB <= M, rows, gl.where(tail >= box0, tail, M))
        return rows

    @gluon.jit
    def _x_box(desc, sub_desc, row0, col, M, bar, dst, BM: gl.constexpr, XB: gl.constexpr):
        """TMA copy of X's (dY's) [BM, 64] box at (row0, col) into ``dst``. With ``XB``, a box reaching past row M
        (a last tile of rows that is not shifted) is copied as BM / XB boxes of XB rows (``sub_desc``): those that
        reach past M copy the last XB rows below M instead (M >= XB), so no box reaches past M; the epilogues store
        their rows by ``_rows_held``. Run 28: 128- and 256-row boxes reaching 56-120 rows past M cost up to 1.4x the
        time of boxes of 32 rows (``sub_box_rows``); run 29 moved the box that reaches past M (before, only boxes
        that start past M moved). The same bytes arrive either way, so the stage's expected byte count holds."""
        if XB == 0:
            tma.async_copy_global_to_shared(desc, [row0, col], bar, dst)
        else:
            if row0 + BM <= M:
                tma.async_copy_global_to_shared(desc, [row0, col], bar, dst)
            else:
                for j in gl.static_range(BM // XB):
                    r = gl.minimum(row0 + j * XB, M - XB)
                    tma.async_copy_global_to_shared(sub_desc, [r, col], bar, dst.slice(j * XB, XB))

    @gluon.jit
    def _grid_dependency(PDL: gl.constexpr):
        """Programmatic dependent launch (``PDL``, ``qerl.kernels.pdl``): wait until the launches before this one in
        the stream have completed and their writes are visible (``griddepcontrol.wait``), then let the launch after
        this one start its CTAs as SMs free up (``griddepcontrol.launch_dependents``; run 36: letting it in only once
        the partitions' chunks were done took 1.04 / 1.02 / 1.01x the time at M = 1 / 4 / 16, geomean of the 7B /
        32B layers, up to 1.09x; faster by more than 2% only on configs ``_pdl_args`` leaves without PDL). Every
        partition calls it before it reads or writes memory that another launch may write (X, Y, partials, counters,
        epilogue operands); only the loader's first copies of W, which no launch writes, come before it
        (``_load_worker``). Without PDL the launch starts after the one before it has completed, and both
        instructions return at once."""
        if PDL:
            gl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)
            gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=gl.int32,
                                      is_pure=False, pack=1)

    @gluon.jit
    def _w_copies(w_desc, s_desc, bar, w_dst, s_dst, off_n, c, s_rows_per_chunk):
        """TMA copies of chunk c's code bytes and scale bytes for W rows off_n .. off_n + BN."""
        tma.async_copy_global_to_shared(w_desc, [off_n, c * 64], bar, w_dst)
        tma.async_copy_global_to_shared(s_desc, [c * s_rows_per_chunk + off_n // 32, 0], bar, s_dst)

    @gluon.jit
    def _load_worker(x_desc, w_desc, s_desc, x_smem, w_smem, s_smem, ready, empty, off_m, off_n, c0, n_chunks,
                     s_rows_per_chunk, STAGES: gl.constexpr, xs_desc, M, BM: gl.constexpr, XB: gl.constexpr,
                     PDL: gl.constexpr = False):
        """The producer warp: TMA copies of each chunk's two X boxes, code bytes and scale bytes into stage
        ``i % STAGES`` once the consumer has released it (``empty``), completing ``ready`` by bytes. With ``PDL``
        the ring's first pass of W copies is issued before the wait for the launches before this one
        (``_grid_dependency``), so that W's first bytes come from DRAM while they finish; X's copies after it."""
        nbytes: gl.constexpr = 2 * x_desc.block_type.nbytes + w_desc.block_type.nbytes + s_desc.block_type.nbytes
        first = 0
        if PDL:
            first = gl.minimum(n_chunks, STAGES)
            for i in range(first):
                mbarrier.expect(ready.index(i), nbytes)
                _w_copies(w_desc, s_desc, ready.index(i), w_smem.index(i), s_smem.index(i), off_n, c0 + i,
                          s_rows_per_chunk)
            _grid_dependency(PDL)
            for i in range(first):
                _x_box(x_desc, xs_desc, off_m, (c0 + i) * 128, M, ready.index(i), x_smem.index(2 * i), BM, XB)
                _x_box(x_desc, xs_desc, off_m, (c0 + i) * 128 + 64, M, ready.index(i), x_smem.index(2 * i + 1), BM,
                       XB)
        for i in range(first, n_chunks):
            s = i % STAGES
            # The consumer's (i // STAGES - 1)-th release of this stage; the first pass finds every stage free.
            mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1, pred=i >= STAGES)
            bar = ready.index(s)
            mbarrier.expect(bar, nbytes)
            c = c0 + i
            _x_box(x_desc, xs_desc, off_m, c * 128, M, bar, x_smem.index(2 * s), BM, XB)
            _x_box(x_desc, xs_desc, off_m, c * 128 + 64, M, bar, x_smem.index(2 * s + 1), BM, XB)
            tma.async_copy_global_to_shared(w_desc, [off_n, c * 64], bar, w_smem.index(s))
            tma.async_copy_global_to_shared(s_desc, [c * s_rows_per_chunk + off_n // 32, 0], bar, s_smem.index(s))

    @gluon.jit
    def _mma_step(x_smem, w_smem, s_smem, ready, empty, acc, i, i0, BN: gl.constexpr, ROW0: gl.constexpr,
                  RB: gl.constexpr, STAGES: gl.constexpr, IN_FLIGHT: gl.constexpr, WORDS: gl.constexpr):
        """Chunk i: wait for its stage, dequantize its codes into wgmma's register operand, issue the low and high
        halves' wgmmas asynchronously, then wait for the previous chunk's (all but these two groups) and release the
        previous chunk's stage to the loader (``IN_FLIGHT``; unless chunk i is the first, i0, of the accumulator's
        run: the caller retired and released the chunk before it); otherwise wait for all and release this one."""
        mma: gl.constexpr = acc.type.layout
        a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
        l3: gl.constexpr = _codes_layout_3d(RB, WORDS)
        s_layout: gl.constexpr = gl.SliceLayout(2, l3)
        plain: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0])
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        codes = w_smem.index(s)
        if RB < BN:
            codes = codes.slice(ROW0, RB, dim=0)
        if WORDS:
            codes = codes.load(_words_load_layout(RB))
        else:
            codes = codes.load(a_layout)
        codes = gl.convert_layout(gl.reshape(codes, [RB, 4, 16]), l3, assert_trivial=True)
        sc = s_smem.index(s)._reinterpret(gl.uint8, [BN, 8], plain)
        if RB < BN:
            sc = sc.slice(ROW0, RB, dim=0)
        if WORDS:  # two scales per instruction: 2-5% fewer loop instructions (SASS), measured with the words layout
            p_lo = _scale_bits_pairs(sc.slice(0, 4, dim=1).load(s_layout))
            p_hi = _scale_bits_pairs(sc.slice(4, 4, dim=1).load(s_layout))
        else:
            p_lo = _scale_bits(sc.slice(0, 4, dim=1).load(s_layout))
            p_hi = _scale_bits(sc.slice(4, 4, dim=1).load(s_layout))
        p_lo = gl.broadcast(gl.expand_dims(p_lo, 2), codes)[0]
        p_hi = gl.broadcast(gl.expand_dims(p_hi, 2), codes)[0]
        if WORDS:
            w_lo, w_hi = gl.inline_asm_elementwise(
                _DQ_WORD_ASM, "=r,=r,=r,=r,r,r,r,r,r", [codes, p_lo, p_hi],
                dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=4,
            )
            w_lo = _words_to_k(gl.reshape(w_lo, [RB, 64]), RB)
            w_hi = _words_to_k(gl.reshape(w_hi, [RB, 64]), RB)
        else:
            w_lo, w_hi = gl.inline_asm_elementwise(
                _DQ_PAIR_ASM, "=r,=r,h,r,r", [codes, p_lo, p_hi],
                dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=2,
            )
            w_lo = gl.reshape(w_lo, [RB, 64])
            w_hi = gl.reshape(w_hi, [RB, 64])
        w_lo = gl.convert_layout(w_lo, a_layout, assert_trivial=not WORDS)
        w_hi = gl.convert_layout(w_hi, a_layout, assert_trivial=not WORDS)
        acc = warpgroup_mma(w_lo, x_smem.index(2 * s).permute((1, 0)), acc, is_async=True)
        acc = warpgroup_mma(w_hi, x_smem.index(2 * s + 1).permute((1, 0)), acc, is_async=True)
        if IN_FLIGHT:
            acc = warpgroup_mma_wait(num_outstanding=2, deps=(acc,))
            mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > i0)
        else:
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            mbarrier.arrive(empty.index(s))
        return acc

    @gluon.jit
    def _mma_partition(x_smem, w_smem, s_smem, ready, empty, y_ptr, out_ptr, cnt_ptr, gs_ptr, M, N, stride_ym,
                       stride_om, stride_ysplit, pid_k, off_m, off_n, n_chunks, norm_ptr, norm_tiles, norm_k, eps,
                       res_ptr, u_ptr, g_ptr, ssq_ptr, rope_bias_ptr, cos_ptr, sin_ptr, stride_cos, pos_ptr, pos_stride,
                       k_ptr, v_ptr, stride_kb, stride_kh, stride_kl, heads, kv_heads, BM: gl.constexpr,
                       BN: gl.constexpr, ROW0: gl.constexpr, RB: gl.constexpr, STAGES: gl.constexpr,
                       OUT_F32: gl.constexpr, IN_FLIGHT: gl.constexpr, FUSED: gl.constexpr, WORDS: gl.constexpr,
                       GLU: gl.constexpr, ROW_NORM: gl.constexpr, NORM_NT: gl.constexpr, ADD_NORM: gl.constexpr,
                       ROPE: gl.constexpr, ROPE_BIAS: gl.constexpr, SHIFT_LAST: gl.constexpr = False,
                       XB: gl.constexpr = 0, y_desc=None, CONSUMERS: gl.constexpr = 1,
                       TMA_STORE: gl.constexpr = False, PDL: gl.constexpr = False, lb_smem=None, lu_smem=None,
                       lu32_smem=None, bias_ptr=None, lu_ptr=None, lb0_ptr=None, lb1_ptr=None, lb2_ptr=None, lora_e0=0, lora_e1=0,
                       stride_lus=0, stride_lb0=0, stride_lb1=0, stride_lb2=0, HAS_BIAS: gl.constexpr = False,
                       LORA_S: gl.constexpr = 0, LORA_R: gl.constexpr = 16):
        """A consumer warpgroup: rows ROW0 .. ROW0 + RB of the CTA's BN rows of W, per stage dequantized into
        registers and multiplied by two async wgmmas (low and high halves of the chunk); it waits only for the
        previous stage's and then releases that stage (each consumer arrives once; the loader waits for all).
        Split-K (``OUT_F32``): the fp32 partial goes to split ``pid_k`` of ``y_ptr``; with ``FUSED`` the consumer
        that finishes its rows' last split sums them into ``out_ptr`` (bf16), as ``nvfp4_gemm._last_split``. The
        whole tile (unsplit, or that sum) goes through ``_store_tile``'s epilogue; with ``TMA_STORE`` an unsplit tile
        not shifted whose rows are X's own (not remapped by XB) through ``_tma_store_tile``. ``HAS_BIAS`` /
        ``LORA_S``: the bias and the adapter's expand added to the whole tile first (``_lora_operands``)."""
        _grid_dependency(PDL)
        mma: gl.constexpr = _mma_layout(BM)
        # The bias, and the adapter's operands (B's rows, u) copied asynchronously before the chunk loop: their loads
        # run under it, and the expand after it is one wgmma from shared memory.
        bias = _lora_operands(lb_smem, lu32_smem, bias_ptr, lu_ptr, lb0_ptr, lb1_ptr, lb2_ptr, lora_e0, lora_e1,
                              stride_lus, stride_lb0, stride_lb1, stride_lb2, off_m, off_n + ROW0, M, N, mma,
                              ROW0 // RB, RB, BM, HAS_BIAS, LORA_S, LORA_R, XB)
        # The epilogue's operands, loaded before the chunk loop on the decode tiles so that their latency hides under
        # it (loaded after it, the RMSNorm scale alone added ~0.9-1.6 us to 7B qkv / gate_up at M = 8); on wider tiles
        # after it (held across it they spill: the operands grow with BM, the registers do not).
        EARLY: gl.constexpr = BM <= 32
        if EARLY:
            r, res, gw, rbias, cos, sin, pos = _epilogue_operands(
                off_m, off_n + ROW0, M, N, stride_om, norm_ptr, norm_tiles, norm_k, eps, res_ptr, g_ptr,
                rope_bias_ptr, cos_ptr, sin_ptr, stride_cos, pos_ptr, pos_stride, mma, RB, BM, ROW_NORM, NORM_NT,
                ADD_NORM, ROPE, ROPE_BIAS, XB)
        acc = gl.zeros([RB, BM], gl.float32, mma)
        if IN_FLIGHT:
            # A chunk's wgmmas stay in flight under the next chunk's dequantization. Two chunks per trip: their
            # operands are distinct registers, so the next trip's dequantization writes registers whose wgmmas the
            # wait has retired (one set reused every chunk makes ptxas serialize the wgmmas, warning C7515).
            for j in range(n_chunks // 2):
                acc = _mma_step(x_smem, w_smem, s_smem, ready, empty, acc, 2 * j, 0, BN, ROW0, RB, STAGES, True, WORDS)
                acc = _mma_step(x_smem, w_smem, s_smem, ready, empty, acc, 2 * j + 1, 0, BN, ROW0, RB, STAGES, True,
                                WORDS)
            if n_chunks % 2 == 1:
                acc = _mma_step(x_smem, w_smem, s_smem, ready, empty, acc, n_chunks - 1, 0, BN, ROW0, RB, STAGES, True,
                                WORDS)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        else:
            # Each chunk's wgmmas retire before the next dequantization (half the operand registers); the other
            # consumer warpgroup's work fills the gaps.
            for i in range(n_chunks):
                acc = _mma_step(x_smem, w_smem, s_smem, ready, empty, acc, i, 0, BN, ROW0, RB, STAGES, False, WORDS)
        if LORA_S > 0:
            async_copy.wait_group(0)  # (every CTA: a split's CTAs that do not sum the tile exit soon after)

        if not EARLY:
            r, res, gw, rbias, cos, sin, pos = _epilogue_operands(
                off_m, off_n + ROW0, M, N, stride_om, norm_ptr, norm_tiles, norm_k, eps, res_ptr, g_ptr,
                rope_bias_ptr, cos_ptr, sin_ptr, stride_cos, pos_ptr, pos_stride, mma, RB, BM, ROW_NORM, NORM_NT,
                ADD_NORM, ROPE, ROPE_BIAS, XB)
        out = acc * (16384.0 / gl.load(gs_ptr))  # the dequantized tiles carry 2**-14 and no 1 / global_scale
        if not OUT_F32:
            out = _add_bias_lora(out, bias, lb_smem, lu_smem, lu32_smem, ROW0 // RB, HAS_BIAS, LORA_S, LORA_R, lu_ptr,
                                 stride_lus, lora_e0, lora_e1, off_m, off_n + ROW0, M, BM, XB)
        if OUT_F32:
            offs_n = off_n + ROW0 + gl.arange(0, RB, layout=gl.SliceLayout(1, mma))
            offs_m = _rows_held(off_m, gl.arange(0, BM, layout=gl.SliceLayout(0, mma)), M, XB)
            ptrs = (y_ptr + pid_k.to(gl.int64) * stride_ysplit + offs_m[None, :].to(gl.int64) * stride_ym
                    + offs_n[:, None])
            mask = _own_rows(offs_m, off_m, M, BM, SHIFT_LAST)[None, :] & (offs_n < N)[:, None]
            gl.store(ptrs, out, mask=mask)
            # Each consumer counts its own rows' splits (a counter per CTA tile and consumer).
            if FUSED and _last_split(cnt_ptr, gl.program_id(0) * (BN // RB) + ROW0 // RB):
                total = _sum_splits(ptrs - pid_k.to(gl.int64) * stride_ysplit, stride_ysplit, mask, acc)
                total = _add_bias_lora(total, bias, lb_smem, lu_smem, lu32_smem, ROW0 // RB, HAS_BIAS, LORA_S, LORA_R,
                                       lu_ptr, stride_lus, lora_e0, lora_e1, off_m, off_n + ROW0, M, BM, XB)
                _store_tile(out_ptr, total, off_m, off_n + ROW0, M, N, stride_om, r, res, gw, u_ptr, ssq_ptr, rbias,
                            cos, sin, pos, k_ptr, v_ptr, stride_kb, stride_kh, stride_kl, heads, kv_heads, RB, BM, GLU,
                            ROW_NORM, ADD_NORM, ROPE, ROPE_BIAS, SHIFT_LAST, XB)
        elif TMA_STORE:
            # Y's descriptor holds M rows, so TMA drops the rows of a last tile past M; a shifted last tile (its first
            # rows are the tile before's) and one whose rows ``_x_box`` remapped (XB) store from registers.
            if _rows_own(off_m, M, BM, XB):
                _tma_store_tile(y_desc, out, x_smem, empty, n_chunks, r, off_m, off_n + ROW0, ROW0, STAGES, CONSUMERS,
                                ROW_NORM)
            else:
                _store_tile(y_ptr, out, off_m, off_n + ROW0, M, N, stride_om, r, res, gw, u_ptr, ssq_ptr, rbias, cos,
                            sin, pos, k_ptr, v_ptr, stride_kb, stride_kh, stride_kl, heads, kv_heads, RB, BM, GLU,
                            ROW_NORM, ADD_NORM, ROPE, ROPE_BIAS, SHIFT_LAST, XB)
        else:
            _store_tile(y_ptr, out, off_m, off_n + ROW0, M, N, stride_om, r, res, gw, u_ptr, ssq_ptr, rbias, cos, sin,
                        pos, k_ptr, v_ptr, stride_kb, stride_kh, stride_kl, heads, kv_heads, RB, BM, GLU, ROW_NORM,
                        ADD_NORM, ROPE, ROPE_BIAS, SHIFT_LAST, XB)

    @gluon.constexpr_function
    def _lora_layout(R, WIDTH=8):
        """Registers of a [rows, R] LoRA operand in one warpgroup: WIDTH consecutive ranks per thread (16 bytes of B
        in bf16, of u in fp32: one asynchronous copy each), the rows over the warpgroup's threads."""
        return gl.BlockedLayout([1, WIDTH], [32 // (R // WIDTH), R // WIDTH], [4, 1], [1, 0])

    @gluon.jit
    def _lora_buffers(like, RB: gl.constexpr, BM: gl.constexpr, CONSUMERS: gl.constexpr, LORA_S: gl.constexpr,
                      LORA_R: gl.constexpr):
        """Shared memory for the adapter's expand (``LORA_S`` slices), per consumer: its RB rows of B [RB, R] bf16 and
        the tile's rows of u [BM, R] bf16 in wgmma's operand layouts, and (BM <= ``LORA_U_STAGED_MAX_BM``) u as
        copied, fp32 [BM, R]; ``like`` (or B's) stands in for those the kernel does not have."""
        if LORA_S > 0:
            lb = gl.allocate_shared_memory(gl.bfloat16, [CONSUMERS, RB, LORA_R],
                                           gl.NVMMASharedLayout.get_default_for([RB, LORA_R], gl.bfloat16))
            lu = gl.allocate_shared_memory(gl.bfloat16, [CONSUMERS, BM, LORA_R],
                                           gl.NVMMASharedLayout.get_default_for([BM, LORA_R], gl.bfloat16))
            if BM <= _U_STAGED_MAX_BM:
                lu32 = gl.allocate_shared_memory(gl.float32, [CONSUMERS, BM, LORA_R],
                                                 gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0]))
            else:
                lu32 = lb
        else:
            lb = like
            lu = like
            lu32 = like
        return lb, lu, lu32

    @gluon.jit
    def _lora_operands(lb_smem, lu32_smem, bias_ptr, lu_ptr, lb0_ptr, lb1_ptr, lb2_ptr, lora_e0, lora_e1, stride_lus,
                       stride_lb0, stride_lb1, stride_lb2, off_m, n0, M, N, mma: gl.constexpr, c: gl.constexpr,
                       RB: gl.constexpr, BM: gl.constexpr, HAS_BIAS: gl.constexpr, LORA_S: gl.constexpr,
                       LORA_R: gl.constexpr, XB: gl.constexpr):
        """The bias of output columns n0 .. n0 + RB ([RB] fp32 in the accumulator's row slice; 0.0 without
        ``HAS_BIAS``); with an adapter (``LORA_S`` slices ending at columns ``lora_e0`` / ``lora_e1`` / N, each
        tile inside one: ``ws_matmul`` checks) the asynchronous copies (``cp.async``, one group) of consumer ``c``'s
        operands of its expand into shared memory: the slice's B rows for these columns ([N_s, R] bf16, row stride
        ``stride_lb*``; rows past N zero) and u of the tile's rows of X ([S, M, R] fp32, slice stride
        ``stride_lus``; ``_rows_held``, rows past M zero). Waited for after the chunk loop: a load into registers
        here would hold the consumer back by a DRAM latency under the ring's traffic, every tile (measured: up to
        6 us on 32B gate_up at M = 64, benchmarks/RESULTS.md run 37)."""
        bias = 0.0
        if HAS_BIAS:
            offs_n = n0 + gl.arange(0, RB, layout=gl.SliceLayout(1, mma))
            bias = gl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(gl.float32)
        if LORA_S > 0:
            if n0 < lora_e0:
                b_ptr = lb0_ptr
                b_row0 = n0
                stride_b = stride_lb0
                s = 0
            elif n0 < lora_e1:
                b_ptr = lb1_ptr
                b_row0 = n0 - lora_e0
                stride_b = stride_lb1
                s = 1
            else:
                b_ptr = lb2_ptr
                b_row0 = n0 - lora_e1
                stride_b = stride_lb2
                s = 2
            bl: gl.constexpr = _lora_layout(LORA_R, 8)
            ranks = gl.arange(0, LORA_R, layout=gl.SliceLayout(0, bl))
            rows = gl.arange(0, RB, layout=gl.SliceLayout(1, bl))
            b_mask = gl.expand_dims(n0 + rows < N, 1) & gl.expand_dims(ranks < LORA_R, 0)
            b_ptrs = b_ptr + gl.expand_dims((b_row0 + rows).to(gl.int64) * stride_b, 1) + gl.expand_dims(ranks, 0)
            async_copy.async_copy_global_to_shared(lb_smem.index(c), b_ptrs, mask=b_mask)
            if BM <= _U_STAGED_MAX_BM:
                u_ptrs, u_mask = _lora_u_ptrs(lu_ptr, s, stride_lus, off_m, M, BM, LORA_R, XB)
                async_copy.async_copy_global_to_shared(lu32_smem.index(c), u_ptrs, mask=u_mask)
            async_copy.commit_group()
        return bias

    @gluon.jit
    def _lora_u_ptrs(lu_ptr, s, stride_lus, off_m, M, BM: gl.constexpr, LORA_R: gl.constexpr, XB: gl.constexpr):
        """Pointers to u's rows of the tile's rows of X in slice ``s`` ([BM, R], ``_lora_layout(R, 4)``) and their
        mask (rows past M)."""
        ul: gl.constexpr = _lora_layout(LORA_R, 4)
        ranks = gl.arange(0, LORA_R, layout=gl.SliceLayout(0, ul))
        offs_m = _rows_held(off_m, gl.arange(0, BM, layout=gl.SliceLayout(1, ul)), M, XB)
        u_mask = gl.expand_dims(offs_m < M, 1) & gl.expand_dims(ranks < LORA_R, 0)
        u_ptrs = lu_ptr + s * stride_lus + gl.expand_dims(offs_m.to(gl.int64) * LORA_R, 1) + gl.expand_dims(ranks, 0)
        return u_ptrs, u_mask

    @gluon.jit
    def _lora_slice(n0, lora_e0, lora_e1):
        """The adapter slice that output columns from n0 on belong to."""
        return gl.where(n0 < lora_e0, 0, gl.where(n0 < lora_e1, 1, 2))

    @gluon.jit
    def _add_bias_lora(out, bias, lb_smem, lu_smem, lu32_smem, c: gl.constexpr, HAS_BIAS: gl.constexpr,
                       LORA_S: gl.constexpr, LORA_R: gl.constexpr, lu_ptr, stride_lus, lora_e0, lora_e1, off_m, n0, M,
                       BM: gl.constexpr, XB: gl.constexpr):
        """``out`` (fp32 [RB, BM] of Y^T) + the bias of each output column + consumer ``c``'s expand B_s u^T: u
        rounded to bf16 as vLLM's expand does, then one wgmma over the rank, in fp32. The caller waited for the
        operands' copies (``_lora_operands``); u of tiles above ``LORA_U_STAGED_MAX_BM`` rows is read here (from
        L2: the shrink just wrote it, and every tile of these rows reads it)."""
        if HAS_BIAS:
            out = out + gl.expand_dims(bias, 1)
        if LORA_S > 0:
            gl.thread_barrier()  # every thread's copies landed (each waited for its own)
            if BM <= _U_STAGED_MAX_BM:
                u = lu32_smem.index(c).load(_lora_layout(LORA_R, 4))
            else:
                u_ptrs, u_mask = _lora_u_ptrs(lu_ptr, _lora_slice(n0, lora_e0, lora_e1), stride_lus, off_m, M, BM,
                                              LORA_R, XB)
                u = gl.load(u_ptrs, mask=u_mask, other=0.0)
            lu_smem.index(c).store(u.to(gl.bfloat16))
            fence_async_shared()  # B's copies and u's stores, before the wgmma reads them
            gl.thread_barrier()
            out = warpgroup_mma(lb_smem.index(c), lu_smem.index(c).permute((1, 0)), out)
        return out

    @gluon.jit
    def _tma_store_tile(y_desc, out, x_smem, empty, n_chunks, r, off_m, n0, ROW0: gl.constexpr, STAGES: gl.constexpr,
                        CONSUMERS: gl.constexpr, ROW_NORM: gl.constexpr):
        """A tile ``out`` [RB, BM] of Y^T (rows n0 .., columns off_m ..) into Y by one TMA copy per 64 rows (rows
        past M and columns past N dropped by the descriptor's bounds): once every
        consumer of the CTA is done with the ring (the loader's last copy landed before the last chunk was consumed;
        two consumers: both released the last chunk's stage, which completes its ``empty`` phase; they retire each
        chunk's wgmmas before the release), it writes each 64 rows of the tile transposed, bf16, into X's box
        ``ROW0 // 64`` on (a [BM, 64] box of the layout ``y_desc`` copies; 128 rows: their halves are the
        accumulator's own registers, row + 64) and stores them; the copies are waited for before the CTA exits,
        which frees the memory."""
        if ROW_NORM:
            out = out * gl.expand_dims(r, 0)
        if CONSUMERS == 2:
            last = n_chunks - 1
            mbarrier.wait(empty.index(last % STAGES), (last // STAGES) & 1)
        _copy_tile_out(y_desc, out.to(gl.bfloat16), x_smem, ROW0 // 64, off_m, n0)
        tma.store_wait(0)

    @gluon.jit
    def _copy_tile_out(y_desc, out, boxes, box0, off_m, n0):
        """Issue the TMA copies of a bf16 tile ``out`` [RB, BM] of Y^T (rows n0 .., columns off_m ..) into Y: each
        64 rows written transposed into ``boxes.index(box0 + j)`` ([BM, 64] boxes of ``y_desc``'s layout; 128 rows:
        their halves are the accumulator's own registers, row + 64), fenced, then one copy per box. The caller waits
        for the copies (``tma.store_wait``) before the boxes are written again or the CTA exits."""
        if out.shape[0] == 64:
            boxes.index(box0).store(gl.permute(out, (1, 0)))
        else:
            gl.static_assert(out.shape[0] == 128, "64 or 128 rows of W per consumer")
            lo, hi = gl.split(gl.permute(gl.reshape(out, [2, 64, out.shape[1]]), (1, 2, 0)))
            boxes.index(box0).store(gl.permute(lo, (1, 0)))
            boxes.index(box0 + 1).store(gl.permute(hi, (1, 0)))
        fence_async_shared()
        gl.thread_barrier()  # every thread's part written (and fenced) before the copies are issued
        for j in gl.static_range(out.shape[0] // 64):
            tma.async_copy_shared_to_global(y_desc, [off_m, n0 + 64 * j], boxes.index(box0 + j))

    @gluon.jit
    def _store_tile(y_ptr, out, off_m, n0, M, N, stride_ym, r, res, gw, u_ptr, ssq_ptr, rbias, cos, sin, pos, k_ptr,
                    v_ptr, stride_kb, stride_kh, stride_kl, heads, kv_heads, RB: gl.constexpr, BM: gl.constexpr,
                    GLU: gl.constexpr, ROW_NORM: gl.constexpr, ADD_NORM: gl.constexpr, ROPE: gl.constexpr,
                    ROPE_BIAS: gl.constexpr, SHIFT_LAST: gl.constexpr = False, XB: gl.constexpr = 0):
        """A whole fp32 tile ``out`` (rows n0 .. n0 + RB of Y^T, columns off_m ..) into Y: scaled per row of X by
        the RMSNorm factor ``r`` (``ROW_NORM``), then stored as bf16, or as SiLU(gate) * up (``GLU``), or added to
        the residual with the next RMSNorm's input and statistics (``ADD_NORM``, ``_add_norm_store``), or as one
        attention head's q, k or v (``ROPE``, ``_rope_store``); the operands as ``_epilogue_operands`` loaded them."""
        mma: gl.constexpr = out.type.layout
        offs_n = n0 + gl.arange(0, RB, layout=gl.SliceLayout(1, mma))
        offs_m = _rows_held(off_m, gl.arange(0, BM, layout=gl.SliceLayout(0, mma)), M, XB)
        if ROW_NORM:
            out = out * gl.expand_dims(r, 0)
        if GLU:
            _glu_store(y_ptr, out, off_m, n0, M, N, stride_ym, RB, BM, SHIFT_LAST, XB)
        elif ADD_NORM:
            _add_norm_store(y_ptr, res, u_ptr, gw, ssq_ptr, out, offs_n, offs_m, M, N, stride_ym, n0 // RB)
        elif ROPE:
            _rope_store(y_ptr, out, offs_m, n0, M, stride_ym, rbias, cos, sin, pos, k_ptr, v_ptr, stride_kb, stride_kh,
                        stride_kl, heads, kv_heads, ROPE_BIAS)
        else:
            mask = _own_rows(offs_m, off_m, M, BM, SHIFT_LAST)[None, :] & (offs_n < N)[:, None]
            gl.store(y_ptr + offs_m[None, :].to(gl.int64) * stride_ym + offs_n[:, None], out.to(gl.bfloat16),
                     mask=mask)

    @gluon.jit
    def _epilogue_operands(off_m, n0, M, N, stride_ym, norm_ptr, norm_tiles, norm_k, eps, res_ptr, g_ptr, rope_bias_ptr,
                           cos_ptr, sin_ptr, stride_cos, pos_ptr, pos_stride, mma: gl.constexpr, RB: gl.constexpr,
                           BM: gl.constexpr, ROW_NORM: gl.constexpr, NORM_NT: gl.constexpr, ADD_NORM: gl.constexpr,
                           ROPE: gl.constexpr, ROPE_BIAS: gl.constexpr, XB: gl.constexpr = 0):
        """What ``_store_tile``'s epilogue reads besides the product, for the tile's rows n0 .. n0 + RB and columns
        off_m ..: (RMSNorm scale [BM], residual [RB, BM] bf16, norm weight [RB], bias [RB], cos and sin [RB, BM],
        positions [BM]), in the accumulator's layout; 0 / 1 where the epilogue has none."""
        offs_n = n0 + gl.arange(0, RB, layout=gl.SliceLayout(1, mma))
        offs_m = _rows_held(off_m, gl.arange(0, BM, layout=gl.SliceLayout(0, mma)), M, XB)
        r = 1.0
        res = 0.0
        gw = 0.0
        rbias = 0.0
        cos = 1.0
        sin = 0.0
        pos = 0
        if ROW_NORM:
            r = _norm_scale(norm_ptr, off_m, 0, M, norm_tiles, norm_k, eps, NORM_NT, BM, gl.SliceLayout(0, mma), XB)
        if ADD_NORM:
            mask = (offs_m < M)[None, :] & (offs_n < N)[:, None]
            res = gl.load(res_ptr + offs_m[None, :].to(gl.int64) * stride_ym + offs_n[:, None], mask=mask, other=0.0)
            gw = gl.load(g_ptr + offs_n, mask=offs_n < N, other=0.0)
        if ROPE:
            if ROPE_BIAS:
                rbias = gl.load(rope_bias_ptr + offs_n)
            rows = offs_m < M
            pos = gl.load(pos_ptr + offs_m * pos_stride, mask=rows, other=0)
            d = gl.arange(0, RB, layout=gl.SliceLayout(1, mma))
            tab = gl.expand_dims(pos.to(gl.int64) * stride_cos, 0) + gl.expand_dims(d, 1)
            mask = gl.broadcast(gl.expand_dims(rows, 0), tab)[0]
            cos = gl.load(cos_ptr + tab, mask=mask, other=0.0)
            sin = gl.load(sin_ptr + tab, mask=mask, other=0.0)
        return r, res, gw, rbias, cos, sin, pos

    @gluon.jit
    def _norm_scale(norm_ptr, off_m, r0, M, norm_tiles, norm_k, eps, NT: gl.constexpr, BM: gl.constexpr,
                    LAYOUT: gl.constexpr, XB: gl.constexpr = 0):
        """rsqrt(sum of h**2 / norm_k + eps) for the rows of X that rows r0 .. r0 + BM of the tile at row off_m hold
        (``_rows_held``; ``LAYOUT``), from the partial sums
        of squares [norm_tiles, M] fp32 at ``norm_ptr`` (``qerl.kernels.fused_norm.NormStats``), all of a slice of
        partials in one load (a loop over them waits on L2 once per partial), summed in a fixed order."""
        TB: gl.constexpr = NT if NT * BM <= 2048 else (2048 // BM if 2048 // BM >= 1 else 1)
        lay: gl.constexpr = gl.BlockedLayout([1, 1], [32, 1], [4, 1], [1, 0])
        m = _rows_held(off_m, r0 + gl.arange(0, BM, layout=gl.SliceLayout(0, lay)), M, XB)
        total = gl.zeros([BM], gl.float32, gl.SliceLayout(0, lay))
        for t0 in gl.static_range(0, NT, TB):
            t = t0 + gl.arange(0, TB, layout=gl.SliceLayout(1, lay))
            part = gl.load(norm_ptr + t[:, None].to(gl.int64) * M + m[None, :],
                           mask=(t < norm_tiles)[:, None] & (m < M)[None, :], other=0.0)
            total += gl.sum(part, axis=0)
        return gl.convert_layout(gl.rsqrt(total / norm_k + eps), LAYOUT)

    @gluon.jit
    def _half_swap(v):
        """[D, BM] in wgmma's accumulator layout -> rows d + D / 2 and d - D / 2 swapped (rotate-half's partner rows):
        with D = 128 a thread holds rows r and r + 64 in registers (the fourth warp ends at row 63), so no data
        moves."""
        D: gl.constexpr = v.type.shape[0]
        BM: gl.constexpr = v.type.shape[1]
        lo, hi = gl.split(gl.permute(gl.reshape(v, [2, D // 2, BM]), (1, 2, 0)))
        swapped = gl.reshape(gl.permute(gl.join(hi, lo), (2, 0, 1)), [D, BM])
        return gl.convert_layout(swapped, v.type.layout, assert_trivial=True)

    @gluon.jit
    def _rope_store(q_ptr, out, offs_m, n0, M, stride_qm, bias, cos, sin, pos, k_ptr, v_ptr, stride_kb, stride_kh,
                    stride_kl, heads, kv_heads, HAS_BIAS: gl.constexpr):
        """One attention head of a fused QKV projection (the tile's rows n0 .. n0 + D, D = the head dim, one head
        per tile): the ``bias`` [D] added, q and k rotated at each row's position ``pos`` [BM] (rotate-half RoPE;
        ``cos`` / ``sin`` [D, BM]: the tables' rows at the positions), q stored into Q [M, heads * D], k and v into
        the caches [B, KV, L, D] at the position, as ``qerl.kernels.decode_attention.rope_and_cache``."""
        mma: gl.constexpr = out.type.layout
        D: gl.constexpr = out.type.shape[0]
        d = gl.arange(0, D, layout=gl.SliceLayout(1, mma))
        head = n0 // D
        if HAS_BIAS:
            out = out + gl.expand_dims(bias.to(gl.float32), 1)
        mask = gl.broadcast(gl.expand_dims(offs_m < M, 0), out)[0]
        if head < heads + kv_heads:
            sign = gl.expand_dims(gl.where(d < D // 2, -1.0, 1.0), 1)
            out = out * cos.to(gl.float32) + _half_swap(out) * sign * sin.to(gl.float32)
        if head < heads:
            dest = q_ptr + gl.expand_dims(offs_m.to(gl.int64) * stride_qm, 0) + gl.expand_dims(n0 + d, 1)
        else:
            kv = head - heads
            base = v_ptr
            if kv < kv_heads:
                base = k_ptr
            else:
                kv -= kv_heads
            dest = (base + gl.expand_dims(offs_m.to(gl.int64) * stride_kb + pos.to(gl.int64) * stride_kl, 0)
                    + kv * stride_kh + gl.expand_dims(d, 1))
        gl.store(dest, out.to(gl.bfloat16), mask=mask)

    @gluon.jit
    def _add_norm_store(y_ptr, res, u_ptr, g, ssq_ptr, out, offs_n, offs_m, M, N, stride_ym, slot):
        """h = residual + ``out`` into Y (bf16), the next RMSNorm's input h * g into U, and this tile's sums of h**2
        per row of X into row ``slot`` of the statistics [N / RB, M] (fp32, one row per tile of RB columns of Y:
        written, not accumulated, so no buffer needs zeroing and the next projection sums them in a fixed order).
        Y, U and the residual are [M, N] with row stride ``stride_ym``; Y may be the residual itself (every CTA of
        a tile reads its residual before its chunks, and only the last to finish writes the tile)."""
        mask = (offs_m < M)[None, :] & (offs_n < N)[:, None]
        offs = offs_m[None, :].to(gl.int64) * stride_ym + offs_n[:, None]
        h = (out + res.to(gl.float32)).to(gl.bfloat16)
        gl.store(y_ptr + offs, h, mask=mask)
        hf = gl.where(mask, h.to(gl.float32), 0.0)
        gl.store(u_ptr + offs, (hf * gl.expand_dims(g.to(gl.float32), 1)).to(gl.bfloat16), mask=mask)
        gl.store(ssq_ptr + slot * M + offs_m, gl.sum(hf * hf, axis=0), mask=offs_m < M)

    @gluon.jit
    def _row_pairs(v, RB: gl.constexpr, BM: gl.constexpr):
        """[RB, BM] in wgmma's accumulator layout -> (rows 16g + r, rows 16g + 8 + r) as two [RB / 16, 8, BM]: a
        thread holds rows r and r + 8 of its 16-row group in registers, so no data moves."""
        return gl.split(gl.permute(gl.reshape(v, [RB // 16, 2, 8, BM]), (0, 2, 3, 1)))

    @gluon.jit
    def _glu_store(y_ptr, out, off_m, n0, M, N, stride_ym, RB: gl.constexpr, BM: gl.constexpr,
                   SHIFT_LAST: gl.constexpr = False, XB: gl.constexpr = 0):
        """SiLU(gate) * up into Y [M, N / 2] (bf16) from ``out``, the tile's rows n0 .. n0 + RB of a weight whose rows
        alternate 8 gate rows and the 8 up rows of the same outputs (``nvfp4_gemm.interleave_gate_up``): rows 16g + r
        and 16g + 8 + r give output column n0 / 2 + 8g + r."""
        mma: gl.constexpr = out.type.layout
        r = gl.arange(0, RB, layout=gl.SliceLayout(1, mma))
        m = _rows_held(off_m, gl.arange(0, BM, layout=gl.SliceLayout(0, mma)), M, XB)
        col = gl.broadcast(gl.expand_dims(n0 // 2 + (r // 16) * 8 + r % 8, 1), out)[0]
        row = gl.broadcast(gl.expand_dims(m, 0), out)[0]
        gate, up = _row_pairs(out, RB, BM)
        col, _c = _row_pairs(col, RB, BM)
        row, _r = _row_pairs(row, RB, BM)
        y = gate / (1.0 + gl.exp(-gate)) * up
        gl.store(y_ptr + row.to(gl.int64) * stride_ym + col, y.to(gl.bfloat16),
                 mask=_own_rows(row, off_m, M, BM, SHIFT_LAST) & (col < N // 2))

    @gluon.jit(do_not_specialize=["M", "n_chunks"])
    def _ws_fwd_kernel(x_desc, w_desc, s_desc, xs_desc, y_desc, y_ptr, out_ptr, cnt_ptr, gs_ptr, M, N, stride_ym,
                       stride_om,
                       stride_ysplit,
                       n_chunks, s_rows_per_chunk, norm_ptr, norm_tiles, norm_k, eps, res_ptr, u_ptr, g_ptr, ssq_ptr,
                       rope_bias_ptr, cos_ptr, sin_ptr, stride_cos, pos_ptr, pos_stride, k_ptr, v_ptr, stride_kb,
                       stride_kh, stride_kl, heads, kv_heads, BM: gl.constexpr, BN: gl.constexpr,
                       CONSUMERS: gl.constexpr, STAGES: gl.constexpr, OUT_F32: gl.constexpr,
                       CONSUMER_REGS: gl.constexpr, IN_FLIGHT: gl.constexpr, FUSED: gl.constexpr,
                       WORDS: gl.constexpr, GLU: gl.constexpr = False, ROW_NORM: gl.constexpr = False,
                       NORM_NT: gl.constexpr = 1, ADD_NORM: gl.constexpr = False, ROPE: gl.constexpr = False,
                       ROPE_BIAS: gl.constexpr = False, SHIFT_LAST: gl.constexpr = False, XB: gl.constexpr = 0,
                       TMA_STORE: gl.constexpr = False, PDL: gl.constexpr = False, bias_ptr=None, lu_ptr=None,
                       lb0_ptr=None, lb1_ptr=None, lb2_ptr=None, lora_e0=0, lora_e1=0, stride_lus=0, stride_lb0=0,
                       stride_lb1=0, stride_lb2=0, HAS_BIAS: gl.constexpr = False, LORA_S: gl.constexpr = 0,
                       LORA_R: gl.constexpr = 16):
        gl.static_assert(not TMA_STORE or not (GLU or ADD_NORM or ROPE), "the TMA store takes the plain epilogue")
        gl.static_assert(not (HAS_BIAS or LORA_S > 0) or not (GLU or ADD_NORM or ROPE or ROW_NORM),
                         "the bias and the adapter's expand take the plain epilogue")
        gl.static_assert(not TMA_STORE or BN <= 128 * STAGES, "the TMA store stages the tile in X's 2 * STAGES boxes")
        pid = gl.program_id(0)
        pid_k = gl.program_id(1)
        # The M tiles of one N tile run next to each other, so a W tile is read from DRAM once and from L2 after.
        num_m = gl.cdiv(M, BM)
        off_m = _tile_m0(pid % num_m, M, BM, SHIFT_LAST)
        off_n = (pid // num_m) * BN
        # Split pid_k's run of the K chunks: as even as the count allows (runs differ by one chunk at most), so a
        # split need not divide the chunk count (e.g. 7 splits of 7B down's 148 chunks fill three CTAs per SM).
        c0 = pid_k * n_chunks // gl.num_programs(1)
        chunks_per_split = (pid_k + 1) * n_chunks // gl.num_programs(1) - c0

        x_smem, w_smem, s_smem, ready, empty = _fwd_stages(x_desc, w_desc, s_desc, BM, BN, STAGES, CONSUMERS)

        # One partition per consumer warpgroup (rows c * RB .. of the BN), the loader last. Gluon takes the list
        # literally, hence one branch per consumer count.
        RB: gl.constexpr = BN // CONSUMERS
        lb_smem, lu_smem, lu32_smem = _lora_buffers(w_smem, RB, BM, CONSUMERS, LORA_S, LORA_R)
        if CONSUMERS == 1:
            gl.warp_specialize([
                (_mma_partition, (x_smem, w_smem, s_smem, ready, empty, y_ptr, out_ptr, cnt_ptr, gs_ptr, M, N,
                                  stride_ym, stride_om, stride_ysplit, pid_k, off_m, off_n, chunks_per_split, norm_ptr, norm_tiles,
                                  norm_k, eps, res_ptr, u_ptr, g_ptr, ssq_ptr, rope_bias_ptr, cos_ptr, sin_ptr,
                                  stride_cos, pos_ptr, pos_stride, k_ptr, v_ptr, stride_kb, stride_kh, stride_kl,
                                  heads, kv_heads, BM, BN, 0, RB, STAGES, OUT_F32, IN_FLIGHT, FUSED, WORDS, GLU,
                                  ROW_NORM, NORM_NT, ADD_NORM, ROPE, ROPE_BIAS, SHIFT_LAST, XB, y_desc,
                                  CONSUMERS, TMA_STORE, PDL, lb_smem, lu_smem, lu32_smem, bias_ptr, lu_ptr, lb0_ptr, lb1_ptr,
                                  lb2_ptr, lora_e0, lora_e1, stride_lus, stride_lb0, stride_lb1, stride_lb2,
                                  HAS_BIAS, LORA_S, LORA_R)),
                (_load_worker, (x_desc, w_desc, s_desc, x_smem, w_smem, s_smem, ready, empty, off_m, off_n, c0,
                                chunks_per_split, s_rows_per_chunk, STAGES, xs_desc, M, BM, XB, PDL)),
            ], [1], [40])
        else:
            gl.static_assert(CONSUMERS == 2, "one or two consumer warpgroups")
            gl.warp_specialize([
                (_mma_partition, (x_smem, w_smem, s_smem, ready, empty, y_ptr, out_ptr, cnt_ptr, gs_ptr, M, N,
                                  stride_ym, stride_om, stride_ysplit, pid_k, off_m, off_n, chunks_per_split, norm_ptr, norm_tiles,
                                  norm_k, eps, res_ptr, u_ptr, g_ptr, ssq_ptr, rope_bias_ptr, cos_ptr, sin_ptr,
                                  stride_cos, pos_ptr, pos_stride, k_ptr, v_ptr, stride_kb, stride_kh, stride_kl,
                                  heads, kv_heads, BM, BN, 0, RB, STAGES, OUT_F32, IN_FLIGHT, FUSED, WORDS, GLU,
                                  ROW_NORM, NORM_NT, ADD_NORM, ROPE, ROPE_BIAS, SHIFT_LAST, XB, y_desc,
                                  CONSUMERS, TMA_STORE, PDL, lb_smem, lu_smem, lu32_smem, bias_ptr, lu_ptr, lb0_ptr, lb1_ptr,
                                  lb2_ptr, lora_e0, lora_e1, stride_lus, stride_lb0, stride_lb1, stride_lb2,
                                  HAS_BIAS, LORA_S, LORA_R)),
                (_mma_partition, (x_smem, w_smem, s_smem, ready, empty, y_ptr, out_ptr, cnt_ptr, gs_ptr, M, N,
                                  stride_ym, stride_om, stride_ysplit, pid_k, off_m, off_n, chunks_per_split, norm_ptr, norm_tiles,
                                  norm_k, eps, res_ptr, u_ptr, g_ptr, ssq_ptr, rope_bias_ptr, cos_ptr, sin_ptr,
                                  stride_cos, pos_ptr, pos_stride, k_ptr, v_ptr, stride_kb, stride_kh, stride_kl,
                                  heads, kv_heads, BM, BN, RB, RB, STAGES, OUT_F32, IN_FLIGHT, FUSED, WORDS, GLU,
                                  ROW_NORM, NORM_NT, ADD_NORM, ROPE, ROPE_BIAS, SHIFT_LAST, XB, y_desc,
                                  CONSUMERS, TMA_STORE, PDL, lb_smem, lu_smem, lu32_smem, bias_ptr, lu_ptr, lb0_ptr, lb1_ptr,
                                  lb2_ptr, lora_e0, lora_e1, stride_lus, stride_lb0, stride_lb1, stride_lb2,
                                  HAS_BIAS, LORA_S, LORA_R)),
                (_load_worker, (x_desc, w_desc, s_desc, x_smem, w_smem, s_smem, ready, empty, off_m, off_n, c0,
                                chunks_per_split, s_rows_per_chunk, STAGES, xs_desc, M, BM, XB, PDL)),
            ], [4, 1], [CONSUMER_REGS, 40])

    # ------------------------------------------------------------------------------------------ stream-K forward
    @gluon.jit
    def _sk_load_worker(x_desc, w_desc, s_desc, x_smem, w_smem, s_smem, ready, empty, it_begin, it_end, n_chunks,
                        num_m, M, s_rows_per_chunk, BM: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr,
                        SHIFT_LAST: gl.constexpr, xs_desc, XB: gl.constexpr, stored, TMA_STORE: gl.constexpr = 0,
                        PDL: gl.constexpr = False):
        """``_load_worker`` over this CTA's run of steps: chunks ``it_begin`` .. ``it_end`` of the tile-major sequence
        (tile t = step // n_chunks, M tiles of one N tile next to each other), one ring of stages throughout, so the
        next tile's first chunks load while the consumers write the previous tile. ``TMA_STORE`` 2: a stage that
        held this run's last chunk of a tile stored through it (``_sk_ring_store_tile``: the tiles the run holds from
        their first chunk) is refilled only once the consumers' copies of the tile out of it completed ``stored``
        (``pending``: such stages, a bit each; ``flips``: each one's ``stored`` parity). ``PDL``: the first pass's W
        copies before the wait for the launches before this one, as ``_load_worker``'s."""
        nbytes: gl.constexpr = 2 * x_desc.block_type.nbytes + w_desc.block_type.nbytes + s_desc.block_type.nbytes
        i = 0
        pending = 0
        flips = 0
        first = 0
        if PDL:
            first = gl.maximum(gl.minimum(it_end - it_begin, STAGES), 0)
            for j in range(first):
                t = (it_begin + j) // n_chunks
                mbarrier.expect(ready.index(j), nbytes)
                _w_copies(w_desc, s_desc, ready.index(j), w_smem.index(j), s_smem.index(j), (t // num_m) * BN,
                          it_begin + j - t * n_chunks, s_rows_per_chunk)
            _grid_dependency(PDL)
            for j in range(first):
                t = (it_begin + j) // n_chunks
                c = it_begin + j - t * n_chunks
                off_m = _tile_m0(t % num_m, M, BM, SHIFT_LAST)
                _x_box(x_desc, xs_desc, off_m, c * 128, M, ready.index(j), x_smem.index(2 * j), BM, XB)
                _x_box(x_desc, xs_desc, off_m, c * 128 + 64, M, ready.index(j), x_smem.index(2 * j + 1), BM, XB)
        for t in range(it_begin // n_chunks, (it_end - 1) // n_chunks + 1):
            off_m = _tile_m0(t % num_m, M, BM, SHIFT_LAST)
            off_n = (t // num_m) * BN
            c_hi = gl.minimum(it_end - t * n_chunks, n_chunks)
            ring_stored = False
            if TMA_STORE == 2:  # the consumers' rule: a tile this run holds from its first chunk, of rows of its own
                ring_stored = (it_begin <= t * n_chunks) & _rows_own(off_m, M, BM, XB)
            for c in range(gl.maximum(it_begin - t * n_chunks, 0), c_hi):
                s = i % STAGES
                mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1, pred=i >= STAGES)
                if TMA_STORE == 2:
                    held = ((pending >> s) & 1) != 0
                    mbarrier.wait(stored.index(s), (flips >> s) & 1, pred=held)
                    flips = flips ^ (held.to(gl.int32) << s)
                    pending = pending & ~(1 << s)
                    if ring_stored:
                        pending = pending | ((c == c_hi - 1).to(gl.int32) << s)
                if PDL:
                    if i >= first:  # the first pass's stages were filled before the loop
                        _sk_stage_copies(x_desc, w_desc, s_desc, xs_desc, x_smem, w_smem, s_smem, ready.index(s), s,
                                         off_m, off_n, c, M, s_rows_per_chunk, nbytes, BM, XB)
                else:
                    _sk_stage_copies(x_desc, w_desc, s_desc, xs_desc, x_smem, w_smem, s_smem, ready.index(s), s,
                                     off_m, off_n, c, M, s_rows_per_chunk, nbytes, BM, XB)
                i += 1

    @gluon.jit
    def _sk_stage_copies(x_desc, w_desc, s_desc, xs_desc, x_smem, w_smem, s_smem, bar, s, off_m, off_n, c, M,
                         s_rows_per_chunk, nbytes: gl.constexpr, BM: gl.constexpr, XB: gl.constexpr):
        """A stream-K step's copies into stage s: X's two boxes, W's code and scale bytes."""
        mbarrier.expect(bar, nbytes)
        _x_box(x_desc, xs_desc, off_m, c * 128, M, bar, x_smem.index(2 * s), BM, XB)
        _x_box(x_desc, xs_desc, off_m, c * 128 + 64, M, bar, x_smem.index(2 * s + 1), BM, XB)
        _w_copies(w_desc, s_desc, bar, w_smem.index(s), s_smem.index(s), off_n, c, s_rows_per_chunk)

    @gluon.jit
    def _sk_mma_partition(x_smem, w_smem, s_smem, ready, empty, y_ptr, part_ptr, cnt_ptr, gs_ptr, M, N, stride_ym,
                          it_begin, it_end, iters, n_chunks, num_m, norm_ptr, norm_tiles, norm_k, eps, y_desc, y_smem,
                          stored, BM: gl.constexpr, BN: gl.constexpr, ROW0: gl.constexpr, RB: gl.constexpr,
                          STAGES: gl.constexpr, CONSUMERS: gl.constexpr, WORDS: gl.constexpr, ROW_NORM: gl.constexpr,
                          NORM_NT: gl.constexpr, SHIFT_LAST: gl.constexpr,
                          XB: gl.constexpr, TMA_STORE: gl.constexpr = 0, IN_FLIGHT: gl.constexpr = False,
                          PDL: gl.constexpr = False):
        """A consumer warpgroup over this CTA's run of steps (``_sk_load_worker``), rows ROW0 .. ROW0 + RB of each
        tile; ``IN_FLIGHT`` (one consumer) as ``_mma_partition``'s within each tile. A tile the run holds from its
        first chunk is written as bf16 (``TMA_STORE`` 1: by ``_sk_tma_store_tile``
        from boxes of its own, 2: by ``_sk_ring_store_tile`` through the stage of its last chunk; unless shifted or
        remapped by XB), if the run ends inside it after the later CTAs' parts are added (``_sk_add_parts``); a
        part without the first chunk (only ever the run's first tile) goes to ``_sk_put_part``. ``ROW_NORM``: rows
        of X scaled as ``_store_tile``'s."""
        _grid_dependency(PDL)
        mma: gl.constexpr = _mma_layout(BM)
        t0 = it_begin // n_chunks
        ME: gl.constexpr = ROW0 // RB
        # The RMSNorm scale of the first tile's rows of X, loaded before the chunks on the decode tiles (as
        # ``_epilogue_operands``); tiles of other rows of X (M > BM), and wider tiles, load theirs at the store.
        m_first = _tile_m0(t0 % num_m, M, BM, SHIFT_LAST)
        r_first = 1.0
        if ROW_NORM and BM <= 32:
            r_first = _norm_scale(norm_ptr, m_first, 0, M, norm_tiles, norm_k, eps, NORM_NT, BM, gl.SliceLayout(0, mma),
                                  XB)
        i = 0
        for t in range(t0, (it_end - 1) // n_chunks + 1):
            c_lo = gl.maximum(it_begin - t * n_chunks, 0)
            c_hi = gl.minimum(it_end - t * n_chunks, n_chunks)
            acc = gl.zeros([RB, BM], gl.float32, mma)
            # The run ends inside the tile (its first chunks): the later CTAs hold the rest of it. Runs at least a
            # tile long leave one such part, the start of the next run, stored by the time this one reaches the tile:
            # it seeds the accumulator (loaded into the accumulator's own registers, all at once); with shorter runs
            # the parts are added after the chunks (each load needs registers beside the accumulator's: ptxas issues
            # them a few at a time, run 32's probe: 3-9 us at M = 1024).
            # With IN_FLIGHT every part is added after the chunks: a load defining the accumulator's registers ahead
            # of the wgmmas makes ptxas serialize them (C7515).
            split_head = (c_lo == 0) & (c_hi < n_chunks)
            if IN_FLIGHT:
                add_parts = split_head
                # As ``_mma_partition``'s: two chunks a trip, each one's wgmmas in flight under the next one's
                # dequantization; all retired, and the last chunk's stage released, before the tile's store or part.
                i0 = i
                for _j in range((c_hi - c_lo) // 2):
                    acc = _mma_step(x_smem, w_smem, s_smem, ready, empty, acc, i, i0, BN, ROW0, RB, STAGES, True,
                                    WORDS)
                    acc = _mma_step(x_smem, w_smem, s_smem, ready, empty, acc, i + 1, i0, BN, ROW0, RB, STAGES, True,
                                    WORDS)
                    i += 2
                if (c_hi - c_lo) % 2 == 1:
                    acc = _mma_step(x_smem, w_smem, s_smem, ready, empty, acc, i, i0, BN, ROW0, RB, STAGES, True,
                                    WORDS)
                    i += 1
                acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
                mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES))
            else:
                add_parts = split_head & (iters < n_chunks)
                if split_head & (iters >= n_chunks):
                    acc = _sk_seed_part(part_ptr, cnt_ptr, acc, t, CONSUMERS, ME)
                for _c in range(c_lo, c_hi):
                    acc = _mma_step(x_smem, w_smem, s_smem, ready, empty, acc, i, 0, BN, ROW0, RB, STAGES, False,
                                    WORDS)
                    i += 1
            # (The tile's first row made where each use needs it: kept live from here, ptxas spilled more, run 27.)
            if c_lo == 0:
                if add_parts:
                    acc = _sk_add_parts(part_ptr, cnt_ptr, acc, t, iters, n_chunks, CONSUMERS, ME)
                if ROW_NORM:
                    if BM <= 32:
                        r = r_first
                        if _tile_m0(t % num_m, M, BM, SHIFT_LAST) != m_first:
                            r = _norm_scale(norm_ptr, _tile_m0(t % num_m, M, BM, SHIFT_LAST), 0, M, norm_tiles,
                                            norm_k, eps, NORM_NT, BM, gl.SliceLayout(0, mma), XB)
                    else:
                        r = _norm_scale(norm_ptr, _tile_m0(t % num_m, M, BM, SHIFT_LAST), 0, M, norm_tiles, norm_k,
                                        eps, NORM_NT, BM, gl.SliceLayout(0, mma), XB)
                    acc = acc * gl.expand_dims(r, 0)
                m0 = _tile_m0(t % num_m, M, BM, SHIFT_LAST)
                if TMA_STORE != 0 and _rows_own(m0, M, BM, XB):
                    if TMA_STORE == 2:
                        _sk_ring_store_tile(y_desc, x_smem, empty, stored, gs_ptr, acc, i - 1, m0,
                                            (t // num_m) * BN + ROW0, ME, STAGES)
                    else:
                        _sk_tma_store_tile(y_desc, y_smem, gs_ptr, acc, m0, (t // num_m) * BN + ROW0, ROW0)
                else:
                    _sk_store_tile(y_ptr, gs_ptr, acc, t, num_m, M, N, stride_ym, BM, BN, ROW0, RB, SHIFT_LAST, XB)
            else:
                _sk_put_part(part_ptr, cnt_ptr, acc, t, t0, CONSUMERS, ME)
        if TMA_STORE == 1:
            tma.store_wait(0)  # the last tile's copies read the boxes before the CTA exits

    @gluon.jit
    def _rows_own(m0, M, BM: gl.constexpr, XB: gl.constexpr):
        """Whether a whole tile starting at row m0 stores by TMA (``TMA_STORE``): its rows are X's own, not those of
        a shifted last tile nor remapped by XB (rows past M the descriptor drops)."""
        ok = m0 % BM == 0
        if XB != 0:
            ok = ok & (m0 + BM <= M)
        return ok

    @gluon.jit
    def _sk_ring_store_tile(y_desc, x_smem, empty, stored, gs_ptr, acc, last, m0, n0, ME: gl.constexpr,
                            STAGES: gl.constexpr):
        """A whole tile's 64 rows n0 .. of Y^T (``acc``, consumer ME of two) into Y by TMA through X's box 2 s + ME of
        stage s, where its last chunk (``last``) lay: once both consumers released that stage (its ``empty`` phase
        completed: neither reads its X any more) this consumer writes its half there and copies it out; after the
        copy has read it, it arrives on ``stored`` (both arrivals let the loader refill the stage). The ring keeps
        the next tile's chunks in its other stages meanwhile; no shared memory beyond the ring."""
        s = last % STAGES
        out = (acc * (16384.0 / gl.load(gs_ptr))).to(gl.bfloat16)  # the tiles carry 2**-14, no 1 / global_scale
        mbarrier.wait(empty.index(s), (last // STAGES) & 1)
        _copy_tile_out(y_desc, out, x_smem, 2 * s + ME, m0, n0)
        tma.store_wait(0)
        gl.thread_barrier()  # the issuing thread's wait seen before the warpgroup's arrival
        mbarrier.arrive(stored.index(s))

    @gluon.jit
    def _sk_tma_store_tile(y_desc, y_smem, gs_ptr, acc, m0, n0, ROW0: gl.constexpr):
        """A whole tile's rows n0 .. of Y^T (``acc``) into Y by TMA from this consumer's boxes of ``y_smem`` (boxes
        ROW0 // 64 ..: a region of its own, so the consumers need not meet): it waits only for its previous tile's
        copies to have read the boxes, so a tile's copies run under the next tile's chunks."""
        out = (acc * (16384.0 / gl.load(gs_ptr))).to(gl.bfloat16)  # the tiles carry 2**-14, no 1 / global_scale
        tma.store_wait(0)
        gl.thread_barrier()  # the issuing thread's wait seen by the warpgroup before the boxes are written
        _copy_tile_out(y_desc, out, y_smem, ROW0 // 64, m0, n0)

    @gluon.jit
    def _sk_store_tile(y_ptr, gs_ptr, acc, t, num_m, M, N, stride_ym, BM: gl.constexpr, BN: gl.constexpr,
                       ROW0: gl.constexpr, RB: gl.constexpr, SHIFT_LAST: gl.constexpr = False, XB: gl.constexpr = 0):
        """Tile t's rows ROW0 .. ROW0 + RB of Y^T (``acc``) into Y as bf16. Called at each store, so that the
        pointers are made where they are used (made once for two stores they are held with the accumulator:
        spills)."""
        mma: gl.constexpr = acc.type.layout
        offs_n = (t // num_m) * BN + ROW0 + gl.arange(0, RB, layout=gl.SliceLayout(1, mma))
        m0 = _tile_m0(t % num_m, M, BM, SHIFT_LAST)
        offs_m = _rows_held(m0, gl.arange(0, BM, layout=gl.SliceLayout(0, mma)), M, XB)
        ptrs = y_ptr + offs_m[None, :].to(gl.int64) * stride_ym + offs_n[:, None]
        mask = _own_rows(offs_m, m0, M, BM, SHIFT_LAST)[None, :] & (offs_n < N)[:, None]
        # The dequantized tiles carry 2**-14 and no 1 / global_scale.
        gl.store(ptrs, (acc * (16384.0 / gl.load(gs_ptr))).to(gl.bfloat16), mask=mask)

    @gluon.jit
    def _sk_part_offsets(acc, slot):
        """Offsets of part ``slot``'s values (``acc``'s layout, [RB output columns, BM rows]) in the parts' buffer, in
        the order of wgmma's accumulator registers: value (r, c) of a warp's pair of registers p (c // 8 and r % 16
        // 8) at lane (r % 8, c % 8 // 2), so that one 8-byte access of a warp covers 256 contiguous bytes (two
        lines; rows of [BM] floats took eight, run 32: the reads of a part cost 3-9 us at M = 1024). Any
        bijection would do (the same offsets store and load a part); this one follows ``_mma_layout``."""
        lay: gl.constexpr = acc.type.layout
        RB: gl.constexpr = acc.type.shape[0]
        BM: gl.constexpr = acc.type.shape[1]
        r = gl.arange(0, RB, layout=gl.SliceLayout(1, lay))
        c = gl.arange(0, BM, layout=gl.SliceLayout(0, lay))
        row_part = (r % 16 // 8) * (RB * 4) + (r // 16) * 64 + (r % 8) * 8
        col_part = (c // 8) * (RB * 8) + c % 8
        return slot * (RB * BM) + row_part[:, None] + col_part[None, :]

    @gluon.jit
    def _sk_put_part(part_ptr, cnt_ptr, acc, t, t0, CONSUMERS: gl.constexpr, ME: gl.constexpr):
        """Consumer ME's part of tile t, which this CTA's run holds without the tile's first chunk (so t is the run's
        first tile, t0), as fp32 into the CTA's slot; then one count on the tile's counter (one per tile and
        consumer) for the CTA that holds the first chunk (``_sk_add_parts``)."""
        # The slot is g (t - t0 is 0), written with t so that the offsets are a value of this tile: a tile-invariant
        # offset tensor would be hoisted out of the callers' loops and held in registers across them (spills).
        slot = (gl.program_id(0) + t - t0) * CONSUMERS + ME
        gl.store(part_ptr + _sk_part_offsets(acc, slot), acc)
        # The barrier orders the warpgroup's stores before the release.
        gl.thread_barrier()
        gl.atomic_add(cnt_ptr + t * CONSUMERS + ME, 1, sem="release", scope="gpu")

    @gluon.jit
    def _sk_wait_count(cnt, count):
        """Waits until the tile counter ``cnt`` reaches ``count`` (its acquire lets this warpgroup read the parts
        counted), then resets it (counters stay zero between launches; nothing else reads it in this launch)."""
        seen = gl.atomic_add(cnt, 0, sem="acquire", scope="gpu")
        while seen < count:
            seen = gl.atomic_add(cnt, 0, sem="acquire", scope="gpu")
        gl.atomic_xchg(cnt, 0, sem="relaxed", scope="gpu")

    @gluon.jit
    def _sk_seed_part(part_ptr, cnt_ptr, like, t, CONSUMERS: gl.constexpr, ME: gl.constexpr):
        """The accumulator of tile t seeded with the next CTA's part, the tile's only other one (runs at least a tile
        long, ``_sk_add_parts``), before this CTA's chunks of it: waits for its count (stored at the start of the
        next run, which waits for nothing before) and loads it in ``like``'s layout."""
        _sk_wait_count(cnt_ptr + t * CONSUMERS + ME, 1)
        return gl.load(part_ptr + _sk_part_offsets(like, (gl.program_id(0) + 1) * CONSUMERS + ME),
                       cache_modifier=".cg")

    @gluon.jit
    def _sk_add_parts(part_ptr, cnt_ptr, acc, t, iters, n_steps, CONSUMERS: gl.constexpr, ME: gl.constexpr):
        """The later CTAs' parts of tile t (this CTA's run holds the tile's first chunks and ends inside it) added to
        ``acc``: waits for the count of the CTAs that hold the rest (``_sk_put_part``: each counts once its part is
        stored, which is at the start of its run, so no CTA waits for one that waits) and adds their parts in CTA
        order (after the tile's chunks: ``acc`` this CTA's part, so the sum runs in CTA order); the
        tile's sum then stays in registers for the store of a whole tile. Runs at least a tile long seed the
        accumulator instead (``_sk_seed_part``)."""
        g = gl.program_id(0)
        others = ((t + 1) * n_steps - 1) // iters - g
        _sk_wait_count(cnt_ptr + t * CONSUMERS + ME, others)
        for h in range(g + 1, g + 1 + others):
            acc += gl.load(part_ptr + _sk_part_offsets(acc, h * CONSUMERS + ME), cache_modifier=".cg")
        return acc

    @gluon.jit
    def _sk_run(iters, sk_total, n_steps):
        """This CTA's run [it_begin, it_end) of the tile-major (tile, step) sequence: the first cdiv(sk_total, iters)
        CTAs take equal runs of its first ``sk_total`` steps (stream-K), each later CTA one whole tile after them
        (``dp_waves``: whole waves of tiles one per CTA, as without stream-K; pure stream-K has sk_total = all)."""
        g = gl.program_id(0)
        sk_ctas = gl.cdiv(sk_total, iters)
        if g < sk_ctas:
            it_begin = g * iters
            it_end = gl.minimum(it_begin + iters, sk_total)
        else:
            it_begin = sk_total + (g - sk_ctas) * n_steps
            it_end = it_begin + n_steps
        return it_begin, it_end

    @gluon.jit(do_not_specialize=["M", "iters", "sk_total"])
    def _ws_fwd_sk_kernel(x_desc, w_desc, s_desc, xs_desc, y_desc, y_ptr, part_ptr, cnt_ptr, gs_ptr, M, N, stride_ym,
                          n_chunks, iters, sk_total, s_rows_per_chunk, norm_ptr, norm_tiles, norm_k, eps,
                          BM: gl.constexpr,
                          BN: gl.constexpr, CONSUMERS: gl.constexpr, STAGES: gl.constexpr,
                          CONSUMER_REGS: gl.constexpr, WORDS: gl.constexpr, ROW_NORM: gl.constexpr = False,
                          NORM_NT: gl.constexpr = 1, SHIFT_LAST: gl.constexpr = False, XB: gl.constexpr = 0,
                          TMA_STORE: gl.constexpr = 0, IN_FLIGHT: gl.constexpr = False, PDL: gl.constexpr = False):
        """The forward as stream-K: CTA g takes steps g * iters .. of the first ``sk_total`` (tile, chunk) steps (so
        every SM gets the same work whatever the tile count: no last wave of idle SMs), and stays resident across
        tiles; CTAs after those take one whole tile each (``_sk_run``). ``TMA_STORE`` (``sk_tma_store``): whole tiles
        leave by TMA, 1: from boxes of their own (``y_smem``, the tile's size: the ring keeps loading the next tile's
        chunks meanwhile, so X's stages are not free as in ``_tma_store_tile``), 2: through their last chunk's stage,
        which the loader refills after the copies (``stored``, where the ring leaves no room for the tile).
        ``IN_FLIGHT`` (one consumer): a chunk's wgmmas in flight under the next chunk's dequantization within a tile
        (``WsConfig.in_flight``)."""
        it_begin, it_end = _sk_run(iters, sk_total, n_chunks)
        num_m = gl.cdiv(M, BM)
        x_smem, w_smem, s_smem, ready, empty = _fwd_stages(x_desc, w_desc, s_desc, BM, BN, STAGES, CONSUMERS)
        y_smem = x_smem  # not used unless TMA_STORE == 1
        stored = empty  # not used unless TMA_STORE == 2
        if TMA_STORE == 1:
            y_smem = gl.allocate_shared_memory(gl.bfloat16, [BN // 64, BM, 64], y_desc.layout)
        if TMA_STORE == 2:
            gl.static_assert(CONSUMERS == 2 and BN == 128, "the ring's stage holds two consumers' 64-row halves")
            stored = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
            for s in gl.static_range(STAGES):
                mbarrier.init(stored.index(s), count=CONSUMERS)
        RB: gl.constexpr = BN // CONSUMERS
        if CONSUMERS == 1:
            gl.warp_specialize([
                (_sk_mma_partition, (x_smem, w_smem, s_smem, ready, empty, y_ptr, part_ptr, cnt_ptr, gs_ptr, M, N,
                                     stride_ym, it_begin, it_end, iters, n_chunks, num_m, norm_ptr, norm_tiles,
                                     norm_k, eps, y_desc, y_smem, stored, BM, BN, 0, RB, STAGES, CONSUMERS, WORDS,
                                     ROW_NORM, NORM_NT, SHIFT_LAST, XB, TMA_STORE, IN_FLIGHT, PDL)),
                (_sk_load_worker, (x_desc, w_desc, s_desc, x_smem, w_smem, s_smem, ready, empty, it_begin, it_end,
                                   n_chunks, num_m, M, s_rows_per_chunk, BM, BN, STAGES, SHIFT_LAST, xs_desc, XB,
                                   stored, TMA_STORE, PDL)),
            ], [1], [40])
        else:
            gl.static_assert(CONSUMERS == 2, "one or two consumer warpgroups")
            gl.static_assert(not IN_FLIGHT, "chunks in flight with one consumer only (registers)")
            gl.warp_specialize([
                (_sk_mma_partition, (x_smem, w_smem, s_smem, ready, empty, y_ptr, part_ptr, cnt_ptr, gs_ptr, M, N,
                                     stride_ym, it_begin, it_end, iters, n_chunks, num_m, norm_ptr, norm_tiles,
                                     norm_k, eps, y_desc, y_smem, stored, BM, BN, 0, RB, STAGES, CONSUMERS, WORDS,
                                     ROW_NORM, NORM_NT, SHIFT_LAST, XB, TMA_STORE, False, PDL)),
                (_sk_mma_partition, (x_smem, w_smem, s_smem, ready, empty, y_ptr, part_ptr, cnt_ptr, gs_ptr, M, N,
                                     stride_ym, it_begin, it_end, iters, n_chunks, num_m, norm_ptr, norm_tiles,
                                     norm_k, eps, y_desc, y_smem, stored, BM, BN, RB, RB, STAGES, CONSUMERS, WORDS,
                                     ROW_NORM, NORM_NT, SHIFT_LAST, XB, TMA_STORE, False, PDL)),
                (_sk_load_worker, (x_desc, w_desc, s_desc, x_smem, w_smem, s_smem, ready, empty, it_begin, it_end,
                                   n_chunks, num_m, M, s_rows_per_chunk, BM, BN, STAGES, SHIFT_LAST, xs_desc, XB,
                                   stored, TMA_STORE, PDL)),
            ], [4, 1], [CONSUMER_REGS, 40])

    # ------------------------------------------------------------------------------------------ input gradient
    @gluon.jit
    def _bwd_load_worker(dy_desc, w_desc, s_desc, dy_smem, w_smem, s_raw, ready, empty, s_ready, off_m, c, n_begin,
                         n_steps, s_rows_per_chunk, STAGES: gl.constexpr, dys_desc, M, BM: gl.constexpr,
                         XB: gl.constexpr):
        """The producer warp of the input gradient: per step of 64 rows of W, dY's [BM, 64] box and the chunk's code
        bytes of those rows [64, 64] (completing ``ready``), and their scale bytes [64, 8] (``s_ready``)."""
        for i in range(n_steps):
            _bwd_copy_step(dy_desc, w_desc, s_desc, dy_smem, w_smem, s_raw, ready, empty, s_ready, i, off_m,
                           n_begin + i * 64, c * 64, c * s_rows_per_chunk + (n_begin + i * 64) // 32, STAGES,
                           dys_desc, M, BM, XB)

    @gluon.jit
    def _bwd_copy_step(dy_desc, w_desc, s_desc, dy_smem, w_smem, s_raw, ready, empty, s_ready, i, off_m, n0, col,
                       s_row, STAGES: gl.constexpr, dys_desc, M, BM: gl.constexpr, XB: gl.constexpr):
        """The copies of step i (stage i % STAGES) once its consumers have released the stage."""
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1, pred=i >= STAGES)
        bar = ready.index(s)
        mbarrier.expect(bar, dy_desc.block_type.nbytes + w_desc.block_type.nbytes)
        _x_box(dy_desc, dys_desc, off_m, n0, M, bar, dy_smem.index(s), BM, XB)
        tma.async_copy_global_to_shared(w_desc, [n0, col], bar, w_smem.index(s))
        mbarrier.expect(s_ready.index(s), s_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(s_desc, [s_row, 0], s_ready.index(s), s_raw.index(s))

    @gluon.jit
    def _bwd_scale_worker(s_raw, s_t, ready, s_ready, n_iters, STAGES: gl.constexpr):
        """The scale warp of the input gradient: each stage's scale bytes [64 rows of W, 8 groups] rearranged so that
        a consumer thread's 16 (one group, the 16 rows of W its operand holds: 2q + {0, 1, 8, 9} + {0, 16, 32, 48}
        for lane q of 4) are one 32-byte run, and converted to the bf16 ``scale * 2**112`` the dequantization
        multiplies by (``nvfp4_gemm._SCALES_PTX``), once per stage rather than by each consumer thread that holds them:
        ``s_t`` = [group, q, 16 bf16], element b0 + 2 b3 + 4 b4 + 8 b5 holding row 2q + b0 + 8 b3 + 16 b4 + 32 b5.
        Each thread reads 4 rows x 4 groups as 4 words, transposes them (8 prmt), converts them (4 prmt, 4 mad) and
        writes 8 words; then the warp's arrival completes the stage's ``ready`` with the copies'."""
        plain: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0])
        plain3: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[2, 1, 0])
        # [64 rows, 2 words of 4 groups]: registers rows +1, +8; lanes rows +2, +4, +16, +32, then the word.
        rows: gl.constexpr = gl.DistributedLinearLayout(reg_bases=[[1, 0], [8, 0]],
                                                        lane_bases=[[2, 0], [4, 0], [16, 0], [32, 0], [0, 1]],
                                                        warp_bases=[], block_bases=[], shape=[64, 2])
        for i in range(n_iters):
            s = i % STAGES
            mbarrier.wait(s_ready.index(s), (i // STAGES) & 1)
            v = s_raw.index(s)._reinterpret(gl.uint32, [64, 2], plain).load(rows)
            v = gl.permute(gl.reshape(v, [2, 2, 2, 4, 2, 2]), (0, 1, 3, 5, 2, 4))  # b5 b4 q word | b3 b0
            v0, v1 = gl.split(v)  # b0
            r00, r10 = gl.split(v0)  # b3
            r01, r11 = gl.split(v1)
            o0, o1, o2, o3 = gl.inline_asm_elementwise(
                _TRANSPOSE_ASM, "=r,=r,=r,=r,r,r,r,r", [r00, r01, r10, r11],
                dtype=(gl.uint32, gl.uint32, gl.uint32, gl.uint32), is_pure=True, pack=1)
            t = gl.join(gl.join(o0, o1), gl.join(o2, o3))  # [b5, b4, q, word, i0, i1]: group 4 word + 2 i1 + i0
            t = gl.reshape(gl.permute(t, (3, 5, 4, 2, 0, 1)), [8, 4, 4])  # [group, q, b4 + 2 b5]
            lo, hi = gl.inline_asm_elementwise(_SCALES_ASM, "=r,=r,r", [t], dtype=(gl.uint32, gl.uint32),
                                               is_pure=True, pack=1)  # bytes 0-1 / 2-3 of each word as bf16 pairs
            t = gl.reshape(gl.join(lo, hi), [8, 4, 8])
            s_t.index(s)._reinterpret(gl.uint32, [8, 4, 8], plain3).store(t)
            gl.thread_barrier()  # every lane's words written before the (one-thread) arrival
            mbarrier.arrive(ready.index(s))

    @gluon.constexpr_function
    def _codes_layout_bwd(ROWS=64):
        """The code bytes of a step (64 rows of W by the chunk's 64 byte columns) seen as 16-bit pairs [64 rows, 4
        scale groups, 8 pairs of columns], as ``ldmatrix.trans`` loads them (two per thread and step): a thread's
        register holds one pair of columns (2j, 2j + 1) of rows n and n + 1, the rows as in wgmma's A operand (n = 2q,
        + 8, + 16, + 32 for lane q of 4; 8 registers), the column pair j by lane (8), the group by warp."""
        reg = [[1, 0, 0], [8, 0, 0], [16, 0, 0]] + ([[32, 0, 0]] if ROWS == 64 else [])
        return gl.DistributedLinearLayout(reg_bases=reg,
                                          lane_bases=[[2, 0, 0], [4, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 4]],
                                          warp_bases=[[0, 1, 0], [0, 2, 0]], block_bases=[], shape=[ROWS, 4, 8])

    @gluon.jit
    def _bwd_codes(w_smem, s, R0: gl.constexpr = 0, ROWS: gl.constexpr = 64):
        """Stage s's code bytes [64 rows of W, 64 columns of the chunk] in ``_codes_layout_bwd`` (``ldmatrix.trans``
        on the bytes seen as 16-bit pairs; the 64-byte swizzle keeps each pair's 16-byte row whole)."""
        l2: gl.constexpr = gl.DistributedLinearLayout(
            reg_bases=[[1, 0], [8, 0], [16, 0]] + ([[32, 0]] if ROWS == 64 else []),
            lane_bases=[[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]],
            warp_bases=[[0, 8], [0, 16]], block_bases=[], shape=[ROWS, 32])
        pairs: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16, rank=2)
        codes = w_smem.index(s)._reinterpret(gl.uint16, [64, 32], pairs).slice(R0, ROWS, dim=0).load(l2)
        return gl.convert_layout(gl.reshape(codes, [ROWS, 4, 8]), _codes_layout_bwd(ROWS), assert_trivial=True)

    @gluon.jit
    def _bwd_scales(s_t, s, half: gl.constexpr, like, R0: gl.constexpr = 0, ROWS: gl.constexpr = 64):
        """Stage s's scales of the chunk's half ``half`` (groups 4 * half ..) as bf16 pairs of ``scale * 2**112``
        (rows n, n + 1), broadcast to ``like`` (the codes): 32 bytes per thread from the scale warp's arrangement,
        converted there (``_bwd_scale_worker``)."""
        # [4 groups, 4 q, 16 bytes]: registers the 16 bytes, lanes q (the rest of the lanes share them), warps group.
        NB: gl.constexpr = ROWS // 4  # the thread's bytes: rows 2q + b0 + 8 b3 + 16 b4 (+ 32 b5)
        l_s: gl.constexpr = gl.DistributedLinearLayout(
            reg_bases=[[0, 0, 1], [0, 0, 2], [0, 0, 4]] + ([[0, 0, 8]] if ROWS == 64 else []),
            lane_bases=[[0, 1, 0], [0, 2, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
            warp_bases=[[1, 0, 0], [2, 0, 0]], block_bases=[], shape=[4, 4, NB])
        u = s_t.index(s).slice(4 * half, 4, dim=0).slice(R0 // 4, NB, dim=2).load(l_s)
        if ROWS == 64:
            u = gl.reshape(u, [4, 2, 2, 2, 2, 2, 2])  # group, q = (b2, b1), byte = (b5, b4, b3, b0)
            u = gl.reshape(gl.permute(u, (3, 4, 5, 1, 2, 6, 0)), [64, 4])  # row 2q + b0 + 8 b3 + 16 b4 + 32 b5
        else:
            u = gl.reshape(u, [4, 2, 2, 2, 2, 2])  # group, q = (b2, b1), byte = (b4, b3, b0)
            u = gl.reshape(gl.permute(u, (3, 4, 1, 2, 5, 0)), [32, 4])
        p = gl.convert_layout(u, gl.SliceLayout(2, _codes_layout_bwd(ROWS)), assert_trivial=True)
        return gl.broadcast(gl.expand_dims(p, 2), like)[0]

    @gluon.jit
    def _bwd_operand(w_even, w_odd, a_layout: gl.constexpr):
        """wgmma's A operand [64, 64] from the dequantized columns 2j (``w_even``) and 2j + 1 of a half: accumulator
        row 16g + 8b + j takes column 16g + 2j + b (``_bwd_k_order`` restores the order), which is where a thread's two columns sit in
        the operand's layout (rows j and j + 8), so no data moves."""
        w = gl.join(w_even, w_odd)  # [rows of W, 4 groups, 8 column pairs, 2]
        w = gl.reshape(gl.permute(w, (1, 3, 2, 0)), [64, w_even.shape[0]])
        return gl.convert_layout(w, a_layout, assert_trivial=True)

    @gluon.constexpr_function
    def _bwd_out_layout(BM):
        """The input gradient's accumulator [64, BM] (wgmma's: registers column + 1, row + 8, column + 8, ...; lanes
        column + 2, + 4, row + 1, + 2, + 4; warps row + 16, + 32) with its rows put back in the chunk's column order
        (``_bwd_operand``: row 16g + 8b + j holds column 16g + 2j + b) and the register that held row + 8, now column
        + 1, first: a thread's two adjacent columns of dX go out in one store."""
        reg = [[1, 0], [0, 1]] + [[0, 8 << i] for i in range((BM // 8).bit_length() - 1)]
        return gl.DistributedLinearLayout(reg_bases=reg, lane_bases=[[0, 2], [0, 4], [2, 0], [4, 0], [8, 0]],
                                          warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[64, BM])

    @gluon.jit
    def _bwd_k_order(acc):
        """``acc`` [64, BM] in the chunk's column order (``_bwd_out_layout``): registers renamed, no data moves."""
        BM: gl.constexpr = acc.shape[1]
        v = gl.reshape(gl.permute(gl.reshape(acc, [4, 2, 8, BM]), (0, 2, 1, 3)), [64, BM])
        return gl.convert_layout(v, _bwd_out_layout(BM), assert_trivial=True)

    @gluon.jit
    def _bwd_step(dy_smem, w_smem, s_smem, ready, empty, acc_lo, acc_hi, i, STAGES: gl.constexpr,
                  IN_FLIGHT: gl.constexpr = False, ROWS: gl.constexpr = False):
        """Step i of the input gradient: wait for its stage, dequantize its 64 rows of W (pairs along N) into wgmma's
        register operand, add W^T @ dY^T to both accumulators (the code bytes' low and high nibbles), wait for the
        wgmmas and release the stage; with ``IN_FLIGHT`` wait only for the previous step's wgmmas and release the
        previous step's stage (this step's stay in flight under the next step's dequantization). ``ROWS``: the codes
        are the "rows" layout's, decoded as words (12 instructions per 8 weights instead of 18)."""
        a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_lo.type.layout, k_width=2)
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        codes = _bwd_codes(w_smem, s)
        lo_even, lo_odd, hi_even, hi_odd = gl.inline_asm_elementwise(
            _DQ_RW_BOTH_ASM if ROWS else _DQ_ROWS_BOTH_ASM, "=r,=r,=r,=r,r,r,r",
            [codes, _bwd_scales(s_smem, s, 0, codes), _bwd_scales(s_smem, s, 1, codes)],
            dtype=(gl.bfloat16, gl.bfloat16, gl.bfloat16, gl.bfloat16), is_pure=True, pack=2)
        dy_t = dy_smem.index(s).permute((1, 0))  # [64 rows of W, BM]
        acc_lo = warpgroup_mma(_bwd_operand(lo_even, lo_odd, a_layout), dy_t, acc_lo, is_async=True)
        acc_hi = warpgroup_mma(_bwd_operand(hi_even, hi_odd, a_layout), dy_t, acc_hi, is_async=True)
        if IN_FLIGHT:
            acc_lo, acc_hi = warpgroup_mma_wait(num_outstanding=2, deps=(acc_lo, acc_hi))
            mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > 0)
        else:
            acc_lo, acc_hi = warpgroup_mma_wait(num_outstanding=0, deps=(acc_lo, acc_hi))
            mbarrier.arrive(empty.index(s))
        return acc_lo, acc_hi

    @gluon.jit
    def _bwd_mma_partition(dy_smem, w_smem, s_smem, ready, empty, dx_ptr, out_ptr, cnt_ptr, gs_ptr, M, K, stride_xm,
                           stride_xsplit, pid_s, off_m, c, n_steps, BM: gl.constexpr, STAGES: gl.constexpr,
                           OUT_F32: gl.constexpr, FUSED: gl.constexpr, IN_FLIGHT: gl.constexpr = False,
                           ROWS: gl.constexpr = False, SHIFT_LAST: gl.constexpr = False, XB: gl.constexpr = 0):
        """The consumer warpgroup of the input gradient: dX^T for the chunk's 128 columns of K (two accumulators,
        the code bytes' low and high nibbles) = W^T [128, N] @ dY^T, W^T dequantized into wgmma's register operand
        with pairs along N, dY^T from shared memory. Split-N partials go to split ``pid_s`` of ``dx_ptr``; with
        ``FUSED`` the last CTA of the tile sums them into ``out_ptr`` (bf16), as the forward kernel does."""
        mma: gl.constexpr = _mma_layout(BM)
        acc_lo = gl.zeros([64, BM], gl.float32, mma)
        acc_hi = gl.zeros([64, BM], gl.float32, mma)
        if IN_FLIGHT:
            # Two steps per trip, so that the operands of consecutive steps are distinct registers (one set reused
            # every step makes ptxas serialize the wgmmas), as the forward's ``_mma_partition``.
            for j in range(n_steps // 2):
                acc_lo, acc_hi = _bwd_step(dy_smem, w_smem, s_smem, ready, empty, acc_lo, acc_hi, 2 * j, STAGES, True,
                                           ROWS)
                acc_lo, acc_hi = _bwd_step(dy_smem, w_smem, s_smem, ready, empty, acc_lo, acc_hi, 2 * j + 1, STAGES,
                                           True, ROWS)
            if n_steps % 2 == 1:
                acc_lo, acc_hi = _bwd_step(dy_smem, w_smem, s_smem, ready, empty, acc_lo, acc_hi, n_steps - 1,
                                           STAGES, True, ROWS)
            acc_lo, acc_hi = warpgroup_mma_wait(num_outstanding=0, deps=(acc_lo, acc_hi))  # (the loader is done)
        else:
            for i in range(n_steps):
                acc_lo, acc_hi = _bwd_step(dy_smem, w_smem, s_smem, ready, empty, acc_lo, acc_hi, i, STAGES,
                                           ROWS=ROWS)

        out: gl.constexpr = _bwd_out_layout(BM)
        inv = 16384.0 / gl.load(gs_ptr)
        offs_k = c * 128 + gl.arange(0, 64, layout=gl.SliceLayout(1, out))
        offs_m = _rows_held(off_m, gl.arange(0, BM, layout=gl.SliceLayout(0, out)), M, XB)
        base = dx_ptr + pid_s.to(gl.int64) * stride_xsplit + offs_m[None, :].to(gl.int64) * stride_xm
        mask_m = _own_rows(offs_m, off_m, M, BM, SHIFT_LAST)[None, :]
        for half in gl.static_range(2):
            acc = _bwd_k_order(acc_lo if half == 0 else acc_hi)
            kk = offs_k + 64 * half
            mask = mask_m & (kk < K)[:, None]
            if OUT_F32:
                gl.store(base + kk[:, None], acc * inv, mask=mask)
            else:
                gl.store(base + kk[:, None], (acc * inv).to(gl.bfloat16), mask=mask)
        if OUT_F32 and FUSED:
            if _last_split(cnt_ptr, gl.program_id(0)):
                part = dx_ptr + offs_m[None, :].to(gl.int64) * stride_xm
                dest = out_ptr + offs_m[None, :].to(gl.int64) * stride_xm
                for half in gl.static_range(2):
                    kk = offs_k + 64 * half
                    mask = mask_m & (kk < K)[:, None]
                    # The sum written out rather than ``_sum_splits``: through the helper ptxas allocates this
                    # kernel's main loop differently (SASS compared ahead of time), and this one is what was measured.
                    total = gl.zeros([64, BM], gl.float32, out)
                    for sp in range(gl.num_programs(1)):
                        total += gl.load(part + sp * stride_xsplit + kk[:, None], mask=mask, other=0.0,
                                         cache_modifier=".cg")
                    gl.store(dest + kk[:, None], total.to(gl.bfloat16), mask=mask)

    @gluon.jit
    def _bwd_half_step(dy_smem, w_smem, s_smem, ready, empty, acc, i, STAGES: gl.constexpr, HALF: gl.constexpr,
                       ROWS: gl.constexpr = False):
        """``_bwd_step`` for one half of the chunk (HALF 0: the code bytes' low nibbles, 1: the high ones), dequantized
        alone into one accumulator; the stage is released once per consumer."""
        a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc.type.layout, k_width=2)
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        dy_t = dy_smem.index(s).permute((1, 0))  # [64 rows of W, BM]
        for h in gl.static_range(2):  # the step's two 32-row halves: the second dequantized under the first's wgmma
            codes = _bwd_codes(w_smem, s, 32 * h, 32)
            w_even, w_odd = gl.inline_asm_elementwise(
                (_DQ_RW_HIGH_ASM if HALF else _DQ_RW_LOW_ASM) if ROWS else (_DQ_ROWS_HIGH_ASM if HALF else
                                                                           _DQ_ROWS_LOW_ASM), "=r,=r,r,r",
                [codes, _bwd_scales(s_smem, s, HALF, codes, 32 * h, 32)],
                dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=2)
            acc = warpgroup_mma(_bwd_operand(w_even, w_odd, a_layout), dy_t.slice(32 * h, 32, dim=0), acc,
                                is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index(s))
        return acc

    @gluon.jit
    def _bwd_half_partition(dy_smem, w_smem, s_smem, ready, empty, dx_ptr, gs_ptr, M, K, stride_xm, stride_xsplit,
                            pid_s, off_m, c, n_steps, BM: gl.constexpr, STAGES: gl.constexpr, OUT_F32: gl.constexpr,
                            HALF: gl.constexpr, ROWS: gl.constexpr = False, SHIFT_LAST: gl.constexpr = False,
                            XB: gl.constexpr = 0):
        """A consumer of the two-consumer input gradient (``WsBwdConfig.consumers``): the chunk's half HALF (0: the
        code bytes' low nibbles, columns c * 128 .. + 64 of dX; 1: the high ones) over every step, dequantizing only
        that nibble (``nvfp4_gemm._dequant_rows_ptx``) into one accumulator [64, BM]."""
        mma: gl.constexpr = _mma_layout(BM)
        acc = gl.zeros([64, BM], gl.float32, mma)
        for i in range(n_steps):
            acc = _bwd_half_step(dy_smem, w_smem, s_smem, ready, empty, acc, i, STAGES, HALF, ROWS)
        out: gl.constexpr = _bwd_out_layout(BM)
        kk = c * 128 + 64 * HALF + gl.arange(0, 64, layout=gl.SliceLayout(1, out))
        offs_m = _rows_held(off_m, gl.arange(0, BM, layout=gl.SliceLayout(0, out)), M, XB)
        ptrs = (dx_ptr + pid_s.to(gl.int64) * stride_xsplit + offs_m[None, :].to(gl.int64) * stride_xm
                + kk[:, None])
        mask = _own_rows(offs_m, off_m, M, BM, SHIFT_LAST)[None, :] & (kk < K)[:, None]
        val = _bwd_k_order(acc) * (16384.0 / gl.load(gs_ptr))
        if OUT_F32:
            gl.store(ptrs, val, mask=mask)
        else:
            gl.store(ptrs, val.to(gl.bfloat16), mask=mask)

    @gluon.jit(do_not_specialize=["M", "total_steps"])
    def _ws_bwd_kernel(dy_desc, w_desc, s_desc, dys_desc, dx_ptr, out_ptr, cnt_ptr, gs_ptr, M, K, stride_xm,
                       stride_xsplit,
                       total_steps, s_rows_per_chunk, BM: gl.constexpr, STAGES: gl.constexpr,
                       OUT_F32: gl.constexpr, FUSED: gl.constexpr, CONSUMERS: gl.constexpr = 1,
                       CONSUMER_REGS: gl.constexpr = 232, IN_FLIGHT: gl.constexpr = False, ROWS: gl.constexpr = False,
                       SHIFT_LAST: gl.constexpr = False, XB: gl.constexpr = 0):
        pid = gl.program_id(0)
        pid_s = gl.program_id(1)
        num_m = gl.cdiv(M, BM)
        off_m = _tile_m0(pid % num_m, M, BM, SHIFT_LAST)
        c = pid // num_m  # the chunk of K (128 columns of dX) this program writes
        # Split pid_s's run of the steps over N: as even as the count allows (runs differ by one step at most), so a
        # split need not divide the step count (as the forward's split-K).
        s0 = pid_s * total_steps // gl.num_programs(1)
        n_steps = (pid_s + 1) * total_steps // gl.num_programs(1) - s0
        n_begin = s0 * 64
        dy_smem, w_smem, s_raw, s_t, ready, empty, s_ready = _bwd_stages(dy_desc, w_desc, s_desc, BM, STAGES,
                                                                         CONSUMERS)
        if CONSUMERS == 1:
            gl.warp_specialize([
                (_bwd_mma_partition, (dy_smem, w_smem, s_t, ready, empty, dx_ptr, out_ptr, cnt_ptr, gs_ptr, M, K,
                                      stride_xm, stride_xsplit, pid_s, off_m, c, n_steps, BM, STAGES, OUT_F32,
                                      FUSED, IN_FLIGHT, ROWS, SHIFT_LAST, XB)),
                (_bwd_load_worker, (dy_desc, w_desc, s_desc, dy_smem, w_smem, s_raw, ready, empty, s_ready, off_m, c,
                                    n_begin, n_steps, s_rows_per_chunk, STAGES, dys_desc, M, BM, XB)),
                (_bwd_scale_worker, (s_raw, s_t, ready, s_ready, n_steps, STAGES)),
            ], [1, 1], [40, 40])
        else:
            gl.static_assert(CONSUMERS == 2 and not FUSED and not IN_FLIGHT,
                             "two consumers: one per half of the chunk, no fused sum, wgmmas retired per step")
            gl.warp_specialize([
                (_bwd_half_partition, (dy_smem, w_smem, s_t, ready, empty, dx_ptr, gs_ptr, M, K, stride_xm,
                                       stride_xsplit, pid_s, off_m, c, n_steps, BM, STAGES, OUT_F32, 0, ROWS,
                                       SHIFT_LAST, XB)),
                (_bwd_half_partition, (dy_smem, w_smem, s_t, ready, empty, dx_ptr, gs_ptr, M, K, stride_xm,
                                       stride_xsplit, pid_s, off_m, c, n_steps, BM, STAGES, OUT_F32, 1, ROWS,
                                       SHIFT_LAST, XB)),
                (_bwd_load_worker, (dy_desc, w_desc, s_desc, dy_smem, w_smem, s_raw, ready, empty, s_ready, off_m, c,
                                    n_begin, n_steps, s_rows_per_chunk, STAGES, dys_desc, M, BM, XB)),
                (_bwd_scale_worker, (s_raw, s_t, ready, s_ready, n_steps, STAGES)),
            ], [4, 1, 1], [CONSUMER_REGS, 40, 40])


    # ------------------------------------------------------------------------------ stream-K input gradient
    @gluon.jit
    def _sk_bwd_load_worker(dy_desc, w_desc, s_desc, dy_smem, w_smem, s_raw, ready, empty, s_ready, it_begin, it_end,
                            n_steps, num_m, M, s_rows_per_chunk, BM: gl.constexpr, STAGES: gl.constexpr,
                            SHIFT_LAST: gl.constexpr, dys_desc, XB: gl.constexpr):
        """``_bwd_load_worker`` over this CTA's run of (tile, step) pairs: tile t = (M tile t % num_m, chunk t //
        num_m), step = 64 rows of W; one ring of stages throughout."""
        i = 0
        for t in range(it_begin // n_steps, (it_end - 1) // n_steps + 1):
            off_m = _tile_m0(t % num_m, M, BM, SHIFT_LAST)
            c = t // num_m
            for j in range(gl.maximum(it_begin - t * n_steps, 0), gl.minimum(it_end - t * n_steps, n_steps)):
                _bwd_copy_step(dy_desc, w_desc, s_desc, dy_smem, w_smem, s_raw, ready, empty, s_ready, i, off_m,
                               j * 64, c * 64, c * s_rows_per_chunk + j * 2, STAGES, dys_desc, M, BM, XB)
                i += 1

    @gluon.jit
    def _sk_bwd_store_tile(dx_ptr, gs_ptr, acc, t, half: gl.constexpr, num_m, M, K, stride_xm, BM: gl.constexpr,
                           SHIFT_LAST: gl.constexpr = False, XB: gl.constexpr = 0):
        """One half (the code bytes' low or high nibbles: 64 columns of K) of tile t's dX^T into dX as bf16, the
        pointers made at the store (as ``_sk_store_tile``)."""
        out: gl.constexpr = _bwd_out_layout(BM)
        kk = (t // num_m) * 128 + 64 * half + gl.arange(0, 64, layout=gl.SliceLayout(1, out))
        m0 = _tile_m0(t % num_m, M, BM, SHIFT_LAST)
        offs_m = _rows_held(m0, gl.arange(0, BM, layout=gl.SliceLayout(0, out)), M, XB)
        mask = _own_rows(offs_m, m0, M, BM, SHIFT_LAST)[None, :] & (kk < K)[:, None]
        ptrs = dx_ptr + offs_m[None, :].to(gl.int64) * stride_xm + kk[:, None]
        gl.store(ptrs, (_bwd_k_order(acc) * (16384.0 / gl.load(gs_ptr))).to(gl.bfloat16), mask=mask)

    @gluon.jit
    def _sk_bwd_half_partition(dy_smem, w_smem, s_smem, ready, empty, dx_ptr, part_ptr, cnt_ptr, gs_ptr, M, K,
                               stride_xm, it_begin, it_end, iters, n_steps, num_m, BM: gl.constexpr,
                               STAGES: gl.constexpr, HALF: gl.constexpr, ROWS: gl.constexpr = False,
                               SHIFT_LAST: gl.constexpr = False, XB: gl.constexpr = 0):
        """A consumer of the stream-K input gradient: half HALF of each chunk (``_bwd_half_step``) over this CTA's run
        of (tile, step) pairs (``_sk_bwd_load_worker``). A split tile is summed as the forward's (``_sk_mma_partition``,
        as consumer HALF of two): by the CTA whose run holds its first step, seeded with the next CTA's part where runs
        are at least a tile long (``_sk_seed_part``) or adding the later parts after its steps (``_sk_add_parts``),
        then written as a whole tile; a part without the first step goes to ``_sk_put_part``."""
        mma: gl.constexpr = _mma_layout(BM)
        t0 = it_begin // n_steps
        i = 0
        for t in range(t0, (it_end - 1) // n_steps + 1):
            j_lo = gl.maximum(it_begin - t * n_steps, 0)
            j_hi = gl.minimum(it_end - t * n_steps, n_steps)
            acc = gl.zeros([64, BM], gl.float32, mma)
            split_head = (j_lo == 0) & (j_hi < n_steps)
            if split_head & (iters >= n_steps):
                acc = _sk_seed_part(part_ptr, cnt_ptr, acc, t, 2, HALF)
            for _j in range(j_lo, j_hi):
                acc = _bwd_half_step(dy_smem, w_smem, s_smem, ready, empty, acc, i, STAGES, HALF, ROWS)
                i += 1
            if j_lo == 0:
                if split_head & (iters < n_steps):
                    acc = _sk_add_parts(part_ptr, cnt_ptr, acc, t, iters, n_steps, 2, HALF)
                _sk_bwd_store_tile(dx_ptr, gs_ptr, acc, t, HALF, num_m, M, K, stride_xm, BM, SHIFT_LAST, XB)
            else:
                _sk_put_part(part_ptr, cnt_ptr, acc, t, t0, 2, HALF)

    @gluon.jit(do_not_specialize=["M", "iters", "sk_total"])
    def _ws_bwd_sk_kernel(dy_desc, w_desc, s_desc, dys_desc, dx_ptr, part_ptr, cnt_ptr, gs_ptr, M, K, stride_xm,
                          n_steps, iters,
                          sk_total, s_rows_per_chunk, BM: gl.constexpr, STAGES: gl.constexpr,
                          CONSUMER_REGS: gl.constexpr = 232, ROWS: gl.constexpr = False,
                          SHIFT_LAST: gl.constexpr = False, XB: gl.constexpr = 0):
        """The input gradient as stream-K, two consumers (one per half of the chunk): CTA g takes (tile, step) pairs
        g * iters .. of the first ``sk_total``, later CTAs one whole tile each (``_sk_run``). (One consumer with both
        halves was measured slower in run 12 and not kept.)"""
        it_begin, it_end = _sk_run(iters, sk_total, n_steps)
        num_m = gl.cdiv(M, BM)
        dy_smem, w_smem, s_raw, s_t, ready, empty, s_ready = _bwd_stages(dy_desc, w_desc, s_desc, BM, STAGES, 2)
        gl.warp_specialize([
            (_sk_bwd_half_partition, (dy_smem, w_smem, s_t, ready, empty, dx_ptr, part_ptr, cnt_ptr, gs_ptr, M, K,
                                      stride_xm, it_begin, it_end, iters, n_steps, num_m, BM, STAGES, 0, ROWS,
                                      SHIFT_LAST, XB)),
            (_sk_bwd_half_partition, (dy_smem, w_smem, s_t, ready, empty, dx_ptr, part_ptr, cnt_ptr, gs_ptr, M, K,
                                      stride_xm, it_begin, it_end, iters, n_steps, num_m, BM, STAGES, 1, ROWS,
                                      SHIFT_LAST, XB)),
            (_sk_bwd_load_worker, (dy_desc, w_desc, s_desc, dy_smem, w_smem, s_raw, ready, empty, s_ready, it_begin,
                                   it_end, n_steps, num_m, M, s_rows_per_chunk, BM, STAGES, SHIFT_LAST, dys_desc,
                                   XB)),
            (_bwd_scale_worker, (s_raw, s_t, ready, s_ready, it_end - it_begin, STAGES)),
        ], [4, 1, 1], [CONSUMER_REGS, 40, 40])


# Registers per thread requested for the second consumer warpgroup (``setmaxnreg``); with three warpgroups Triton
# caps every thread at 168 anyway (65536 / 384), so this only keeps the two consumers' requests equal.
CONSUMER_REGS = 232


_THREAD = threading.local()


def _ensure_cuda_context(device: torch.device) -> None:
    """Make the device's primary CUDA context current on this thread, once per thread.

    Triton 3.6 builds a TMA descriptor argument (``cuTensorMapEncodeTiled``) before its launcher makes a context
    current, so on a thread that has not touched the driver yet (autograd's backward thread, when the kernel was
    compiled on another thread) the launch fails with "invalid device context". The driver API's own calls, through
    ctypes: no CUDA work is issued (safe during graph capture)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    done = getattr(_THREAD, "devices", None)
    if done is None:
        done = _THREAD.devices = set()
    if index in done:
        return
    cuda = _libcuda()
    ctx = ctypes.c_void_p()
    if cuda.cuCtxGetCurrent(ctypes.byref(ctx)) != 0:
        raise RuntimeError("cuCtxGetCurrent failed")
    if not ctx.value:
        dev = ctypes.c_int()
        if (cuda.cuDeviceGet(ctypes.byref(dev), index) != 0
                or cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) != 0
                or cuda.cuCtxSetCurrent(ctx) != 0):
            raise RuntimeError(f"cannot make the CUDA context of device {index} current on this thread")
    done.add(index)


@functools.cache
def _libcuda() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


@functools.cache  # the layouts are frozen values; building them takes tens of microseconds of host time per call
def shared_layouts(bm: int, bn: int) -> tuple:
    """The TMA boxes' shared-memory layouts: X [BM, 64] bf16 with 128-byte swizzle (wgmma's B operand), the codes
    [BN, 64] bytes with 64-byte swizzle (the operand-layout loads of 8 rows x 8 bytes then hit distinct banks), the
    scales unswizzled [BN / 32, 256] bytes."""
    x_l = gl.NVMMASharedLayout.get_default_for([bm, 64], gl.bfloat16)
    w_l = gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=8, rank=2)
    s_l = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=2)
    return x_l, w_l, s_l


def scale_pitch(w: kern.KernelWeight) -> int:
    """256-byte rows from one chunk's scales to the next chunk's: N / 32 for a weight of its own, more for a weight
    whose rows are a slice of a larger one (``qerl.fusion``: q / k / v sharing the storage of their fused QKV
    weight, whose scale rows are [chunks, N_fused * 8])."""
    if w.scales.stride(1) != 1 or w.scales.stride(0) % 256 or w.scales.data_ptr() % 16:
        raise ValueError("the warp-specialized kernels read the scales as 256-byte rows: scales [chunks, N * 8] "
                         f"need a contiguous last dim, a row stride that is a multiple of 256 bytes and 16-byte "
                         f"alignment (got strides {w.scales.stride()})")
    return w.scales.stride(0) // 256


@functools.cache
def dy_layout(bm: int):
    """The input gradient's dY [BM, 64] bf16 boxes: 128-byte swizzle (wgmma's B operand), as X's in the forward."""
    return gl.NVMMASharedLayout.get_default_for([bm, 64], gl.bfloat16)


def weight_descriptors(w: kern.KernelWeight, rows: int) -> tuple:
    """TMA descriptors of ``w`` for boxes of ``rows`` W rows: the code bytes [rows, 64] of one chunk (at
    [row, chunk * 64]) and their scale bytes, ``w.scales`` [chunks, N * 8] viewed as rows of 256 bytes so that one
    chunk's scales of rows n0 .. n0 + rows are the box of rows / 32 rows at [chunk * P + n0 / 32, 0], P =
    ``scale_pitch(w)`` (N / 32 unless ``w`` is a row slice of a larger weight)."""
    _, w_l, s_l = shared_layouts(64, rows)
    kc = w.k_pad // kern.CHUNK
    w_desc = TensorDescriptor(w.codes, list(w.codes.shape), [w.codes.stride(0), 1], [rows, 64], w_l)
    pitch = scale_pitch(w)
    span = (kc - 1) * pitch + w.n // 32  # 256-byte rows from the first chunk's first to the last chunk's last
    s_rows = w.scales.as_strided((span, 256), (256, 1))
    s_desc = TensorDescriptor(s_rows, [span, 256], [256, 1], [rows // 32, 256], s_l)
    return w_desc, s_desc


# The forward's tiles stored by TMA from shared memory (``_tma_store_tile``) on tiles of at least this many rows
# of X, with ``TMA_STORE_ROWS`` W rows per consumer and no split of K (run 30: measured at M = 128-2048).
TMA_STORE = True
TMA_STORE_MIN_BM = 128
TMA_STORE_ROWS = (64, 128)  # W rows per consumer the store takes


def tma_store_tiles(cfg: WsConfig, split: int, epilogue: bool, y: torch.Tensor) -> bool:
    """Whether ``ws_matmul`` launches ``cfg`` with its tiles stored by TMA (``_tma_store_tile``): the plain
    epilogue (no SiLU x up, residual + RMSNorm or RoPE; the RMSNorm row scale is fine) of an unsplit product on the
    one-tile-per-CTA kernel, ``TMA_STORE_ROWS`` W rows per consumer, at least ``TMA_STORE_MIN_BM`` rows of X per
    tile, into a bf16 ``y`` TMA can address (contiguous last dim, rows and base 16-byte aligned)."""
    return (TMA_STORE and not cfg.stream_k and split == 1 and not epilogue and cfg.bm >= TMA_STORE_MIN_BM
            and cfg.bn // max(cfg.consumers, 1) in TMA_STORE_ROWS and y.dtype == torch.bfloat16 and y.dim() == 2
            and y.stride(1) == 1 and y.stride(0) % 8 == 0 and y.data_ptr() % 16 == 0)


# Shared memory an sm_90 CTA may opt into, and what an SM holds for all its CTAs (each also reserves 1 KB).
SMEM_PER_CTA = 232448
SMEM_PER_SM = 233472


def fwd_ring_bytes(cfg: WsConfig) -> int:
    """Shared-memory bytes of the forward's ring (``_fwd_stages``): per stage two [BM, 64] bf16 boxes of X, [BN, 64]
    code bytes and BN / 32 rows of 256 scale bytes, plus the stages' two mbarriers."""
    return cfg.stages * (2 * cfg.bm * 64 * 2 + cfg.bn * 64 + cfg.bn // 32 * 256 + 16)


def sk_tma_store(cfg: WsConfig, y: torch.Tensor) -> int:
    """How ``_stream_k`` stores ``cfg``'s whole tiles (``_ws_fwd_sk_kernel``'s ``TMA_STORE``): 0 from registers, 1 by
    TMA from boxes of their own ([BN, BM] bf16, where they fit in shared memory next to the ring for
    ``cfg.stream_k`` CTAs per SM), 2 by TMA through the last chunk's stage of the ring (two consumers of 64 W rows,
    where the boxes do not fit: the 256-row configs of 3 stages, whose ring takes 219 KB). On ``tma_store_tiles``'
    rules for rows of X and for Y."""
    if not (TMA_STORE and cfg.stream_k > 0 and tma_store_tiles(cfg._replace(stream_k=0), 1, False, y)):
        return 0
    per_cta = fwd_ring_bytes(cfg) + cfg.bn * cfg.bm * 2 + 1024  # + Triton's alignment padding
    if per_cta <= SMEM_PER_CTA and cfg.stream_k * (per_cta + 1024) <= SMEM_PER_SM:
        return 1
    return 2 if cfg.consumers == 2 and cfg.bn == 128 else 0


def tile_epilogue(cfg: WsConfig, w: kern.KernelWeight) -> bool:
    """Whether ``cfg`` on ``w`` hands each output tile whole to one CTA's epilogue, as ``ws_matmul``'s SiLU x up
    (``glu``) and residual + RMSNorm (``add_norm``) epilogues need (a gate row next to its up row; a tile's every
    column of one row of X): no stream-K, and no split of the chunks or splits summed by the last CTA (``fused``)."""
    return not cfg.stream_k and (min(cfg.split_k, w.k_pad // kern.CHUNK) == 1 or cfg.fused)


def epilogue_config(x2: torch.Tensor, w: kern.KernelWeight, whole: bool = True,
                    reshape: bool = True) -> WsConfig | None:
    """The config ``ws_matmul`` applies its epilogues with for ``x2`` on ``w``: ``pick``'s if it hands each tile
    whole to one CTA where ``whole`` is asked (SiLU x up, residual + RMSNorm; ``tile_epilogue``; for the stream-K
    entries of runs 34-35 the entry before them, ``WHOLE_TILE_WORDS``), or at least sums
    split tiles in the kernel (the RMSNorm row scale alone also runs on stream-K). ``reshape``: else made to (stream-K
    becomes one CTA per tile, splits are summed by the last CTA: cheaper than the epilogue's work in torch after
    the product), otherwise None. None also where ``pick`` has none, or while a CUDA graph is being captured before
    the split tiles' counters exist (a launch before the capture allocates them)."""
    cfg = pick(x2, w.n, w.k, w.k_pad, w.words)
    if cfg is None:
        return None
    if whole and w.words and cfg.stream_k:
        cfg = WHOLE_TILE_WORDS.get(words_key(x2.shape[0], w.n, w.k_pad), cfg)
    split = min(cfg.split_k, w.k_pad // kern.CHUNK)
    if not (tile_epilogue(cfg, w) or (cfg.stream_k and not whole)):
        if not reshape:
            return None
        if cfg.stream_k:
            cfg = cfg._replace(stream_k=0, dp_waves=False)
        if split > 1:
            cfg = cfg._replace(fused=True)
    tiles = -(-x2.shape[0] // cfg.bm) * -(-w.n // cfg.bn) * cfg.consumers
    if (cfg.stream_k or split > 1) and kern._split_counters(x2.device, tiles) is None:
        return None
    return cfg


# Up to this many rows (decode batches, where it was measured) ``nvfp4_matmul`` adds a bias and an adapter's expand
# in the kernel's epilogue, where the table's config hands each tile whole to one CTA (or keeps a measured whole-tile
# entry for a stream-K one, ``WHOLE_TILE_WORDS``). Not where the config would have to change for it: stream-K made
# one CTA a tile took up to 2.7x the time of the product and the expand after it (32B down at M = 8 / 16), splits
# summed by the last CTA instead of a second kernel 1.06-1.23x at M = 64 (benchmarks/RESULTS.md, run 37).
BIAS_LORA_MAX_M = 64
# Up to this many rows a config whose splits a second kernel sums runs with them summed by the last CTA instead, for
# the epilogue (7B / 32B o at M = 16: 0.91 / 0.93 of the time of the product and the expand after it, run 37).
BIAS_LORA_FUSE_SPLIT_MAX_M = 16
# False: ``nvfp4_matmul`` adds the bias and the expand after the product as before (benchmarks compare the two); so
# does ``QERL_WS_LORA_EPILOGUE=0`` in the environment (read at each call: a rollout engine started in its own process
# can be compared with and without it).
BIAS_LORA_EPILOGUE = True


def bias_lora_epilogue_enabled() -> bool:
    """``BIAS_LORA_EPILOGUE`` and the environment's ``QERL_WS_LORA_EPILOGUE`` (default "1") both allow the epilogue."""
    return BIAS_LORA_EPILOGUE and os.environ.get("QERL_WS_LORA_EPILOGUE", "1") != "0"


def bias_lora_config(x2: torch.Tensor, w: kern.KernelWeight, bias: torch.Tensor | None,
                     lora: kern.LoRAEpilogue | None) -> WsConfig | None:
    """The config ``nvfp4_matmul`` runs ``x2`` on ``w`` with when it adds ``bias`` and ``lora`` in the kernel's
    epilogue (``ws_matmul(bias=, lora=)``), or None: neither given, more than ``BIAS_LORA_MAX_M`` rows, no
    warp-specialized config for this M that hands each tile whole to one CTA (``pick``'s, for a stream-K entry the
    whole-tile entry kept for it, ``WHOLE_TILE_WORDS``; up to ``BIAS_LORA_FUSE_SPLIT_MAX_M`` rows with its splits
    summed by the last CTA), an adapter the epilogue cannot take (``lora_epilogue_fits``), a bias that is not a
    contiguous [N] tensor, while a CUDA graph is captured before the split tiles' counters exist, or with the epilogue
    switched off (``bias_lora_epilogue_enabled``); then they are added after the product."""
    if not bias_lora_epilogue_enabled() or (bias is None and lora is None) or x2.shape[0] > BIAS_LORA_MAX_M:
        return None
    m = x2.shape[0]
    cfg = pick(x2, w.n, w.k, w.k_pad, w.words)
    if cfg is not None and w.words and cfg.stream_k:
        cfg = WHOLE_TILE_WORDS.get(words_key(m, w.n, w.k_pad))
    if cfg is None or cfg.stream_k:
        return None
    if not tile_epilogue(cfg, w):
        if m > BIAS_LORA_FUSE_SPLIT_MAX_M:
            return None
        cfg = cfg._replace(fused=True)
    tiles = -(-m // cfg.bm) * -(-w.n // cfg.bn) * cfg.consumers
    if min(cfg.split_k, w.k_pad // kern.CHUNK) > 1 and kern._split_counters(x2.device, tiles) is None:
        return None
    if lora is not None and not lora_epilogue_fits(lora, cfg, m, w.n):
        return None
    if bias is not None and (bias.shape != (w.n,) or not bias.is_contiguous() or not bias.is_floating_point()):
        return None
    return cfg


def norm_slots(cfg: WsConfig, n: int) -> int:
    """Rows of the RMSNorm statistics an ``add_norm`` launch of ``cfg`` writes for N = ``n``: one per tile of
    BN / consumers columns (``_add_norm_store``)."""
    return -(-n // (cfg.bn // max(cfg.consumers, 1)))


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


class RopeEpilogue(NamedTuple):
    """``ws_matmul``'s epilogue for a fused QKV projection in a decode step (one new token per row of X, as
    ``qerl.kernels.decode_attention.rope_and_cache``): the ``bias`` [(H + 2 KV) D] (or None) added, q and k rotated
    at ``positions`` ([M], or [1] for all rows) with the ``cos`` / ``sin`` tables [L, D], k and v written into the
    caches [M, KV, L, D] there; the output is q [M, H * D]. The config's tiles must be one head each (BN /
    consumers = D)."""

    bias: torch.Tensor | None
    cos: torch.Tensor
    sin: torch.Tensor
    positions: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    heads: int


def _pdl_args(cfg: WsConfig, second_kernel_sum: bool = False) -> dict:
    """The launch's PDL constexpr and option (``qerl.kernels.pdl``: the launch's CTAs may start while the launch
    before it finishes, copy their first chunks of W, which no kernel writes, and wait for it before touching anything
    else, ``_grid_dependency``). Run 36 (benchmarks/RESULTS.md): configs whose split partials ``nvfp4_gemm._reduce``
    sums after the kernel (which launches without PDL, so the next product cannot start early anyway) took
    1.01-1.10x the time with it, stream-K with whole waves (``dp_waves``, whose plan counts on its CTAs starting
    together) 1.22-1.25x; with those left out every cell measured 0.80-1.01x of the time without PDL."""
    on = pdl_enabled() and not second_kernel_sum and not cfg.dp_waves
    return {"PDL": on, "launch_pdl": on}


def ws_matmul(x2: torch.Tensor, w: kern.KernelWeight, cfg: WsConfig, out: torch.Tensor | None = None,
              glu: bool = False, row_norm: tuple[torch.Tensor, float] | None = None,
              add_norm: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
              rope: RopeEpilogue | None = None, bias: torch.Tensor | None = None,
              lora: kern.LoRAEpilogue | None = None,
              after: tuple[torch.Tensor | None, kern.LoRAEpilogue | None] | None = None) -> torch.Tensor:
    """``x2 @ W^T`` for a contiguous bf16 ``x2`` [M, K] on the warp-specialized kernel: bf16 [M, N] (``out`` if
    given). Epilogues, as the kernel writes each tile (all but ``row_norm`` with ``tile_epilogue`` configs only):

    - ``bias`` [N] and / or ``lora`` (``nvfp4_gemm.LoRAEpilogue``, where ``lora_epilogue_fits``): the bias and the
      adapter's expand added in fp32 before the tile is rounded (``nvfp4_gemm.add_bias_and_lora_`` adds them after
      the product otherwise); with the plain epilogue only.
    - ``after`` = (bias, lora): the same added after the product, by the kernel that sums the split partials where
      one does (``nvfp4_gemm._reduce``: one launch less), else by ``nvfp4_gemm.add_bias_and_lora_``.

    - ``glu``: W's rows interleave a gate and an up projection (``nvfp4_gemm.interleave_gate_up``) and the kernel
      stores SiLU(gate) * up, bf16 [M, N / 2].
    - ``row_norm`` = (sumsq [T, M] fp32, eps): row m of the product scaled by rsqrt(sum_t sumsq[t, m] / K + eps),
      i.e. ``x2`` is an RMSNorm's input times its weight and these are its statistics
      (``qerl.kernels.fused_norm``), applied before ``glu``.
    - ``add_norm`` = (residual [M, N] bf16, norm weight [N] bf16, u [M, N] bf16, sumsq [norm_slots, M] fp32): the
      output is residual + x2 @ W^T, and the kernel also writes the next RMSNorm's input (output * weight) into u
      and its statistics into sumsq.
    - ``rope`` (``RopeEpilogue``): bias, RoPE and the KV-cache write of a QKV projection; the output is q."""
    kern.require_forward_layout(w)
    m, k = x2.shape
    if not supports(m, w.n, w.k) or k != w.k:
        raise ValueError(f"the warp-specialized kernel needs N % 32 == 0 and K % 8 == 0 (N={w.n}, K={w.k})")
    if (glu or add_norm is not None or rope is not None) and not tile_epilogue(cfg, w):
        name = "SiLU x up" if glu else "residual + RMSNorm" if add_norm is not None else "RoPE + KV-cache"
        raise ValueError(f"the {name} epilogue needs a config without stream-K whose splits (if any) the kernel "
                         f"sums itself (fused), not {cfg}")
    if glu + (add_norm is not None) + (rope is not None) > 1:
        raise ValueError("glu, add_norm and rope are different epilogues: pass one")
    bias_lora = _bias_lora_args(bias, lora, cfg, w, m, x2)
    if (bias is not None or lora is not None) and (glu or add_norm is not None or rope is not None or row_norm is not None):
        raise ValueError("the bias and the adapter's expand take the plain epilogue: not with glu, add_norm, rope "
                         "or row_norm")
    if row_norm is not None and not (tile_epilogue(cfg, w) or cfg.stream_k):
        raise ValueError(f"the RMSNorm row scale needs a config whose splits (if any) the kernel sums itself (fused) "
                         f"or stream-K, not {cfg}")
    rows = cfg.bn // max(cfg.consumers, 1)
    if (cfg.consumers not in (1, 2) or rows * cfg.consumers != cfg.bn or rows not in (64, 128)
            or cfg.bm not in (8, 16, 32, 64, 128, 256) or (cfg.consumers == 2 and cfg.in_flight)
            or cfg.stream_k not in (0, 1, 2, 3, 4) or (cfg.stream_k and cfg.split_k != 1)
            or (cfg.dp_waves and not cfg.stream_k)):
        raise ValueError(f"unsupported config {cfg}: 1 or 2 consumers of 64 or 128 rows each, BM in (8, 16, 32, 64, "
                         "128, 256), in_flight with one consumer only, stream_k 0-4 without split_k, "
                         "dp_waves with stream_k only")
    x2 = x2.contiguous()
    rope_args = _rope_args(rope, cfg, m, w.n, x2)
    if glu and out is None:  # SiLU x up's output is the down projection's X: whole tiles of it (``tma_rows``)
        y = padded_empty(m, w.n // 2, x2)
    else:
        y = kern._out(out, m, w.n // 2 if glu else rope.heads * rope.cos.shape[1] if rope is not None else w.n, x2)
    norm = _norm_args(row_norm, add_norm, cfg, m, w.n, x2)
    kc = w.k_pad // kern.CHUNK
    after_bias, after_lora = after or (None, None)
    if (after_bias is not None or after_lora is not None) and (glu or rope is not None):
        raise ValueError("a bias or an expand after the product needs the plain output, not glu or rope")
    if cfg.stream_k and add_norm is None and _stream_k(x2, w, cfg, y, kc, norm):
        return kern.add_bias_and_lora_(y, after_bias, after_lora)
    split = max(1, min(cfg.split_k, kc))  # runs of the chunks as even as the count allows (_ws_fwd_kernel)
    x_l, _, _ = shared_layouts(cfg.bm, cfg.bn)
    # Not shifted under the residual epilogue, which may write Y in place of the residual it reads, nor RoPE's.
    x_desc, xs_desc, shift, xb = x_boxes(x2, cfg.bm, x_l, add_norm is None and rope is None, cfg.bn)
    w_desc, s_desc = weight_descriptors(w, cfg.bn)
    # (SiLU x up, the residual + RMSNorm and RoPE store their own way; the RMSNorm row scale only scales the tile.)
    tma_store = tma_store_tiles(cfg, split, glu or add_norm is not None or rope is not None, y)
    y_desc = TensorDescriptor(y, [m, w.n], [y.stride(0), 1], [cfg.bm, 64], x_l) if tma_store else x_desc
    grid = (-(-m // cfg.bm) * -(-w.n // cfg.bn), split)
    # Split partials are [split, M, N] (N columns even where the epilogue stores fewer, as ``glu`` does).
    target, stride_split, counters = kern._split_target(y, split, grid[0] * cfg.consumers, fused=cfg.fused,
                                                        cols=w.n)
    epilogue = (glu or row_norm is not None or add_norm is not None or rope is not None or bias is not None
                or lora is not None)
    if split > 1 and counters is None and epilogue:
        raise RuntimeError("the kernel's epilogue needs the split tiles' counters, which cannot be allocated while a "
                           "CUDA graph is captured: run this call once before capturing it")
    _ensure_cuda_context(x2.device)
    _ws_fwd_kernel[grid](x_desc, w_desc, s_desc, xs_desc, y_desc, target, y, target if counters is None else counters,
                         w.global_scale,
                         m, w.n, w.n, y.shape[1], stride_split, kc, scale_pitch(w), *norm["args"], *rope_args,
                         BM=cfg.bm, BN=cfg.bn,
                         CONSUMERS=cfg.consumers, STAGES=cfg.stages, OUT_F32=split > 1, CONSUMER_REGS=CONSUMER_REGS,
                         IN_FLIGHT=cfg.in_flight, FUSED=counters is not None, WORDS=w.words, GLU=glu,
                         ROW_NORM=row_norm is not None, NORM_NT=norm["nt"], ADD_NORM=add_norm is not None,
                         ROPE=rope is not None, ROPE_BIAS=rope is not None and rope.bias is not None,
                         SHIFT_LAST=shift, XB=xb, TMA_STORE=tma_store,
                         **_pdl_args(cfg, split > 1 and counters is None), **bias_lora,
                         num_warps=4, **({} if cfg.maxnreg is None else {"maxnreg": cfg.maxnreg}))
    if split > 1 and counters is None:
        kern._reduce(target, y, split, after_bias, after_lora)
    else:
        kern.add_bias_and_lora_(y, after_bias, after_lora)
    return y


# Tiles of up to this many rows of X copy u (fp32) into shared memory with B's rows before the chunk loop; wider ones
# read it after the loop from L2 (its fp32 copy would cost 64-row tiles a CTA per SM: run 37).
LORA_U_STAGED_MAX_BM = 32  # (the kernels' constexpr ``_U_STAGED_MAX_BM``)
# Ranks the kernel's expand takes: one wgmma's K (multiples of 16), its operands in shared memory (B's rows of a tile:
# 128 x 64 x 2 bytes at most, next to the ring). Other ranks: ``nvfp4_gemm.add_bias_and_lora_`` after the product.
LORA_EPILOGUE_RANKS = (16, 32, 64)


def lora_smem_bytes(cfg: WsConfig, rank: int) -> int:
    """Shared memory the expand's operands take per CTA (``_lora_buffers``): per consumer B's rows (bf16) and u's
    (bf16 for the wgmma; also fp32 as copied up to ``LORA_U_STAGED_MAX_BM`` rows)."""
    u_bytes = 6 if cfg.bm <= LORA_U_STAGED_MAX_BM else 2
    return max(cfg.consumers, 1) * (cfg.bn // max(cfg.consumers, 1) * rank * 2 + cfg.bm * rank * u_bytes)


def _ctas_per_sm(cfg: WsConfig, extra_smem: int = 0) -> int:
    """CTAs of ``cfg`` an SM holds, by registers (``maxnreg``, or CONSUMER_REGS, over a warpgroup per consumer and the
    loader's) and by shared memory (the ring, ``extra_smem``, the CTA's reserved 1 KB and barriers)."""
    threads = 128 * (max(cfg.consumers, 1) + 1)
    by_regs = max(1, 65536 // (threads * (cfg.maxnreg or CONSUMER_REGS)))
    return max(0, min(by_regs, SMEM_PER_SM // (fwd_ring_bytes(cfg) + extra_smem + 1024 + 256)))


def lora_epilogue_fits(lora: kern.LoRAEpilogue, cfg: WsConfig, m: int, n: int) -> bool:
    """Whether ``ws_matmul`` can add ``lora``'s expand in ``cfg``'s epilogue: a rank of ``LORA_EPILOGUE_RANKS``,
    ``nvfp4_gemm._lora_fits`` on each consumer's rows (every tile of BN / consumers columns inside one slice), and its
    operands' shared memory next to the ring without fewer CTAs per SM than the config has without them."""
    rows = cfg.bn // max(cfg.consumers, 1)
    if not (lora.u.dim() == 3 and lora.u.shape[2] in LORA_EPILOGUE_RANKS and kern._lora_fits(lora, m, n, rows)):
        return False
    extra = lora_smem_bytes(cfg, lora.u.shape[2])
    return (fwd_ring_bytes(cfg) + extra + 2048 <= SMEM_PER_CTA
            and _ctas_per_sm(cfg, extra) >= max(1, _ctas_per_sm(cfg)))


def _bias_lora_args(bias: torch.Tensor | None, lora: kern.LoRAEpilogue | None, cfg: WsConfig, w: kern.KernelWeight,
                    m: int, like: torch.Tensor) -> dict:
    """The kernel's bias and expand arguments, checked (``like`` stands in for absent tensors)."""
    args: dict = {"bias_ptr": like, "lu_ptr": like, "lb0_ptr": like, "lb1_ptr": like, "lb2_ptr": like,
                  "HAS_BIAS": False, "LORA_S": 0}
    if bias is None and lora is None:
        return args
    if not tile_epilogue(cfg, w):
        raise ValueError(f"the bias and the adapter's expand need a config without stream-K whose splits (if any) "
                         f"the kernel sums itself (fused), not {cfg}")
    n = w.n
    if bias is not None and (bias.shape != (n,) or not bias.is_contiguous() or not bias.is_floating_point()):
        raise ValueError(f"bias must be a contiguous float [{n}] tensor, not {tuple(bias.shape)} {bias.dtype}")
    if bias is not None:
        args.update(bias_ptr=bias, HAS_BIAS=True)
    if lora is None:
        return args
    if not lora_epilogue_fits(lora, cfg, m, n):
        raise ValueError(f"the kernel's expand needs u fp32 [slices, {m}, R] (contiguous, R in "
                         f"{LORA_EPILOGUE_RANKS}), bf16 B's [N_s, R] with contiguous rows, N_s summing to {n} and "
                         f"inner slices ending on tiles of {cfg.bn // max(cfg.consumers, 1)} columns; got u "
                         f"{tuple(lora.u.shape)} {lora.u.dtype}, B's {[tuple(b.shape) for b in lora.b]}")
    bs = list(lora.b) + [lora.b[0]] * (kern.MAX_LORA_SLICES - len(lora.b))
    ends = list(itertools.accumulate(b.shape[0] for b in lora.b))[:-1] + [n, n]
    args.update(lu_ptr=lora.u, lb0_ptr=bs[0], lb1_ptr=bs[1], lb2_ptr=bs[2], lora_e0=ends[0], lora_e1=ends[1],
                stride_lus=lora.u.stride(0), stride_lb0=bs[0].stride(0), stride_lb1=bs[1].stride(0),
                stride_lb2=bs[2].stride(0), LORA_S=len(lora.b), LORA_R=lora.u.shape[2])
    return args


def _rope_args(rope: RopeEpilogue | None, cfg: WsConfig, m: int, n: int, like: torch.Tensor) -> list:
    """The kernel's RoPE arguments (bias, cos, sin, cos row stride, positions, their stride, k and v caches, the
    caches' batch / head / position strides, heads, KV heads), checked; dummies without ``rope``."""
    if rope is None:
        return [like, like, like, 0, like, 0, like, like, 0, 0, 0, 0, 0]
    kc, vc = rope.k_cache, rope.v_cache
    if kc.dim() != 4 or vc.shape != kc.shape or vc.stride() != kc.stride() or kc.shape[0] != m:
        raise ValueError(f"rope's caches must be two [{m}, KV, L, D] tensors of one layout, not {tuple(kc.shape)} "
                         f"/ {tuple(vc.shape)}")
    _, kv, length, d = kc.shape
    rb = cfg.bn // max(cfg.consumers, 1)
    if rb != d or n != (rope.heads + 2 * kv) * d:
        raise ValueError(f"the RoPE epilogue needs tiles of one head ({d} rows: BN / consumers, not {rb}) and "
                         f"N = (heads + 2 KV) D = {(rope.heads + 2 * kv) * d}, not {n}")
    if (rope.cos.shape != (length, d) or rope.sin.shape != rope.cos.shape or rope.sin.stride() != rope.cos.stride()
            or rope.cos.stride(-1) != 1 or kc.stride(-1) != 1 or kc.dtype != torch.bfloat16
            or vc.dtype != torch.bfloat16):
        raise ValueError(f"rope's cos / sin tables must be [{length}, {d}] of one stride, contiguous rows, and the "
                         "caches bf16 with contiguous rows")
    if rope.positions.numel() not in (1, m) or rope.positions.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"rope's positions must be an integer tensor of 1 or {m} entries, not "
                         f"{tuple(rope.positions.shape)} {rope.positions.dtype}")
    if rope.bias is not None and (rope.bias.shape != (n,) or not rope.bias.is_contiguous()):
        raise ValueError(f"rope's bias must be a contiguous [{n}] tensor, not {tuple(rope.bias.shape)}")
    pos = rope.positions.reshape(-1)
    return [like if rope.bias is None else rope.bias, rope.cos, rope.sin, rope.cos.stride(0), pos,
            0 if pos.numel() == 1 else pos.stride(0), kc, vc, kc.stride(0), kc.stride(1), kc.stride(2), rope.heads, kv]


def _norm_args(row_norm, add_norm, cfg: WsConfig, m: int, n: int, like: torch.Tensor) -> dict:
    """The kernels' RMSNorm arguments (norm_ptr, norm_tiles, norm_k, eps, then res_ptr, u_ptr, g_ptr, ssq_ptr) and
    NORM_NT, checked; dummies where unused (one compiled variant per epilogue, whatever the tensors)."""
    k = like.shape[1]
    args: list = [like, 1, k, 0.0]
    nt = 1
    if row_norm is not None:
        sumsq, eps = row_norm
        if sumsq.dtype != torch.float32 or sumsq.dim() != 2 or sumsq.shape[1] != m or not sumsq.is_contiguous():
            raise ValueError(f"row_norm's statistics must be a contiguous fp32 [T, {m}] tensor, not "
                             f"{tuple(sumsq.shape)} {sumsq.dtype}")
        args = [sumsq, sumsq.shape[0], k, float(eps)]
        nt = _pow2(sumsq.shape[0])
    if add_norm is None:
        return {"args": args + [like, like, like, like], "nt": nt, "row_norm": row_norm is not None}
    residual, weight, u, sumsq_out = add_norm
    for name, t, shape, dtype in (("residual", residual, (m, n), torch.bfloat16), ("norm weight", weight, (n,),
                                  torch.bfloat16), ("u", u, (m, n), torch.bfloat16),
                                  ("sumsq", sumsq_out, (norm_slots(cfg, n), m), torch.float32)):
        if tuple(t.shape) != shape or t.dtype != dtype or not t.is_contiguous():
            raise ValueError(f"add_norm's {name} must be a contiguous {dtype} {list(shape)} tensor, not "
                             f"{tuple(t.shape)} {t.dtype}")
    return {"args": args + [residual, u, weight, sumsq_out], "nt": nt, "row_norm": row_norm is not None}


# Stream-K runs of ``dp_waves`` shorter than this many steps are not made: a split tile's parts (fp32 stores, an
# atomic, the last CTA's reads) cost about as much as a few steps of the tile loop.
SK_MIN_RUN = 8


# Cached: the divisor search runs on every launch's host path otherwise (~50 us in Python for 864 steps).
@functools.lru_cache(maxsize=4096)
def sk_plan(tiles: int, steps: int, ctas_per_wave: int, dp_waves: bool = False) -> tuple[int, int, int]:
    """(iters, sk_total, grid) of a stream-K launch over ``tiles`` tiles of ``steps`` steps each (``_sk_run``): the
    first ``sk_total`` steps of the tile-major sequence in runs of ``iters`` steps, one CTA each, then one CTA per
    remaining tile. Pure stream-K: every step, evenly over one wave of CTAs. ``dp_waves``: the whole waves of tiles
    one per CTA, and each tile left over split into ``d`` runs, ``d`` the largest divisor of ``steps`` with
    ``rem * d`` CTAs in a wave and runs of at least ``SK_MIN_RUN`` steps, so every run lies inside one tile and the
    CTAs of different tiles work on the same stretch of the reduction (the same operand tiles, from L2)."""
    total = tiles * steps
    if not dp_waves:
        iters = -(-total // min(total, ctas_per_wave))
        return iters, total, -(-total // iters)
    rem = tiles % ctas_per_wave
    if rem == 0:
        return steps, 0, tiles
    d = max(d for d in range(1, steps + 1) if steps % d == 0 and rem * d <= ctas_per_wave
            and (d == 1 or steps // d >= SK_MIN_RUN))
    return steps // d, rem * steps, rem * d + tiles - rem


def _stream_k(x2: torch.Tensor, w: kern.KernelWeight, cfg: WsConfig, y: torch.Tensor, kc: int, norm: dict) -> bool:
    """``ws_matmul`` on ``_ws_fwd_sk_kernel``: ``cfg.stream_k`` CTAs per SM share the tiles' chunks evenly (``norm``:
    ``_norm_args``, its row scale only). False (nothing launched) while a CUDA graph is being captured and the tile
    counters would have to be allocated."""
    m = x2.shape[0]
    tiles = -(-m // cfg.bm) * -(-w.n // cfg.bn)
    counters = kern._split_counters(x2.device, tiles * cfg.consumers)
    if counters is None:
        return False
    iters, sk_total, ctas = sk_plan(tiles, kc, cfg.stream_k * kern._sms(x2.device), cfg.dp_waves)
    # One tile's part per stream-K CTA at most (its first tile, ``_sk_put_part``), per consumer.
    parts = torch.empty(max(1, -(-sk_total // iters)) * cfg.bn * cfg.bm, dtype=torch.float32, device=x2.device)
    x_l, _, _ = shared_layouts(cfg.bm, cfg.bn)
    x_desc, xs_desc, shift, xb = x_boxes(x2, cfg.bm, x_l, bn=cfg.bn)
    w_desc, s_desc = weight_descriptors(w, cfg.bn)
    tma_store = sk_tma_store(cfg, y)
    y_desc = TensorDescriptor(y, [m, w.n], [y.stride(0), 1], [cfg.bm, 64], x_l) if tma_store else x_desc
    _ensure_cuda_context(x2.device)
    _ws_fwd_sk_kernel[(ctas,)](x_desc, w_desc, s_desc, xs_desc, y_desc, y, parts, counters, w.global_scale, m, w.n,
                               w.n, kc, iters,
                               sk_total, scale_pitch(w), *norm["args"][:4], BM=cfg.bm, BN=cfg.bn, CONSUMERS=cfg.consumers,
                               STAGES=cfg.stages, CONSUMER_REGS=CONSUMER_REGS, WORDS=w.words,
                               ROW_NORM=norm["row_norm"], NORM_NT=norm["nt"], SHIFT_LAST=shift, XB=xb,
                               TMA_STORE=tma_store, IN_FLIGHT=cfg.in_flight, **_pdl_args(cfg), num_warps=4,
                               **({} if cfg.maxnreg is None else {"maxnreg": cfg.maxnreg}))
    return True


def _stream_k_grad_input(dy2: torch.Tensor, w: kern.KernelWeight, cfg: WsBwdConfig, dx: torch.Tensor, kc: int,
                         steps: int) -> bool:
    """``ws_matmul_grad_input`` on ``_ws_bwd_sk_kernel`` (as ``_stream_k`` for the forward)."""
    m, n = dy2.shape
    tiles = -(-m // cfg.bm) * kc
    counters = kern._split_counters(dy2.device, tiles * cfg.consumers)
    if counters is None:
        return False
    iters, sk_total, ctas = sk_plan(tiles, steps, cfg.stream_k * kern._sms(dy2.device), cfg.dp_waves)
    # One tile's part per stream-K CTA at most (its first tile, ``_sk_put_part``): 64 columns of K per consumer.
    parts = torch.empty(max(1, -(-sk_total // iters)) * 128 * cfg.bm, dtype=torch.float32, device=dy2.device)
    dy_l = dy_layout(cfg.bm)
    dy_desc, dys_desc, shift, xb = x_boxes(dy2, cfg.bm, dy_l)
    w_desc, s_desc = weight_descriptors(w, 64)
    _ensure_cuda_context(dy2.device)
    _ws_bwd_sk_kernel[(ctas,)](dy_desc, w_desc, s_desc, dys_desc, dx, parts, counters, w.global_scale, m, w.k, w.k,
                               steps,
                               iters, sk_total, scale_pitch(w), BM=cfg.bm, STAGES=cfg.stages, CONSUMER_REGS=CONSUMER_REGS,
                               ROWS=w.rows, SHIFT_LAST=shift, XB=xb, num_warps=4,
                               **({} if cfg.maxnreg is None else {"maxnreg": cfg.maxnreg}))
    return True


def ws_matmul_grad_input(dy2: torch.Tensor, w: kern.KernelWeight, cfg: WsBwdConfig,
                         out: torch.Tensor | None = None) -> torch.Tensor:
    """``dy2 @ W`` for a bf16 ``dy2`` [M, N] on the warp-specialized input-gradient kernel: bf16 [M, K]."""
    m, n = dy2.shape
    if n != w.n or not supports(m, w.n, w.k):
        raise ValueError(f"the warp-specialized kernel needs N % 32 == 0 and K % 8 == 0 (N={w.n}, K={w.k})")
    if (cfg.bm not in (8, 16, 32, 64, 128, 256) or cfg.stream_k not in (0, 1, 2) or cfg.consumers not in (1, 2)
            or (cfg.stream_k and (cfg.split_n != 1 or cfg.consumers != 2)) or (cfg.bm == 256 and cfg.consumers == 1)
            or (cfg.consumers == 2 and (cfg.fused or cfg.in_flight)) or (cfg.dp_waves and not cfg.stream_k)):
        raise ValueError(f"unsupported config {cfg}: BM in (8, 16, 32, 64, 128), or up to 256 with two consumers (no "
                         "fused sum, no in_flight), stream_k 0-2 with two consumers and no split_n, dp_waves with "
                         "stream_k only")
    dy2 = dy2.contiguous()
    dx = kern._out(out, m, w.k, dy2)
    kc = w.k_pad // kern.CHUNK
    steps = -(-w.n // 64)
    if cfg.stream_k and _stream_k_grad_input(dy2, w, cfg, dx, kc, steps):
        return dx
    split = max(1, min(cfg.split_n, steps))  # runs of the steps as even as the count allows (_ws_bwd_kernel)
    dy_l = dy_layout(cfg.bm)
    dy_desc, dys_desc, shift, xb = x_boxes(dy2, cfg.bm, dy_l)
    w_desc, s_desc = weight_descriptors(w, 64)
    grid = (-(-m // cfg.bm) * kc, split)
    target, stride_split, counters = kern._split_target(dx, split, grid[0], fused=cfg.fused)
    _ensure_cuda_context(dy2.device)
    _ws_bwd_kernel[grid](dy_desc, w_desc, s_desc, dys_desc, target, dx, target if counters is None else counters,
                         w.global_scale, m, w.k, w.k, stride_split, steps, scale_pitch(w), BM=cfg.bm,
                         STAGES=cfg.stages, OUT_F32=split > 1, FUSED=counters is not None, CONSUMERS=cfg.consumers,
                         CONSUMER_REGS=CONSUMER_REGS, IN_FLIGHT=cfg.in_flight, ROWS=w.rows,
                         SHIFT_LAST=shift, XB=xb, num_warps=4,
                         **({} if cfg.maxnreg is None else {"maxnreg": cfg.maxnreg}))
    if split > 1 and counters is None:
        kern._reduce(target, dx, split)
    return dx

"""NVFP4 (E2M1 codes + E4M3 group scales) x BF16 matmul kernels in Triton.

The codec (``qerl.nvfp4``) stores W [N, K] as ``packed`` uint8 [N, K // 2] with elements 2j / 2j+1 in the low /
high nibble of byte j. ``prepare_weight`` turns that, once at load time, into the kernel layout below; the
checkpoint format does not change.

Kernel layout (``KernelWeight``):
  * K is padded with zero codes to ``K_pad``, a multiple of ``CHUNK`` = 128.
  * ``codes`` uint8 [N, K_pad // 2], row-major. Each row is a run of 128-element chunks of 64 bytes; byte j of
    chunk c holds element ``128c + j`` in its low nibble and element ``128c + 64 + j`` in its high nibble.
    So the low nibbles of a chunk are 64 consecutive elements (groups 8c..8c+3) and the high nibbles the next
    64 (groups 8c+4..8c+7): a kernel turns one coalesced byte tile into two dense [rows, 64] weight tiles and
    feeds each straight to ``tl.dot`` against a contiguous slice of X, with no interleaving shuffle.
  * ``scales`` uint8 [K_pad // 128, N * 8]: the group scales re-encoded exactly as unsigned E5M3 (``encode_e5m3``),
    so a kernel gets ``scale * 2**112`` as bf16 bits with one shift-add (E4M3 subnormals need no special case).
    Row c holds, for every row n of W, chunk c's 8 group scales at ``8n .. 8n + 7`` (the low nibbles' 4, then the
    high nibbles' 4): a tile's scales for one chunk are one contiguous run of 8 bytes per W row, so the warps' loads
    coalesce and every tile gets them by asynchronous copies of at least 4 bytes a thread. (A row-major
    [N, K_pad // 16] layout spent a 32-byte sector per 4-byte load: Nsight Compute counted 21-35% excess sectors in
    the decode kernels, run 6; a layout with the two halves in separate rows left some tiles 2-byte synchronous
    loads.) Padding groups get scale 1; a group whose scale is 0 gets scale 1 and all-zero codes (same weights).
  * ``global_scale`` float32 [1] on the weight's device (read by the kernels, so no host sync).
  * ``layout`` "words" (``prepare_weight(..., layout="words")``; the layout above is "pairs"): the same chunks, halves
    and scales, but each 16-byte block of a chunk's codes holds four 32-bit words, word u (bytes 4u .. 4u + 3) the
    low half's elements 2u, 2u + 1, 2u + 8, 2u + 9 of the block's 16 and the high half's 64 above them: exactly the
    K positions one thread holds in a wgmma / mma.sync register operand. The 32 code bits sit where
    ``_word_dequant_ptx`` decodes the word in 12 instructions (``WORD_BITS``; two bytes of "pairs" take 10 for 4
    weights). The warp-specialized forward reads it (``nvfp4_gemm_ws``: 11-25% fewer loop instructions on the same
    launch config, which ran 1.07-1.16x faster, geomean over the Qwen2.5 layers per M; benchmarks/RESULTS.md run 11);
    the Triton kernels here decode it in plain Triton (their layouts do not guarantee that a thread holds whole
    words), correct but slower, so vLLM's engine (forward only) takes it on Hopper GPUs and the training modules keep
    "pairs" (the input-gradient kernels read pairs of W rows).
  * ``layout`` "rows" (the input gradient's): the same chunks, halves and scales (N even), but the 32-bit word that
    ``ldmatrix.trans`` hands an input-gradient thread, the 16-bit pairs of byte columns 2j, 2j + 1 of rows n and
    n + 1 (n even; bytes 0-1 stored in row n, bytes 2-3 in row n + 1), holds those rows' 8 codes at elements 2j,
    2j + 1 of the low and the high half in ``WORD_BITS``' positions, so the input gradient decodes it with the words
    layout's 12 instructions (pairs along N, what its wgmma operand wants) instead of 18. Only the warp-specialized
    input-gradient kernel reads it (``nvfp4_matmul_grad_input`` where ``nvfp4_gemm_ws.pick_grad_input`` takes the
    product; a clear error elsewhere), so a module keeps it next to "pairs", not instead of it.

Decoding in registers (``_dequant``): the tile fed to the tensor cores is ``e2m1 * scale * 2**-14`` in bf16, which
is exact (at most 6 significant bits, well inside bf16's range), so dequantization adds no rounding error;
``2**14 / global_scale`` multiplies the fp32 accumulator once per output element at the end. On the GPU this is
inline PTX (``_DQ_ASM``, ~2.25 instructions a weight); the plain-Triton path (same values; used by the CPU
interpreter, or with ``asm=False``) places a code at bits 15 and 11..9 of an fp16, which is exactly
``e2m1 * 2**-14`` (e1 e0 = 0 lands in fp16's subnormal range, matching E2M1's own subnormal 0.5).

Kernels:
  * ``_fwd_kernel``: Y = X @ W^T. ``MODE`` 1 is a ``tl.dot`` tile loop (BM = 16 for decode: the tensor cores'
    padding is free, the loop is bound by dequantization and bytes), 2 the same with the product transposed
    (Y^T = W @ X^T) so the dequantized weight is the left operand: with BM = 8 (X^T as the 8-wide right operand of
    mma.sync m16n8k16) the fastest for M <= 8, and with BM >= 64 the weight is wgmma's register operand (no
    shared-memory round trip for the dequantized tile; ``asm=2``), the pick at most M >= 64 shapes; 0 a CUDA-core
    GEMV with FMAs (an option for M <= 4). ``one_dot``: the chunk's two dequantized halves joined into one
    [BN, 128] operand in element order (``_halves_to_k``, no instruction) for one dot per step, which Triton keeps in
    flight under the next step (with two dots it waits for the first before the second). Split-K writes fp32
    partials (decode shapes have too few N tiles to fill the GPU); the last program of each tile sums them
    (``fused``, an atomic counter per tile) or ``_reduce_kernel`` does.
  * ``_bwd_kernel``: dX = dY @ W (reduction over N; the same byte tiles, now the right operand), with split-N.
    The mma wants pairs along N while the codes pair along K, so the compiler re-assembles the code bytes for the
    operand (``MODE`` 1; 2 transposes the product). Re-laying the dequantized bf16 tile through shared memory
    instead takes fewer instructions but measured 8-34% slower (run 4, benchmarks/RESULTS.md). ``one_dot`` (MODE 1):
    one [BM, 128] accumulator for both halves.
  * ``nvfp4_gemm_ws`` (Gluon, Hopper only): warp-specialized kernels (a TMA loader warp, one or two
    consumer warpgroups dequantizing into wgmma's register operand), forward and input gradient.
    ``nvfp4_matmul`` / ``nvfp4_matmul_grad_input`` take them where their tuned tables hold a config for the shape
    and M's bucket (the Qwen2.5 shapes where they beat the paths below: forward at M = 16-1024, input gradient at
    M = 1-1024, and on a few wide layers up to M = 4096). A bias and an adapter's expand go into their epilogue
    where a config hands each tile whole to one CTA (``nvfp4_gemm_ws.bias_lora_config``: decode batches, ranks
    16 / 32 / 64); otherwise the forward takes them from M = ``LORA_WS_MIN_M`` on and adds the expand after them.
  * Large M (training): slabs of W dequantized into bounded bf16 buffers, then cuBLAS, on the plan ``slab_plan``
    picks per shape (``SLAB_PLANS``, measured): how many row slabs, the next one dequantized on a second stream
    while the current one is multiplied or not, and for the input gradient column slabs, each multiplied into its
    own columns of dX. Past M = 1024 every product the tables above do not take runs here (from ``LARGE_M_FWD`` /
    ``LARGE_M_BWD`` rows on those of at least ``SLAB_MIN_FLOP``; smaller ones stay on the tile loop, ``_fwd_kernel`` /
    ``_bwd_kernel``, up to M = 1024).

Launch configs: ``TUNED`` (searched on an H200 for the Qwen2.5-7B / 14B / 32B shapes) or the ``default_*_config`` heuristics;
benchmarks/gemm_nvfp4.py --tune searches more and ``load_tuned_configs`` (or the ``QERL_TUNED_CONFIGS`` environment
variable naming its tuned_configs.json) adds the result. Measured speed and the
targets it misses: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import os
from typing import NamedTuple

import torch

from qerl.kernels.pdl import launch_options
from qerl.nvfp4 import GROUP_SIZE, unpack

try:  # Triton is optional: CPU-only installs use the torch reference in qerl.modules.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None
    tl = None

CHUNK = 128  # elements of K per layout chunk (64 bytes of codes, 8 scale groups)
_HALF = CHUNK // 2
_SCALES_PER_CHUNK = CHUNK // GROUP_SIZE  # 8: one scale row holds this many bytes per W row


LAYOUTS = ("pairs", "words", "rows")  # code byte layouts of ``KernelWeight.codes`` (module docstring)

# The "words" layout: in each 16-byte block of a chunk's 64 code bytes, bytes 4u .. 4u + 3 (one 32-bit word) hold
# the low-half elements 2u, 2u + 1, 2u + 8, 2u + 9 of the block's 16 (and the high-half elements 64 above them):
# the four K positions one thread holds in a wgmma / mma.sync register operand. ``WORD_ELEMENTS``: byte i's element
# offset from 2u.
WORD_ELEMENTS = (0, 1, 8, 9)
# Bits of the word holding each of its 8 codes' bits (m, e0, e1, s), codes in the decoder's output order: the low
# half's elements of bytes 0 .. 3, then the high half's. Chosen so that ``_word_dequant_ptx`` places every code at
# bits 15 and 8..6 of a bf16 lane with 12 instructions per word: codes 0-1 are already there (a mask), codes 2-3 and
# 4-5 after rotating the word left by 10 and 13 bits, codes 6-7 after masking their 8 bits and one multiply by
# 0x1084 (copies shifted by 2, 7 and 12 bits, none overlapping, so no carries).
WORD_BITS = ((6, 7, 8, 15), (22, 23, 24, 31), (28, 29, 30, 5), (12, 13, 14, 21),
             (25, 26, 27, 2), (9, 10, 11, 18), (4, 0, 1, 3), (20, 16, 17, 19))


class KernelWeight(NamedTuple):
    """A frozen NVFP4 weight in the kernel layout (see the module docstring)."""

    codes: torch.Tensor  # uint8 [N, K_pad // 2]
    scales: torch.Tensor  # uint8 [K_pad // 128, N * 8] (E5M3, see encode_e5m3; chunk-major, module docstring)
    global_scale: torch.Tensor  # float32 [1]
    n: int
    k: int
    layout: str = "pairs"  # how ``codes`` arranges a chunk's codes: one of ``LAYOUTS``

    @property
    def words(self) -> bool:
        return self.layout == "words"

    @property
    def rows(self) -> bool:
        return self.layout == "rows"

    @property
    def k_pad(self) -> int:
        return self.codes.shape[1] * 2

    def nbytes(self) -> int:
        return self.codes.numel() + self.scales.numel() + 4


def prepare_weight(packed: torch.Tensor, scale: torch.Tensor, global_scale: torch.Tensor,
                   layout: str = "pairs") -> KernelWeight:
    """Relayout a codec-format NVFP4 weight (``qerl.nvfp4``) into the kernel layout, once at load time: ``layout``
    "pairs" (every kernel), "words" (forward kernels only) or "rows" (the warp-specialized input gradient only; N
    even); see the module docstring.

    Runs on the tensors' device; needs N * K_pad bytes of temporary memory (and "words" ``WORDS_PASS_BYTES`` more).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if packed.dtype != torch.uint8 or packed.dim() != 2:
        raise ValueError(f"packed must be uint8 [N, K // 2], got {packed.dtype} {tuple(packed.shape)}")
    n, k = packed.shape[0], packed.shape[1] * 2
    if scale.shape != (n, k // GROUP_SIZE):
        raise ValueError(f"scale must be [{n}, {k // GROUP_SIZE}], got {tuple(scale.shape)}")
    k_pad = -(-k // CHUNK) * CHUNK
    codes = unpack(packed)  # [N, K] codes 0..15
    if k_pad != k:
        codes = torch.nn.functional.pad(codes, (0, k_pad - k))  # code 0 is +0.0
    scale_f = scale.to(torch.float32)
    if k_pad != k:
        scale_f = torch.nn.functional.pad(scale_f, (0, (k_pad - k) // GROUP_SIZE), value=1.0)
    # A zero scale zeroes its group whatever the codes: make the codes zero so any stored scale is exact.
    zero = scale_f == 0
    if zero.any():
        codes = codes.masked_fill(zero.repeat_interleave(GROUP_SIZE, dim=1), 0)
    if layout == "rows" and n % 2:
        raise ValueError(f"the rows layout pairs W's rows, so N must be even (got {n}): use layout='pairs'")
    relaid = _layout_bytes(codes, layout)
    sbits = encode_e5m3(scale_f.masked_fill(zero, 1.0))  # [N, K_pad // 16]
    per = _SCALES_PER_CHUNK
    sbits = sbits.reshape(n, k_pad // CHUNK, per).transpose(0, 1).reshape(k_pad // CHUNK, n * per)
    gs = global_scale.to(device=packed.device, dtype=torch.float32).reshape(1).contiguous()
    return KernelWeight(relaid, sbits, gs, n, k, layout)


def _pack_word(per: torch.Tensor) -> torch.Tensor:
    """[..., 8] codes in ``WORD_BITS``' order -> [..., 4] the little-endian bytes of their 32-bit word (int64)."""
    per = per.to(torch.int64)
    word = torch.zeros(per.shape[:-1], dtype=torch.int64, device=per.device)
    for i, bits in enumerate(WORD_BITS):
        for j, pos in enumerate(bits):
            word |= ((per[..., i] >> j) & 1) << pos
    return torch.stack([(word >> (8 * b)) & 0xFF for b in range(4)], dim=-1)


def _unpack_word(b: torch.Tensor) -> torch.Tensor:
    """Inverse of ``_pack_word``: [..., 4] word bytes -> [..., 8] codes (int64)."""
    b = b.to(torch.int64)
    word = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)
    return torch.stack([sum(((word >> pos) & 1) << j for j, pos in enumerate(bits)) for bits in WORD_BITS], dim=-1)


def _word_order(codes: torch.Tensor) -> torch.Tensor:
    """Codes [N, K_pad] -> [N, words, 8]: each word's 8 codes in ``WORD_BITS``' order. An element's index in a chunk
    half is 16q + 8h + 2u + p (block q, byte pair h, word u, byte p of the pair); word (q, u) holds the low then
    the high half's codes of its bytes i = 2h + p."""
    n = codes.shape[0]
    c = codes.reshape(n, -1, 2, 4, 2, 4, 2)  # chunk, half, q, h, u, p
    return c.permute(0, 1, 3, 5, 2, 4, 6).reshape(n, -1, 8)


# Temporary bytes ``_to_words`` / ``_to_rows`` use per pass (they work on int64 codes, 16 bytes of scratch per
# weight): rows are converted a slab at a time, so loading a 32B model's 55296 x 5120 gate_up needs about this much,
# not 4.5 GB.
WORDS_PASS_BYTES = 2**28


def _to_words(codes: torch.Tensor) -> torch.Tensor:
    """Codes [N, K_pad] (0..15) -> the "words" layout's bytes [N, K_pad // 2]."""
    n, k_pad = codes.shape
    out = torch.empty((n, k_pad // 2), dtype=torch.uint8, device=codes.device)
    rows = max(1, WORDS_PASS_BYTES // (16 * k_pad))
    for r0 in range(0, n, rows):
        slab = _pack_word(_word_order(codes[r0 : r0 + rows]))  # [rows, words, 4 bytes]
        out[r0 : r0 + rows] = slab.reshape(slab.shape[0], -1)
    return out


def _from_words(data: torch.Tensor) -> torch.Tensor:
    """Inverse of ``_to_words``: codes [N, K_pad]."""
    n = data.shape[0]
    c = _unpack_word(data.reshape(n, -1, 4)).reshape(n, -1, 4, 4, 2, 2, 2)  # chunk, q, u, half, h, p
    return c.permute(0, 1, 4, 2, 5, 3, 6).reshape(n, -1).to(torch.uint8)


def _row_word_order(codes: torch.Tensor) -> torch.Tensor:
    """Codes [N, K_pad] (N even) -> [N // 2, K_pad // 128, 32, 8]: the "rows" layout's word (row pair, chunk, byte
    column pair j) with its 8 codes in ``WORD_BITS``' order: code 2o + r is row 2p + r's element 2j + (o & 1) + 64 (o
    >> 1) of the chunk (the decoder's output o: columns 2j, 2j + 1 of the low half, then of the high half)."""
    n, k_pad = codes.shape
    c = codes.reshape(n // 2, 2, k_pad // CHUNK, 2, 32, 2)  # row pair, r, chunk, half, j, column bit
    return c.permute(0, 2, 4, 3, 5, 1).reshape(n // 2, k_pad // CHUNK, 32, 8)


def _to_rows(codes: torch.Tensor) -> torch.Tensor:
    """Codes [N, K_pad] (0..15, N even) -> the "rows" layout's bytes [N, K_pad // 2]."""
    n, k_pad = codes.shape
    out = torch.empty((n, k_pad // 2), dtype=torch.uint8, device=codes.device)
    rows = max(2, WORDS_PASS_BYTES // (16 * k_pad) // 2 * 2)
    for r0 in range(0, n, rows):
        slab = _pack_word(_row_word_order(codes[r0 : r0 + rows]))  # [pairs, chunks, 32, 4 bytes]
        slab = slab.reshape(*slab.shape[:3], 2, 2).permute(0, 3, 1, 2, 4)  # bytes 0-1 to row n, 2-3 to row n + 1
        out[r0 : r0 + rows] = slab.reshape(-1, k_pad // 2)
    return out


def _from_rows(data: torch.Tensor) -> torch.Tensor:
    """Inverse of ``_to_rows``: codes [N, K_pad]."""
    n, half_k = data.shape
    b = data.reshape(n // 2, 2, half_k // 64, 32, 2).permute(0, 2, 3, 1, 4).reshape(n // 2, half_k // 64, 32, 4)
    c = _unpack_word(b).reshape(n // 2, half_k // 64, 32, 2, 2, 2)  # pair, chunk, j, half, column bit, r
    return c.permute(0, 5, 1, 3, 2, 4).reshape(n, 2 * half_k).to(torch.uint8)


def _element_codes(data: torch.Tensor, layout: str) -> torch.Tensor:
    """Code bytes [N, K_pad // 2] of ``layout`` -> the codes [N, K_pad] (0..15) in element order."""
    if layout == "words":
        return _from_words(data)
    if layout == "rows":
        return _from_rows(data)
    n, half_k = data.shape
    halves = data.reshape(n, half_k // _HALF, _HALF)
    return torch.stack((halves & 0x0F, halves >> 4), dim=2).reshape(n, 2 * half_k)


def _layout_bytes(codes: torch.Tensor, layout: str) -> torch.Tensor:
    """Codes [N, K_pad] (0..15) -> the code bytes [N, K_pad // 2] of ``layout``."""
    if layout == "words":
        return _to_words(codes)
    if layout == "rows":
        return _to_rows(codes)
    n, k_pad = codes.shape
    codes = codes.reshape(n, k_pad // CHUNK, 2, _HALF)
    return (codes[:, :, 0, :] | (codes[:, :, 1, :] << 4)).reshape(n, k_pad // 2).contiguous()


def with_layout(w: KernelWeight, layout: str) -> KernelWeight:
    """``w`` with its codes re-encoded in ``layout``: a new codes tensor (0.5 byte a weight), the same scales tensor
    (every layout shares them) and global scale. ``w`` itself where it has that layout already. Converts a slab of
    rows at a time (``WORDS_PASS_BYTES`` of scratch)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if layout == w.layout:
        return w
    n, half_k = w.codes.shape
    if layout == "rows" and n % 2:
        raise ValueError(f"the rows layout pairs W's rows, so N must be even (got {n}): use layout='pairs'")
    out = torch.empty((n, half_k), dtype=torch.uint8, device=w.codes.device)
    rows = max(2, WORDS_PASS_BYTES // (32 * half_k) // 2 * 2)
    for r0 in range(0, n, rows):
        out[r0 : r0 + rows] = _layout_bytes(_element_codes(w.codes[r0 : r0 + rows], w.layout), layout)
    return w._replace(codes=out, layout=layout)


def codec_from_kernel_weight(w: KernelWeight) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of ``prepare_weight``: the codec's ``(packed, scale)`` from the kernel layout (exact for every
    group whose stored scale was not 0)."""
    n, k_pad = w.n, w.k_pad
    codes = _element_codes(w.codes, w.layout)[:, : w.k]
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous()
    rows = w.scales.reshape(k_pad // CHUNK, n, _SCALES_PER_CHUNK).transpose(0, 1).reshape(n, k_pad // GROUP_SIZE)
    scale = decode_e5m3(rows[:, : w.k // GROUP_SIZE]).to(torch.float8_e4m3fn).contiguous()
    return packed, scale


_E5M3_BIAS = 9  # E4M3's smallest subnormal is 2**-9


def encode_e5m3(v: torch.Tensor) -> torch.Tensor:
    """Positive E4M3 values (as fp32) -> their unsigned E5M3 byte: ``(e + 9) << 3 | m`` for ``v = 2**e * (1 + m/8)``.

    Every positive E4M3 value, subnormals included, has at most 3 fraction bits and an exponent in [-9, 8], so the
    re-encoding is exact. Kernels turn a byte into the bf16 bits of ``v * 2**112`` with one shift-add
    (``(u << 4) + (230 << 7)``), where E4M3 subnormals would need a branch or a float conversion.
    """
    if (v <= 0).any() or not torch.isfinite(v).all():
        raise ValueError("group scales must be positive and finite")
    e = torch.floor(torch.log2(v)).to(torch.int32)
    frac = v / torch.pow(2.0, e.to(torch.float32)) - 1.0
    m = torch.round(frac * 8).to(torch.int32)
    e = torch.where(m == 8, e + 1, e)  # log2 rounding at an exact power of two
    m = torch.where(m == 8, torch.zeros_like(m), m)
    if (e < -_E5M3_BIAS).any() or (e > 31 - _E5M3_BIAS).any():
        raise ValueError("group scale outside the E4M3 range")
    return (((e + _E5M3_BIAS) << 3) | m).to(torch.uint8).contiguous()


def decode_e5m3(u: torch.Tensor) -> torch.Tensor:
    """Inverse of ``encode_e5m3`` (fp32)."""
    u = u.to(torch.int32)
    return torch.pow(2.0, ((u >> 3) - _E5M3_BIAS).to(torch.float32)) * (1.0 + (u & 7).to(torch.float32) / 8)


@functools.cache
def _device_ok(index: int) -> bool:
    return torch.cuda.get_device_capability(index) >= (8, 0)  # bf16 tensor-core dot


def triton_available(device: torch.device | str | None = None) -> bool:
    """True when the Triton kernels can run on ``device`` (a CUDA device of compute capability >= 8.0)."""
    if triton is None or not torch.cuda.is_available():
        return False
    device = torch.device("cuda" if device is None else device)
    if device.type != "cuda":
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _device_ok(index)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _patch_interpreter() -> None:
    """Two fixes for Triton 3.6's CPU interpreter, applied only when TRITON_INTERPRET=1:
    * a scalar (held as a 1-element array) used as a loop bound goes through ``int(array)``, which numpy >= 2.4
      rejects for arrays of ndim > 0: take the element instead;
    * ``tl.dot`` on bf16 operands multiplies their raw uint16 storage: widen them to fp32 first (exact)."""
    import numpy as np
    from triton.runtime import interpreter

    if getattr(interpreter, "_qerl_patched", False):
        return
    original_patch = interpreter._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):
        original_patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    original_dot = interpreter.InterpreterBuilder.create_dot

    def widen(h):
        if h.dtype.scalar == tl.bfloat16:
            return interpreter.TensorHandle((h.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
        return h

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original_dot(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    interpreter._patch_lang_tensor = patch_lang_tensor
    interpreter.InterpreterBuilder.create_dot = create_dot
    interpreter._qerl_patched = True


if triton is not None and _interpreting():
    _patch_interpreter()


def _dequant_ptx(code_bytes: int) -> str:
    """Inline PTX dequantizing ``code_bytes`` (4 or 2) code bytes, i.e. 2 * code_bytes weights (``_DQ_ASM``).

    Operands: outputs first, the low nibbles' bf16 pairs then the high nibbles' ($0..), then the code bytes, then
    one bf16 pair of ``scale * 2**112`` per output, in the same order. prmt spreads the bytes into the two 16-bit
    lanes (bytes 0, 1 and 2, 3); in each lane the code ``s e1 e0 m`` is copied to bits 6..9 and 12..15 by one
    multiply (a << 6 | a << 12 for the low nibble, a << 2 | a << 8 for the high one; disjoint bits, so no carries)
    and masked to bits 8..6 and 15: a bf16 whose value is exactly E2M1 * 2**-126 (e1 e0 = 0 is bf16's subnormal range,
    matching E2M1's subnormal 0.5). A bf16x2 FMA with the scales and -0 gives E2M1 * scale * 2**-14 exactly (at most 6
    significant bits, inside bf16's normal range). About 2.25 instructions per weight instead of ~6 in plain Triton."""
    lanes = ["t0", "t1"] if code_bytes == 4 else ["t"]
    n_out = 2 * len(lanes)
    codes = f"${n_out}"
    if code_bytes == 4:
        spread = [f"prmt.b32 t0, {codes}, 0, 0x4140;", f"prmt.b32 t1, {codes}, 0, 0x4342;"]
    else:  # a 16-bit operand
        spread = [f"cvt.u32.u16 t, {codes};", "prmt.b32 t, t, 0, 0x4140;"]
    body = []
    for half, (mask, copies) in enumerate((("0x000F000F", "0x1040"), ("0x00F000F0", "0x104"))):
        for i, lane in enumerate(lanes):
            out = half * len(lanes) + i
            body += [f"and.b32 a, {lane}, {mask};", f"mul.lo.u32 a, a, {copies};", "and.b32 a, a, 0x81C081C0;",
                     f"fma.rn.bf16x2 ${out}, a, ${n_out + 1 + out}, nz;"]
    regs = ", ".join(lanes)
    return "\n".join(["{", f".reg .b32 {regs}, a, nz;", "mov.b32 nz, 0x80008000;", *spread, *body, "}"])


def _dequant_rows_ptx(halves: tuple[bool, ...]) -> str:
    """Inline PTX dequantizing a 32-bit word of two W rows' code bytes at two adjacent chunk columns (bytes: row n
    column 2j, row n column 2j + 1, row n + 1 column 2j, row n + 1 column 2j + 1: what ``ldmatrix.trans`` hands a
    thread from the code bytes seen as 16-bit pairs), for the input gradient, whose wgmma operand pairs rows.

    ``halves``: the nibbles wanted, (False,) the low ones, (True,) the high ones, (False, True) both. Outputs first,
    per half the bf16 pairs (rows n, n + 1) of columns 2j and 2j + 1; then the word; then one bf16 pair of ``scale *
    2**112`` (rows n, n + 1) per half (a scale group covers both columns). Decoding as ``_dequant_ptx``: one prmt
    per column spreads the rows' bytes into the two 16-bit lanes, then 4 instructions per half and column."""
    n_out = 2 * len(halves)
    word = f"${n_out}"
    body = ["prmt.b32 t0, " + word + ", 0, 0x4240;", "prmt.b32 t1, " + word + ", 0, 0x4341;"]
    for h, high in enumerate(halves):
        mask, copies = ("0x00F000F0", "0x104") if high else ("0x000F000F", "0x1040")
        for col in range(2):
            body += [f"and.b32 a, t{col}, {mask};", f"mul.lo.u32 a, a, {copies};", "and.b32 a, a, 0x81C081C0;",
                     f"fma.rn.bf16x2 ${2 * h + col}, a, ${n_out + 1 + h}, nz;"]
    return "\n".join(["{", ".reg .b32 t0, t1, a, nz;", "mov.b32 nz, 0x80008000;", *body, "}"])


# Per decoder output (``WORD_BITS``' codes 2o, 2o + 1), the instructions that bring its two codes to bits 15 and 8..6
# of their bf16 lanes (mask 0x81C081C0) from the word $W into register {r}: a mask; a rotation and a mask (two
# outputs); a mask, a multiply by 0x1084 and a mask.
_WORD_EXTRACT = (
    ("and.b32 {r}, $W, 0x81C081C0;",),
    ("shf.l.wrap.b32 {r}, $W, $W, 10;", "and.b32 {r}, {r}, 0x81C081C0;"),
    ("shf.l.wrap.b32 {r}, $W, $W, 13;", "and.b32 {r}, {r}, 0x81C081C0;"),
    ("and.b32 {r}, $W, 0x001B001B;", "mul.lo.u32 {r}, {r}, 0x1084;", "and.b32 {r}, {r}, 0x81C081C0;"),
)


def _word_dequant_ptx(outputs: tuple[int, ...] = (0, 1, 2, 3), scale_per_half: bool = False) -> str:
    """Inline PTX dequantizing one code word of the "words" / "rows" layout (8 weights, ``WORD_BITS``) in 12
    instructions, against 18 for the 4 code bytes of the "pairs" layout (``_dequant_ptx(4)``).

    Operands: the bf16 pairs of ``outputs`` ($0 ..; by default all four: the low half's two, then the high half's),
    the word, then the bf16 pairs of ``scale * 2**112``: one per output, or (``scale_per_half``, the "rows" layout,
    whose outputs are pairs of W rows and share a scale group per half) one per half present. Each output's two
    codes reach bits 15 and 8..6 of their lanes (``_WORD_EXTRACT``); one bf16x2 FMA with the scales then gives E2M1 *
    scale * 2**-14 exactly, as in ``_dequant_ptx``."""
    n_out = len(outputs)
    halves = sorted({o >> 1 for o in outputs})
    body, fmas = [], []
    for i, o in enumerate(outputs):
        reg = "abcd"[i]
        body += [line.format(r=reg).replace("$W", f"${n_out}") for line in _WORD_EXTRACT[o]]
        scale = n_out + 1 + (halves.index(o >> 1) if scale_per_half else i)
        fmas.append(f"fma.rn.bf16x2 ${i}, {reg}, ${scale}, nz;")
    body += fmas
    regs = ", ".join("abcd"[:n_out])
    return "\n".join(["{", f".reg .b32 {regs}, nz;", "mov.b32 nz, 0x80008000;", *body, "}"])


# A 4 x 4 byte transpose: $4..$7 words (4 bytes each) -> $0..$3, byte j of word i to byte i of word j (8 prmt).
_TRANSPOSE_4X4_PTX = """
{
.reg .b32 t, th, u, uh;
prmt.b32 t, $4, $5, 0x5140;
prmt.b32 th, $4, $5, 0x7362;
prmt.b32 u, $6, $7, 0x5140;
prmt.b32 uh, $6, $7, 0x7362;
prmt.b32 $0, t, u, 0x5410;
prmt.b32 $1, t, u, 0x7632;
prmt.b32 $2, th, uh, 0x5410;
prmt.b32 $3, th, uh, 0x7632;
}
"""

# 4 E5M3 scale bytes -> their bf16 ``scale * 2**112`` (as ``_scale_x2pow112``), two per instruction: a byte pair
# spread into the two 16-bit lanes, then one multiply-add (u * 16 + 0x7300 per lane; at most 0x82F0, no carry).
_SCALES_PTX = """
{
.reg .b32 t;
prmt.b32 t, $2, 0, 0x4140;
mad.lo.u32 $0, t, 16, 0x73007300;
prmt.b32 t, $2, 0, 0x4342;
mad.lo.u32 $1, t, 16, 0x73007300;
}
"""


if triton is not None:

    @triton.jit
    def _e2m1_x2pow14(nib):
        """E2M1 codes (int16, 0..15) -> fp32 values * 2**-14 (exact)."""
        bits = ((nib & 7) << 9) | ((nib & 8) << 12)
        return bits.to(tl.float16, bitcast=True).to(tl.float32)

    @triton.jit
    def _scale_x2pow112(u):
        """E5M3 scale bytes -> bf16 scale * 2**112 (exact): exponent field e + 9 + 230, fraction m << 4."""
        return ((u.to(tl.int16) << 4) + 29440).to(tl.bfloat16, bitcast=True)

    @triton.jit
    def _chunk_scales(s_row_ptrs, stride_s, c, BN: tl.constexpr, CH: tl.constexpr):
        """E5M3 scale bytes of CH chunks from chunk c, split into the low and high halves' groups: two [BN, CH*4].
        ``s_row_ptrs`` [BN, 1] point at each W row's 8 bytes in scale row 0; ``stride_s`` is a scale row."""
        q = tl.arange(0, CH * 8)
        base = s_row_ptrs + c.to(tl.int64) * stride_s
        sb = tl.load(base + ((q // 8) * stride_s + q % 8)[None, :])  # [BN, CH*8]: per chunk 4 low, 4 high
        sb = tl.reshape(tl.permute(tl.reshape(sb, [BN, CH, 2, 4]), (0, 1, 3, 2)), [BN, CH * 4, 2])
        return tl.split(sb)

    @triton.jit
    def _expand(s, BN: tl.constexpr, CH: tl.constexpr):
        """[BN, CH*4] per-group values -> [BN, CH*64] per-element values (each repeated over its 16 elements)."""
        return tl.reshape(tl.broadcast_to(s[:, :, None], [BN, CH * 4, 16]), [BN, CH * 64])

    # Inline PTX for 4 code bytes (8 weights) at a time (``_dequant_ptx``): $4 holds the bytes, $5/$6 the bf16 pairs of
    # scale * 2**112 for their low nibbles, $7/$8 for their high nibbles; $0/$1 get the low-nibble weights, $2/$3 the
    # high-nibble ones.
    _DQ_ASM = tl.constexpr(_dequant_ptx(4))

    # The same on 2 code bytes (4 weights): for tiles whose dot operand layout gives each thread byte pairs (the
    # weight as a register operand of wgmma, MODE 2 with BM >= 64, loads codes as 2-byte pairs). There the 4-byte
    # version made the compiler split every pair into bytes and re-pack them (5 PRMT per 4 bytes, 176 in the loop
    # of the 64 x 128 tile on 4 warps); this one takes the pair as loaded (64).
    _DQ_ASM2 = tl.constexpr(_dequant_ptx(2))

    _SCALES_ASM = tl.constexpr(_SCALES_PTX)

    @triton.jit
    def _scales_x2pow112_pairs(u):
        return tl.inline_asm_elementwise(_SCALES_ASM, "=r,=r,r", [u], dtype=tl.bfloat16, is_pure=True, pack=4)

    @triton.jit
    def _to_element_order(v, BN: tl.constexpr, NB: tl.constexpr):
        """[BN, NB] values of a "words" tile in byte order (byte 16q + 4u + 2h + p) -> element order (16q + 8h +
        2u + p). Within each 16-byte block, which one thread loads whole: a relabelling of its registers."""
        return tl.reshape(tl.permute(tl.reshape(v, [BN, NB // 16, 4, 2, 2]), (0, 1, 3, 2, 4)), [BN, NB])

    @triton.jit
    def _word_code(word, m: tl.constexpr, e0: tl.constexpr, e1: tl.constexpr, s: tl.constexpr):
        """The E2M1 code (0..15) whose bits (m, e0, e1, s) sit at those bits of ``word`` (a ``WORD_BITS`` entry)."""
        return ((word >> m) & 1) | (((word >> e0) & 1) << 1) | (((word >> e1) & 1) << 2) | (((word >> s) & 1) << 3)

    @triton.jit
    def _in_byte_order(v0, v1, v2, v3, BN: tl.constexpr, NB: tl.constexpr):
        """Four [BN, NB // 4] per-word values (of bytes 0..3) -> [BN, NB] in byte order."""
        return tl.reshape(tl.join(tl.join(v0, v2), tl.join(v1, v3)), [BN, NB])

    @triton.jit
    def _word_codes(wb, BN: tl.constexpr, NB: tl.constexpr):
        """Code bytes [BN, NB] of the "words" layout -> the (low, high) halves' codes (int16), each [BN, NB] in byte
        order, in plain Triton (the CPU interpreter's path; ``WORD_BITS``)."""
        even, odd = tl.split(tl.reshape(wb.to(tl.int32), [BN, NB // 4, 2, 2]))
        b0, b2 = tl.split(even)
        b1, b3 = tl.split(odd)
        word = b0 | (b1 << 8) | (b2 << 16) | (b3 << 24)
        lo = _in_byte_order(_word_code(word, 6, 7, 8, 15), _word_code(word, 22, 23, 24, 31),
                            _word_code(word, 28, 29, 30, 5), _word_code(word, 12, 13, 14, 21), BN, NB)
        hi = _in_byte_order(_word_code(word, 25, 26, 27, 2), _word_code(word, 9, 10, 11, 18),
                            _word_code(word, 4, 0, 1, 3), _word_code(word, 20, 16, 17, 19), BN, NB)
        return lo.to(tl.int16), hi.to(tl.int16)

    @triton.jit
    def _dequant(wb, s_rows, stride_s, c, BN: tl.constexpr, CH: tl.constexpr, ASM: tl.constexpr,
                 PAIRED_SCALES: tl.constexpr, WORDS: tl.constexpr):
        """Code bytes [BN, CH*64] of chunks c.. -> bf16 (w_lo, w_hi) = E2M1 * scale * 2**-14, exact, in element order
        (WORDS: bytes of the "words" layout, decoded one word at a time, then ``_to_element_order``).
        ASM: 0 plain Triton, 1 inline PTX on 4 code bytes at a time, 2 on 2 (``_DQ_ASM2``). PAIRED_SCALES (with ASM):
        the scales converted two per instruction (``_SCALES_ASM``), used by the forward's 8-16-row (decode) tiles:
        2-6% fewer instructions in their main loop (SASS, sm_90a), 1.7-2.4% less time at M <= 16 (geomean, run 7).
        The input gradient's 16-row tiles measured 1-4% slower with it and the 64-128-row tiles did not gain, so they
        keep one conversion per scale."""
        tl.static_assert(not (ASM and WORDS), "the words layout decodes in plain Triton here (see _use_asm)")
        sb_lo, sb_hi = _chunk_scales(s_rows, stride_s, c, BN, CH)
        if ASM and PAIRED_SCALES:
            s_lo = _scales_x2pow112_pairs(sb_lo)
            s_hi = _scales_x2pow112_pairs(sb_hi)
        else:
            s_lo = _scale_x2pow112(sb_lo)
            s_hi = _scale_x2pow112(sb_hi)
        if ASM:
            p_lo = _expand(s_lo, BN, CH)
            p_hi = _expand(s_hi, BN, CH)
        if ASM == 2:
            w_lo, w_hi = tl.inline_asm_elementwise(
                _DQ_ASM2, "=r,=r,h,r,r", [wb, p_lo, p_hi],
                dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=2,
            )
        elif ASM:
            w_lo, w_hi = tl.inline_asm_elementwise(
                _DQ_ASM, "=r,=r,=r,=r,r,r,r,r,r", [wb, p_lo, p_hi],
                dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4,
            )
        else:
            if WORDS:
                c_lo, c_hi = _word_codes(wb, BN, CH * 64)
            else:
                w16 = wb.to(tl.int16)
                c_lo = w16 & 15
                c_hi = w16 >> 4
            s_lo = _expand(_scale_x2pow112(sb_lo).to(tl.float32) * 1.925929944387236e-34, BN, CH)  # * 2**-112
            s_hi = _expand(_scale_x2pow112(sb_hi).to(tl.float32) * 1.925929944387236e-34, BN, CH)
            w_lo = (_e2m1_x2pow14(c_lo) * s_lo).to(tl.bfloat16)
            w_hi = (_e2m1_x2pow14(c_hi) * s_hi).to(tl.bfloat16)
        if WORDS:
            w_lo = _to_element_order(w_lo, BN, CH * 64)
            w_hi = _to_element_order(w_hi, BN, CH * 64)
        return w_lo, w_hi

    @triton.jit
    def _halves_to_k(w_lo, w_hi, BN: tl.constexpr, CH: tl.constexpr):
        """(w_lo, w_hi) [BN, CH*64] -> [BN, CH*128] in element order: per chunk the low half, then the high half.

        A relabelling of registers, not a data movement: the compiler emits no instruction for it (SASS, sm_90a).
        Feeding it to one tl.dot instead of two lets Triton keep that dot's wgmma in flight under the next step's
        loads and dequantization; with two dots into one accumulator it waits for the first before issuing the
        second (``warp_group_dot_wait`` with 0 pending, the tile's tensor cores idle during the wait)."""
        return tl.reshape(tl.permute(tl.reshape(tl.join(w_lo, w_hi), [BN, CH, 64, 2]), (0, 1, 3, 2)), [BN, CH * 128])

    @triton.jit
    def _last_split(cnt_ptr, tile, nsplit):
        """Count this program's split of ``tile`` as done; True in the program that finished it last.

        The caller stored its fp32 partial first; the barrier orders every thread's store before the counter update
        (release, GPU scope), and the acquire lets the last program read the other splits' partials (through L2:
        the loads bypass L1, which is not coherent across SMs). The last program resets the counter for the next
        launch, so the counters stay zero between launches (CUDA-graph safe)."""
        tl.debug_barrier()
        arrived = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
        last = arrived == nsplit - 1
        if last:
            tl.atomic_xchg(cnt_ptr + tile, 0, sem="relaxed", scope="gpu")
        return last

    @triton.jit
    def _sum_splits(ws_ptrs, stride_split, mask, nsplit, like):
        """Sum the fp32 partials of all splits in split order (deterministic whichever program finishes last)."""
        total = tl.zeros_like(like)
        for s in range(nsplit):
            total += tl.load(ws_ptrs + s * stride_split, mask=mask, other=0.0, cache_modifier=".cg")
        return total

    @triton.jit
    def _lora_tile(u_ptr, b_ptr, rows_m, rows_n, stride_um, stride_bn, R: tl.constexpr, RC: tl.constexpr,
                   TRANS: tl.constexpr, DOT: tl.constexpr, like):
        """The adapter's term ``u @ B^T`` of one output tile: ``u`` fp32 [M, R] (the shrink's output), ``B`` bf16
        [N, R]; [BN, BM] when ``TRANS`` (MODE 2's layout), else [BM, BN]. ``DOT``: tensor cores on bf16 operands
        (u rounded to bf16, as vLLM's own expand kernel does; ranks below the 16-wide step are zero-padded); else
        fp32 FMAs (MODE 0's narrow tiles), RC rank columns at a time."""
        total = tl.zeros_like(like)
        for r0 in tl.static_range(0, R, RC):
            kr = r0 + tl.arange(0, RC)
            u_ptrs = u_ptr + rows_m[:, None].to(tl.int64) * stride_um + kr[None, :]
            b_ptrs = b_ptr + rows_n[:, None].to(tl.int64) * stride_bn + kr[None, :]
            if RC > R:
                u = tl.load(u_ptrs, mask=(kr < R)[None, :], other=0.0)
                b = tl.load(b_ptrs, mask=(kr < R)[None, :], other=0.0)
            else:
                u = tl.load(u_ptrs)
                b = tl.load(b_ptrs)
            if DOT:
                if TRANS:
                    total = tl.dot(b, tl.trans(u.to(tl.bfloat16)), total)
                else:
                    total = tl.dot(u.to(tl.bfloat16), tl.trans(b), total)
            else:
                b32 = b.to(tl.float32)
                if TRANS:
                    total += tl.sum(b32[:, None, :] * u[None, :, :], axis=2)
                else:
                    total += tl.sum(u[:, None, :] * b32[None, :, :], axis=2)
        return total

    @triton.jit
    def _lora_slices_tile(u_ptr, b0_ptr, b1_ptr, b2_ptr, e1, e2, n0, rows_m, rows_n, stride_us, stride_b0,
                          stride_b1, stride_b2, SLICES: tl.constexpr, R: tl.constexpr, RC: tl.constexpr,
                          TRANS: tl.constexpr, DOT: tl.constexpr, like):
        """``_lora_tile`` for the output slice (1-3; ends e1 < e2, on tile boundaries) the tile starting at column
        ``n0`` lies in: u_s at ``u_ptr + s * stride_us``, B_s at ``b{s}_ptr``, the tile's rows of B_s from the slice's
        start."""
        if SLICES == 1:
            lora = _lora_tile(u_ptr, b0_ptr, rows_m, rows_n, R, stride_b0, R, RC, TRANS, DOT, like)
        elif n0 < e1:
            lora = _lora_tile(u_ptr, b0_ptr, rows_m, rows_n, R, stride_b0, R, RC, TRANS, DOT, like)
        elif SLICES == 2:
            lora = _lora_tile(u_ptr + stride_us, b1_ptr, rows_m, rows_n - e1, R, stride_b1, R, RC, TRANS, DOT, like)
        elif n0 < e2:
            lora = _lora_tile(u_ptr + stride_us, b1_ptr, rows_m, rows_n - e1, R, stride_b1, R, RC, TRANS, DOT, like)
        else:
            lora = _lora_tile(u_ptr + 2 * stride_us, b2_ptr, rows_m, rows_n - e2, R, stride_b2, R, RC, TRANS, DOT,
                              like)
        return lora

    # M and the per-split step counts change from call to call: not specializing them (on == 1 or % 16) avoids
    # recompiling the same kernel for every new batch size.
    @triton.jit(do_not_specialize=["M", "chunks_per_split"])
    def _fwd_kernel(
        x_ptr, w_ptr, s_ptr, gs_ptr, y_ptr, out_ptr, cnt_ptr,
        bias_ptr, lu_ptr, lb0_ptr, lb1_ptr, lb2_ptr, lora_e1, lora_e2,
        M, N, K, chunks_per_split,
        stride_xm, stride_wn, stride_s, stride_ym, stride_ysplit, stride_lus, stride_lb0, stride_lb1, stride_lb2,
        BM: tl.constexpr, BN: tl.constexpr, CH: tl.constexpr, MODE: tl.constexpr, ASM: tl.constexpr,
        GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, OUT_F32: tl.constexpr, FUSED: tl.constexpr,
        HAS_BIAS: tl.constexpr, LORA_SLICES: tl.constexpr, LORA_R: tl.constexpr, LORA_RC: tl.constexpr,
        LORA_DOT: tl.constexpr, ONE_DOT: tl.constexpr, WORDS: tl.constexpr,
    ):
        # FUSED (split-K only): y_ptr is the fp32 [split, M, N] workspace; the program that finishes a tile's last
        # split sums the partials and writes bf16 to out_ptr, so no second kernel is launched.
        # Epilogue (added once, by split 0, before the partials are summed): the bias and a LoRA adapter's
        # ``u_s @ B_s^T`` for the output slice s (1-3 slices, e.g. q/k/v) the tile lies in; u is the shrink's fp32
        # [slices, M, R] output at lu_ptr, B_s bf16 [N_s, R]; slices end at lora_e1 < lora_e2 < N, which the
        # launcher keeps on tile boundaries.
        pid = tl.program_id(0)
        pid_k = tl.program_id(1)
        num_m = tl.cdiv(M, BM)
        num_n = tl.cdiv(N, BN)
        # Grouped ordering: GROUP_M row tiles sweep the N tiles together so X and W tiles are reused in L2.
        width = GROUP_M * num_n
        group = pid // width
        first_m = group * GROUP_M
        size_m = tl.minimum(num_m - first_m, GROUP_M)
        pid_m = first_m + (pid % width) % size_m
        pid_n = (pid % width) // size_m

        offs_m = pid_m * BM + tl.arange(0, BM)
        offs_n = pid_n * BN + tl.arange(0, BN)
        # Out-of-range rows are clamped (not masked): they compute duplicates that are never stored, which keeps
        # every load unmasked along its contiguous dimension and therefore vectorized.
        rows_m = tl.minimum(offs_m, M - 1)
        rows_n = tl.minimum(offs_n, N - 1)
        offs_b = tl.arange(0, CH * 64)  # byte index inside CH chunks
        # Element index (relative to chunk c) of the low nibble of byte b; the high nibble is +64.
        k_lo = (offs_b // 64) * 128 + offs_b % 64

        w_rows = w_ptr + rows_n[:, None].to(tl.int64) * stride_wn
        s_rows = s_ptr + rows_n[:, None].to(tl.int64) * 8
        x_rows = x_ptr + rows_m[:, None].to(tl.int64) * stride_xm

        c_begin = pid_k * chunks_per_split  # the launcher makes chunks_per_split divide the chunk count
        if MODE == 0:
            acc3 = tl.zeros([BM, BN, CH * 64], dtype=tl.float32)
        elif MODE == 1:
            acc = tl.zeros([BM, BN], dtype=tl.float32)
        else:
            acc = tl.zeros([BN, BM], dtype=tl.float32)
        for i in range(0, chunks_per_split, CH):
            c = c_begin + i
            wb = tl.load(w_rows + (c * 64 + offs_b)[None, :])  # uint8 [BN, CH*64]
            if ONE_DOT:
                # Both halves of each chunk in one dot over its 128 elements in natural order (see _halves_to_k).
                kk = c * 128 + tl.arange(0, CH * 128)
                if EVEN_K:
                    x = tl.load(x_rows + kk[None, :])
                else:
                    x = tl.load(x_rows + kk[None, :], mask=(kk < K)[None, :], other=0.0)
            else:
                k0 = c * 128 + k_lo
                if EVEN_K:
                    x_lo = tl.load(x_rows + k0[None, :])
                    x_hi = tl.load(x_rows + (k0 + 64)[None, :])
                else:
                    x_lo = tl.load(x_rows + k0[None, :], mask=(k0 < K)[None, :], other=0.0)
                    x_hi = tl.load(x_rows + (k0 + 64)[None, :], mask=(k0 + 64 < K)[None, :], other=0.0)
            w_lo, w_hi = _dequant(wb, s_rows, stride_s, c, BN, CH, ASM, BM <= 16, WORDS)
            if ONE_DOT:
                w = _halves_to_k(w_lo, w_hi, BN, CH)
                if MODE == 1:
                    acc = tl.dot(x, tl.trans(w), acc)
                else:
                    acc = tl.dot(w, tl.trans(x), acc)
            elif MODE == 0:
                # CUDA-core GEMV: elementwise FMAs into [BM, BN, CH*64]; one cross-thread reduction at the end.
                acc3 += x_lo.to(tl.float32)[:, None, :] * w_lo.to(tl.float32)[None, :, :]
                acc3 += x_hi.to(tl.float32)[:, None, :] * w_hi.to(tl.float32)[None, :, :]
            elif MODE == 1:
                acc = tl.dot(x_lo, tl.trans(w_lo), acc)
                acc = tl.dot(x_hi, tl.trans(w_hi), acc)
            else:
                acc = tl.dot(w_lo, tl.trans(x_lo), acc)
                acc = tl.dot(w_hi, tl.trans(x_hi), acc)
        if MODE == 0:
            acc = tl.sum(acc3, axis=2)

        out = acc * (16384.0 / tl.load(gs_ptr))  # the dequantized tiles carry 2**-14 and no 1 / global_scale
        if HAS_BIAS or LORA_SLICES > 0:
            if pid_k == 0:
                if HAS_BIAS:
                    bias = tl.load(bias_ptr + rows_n).to(tl.float32)
                    if MODE == 2:
                        out += bias[:, None]
                    else:
                        out += bias[None, :]
                if LORA_SLICES > 0:
                    out += _lora_slices_tile(lu_ptr, lb0_ptr, lb1_ptr, lb2_ptr, lora_e1, lora_e2, pid_n * BN, rows_m,
                                             rows_n, stride_lus, stride_lb0, stride_lb1, stride_lb2, LORA_SLICES,
                                             LORA_R, LORA_RC, MODE == 2, LORA_DOT, out)
        mask_m = offs_m < M
        mask_n = offs_n < N
        if MODE == 2:
            y_offs = offs_m[None, :].to(tl.int64) * stride_ym + offs_n[:, None]
            y_mask = mask_n[:, None] & mask_m[None, :]
        else:
            y_offs = offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :]
            y_mask = mask_m[:, None] & mask_n[None, :]
        y_ptrs = y_ptr + pid_k.to(tl.int64) * stride_ysplit + y_offs
        if OUT_F32:
            tl.store(y_ptrs, out, mask=y_mask)
        else:
            tl.store(y_ptrs, out.to(tl.bfloat16), mask=y_mask)
        if FUSED:
            nsplit = tl.num_programs(1)
            if _last_split(cnt_ptr, pid, nsplit):
                total = _sum_splits(y_ptr + y_offs, stride_ysplit, y_mask, nsplit, out)
                tl.store(out_ptr + y_offs, total.to(tl.bfloat16), mask=y_mask)

    @triton.jit(do_not_specialize=["M", "steps_per_split"])
    def _bwd_kernel(
        dy_ptr, w_ptr, s_ptr, gs_ptr, dx_ptr, out_ptr, cnt_ptr,
        M, N, K, steps_per_split,
        stride_dym, stride_wn, stride_s, stride_dxm, stride_dxsplit,
        BM: tl.constexpr, BN: tl.constexpr, MODE: tl.constexpr, ASM: tl.constexpr, GROUP_M: tl.constexpr,
        EVEN_N: tl.constexpr, OUT_F32: tl.constexpr, FUSED: tl.constexpr, ONE_DOT: tl.constexpr,
        WORDS: tl.constexpr,
    ):
        # FUSED: as in _fwd_kernel, with split-N partials in dx_ptr (fp32) and the bf16 result in out_ptr.
        # One program: BM rows of dX times one 128-element chunk of K (its low and high 64-column halves).
        pid = tl.program_id(0)
        pid_s = tl.program_id(1)
        num_m = tl.cdiv(M, BM)
        num_c = tl.cdiv(K, 128)
        width = GROUP_M * num_c
        group = pid // width
        first_m = group * GROUP_M
        size_m = tl.minimum(num_m - first_m, GROUP_M)
        pid_m = first_m + (pid % width) % size_m
        c = (pid % width) // size_m

        offs_m = pid_m * BM + tl.arange(0, BM)
        rows_m = tl.minimum(offs_m, M - 1)
        offs_h = tl.arange(0, 64)
        dy_rows = dy_ptr + rows_m[:, None].to(tl.int64) * stride_dym

        # In whole BN steps, so the compiler knows every dY column block starts on a multiple of BN: its loads are
        # then 16-byte vectors (a row count per split of unknown divisibility gave 2-byte loads, the kernel's top
        # stall in Nsight Compute, run 6).
        n_begin = pid_s * steps_per_split * BN
        if ONE_DOT:
            acc = tl.zeros([BM, 128], dtype=tl.float32)
        elif MODE == 1:
            acc_lo = tl.zeros([BM, 64], dtype=tl.float32)
            acc_hi = tl.zeros([BM, 64], dtype=tl.float32)
        else:
            acc_lo = tl.zeros([64, BM], dtype=tl.float32)
            acc_hi = tl.zeros([64, BM], dtype=tl.float32)
        for i in range(0, steps_per_split):
            offs_n = n_begin + i * BN + tl.arange(0, BN)
            rows_n = tl.minimum(offs_n, N - 1)
            wb = tl.load(w_ptr + rows_n[:, None].to(tl.int64) * stride_wn + (c * 64 + offs_h)[None, :])
            w_lo, w_hi = _dequant(wb, s_ptr + rows_n[:, None].to(tl.int64) * 8, stride_s, c, BN, 1, ASM, False,
                                  WORDS)
            # dY columns past N must be zero: the clamped W rows there are real rows.
            if EVEN_N:
                dy = tl.load(dy_rows + offs_n[None, :])
            else:
                dy = tl.load(dy_rows + offs_n[None, :], mask=(offs_n < N)[None, :], other=0.0)
            if ONE_DOT:
                acc = tl.dot(dy, _halves_to_k(w_lo, w_hi, BN, 1), acc)
            elif MODE == 1:
                acc_lo = tl.dot(dy, w_lo, acc_lo)
                acc_hi = tl.dot(dy, w_hi, acc_hi)
            else:
                acc_lo = tl.dot(tl.trans(w_lo), tl.trans(dy), acc_lo)
                acc_hi = tl.dot(tl.trans(w_hi), tl.trans(dy), acc_hi)

        factor = 16384.0 / tl.load(gs_ptr)
        if ONE_DOT:
            acc_lo, acc_hi = tl.split(tl.permute(tl.reshape(acc, [BM, 2, 64]), (0, 2, 1)))
        acc_lo = acc_lo * factor
        acc_hi = acc_hi * factor
        mask_m = offs_m < M
        k_lo = c * 128 + offs_h
        if MODE == 1:
            o_lo = offs_m[:, None].to(tl.int64) * stride_dxm + k_lo[None, :]
            m_lo = mask_m[:, None] & (k_lo < K)[None, :]
            m_hi = mask_m[:, None] & (k_lo + 64 < K)[None, :]
        else:
            o_lo = offs_m[None, :].to(tl.int64) * stride_dxm + k_lo[:, None]
            m_lo = mask_m[None, :] & (k_lo < K)[:, None]
            m_hi = mask_m[None, :] & (k_lo + 64 < K)[:, None]
        p_lo = dx_ptr + pid_s.to(tl.int64) * stride_dxsplit + o_lo
        if OUT_F32:
            tl.store(p_lo, acc_lo, mask=m_lo)
            tl.store(p_lo + 64, acc_hi, mask=m_hi)
        else:
            tl.store(p_lo, acc_lo.to(tl.bfloat16), mask=m_lo)
            tl.store(p_lo + 64, acc_hi.to(tl.bfloat16), mask=m_hi)
        if FUSED:
            nsplit = tl.num_programs(1)
            if _last_split(cnt_ptr, pid, nsplit):
                lo = _sum_splits(dx_ptr + o_lo, stride_dxsplit, m_lo, nsplit, acc_lo)
                hi = _sum_splits(dx_ptr + o_lo + 64, stride_dxsplit, m_hi, nsplit, acc_hi)
                tl.store(out_ptr + o_lo, lo.to(tl.bfloat16), mask=m_lo)
                tl.store(out_ptr + o_lo + 64, hi.to(tl.bfloat16), mask=m_hi)

    @triton.jit
    def _dequant_rows_kernel(codes_ptr, scales_ptr, gs_ptr, out_ptr, n_rows, k, row0, chunk0, stride_c, stride_s,
                             stride_o, BN: tl.constexpr, ASM: tl.constexpr, WORDS: tl.constexpr,
                             CHUNKS_FIRST: tl.constexpr):
        """Rows [row0, row0 + n_rows) of W, columns from chunk ``chunk0`` on, as bf16 into ``out`` ([n_rows, grid's
        chunks * 128], column 0 = K column chunk0 * 128); one program per (row block, chunk), consecutive programs
        along the rows (grid [row blocks, chunks]) or, ``CHUNKS_FIRST``, along K (grid [chunks, row blocks]: the
        programs running at once write whole rows of ``out``)."""
        if CHUNKS_FIRST:
            pid_n = tl.program_id(1)
            c = chunk0 + tl.program_id(0)
        else:
            pid_n = tl.program_id(0)
            c = chunk0 + tl.program_id(1)
        local = pid_n * BN + tl.arange(0, BN)
        valid = local < n_rows
        rows = row0 + tl.minimum(local, n_rows - 1)  # clamped loads; stores are masked
        j = tl.arange(0, 64)
        wb = tl.load(codes_ptr + rows[:, None] * stride_c + c * 64 + j[None, :])
        w_lo, w_hi = _dequant(wb, scales_ptr + rows[:, None].to(tl.int64) * 8, stride_s, c, BN, 1, ASM, False, WORDS)
        inv = 16384.0 / tl.load(gs_ptr)  # undo the kernels' 2**-14 and apply 1 / global_scale
        k_lo = c * 128 + j
        o_rows = out_ptr + local[:, None] * stride_o - chunk0 * 128
        tl.store(o_rows + k_lo[None, :], (w_lo.to(tl.float32) * inv).to(tl.bfloat16),
                 mask=valid[:, None] & (k_lo[None, :] < k))
        tl.store(o_rows + (k_lo + 64)[None, :], (w_hi.to(tl.float32) * inv).to(tl.bfloat16),
                 mask=valid[:, None] & ((k_lo + 64)[None, :] < k))

    @triton.jit(do_not_specialize=["M"])
    def _bias_lora_kernel(y_ptr, bias_ptr, u_ptr, b0_ptr, b1_ptr, b2_ptr, e1, e2, M, N, stride_ym, stride_us,
                          stride_b0, stride_b1, stride_b2, ws_ptr, stride_split, BM: tl.constexpr, BN: tl.constexpr,
                          HAS_BIAS: tl.constexpr, SLICES: tl.constexpr, R: tl.constexpr, RC: tl.constexpr,
                          SPLIT: tl.constexpr = 0):
        """``y[M, N] += bias + u_s @ B_s^T`` in place for the output slice s each [BM, BN] tile lies in (slices end
        at e1 < e2 < N, on tile boundaries): ``_fwd_kernel``'s epilogue as a kernel of its own, one launch for the
        bias and every slice (``add_bias_and_lora_``). With ``SPLIT`` > 0 the product comes as SPLIT fp32 partials
        ``ws`` [SPLIT, M, N] (``stride_split`` apart) instead of in y: summed in split order with the bias and the
        expand, and rounded once into y (``_reduce`` with an epilogue)."""
        offs_m = tl.program_id(1) * BM + tl.arange(0, BM)
        offs_n = tl.program_id(0) * BN + tl.arange(0, BN)
        rows_m = tl.minimum(offs_m, M - 1)
        rows_n = tl.minimum(offs_n, N - 1)
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        if SLICES > 0:
            acc = _lora_slices_tile(u_ptr, b0_ptr, b1_ptr, b2_ptr, e1, e2, tl.program_id(0) * BN, rows_m, rows_n,
                                    stride_us, stride_b0, stride_b1, stride_b2, SLICES, R, RC, False, True, acc)
        if HAS_BIAS:
            acc += tl.load(bias_ptr + rows_n).to(tl.float32)[None, :]
        ptrs = y_ptr + offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :]
        mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
        if SPLIT > 0:
            parts = ws_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
            y = tl.zeros([BM, BN], dtype=tl.float32)
            for s in tl.static_range(SPLIT):
                y += tl.load(parts + s * stride_split, mask=mask, other=0.0)
        else:
            y = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
        tl.store(ptrs, (y + acc).to(tl.bfloat16), mask=mask)

    @triton.jit
    def _reduce_kernel(ws_ptr, out_ptr, numel, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
        """out[i] = bf16(sum_s ws[s, i]) over a contiguous [SPLIT, numel] fp32 workspace."""
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < numel
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for s in tl.static_range(SPLIT):
            acc += tl.load(ws_ptr + s * numel + offs, mask=mask, other=0.0)
        tl.store(out_ptr + offs, acc.to(tl.bfloat16), mask=mask)


class FwdConfig(NamedTuple):
    """Launch parameters of ``_fwd_kernel`` (see its docstring for MODE)."""

    mode: int
    bm: int
    bn: int
    ch: int = 1
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8
    # Dequantization: True (1) inline PTX on 4 code bytes at a time, 2 on 2 bytes (the register-operand wgmma tiles,
    # MODE 2 with BM >= 64, whose operand layout holds byte pairs), False plain Triton (``_dequant``).
    asm: bool | int = True
    fused: bool = True  # split-K partials summed by the last program of each tile (no second kernel)
    # Register cap per thread (more warps per SM); None: the compiler's choice. Caps of 80-128 on the M <= 16 tiles
    # changed their time by -5% to +7% on an H200 and never beat the best uncapped config (run 4), so no shipped
    # config sets one.
    maxnreg: int | None = None
    # Both 64-element halves of a chunk in one tl.dot (``_halves_to_k``) instead of one dot each; None: ``one_dot``'s
    # rule (the tiles where one dot measured faster).
    one_dot: bool | None = None


def one_dot(cfg: FwdConfig) -> bool:
    """Whether ``cfg`` multiplies a chunk's two halves in one dot: as set, else where that measured faster on an H200
    (run 8, benchmarks/RESULTS.md; same tile, one against two dots): the wgmma tiles of MODE 1 with BM >= 64 (0.72-0.97x
    the time) and of MODE 2 with BM = 128 (0.92-0.96x). MODE 2 with BM = 64 or 256 measured 1.00-1.03x, and the decode
    tiles (BM <= 16) keep two."""
    if cfg.one_dot is not None:
        return bool(cfg.one_dot) and cfg.mode != 0
    return cfg.bm >= 64 and (cfg.mode == 1 or (cfg.mode == 2 and cfg.bm == 128))


class BwdConfig(NamedTuple):
    """Launch parameters of ``_bwd_kernel``; ``split_n`` splits the reduction over N."""

    mode: int
    bm: int
    bn: int
    split_n: int = 1
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8
    asm: bool = True
    fused: bool = True  # split-N partials summed by the last program of each tile (no second kernel)
    # The chunk's two halves as one [BN, 128] operand of one dot into one accumulator (``_halves_to_k``; MODE 1).
    one_dot: bool = False


@functools.cache
def _num_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 132
    return _num_sms(device.index if device.index is not None else torch.cuda.current_device())


def _pick_split(tiles: int, steps: int, target: int, min_steps: int) -> int:
    """Split a reduction of ``steps`` steps until ``tiles * split`` reaches about ``2 * target`` programs, keeping
    at least ``min_steps`` steps per split (the launcher then snaps it to a divisor of ``steps``)."""
    if tiles >= target:
        return 1
    return max(1, min(math.ceil(2 * target / tiles), steps // max(min_steps, 1)))


def _fuse_reduction(m: int, out_cols: int) -> bool:
    """Sum split partials in the last program (no second kernel) where that measured faster (run 4, H200): it saves
    0.3-1.1 us on outputs up to ~8K columns at M <= 16, and costs time on wide outputs (7B/32B gate_up forward: 4-15
    us) and at M = 64-128 (about 1 us)."""
    return m <= 16 and out_cols <= 8192


def default_fwd_config(m: int, n: int, k_pad: int, sms: int = 132) -> FwdConfig:
    """Heuristic forward launch configuration, following what the launch search picked (benchmarks/RESULTS.md):
    for M <= 8 the weight is the left mma operand against an 8-wide X^T (fewest instructions per weight), 64-row
    tiles on 2 warps or, for wide layers, 128-row tiles of two chunks on 4 warps; tensor-core tiles with BM = 16 up
    to M = 16; split-K to about 4 programs per SM while M is small; the weight as wgmma's register operand for
    large M."""
    kc = k_pad // CHUNK
    fused = _fuse_reduction(m, n)
    if m <= 8:
        bn, ch, warps = (128, 2, 4) if n >= 6144 else (64, 1, 2)
        split = _pick_split(-(-n // bn), kc // ch, 2 * sms, 4)
        return FwdConfig(2, 8, bn, ch, split, warps, 3, fused=fused)
    if m <= 16:
        split = _pick_split(-(-n // 64), kc, 2 * sms, 4)
        return FwdConfig(1, 16, 64, 1, split, 4, 3, fused=fused)
    if m <= 64:
        bm = 32 if m <= 32 else 64
        split = _pick_split(-(-m // bm) * -(-n // 64), kc, 2 * sms, 4)
        return FwdConfig(1, bm, 64, 1, split, 4, 3, fused=fused)
    if m <= 256:
        split = _pick_split(-(-m // 64) * -(-n // 128), kc, sms, 8)
        return FwdConfig(1, 64, 128, 1, split, 4, 3, fused=fused)
    # W as wgmma's register operand, 256 columns of X per tile: the pick at M = 1024 on 7 of the 8 7B / 32B shapes.
    return FwdConfig(2, 256, 128, 1, 1, 8, 3, group_m=16, asm=2)


def default_bwd_config(m: int, n: int, k_pad: int, sms: int = 132) -> BwdConfig:
    """Heuristic input-gradient launch configuration (split over N to about 3 programs per SM at small M)."""
    kc = k_pad // CHUNK
    fused = _fuse_reduction(m, k_pad)
    if m <= 64:
        bm = 16 if m <= 16 else 64
        split = _pick_split(-(-m // bm) * kc, -(-n // 64), 3 * sms // 2, 2)
        return BwdConfig(1, bm, 64, split, 4, 3, fused=fused)
    if m <= 256:
        split = _pick_split(-(-m // 128) * kc, -(-n // 64), sms, 4)
        return BwdConfig(1, 128, 64, split, 8, 3, fused=fused)
    return BwdConfig(1, 128, 64, 1, 8, 3)


# Launch configs chosen by `benchmarks/gemm_nvfp4.py --tune` for the Qwen2.5-7B, -14B and -32B layer shapes on H200s
# (benchmarks/RESULTS.md): forward M = 1 / 8 / 16 and 256 in run 7; forward M = 64-1024 and the input gradient at
# M = 1-128 in run 8 (with one- and two-dot candidates and one-warpgroup tiles; an entry marked "phase 32a" or "35a"
# replaced the earlier pick where it was at least 3% faster in that search); the input gradient at M = 1024 on an H100
# (run 1). M = 256 / 1024 lie below the slab dispatch's M (``LARGE_M_FWD`` / ``_BWD``), so those serve smaller M; a
# bucket also serves M up to 4x smaller. {("fwd"|"bwd", m_bucket, n, k_pad): config}; add more with
# ``load_tuned_configs``.
TUNED: dict[tuple[str, int, int, int], FwdConfig | BwdConfig] = {
    ("fwd", 1, 4608, 3584): FwdConfig(2, 8, 128, 1, 7, 4, 3),
    ("fwd", 8, 4608, 3584): FwdConfig(2, 8, 64, 1, 7, 2, 3),
    ("fwd", 16, 4608, 3584): FwdConfig(1, 16, 64, 1, 7, 4, 3),
    ("fwd", 64, 4608, 3584): FwdConfig(2, 64, 128, 1, 7, 8, 3, asm=2),
    ("fwd", 128, 4608, 3584): FwdConfig(2, 64, 64, 1, 2, 4, 3, asm=2, one_dot=True),  # run 8, phase 32a
    ("fwd", 256, 4608, 3584): FwdConfig(1, 128, 128, 1, 1, 8, 3),  # run 8, phase 32a
    ("fwd", 1024, 4608, 3584): FwdConfig(2, 128, 64, 1, 1, 4, 2, asm=2, one_dot=False),  # run 8, phase 32a
    ("bwd", 1, 4608, 3584): BwdConfig(1, 16, 64, 8, 4, 3),
    ("bwd", 8, 4608, 3584): BwdConfig(1, 16, 128, 9, 4, 3),
    ("bwd", 16, 4608, 3584): BwdConfig(1, 16, 128, 9, 4, 3),
    ("bwd", 64, 4608, 3584): BwdConfig(1, 64, 64, 4, 4, 3, one_dot=True),
    ("bwd", 128, 4608, 3584): BwdConfig(1, 64, 64, 4, 4, 3, one_dot=True),
    ("bwd", 1024, 4608, 3584): BwdConfig(1, 128, 64, 1, 8, 3),
    ("fwd", 1, 3584, 3584): FwdConfig(2, 8, 128, 1, 7, 4, 3),  # run 8, phase 35a
    ("fwd", 8, 3584, 3584): FwdConfig(2, 8, 32, 1, 4, 1, 3),
    ("fwd", 16, 3584, 3584): FwdConfig(1, 16, 64, 1, 7, 4, 3),
    ("fwd", 64, 3584, 3584): FwdConfig(2, 64, 64, 1, 4, 4, 3, asm=2, one_dot=True),  # run 8, phase 32a
    ("fwd", 128, 3584, 3584): FwdConfig(2, 64, 128, 1, 4, 8, 3, asm=2),
    ("fwd", 256, 3584, 3584): FwdConfig(2, 128, 64, 1, 1, 4, 4, asm=2),  # run 8, phase 32a
    ("fwd", 1024, 3584, 3584): FwdConfig(2, 256, 128, 1, 1, 8, 3, group_m=16, asm=2),
    ("bwd", 1, 3584, 3584): BwdConfig(1, 16, 128, 4, 4, 3),
    ("bwd", 8, 3584, 3584): BwdConfig(1, 16, 128, 4, 4, 3),
    ("bwd", 16, 3584, 3584): BwdConfig(1, 16, 128, 4, 4, 3),
    ("bwd", 64, 3584, 3584): BwdConfig(1, 64, 64, 4, 4, 3, one_dot=True),
    ("bwd", 128, 3584, 3584): BwdConfig(1, 64, 64, 2, 4, 3, one_dot=True),
    ("bwd", 1024, 3584, 3584): BwdConfig(1, 128, 64, 1, 8, 3),
    ("fwd", 1, 37888, 3584): FwdConfig(2, 8, 128, 2, 2, 4, 3),
    ("fwd", 8, 37888, 3584): FwdConfig(2, 8, 128, 2, 2, 4, 3),
    ("fwd", 16, 37888, 3584): FwdConfig(1, 16, 128, 2, 2, 4, 3),
    ("fwd", 64, 37888, 3584): FwdConfig(1, 64, 128, 1, 1, 4, 2),
    ("fwd", 128, 37888, 3584): FwdConfig(1, 64, 64, 1, 1, 4, 3),
    ("fwd", 256, 37888, 3584): FwdConfig(2, 256, 128, 1, 1, 8, 3, group_m=16, asm=2),
    ("fwd", 1024, 37888, 3584): FwdConfig(2, 256, 128, 1, 1, 8, 3, group_m=16, asm=2),
    ("bwd", 1, 37888, 3584): BwdConfig(1, 16, 128, 8, 4, 3),
    ("bwd", 8, 37888, 3584): BwdConfig(1, 16, 128, 8, 4, 3),
    ("bwd", 16, 37888, 3584): BwdConfig(1, 16, 128, 8, 4, 3),
    ("bwd", 64, 37888, 3584): BwdConfig(1, 64, 64, 8, 4, 3, one_dot=True),
    ("bwd", 128, 37888, 3584): BwdConfig(1, 64, 64, 4, 4, 3, one_dot=True),
    ("bwd", 1024, 37888, 3584): BwdConfig(1, 128, 64, 1, 8, 4),
    ("fwd", 1, 3584, 18944): FwdConfig(2, 8, 128, 1, 37, 4, 3),
    ("fwd", 8, 3584, 18944): FwdConfig(2, 8, 64, 1, 37, 2, 3),  # 37 splits of 4 chunks (run 4, with Marlin)
    ("fwd", 16, 3584, 18944): FwdConfig(1, 16, 64, 1, 4, 4, 3),
    ("fwd", 64, 3584, 18944): FwdConfig(2, 64, 128, 1, 4, 8, 3, asm=2),
    ("fwd", 128, 3584, 18944): FwdConfig(2, 128, 128, 1, 4, 8, 3, asm=2),
    ("fwd", 256, 3584, 18944): FwdConfig(2, 128, 64, 1, 1, 4, 4, asm=2),  # run 8, phase 32a
    ("fwd", 1024, 3584, 18944): FwdConfig(2, 256, 128, 1, 1, 8, 3, asm=2),
    ("bwd", 1, 3584, 18944): BwdConfig(1, 16, 128, 7, 4, 3),
    ("bwd", 8, 3584, 18944): BwdConfig(1, 16, 64, 8, 4, 3, fused=False),
    ("bwd", 16, 3584, 18944): BwdConfig(1, 16, 64, 8, 4, 3, fused=False),
    ("bwd", 64, 3584, 18944): BwdConfig(1, 64, 64, 2, 4, 3, one_dot=True),
    ("bwd", 128, 3584, 18944): BwdConfig(1, 64, 64, 1, 4, 3, one_dot=True),
    ("bwd", 1024, 3584, 18944): BwdConfig(1, 128, 64, 1, 8, 3),
    ("fwd", 1, 7168, 5120): FwdConfig(2, 8, 128, 2, 4, 4, 3),
    ("fwd", 8, 7168, 5120): FwdConfig(2, 8, 64, 1, 4, 2, 3),
    ("fwd", 16, 7168, 5120): FwdConfig(2, 16, 64, 1, 4, 2, 3),
    ("fwd", 64, 7168, 5120): FwdConfig(2, 64, 128, 1, 2, 4, 3, asm=2),
    ("fwd", 128, 7168, 5120): FwdConfig(2, 128, 128, 1, 2, 8, 3, asm=2),
    ("fwd", 256, 7168, 5120): FwdConfig(2, 128, 128, 1, 1, 8, 4, asm=2),
    ("fwd", 1024, 7168, 5120): FwdConfig(2, 256, 128, 1, 1, 8, 3, group_m=16, asm=2),
    ("bwd", 1, 7168, 5120): BwdConfig(1, 16, 64, 16, 4, 3),
    ("bwd", 8, 7168, 5120): BwdConfig(1, 16, 64, 16, 4, 3),
    ("bwd", 16, 7168, 5120): BwdConfig(1, 16, 64, 16, 4, 3),
    ("bwd", 64, 7168, 5120): BwdConfig(1, 64, 64, 8, 4, 2, one_dot=True),
    ("bwd", 128, 7168, 5120): BwdConfig(1, 64, 64, 4, 4, 2, one_dot=True),
    ("fwd", 1, 5120, 5120): FwdConfig(2, 8, 64, 1, 8, 2, 3),
    ("fwd", 8, 5120, 5120): FwdConfig(2, 8, 64, 1, 8, 2, 3),
    ("fwd", 16, 5120, 5120): FwdConfig(1, 16, 64, 1, 8, 4, 3),
    ("fwd", 64, 5120, 5120): FwdConfig(2, 64, 128, 1, 2, 4, 3, asm=2),
    ("fwd", 128, 5120, 5120): FwdConfig(2, 128, 128, 1, 2, 8, 3, asm=2),
    ("fwd", 256, 5120, 5120): FwdConfig(2, 128, 128, 1, 1, 8, 4, asm=2),
    ("fwd", 1024, 5120, 5120): FwdConfig(2, 128, 64, 1, 1, 4, 2, asm=2, one_dot=False),  # run 8, phase 32a
    ("bwd", 1, 5120, 5120): BwdConfig(1, 16, 64, 16, 4, 3),
    ("bwd", 8, 5120, 5120): BwdConfig(1, 16, 64, 16, 4, 3),
    ("bwd", 16, 5120, 5120): BwdConfig(1, 16, 64, 16, 4, 3),
    ("bwd", 64, 5120, 5120): BwdConfig(1, 64, 64, 8, 4, 2, one_dot=True),
    ("bwd", 128, 5120, 5120): BwdConfig(1, 64, 64, 4, 4, 3, one_dot=True),
    ("fwd", 1, 55296, 5120): FwdConfig(2, 8, 128, 2, 2, 4, 3, one_dot=True),  # run 8, phase 35a
    ("fwd", 8, 55296, 5120): FwdConfig(2, 8, 128, 2, 2, 4, 3, one_dot=True),  # run 8, phase 35a
    ("fwd", 16, 55296, 5120): FwdConfig(1, 16, 128, 2, 2, 4, 3),
    ("fwd", 64, 55296, 5120): FwdConfig(1, 64, 128, 1, 1, 4, 3),
    ("fwd", 128, 55296, 5120): FwdConfig(2, 128, 128, 1, 2, 8, 3, asm=2),
    ("fwd", 256, 55296, 5120): FwdConfig(2, 256, 128, 1, 1, 8, 3, group_m=16, asm=2),
    ("fwd", 1024, 55296, 5120): FwdConfig(2, 256, 128, 1, 1, 8, 3, group_m=16, asm=2),
    ("bwd", 1, 55296, 5120): BwdConfig(1, 16, 128, 16, 4, 3),
    ("bwd", 8, 55296, 5120): BwdConfig(1, 16, 128, 16, 4, 3),
    ("bwd", 16, 55296, 5120): BwdConfig(1, 16, 128, 16, 4, 3),
    ("bwd", 64, 55296, 5120): BwdConfig(1, 64, 64, 8, 4, 3, one_dot=True),
    ("bwd", 128, 55296, 5120): BwdConfig(1, 64, 64, 4, 4, 3, one_dot=True),
    ("fwd", 1, 5120, 27648): FwdConfig(2, 8, 64, 1, 8, 2, 3),
    ("fwd", 8, 5120, 27648): FwdConfig(2, 8, 64, 1, 8, 2, 3),
    ("fwd", 16, 5120, 27648): FwdConfig(1, 16, 64, 1, 8, 4, 3),
    ("fwd", 64, 5120, 27648): FwdConfig(2, 64, 128, 1, 8, 4, 3, asm=2),
    ("fwd", 128, 5120, 27648): FwdConfig(2, 64, 128, 1, 8, 8, 3, asm=2),
    ("fwd", 256, 5120, 27648): FwdConfig(2, 128, 128, 1, 1, 8, 4, asm=2),
    ("fwd", 1024, 5120, 27648): FwdConfig(2, 256, 128, 1, 1, 8, 3, asm=2),
    ("bwd", 1, 5120, 27648): BwdConfig(1, 16, 128, 4, 4, 3),
    ("bwd", 8, 5120, 27648): BwdConfig(1, 16, 128, 4, 4, 3),
    ("bwd", 16, 5120, 27648): BwdConfig(1, 16, 128, 4, 4, 3),
    ("bwd", 64, 5120, 27648): BwdConfig(1, 64, 64, 1, 4, 3, one_dot=True),
    ("bwd", 128, 5120, 27648): BwdConfig(1, 128, 64, 1, 8, 3, one_dot=True),
    ("fwd", 1, 27648, 5120): FwdConfig(2, 8, 128, 2, 4, 4, 3, one_dot=True),  # run 8, phase 35a
    ("fwd", 8, 27648, 5120): FwdConfig(2, 8, 128, 2, 4, 4, 3, one_dot=True),  # run 8, phase 35a
    ("fwd", 16, 27648, 5120): FwdConfig(1, 16, 128, 2, 4, 4, 3),  # run 8, phase 35a
    ("fwd", 64, 27648, 5120): FwdConfig(1, 64, 128, 1, 1, 4, 3),
    ("fwd", 128, 27648, 5120): FwdConfig(1, 64, 128, 1, 1, 4, 3),
    ("fwd", 256, 27648, 5120): FwdConfig(2, 256, 128, 1, 1, 8, 3, group_m=16, asm=2),  # run 8, phase 30e
    ("fwd", 1024, 27648, 5120): FwdConfig(2, 256, 128, 1, 1, 8, 3, group_m=16, asm=2),
    ("bwd", 1, 27648, 5120): BwdConfig(1, 16, 64, 16, 4, 3),
    ("bwd", 8, 27648, 5120): BwdConfig(1, 16, 64, 16, 4, 3),
    ("bwd", 16, 27648, 5120): BwdConfig(1, 16, 64, 16, 4, 3),
    ("bwd", 64, 27648, 5120): BwdConfig(1, 64, 64, 8, 4, 3, one_dot=True),
    ("bwd", 128, 27648, 5120): BwdConfig(1, 64, 64, 4, 4, 3, one_dot=True),
    ("fwd", 1, 5120, 13824): FwdConfig(2, 8, 128, 1, 9, 4, 3),
    ("fwd", 8, 5120, 13824): FwdConfig(2, 8, 64, 1, 9, 2, 3),
    ("fwd", 16, 5120, 13824): FwdConfig(2, 16, 32, 1, 9, 1, 3),
    ("fwd", 64, 5120, 13824): FwdConfig(2, 64, 128, 1, 9, 8, 3, asm=2),
    ("fwd", 128, 5120, 13824): FwdConfig(2, 128, 128, 1, 2, 8, 3, asm=2),
    ("fwd", 256, 5120, 13824): FwdConfig(2, 128, 128, 1, 1, 8, 4, asm=2),  # run 8, phase 32a
    ("fwd", 1024, 5120, 13824): FwdConfig(2, 256, 128, 1, 1, 8, 3, group_m=16, asm=2),
    ("bwd", 1, 5120, 13824): BwdConfig(1, 16, 128, 8, 4, 3),
    ("bwd", 8, 5120, 13824): BwdConfig(1, 16, 128, 8, 4, 3),
    ("bwd", 16, 5120, 13824): BwdConfig(1, 16, 64, 8, 4, 3, fused=False),
    ("bwd", 64, 5120, 13824): BwdConfig(1, 64, 64, 2, 4, 3, one_dot=True),
    ("bwd", 128, 5120, 13824): BwdConfig(1, 64, 64, 1, 4, 3, one_dot=True),
}


def _m_bucket(m: int) -> int:
    return 1 << max(0, (m - 1).bit_length())


# Keys between the powers of two that the warp-specialized kernels' tables may hold (runs 26-27, benchmarks/routes.py):
# up to 1024 multiples of 128, so that a 128- or 256-row tile of X comes in the same count at every M a key serves
# from the next key below it (every M = 385-512 has four 128-row tiles), and an entry measured at the key holds for
# them; 96 and 192 likewise for 32- / 64- / 128-row and 64- / 128-row tiles (M = 65-96: three 32-row tiles; M =
# 129-192: three 64-row tiles); 1280 / 1536 each span two or more tile counts, so their entries were checked at M
# between the keys; 1152 (run 33) bounds slab ranges where M = 1025-1152 leaves a 256-row tile mostly empty.
FINE_MS = (96, 192, 384, 640, 768, 896, 1152, 1280, 1536)


@functools.lru_cache(maxsize=4096)
def _keys_among(m: int, fine_ms: tuple[int, ...]) -> tuple[int, ...]:
    """The table keys an M may take, in order: its bucket (the next power of two), 2x and 4x that, and the keys of
    ``fine_ms`` between M and 4x its bucket."""
    b = _m_bucket(m)
    return tuple(sorted({b, 2 * b, 4 * b, *(v for v in fine_ms if m <= v <= 4 * b)}))


def _bucket_keys(m: int, fine: bool) -> tuple[int, ...]:
    return _keys_among(m, FINE_MS if fine else ())


def _nearest_bucket(table: dict, m: int, key, fine: bool = True):
    """The entry ``table[key(bucket)]`` of the smallest key present at or above M among M's bucket (the next power
    of two), 2x and 4x that (a config tuned for a larger M is valid for any M) and, with ``fine``, the ``FINE_MS``
    between them; else None. Also used by ``nvfp4_gemm_ws``."""
    for bucket in _bucket_keys(m, fine):
        if key(bucket) in table:
            return table[key(bucket)]
    return None


def _tuned(direction: str, m: int, n: int, k_pad: int):
    return _nearest_bucket(TUNED, m, lambda bucket: (direction, bucket, n, k_pad))


def fwd_config(m: int, n: int, k_pad: int, device: torch.device) -> FwdConfig:
    """The forward configuration ``nvfp4_matmul`` uses: a ``TUNED`` entry if present, else the heuristic."""
    return _tuned("fwd", m, n, k_pad) or default_fwd_config(m, n, k_pad, _sms(device))


def bwd_config(m: int, n: int, k_pad: int, device: torch.device) -> BwdConfig:
    """The input-gradient configuration ``nvfp4_matmul_grad_input`` uses."""
    return _tuned("bwd", m, n, k_pad) or default_bwd_config(m, n, k_pad, _sms(device))


def load_tuned_configs(table: dict[str, dict]) -> int:
    """Add ``{"fwd|m_bucket|n|k_pad": {config fields}}`` entries (as written by benchmarks/gemm_nvfp4.py --tune)
    to ``TUNED``, and "ws|..." / "wsbwd|..." / "wsw|..." / "wsbwdr|..." entries (benchmarks/gemm_ws.py; null:
    decline that kernel there) to ``nvfp4_gemm_ws.TUNED`` / ``TUNED_BWD`` / ``TUNED_WORDS`` / ``TUNED_BWD_ROWS``;
    returns how many."""
    for key, fields in table.items():
        direction, bucket, n, k_pad = key.split("|")
        if direction in ("ws", "wsbwd", "wsw", "wsbwdr"):
            from qerl.kernels import nvfp4_gemm_ws

            ws_table, ws_cls = {"ws": (nvfp4_gemm_ws.TUNED, nvfp4_gemm_ws.WsConfig),
                                "wsbwd": (nvfp4_gemm_ws.TUNED_BWD, nvfp4_gemm_ws.WsBwdConfig),
                                "wsw": (nvfp4_gemm_ws.TUNED_WORDS, nvfp4_gemm_ws.WsConfig),
                                "wsbwdr": (nvfp4_gemm_ws.TUNED_BWD_ROWS, nvfp4_gemm_ws.WsBwdConfig)}[direction]
            if fields is None and direction in ("wsw", "wsbwdr"):
                raise ValueError(f"{key!r}: a {'words' if direction == 'wsw' else 'rows'}-layout weight has no other "
                                 "fast path to decline to")
            ws_table[(int(bucket), int(n), int(k_pad))] = None if fields is None else ws_cls(**fields)
            continue
        if direction not in ("fwd", "bwd"):
            raise ValueError(f"unknown direction {direction!r} in key {key!r}: expected fwd, bwd, ws, wsbwd, wsw or "
                             "wsbwdr")
        cls = FwdConfig if direction == "fwd" else BwdConfig
        TUNED[(direction, int(bucket), int(n), int(k_pad))] = cls(**fields)
    return len(table)


def load_tuned_configs_file(path: str) -> int:
    """``load_tuned_configs`` from a tuned_configs.json; a clear error if the file is missing or malformed."""
    try:
        table = json.loads(open(path).read())
        return load_tuned_configs(table)
    except (OSError, ValueError, TypeError) as e:
        raise ValueError(
            f"cannot load NVFP4 kernel launch configs from {path!r} ({e}): give the tuned_configs.json written by "
            "benchmarks/gemm_nvfp4.py --tune, or unset QERL_TUNED_CONFIGS"
        ) from e


# Launch configs searched on the user's own GPU (benchmarks/gemm_nvfp4.py --tune) apply to every process that imports
# the kernels, vLLM's engine process included, when QERL_TUNED_CONFIGS names the file(s).
# Several files: separated like PATH entries.
for _path in filter(None, os.environ.get("QERL_TUNED_CONFIGS", "").split(os.pathsep)):
    load_tuned_configs_file(_path)


def _use_asm(want: bool | int, words: bool = False) -> int:
    """The kernels' ASM constexpr for a config's ``asm`` (False / True / 2; see ``_dequant``) on a weight of the
    "pairs" or (``words``) "words" layout. The words layout takes the plain-Triton path here: its PTX needs each
    thread to hold whole words in a known register order, which Triton's layout choice does not guarantee (the
    warp-specialized forward, whose layouts are explicit, decodes words with PTX)."""
    # Inline PTX cannot run under the interpreter; there the plain-Triton dequantization (same values) is used.
    if _interpreting() or words:
        return 0
    return int(want)


def require_forward_layout(w: KernelWeight) -> None:
    """Raise the one clear error for a "rows"-layout weight given to a forward kernel (which cannot read it)."""
    if w.rows:
        raise ValueError("a 'rows'-layout weight serves only the input gradient (nvfp4_matmul_grad_input on a Hopper "
                         "GPU): prepare the forward's copy with layout='pairs' or 'words'")


def _as_2d(t: torch.Tensor, last: int, name: str) -> torch.Tensor:
    if t.shape[-1] != last:
        raise ValueError(f"{name} last dim must be {last}, got {tuple(t.shape)}")
    t2 = t.reshape(-1, last)
    if t2.stride(-1) != 1:
        t2 = t2.contiguous()
    if t2.dtype != torch.bfloat16:
        t2 = t2.to(torch.bfloat16)
    return t2


def _out(out: torch.Tensor | None, m: int, n: int, like: torch.Tensor) -> torch.Tensor:
    if out is None:
        return torch.empty((m, n), dtype=torch.bfloat16, device=like.device)
    if out.shape != (m, n) or out.dtype != torch.bfloat16 or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous bf16 [{m}, {n}] tensor")
    return out


# From this many rows of X on, the fused tile loop loses to "dequantize a slab of W into a bounded bf16 scratch
# buffer, then cuBLAS" (measured on H100, benchmarks/RESULTS.md: forward geomean 0.59x vs 0.48x of BF16 at
# M = 1024, input gradient ahead at every shape from M = 512); the slab is re-used, so no full BF16 copy of W exists.
LARGE_M_FWD = 1024
LARGE_M_BWD = 512
# ... unless the product is small: below this many FLOP the slab path's fixed cost (its launches and stream switches)
# outweighs the tile loop's slower inner loop. Measured on an H200 at M = 1024 (run 7): the tile loop took 0.74-0.97x
# the slab path's time on the 7B qkv / o products (26-34 GFLOP), 1.10-2.15x on the 32B qkv / o (54-75 GFLOP).
SLAB_MIN_FLOP = 4e10

# At most 128 MiB of bf16 per slab buffer (two of them while slabs overlap, see OVERLAP_SLABS), and slabs of equal
# height: with 32 MiB slabs a 7B down projection (K = 18944) was cut into 885-row pieces whose M = 1024 products
# filled under half of the SMs (0.34x of BF16). A transient 128 MiB buffer is small next to the activations of an
# M >= 1024 pass.
SCRATCH_ELEMENTS = 64 * 2**20


# M ranges (inclusive) in which the default dispatch ("fwd" / "bwd" on the "pairs" layout, "words" the forward on
# that layout) takes the slab path although the warp-specialized kernel's table has an entry (or the rule below would
# take the tile loop): run 26's routes (benchmarks/routes.py, H200), where the slab path ran 1.07-1.83x faster than the
# table's config at M = 640-1024 (the forward) and 1.12-1.13x at M = 640 (the input gradient), and below a key that
# lost off the measured grid. {(direction, N, K): ((first M, last M), ...)}
SLAB_RANGES: dict[tuple[str, int, int], tuple[tuple[int, int], ...]] = {
    ("fwd", 4608, 3584): ((769, 896),),  # 7B qkv: 1.07x at 896 (M = 897-1024: TUNED's stream-K, run 32)
    ("fwd", 3584, 3584): ((513, 768),),  # 7B o: 1.30x / 1.18x at 640 / 768 (M = 897-1024: an H100 1.11x slower at 960)
    ("fwd", 7168, 5120): ((513, 896),),  # 14B / 32B qkv: 1.32x / 1.22x / 1.10x at 640 / 768 / 896
    ("fwd", 5120, 5120): ((769, 896),),  # 14B / 32B o: 1.83x at 896 (the tile loop's; above: TUNED's, run 32)
    ("words", 4608, 3584): ((897, 1024),),  # 7B qkv on "words": M = 1024's route (the tile loop's below it)
    ("words", 3584, 3584): ((513, 768),),  # 7B o on "words": 1.19x / 1.08x at 640 / 768
    ("words", 7168, 5120): ((513, 640),),  # 14B / 32B qkv on "words": 1.22x at 640
    # 7B qkv: 1.12x at 640; M = 1025-1152 (below the 256-row tiles' fifth whole one): run 33's M = 2048 stream-K key
    # 1.16x slower at 1152
    ("bwd", 4608, 3584): ((513, 640), (1025, 1152)),
    ("bwd", 37888, 3584): ((1025, 1536),),  # 7B gate_up: TUNED_BWD's M = 2048 entry 1.09-1.10x slower at 1152 / 1408
    ("bwd", 3584, 3584): ((513, 640), (1025, 1152)),  # 7B o: 1.13x at 640; run 33's M = 2048 key 1.10x slower at 1152
    ("bwd", 5120, 5120): ((1025, 1152),),  # 14B / 32B o: run 33's M = 2048 key 1.03x slower at 1152
}


def _slab_range(direction: str, m: int, n: int, k: int) -> bool:
    return any(lo <= m <= hi for lo, hi in SLAB_RANGES.get((direction, n, k), ()))


def _slab_path(m: int, n: int, k: int, min_rows: int) -> bool:
    """Whether a default-dispatched product of M = ``m`` rows against an N x K weight takes the slab path: past
    ``LARGE_M_FWD`` rows always (the tile loop's tables stop at M = 1024; at M = 1536 it took 1.87x the slab path's
    time on 7B o's forward, run 25), from ``min_rows`` on where the product reaches ``SLAB_MIN_FLOP``."""
    return m > LARGE_M_FWD or (m >= min_rows and 2 * m * n * k >= SLAB_MIN_FLOP)


DEQUANT_BN, DEQUANT_WARPS = 32, 4  # rows per program and warps of _dequant_rows_kernel
# Its programs' order: along K first, so the programs running at once write whole rows of the slab (run 25: 1.22-1.25x
# the bandwidth of the order along the rows on the 7B / 32B gate_up weights, 1.11-1.17x on down, 1.02-1.08x on qkv / o).
DEQUANT_CHUNKS_FIRST = True


def dequantize_rows(w: KernelWeight, row0: int, rows: int, out: torch.Tensor | None = None,
                    asm: bool = True, bn: int | None = None, num_warps: int | None = None,
                    chunk0: int = 0, chunks: int | None = None, chunks_first: bool | None = None) -> torch.Tensor:
    """Rows ``[row0, row0 + rows)`` of W as a bf16 [rows, K] tensor (``out``: a contiguous buffer to fill); with
    ``chunk0`` / ``chunks`` only K columns ``[chunk0 * 128, (chunk0 + chunks) * 128)`` (clipped to K), as a
    [rows, columns] tensor. ``chunks_first``: the programs' order (``_dequant_rows_kernel``; None:
    ``DEQUANT_CHUNKS_FIRST``)."""
    require_forward_layout(w)
    kc = w.k_pad // CHUNK
    chunks = kc - chunk0 if chunks is None else chunks
    if not (0 <= chunk0 and 0 < chunks and chunk0 + chunks <= kc):
        raise ValueError(f"chunks [{chunk0}, {chunk0 + chunks}) lie outside the weight's {kc} chunks of K")
    cols = min(w.k, (chunk0 + chunks) * CHUNK) - chunk0 * CHUNK
    if out is None:
        out = torch.empty((rows, cols), dtype=torch.bfloat16, device=w.codes.device)
    if out.shape != (rows, cols) or out.stride(1) != 1:
        raise ValueError(f"out must be a bf16 [{rows}, {cols}] tensor with unit column stride, got {tuple(out.shape)}")
    bn = bn or DEQUANT_BN
    chunks_first = DEQUANT_CHUNKS_FIRST if chunks_first is None else chunks_first
    grid = (chunks, -(-rows // bn)) if chunks_first else (-(-rows // bn), chunks)
    _dequant_rows_kernel[grid](w.codes, w.scales, w.global_scale, out, rows, w.k, row0, chunk0,
                               w.codes.stride(0), w.scales.stride(0), out.stride(0), BN=bn,
                               ASM=_use_asm(asm, w.words), WORDS=w.words, CHUNKS_FIRST=chunks_first,
                               num_warps=num_warps or DEQUANT_WARPS)
    return out


def _slab_rows(w: KernelWeight, min_count: int = 1) -> int:
    """Rows per slab: the fewest slabs (at least ``min_count``) that fit the scratch budget, split evenly (rounded up
    to whole chunks), so no slab is a thin remainder that leaves the GPU half idle."""
    most = max(CHUNK, SCRATCH_ELEMENTS // w.k // CHUNK * CHUNK)
    count = max(math.ceil(w.n / most), min_count)
    return min(most, math.ceil(math.ceil(w.n / count) / CHUNK) * CHUNK)


def _slab_chunks(w: KernelWeight, min_count: int = 1) -> int:
    """Chunks of K per column slab (``_slab_products``'s ``along="k"``): the fewest slabs (at least ``min_count``)
    whose [N, chunks * 128] blocks fit the scratch budget, split evenly."""
    kc = -(-w.k // CHUNK)
    most = max(1, SCRATCH_ELEMENTS // (w.n * CHUNK))
    count = max(math.ceil(kc / most), min_count)
    return min(most, math.ceil(kc / count))


# Forward products of at least OVERLAP_MIN_FLOP: the slabs are dequantized on a second stream into two alternating
# buffers while cuBLAS multiplies the previous slab on the caller's stream, so the dequantization pass (memory-bound)
# overlaps the products (compute-bound) instead of adding to them. Measured on two H200s (run 4, benchmarks/RESULTS.md)
# against one stream: up to 1.13x faster on forward products from ~2e11 FLOP on (7B gate_up / down and 32B o /
# gate_up / down at M = 4096, 7B gate_up at M = 1024), never slower there; smaller products lost on both machines (the
# events and stream switches add host work that they do not hide), and the input gradient (accumulating addmm
# products) was as often slower as faster: both keep one stream.
OVERLAP_SLABS = True
OVERLAP_MIN_FLOP = 2e11


class SlabPlan(NamedTuple):
    """How the slab path cuts W: ``along`` "n" (row slabs) or "k" (column slabs, input gradient only), at least
    ``min_count`` slabs (more where the scratch budget needs them), ``overlap``: dequantize the next slab on a second
    stream."""

    along: str = "n"
    min_count: int = 1
    overlap: bool = False


# Slab plans per (direction, N, K), each from the M given with it on, where one beat the default plan (run 25,
# benchmarks/RESULTS.md, benchmarks/slab_plans.py on an H200: every plan of every layer timed in turn at M = 4096, then
# the entries against the default plan at M = 2048 / 4096 / 8192; kept where they gained at least 2% over those Ms and
# lost no more than 3% at any). cuBLAS's speed on a slab depends on the slab's width more than the slab count
# suggests (7B down's forward: 1.12x on three overlapped slabs instead of two at M = 4096); the input gradient on
# column slabs writes each slab's columns of dX in one product over all of N instead of accumulating row slabs into dX.
SLAB_PLANS: dict[tuple[str, int, int], tuple[int, SlabPlan]] = {
    # (direction, N, K): (from M, plan)  # new / default plan's time at M = 2048 / 4096 / 8192
    ("fwd", 3584, 18944): (2048, SlabPlan("n", 3, True)),  # 7B down: 1.00 / 0.89 / 0.93
    ("fwd", 7168, 5120): (2048, SlabPlan("n", 1, False)),  # 14B / 32B qkv: 1.00 / 0.91 / 0.99
    ("fwd", 5120, 27648): (2048, SlabPlan("n", 4, True)),  # 32B down: 1.00 / 0.92 / 0.96
    ("bwd", 37888, 3584): (2048, SlabPlan("k", 1, True)),  # 7B gate_up: 0.93 / 0.92 / 1.00
    ("bwd", 3584, 18944): (4096, SlabPlan("k", 1, True)),  # 7B down: (1.05) / 0.95 / 0.90
    ("bwd", 5120, 13824): (2048, SlabPlan("k", 1, True)),  # 14B down: 0.95 / 0.95 / 0.95
    ("bwd", 5120, 27648): (2048, SlabPlan("k", 1, False)),  # 32B down: 0.91 / 0.91 / 0.93
}


def slab_plan(direction: str, m: int, n: int, k: int) -> SlabPlan:
    """The plan the default dispatch's slab path takes for an M-row product against an N x K weight."""
    from_m, plan = SLAB_PLANS.get((direction, n, k), (None, None))
    if plan is not None and m >= from_m:
        return plan._replace(overlap=plan.overlap and OVERLAP_SLABS)
    # The default: the fewest row slabs the scratch budget allows, overlapped for large forward products only.
    return SlabPlan("n", 1, direction == "fwd" and OVERLAP_SLABS and 2.0 * m * n * k >= OVERLAP_MIN_FLOP)


@functools.cache
def _side_stream(index: int) -> torch.cuda.Stream:
    return torch.cuda.Stream(device=index)


def _slab_products(w: KernelWeight, device: torch.device, product, overlap: bool = False, min_count: int = 1,
                   along: str = "n") -> None:
    """Call ``product(start, size, block)`` for every slab of W, in order, on the caller's stream: ``along="n"``
    row slabs (``block`` = W[start : start + size] as bf16 [size, K]), ``along="k"`` column slabs (``block`` =
    W[:, start : start + size] as bf16 [N, size]); at least ``min_count`` slabs where the weight allows. With
    ``overlap`` (CUDA only) the next slab is dequantized on a second stream meanwhile."""
    if along not in ("n", "k"):
        raise ValueError(f"along must be 'n' or 'k', got {along!r}")
    kc = -(-w.k // CHUNK)
    overlap = overlap and device.type == "cuda" and (w.n >= 2 * CHUNK if along == "n" else kc >= 2)
    # Overlapping needs two slabs at least: the first slab's dequantization is the only one nothing hides.
    min_count = max(min_count, 2 if overlap else 1)
    if along == "n":
        slab = _slab_rows(w, min_count)
        plan = [(n0, min(slab, w.n - n0)) for n0 in range(0, w.n, slab)]
        shape = (min(slab, w.n), w.k)
    else:
        per = _slab_chunks(w, min_count)
        plan = [(c0 * CHUNK, min(per * CHUNK, w.k - c0 * CHUNK)) for c0 in range(0, kc, per)]
        shape = (w.n, min(per * CHUNK, w.k))

    def fill(i: int, buffer: torch.Tensor) -> torch.Tensor:
        start, size = plan[i]
        if along == "n":
            return dequantize_rows(w, start, size, buffer[:size])
        return dequantize_rows(w, 0, w.n, buffer[:, :size], chunk0=start // CHUNK, chunks=-(-size // CHUNK))

    if not overlap:
        scratch = torch.empty(shape, dtype=torch.bfloat16, device=device)
        for i, (start, size) in enumerate(plan):
            product(start, size, fill(i, scratch))
        return
    main = torch.cuda.current_stream(device)
    side = _side_stream(device.index if device.index is not None else torch.cuda.current_device())
    buffers = [torch.empty(shape, dtype=torch.bfloat16, device=device) for _ in range(2)]
    blocks: list[torch.Tensor | None] = [None] * len(plan)
    ready = [torch.cuda.Event() for _ in plan]
    done = [torch.cuda.Event() for _ in plan]
    side.wait_stream(main)  # the inputs and the buffers' allocation come first (also the fork of a graph capture)

    def dequantize(i: int) -> None:
        with torch.cuda.stream(side):
            if i >= 2:
                side.wait_event(done[i - 2])  # this buffer held slab i - 2 until its product finished
            blocks[i] = fill(i, buffers[i % 2])
            ready[i].record(side)

    dequantize(0)
    for i, (start, size) in enumerate(plan):
        if i + 1 < len(plan):
            dequantize(i + 1)
        main.wait_event(ready[i])
        product(start, size, blocks[i])
        done[i].record(main)
    main.wait_stream(side)  # join: the buffers are released on the caller's stream only after the side stream's work


def _matmul_large_m(x2: torch.Tensor, w: KernelWeight, y: torch.Tensor, plan: SlabPlan | None = None) -> torch.Tensor:
    """``y = x2 @ W^T`` on row slabs of W (``plan`` None: ``slab_plan``'s)."""
    plan = plan or slab_plan("fwd", x2.shape[0], w.n, w.k)
    if plan.along != "n":
        raise ValueError("the forward's slab path cuts W into row slabs only (along='n')")
    _slab_products(w, x2.device, lambda n0, r, ws: torch.mm(x2, ws.t(), out=y[:, n0 : n0 + r]), plan.overlap,
                   plan.min_count)
    return y


def _grad_input_large_m(dy2: torch.Tensor, w: KernelWeight, dx: torch.Tensor,
                        plan: SlabPlan | None = None) -> torch.Tensor:
    """``dx = dy2 @ W`` on slabs of W (``plan`` None: ``slab_plan``'s): row slabs accumulate into ``dx``
    (``addmm_``), column slabs each write their own columns of ``dx`` in one product over all of N."""
    plan = plan or slab_plan("bwd", dy2.shape[0], w.n, w.k)
    along = plan.along

    def product(start: int, size: int, ws: torch.Tensor) -> None:
        if along == "k":
            torch.mm(dy2, ws, out=dx[:, start : start + size])
        elif start == 0:
            torch.mm(dy2[:, :size], ws, out=dx)
        else:
            dx.addmm_(dy2[:, start : start + size], ws)

    _slab_products(w, dy2.device, product, plan.overlap, plan.min_count, along)
    return dx


class LoRAEpilogue(NamedTuple):
    """A LoRA adapter's expand step to add in the GEMM's epilogue: ``y[:, slice s] += u[s] @ b[s]^T``.

    ``u`` fp32 [slices, M, R] is the shrink's output (``x @ A_s^T``, already scaled; rows of tokens without an adapter
    are zero), ``b`` one bf16 [N_s, R] tensor per output slice (q/k/v or gate/up shards of a fused layer; the
    ``N_s`` sum to the layer's N). This is the layout vLLM's LoRA layers hold (qerl/rollout/vllm_lora_fusion.py)."""

    u: torch.Tensor
    b: tuple[torch.Tensor, ...]


MAX_LORA_SLICES = 3


def _lora_fits(lora: LoRAEpilogue, m: int, n: int, bn: int) -> bool:
    """Whether the kernel can add ``lora`` itself: every output tile in one slice (inner slice boundaries on tile
    boundaries), at most ``MAX_LORA_SLICES`` slices, and operands in the layout it reads."""
    sizes = [b.shape[0] for b in lora.b]
    bounds = list(itertools.accumulate(sizes))
    return (len(sizes) <= MAX_LORA_SLICES and bounds[-1] == n and all(e % bn == 0 for e in bounds[:-1])
            and tuple(lora.u.shape[:2]) == (len(sizes), m) and lora.u.dtype == torch.float32
            and lora.u.is_contiguous()
            and all(b.dtype == torch.bfloat16 and b.shape[1] == lora.u.shape[2] and b.stride(1) == 1 for b in lora.b))


# Up to this many rows ``add_bias_and_lora_`` adds the bias and the adapter's expand in one launch of
# ``_bias_lora_kernel`` (decode batches: in place of a cast and one ``addmm_`` per slice, up to five launches, each a
# few microseconds at these sizes); above it, in torch (prefill: cuBLAS's tiles win).
EPILOGUE_KERNEL_MAX_M = 256
_EPILOGUE_BN = 64


def add_bias_and_lora_(y: torch.Tensor, bias: torch.Tensor | None, lora: LoRAEpilogue | None) -> torch.Tensor:
    """The epilogue after a GEMM that did not take it, in place on ``y`` [M, N] (no copy: a prefill's output can be
    hundreds of MB): the bias, then each slice's ``u_s @ B_s^T`` with u rounded to B's dtype and accumulated in fp32,
    as vLLM's own expand does. Up to ``EPILOGUE_KERNEL_MAX_M`` rows one kernel (``_bias_lora_kernel``; on CUDA, or
    under Triton's interpreter) where the slices end on its tiles, else torch (``addmm_`` per slice)."""
    if bias is None and lora is None:
        return y
    if not _epilogue_kernel_fits(y, bias, lora):
        if bias is not None:
            y += bias
        if lora is not None:
            u = lora.u.to(lora.b[0].dtype)  # one cast for all slices (one launch, not one per slice)
            start = 0
            for s, b in enumerate(lora.b):
                y[:, start : start + b.shape[0]].addmm_(u[s], b.T)
                start += b.shape[0]
        return y
    _launch_bias_lora(y, bias, lora)
    return y


def _epilogue_kernel_fits(y: torch.Tensor, bias: torch.Tensor | None, lora: LoRAEpilogue | None) -> bool:
    """Whether ``_bias_lora_kernel`` adds ``bias`` and ``lora`` to ``y`` (``add_bias_and_lora_``'s rules)."""
    m, n = y.shape
    return (0 < m <= EPILOGUE_KERNEL_MAX_M and y.is_contiguous() and (_interpreting() or triton_available(y.device))
            and (bias is None or (bias.shape == (n,) and bias.is_contiguous()))
            and (lora is None or _lora_fits(lora, m, n, _EPILOGUE_BN)))


def _launch_bias_lora(y: torch.Tensor, bias: torch.Tensor | None, lora: LoRAEpilogue | None,
                      ws: torch.Tensor | None = None, split: int = 0) -> None:
    """One launch of ``_bias_lora_kernel`` on ``y`` (where ``_epilogue_kernel_fits``); with ``ws`` [split, M, N]
    its partials summed into y first."""
    m, n = y.shape
    slices = 0 if lora is None else len(lora.b)
    bs = [] if lora is None else list(lora.b)
    bs += [y] * (MAX_LORA_SLICES - len(bs))
    ends = ([] if lora is None else list(itertools.accumulate(b.shape[0] for b in lora.b))) + [0, 0]
    rank = 1 if lora is None else lora.u.shape[2]
    bm = 16 if m <= 16 else 32 if m <= 32 else 64
    grid = (-(-n // _EPILOGUE_BN), -(-m // bm))
    _bias_lora_kernel[grid](y, y if bias is None else bias, y if lora is None else lora.u, *bs[:3], ends[0],
                            ends[1], m, n, y.stride(0), 0 if lora is None else lora.u.stride(0),
                            *(b.stride(0) for b in bs[:3]), y if ws is None else ws, m * n, BM=bm,
                            BN=_EPILOGUE_BN, HAS_BIAS=bias is not None, SLICES=slices, R=rank,
                            RC=_rank_chunk(rank, True), SPLIT=0 if ws is None else split, num_warps=4)


def _lora_dot(cfg: FwdConfig) -> bool:
    """Whether the epilogue's product runs on tensor cores: tl.dot wants 16-row tiles in MODE 1; MODE 2 multiplies
    by an 8-wide u^T as its main loop does by X^T. MODE 0 (CUDA-core GEMV, BM <= 4) uses FMAs."""
    return (cfg.mode == 1 and cfg.bm >= 16) or (cfg.mode == 2 and cfg.bm >= 8)


def _rank_chunk(r: int, dot: bool) -> int:
    """Columns of the rank handled per step of ``_lora_tile``: a power of two dividing R (vLLM's ranks include
    320); for tensor cores 16-64 (a rank below 16 is zero-padded to one 16-wide step), for the FMA path at most 8
    (its [BN, BM, chunk] product lives in registers)."""
    low = r & -r
    return max(16, min(low, 64)) if dot else min(low, 8)


# With an adapter's expand (``lora``), from this many rows on ``nvfp4_matmul`` runs the warp-specialized kernel where
# its table holds a config and adds the expand after it (``add_bias_and_lora_``), instead of the Triton kernel with
# the expand in its epilogue. vLLM 14B rank-32 rollouts (benchmarks/RESULTS.md, run 10): batch 32 1.23x over BF16
# this way against 0.97x with the epilogue at every M (the Triton tiles there are the M = 64 bucket's); batch 8 keeps
# the epilogue (1.68x).
LORA_WS_MIN_M = 17


def nvfp4_matmul(
    x: torch.Tensor, w: KernelWeight, config: FwdConfig | None = None, out: torch.Tensor | None = None,
    bias: torch.Tensor | None = None, lora: LoRAEpilogue | None = None,
) -> torch.Tensor:
    """``x @ W^T`` (+ ``bias``, + a LoRA adapter's expand ``lora``) for ``x`` [..., K] (bf16; other float dtypes
    are cast) and an NVFP4 ``w`` [N, K]: bf16 [..., N], fp32 accumulation, rounded once.

    Picks the kernel and its tiling by M = prod(x.shape[:-1]) (``config`` overrides); ``out`` ([M, N] bf16,
    contiguous) receives the result if given. The bias and ``lora`` are added in the kernel's epilogue (no extra
    launch) where the tiles allow it (``_lora_fits``), else by ``add_bias_and_lora_`` after it.
    """
    require_forward_layout(w)
    x2 = _as_2d(x, w.k, "x")
    m = x2.shape[0]
    y = _out(out, m, w.n, x2)
    if m == 0:
        return y.reshape(*x.shape[:-1], w.n)
    kc = w.k_pad // CHUNK
    if config is None and x2.is_cuda and _slab_range("words" if w.words else "fwd", m, w.n, w.k):
        y = add_bias_and_lora_(_matmul_large_m(x2, w, y), bias, lora)
        return y.reshape(*x.shape[:-1], w.n)
    if config is None and x2.is_cuda and (bias is not None or lora is not None):
        # The bias and the adapter's expand in the warp-specialized kernel's epilogue (one launch, not two) where
        # it has a config that hands each tile whole to one CTA (``nvfp4_gemm_ws.bias_lora_config``).
        from qerl.kernels import nvfp4_gemm_ws

        ws_cfg = nvfp4_gemm_ws.bias_lora_config(x2, w, bias, lora)
        if ws_cfg is not None:
            y = nvfp4_gemm_ws.ws_matmul(x2, w, ws_cfg, out=y, bias=bias, lora=lora)
            return y.reshape(*x.shape[:-1], w.n)
    if config is None and x2.is_cuda and (lora is None or m >= LORA_WS_MIN_M or w.words):
        # The warp-specialized Gluon kernel (Hopper) where its launch search beat this module's path; imported here
        # because it builds on this module. An adapter the block above could not put in its epilogue is added
        # after the kernel (``LORA_WS_MIN_M`` says from which M that pays against _fwd_kernel's epilogue; on the
        # "words" layout at every M: _fwd_kernel decodes words in plain Triton only).
        from qerl.kernels import nvfp4_gemm_ws

        ws_cfg = nvfp4_gemm_ws.pick(x2, w.n, w.k, w.k_pad, w.words)
        if ws_cfg is not None:
            y = nvfp4_gemm_ws.ws_matmul(x2, w, ws_cfg, out=y, after=(bias, lora))
            return y.reshape(*x.shape[:-1], w.n)
    # Large M: the slab path where the default dispatch takes it; on the words layout from LARGE_M_FWD on wherever
    # the warp-specialized kernel declined (its table's slab entries, or a device it cannot run on).
    if config is None and (_slab_path(m, w.n, w.k, LARGE_M_FWD) or (w.words and m >= LARGE_M_FWD)):
        y = add_bias_and_lora_(_matmul_large_m(x2, w, y), bias, lora)
        return y.reshape(*x.shape[:-1], w.n)
    if config is None:
        config = fwd_config(m, w.n, w.k_pad, x.device)
        if kc % config.ch:  # heuristics pick 2-chunk steps; an odd chunk count needs single-chunk steps
            config = config._replace(ch=1)
    cfg = config
    if kc % cfg.ch:
        raise ValueError(f"ch={cfg.ch} must divide the {kc} chunks of K")
    if bias is not None and (bias.shape != (w.n,) or not bias.is_contiguous()):
        raise ValueError(f"bias must be a contiguous [{w.n}] tensor, got {tuple(bias.shape)}")
    late_lora = lora if lora is not None and not _lora_fits(lora, m, w.n, cfg.bn) else None
    fused_lora = lora if late_lora is None else None
    split = _even_split(kc // cfg.ch, cfg.split_k)
    cps = kc // split
    grid = (-(-m // cfg.bm) * -(-w.n // cfg.bn), split)
    target, stride_split, counters = _split_target(y, split, grid[0], cfg.fused)
    lora_args, lora_strides, lora_const = _lora_launch_args(fused_lora, w.global_scale, x2, cfg)
    _fwd_kernel[grid](
        x2, w.codes, w.scales, w.global_scale, target, y, target if counters is None else counters,
        x2 if bias is None else bias, *lora_args,
        m, w.n, w.k, cps,
        x2.stride(0), w.codes.stride(0), w.scales.stride(0), w.n, stride_split, *lora_strides,
        **fwd_constexprs(cfg, split, counters is not None, w.k % CHUNK == 0, bias is not None, lora_const,
                         w.words),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **_reg_cap(cfg.maxnreg),
    )
    if split > 1 and counters is None:
        _reduce(target, y, split, None, late_lora)
    elif late_lora is not None:
        add_bias_and_lora_(y, None, late_lora)
    return y.reshape(*x.shape[:-1], w.n)


# Rows per block of ``interleave_gate_up``: wgmma's accumulator gives each thread rows r and r + 8 of a 16-row group,
# so a gate row and its up row 8 rows on meet in one thread's registers.
GLU_BLOCK = 8


def interleave_gate_up(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Rows of a gate and an up projection ([I, ...] each, I a multiple of 8; any per-row tensors: dense weights, the
    codec's packed codes or scales) as one [2I, ...] tensor of alternating blocks of 8 gate rows and the 8 up rows of
    the same outputs, the row order ``nvfp4_matmul_swiglu`` takes."""
    if gate.shape != up.shape or gate.shape[0] % GLU_BLOCK:
        raise ValueError(f"gate and up need the same shape with rows a multiple of {GLU_BLOCK}: "
                         f"{tuple(gate.shape)}, {tuple(up.shape)}")
    blocks = (gate.shape[0] // GLU_BLOCK, GLU_BLOCK, *gate.shape[1:])
    return torch.stack([gate.reshape(blocks), up.reshape(blocks)], 1).reshape(2 * gate.shape[0], *gate.shape[1:])


# SiLU x up after the product in one Triton kernel on CUDA (``swiglu_interleaved``); False: the torch version (a
# switch for benchmarks/decode_nvfp4.py --torch-swiglu).
SWIGLU_KERNEL = True


def swiglu_interleaved(y: torch.Tensor) -> torch.Tensor:
    """SiLU(gate) * up from ``y`` [..., 2I] in ``interleave_gate_up``'s column order: [..., I], in fp32, cast back.
    A bf16 ``y`` on CUDA takes one Triton kernel (``swiglu_triton``); elsewhere torch (``swiglu_torch``)."""
    if y.is_cuda and y.dtype == torch.bfloat16 and triton is not None and SWIGLU_KERNEL:
        return swiglu_triton(y)
    return swiglu_torch(y)


def swiglu_torch(y: torch.Tensor) -> torch.Tensor:
    """``swiglu_interleaved`` in torch: an fp32 copy, SiLU, the product and the cast, four kernels on a GPU (with
    the copy to fp32 they moved ~6x the bytes of the bf16 input and output; run 29's decode-step profile: ~29 us per
    Qwen2.5-7B layer at M = 100)."""
    v = y.float().unflatten(-1, (-1, 2, GLU_BLOCK))
    return (torch.nn.functional.silu(v[..., 0, :]) * v[..., 1, :]).flatten(-2).to(y.dtype)


def swiglu_triton(y: torch.Tensor) -> torch.Tensor:
    """``swiglu_interleaved`` for a bf16 ``y`` in one Triton kernel: each row's gate and up read once as bf16, the
    output written once. The output is the down projection's X, so its storage holds whole tiles of rows
    (``nvfp4_gemm_ws.padded_empty``, as SiLU x up's kernel epilogue leaves it)."""
    from qerl.kernels.nvfp4_gemm_ws import padded_empty

    if y.shape[-1] % (2 * GLU_BLOCK):
        raise ValueError(f"SiLU x up needs whole blocks of {GLU_BLOCK} gate and {GLU_BLOCK} up columns, "
                         f"not {y.shape[-1]} columns")
    y2 = y.reshape(-1, y.shape[-1])
    if y2.stride(-1) != 1:
        y2 = y2.contiguous()
    m, inter = y2.shape[0], y2.shape[1] // 2
    out = padded_empty(m, inter, y2)
    if m:
        block = 1024
        _swiglu_kernel[(m, triton.cdiv(inter, block))](y2, out, inter, y2.stride(0), out.stride(0), BLOCK=block,
                                                      GLU=GLU_BLOCK, num_warps=4, **launch_options(y2.device))
    return out.reshape(*y.shape[:-1], inter)


if triton is not None:
    from qerl.kernels.pdl import grid_dependency

    @triton.jit
    def _swiglu_kernel(y_ptr, out_ptr, inter, stride_y, stride_o, BLOCK: tl.constexpr, GLU: tl.constexpr,
                       PDL: tl.constexpr = False):
        """Row ``program_id(0)``, output columns ``program_id(1) * BLOCK ..``: column c's gate is y's column
        (c // GLU) * 2 GLU + c % GLU, its up the column GLU after it (``interleave_gate_up``). ``PDL``: between two
        projections of a decode step (``qerl.kernels.pdl``)."""
        grid_dependency(PDL)
        row = tl.program_id(0).to(tl.int64)
        c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = c < inter
        src = y_ptr + row * stride_y + (c // GLU) * (2 * GLU) + c % GLU
        gate = tl.load(src, mask=mask, other=0.0).to(tl.float32)
        up = tl.load(src + GLU, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * stride_o + c, (gate / (1.0 + tl.exp(-gate)) * up).to(tl.bfloat16), mask=mask)


def nvfp4_matmul_swiglu(x: torch.Tensor, w: KernelWeight) -> torch.Tensor:
    """SiLU(x @ G^T) * (x @ U^T) for an NVFP4 ``w`` whose rows interleave G and U (``interleave_gate_up``, e.g. a
    Qwen2 MLP's gate_proj and up_proj): bf16 [..., N / 2]. Where the forward runs the warp-specialized kernel with each
    tile summed in one CTA (the table's config as it is, ``nvfp4_gemm_ws.epilogue_config``: Hopper, decode-sized M),
    the kernel applies it as it stores the tile: no second kernel, and half the output written; elsewhere it follows
    ``nvfp4_matmul``."""
    if w.n % (2 * GLU_BLOCK):
        raise ValueError(f"a weight of interleaved gate and up rows has a multiple of {2 * GLU_BLOCK} rows, not {w.n}")
    x2 = _as_2d(x, w.k, "x")
    if x2.is_cuda and x2.shape[0] > 0:
        from qerl.kernels import nvfp4_gemm_ws

        cfg = nvfp4_gemm_ws.epilogue_config(x2, w, reshape=False)  # else the product, then SiLU x up
        if cfg is not None:
            return nvfp4_gemm_ws.ws_matmul(x2, w, cfg, glu=True).reshape(*x.shape[:-1], w.n // 2)
    return swiglu_interleaved(nvfp4_matmul(x2, w)).reshape(*x.shape[:-1], w.n // 2)


NO_LORA_CONSTEXPRS = {"LORA_SLICES": 0, "LORA_R": 1, "LORA_RC": 1, "LORA_DOT": False}


def fwd_constexprs(cfg: FwdConfig, split: int, fused: bool, even_k: bool, bias: bool, lora: dict,
                   words: bool = False) -> dict:
    """``_fwd_kernel``'s compile-time parameters for a launch of ``cfg`` with ``split`` K splits (``fused``: summed
    by the last program) and ``lora`` from ``lora_constexprs`` on a weight of the "pairs" or (``words``) "words"
    layout; shared with ``qerl.kernels.aot``."""
    return dict(BM=cfg.bm, BN=cfg.bn, CH=cfg.ch, MODE=cfg.mode, ASM=_use_asm(cfg.asm, words), GROUP_M=cfg.group_m,
                EVEN_K=even_k, OUT_F32=split > 1, FUSED=fused, HAS_BIAS=bias, ONE_DOT=one_dot(cfg), WORDS=words,
                **lora)


def bwd_constexprs(cfg: BwdConfig, split: int, fused: bool, even_n: bool, words: bool = False) -> dict:
    """``_bwd_kernel``'s compile-time parameters for a launch of ``cfg`` with ``split`` N splits; shared with
    ``qerl.kernels.aot``."""
    return dict(BM=cfg.bm, BN=cfg.bn, MODE=cfg.mode, ASM=_use_asm(cfg.asm, words), GROUP_M=cfg.group_m,
                EVEN_N=even_n, OUT_F32=split > 1, FUSED=fused, ONE_DOT=cfg.one_dot and cfg.mode == 1, WORDS=words)


def lora_constexprs(cfg: FwdConfig, slices: int, rank: int) -> dict:
    """``_fwd_kernel``'s compile-time LoRA epilogue parameters for ``slices`` output slices of rank ``rank``
    (``NO_LORA_CONSTEXPRS`` without an adapter); also used by ``qerl.kernels.aot``."""
    if slices == 0:
        return NO_LORA_CONSTEXPRS
    dot = _lora_dot(cfg)
    return {"LORA_SLICES": slices, "LORA_R": rank, "LORA_RC": _rank_chunk(rank, dot), "LORA_DOT": dot}


def _lora_launch_args(lora: LoRAEpilogue | None, f32_dummy: torch.Tensor, bf16_dummy: torch.Tensor, cfg: FwdConfig):
    """Pointer arguments (u, B_0..B_2, slice ends), strides and constexprs of ``_fwd_kernel``'s LoRA epilogue;
    dummies of fixed dtypes when there is none (so the kernel's signature, hence its compiled variant, stays the
    same)."""
    if lora is None:
        return (f32_dummy, bf16_dummy, bf16_dummy, bf16_dummy, 0, 0), (0, 0, 0, 0), NO_LORA_CONSTEXPRS
    bs = list(lora.b) + [lora.b[0]] * (MAX_LORA_SLICES - len(lora.b))
    ends = list(itertools.accumulate(b.shape[0] for b in lora.b)) + [0, 0]
    return ((lora.u, *bs, ends[0], ends[1]), (lora.u.stride(0), *(b.stride(0) for b in bs)),
            lora_constexprs(cfg, len(lora.b), lora.u.shape[2]))


def nvfp4_matmul_grad_input(
    dy: torch.Tensor, w: KernelWeight, config: BwdConfig | None = None, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Input gradient ``dy @ W`` for ``dy`` [..., N] (bf16) and an NVFP4 ``w`` [N, K]: bf16 [..., K]."""
    dy2 = _as_2d(dy, w.n, "dy")
    m = dy2.shape[0]
    dx = _out(out, m, w.k, dy2)
    if m == 0:
        return dx.reshape(*dy.shape[:-1], w.k)
    kc = w.k_pad // CHUNK
    if config is None and dy2.is_cuda and not w.words and not w.rows and _slab_range("bwd", m, w.n, w.k):
        return _grad_input_large_m(dy2, w, dx).reshape(*dy.shape[:-1], w.k)
    if config is None and dy2.is_cuda:
        from qerl.kernels import nvfp4_gemm_ws  # see nvfp4_matmul

        ws_cfg = None if w.words else nvfp4_gemm_ws.pick_grad_input(dy2, w.n, w.k, w.k_pad, w.rows)
        if ws_cfg is not None:
            dx = nvfp4_gemm_ws.ws_matmul_grad_input(dy2, w, ws_cfg, out=dx)
            return dx.reshape(*dy.shape[:-1], w.k)
    if w.rows:
        raise ValueError(f"the 'rows' layout is read only by the warp-specialized input-gradient kernel (a Hopper GPU, "
                         f"N % 32 == 0, an M its table covers; here M={m}, N={w.n}, config={config}): use the "
                         "layout='pairs' copy of the weight for this product")
    if config is None and _slab_path(m, w.n, w.k, LARGE_M_BWD):
        return _grad_input_large_m(dy2, w, dx).reshape(*dy.shape[:-1], w.k)
    if config is None:
        config = bwd_config(m, w.n, w.k_pad, dy.device)
    cfg = config
    n_steps = -(-w.n // cfg.bn)
    split = _even_split(n_steps, cfg.split_n)
    per = n_steps // split  # BN steps of N per split
    grid = (-(-m // cfg.bm) * kc, split)
    target, stride_split, counters = _split_target(dx, split, grid[0], cfg.fused)
    _bwd_kernel[grid](
        dy2, w.codes, w.scales, w.global_scale, target, dx, target if counters is None else counters,
        m, w.n, w.k, per,
        dy2.stride(0), w.codes.stride(0), w.scales.stride(0), w.k, stride_split,
        **bwd_constexprs(cfg, split, counters is not None, w.n % cfg.bn == 0, w.words),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    if split > 1 and counters is None:
        _reduce(target, dx, split)
    return dx.reshape(*dy.shape[:-1], w.k)


def _split_target(dest: torch.Tensor, split: int, tiles: int, fused: bool, cols: int | None = None):
    """``(target, stride_split, counters)`` for a launch writing ``dest`` [M, cols]: ``dest`` itself without a split,
    else an fp32 [split, M, cols] workspace of partials (``cols``: the product's columns where the epilogue stores
    fewer, e.g. SiLU x up), with the tile counters when the kernel sums them itself (``fused``) or None when
    ``_reduce`` must (not fused, or no counters during a graph capture)."""
    if split == 1:
        return dest, 0, None
    cols = dest.shape[1] if cols is None else cols
    ws = torch.empty((split, dest.shape[0], cols), dtype=torch.float32, device=dest.device)
    return ws, dest.shape[0] * cols, _split_counters(dest.device, tiles) if fused else None


def _reg_cap(maxnreg: int | None) -> dict:
    # A CUDA compile option; the CPU interpreter has no registers to cap.
    return {} if maxnreg is None or _interpreting() else {"maxnreg": maxnreg}


def _even_split(steps: int, want: int) -> int:
    """The divisor of ``steps`` closest to ``want`` (in log scale): every split gets the same number of steps, so
    kernels loop a host-known count with no tail (and no data-dependent loop bounds)."""
    if want <= 1:
        return 1
    divisors = [d for d in range(1, steps + 1) if steps % d == 0]
    return min(divisors, key=lambda d: (abs(math.log(d / want)), -d))


# One zeroed int32 counter per output tile for the fused split reductions, per device. Each launch leaves them zero
# again, so launches on one stream (eager or CUDA-graph replays) share them; launches of these kernels running
# concurrently on two streams of one device would not, and need FwdConfig/BwdConfig(fused=False).
_COUNTERS: dict[tuple[str, int | None], torch.Tensor] = {}
# Buffers replaced by larger ones stay allocated: CUDA graphs captured with them still write there on replay.
_RETIRED_COUNTERS: list[torch.Tensor] = []
COUNTERS_RESERVE = 1 << 16  # tiles reserve_split_counters makes room for (256 KiB of int32)


def _split_counters(device: torch.device, tiles: int) -> torch.Tensor | None:
    """The device's counter buffer (at least ``tiles`` long), or None while a CUDA graph is being captured and the
    buffer would have to be (re)allocated (that launch then reduces with a second kernel instead)."""
    key = (device.type, device.index if device.type != "cuda" or device.index is not None
           else torch.cuda.current_device())
    buf = _COUNTERS.get(key)
    if buf is None or buf.numel() < tiles:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return None
        size = max(tiles, 4096, 0 if buf is None else 2 * buf.numel())
        if buf is not None:
            _RETIRED_COUNTERS.append(buf)
        buf = _COUNTERS[key] = torch.zeros(size, dtype=torch.int32, device=device)
    return buf


def reserve_split_counters(device: torch.device, tiles: int = COUNTERS_RESERVE) -> None:
    """Allocate ``device``'s tile counters for ``tiles`` tiles now, for callers about to capture CUDA graphs: a
    capture cannot allocate them (its launches would fall back to a second reduce kernel), and under torch.compile's
    CUDA-graph trees, whose warm-up runs allocate from the graphs' memory pool, a buffer the launcher keeps between
    calls would be a live allocation the pool does not track (torch refuses to record then)."""
    _split_counters(device, tiles)


# False: ``_reduce`` sums the partials and then adds a bias and an expand in two launches, as before run 47 (a switch
# for benchmarks/rollout_hf.py --split-epilogue-compare).
REDUCE_WITH_EPILOGUE = True


def _reduce(ws: torch.Tensor, out: torch.Tensor, split: int, bias: torch.Tensor | None = None,
            lora: LoRAEpilogue | None = None) -> None:
    """``out`` [M, N] bf16 = the sum of the fp32 partials ``ws`` [split, M, N] (+ ``bias``, + ``lora``'s expand, as
    ``add_bias_and_lora_`` adds them): with an epilogue its kernel sums the partials itself where it takes them (one
    launch and one rounding; 7B rollouts with a rank-32 adapter run two such products a layer at batch 32-64, where
    this gave 0.5-0.8% more tokens a second, benchmarks/RESULTS.md, run 47), else the sum's kernel, then the
    epilogue."""
    if REDUCE_WITH_EPILOGUE and (bias is not None or lora is not None) and _epilogue_kernel_fits(out, bias, lora):
        _launch_bias_lora(out, bias, lora, ws, split)
        return
    numel = out.numel()
    block = 1024
    _reduce_kernel[(-(-numel // block),)](ws, out, numel, SPLIT=split, BLOCK=block, num_warps=4)
    add_bias_and_lora_(out, bias, lora)


class NVFP4MatmulFn(torch.autograd.Function):
    """y = x @ W^T + bias with a frozen NVFP4 W: gradients for x and bias only. ``rows``: the same W in the input
    gradient's "rows" layout, which the backward takes where the warp-specialized kernel's table covers the product
    (else ``weight``)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: KernelWeight, bias: torch.Tensor | None = None,
                rows: KernelWeight | None = None) -> torch.Tensor:
        y = nvfp4_matmul(x, weight)
        if bias is not None:
            y = y + bias.to(y.dtype)
        ctx.weight = weight
        ctx.rows = rows
        ctx.bias_dtype = None if bias is None else bias.dtype
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        dx = db = None
        if ctx.needs_input_grad[0]:
            dx = nvfp4_matmul_grad_input(dy, grad_input_weight(dy, ctx.weight, ctx.rows))
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            db = dy.reshape(-1, dy.shape[-1]).float().sum(0).to(ctx.bias_dtype)
        return dx, None, db, None


def grad_input_weight(dy: torch.Tensor, weight: KernelWeight, rows: KernelWeight | None) -> KernelWeight:
    """``rows`` (the "rows" layout) where the warp-specialized input-gradient kernel takes ``dy``'s product, else
    ``weight`` (also where ``SLAB_RANGES`` sends the product to the slab path, which reads "pairs")."""
    if rows is None or not dy.is_cuda:
        return weight
    from qerl.kernels import nvfp4_gemm_ws

    dy2 = _as_2d(dy, rows.n, "dy")  # as nvfp4_matmul_grad_input hands it to the kernel
    if _slab_range("bwd", dy2.shape[0], rows.n, rows.k):
        return weight
    return rows if nvfp4_gemm_ws.pick_grad_input(dy2, rows.n, rows.k, rows.k_pad, rows=True) is not None else weight

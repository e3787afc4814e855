"""The TMA descriptors' L2 promotion (the DRAM fetch size behind each TMA request) against Triton's fixed 128 bytes.

Triton 3.6 encodes every host-side tensor descriptor with ``CU_TENSOR_MAP_L2_PROMOTION_L2_128B``. The warp-specialized
forward reads a chunk of W as a box of 64-byte rows (one chunk's 128 codes of each row, the rows K / 2 bytes apart),
so each request fetches a 128-byte line of which the chunk uses half; the next chunk's box finds the other half in L2.
Whether larger fetches (256 bytes: four chunks of a row) or none stream W faster at decode M is measured here.

``promotion(name)`` re-encodes, at launch, each descriptor Triton's launcher builds (``cuTensorMapEncodeTiled`` on
the same parameters, only the promotion changed), in place in the descriptor object the launcher passes; a CUDA graph
captured inside it keeps those descriptors. Before any timing the script checks that re-encoding with 128 bytes
gives Triton's descriptor bit for bit (so the parameters are read right) and each variant's output against
dequantize-then-matmul in fp32 on a NaN-poisoned output. Then per cell (layer, direction, M) the default dispatch
under each promotion and cuBLAS's BF16 product are captured in their own graphs over weight copies L2 does not
serve and replayed in turn, round after round (``gemm_nvfp4.interleaved_us``), medians.

    python benchmarks/tma_l2_promotion.py --models 7b,32b --ms 1,8,16,64,128 --dirs fwd --layout words --out $OUT

Writes promotion.json and prints one line per cell: BF16 us, each promotion's us and its time over 128 bytes'.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gemm_nvfp4 import add_layer_args, checked, interleaved_us, layer_cells, run_setup  # noqa: E402

# CUtensorMapL2promotion (cuda.h)
PROMOTIONS = {"none": 0, "64B": 1, "128B": 2, "256B": 3}
TRITON_PROMOTION = "128B"  # what Triton 3.6's driver.c passes
_ACTIVE: list[int] = []  # the promotion in force (innermost ``promotion``), if any


def encode_params(shape: list[int], strides: list[int], block: list[int], elem_size: int,
                  fp4_padded: bool = False) -> tuple[list[int], list[int], list[int]]:
    """(global dims, global byte strides, box dims) in the driver's order (innermost first) for a descriptor of
    ``shape`` / element ``strides`` / ``block`` given outermost first, as Triton's ``fill_tma_descriptor`` builds
    them (the last stride entry is a placeholder the driver does not read for rank > 1)."""
    shape = list(shape)
    if fp4_padded:
        shape[-1] *= 2
    rank = len(shape)
    dims = list(reversed(shape))
    byte_strides = [0] * rank
    for i in range(rank - 1):
        byte_strides[rank - i - 2] = elem_size * strides[i]
    byte_strides[rank - 1] = dims[rank - 1] * (elem_size if rank == 1 else byte_strides[rank - 2])
    return dims, byte_strides, list(reversed(block))


def _encode(address: int, arg, metadata: dict, promotion: int) -> None:
    from triton.backends.nvidia import driver as nv

    from qerl.kernels.nvfp4_gemm_ws import _libcuda  # the driver library, opened once

    dims, byte_strides, box = encode_params(arg.shape, arg.strides, metadata["block_size"], metadata["elem_size"],
                                            metadata["fp4_padded"])
    rank = len(dims)
    u64, u32 = ctypes.c_uint64 * rank, ctypes.c_uint32 * rank
    res = _libcuda().cuTensorMapEncodeTiled(
        ctypes.c_void_p(address), ctypes.c_int(nv.TMA_DTYPE_DEVICE_TO_HOST[metadata["elem_type"]]),
        ctypes.c_uint32(rank), ctypes.c_void_p(arg.base.data_ptr()), u64(*dims), u64(*byte_strides), u32(*box),
        u32(*([1] * rank)), ctypes.c_int(0), ctypes.c_int(metadata["swizzle"]), ctypes.c_int(promotion),
        ctypes.c_int(1 if arg.padding == "nan" else 0))
    if res != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({res})")


def _map_address(desc) -> int:
    """The CUtensorMap inside Triton's descriptor object: its last 128 bytes (``_Alignas(128) CUtensorMap``)."""
    return id(desc) + type(desc).__basicsize__ - 128


def check_reencode(arg, metadata: dict, desc) -> None:
    """Re-encoding Triton's descriptor with its own promotion must reproduce it bit for bit."""
    buf = ctypes.create_string_buffer(256)
    aligned = -(-ctypes.addressof(buf) // 128) * 128
    _encode(aligned, arg, metadata, PROMOTIONS[TRITON_PROMOTION])
    mine, theirs = ctypes.string_at(aligned, 128), ctypes.string_at(_map_address(desc), 128)
    if mine != theirs:
        raise RuntimeError("re-encoding a descriptor with Triton's parameters does not reproduce it: this script "
                           "reads Triton's descriptor object or its parameters wrongly for this Triton version")


_CHECKED: set = set()


def _install() -> None:
    from triton.backends.nvidia import driver as nv

    if getattr(nv.make_tensordesc_arg, "_promotion_hook", False):
        return
    original = nv.make_tensordesc_arg

    def make_tensordesc_arg(arg, metadata):
        out = original(arg, metadata)
        if metadata is not None and _ACTIVE:
            key = (tuple(metadata["block_size"]), metadata["elem_size"], metadata["swizzle"])
            if key not in _CHECKED:
                check_reencode(arg, metadata, out[0])
                _CHECKED.add(key)
            _encode(_map_address(out[0]), arg, metadata, _ACTIVE[-1])
        return out

    make_tensordesc_arg._promotion_hook = True
    nv.make_tensordesc_arg = make_tensordesc_arg


@contextlib.contextmanager
def promotion(name: str):
    """Descriptors built inside (at launch, or while a graph is captured) fetch ``name`` from DRAM per request."""
    _install()
    _ACTIVE.append(PROMOTIONS[name])
    try:
        yield
    finally:
        _ACTIVE.pop()


def _under(name: str, fn):
    def call():
        with promotion(name):
            return fn()
    return call


def measure(model: str, layer: str, n: int, k: int, direction: str, m: int, layout: str, names: list[str],
            l2_bytes: int, budget_s: float | None) -> dict:
    from gemm_ws import cell_operands

    from qerl.kernels import nvfp4_gemm as kern

    fwd, wbs, kws, inp, out_shape, ref, out = cell_operands(model, layer, n, k, direction, m, l2_bytes, layout)
    run = kern.nvfp4_matmul if fwd else kern.nvfp4_matmul_grad_input
    errors = {}
    for name in names:
        err, finite = checked(lambda o, name=name: _under(name, lambda: run(inp, kws[0], out=o))(), out_shape, ref)
        if not finite or err > 1e-2:
            raise RuntimeError(f"{model} {layer} {direction} M={m} promotion {name}: wrong ({err:.3g}, {finite})")
        errors[name] = err
    if budget_s is None:  # --warm-only: compiled and checked
        return {"model": model, "layer": layer, "dir": direction, "layout": layout, "m": m, "rel_err": errors}
    variants = {"bf16": [(lambda wb=wb: torch.nn.functional.linear(inp, wb)) if fwd else
                         (lambda wb=wb: torch.matmul(inp, wb)) for wb in wbs]}
    for name in names:
        variants[name] = [_under(name, lambda kw=kw: run(inp, kw, out=out)) for kw in kws]
    variants["128B (repeat)"] = list(variants[TRITON_PROMOTION])  # the same calls in a graph of their own: the noise
    us = interleaved_us(variants, budget_s=budget_s)
    return {"model": model, "layer": layer, "dir": direction, "layout": layout, "m": m, "n": n, "k": k, "us": us,
            "rel_err": errors}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_layer_args(parser, "1,8,16,64,128")
    parser.add_argument("--layout", default="words", choices=("words", "pairs", "rows"))
    parser.add_argument("--promotions", default="none,64B,128B,256B")
    parser.add_argument("--budget", type=float, default=0.4, help="seconds of timed replays per cell")
    parser.add_argument("--warm-only", action="store_true", help="compile and check only (no timing)")
    parser.add_argument("--shard", default="0/1", help="I/N: only every N-th cell from the I-th (parallel warm-ups)")
    parser.add_argument("--out", default="benchmarks/out/tma_l2_promotion")
    args = parser.parse_args(argv)
    folder, record = run_setup(parser, args.out)
    names = args.promotions.split(",")
    if TRITON_PROMOTION not in names:
        parser.error(f"--promotions must include {TRITON_PROMOTION} (Triton's, the reference of every ratio)")
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    shard, shards = (int(v) for v in args.shard.split("/"))
    for index, (model, layer, n, k, direction, m) in enumerate(layer_cells(args)):
        if index % shards != shard:
            continue
        row = measure(model, layer, n, k, direction, m, args.layout, names, l2_bytes,
                      None if args.warm_only else args.budget)
        rows.append(row)
        if args.warm_only:
            print(f"{model} {layer} {direction} M={m}: checked {row['rel_err']}", flush=True)
            continue
        us = row["us"]
        ratios = " ".join(f"{nm} {us[nm]:.1f} ({us[nm] / us[TRITON_PROMOTION]:.3f})" for nm in names)
        print(f"{model} {layer} {direction} M={m}: bf16 {us['bf16']:.1f} | {ratios} | repeat "
              f"{us['128B (repeat)'] / us[TRITON_PROMOTION]:.3f}", flush=True)
    record["rows"] = rows
    (folder / "promotion.json").write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()

"""How fast a GPU streams an NVFP4 weight's code bytes in the box patterns a decode-shaped GEMM can read them in.

At M <= 16 the forward kernels only stream the weight, so their time is bounded by how fast DRAM serves the TMA
boxes they ask for. The kernels of ``qerl.kernels.nvfp4_gemm_ws`` copy one 128-element chunk per stage: a box of 64
(or 128) W rows by 64 code bytes, each row's 64 bytes at a stride of K / 2 bytes from the next (row-major codes).
This benchmark reads the same bytes with nothing else to do (a Triton loop of TMA loads summed into registers, so
only the copies cost time) in these patterns, with the same grid of programs (64-row tiles of W by splits of K):

- ``rows64`` / ``rows128`` / ``rows256``: row-major codes, boxes of 64 rows by 64 / 128 / 256 bytes (one, two or
  four chunks per copy);
- ``tiles64``: the same bytes stored tile by tile (every 64-row by 64-byte box contiguous, 4 KiB), boxes as rows64.

With ``--orders n`` each program instead takes one box column (a 64-byte chunk of every row: the input gradient's
order, which walks N in 64-row steps for one chunk of K), split along N.

The weight is read in enough copies that L2 holds none of it between reads (``--copies``: 3x L2 by default, as
``gemm_nvfp4.py`` times the GEMMs; a single copy of a weight near L2's size is partly served from it).

For each Qwen2.5 layer it reports GB/s per pattern, order and split, and next to them the GEMM the project ships at
M = 1 and 8 (``nvfp4_matmul`` on the "words" layout) and cuBLAS BF16 at M = 8, as bytes of weight per second.

    python benchmarks/read_pattern.py --models 7b --out benchmarks/out/read_pattern
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import SHAPES  # noqa: E402

PATTERNS = {"rows64": (64, False), "rows128": (128, False), "rows256": (256, False), "tiles64": (64, True)}
ROWS = 64  # W rows per box and per program, as the forward's 64-row tiles


def grid_of(n: int, k: int, box_bytes: int, split: int, order: str = "k") -> tuple[int, int, int]:
    """(programs along the outer dimension, programs along the walked one, boxes per program) for an N x K weight
    (K / 2 code bytes a row) read in boxes of ``ROWS`` rows by ``box_bytes`` bytes. Order "k": a program per 64-row
    tile walks K; "n": a program per box column walks N. The walked dimension is split into ``split`` runs of boxes
    (the last one shorter where they do not divide; ValueError if the boxes do not divide the row or leave a run
    empty)."""
    row_bytes = k // 2
    if n % ROWS or row_bytes % box_bytes:
        raise ValueError(f"N={n} must be a multiple of {ROWS} and K/2={row_bytes} of the box width {box_bytes}")
    if order not in ("k", "n"):
        raise ValueError(f"order {order!r}: 'k' or 'n'")
    outer, walked = (n // ROWS, row_bytes // box_bytes) if order == "k" else (row_bytes // box_bytes, n // ROWS)
    per = -(-walked // split)
    if per * (split - 1) >= walked:
        raise ValueError(f"{walked} boxes leave a run empty in {split} runs")
    return outer, split, per


def tile_major(codes: torch.Tensor, box_bytes: int) -> torch.Tensor:
    """Row-major codes [N, K / 2] -> the same bytes box by box ([N / 64 * boxes, box_bytes], each box's 64 rows
    consecutive): box (tile, b) holds rows tile * 64 .. + 63, bytes b * box_bytes .. + box_bytes - 1."""
    n, row_bytes = codes.shape
    boxes = row_bytes // box_bytes
    return codes.view(n // ROWS, ROWS, boxes, box_bytes).permute(0, 2, 1, 3).reshape(n // ROWS * boxes * ROWS,
                                                                                     box_bytes).contiguous()


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def read_boxes(desc, out_ptr, boxes_per_row, walked, boxes_per_prog, TILED: tl.constexpr, BOX: tl.constexpr,
                   STAGES: tl.constexpr, ALONG_N: tl.constexpr):
        outer = tl.program_id(0)
        part = tl.program_id(1)
        acc = tl.zeros([64, BOX], tl.int32)
        j0 = part * boxes_per_prog
        for i in tl.range(0, tl.minimum(boxes_per_prog, walked - j0), num_stages=STAGES):
            if ALONG_N:
                tile = j0 + i
                b = outer
            else:
                tile = outer
                b = j0 + i
            if TILED:
                acc += desc.load([(tile * boxes_per_row + b) * 64, 0]).to(tl.int32)
            else:
                acc += desc.load([tile * 64, b * BOX]).to(tl.int32)
        tl.store(out_ptr + outer * tl.num_programs(1) + part, tl.sum(acc))

    return read_boxes


def _time_us(fns: list) -> float:
    """Median microseconds per call, the calls cycling through ``fns`` (one per weight copy) in a CUDA graph."""
    from gemm_nvfp4 import bench

    return bench(fns) * 1e6


def measure(n: int, k: int, splits: list[int], stages: int, log, orders: tuple = ("k",), copies: int = 1,
            patterns: tuple = tuple(PATTERNS)) -> dict:
    from triton.tools.tensor_descriptor import TensorDescriptor

    read_boxes = _kernel()
    codes = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
    expect = int(codes.to(torch.int64).sum())
    res = {}
    for name in patterns:
        box, tiled = PATTERNS[name]
        src = tile_major(codes, box) if tiled else codes
        srcs = [src] + [src.clone() for _ in range(copies - 1)]
        descs = [TensorDescriptor.from_tensor(t, [ROWS, box]) for t in srcs]
        for order in orders:
            for split in splits:
                try:
                    outer, parts, per = grid_of(n, k, box, split, order)
                except ValueError:
                    continue
                out = torch.empty(outer * parts, dtype=torch.int32, device="cuda")
                boxes_per_row = (k // 2) // box
                walked = boxes_per_row if order == "k" else n // ROWS
                runs = [functools.partial(read_boxes[(outer, parts)], d, out, boxes_per_row, walked, per,
                                          TILED=tiled, BOX=box, STAGES=stages, ALONG_N=order == "n", num_warps=4)
                        for d in descs]
                key = f"{name}/split{split}" if order == "k" else f"{name}/n/split{split}"
                try:
                    runs[0]()
                except Exception as e:  # e.g. a box TMA cannot copy in one message: report it and go on
                    log(f"  {key:18s}: failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                    res[key] = {"error": f"{type(e).__name__}: {e}"[:500]}
                    continue
                if int(out.to(torch.int64).sum()) != expect:
                    raise RuntimeError(f"{key}: the boxes read do not sum to the weight's bytes")
                us = _time_us(runs)
                res[key] = {"us": us, "gbs": codes.numel() / us / 1e3, "programs": outer * parts}
                log(f"  {key:18s} ({outer * parts:5d} programs): {us:8.2f} us {codes.numel() / us / 1e3:7.0f} GB/s")
        del src, srcs, descs
    return res


def gemm_reference(n: int, k: int, log) -> dict:
    """The shipped forward (words layout) at M = 1 / 8 and cuBLAS BF16 at M = 8, as weight bytes per second (one
    copy of the weight: partly served from L2 where the weight is not far above L2's size)."""
    from qerl import nvfp4
    from qerl.kernels.nvfp4_gemm import nvfp4_matmul, prepare_weight

    w = torch.randn(n, k, device="cuda") * 0.02
    q = nvfp4.quantize(w)
    kw = prepare_weight(q.packed, q.scale, q.global_scale, layout="words")
    wb = w.to(torch.bfloat16)
    fp4_bytes = n * k // 2 + n * k // 16
    res = {}
    for m in (1, 8):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        us = _time_us([functools.partial(nvfp4_matmul, x, kw)])
        res[f"nvfp4_m{m}"] = {"us": us, "gbs": fp4_bytes / us / 1e3}
        log(f"  nvfp4 M={m}: {us:8.2f} us {fp4_bytes / us / 1e3:7.0f} GB/s (codes + scales)")
    x = torch.randn(8, k, device="cuda", dtype=torch.bfloat16)
    us = _time_us([lambda: torch.nn.functional.linear(x, wb)])
    res["bf16_m8"] = {"us": us, "gbs": 2 * n * k / us / 1e3}
    log(f"  bf16  M=8: {us:8.2f} us {2 * n * k / us / 1e3:7.0f} GB/s")
    return res


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="7b", help="comma-separated: 7b, 14b, 32b")
    p.add_argument("--splits", default="1,2,4,8", help="K splits tried per pattern (comma-separated)")
    p.add_argument("--stages", type=int, default=4, help="software-pipeline stages of the read loop")
    p.add_argument("--orders", default="k", help="comma-separated: k (a program walks K), n (walks N)")
    p.add_argument("--copies", type=int, default=0, help="weight copies cycled (0: enough for 3x L2)")
    p.add_argument("--patterns", default=",".join(PATTERNS), help="comma-separated, of " + ", ".join(PATTERNS))
    p.add_argument("--no-gemm", action="store_true", help="skip the shipped GEMM and cuBLAS references")
    p.add_argument("--out", default="benchmarks/out/read_pattern")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU (TMA loads)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    import triton

    meta = {"device": props.name, "sms": props.multi_processor_count, "date": time.strftime("%Y-%m-%d"),
            "torch": torch.__version__, "triton": triton.__version__, "command": " ".join(sys.argv),
            "stages": args.stages}
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    rows = []
    for model in args.models.split(","):
        for layer, n, k in SHAPES[model]:
            print(f"{model} {layer} N={n} K={k} ({n * k // 2 / 1e6:.1f} MB of codes)", flush=True)
            row = {"model": model, "layer": layer, "n": n, "k": k}
            copies = args.copies or max(1, math.ceil(3 * l2 / (n * k // 2)))
            row["copies"] = copies
            row.update(measure(n, k, [int(s) for s in args.splits.split(",")], args.stages, print,
                               tuple(args.orders.split(",")), copies, tuple(args.patterns.split(","))))
            if not args.no_gemm:
                row.update(gemm_reference(n, k, print))
            rows.append(row)
            (out / "read_pattern.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

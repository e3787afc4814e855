"""The large-M slab path piece by piece: where its time goes, and which slab plan is fastest per layer and M.

At M >= 1024 the default dispatch dequantizes W a slab at a time into a bounded bf16 buffer and multiplies each slab
with cuBLAS (``nvfp4_gemm._slab_products``). Per layer (Qwen2.5-7B / 14B / 32B shapes), M and direction, on the
trainer's "pairs" layout, this times:

- BF16: cuBLAS on a bf16 copy of W (as every benchmark here), and the default dispatch;
- plans: row slabs (1-6 of them; the input gradient accumulates them with ``addmm_``) on one stream or overlapped (a
  second stream dequantizes the next slab while cuBLAS multiplies this one), and for the input gradient column slabs
  (each one product over all of N into its own columns of dX, nothing accumulated);
- the pieces of the default plan: its dequantization alone (every slab into the buffer) and its products alone (on
  slabs of a bf16 W made beforehand).

Every plan is first checked on a NaN-poisoned output against dequantize-then-matmul in fp32. Times are medians of
CUDA-graph replays (weight copies that L2 does not serve) taken in turn, one replay of every variant per round, so
that the clock and temperature drift of these long compute-bound runs reach all of a cell's variants alike; the
default dispatch and each cell's fastest plan are also timed as back-to-back eager calls (the host's work per call
included, as a training step runs them).

    python benchmarks/slab_plans.py --models 7b,14b,32b --ms 1024,4096 --out $OUT
    python benchmarks/slab_plans.py --verify --ms 2048,4096,8192 --out $OUT   # against the plan before SLAB_PLANS

Writes slab_plans.json and prints one line per cell (and per plan).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import SHAPES, add_layer_args, checked, interleaved_us, run_setup  # noqa: E402

COUNTS = (1, 2, 3, 4, 6)


def eager_us(fns: list, calls: int = 24) -> float:
    """Microseconds per call of ``fns`` called in turn, back to back on the stream, without a graph."""
    for f in fns:
        f()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(calls):
        fns[i % len(fns)]()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def plans(kern, w, direction: str) -> list[dict]:
    """The distinct slab plans of ``w`` (by the slabs they cut, the stream use and the slab direction)."""
    seen, out = set(), []
    alongs = ("n", "k") if direction == "bwd" else ("n",)
    for along in alongs:
        for count in COUNTS:
            for overlap in (False, True):
                if along == "n":
                    size = kern._slab_rows(w, max(count, 2 if overlap else 1))
                    slabs = -(-w.n // size)
                else:
                    size = kern._slab_chunks(w, max(count, 2 if overlap else 1))
                    slabs = math.ceil(math.ceil(w.k / kern.CHUNK) / size)
                if overlap and slabs < 2:
                    continue
                key = (along, slabs, overlap)
                if key not in seen:
                    seen.add(key)
                    out.append({"along": along, "slabs": slabs, "overlap": overlap, "min_count": count})
    return out


def run_plan(kern, direction: str, plan: dict):
    """``f(inp, w, out)`` computing the product on ``plan``."""
    slab_plan = kern.SlabPlan(plan["along"], plan["min_count"], plan["overlap"])
    if direction == "fwd":
        return lambda x, w, y: kern._matmul_large_m(x, w, y, slab_plan)
    return lambda dy, w, dx: kern._grad_input_large_m(dy, w, dx, slab_plan)


def measure(model: str, layer: str, n: int, k: int, direction: str, m: int, l2_bytes: int, log,
            verify: bool = False, ws_bucket: int | None = None, dequant_order: bool = False) -> dict:
    from gemm_ws import cell_operands

    from qerl.kernels import nvfp4_gemm as kern

    fwd, wbs, kws, inp, out_shape, ref, out = cell_operands(model, layer, n, k, direction, m, l2_bytes)
    shipped = kern.nvfp4_matmul if fwd else kern.nvfp4_matmul_grad_input
    variants = {"bf16": [(lambda wb=wb: torch.nn.functional.linear(inp, wb)) if fwd else
                         (lambda wb=wb: torch.matmul(inp, wb)) for wb in wbs],
                "shipped": [lambda kw=kw: shipped(inp, kw, out=out) for kw in kws]}
    variants["shipped (repeat)"] = list(variants["shipped"])  # the same calls in a graph of their own: the noise
    checks = {"shipped": lambda o: shipped(inp, kws[0], out=o)}
    labels = {}
    if verify:  # the default dispatch against the plan it took before ``SLAB_PLANS`` (run 4's rule) only
        previous = {"along": "n", "slabs": None, "min_count": 1,
                    "overlap": fwd and 2.0 * m * n * k >= kern.OVERLAP_MIN_FLOP}
        # ... and against the slab path on ``SLAB_PLANS`` (where the dispatch now takes a warp-specialized kernel)
        slab = kern._matmul_large_m if fwd else kern._grad_input_large_m
        variants["slab path"] = [lambda kw=kw: slab(inp, kw, out) for kw in kws]
        checks["slab path"] = lambda o: slab(inp, kws[0], o)
        if dequant_order:  # ... and against the default dispatch with the other order of the dequantization's programs
            def other_order(kw, o):
                before = kern.DEQUANT_CHUNKS_FIRST
                kern.DEQUANT_CHUNKS_FIRST = not before  # read while the graph is captured
                try:
                    return shipped(inp, kw, out=o)
                finally:
                    kern.DEQUANT_CHUNKS_FIRST = before

            variants["other dequant order"] = [lambda kw=kw: other_order(kw, out) for kw in kws]
            checks["other dequant order"] = lambda o: other_order(kws[0], o)
    for plan in [previous] if verify else plans(kern, kws[0], direction):
        label = "previous" if verify else f"{plan['along']}{plan['slabs']}{'o' if plan['overlap'] else ''}"
        labels[label] = plan
        f = run_plan(kern, direction, plan)
        variants[label] = [lambda kw=kw, f=f: f(inp, kw, out) for kw in kws]
        checks[label] = lambda o, f=f: f(inp, kws[0], o)
    if ws_bucket is not None:  # the warp-specialized kernel on the config its table has for a smaller M
        from qerl.kernels import nvfp4_gemm_ws as ws

        table = ws.TUNED if fwd else ws.TUNED_BWD
        cfg = table.get((ws_bucket, n, kws[0].k_pad))
        if cfg is not None:
            run_ws = ws.ws_matmul if fwd else ws.ws_matmul_grad_input
            label = f"ws@{ws_bucket}"
            labels[label] = {"along": None, "slabs": None, "min_count": None, "overlap": None, "ws": str(cfg)}
            variants[label] = [lambda kw=kw: run_ws(inp, kw, cfg, out=out) for kw in kws]
            checks[label] = lambda o: run_ws(inp, kws[0], cfg, out=o)
    for label, run in checks.items():
        err, finite = checked(run, out_shape, ref)
        if not finite or err > 1e-2:
            raise RuntimeError(f"{model} {layer} {direction} M={m} {label}: wrong ({err:.3g}, finite {finite})")
        if label in labels:
            labels[label]["rel_err"] = err
    # The default row-slab plan's pieces: its dequantization alone, its products alone on bf16 slabs made beforehand.
    rows_per = kern._slab_rows(kws[0])
    cut = [(n0, min(rows_per, n - n0)) for n0 in range(0, n, rows_per)]
    scratch = torch.empty((min(rows_per, n), k), device="cuda", dtype=torch.bfloat16)

    def dequant_only(kw) -> None:
        for n0, r in cut:
            kern.dequantize_rows(kw, n0, r, scratch[:r])

    def products_only(wb) -> None:
        for n0, r in cut:
            if fwd:
                torch.mm(inp, wb[n0 : n0 + r].t(), out=out[:, n0 : n0 + r])
            elif n0 == 0:
                torch.mm(inp[:, :r], wb[:r], out=out)
            else:
                out.addmm_(inp[:, n0 : n0 + r], wb[n0 : n0 + r])

    if not verify:
        variants["pieces: dequant"] = [lambda kw=kw: dequant_only(kw) for kw in kws]
        variants["pieces: products"] = [lambda wb=wb: products_only(wb) for wb in wbs]
    us = interleaved_us(variants)
    bf16 = us["bf16"]
    row = {"model": model, "layer": layer, "dir": direction, "m": m, "n": n, "k": k, "bf16_us": bf16,
           "shipped_us": us["shipped"], "shipped_repeat_us": us["shipped (repeat)"],
           "shipped_eager_us": eager_us(variants["shipped"]),
           "default_slabs": len(cut), "dequant_us": us.get("pieces: dequant"), "products_us": us.get("pieces: products"),
           "plan": kern.slab_plan(direction, m, n, k)._asdict(), "slab_path_us": us.get("slab path"),
           "other_dequant_order_us": us.get("other dequant order"),
           "plans": [{**plan, "label": label, "us": us[label]} for label, plan in labels.items()]}
    best = min(row["plans"], key=lambda p: p["us"])
    best["eager_us"] = eager_us(variants[best["label"]])
    pieces = "" if verify else (f" dequant {row['dequant_us']:.1f} products {row['products_us']:.1f} "
                                f"({len(cut)} slabs)")
    log(f"{model:4} {layer:8} {direction} M={m:5} bf16 {bf16:8.1f} shipped {row['shipped_us']:8.1f} "
        f"({bf16 / row['shipped_us']:.3f}x, repeat {bf16 / row['shipped_repeat_us']:.3f}x, eager "
        f"{row['shipped_eager_us']:.1f}){pieces} best {best['label']} {bf16 / best['us']:.3f}x"
        + (f" new / previous time {row['shipped_us'] / us['previous']:.3f}, new / slab path "
           f"{row['shipped_us'] / us['slab path']:.3f}" if verify else "")
        + (f", new / other dequant order {row['shipped_us'] / us['other dequant order']:.3f}" if dequant_order else ""))
    for p in row["plans"]:
        log(f"     {p['label']:4} {p['us']:8.1f} us ({bf16 / p['us']:.3f}x)"
            + (f" eager {p['eager_us']:.1f}" if "eager_us" in p else ""))
    return row


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_layer_args(p, "1024,4096")
    p.add_argument("--out", default="benchmarks/out/slab_plans")
    p.add_argument("--verify", action="store_true",
                   help="the default dispatch against the plan it took before SLAB_PLANS (no other plans)")
    p.add_argument("--table-only", action="store_true", help="with --verify: only the shapes SLAB_PLANS has")
    p.add_argument("--dequant-order", action="store_true",
                   help="with --verify: also the default dispatch with the other DEQUANT_CHUNKS_FIRST")
    p.add_argument("--ws-from", type=int, default=None,
                   help="also time the warp-specialized kernel on its table's config for this M bucket (e.g. 1024)")
    args = p.parse_args(argv)
    out, meta = run_setup(p, args.out)
    from qerl.kernels import nvfp4_gemm as kern

    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2**20)
    rows = []
    layers = args.layers.split(",")
    for model in args.models.split(","):
        for layer, n, k in SHAPES[model]:
            if layer not in layers:
                continue
            for direction in args.dirs.split(","):
                if args.verify and args.table_only and (direction, n, k) not in kern.SLAB_PLANS:
                    continue
                for m in (int(v) for v in args.ms.split(",")):
                    rows.append(measure(model, layer, n, k, direction, m, l2, lambda s: print(s, flush=True),
                                        args.verify, args.ws_from, args.dequant_order))
                    torch.cuda.empty_cache()  # the cell's weight copies are gone with its frame
                    tmp = out / "slab_plans.json.tmp"
                    tmp.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
                    tmp.replace(out / "slab_plans.json")


if __name__ == "__main__":
    main()

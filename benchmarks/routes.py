"""Which route serves each M best between the launch tables' buckets, per layer and direction.

The default dispatch picks a warp-specialized config by M's power-of-two bucket (the nearest measured bucket at or
above it), so an M between two buckets runs the larger bucket's tiles: at M = 640 7B o's forward takes the M = 1024
config's 256-row tiles, 70 CTAs on 132 SMs, and nearly M = 1024's time (run 25). On the trainer's "pairs" layout,
per layer (Qwen2.5-7B / 14B / 32B shapes), direction and M, this times every route the dispatch could take:

- ``shipped``: the default dispatch (and a second graph of the same calls: the noise);
- ``slab``: the slab path (dequantize W a slab at a time, cuBLAS; ``nvfp4_gemm._matmul_large_m`` /
  ``_grad_input_large_m`` on its default plan);
- ``tile``: the Triton tile loop on its table / heuristic config (``fwd_config`` / ``bwd_config``);
- ``ws@B``: the warp-specialized kernel on the config its table holds for bucket B, every distinct config of the
  layer's buckets from M / 4 to 4 M.

``--layout words`` does the same for the forward on the rollout's "words" layout (``TUNED_WORDS``; no tile loop: it
decodes words in plain Triton only).

``--propose routes.json`` (no GPU needed) prints the cells where another route won by the rule run 26 took its
table keys by (``proposals``).

``--verify`` times only the default dispatch against ``buckets only``: the same dispatch with the tables' keys
between the powers of two (``nvfp4_gemm.FINE_MS``) and ``nvfp4_gemm.SLAB_RANGES`` left out; with ``--previous-tables
FILE`` also on the tables of FILE (``previous``: ``TUNED`` / ``TUNED_BWD`` / ``TUNED_WORDS`` and, in dumps from run 27
on, the keys between the buckets, ``SLAB_RANGES`` and whether the last M tile is shifted, off where the dump does not
say; ``previous, shifted``: the same tables with this tree's shift, where it differs), as written by ``--dump-tables
FILE`` (no GPU needed) from another tree's copy of this script, e.g. the tree before run 26:

    git worktree add /tmp/old fcb8123 && cp benchmarks/routes.py /tmp/old/benchmarks/
    python /tmp/old/benchmarks/routes.py --dump-tables previous_tables.json

Every route is first checked on a NaN-poisoned output against dequantize-then-matmul in fp32; the routes are then
timed in turn (``slab_plans.interleaved_us``: CUDA-graph replays over weight copies L2 does not serve, one replay
of every route per round, medians).

    python benchmarks/routes.py --ms 384,640,768,896,1024,1536,2048 --dirs fwd --out $OUT
    python benchmarks/routes.py --verify --ms 320,576,704,832,960,1280 --dirs fwd --out $OUT

Writes routes.json and prints one line per cell: each route's time and the fastest.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import add_layer_args, checked, layer_cells, run_setup  # noqa: E402


def ws_candidates(table: dict, m: int, n: int, k_pad: int) -> dict:
    """``{"ws@B": config}``: the distinct configs ``table`` holds for (N, K_pad) at buckets B from M / 4 to 4 M (the
    first bucket holding each config names it)."""
    out, seen = {}, set()
    for (b, tn, tk), cfg in sorted(table.items(), key=lambda kv: kv[0]):
        if (tn, tk) == (n, k_pad) and cfg is not None and m / 4 <= b <= 4 * m and cfg not in seen:
            seen.add(cfg)
            out[f"ws@{b}"] = cfg
    return out


def buckets_only(kern, call):
    """``call()`` with the dispatch's lookups on the powers of two only and no ``SLAB_RANGES`` (read while a graph is
    captured: the replays keep the kernels chosen then)."""
    keys, ranges = kern._bucket_keys, kern.SLAB_RANGES
    kern._bucket_keys, kern.SLAB_RANGES = (lambda m, fine: keys(m, False)), {}
    try:
        return call()
    finally:
        kern._bucket_keys, kern.SLAB_RANGES = keys, ranges


def dump_tables(path: str) -> None:
    """The warp-specialized kernels' ``TUNED`` / ``TUNED_BWD`` / ``TUNED_WORDS`` tables of the ``qerl`` this script
    imports, with the dispatch's ``FINE_MS`` and ``SLAB_RANGES``, as JSON."""
    from qerl.kernels import nvfp4_gemm as kern
    from qerl.kernels import nvfp4_gemm_ws as ws

    tables = {name: [[*key, None if cfg is None else cfg._asdict()] for key, cfg in getattr(ws, name).items()]
              for name in ("TUNED", "TUNED_BWD", "TUNED_WORDS")}
    tables["FINE_MS"] = list(getattr(kern, "FINE_MS", ()))
    tables["SLAB_RANGES"] = [[*key, [list(r) for r in ranges]] for key, ranges in getattr(kern, "SLAB_RANGES", {}).items()]
    tables["SHIFT_LAST_TILE"] = getattr(ws, "SHIFT_LAST_TILE", False)
    Path(path).write_text(json.dumps(tables))


def load_tables(path: str) -> dict:
    """``dump_tables``' file; "FINE_MS" / "SLAB_RANGES" only where it holds them (dumps before run 27 do not);
    "SHIFT_LAST_TILE" False where it is missing (the trees before the shifted last tile)."""
    from qerl.kernels import nvfp4_gemm_ws as ws

    cls = {"TUNED": ws.WsConfig, "TUNED_BWD": ws.WsBwdConfig, "TUNED_WORDS": ws.WsConfig}
    raw = json.loads(Path(path).read_text())
    tables = {name: {(m, n, k): None if cfg is None else cls[name](**cfg) for m, n, k, cfg in rows}
              for name, rows in raw.items() if name in cls}
    if "FINE_MS" in raw:
        tables["FINE_MS"] = tuple(raw["FINE_MS"])
        tables["SLAB_RANGES"] = {(d, n, k): tuple(tuple(r) for r in ranges) for d, n, k, ranges in raw["SLAB_RANGES"]}
    tables["SHIFT_LAST_TILE"] = bool(raw.get("SHIFT_LAST_TILE", False))
    return tables


def previous_dispatch(kern, ws, tables: dict, call, shift: bool | None = None):
    """``call()`` on ``tables`` (``load_tables``): with their ``FINE_MS`` and ``SLAB_RANGES`` where the file holds
    them, else on the powers of two only, without ``SLAB_RANGES``; the last tile shifted as the tables' tree did
    (``SHIFT_LAST_TILE``; off where the file does not say), or as ``shift`` says."""
    saved = ws.TUNED, ws.TUNED_BWD, ws.TUNED_WORDS, ws.SHIFT_LAST_TILE
    ws.TUNED, ws.TUNED_BWD = tables["TUNED"], tables["TUNED_BWD"]
    ws.TUNED_WORDS = tables.get("TUNED_WORDS", ws.TUNED_WORDS)
    ws.SHIFT_LAST_TILE = tables.get("SHIFT_LAST_TILE", False) if shift is None else shift
    try:
        if "FINE_MS" not in tables:
            return buckets_only(kern, call)
        keys, ranges, fine_ms = kern._bucket_keys, kern.SLAB_RANGES, tables["FINE_MS"]
        kern._bucket_keys, kern.SLAB_RANGES = (lambda m, fine: kern._keys_among(m, fine_ms if fine else ())), \
            tables["SLAB_RANGES"]
        try:
            return call()
        finally:
            kern._bucket_keys, kern.SLAB_RANGES = keys, ranges
    finally:
        ws.TUNED, ws.TUNED_BWD, ws.TUNED_WORDS, ws.SHIFT_LAST_TILE = saved


def measure(model: str, layer: str, n: int, k: int, direction: str, m: int, l2_bytes: int, budget_s: float,
            verify: bool = False, previous: dict | None = None, layout: str = "pairs") -> dict:
    from gemm_ws import cell_operands
    from slab_plans import interleaved_us

    from qerl.kernels import nvfp4_gemm as kern
    from qerl.kernels import nvfp4_gemm_ws as ws

    fwd, wbs, kws, inp, out_shape, ref, out = cell_operands(model, layer, n, k, direction, m, l2_bytes, layout)
    words = layout == "words"
    if fwd:
        shipped, slab, run_ws = kern.nvfp4_matmul, kern._matmul_large_m, ws.ws_matmul
        tile_cfg = kern.fwd_config(m, n, kws[0].k_pad, inp.device)
        if (kws[0].k_pad // kern.CHUNK) % tile_cfg.ch:
            tile_cfg = tile_cfg._replace(ch=1)
        cands = ws_candidates(ws.TUNED_WORDS if words else ws.TUNED, m, n, kws[0].k_pad)
    else:
        shipped, slab, run_ws = kern.nvfp4_matmul_grad_input, kern._grad_input_large_m, ws.ws_matmul_grad_input
        tile_cfg = kern.bwd_config(m, n, kws[0].k_pad, inp.device)
        cands = ws_candidates(ws.TUNED_BWD, m, n, kws[0].k_pad)
    routes = {"shipped": lambda kw, o: shipped(inp, kw, out=o),
              "slab": lambda kw, o: slab(inp, kw, o)}
    if not words:  # the tile loop decodes "words" in plain Triton only: not a route worth timing there
        routes["tile"] = lambda kw, o: shipped(inp, kw, config=tile_cfg, out=o)
    if verify:
        routes = {"shipped": routes["shipped"],
                  "buckets only": lambda kw, o: buckets_only(kern, lambda: shipped(inp, kw, out=o))}
        if previous is not None:
            routes["previous"] = lambda kw, o: previous_dispatch(kern, ws, previous, lambda: shipped(inp, kw, out=o))
            if previous.get("SHIFT_LAST_TILE", False) != ws.SHIFT_LAST_TILE:  # the tables alone, on this tree's tiles
                routes["previous, shifted"] = lambda kw, o: previous_dispatch(
                    kern, ws, previous, lambda: shipped(inp, kw, out=o), shift=ws.SHIFT_LAST_TILE)
        cands = {}
    for label, cfg in cands.items():
        routes[label] = lambda kw, o, cfg=cfg: run_ws(inp, kw, cfg, out=o)
    errors, dropped = {}, {}
    for label, run in list(routes.items()):
        try:
            err, finite = checked(lambda o, run=run: run(kws[0], o), out_shape, ref)
        except Exception as exc:  # a table config another bucket's M cannot launch: not a route here
            if label == "shipped":
                raise
            dropped[label] = f"{type(exc).__name__}: {exc}"[:200]
            del routes[label]
            continue
        if not finite or err > 1e-2:
            raise RuntimeError(f"{model} {layer} {direction} M={m} {label}: wrong ({err:.3g}, finite {finite})")
        errors[label] = err
    variants = {"bf16": [(lambda wb=wb: torch.nn.functional.linear(inp, wb)) if fwd else
                         (lambda wb=wb: torch.matmul(inp, wb)) for wb in wbs]}
    for label, run in routes.items():
        variants[label] = [lambda kw=kw, run=run: run(kw, out) for kw in kws]
    variants["shipped (repeat)"] = list(variants["shipped"])  # the same calls in a graph of their own: the noise
    us = interleaved_us(variants, budget_s=budget_s)
    timed = {label: us[label] for label in routes}
    best = min(timed, key=timed.get)
    return {"model": model, "layer": layer, "dir": direction, "layout": layout, "m": m, "n": n, "k": k, "bf16_us": us["bf16"],
            "shipped_repeat_us": us["shipped (repeat)"], "routes": timed, "best": best,
            "configs": {label: str(cfg) for label, cfg in cands.items()} | {"tile": str(tile_cfg)},
            "rel_err": errors, "dropped": dropped}


def proposals(rows: list[dict], min_gain: float = 1.03) -> list[dict]:
    """The cells of a routes.json where another route beat the default dispatch by at least ``min_gain`` and by more
    than twice the gap between the two graphs of the dispatch's own calls (the rule run 26 took its table keys by),
    each with the route, its config and the gain; candidates for table keys, to be checked at M off the grid."""
    out = []
    for r in rows:
        t, best = r["routes"], r["best"]
        gain = t["shipped"] / t[best]
        noise = abs(t["shipped"] / r["shipped_repeat_us"] - 1)
        if best in ("shipped", "buckets only", "previous", "previous, shifted") or gain < min_gain or \
                gain - 1 <= 2 * noise:
            continue
        out.append({key: r[key] for key in ("model", "layer", "dir", "m", "n", "k")}
                   | {"layout": r.get("layout", "pairs"), "route": best, "config": r["configs"].get(best, best),
                      "gain": gain})
    return out


def line(row: dict) -> str:
    bf16, t = row["bf16_us"], row["routes"]
    noise = t["shipped"] / row["shipped_repeat_us"]
    cells = " ".join(f"{label} {us:.1f}" for label, us in t.items())
    return (f"{row['model']:4} {row['layer']:8} {row['dir']} M={row['m']:5} bf16 {bf16:7.1f} | {cells} | best "
            f"{row['best']} {bf16 / t[row['best']]:.3f}x, shipped {bf16 / t['shipped']:.3f}x, shipped / best "
            f"{t['shipped'] / t[row['best']]:.3f} (repeat {noise:.3f})"
            + (f", new / buckets only {t['shipped'] / t['buckets only']:.3f}" if "buckets only" in t else "")
            + (f", new / previous {t['shipped'] / t['previous']:.3f}" if "previous" in t else "")
            + (f", new / previous shifted {t['shipped'] / t['previous, shifted']:.3f}" if "previous, shifted" in t else ""))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_layer_args(p, "384,640,768,896,1024,1536,2048")
    p.add_argument("--budget", type=float, default=0.8, help="seconds of timed replays per cell (at least 9 rounds)")
    p.add_argument("--verify", action="store_true", help="the default dispatch against the one on the buckets only")
    p.add_argument("--layout", default="pairs", choices=["pairs", "words"],
                   help="the weights' code layout (words: the rollout forward's; forward only)")
    p.add_argument("--previous-tables", default=None, help="with --verify: also the dispatch on these tables (JSON)")
    p.add_argument("--dump-tables", default=None, help="write this tree's tables as JSON to this file and stop")
    p.add_argument("--propose", default=None,
                   help="print the cells of this routes.json where another route won (see proposals) and stop")
    p.add_argument("--out", default="benchmarks/out/routes")
    args = p.parse_args(argv)
    if args.layout == "words" and args.dirs != "fwd":
        p.error("the words layout serves the forward only: use --dirs fwd")
    if args.dump_tables:
        return dump_tables(args.dump_tables)
    if args.propose:
        for c in proposals(json.loads(Path(args.propose).read_text())["rows"]):
            print(f"{c['model']:4} {c['layer']:8} {c['dir']} {c['layout']:5} M={c['m']:5} N={c['n']} K={c['k']}: "
                  f"{c['route']} {c['gain']:.3f}x  {c['config']}")
        return None
    previous = load_tables(args.previous_tables) if args.previous_tables else None
    out, meta = run_setup(p, args.out)
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2**20)
    rows = []
    for model, layer, n, k, direction, m in layer_cells(args):
        rows.append(measure(model, layer, n, k, direction, m, l2, args.budget, args.verify, previous, args.layout))
        print(line(rows[-1]), flush=True)
        torch.cuda.empty_cache()
        tmp = out / "routes.json.tmp"
        tmp.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        tmp.replace(out / "routes.json")


if __name__ == "__main__":
    main()

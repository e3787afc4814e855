"""What rows of X that end inside the last tile cost the warp-specialized kernels.

Run 27's check of its M = 192 keys found the same config slower at M = 136 than at M = 192 on some layers (7B
gate_up on "words": 173 against 107 us), with the same count of tiles. Per layer, direction and M this times the
default dispatch's config (``nvfp4_gemm_ws.pick`` / ``pick_grad_input``), interleaved:

- ``plain``: on X (dY for the input gradient) of M rows, as the dispatch runs it (the last M tile shifted to end at
  row M, ``nvfp4_gemm_ws.SHIFT_LAST_TILE``);
- ``unshifted``: the same with ``SHIFT_LAST_TILE`` off, the last tile reading rows past M;
- ``padded``: X copied into a zeroed buffer of whole BM-row tiles, the product on it (the output's first M rows are
  the answer), copy included;
- ``padded only``: the same product without the copy (the kernel alone on whole tiles);
- ``whole boxes``: the same with ``SUB_BOX_ROWS`` at 0, every tile's X copied in one box of BM rows even where it
  reaches past M (run 28 added the smaller boxes, ``nvfp4_gemm_ws._x_box``; run 29 moved the one reaching past M
  onto the last rows below M);
- ``boxes 8`` / ``boxes 32``: the same with ``SUB_BOX_ROWS`` at 8 / 32;
- ``spare``: X of M rows as a row slice of a buffer of whole tiles (rows past M poisoned with NaN in the check), which
  the dispatch's descriptor reads past M (``nvfp4_gemm_ws.tma_rows``): whole tiles without a copy.

    python benchmarks/partial_tiles.py --layout words --dirs fwd --ms 129,136,144,160,176,192 --out $OUT
    python benchmarks/partial_tiles.py --dirs bwd --ms 1,4,12 --variants plain,spare,padded --out $OUT

Every variant is first checked on a NaN-poisoned output against dequantize-then-matmul in fp32. Writes
partial_tiles.json and prints one line per cell.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import add_layer_args, checked, fp32_matmul, layer_cells, run_setup  # noqa: E402

VARIANTS = ("plain", "padded", "padded only", "unshifted", "spare", "whole boxes", "boxes 8", "boxes 32")


def padded_rows(m: int, bm: int) -> int:
    """M rounded up to whole tiles of ``bm`` rows."""
    return -(-m // bm) * bm


def switched(ws, name: str, value, call):
    """``call()`` with ``nvfp4_gemm_ws``'s switch ``name`` set to ``value`` (``SHIFT_LAST_TILE``, ``SUB_BOX_ROWS``;
    read while a graph is captured: the replays keep the kernel chosen then)."""
    old = getattr(ws, name)
    setattr(ws, name, value)
    try:
        return call()
    finally:
        setattr(ws, name, old)


def measure(model: str, layer: str, n: int, k: int, direction: str, m: int, layout: str, l2_bytes: int,
            budget_s: float, chosen: tuple[str, ...] = VARIANTS) -> dict:
    from gemm_ws import _copies
    from slab_plans import interleaved_us

    from qerl import nvfp4
    from qerl.kernels import nvfp4_gemm as kern
    from qerl.kernels import nvfp4_gemm_ws as ws

    torch.manual_seed(hash((model, layer, direction, m)) % 2**31)
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    fwd = direction == "fwd"
    kws = _copies(kern.prepare_weight(q.packed, q.scale, q.global_scale, layout=layout), l2_bytes)
    width, out_width = (k, n) if fwd else (n, k)
    x = torch.randn(m, width, device="cuda", dtype=torch.bfloat16)
    if fwd:
        cfg = ws.pick(x, n, k, kws[0].k_pad, words=layout == "words")
        run = ws.ws_matmul
    else:
        cfg = ws.pick_grad_input(x, n, k, kws[0].k_pad, rows=layout == "rows")
        run = ws.ws_matmul_grad_input
    row = {"model": model, "layer": layer, "dir": direction, "m": m, "layout": layout, "config": None}
    if cfg is None:
        return row
    mp = padded_rows(m, cfg.bm)
    x_pad = torch.zeros(mp, width, device="cuda", dtype=torch.bfloat16)
    out_pad = torch.empty(mp, out_width, device="cuda", dtype=torch.bfloat16)
    ref = fp32_matmul(x.float(), ref_w.T if fwd else ref_w)

    def padded(kw, o=None):
        x_pad[:m].copy_(x)
        run(x_pad, kw, cfg, out=out_pad)
        return None if o is None else o.copy_(out_pad[:m])  # the copy for the check only

    x_spare = torch.full((mp, width), float("nan"), device="cuda", dtype=torch.bfloat16)
    x_spare[:m].copy_(x)
    x_spare = x_spare[:m]
    variants = {"plain": lambda kw, o: run(x, kw, cfg, out=o), "padded": padded,
                "padded only": lambda kw, o: run(x_pad, kw, cfg, out=out_pad),
                "unshifted": lambda kw, o: switched(ws, "SHIFT_LAST_TILE", False, lambda: run(x, kw, cfg, out=o)),
                "whole boxes": lambda kw, o: switched(ws, "SUB_BOX_ROWS", 0, lambda: run(x, kw, cfg, out=o)),
                "boxes 8": lambda kw, o: switched(ws, "SUB_BOX_ROWS", 8, lambda: run(x, kw, cfg, out=o)),
                "boxes 32": lambda kw, o: switched(ws, "SUB_BOX_ROWS", 32, lambda: run(x, kw, cfg, out=o)),
                "spare": lambda kw, o: run(x_spare, kw, cfg, out=o)}
    variants = {label: f for label, f in variants.items() if label in chosen}
    for label in variants:
        if label == "padded only":
            continue  # its output is the whole tiles' (checked as "padded")
        err, finite = checked(lambda o, label=label: variants[label](kws[0], o), (m, out_width), ref)
        if not finite or err > 1e-2:
            raise RuntimeError(f"{model} {layer} {direction} M={m} {label}: wrong ({err:.3g}, finite {finite})")
    out = torch.empty(m, out_width, device="cuda", dtype=torch.bfloat16)
    timed = {label: [lambda kw=kw, f=f: f(kw, out) for kw in kws] for label, f in variants.items()}
    if "padded" in timed:
        timed["padded"] = [lambda kw=kw: padded(kw) for kw in kws]
    timed["plain (repeat)"] = list(timed["plain"])
    us = interleaved_us(timed, budget_s=budget_s)
    return row | {"config": str(cfg), "padded_m": mp, "us": us}


def line(r: dict) -> str:
    head = f"{r['model']:4} {r['layer']:8} {r['dir']} M={r['m']:5}"
    if r["config"] is None:
        return head + " the slab path (no config)"
    us = r["us"]
    cells = " ".join(f"{label} {t:7.1f}" for label, t in us.items() if label != "plain (repeat)")
    ratios = "".join(f", plain / {label} {us['plain'] / us[label]:.3f}" for label in ("padded", "unshifted", "spare", "whole boxes",
                                                                          "boxes 8", "boxes 32")
                     if label in us)
    return (f"{head} {cells} (to {r['padded_m']}){ratios} (repeat {us['plain'] / us['plain (repeat)']:.3f})"
            f"  {r['config']}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_layer_args(p, "129,136,144,160,176,192")
    p.add_argument("--layout", default="pairs", choices=["pairs", "words", "rows"],
                   help="the weights' code layout (words: forward only; rows: input gradient only)")
    p.add_argument("--budget", type=float, default=0.6, help="seconds of timed replays per cell (at least 9 rounds)")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="comma-separated, among " + ", ".join(VARIANTS) + " (plain is always timed)")
    p.add_argument("--out", default="benchmarks/out/partial_tiles")
    args = p.parse_args(argv)
    dirs = args.dirs.split(",")
    chosen = tuple(dict.fromkeys(["plain", *args.variants.split(",")]))
    if not set(chosen) <= set(VARIANTS):
        p.error(f"--variants: unknown {sorted(set(chosen) - set(VARIANTS))}; choose among {', '.join(VARIANTS)}")
    if (args.layout == "words" and dirs != ["fwd"]) or (args.layout == "rows" and dirs != ["bwd"]):
        p.error("the words layout serves the forward only (--dirs fwd), rows the input gradient only (--dirs bwd)")
    out, meta = run_setup(p, args.out)
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2**20)
    rows = []
    for model, layer, n, k, direction, m in layer_cells(args):
        rows.append(measure(model, layer, n, k, direction, m, args.layout, l2, args.budget, chosen))
        print(line(rows[-1]), flush=True)
        torch.cuda.empty_cache()
    (out / "partial_tiles.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

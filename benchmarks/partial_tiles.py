"""What rows of X that end inside the last tile cost the warp-specialized forward.

Run 27's check of its M = 192 keys found the same config slower at M = 136 than at M = 192 on some layers (7B
gate_up on "words": 173 against 107 us), with the same count of tiles. Per layer and M this times the default
dispatch's config (``nvfp4_gemm_ws.pick``) three ways, interleaved:

- ``plain``: on X of M rows (what the dispatch runs);
- ``padded``: X copied into a zeroed buffer of whole BM-row tiles, the product on it (the output's first M rows are
  the answer), copy included;
- ``padded only``: the same product without the copy (the kernel alone on whole tiles).

    python benchmarks/partial_tiles.py --layout words --ms 129,136,144,160,176,192 --out $OUT

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

from gemm_nvfp4 import SHAPES, add_layer_args, checked, fp32_matmul, run_setup  # noqa: E402


def padded_rows(m: int, bm: int) -> int:
    """M rounded up to whole tiles of ``bm`` rows."""
    return -(-m // bm) * bm


def measure(model: str, layer: str, n: int, k: int, m: int, layout: str, l2_bytes: int, budget_s: float) -> dict:
    from gemm_ws import _copies
    from slab_plans import interleaved_us

    from qerl import nvfp4
    from qerl.kernels import nvfp4_gemm as kern
    from qerl.kernels import nvfp4_gemm_ws as ws

    torch.manual_seed(hash((model, layer, m)) % 2**31)
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    kws = _copies(kern.prepare_weight(q.packed, q.scale, q.global_scale, layout=layout), l2_bytes)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    cfg = ws.pick(x, n, k, kws[0].k_pad, words=layout == "words")
    if cfg is None:
        return {"model": model, "layer": layer, "m": m, "layout": layout, "config": None}
    mp = padded_rows(m, cfg.bm)
    x_pad = torch.zeros(mp, k, device="cuda", dtype=torch.bfloat16)
    out_pad = torch.empty(mp, n, device="cuda", dtype=torch.bfloat16)
    ref = fp32_matmul(x.float(), ref_w.T)

    def padded(kw, o):
        x_pad[:m].copy_(x)
        ws.ws_matmul(x_pad, kw, cfg, out=out_pad)
        o.copy_(out_pad[:m])  # for the check only: the timed calls leave the answer in out_pad[:m]
        return o

    for label, run in (("plain", lambda o: ws.ws_matmul(x, kws[0], cfg, out=o)), ("padded", lambda o: padded(kws[0], o))):
        err, finite = checked(run, (m, n), ref)
        if not finite or err > 1e-2:
            raise RuntimeError(f"{model} {layer} M={m} {label}: wrong ({err:.3g}, finite {finite})")
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

    def timed_padded(kw):
        x_pad[:m].copy_(x)
        ws.ws_matmul(x_pad, kw, cfg, out=out_pad)

    us = interleaved_us({
        "plain": [lambda kw=kw: ws.ws_matmul(x, kw, cfg, out=out) for kw in kws],
        "padded": [lambda kw=kw: timed_padded(kw) for kw in kws],
        "padded only": [lambda kw=kw: ws.ws_matmul(x_pad, kw, cfg, out=out_pad) for kw in kws],
        "plain (repeat)": [lambda kw=kw: ws.ws_matmul(x, kw, cfg, out=out) for kw in kws],
    }, budget_s=budget_s)
    return {"model": model, "layer": layer, "m": m, "layout": layout, "config": str(cfg), "padded_m": mp, "us": us}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_layer_args(p, "129,136,144,160,176,192")
    p.add_argument("--layout", default="words", choices=["pairs", "words"])
    p.add_argument("--budget", type=float, default=0.6, help="seconds of timed replays per cell (at least 9 rounds)")
    p.add_argument("--out", default="benchmarks/out/partial_tiles")
    args = p.parse_args(argv)
    out, meta = run_setup(p, args.out)
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2**20)
    rows, layers, done = [], args.layers.split(","), set()
    for model in args.models.split(","):
        for layer, n, k in SHAPES[model]:
            if layer not in layers or (layer, n, k) in done:  # 14B and 32B share qkv / o: once
                continue
            done.add((layer, n, k))
            for m in (int(v) for v in args.ms.split(",")):
                r = measure(model, layer, n, k, m, args.layout, l2, args.budget)
                rows.append(r)
                if r["config"] is None:
                    print(f"{model:4} {layer:8} M={m:5} the slab path (no config)", flush=True)
                    continue
                us = r["us"]
                print(f"{model:4} {layer:8} M={m:5} plain {us['plain']:7.1f} padded {us['padded']:7.1f} padded only "
                      f"{us['padded only']:7.1f} (to {r['padded_m']}) plain / padded {us['plain'] / us['padded']:.3f} "
                      f"(repeat {us['plain'] / us['plain (repeat)']:.3f})  {r['config']}", flush=True)
                torch.cuda.empty_cache()
    (out / "partial_tiles.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

"""The input gradient in one pipelined partition (``WsBwdConfig.pipelined``: ``_pl_bwd_kernel``, one warpgroup issuing
its own copies ahead) against the shipped warp-specialized configs, at decode-shaped M.

The warp-specialized kernel's CTA is a consumer warpgroup plus a loader and a scale warp padded to a second
warpgroup (256 threads); the pipelined one is 128 threads, so an SM holds more of them at the same registers per
thread, and no stage waits for a release to cross warps. Per layer and M this times the shipped config (the
"rows" tables) and pipelined configs: the shipped BM and split at several stage counts, and splits that fill whole
waves of the pipelined CTAs (the driver's CTAs per SM for each compiled variant, ``ws_occupancy.occupancy``). Every
candidate's output is checked against dequantize-then-matmul in fp32 first; the weight is cycled in enough copies
that L2 serves none of it.

    python benchmarks/pipelined_bwd.py --models 7b,14b,32b --ms 1,16 --out benchmarks/out/pipelined_bwd
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gemm_nvfp4 import SHAPES, bench, rel_err  # noqa: E402
from ws_occupancy import newest, occupancy  # noqa: E402


def fill_splits(tiles: int, steps: int, slots: int) -> list[int]:
    """Splits of ``steps`` that put ``tiles * split`` CTAs in one or two whole waves of ``slots`` (at most one wave's
    worth of CTAs per tile and at least 4 steps per run)."""
    out = []
    for waves in (1, 2):
        split = min(steps // 4, waves * slots // tiles)
        if split >= 1:
            out.append(split)
    return out


def measure(model: str, layer: str, n: int, k: int, ms: list[int], stages: list[int], l2_bytes: int, sms: int,
            log) -> list[dict]:
    from qerl import nvfp4
    from qerl.kernels import nvfp4_gemm as kern
    from qerl.kernels import nvfp4_gemm_ws as ws

    torch.manual_seed(hash((model, layer)) % 2**31)
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w0 = kern.prepare_weight(q.packed, q.scale, q.global_scale, layout="rows")
    copies = [w0] + [w0._replace(codes=w0.codes.clone(), scales=w0.scales.clone())
                     for _ in range(max(1, math.ceil(3 * l2_bytes / w0.nbytes())) - 1)]
    dev = torch.cuda.current_device()
    rows = []
    for m in ms:
        dy = torch.randn(m, n, device="cuda").to(torch.bfloat16)
        ref = dy.float() @ ref_w
        shipped = ws.pick_grad_input(dy, n, k, w0.k_pad, rows=True)
        if shipped is None:
            continue
        kc = w0.k_pad // kern.CHUNK
        steps = -(-n // 64)

        def time_cfg(cfg, dy=dy, ref=ref, m=m):
            out = ws.ws_matmul_grad_input(dy, w0, cfg)
            err = rel_err(out, ref)
            if not torch.isfinite(out).all() or err > 4e-3:
                raise RuntimeError(f"{model} {layer} M={m} {cfg}: relative error {err}")
            return bench([functools.partial(ws.ws_matmul_grad_input, dy, w, cfg) for w in copies]) * 1e6

        base = time_cfg(shipped)
        row = {"model": model, "layer": layer, "n": n, "k": k, "m": m, "shipped": shipped._asdict(), "shipped_us": base,
               "pipelined": []}
        log(f"{model} {layer} M={m}: shipped {tuple(shipped)} {base:.2f} us")
        tiles = -(-m // shipped.bm) * kc
        tried = set()
        for st in stages:
            probe = ws.WsBwdConfig(shipped.bm, st, 1, pipelined=True)
            ws.ws_matmul_grad_input(dy, w0, probe)
            torch.cuda.synchronize()
            occ = occupancy(newest(ws._pl_bwd_kernel, dev))
            for split in sorted({shipped.split_n, *fill_splits(tiles, steps, occ["ctas_per_sm"] * sms)}):
                for fused in ((False, True) if split > 1 and m <= 16 else (False,)):
                    cfg = ws.WsBwdConfig(shipped.bm, st, split, fused=fused, pipelined=True)
                    if cfg in tried:
                        continue
                    tried.add(cfg)
                    us = time_cfg(cfg)
                    row["pipelined"].append({"config": cfg._asdict(), "us": us, "ctas": tiles * split,
                                             "ctas_per_sm": occ["ctas_per_sm"]})
                    log(f"  pipelined {tuple(cfg)} ({tiles * split} CTAs, {occ['ctas_per_sm']} per SM): {us:.2f} us "
                        f"({base / us:.3f}x)")
        best = min(row["pipelined"], key=lambda r: r["us"])
        row["best"] = best
        log(f"  best {tuple(best['config'].values())}: {best['us']:.2f} us, {base / best['us']:.3f}x the shipped")
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="7b,14b,32b")
    p.add_argument("--layers", default="qkv,o,gate_up,down")
    p.add_argument("--ms", default="1,16")
    p.add_argument("--stages", default="4,6,8")
    p.add_argument("--out", default="benchmarks/out/pipelined_bwd")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a Hopper GPU")
    props = torch.cuda.get_device_properties(0)
    import triton

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"device": props.name, "sms": props.multi_processor_count, "date": time.strftime("%Y-%m-%d"),
            "torch": torch.__version__, "triton": triton.__version__, "command": " ".join(sys.argv)}
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    rows = []
    for model in args.models.split(","):
        for layer, n, k in SHAPES[model]:
            if layer not in args.layers.split(","):
                continue
            rows += measure(model, layer, n, k, [int(m) for m in args.ms.split(",")],
                            [int(s) for s in args.stages.split(",")], l2, props.multi_processor_count, print)
            (out / "pipelined_bwd.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    for m in sorted({r["m"] for r in rows}):
        sel = [r for r in rows if r["m"] == m]
        geo = math.exp(sum(math.log(r["shipped_us"] / r["best"]["us"]) for r in sel) / len(sel))
        print(f"M={m}: shipped / best pipelined, geomean over {len(sel)} layers: {geo:.3f}")


if __name__ == "__main__":
    main()

"""Training-shaped NVFP4 GEMMs (large M): the kernels' default dispatch (from ``LARGE_M_FWD`` / ``_BWD`` rows on, for
products of at least ``SLAB_MIN_FLOP``: slabs of W dequantized into bounded bf16 buffers on a second stream while cuBLAS
multiplies the previous slab; smaller products stay on the tile loop), the same with slabs dequantized and multiplied in
turn on one stream (``OVERLAP_SLABS = False``), and the fused tile loop, against BF16 ``torch.mm``, forward and input
gradient, on the Qwen2.5-7B / -32B layer shapes.

    python benchmarks/gemm_large_m.py [--models 7b,32b] [--ms 256,512,1024,4096] [--out DIR]

Median of ``triton.testing.do_bench`` over three weight copies; every timed path first checked against
dequantize-then-matmul in fp32 on fresh random inputs (relative error < 1e-2, no NaN).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import triton

from qerl import nvfp4
from qerl.kernels import nvfp4_gemm as kern

SHAPES = {
    "7b": {"qkv": (4608, 3584), "o": (3584, 3584), "gate_up": (37888, 3584), "down": (3584, 18944)},
    "32b": {"qkv": (7168, 5120), "o": (5120, 5120), "gate_up": (55296, 5120), "down": (5120, 27648)},
}


def median_us(fns) -> float:
    times = [triton.testing.do_bench(f, warmup=25, rep=100, return_mode="median") for f in fns]
    return 1e3 * sorted(times)[len(times) // 2]


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def dequant_bandwidth(args) -> None:
    """GB/s of ``dequantize_rows`` over a whole weight (codes + scales read, bf16 written) for several launch shapes;
    the device's copy bandwidth (read + write of a 1 GiB tensor) alongside."""
    dev = torch.device("cuda")
    src = torch.empty(2**29, dtype=torch.bfloat16, device=dev)
    dst = torch.empty_like(src)
    copy_gbs = 2 * src.numel() * 2 / (triton.testing.do_bench(lambda: dst.copy_(src), return_mode="median") * 1e-3) / 1e9
    src = dst = None
    rows = []
    for model in args.models.split(","):
        for layer, (n, k) in SHAPES[model].items():
            q = nvfp4.quantize(torch.randn(n, k, device=dev) * 0.02)
            kw = kern.prepare_weight(q.packed, q.scale, q.global_scale)
            ref = q.dequantize(torch.bfloat16)
            out = torch.empty((n, k), dtype=torch.bfloat16, device=dev)
            nbytes = kw.codes.numel() + kw.scales.numel() + out.numel() * 2
            for bn, warps, first in args.dequant_shapes:
                out.fill_(float("nan"))
                kern.dequantize_rows(kw, 0, n, out, bn=bn, num_warps=warps, chunks_first=first)
                err = rel(out, ref.float())
                if not (err < 1e-2 and bool(torch.isfinite(out).all())):
                    raise RuntimeError(f"{model} {layer} bn {bn} warps {warps} chunks_first {first}: wrong ({err:.3g})")
                t = triton.testing.do_bench(
                    lambda kw=kw, n=n, out=out, bn=bn, warps=warps, first=first: kern.dequantize_rows(
                        kw, 0, n, out, bn=bn, num_warps=warps, chunks_first=first),
                    return_mode="median") * 1e-3
                rows.append({"model": model, "layer": layer, "n": n, "k": k, "bn": bn, "warps": warps,
                             "chunks_first": first, "us": t * 1e6, "gbs": nbytes / t / 1e9, "rel_err": err})
                print(f"{model:4} {layer:8} bn {bn:3} warps {warps} {'along K   ' if first else 'along rows'} "
                      f"{t * 1e6:8.1f}us {nbytes / t / 1e9:6.0f} GB/s rel {err:.1e}", flush=True)
            del kw, ref, q
            torch.cuda.empty_cache()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "dequant_rows.json").write_text(json.dumps({"device": torch.cuda.get_device_name(), "date":
                                                           time.strftime("%Y-%m-%d"), "copy_gbs": copy_gbs,
                                                           "rows": rows}, indent=1))
    print(f"copy bandwidth {copy_gbs:.0f} GB/s (read + write)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="7b,32b")
    p.add_argument("--ms", default="256,512,1024,4096")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    p.add_argument("--dequant", action="store_true", help="only time the slab dequantization kernel's launch shapes")
    p.add_argument("--dequant-shapes", default="16:2,16:4,32:2,32:4,32:8,64:4,64:8,128:4,128:8",
                   help="with --dequant: rows:warps[:k] per launch shape (k: programs along K first)")
    args = p.parse_args()
    args.dequant_shapes = [(int(f[0]), int(f[1]), len(f) > 2 and f[2] == "k")
                           for f in (v.split(":") for v in args.dequant_shapes.split(","))]
    if args.dequant:
        return dequant_bandwidth(args)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    rows = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"LARGE_M fwd {kern.LARGE_M_FWD} bwd {kern.LARGE_M_BWD}, slab {kern.SCRATCH_ELEMENTS * 2 / 2**20:.0f} MiB")
    for model in args.models.split(","):
        for layer, (n, k) in SHAPES[model].items():
            dense = [torch.randn(n, k, device=dev) * 0.02 for _ in range(3)]
            qs = [nvfp4.quantize(w) for w in dense]
            kws = [kern.prepare_weight(q.packed, q.scale, q.global_scale) for q in qs]
            bf = [q.dequantize(torch.bfloat16) for q in qs]
            del dense
            for m in map(int, args.ms.split(",")):
                for direction in ("fwd", "bwd"):
                    if direction == "fwd":
                        x = torch.randn(m, k, device=dev).to(torch.bfloat16)
                        ref = x.float() @ bf[0].float().T
                        default = kern.nvfp4_matmul
                        tile_cfg = kern.fwd_config(m, n, kws[0].k_pad, dev)
                        if (kws[0].k_pad // kern.CHUNK) % tile_cfg.ch:
                            tile_cfg = tile_cfg._replace(ch=1)
                        dense_fns = [lambda w=w, x=x: torch.mm(x, w.t()) for w in bf]
                    else:
                        x = torch.randn(m, n, device=dev).to(torch.bfloat16)
                        ref = x.float() @ bf[0].float()
                        default = kern.nvfp4_matmul_grad_input
                        tile_cfg = kern.bwd_config(m, n, kws[0].k_pad, dev)
                        dense_fns = [lambda w=w, x=x: torch.mm(x, w) for w in bf]
                    row = {"model": model, "layer": layer, "n": n, "k": k, "m": m, "dir": direction}
                    for name, cfg in (("default", None), ("serial", None), ("tile", tile_cfg)):
                        kern.OVERLAP_SLABS = name != "serial"
                        out = default(x, kws[0], cfg)
                        err = rel(out, ref)
                        ok = err < 1e-2 and bool(torch.isfinite(out).all())
                        row[f"{name}_rel"] = err
                        row[f"{name}_us"] = median_us([lambda w=w, c=cfg, f=default, x=x: f(x, w, c) for w in kws]) if ok \
                            else float("nan")
                    kern.OVERLAP_SLABS = True
                    row["bf16_us"] = median_us(dense_fns)
                    row["default_speedup"] = row["bf16_us"] / row["default_us"]
                    row["serial_speedup"] = row["bf16_us"] / row["serial_us"]
                    row["tile_speedup"] = row["bf16_us"] / row["tile_us"]
                    rows.append(row)
                    print(f"{model:4} {layer:8} {direction} M={m:5} bf16 {row['bf16_us']:8.1f}us "
                          f"default {row['default_us']:8.1f}us x{row['default_speedup']:.2f} "
                          f"serial {row['serial_us']:8.1f}us x{row['serial_speedup']:.2f} "
                          f"tile {row['tile_us']:8.1f}us x{row['tile_speedup']:.2f} "
                          f"rel {row['default_rel']:.1e}/{row['tile_rel']:.1e}", flush=True)
            del kws, bf, qs
            torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gemm_large_m.json").write_text(json.dumps({
        "device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
        "triton": triton.__version__, "large_m": [kern.LARGE_M_FWD, kern.LARGE_M_BWD], "rows": rows}, indent=1))
    for direction in ("fwd", "bwd"):
        for m in sorted({r["m"] for r in rows}):
            sel = [r for r in rows if r["dir"] == direction and r["m"] == m]
            gd = torch.tensor([r["default_speedup"] for r in sel]).log().mean().exp().item()
            gs = torch.tensor([r["serial_speedup"] for r in sel]).log().mean().exp().item()
            gt = torch.tensor([r["tile_speedup"] for r in sel]).log().mean().exp().item()
            print(f"{direction} M={m:5} geomean vs BF16: default {gd:.2f} (min "
                  f"{min(r['default_speedup'] for r in sel):.2f}), serial slabs {gs:.2f}, tile loop {gt:.2f}")


if __name__ == "__main__":
    main()

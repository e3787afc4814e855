"""One NVFP4 GEMM launch (or cuBLAS BF16 on the same shape) for Nsight Compute to profile: the shipped launch config
for a Qwen2.5 layer shape and M, a few warm-up calls, then one call inside the NVTX range ``profile`` for ncu to capture.

    python benchmarks/profile_gemm.py --model 7b --layer gate_up --m 1 --dir fwd
    ncu --clock-control none --nvtx --nvtx-include profile/ \
        --section SpeedOfLight --section WarpStateStats --section SourceCounters \
        python benchmarks/profile_gemm.py --model 7b --layer gate_up --m 1 --dir fwd

`benchmarks/profile_gemm.sh` runs ncu over a list of cases and writes the reports (details, and the SASS with stall
samples per instruction) under $OUT. Without ncu the script still runs (it prints the config it launched), which is
how its shape logic is checked on a machine without a GPU (`TRITON_INTERPRET=1`, small shapes).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemm_nvfp4  # noqa: E402

from qerl import nvfp4  # noqa: E402
from qerl.kernels import nvfp4_gemm as kern  # noqa: E402

# (N, K) of the projections: the GEMM benchmark's shapes, and a tiny one for the interpreter check on CPU.
SHAPES = {model: {layer: (n, k) for layer, n, k in rows} for model, rows in gemm_nvfp4.SHAPES.items()}
SHAPES["tiny"] = {"x": (96, 128)}


def build(model: str, layer: str, seed: int = 0, layout: str = "pairs"):
    n, k = SHAPES[model][layer]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(device=dev).manual_seed(seed)
    w = torch.randn(n, k, device=dev, generator=g) * 0.02
    q = nvfp4.quantize(w)
    return kern.prepare_weight(q.packed, q.scale, q.global_scale, layout=layout), q, n, k


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="7b", choices=sorted(SHAPES))
    p.add_argument("--layer", default="gate_up")
    p.add_argument("--m", type=int, default=1)
    p.add_argument("--dir", default="fwd", choices=["fwd", "bwd"])
    p.add_argument("--impl", default="qerl", choices=["qerl", "bf16", "ws"],
                   help="bf16: torch.matmul on the same shape; ws: the warp-specialized forward kernel with --ws-config")
    p.add_argument("--ws-config", default="64,64,4,1,1,0,128",
                   help="with --impl ws: BM,BN,stages,split_k,consumers,in_flight(0/1),maxnreg(0: none)")
    p.add_argument("--layout", default="pairs", choices=["pairs", "words"],
                   help="the kernel code layout of the weight (prepare_weight); the rollout forward runs on words")
    p.add_argument("--calls", type=int, default=5, help="calls in all; the last one is in the NVTX range")
    args = p.parse_args(argv)
    if args.layer not in SHAPES[args.model]:
        p.error(f"--layer must be one of {sorted(SHAPES[args.model])} for --model {args.model}")
    kw, q, n, k = build(args.model, args.layer, layout=args.layout)
    dev = kw.codes.device
    rows_in = k if args.dir == "fwd" else n
    x = (torch.randn(args.m, rows_in, device=dev) * 0.5).to(torch.bfloat16)
    info = {"model": args.model, "layer": args.layer, "n": n, "k": k, "m": args.m, "dir": args.dir, "impl": args.impl,
            "layout": args.layout}
    if args.impl == "bf16":
        w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.bfloat16)
        op = (lambda: x @ w.T) if args.dir == "fwd" else (lambda: x @ w)
    elif args.impl == "ws":
        from qerl.kernels import nvfp4_gemm_ws as ws

        bm, bn, st, sp, cons, inf, reg = (int(v) for v in args.ws_config.split(","))
        cfg = ws.WsConfig(bm, bn, st, sp, cons, bool(inf), reg or None)
        info["config"] = cfg._asdict()
        op = lambda: ws.ws_matmul(x, kw, cfg)  # noqa: E731
    elif args.dir == "fwd":
        info["config"] = kern.fwd_config(args.m, n, kw.k_pad, dev)._asdict()
        op = lambda: kern.nvfp4_matmul(x, kw)  # noqa: E731
    else:
        info["config"] = kern.bwd_config(args.m, n, kw.k_pad, dev)._asdict()
        op = lambda: kern.nvfp4_matmul_grad_input(x, kw)  # noqa: E731
    for _ in range(max(0, args.calls - 1)):  # warm-up: compile, autotune caches, split-K counters
        y = op()
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("profile")  # ncu --nvtx --nvtx-include profile/ captures only this call
    y = op()
    if dev.type == "cuda":
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    info["out_shape"] = list(y.shape)
    info["finite"] = bool(torch.isfinite(y.float()).all())
    print(json.dumps(info))
    return info


if __name__ == "__main__":
    main()

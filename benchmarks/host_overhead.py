"""What the default dispatch costs the host per call, next to the GPU time it buys.

A training step runs the NVFP4 GEMMs eagerly: each call's Python dispatch, argument binding and launch must take less
host time than the GPU spends on the call, or the GPU waits for the host. Per layer shape (Qwen2.5-7B), direction
and M this times, on the layout the default dispatch reads there ("words" for the forward below M = 1024, else
"pairs"):

- gpu: CUDA-graph replays (``gemm_nvfp4.bench``: no host work in the timed region);
- host: wall time per call of 40 calls issued without a sync (the host's own work per call, while the GPU queue
  has room);
- eager: 24 calls back to back between two events (the slower of the two sets the pace);
- of the host time, the part spent inside Triton's launch path (``JITFunction.run``, every launch of the call);

then profiles the host work of a few of these calls (``cProfile``, the functions with the most own time).

    python benchmarks/host_overhead.py --ms 1,16,128,1024,4096 --out $OUT
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import SHAPES, bench, run_setup  # noqa: E402
from slab_plans import eager_us  # noqa: E402


def host_us(fn, calls: int = 40) -> float:
    """Host microseconds per call: ``calls`` calls issued back to back, timed on the host without a sync."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t = time.perf_counter() - t0
    torch.cuda.synchronize()
    return t * 1e6 / calls


class LaunchClock:
    """Host seconds spent inside Triton's ``JITFunction.run`` (argument binding, specialization, cache lookup and the
    launch itself), summed over every Triton / Gluon launch while installed: the rest of a call's host time is the
    dispatch code around the launches (this project's wrappers, torch's allocations, events, streams)."""

    def __init__(self) -> None:
        from triton.runtime import jit

        self.jit, self.original, self.seconds = jit, jit.JITFunction.run, 0.0
        clock = self

        def timed_run(fn_self, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return clock.original(fn_self, *args, **kwargs)
            finally:
                clock.seconds += time.perf_counter() - t0

        jit.JITFunction.run = timed_run

    def close(self) -> None:
        self.jit.JITFunction.run = self.original


def launch_us(fn, calls: int = 40) -> float:
    """Host microseconds per call spent in Triton's launch path (``LaunchClock``)."""
    fn()
    torch.cuda.synchronize()
    clock = LaunchClock()
    try:
        for _ in range(calls):
            fn()
    finally:
        clock.close()
    torch.cuda.synchronize()
    return clock.seconds * 1e6 / calls


def profile(fn, calls: int = 20, top: int = 12, sort: str = "tottime") -> str:
    fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats(sort).print_stats(top)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="7b")
    p.add_argument("--ms", default="1,16,128,1024,4096")
    p.add_argument("--profile", default="o:fwd:16,o:bwd:16,o:fwd:1024,o:bwd:1024,gate_up:bwd:4096",
                   help="layer:dir:M cells whose host work is profiled")
    p.add_argument("--sort", default="tottime", help="the profiles' order: tottime (own time) or cumulative")
    p.add_argument("--top", type=int, default=12, help="functions listed per profile")
    p.add_argument("--out", default="benchmarks/out/host_overhead")
    args = p.parse_args(argv)
    out, meta = run_setup(p, args.out)
    from qerl import nvfp4
    from qerl.kernels import nvfp4_gemm as kern

    rows, profiles = [], {}
    wanted = {tuple(c.split(":")) for c in args.profile.split(",") if c}
    for layer, n, k in SHAPES[args.model]:
        q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
        weights = {lay: kern.prepare_weight(q.packed, q.scale, q.global_scale, layout=lay) for lay in ("pairs", "words")}
        for direction in ("fwd", "bwd"):
            for m in (int(v) for v in args.ms.split(",")):
                fwd = direction == "fwd"
                w = weights["words" if fwd and m < kern.LARGE_M_FWD else "pairs"]
                x = torch.randn(m, k if fwd else n, device="cuda", dtype=torch.bfloat16)
                y = torch.empty(m, n if fwd else k, device="cuda", dtype=torch.bfloat16)
                f = kern.nvfp4_matmul if fwd else kern.nvfp4_matmul_grad_input

                def call(f=f, x=x, w=w, y=y):
                    return f(x, w, out=y)

                row = {"layer": layer, "dir": direction, "m": m, "layout": w.layout, "gpu_us": bench([call]) * 1e6,
                       "host_us": host_us(call), "triton_launch_us": launch_us(call), "eager_us": eager_us([call])}
                rows.append(row)
                print(f"{args.model} {layer:8} {direction} M={m:5} gpu {row['gpu_us']:8.1f} host {row['host_us']:7.1f} "
                      f"(in Triton's launch path {row['triton_launch_us']:6.1f}) eager {row['eager_us']:8.1f} us",
                      flush=True)
                if (layer, direction, str(m)) in wanted:
                    profiles[f"{layer} {direction} M={m}"] = profile(call, top=args.top, sort=args.sort)
    (out / "host_overhead.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    text = "".join(f"=== {name}\n{prof}\n" for name, prof in profiles.items())
    (out / "profiles.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

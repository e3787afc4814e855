"""How fast the SMs re-read a small operand from L2, as the decode-shaped forward re-reads X once per row tile of W.

At M >= 32 every CTA of the forward (one 64- or 128-row tile of W) copies all of X's [BM, K] tile through its ring,
so for 7B gate_up at M = 64 with BN = 64 the SMs read 592 x 458 KB = 265 MB of X from L2 next to W's 68 MB of codes
from DRAM. This times a Triton loop of TMA loads that only does that: P programs each read the whole of X ([M, K]
bf16, [M, 64] boxes, a 4-stage software pipeline), X small enough to stay in L2, and reports the L2 bytes per second
(P x X's bytes / time) per M, K and P, next to the bytes of the same traffic in the GEMM: the rate bounds how fast any
kernel that re-reads X per row tile can go.

    python benchmarks/l2_reread.py --out benchmarks/out/l2_reread
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import bench, run_setup  # noqa: E402


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def reread(desc, out_ptr, boxes, BM: tl.constexpr, STAGES: tl.constexpr):
        acc = tl.zeros([BM, 64], tl.float32)
        for b in tl.range(0, boxes, num_stages=STAGES):
            acc += desc.load([0, b * 64]).to(tl.float32)
        tl.store(out_ptr + tl.program_id(0), tl.sum(acc))

    return reread


def measure(m: int, k: int, programs: list[int], log) -> list[dict]:
    from triton.tools.tensor_descriptor import TensorDescriptor

    reread = _kernel()
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    desc = TensorDescriptor.from_tensor(x, [m, 64])
    expect = float(x.float().sum())
    rows = []
    for p in programs:
        out = torch.empty(p, device="cuda")
        run = functools.partial(reread[(p,)], desc, out, k // 64, BM=m, STAGES=4, num_warps=4)
        run()
        if abs(float(out[0]) - expect) > 1e-2 * max(1.0, abs(expect)) + 1.0:
            raise RuntimeError(f"M={m} K={k}: a program's sum {float(out[0])} is not X's {expect}")
        us = bench([run]) * 1e6
        nbytes = p * x.numel() * 2
        rows.append({"m": m, "k": k, "programs": p, "us": us, "l2_bytes": nbytes, "tbs": nbytes / us / 1e6})
        log(f"M={m:3d} K={k:5d} programs {p:5d}: {us:8.2f} us, {nbytes / 1e6:7.1f} MB, {nbytes / us / 1e6:6.2f} TB/s")
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ms", default="32,64,128")
    p.add_argument("--ks", default="3584,5120")
    p.add_argument("--programs", default="132,264,396,592,1184")
    p.add_argument("--out", default="benchmarks/out/l2_reread")
    args = p.parse_args(argv)
    out, meta = run_setup(p, args.out, "a CUDA GPU (TMA loads)")
    rows = []
    for m in (int(v) for v in args.ms.split(",")):
        for k in (int(v) for v in args.ks.split(",")):
            rows += measure(m, k, [int(v) for v in args.programs.split(",")], print)
            (out / "l2_reread.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

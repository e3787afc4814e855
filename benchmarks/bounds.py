"""How much faster than cuBLAS BF16 any NVFP4 x BF16 kernel can be on this device, per layer shape and M.

Hopper has no FP4 tensor-core instruction and X is BF16, so an NVFP4 weight-only GEMM must at least
  (a) move its bytes: the weight's codes and scales and X (dY) in, Y (dX) out, and
  (b) run its 2 * M * N * K flops on the BF16 tensor cores, as cuBLAS does.
Its time is therefore at least max(t_io, t_mma), and its speedup over cuBLAS at most
``bf16_us / max(t_io, t_mma)``: the *bound* of the cell. Two versions of each floor:

- spec: bytes / the data-sheet DRAM bandwidth, flops / the data-sheet dense BF16 peak. A hard limit of the chip.
- measured: ``t_io`` is the best time of this run's streaming kernels for the same traffic (one launch, read the
  same number of bytes in, write the same number out, timed like the GEMMs: CUDA-graph replays over copies that do not
  fit in L2), so it includes what any one-launch kernel pays to start and drain; ``t_mma`` is flops / the best
  cuBLAS BF16 throughput measured in this run (an 8192^3 product and every layer's largest M).

Next to the bounds it times cuBLAS BF16 and the default dispatch (``nvfp4_matmul`` on the rollouts' "words"
layout below M = 1024, on the trainer's "pairs" layout from there; ``nvfp4_matmul_grad_input`` on "pairs", or with
``--bwd-layout rows`` on the "rows" layout where the kernel's table covers the product; checked
first against dequantize-then-matmul in fp32 on a NaN-poisoned output), so each row says what the shipped kernel
reaches, what could be reached at best, and whether the issue's target is within the bound at all. A cell whose measured bound is below its target cannot meet it with any kernel that runs a single
launch on this device; one whose spec bound is below cannot meet it on this chip at all.

    python benchmarks/bounds.py --models 7b,14b,32b --out $OUT

Writes bounds.json and bounds.md under --out.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import SHAPES, bench, bf16_copies, checked, fp32_matmul  # noqa: E402

from qerl.nvfp4 import GROUP_SIZE  # noqa: E402

# The targets (NVFP4 / BF16 speedup, forward and input gradient): M <= 16, M = 64, M = 128, M >= 1024.
DECODE_TARGET, MID_TARGETS, LARGE_M_TARGET = 3.0, {64: 2.5, 128: 1.5}, 0.9

# Data-sheet numbers (SXM boards): DRAM bytes/s and dense BF16 tensor-core flop/s.
SPECS = {"H100": (3.35e12, 989.4e12), "H200": (4.8e12, 989.4e12)}

FWD_MS = [1, 8, 16, 64, 128, 1024, 4096]
BWD_MS = [1, 16, 64, 128, 1024, 4096]


def target(m: int) -> float | None:
    """The issue's speedup target at M rows (None where it sets none)."""
    if m <= 16:
        return DECODE_TARGET
    if m >= 1024:
        return LARGE_M_TARGET
    return MID_TARGETS.get(m)


def spec_of(device_name: str) -> tuple[float, float] | None:
    """(DRAM bytes/s, dense BF16 flop/s) from the data sheet, for the boards this project is measured on."""
    for key, val in SPECS.items():
        if key in device_name:
            return val
    return None


def traffic(m: int, n: int, k: int, direction: str) -> tuple[int, int]:
    """(bytes in, bytes out) an NVFP4 product must move at least: the weight's 4-bit codes and one scale byte per
    16 weights, the BF16 operand X [M, K] (forward) or dY [M, N] (input gradient), the BF16 result."""
    weight = n * k // 2 + n * k // GROUP_SIZE
    if direction == "fwd":
        return weight + 2 * m * k, 2 * m * n
    return weight + 2 * m * n, 2 * m * k


def bound(bf16_s: float, io_s: float, mma_s: float) -> float:
    """The largest speedup over BF16 a kernel with these floors could reach."""
    return bf16_s / max(io_s, mma_s)


def cell(m: int, n: int, k: int, direction: str, bf16_s: float, io_s: float, peak_flops: float,
         spec: tuple[float, float] | None) -> dict:
    """A row's floors and bounds (seconds in, microseconds out) from the measured BF16 and streaming times."""
    flops = 2 * m * n * k
    bytes_in, bytes_out = traffic(m, n, k, direction)
    mma_s = flops / peak_flops
    row = {"m": m, "n": n, "k": k, "dir": direction, "bytes_in": bytes_in, "bytes_out": bytes_out, "flops": flops,
           "bf16_us": bf16_s * 1e6, "io_us": io_s * 1e6, "mma_us": mma_s * 1e6,
           "bound_measured": bound(bf16_s, io_s, mma_s), "target": target(m)}
    if spec is not None:
        bw, peak = spec
        io_spec, mma_spec = (bytes_in + bytes_out) / bw, flops / peak
        row.update(io_spec_us=io_spec * 1e6, mma_spec_us=mma_spec * 1e6, bound_spec=bound(bf16_s, io_spec, mma_spec))
    return row


def verdict(row: dict) -> str:
    """Whether the target lies within the bounds: "-" (no target), "met", "open" (within both bounds),
    "beyond measured" (above what a one-launch kernel can reach here), "beyond spec" (above the chip's limits)."""
    t = row["target"]
    if t is None:
        return "-"
    if row.get("shipped_over_bf16", 0.0) >= t:
        return "met"
    if "bound_spec" in row and row["bound_spec"] < t:
        return "beyond spec"
    if row["bound_measured"] < t:
        return "beyond measured"
    return "open"


# ----------------------------------------------------------------------------------------------- GPU part
@functools.cache
def _stream_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def stream(src, n_in, dst, n_out, sums, BLOCK: tl.constexpr, STAGES: tl.constexpr):
        """Read n_in int32 of src and write n_out int32 zeros to dst, a BLOCK at a time, programs striding over
        both (the reads software-pipelined over STAGES blocks); each program's XOR of what it read goes to sums (so
        the reads cannot be left out)."""
        pid = tl.program_id(0)
        step = tl.num_programs(0) * BLOCK
        acc = tl.zeros([BLOCK], tl.int32)
        for start in tl.range(pid * BLOCK, n_in, step, num_stages=STAGES):
            offs = start + tl.arange(0, BLOCK)
            acc ^= tl.load(src + offs, mask=offs < n_in, other=0)
        zeros = tl.zeros([BLOCK], tl.int32)
        for start in range(pid * BLOCK, n_out, step):
            offs = start + tl.arange(0, BLOCK)
            tl.store(dst + offs, zeros, mask=offs < n_out)
        tl.store(sums + pid, tl.xor_sum(acc, axis=0))

    return stream


STREAM_VARIANTS = [(2048, 4, 1), (8192, 8, 1), (2048, 4, 3)]  # (int32 per block, warps, pipelined stages)
STREAM_WAVES = [1, 2, 4, 8]  # programs per SM of the persistent launches (plus one program per block)
# Below this share of output bytes, cuBLAS-class reductions (torch's sum, reading only) are timed as floors too:
# leaving the few output bytes out can only lower the floor, so a bound from it stays an upper bound.
READ_ONLY_OUT_SHARE = 0.02


def stream_grids(n_in: int, n_out: int, block: int, sms: int) -> list[int]:
    """Program counts tried for a block size: 1, 2, 4, 8 per SM and one per block (never more than blocks)."""
    blocks = -(-max(n_in, n_out, 1) // block)
    return sorted({min(w * sms, blocks) for w in STREAM_WAVES} | {blocks})


def launch_stream(src: torch.Tensor, dst: torch.Tensor, n_out: int, sums: torch.Tensor, block: int,
                  warps: int, stages: int = 1) -> torch.Tensor:
    """One launch of the streaming kernel on ``len(sums)`` programs: reads all of ``src`` (int32), writes zeros
    to ``dst[:n_out]``; returns ``sums`` (each program's XOR of the words it read)."""
    _stream_kernel()[(sums.numel(),)](src, src.numel(), dst, n_out, sums, BLOCK=block, STAGES=stages,
                                      num_warps=warps)
    return sums


def xor_all(t: torch.Tensor) -> int:
    """The XOR of an int32 tensor's words (what the kernel's programs' results combine to)."""
    return int(np.bitwise_xor.reduce(t.cpu().numpy().astype(np.int64))) & 0xFFFFFFFF


def io_floor(bytes_in: int, bytes_out: int, l2_bytes: int, sms: int) -> tuple[float, str]:
    """The best time (s) of the streaming kernels for this traffic and the variant that took it. The input comes in
    copies that together exceed L2 three times over (cycled as the GEMM benchmark cycles weights)."""
    n_in, n_out = -(-bytes_in // 4), -(-bytes_out // 4)
    copies = max(1, math.ceil(3 * l2_bytes / (4 * n_in)))
    srcs = [torch.randint(-2**31, 2**31 - 1, (n_in,), dtype=torch.int32, device="cuda") for _ in range(copies)]
    dst = torch.empty(max(n_out, 1), dtype=torch.int32, device="cuda")
    expect = xor_all(srcs[0])
    best = (math.inf, "")
    for block, warps, stages in STREAM_VARIANTS:
        for grid in stream_grids(n_in, n_out, block, sms):
            sums = torch.empty(grid, dtype=torch.int32, device="cuda")
            if xor_all(launch_stream(srcs[0], dst, n_out, sums, block, warps, stages)) != expect:
                raise RuntimeError(f"streaming kernel (block {block}, grid {grid}) did not read every byte")
            t = bench([lambda s=s, sums=sums, block=block, warps=warps, stages=stages:
                       launch_stream(s, dst, n_out, sums, block, warps, stages) for s in srcs], min_ms=10)
            if t < best[0]:
                best = (t, f"block {block} x {warps} warps, {stages} stages, {grid} programs")
    if bytes_out <= READ_ONLY_OUT_SHARE * bytes_in:
        total = torch.empty((), dtype=torch.float32, device="cuda")
        t = bench([lambda s=s: torch.sum(s.view(torch.float32), dim=0, out=total) for s in srcs], min_ms=10)
        if t < best[0]:
            best = (t, "torch.sum over the input (read only)")
    del srcs
    return best


def mma_peak(log) -> float:
    """The best cuBLAS BF16 throughput (flop/s) of an 8192^3 product in this run."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t = bench([lambda: a @ b], min_ms=200)
    log(f"cuBLAS BF16 8192^3: {2 * 8192**3 / t / 1e12:.0f} TFLOP/s")
    return 2 * 8192**3 / t


def measure_layer(model: str, layer: str, n: int, k: int, directions: list[str], fwd_ms: list[int],
                  bwd_ms: list[int], l2_bytes: int, sms: int, log, bwd_layout: str = "pairs") -> list[dict]:
    """BF16 and the default dispatch per M and direction, with the streaming floor of each cell's traffic. Rows
    carry seconds in ``_bf16_s`` / ``_io_s`` until the run's MMA peak is known. ``bwd_layout`` "rows": the input
    gradient on that layout where the kernel's table covers the product, else on "pairs" (as a packed layer with the
    "rows" copy runs it)."""
    from gemm_ws import _copies

    from qerl import nvfp4
    from qerl.kernels import nvfp4_gemm as kern

    torch.manual_seed(hash((model, layer)) % 2**31)
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    w_bf16 = ref_w.to(torch.bfloat16)
    wbs = bf16_copies(w_bf16, l2_bytes)
    kws = {lay: _copies(kern.prepare_weight(q.packed, q.scale, q.global_scale, layout=lay), l2_bytes)
           for lay in ("pairs", "words") + (("rows",) if bwd_layout == "rows" else ())}
    rows = []
    for direction in directions:
        for m in fwd_ms if direction == "fwd" else bwd_ms:
            fwd = direction == "fwd"
            x = torch.randn(m, k if fwd else n, device="cuda", dtype=torch.bfloat16)
            if fwd:
                layout = "words" if m < kern.LARGE_M_FWD else "pairs"
                shipped = kern.nvfp4_matmul
                t_bf16 = bench([lambda wb=wb, x=x: torch.nn.functional.linear(x, wb) for wb in wbs])
            else:
                layout = "pairs"
                if bwd_layout == "rows" and kern.grad_input_weight(x, kws["pairs"][0], kws["rows"][0]).rows:
                    layout = "rows"
                shipped = kern.nvfp4_matmul_grad_input
                t_bf16 = bench([lambda wb=wb, x=x: torch.matmul(x, wb) for wb in wbs])
            # As every timed GEMM of the benchmarks: checked first against dequantize-then-matmul in fp32 on a
            # NaN-poisoned output.
            err, finite = checked(lambda out, x=x, kw=kws[layout][0], f=shipped: f(x, kw, out=out),
                                  (m, n if fwd else k), fp32_matmul(x.float(), ref_w.T if fwd else ref_w))
            if not finite or err > 1e-2:
                raise RuntimeError(f"{model} {layer} {direction} M={m}: the default dispatch is wrong "
                                   f"(relative error {err:.3g}, finite {finite})")
            t_ship = bench([lambda kw=kw, x=x, f=shipped: f(x, kw) for kw in kws[layout]])
            bytes_in, bytes_out = traffic(m, n, k, direction)
            t_io, how = io_floor(bytes_in, bytes_out, l2_bytes, sms)
            rows.append({"model": model, "layer": layer, "dir": direction, "m": m, "n": n, "k": k,
                         "_bf16_s": t_bf16, "_io_s": t_io, "io_variant": how, "shipped_us": t_ship * 1e6,
                         "shipped_rel_err": err, "shipped_layout": layout, "shipped_over_bf16": t_bf16 / t_ship})
            log(f"{model:4} {layer:8} {direction} M={m:5}  bf16 {t_bf16 * 1e6:8.1f}  shipped {t_ship * 1e6:8.1f} "
                f"({t_bf16 / t_ship:.2f}x)  io floor {t_io * 1e6:7.1f} us ({how})")
    return rows


def finish(rows: list[dict], peak_flops: float, spec: tuple[float, float] | None) -> list[dict]:
    """Each measured row with its floors, bounds and verdict (the run's MMA peak known)."""
    out = []
    for r in rows:
        row = {key: val for key, val in r.items() if not key.startswith("_")}
        row.update(cell(r["m"], r["n"], r["k"], r["dir"], r["_bf16_s"], r["_io_s"], peak_flops, spec))
        row["shipped_of_bound"] = row["shipped_over_bf16"] / row["bound_measured"]
        row["verdict"] = verdict(row)
        out.append(row)
    return out


def markdown(rows: list[dict], meta: dict) -> str:
    spec = "spec bound" if meta.get("spec") else "spec bound (no data sheet for this device)"
    lines = [f"# Bounds on NVFP4 / BF16, {meta['device']}, {meta['date']}", "",
             f"cuBLAS BF16 peak this run: {meta['peak_tflops']:.0f} TFLOP/s; data sheet: {meta.get('spec')}.",
             f"Command: `{meta['command']}`", "",
             f"| model | layer | dir | M | BF16 us | shipped us (x BF16) | io floor us | MMA floor us | measured bound "
             f"| {spec} | target | shipped / bound | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        spec_b = f"{r['bound_spec']:.2f}x" if "bound_spec" in r else "-"
        tgt = f"{r['target']:.1f}x" if r["target"] is not None else "-"
        lines.append(f"| {r['model']} | {r['layer']} | {r['dir']} | {r['m']} | {r['bf16_us']:.1f} | "
                     f"{r['shipped_us']:.1f} ({r['shipped_over_bf16']:.2f}x) | {r['io_us']:.1f} | {r['mma_us']:.1f} | "
                     f"{r['bound_measured']:.2f}x | {spec_b} | {tgt} | {r['shipped_of_bound']:.2f} | {r['verdict']} |")
    lines += ["", "Cells per target and verdict (met: the shipped dispatch reaches the target; open: the target lies within "
              "both bounds; beyond measured / beyond spec: above the bound):", "",
              "| dir | M | target | cells | met | open | beyond measured | beyond spec | shipped x BF16 (geomean) | "
              "measured bound (geomean) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key, group in summarize(rows).items():
        d, m = key
        lines.append(f"| {d} | {m} | {group['target']:.1f}x | {group['cells']} | {group['met']} | {group['open']} | "
                     f"{group['beyond measured']} | {group['beyond spec']} | {group['shipped_geomean']:.2f}x | "
                     f"{group['bound_geomean']:.2f}x |")
    return "\n".join(lines) + "\n"


def summarize(rows: list[dict]) -> dict:
    """Per (direction, M) with a target: the count of cells per verdict and the geomeans of the shipped ratio and of
    the measured bound."""
    groups: dict = {}
    for r in rows:
        if r["target"] is None:
            continue
        g = groups.setdefault((r["dir"], r["m"]), {"target": r["target"], "cells": 0, "met": 0, "open": 0,
                                                   "beyond measured": 0, "beyond spec": 0, "_ship": [], "_bound": []})
        g["cells"] += 1
        g[r["verdict"]] += 1
        g["_ship"].append(math.log(r["shipped_over_bf16"]))
        g["_bound"].append(math.log(r["bound_measured"]))
    for g in groups.values():
        g["shipped_geomean"] = math.exp(sum(g["_ship"]) / len(g["_ship"]))
        g["bound_geomean"] = math.exp(sum(g["_bound"]) / len(g["_bound"]))
        del g["_ship"], g["_bound"]
    return dict(sorted(groups.items()))


def _write(path: Path, text: str) -> None:
    """Replace ``path`` whole (a run stopped mid-write keeps the previous layer's file)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="7b,14b,32b", help="comma-separated: 7b, 14b, 32b")
    p.add_argument("--dirs", default="fwd,bwd", help="fwd (Y = X W^T) and/or bwd (dX = dY W)")
    p.add_argument("--ms", default=",".join(map(str, FWD_MS)), help="forward M values")
    p.add_argument("--bwd-ms", default=",".join(map(str, BWD_MS)), help="input-gradient M values")
    p.add_argument("--bwd-layout", default="pairs", choices=["pairs", "rows"],
                   help="the input gradient's code layout (rows: where the kernel's table covers the product)")
    p.add_argument("--out", default="benchmarks/out/bounds")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU")
    import triton

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    spec = spec_of(props.name)

    def log(s: str) -> None:
        print(s, flush=True)

    meta = {"device": props.name, "sms": props.multi_processor_count, "date": time.strftime("%Y-%m-%d"),
            "torch": torch.__version__, "triton": triton.__version__, "command": "python " + " ".join(sys.argv),
            "spec": None if spec is None else {"dram_bytes_s": spec[0], "bf16_flops": spec[1]}}
    peak = mma_peak(log)
    raw = []
    for model in args.models.split(","):
        for layer, n, k in SHAPES[model]:
            raw += measure_layer(model, layer, n, k, args.dirs.split(","), [int(v) for v in args.ms.split(",")],
                                 [int(v) for v in args.bwd_ms.split(",")], l2, props.multi_processor_count, log,
                                 args.bwd_layout)
            # The largest products are also MMA throughputs of this run: the peak is the best of them all.
            peak = max([peak] + [2 * r["m"] * r["n"] * r["k"] / r["_bf16_s"] for r in raw])
            meta["peak_tflops"] = peak / 1e12
            rows = finish(raw, peak, spec)
            summary = [{"dir": d, "m": m, **g} for (d, m), g in summarize(rows).items()]
            _write(out / "bounds.json", json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
            _write(out / "bounds.md", markdown(rows, meta))
    log(f"wrote {out / 'bounds.md'}")


if __name__ == "__main__":
    main()

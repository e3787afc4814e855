"""Registers and spills of the NVFP4 kernels' shipped launch configs, compiled ahead of time for a GPU
target (default sm_90a, Hopper) on any machine, no GPU needed (``qerl.kernels.aot``: Triton to PTX, Triton's ptxas).

For each decode-sized entry of ``TUNED`` (M <= 128; forward and input gradient) it reports the pick and the same
tile on twice the warps (fewer registers per thread, so more resident warps per SM). These are compile facts, not
timings (``benchmarks/gemm_nvfp4.py`` measures time on the GPU).

    python benchmarks/kernel_resources.py [--capability 90] [--json out.json]
    python benchmarks/kernel_resources.py --loops     # instructions in the forward main loop of each distinct pick

A warp scheduler issues about one instruction per cycle, so the main loop's warp instructions per weight bound the
weights per second an SM can dequantize and multiply, independently of memory bandwidth (``--loops``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qerl.kernels import aot  # noqa: E402
from qerl.kernels import nvfp4_gemm as kern  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--capability", type=int, default=90, help="compute capability to compile for (90: Hopper)")
    p.add_argument("--max-m", type=int, default=128, help="largest M bucket of TUNED to report")
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--loops", action="store_true",
                   help="instead: SASS opcode counts of the forward main loop of every distinct decode pick and of "
                        "the same tile on 2x warps")
    args = p.parse_args(argv)
    if aot.ptxas_path() is None:
        print("this Triton build ships no ptxas: nothing to report", file=sys.stderr)
        return 1
    if args.loops:
        return loops(args)
    rows, cache = [], {}

    def resources(cfg: kern.FwdConfig | kern.BwdConfig) -> dict[str, int]:
        if cfg not in cache:
            report = aot.fwd_resources if isinstance(cfg, kern.FwdConfig) else aot.bwd_resources
            cache[cfg] = report(cfg, capability=args.capability)
        return cache[cfg]

    print("| direction | N x K | M | pick | regs | spill B | 2x warps: regs | spill B |")
    print("|---|---|---|---|---|---|---|---|")
    for (direction, m, n, k_pad), cfg in sorted(kern.TUNED.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][3],
                                                                                      kv[0][1])):
        if m > args.max_m:
            continue
        twin = cfg._replace(num_warps=2 * cfg.num_warps)
        pick, wide = resources(cfg), resources(twin)
        rows.append({"direction": direction, "n": n, "k_pad": k_pad, "m": m, "config": cfg._asdict(), **pick,
                     "twin_warps": twin.num_warps, "twin_registers": wide["registers"],
                     "twin_spill_bytes": wide["spill_bytes"]})
        tile = (f"mode {cfg.mode} {cfg.bm}x{cfg.bn} ch {cfg.ch} split {cfg.split_k}" if direction == "fwd"
                else f"mode {cfg.mode} {cfg.bm}x{cfg.bn} split {cfg.split_n}")
        print(f"| {direction} | {n} x {k_pad} | {m} | {tile} {cfg.num_warps} warps | {pick['registers']} | "
              f"{pick['spill_bytes']} | {wide['registers']} | {wide['spill_bytes']} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"capability": args.capability, "rows": rows}, indent=1))
    return 0


def loops(args: argparse.Namespace) -> int:
    picks = sorted({cfg for (direction, m, _, _), cfg in kern.TUNED.items()
                    if direction == "fwd" and m <= args.max_m}, key=lambda c: (c.bm, c.mode, c.bn, c.ch, c.num_warps))
    rows = []
    print("| tile (mode, BM x BN, chunks, warps) | loop warp instr | per weight | top opcodes |")
    print("|---|---|---|---|")
    seen = set()
    for cfg in picks:
        for c in (cfg._replace(split_k=2), cfg._replace(split_k=2, num_warps=2 * cfg.num_warps)):
            key = (c.mode, c.bm, c.bn, c.ch, c.num_warps)
            if key in seen:
                continue
            seen.add(key)
            prof = aot.fwd_loop_profile(c, capability=args.capability)
            top = ", ".join(f"{op} {n}" for op, n in list(prof["opcodes"].items())[:8])
            print(f"| {c.mode}, {c.bm}x{c.bn}, {c.ch}, {c.num_warps} | {prof['loop_instructions']} | "
                  f"{prof['per_weight']:.3f} | {top} |", flush=True)
            rows.append({"tile": dict(zip(("mode", "bm", "bn", "ch", "num_warps"), key)), **prof})
    if args.json:
        Path(args.json).write_text(json.dumps({"capability": args.capability, "loops": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

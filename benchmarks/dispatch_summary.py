"""Summarise alternating ``gemm_ws.py --dispatch-only`` passes (``scripts/device_session.sh``'s
``dispatch_alternating``: dispatch_old1/new1/old2/new2.json in one directory) as the markdown tables of
benchmarks/RESULTS.md: per direction and M, the new / previous time (geomean over the layers, min, max) and the
speedup over BF16 before and after; then per layer. Each version's time is the geomean of its two passes, BF16 the
mean of all four. ``--names pairs,rows`` reads another pair of pass names (``dispatch_bwd_layouts``' files:
dispatch_pairs1/rows1/pairs2/rows2.json), the first as "previous".

    python benchmarks/dispatch_summary.py benchmarks/results/run10_h200_2026-11-24/dispatch_final
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

PASSES = ("old1", "new1", "old2", "new2")


def load(directory: Path, names: tuple[str, str] = ("old", "new")) -> dict[str, dict[tuple, dict]]:
    """The four passes, keyed old1 / new1 / old2 / new2 whatever their file names (``names``)."""
    out = {}
    for p in PASSES:
        name = {"old": names[0], "new": names[1]}[p[:3]] + p[3:]
        path = directory / f"dispatch_{name}.json"
        if not path.is_file():
            raise SystemExit(f"{path} is missing: give the directory of one dispatch_alternating call")
        out[p] = {(r["model"], r["layer"], r["dir"], r["m"]): r for r in json.loads(path.read_text())["rows"]}
    return out


def summarise(passes: dict[str, dict[tuple, dict]]) -> str:
    rows = []
    for key in passes["old1"]:
        old = statistics.geometric_mean([passes[p][key]["shipped_us"] for p in ("old1", "old2")])
        new = statistics.geometric_mean([passes[p][key]["shipped_us"] for p in ("new1", "new2")])
        bf16 = statistics.mean([passes[p][key]["bf16_us"] for p in PASSES])
        rows.append({"key": key, "old": old, "new": new, "bf16": bf16, "path": passes["new1"][key]["shipped_path"]})
    lines = ["| direction | M | new / previous time, geomean (min, max) | speedup over BF16, previous → new: geomean "
             "(new per layer min-max) |", "|---|---|---|---|"]
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["key"][2], r["key"][3]), []).append(r)
    for (direction, m), sel in groups.items():
        ratio = [r["new"] / r["old"] for r in sel]
        x_old = statistics.geometric_mean([r["bf16"] / r["old"] for r in sel])
        x_new = [r["bf16"] / r["new"] for r in sel]
        name = "forward" if direction == "fwd" else "input gradient"
        lines.append(f"| {name} | {m} | {statistics.geometric_mean(ratio):.2f} ({min(ratio):.2f}, {max(ratio):.2f}) | "
                     f"{x_old:.2f} → **{statistics.geometric_mean(x_new):.2f}** ({min(x_new):.2f}-{max(x_new):.2f}) |")
    lines += ["", "| model | layer | direction | M | BF16 us | previous us (x BF16) | new us (x BF16) | new path |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        model, layer, direction, m = r["key"]
        lines.append(f"| {model} | {layer} | {direction} | {m} | {r['bf16']:.1f} | {r['old']:.1f} "
                     f"({r['bf16'] / r['old']:.2f}x) | {r['new']:.1f} ({r['bf16'] / r['new']:.2f}x) | {r['path']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("directory", type=Path)
    ap.add_argument("--write", action="store_true", help="also write summary.md into the directory")
    ap.add_argument("--names", default="old,new", help="the two versions' pass names, previous first")
    args = ap.parse_args()
    names = tuple(args.names.split(","))
    if len(names) != 2:
        ap.error("--names takes two comma-separated names, e.g. pairs,rows")
    text = summarise(load(args.directory, names))
    print(text, end="")
    if args.write:
        (args.directory / "summary.md").write_text(text)


if __name__ == "__main__":
    main()

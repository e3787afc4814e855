"""Summarise ``gemm_ws.py --layouts words,pairs`` runs (one or more gemm_ws.json files) as markdown: per M, over the
layers, the time of the same launch config on the "pairs" layout over its time on the "words" layout (every config
that ran on both), the best config of each layout against each other, and the best "words" config against the
shipped path ("pairs", ``nvfp4_matmul``'s default dispatch) and against BF16; then one line per layer and M.

    python benchmarks/layout_summary.py benchmarks/results/run11_h200_2026-11-24/*/gemm_ws.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def _geo(values: list[float]) -> str:
    return f"{statistics.geometric_mean(values):.2f} ({min(values):.2f}-{max(values):.2f})" if values else "-"


def summarise(rows: list[dict]) -> str:
    by_m: dict[int, list[dict]] = {}
    per_layer = ["| model | layer | M | BF16 us | shipped us (x BF16) | best pairs us | best words us (x BF16) | "
                 "words config |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "by_layout" not in r or {"words", "pairs"} - set(r["by_layout"]):
            continue
        times: dict[tuple, dict[str, float]] = {}
        for t in r["tried"]:
            if "us" in t:
                times.setdefault(tuple(t["config"].values()), {})[t["layout"]] = t["us"]
        same = [v["pairs"] / v["words"] for v in times.values() if {"pairs", "words"} <= set(v)]
        w, p = r["by_layout"]["words"], r["by_layout"]["pairs"]
        by_m.setdefault(r["m"], []).append({"same": same, "best": p["us"] / w["us"],
                                            "over_shipped": r["shipped_us"] / w["us"],
                                            "over_bf16": r["bf16_us"] / w["us"],
                                            "shipped_over_bf16": r["bf16_us"] / r["shipped_us"]})
        per_layer.append(f"| {r['model']} | {r['layer']} | {r['m']} | {r['bf16_us']:.1f} | {r['shipped_us']:.1f} "
                         f"({r['bf16_us'] / r['shipped_us']:.2f}x) | {p['us']:.1f} | {w['us']:.1f} "
                         f"({r['bf16_us'] / w['us']:.2f}x) | {', '.join(str(v) for v in w['config'].values())} |")
    lines = ["| M | layers | same config: pairs time / words time, geomean (min-max) | best pairs / best words | "
             "shipped / best words | shipped x BF16 | best words x BF16 |", "|---|---|---|---|---|---|---|"]
    for m in sorted(by_m):
        cells = by_m[m]
        same = [statistics.geometric_mean(c["same"]) for c in cells if c["same"]]
        lines.append(f"| {m} | {len(cells)} | {_geo(same)} | {_geo([c['best'] for c in cells])} | "
                     f"{_geo([c['over_shipped'] for c in cells])} | {_geo([c['shipped_over_bf16'] for c in cells])} | "
                     f"{_geo([c['over_bf16'] for c in cells])} |")
    return "\n".join(lines) + "\n\n" + "\n".join(per_layer) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--write", type=Path, help="also write the markdown to this file")
    args = ap.parse_args()
    rows = [r for f in args.files for r in json.loads(f.read_text())["rows"]]
    text = summarise(rows)
    print(text, end="")
    if args.write:
        args.write.write_text(text)


if __name__ == "__main__":
    main()

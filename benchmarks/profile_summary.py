"""Summarise the per-instruction CSVs that benchmarks/profile_gemm.sh writes (ncu --page source --print-source sass):
warp stall samples by reason, the instructions with the most samples, and the global loads whose sectors exceed the
ideal (uncoalesced accesses).

    python benchmarks/profile_summary.py DIR_OR_TARBALL [--top 12] [--md OUT.md]
"""

from __future__ import annotations

import argparse
import csv
import io
import tarfile
from collections import Counter
from pathlib import Path


def _rows(text: str) -> list[dict[str, str]]:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"Address"')), None)
    if start is None:
        raise ValueError("no per-instruction table (a header starting with \"Address\") in this CSV")
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def _num(v: str | None) -> float:
    try:
        return float((v or "0").replace(",", ""))
    except ValueError:
        return 0.0


def summarise(name: str, text: str, top: int) -> list[str]:
    rows = _rows(text)
    reasons = [c for c in rows[0] if c.startswith("stall_") and not c.endswith("(Not Issued)")]
    total = sum(_num(r["Warp Stall Sampling (All Samples)"]) for r in rows) or 1.0
    by_reason = Counter({c[len("stall_"):]: sum(_num(r[c]) for r in rows) for c in reasons})
    out = [f"### {name}", "", f"{len(rows)} SASS instructions, {int(total)} warp samples. Stall reasons (% of samples):", ""]
    out.append(", ".join(f"{k} {100 * v / total:.1f}" for k, v in by_reason.most_common() if v / total >= 0.01))
    out += ["", "| instruction | % samples | top reasons |", "|---|---|---|"]
    hot = sorted(rows, key=lambda r: -_num(r["Warp Stall Sampling (All Samples)"]))[:top]
    for r in hot:
        s = _num(r["Warp Stall Sampling (All Samples)"])
        rs = sorted(((c[len("stall_"):], _num(r[c])) for c in reasons), key=lambda t: -t[1])[:2]
        why = ", ".join(f"{k} {100 * v / max(s, 1):.0f}%" for k, v in rs if v)
        out.append(f"| `{r['Source'].strip()}` | {100 * s / total:.1f} | {why} |")
    ex_total = sum(_num(r.get("L2 Theoretical Sectors Global Excessive")) for r in rows)
    sec_total = sum(_num(r.get("L2 Theoretical Sectors Global")) for r in rows) or 1.0
    out += ["", f"Global sectors: {int(sec_total)}, excessive {int(ex_total)} ({100 * ex_total / sec_total:.1f}%)."]
    bad = sorted(rows, key=lambda r: -_num(r.get("L2 Theoretical Sectors Global Excessive")))[:4]
    for r in bad:
        ex = _num(r.get("L2 Theoretical Sectors Global Excessive"))
        if ex:
            out.append(f"- `{r['Source'].strip()}`: {int(_num(r['L2 Theoretical Sectors Global']))} sectors, "
                       f"{int(_num(r['L2 Theoretical Sectors Global Ideal']))} ideal")
    return out + [""]


def _sources(path: Path) -> list[tuple[str, str]]:
    if path.is_dir():
        return [(p.stem, p.read_text()) for p in sorted(path.glob("*.csv"))]
    with tarfile.open(path) as tar:
        return [(Path(m.name).stem, tar.extractfile(m).read().decode()) for m in sorted(tar.getmembers(),
                key=lambda m: m.name) if m.isfile() and m.name.endswith(".csv")]


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", type=Path, help="folder of CSVs or sass.tar.gz from profile_gemm.sh")
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--md", type=Path)
    args = p.parse_args(argv)
    if not args.source.exists():
        p.error(f"{args.source} does not exist: give the sass.tar.gz (or its folder) that profile_gemm.sh wrote")
    lines: list[str] = []
    for name, text in _sources(args.source):
        lines += summarise(name, text, args.top)
    md = "\n".join(lines)
    if args.md:
        tmp = args.md.with_suffix(args.md.suffix + ".tmp")
        tmp.write_text(md)
        tmp.replace(args.md)
    print(md)
    return md


if __name__ == "__main__":
    main()

"""The accuracy runs' table (scripts/device_session.sh 77b-77e): held-out accuracy of every trained adapter by
configuration and seed, next to the base models', and each run's training reward at its start and end.

Reads a results folder holding `eval/*.json` (eval.arith summaries: `base_LOAD.json`, `trained_RUN.json`), the
runs' `trainer_state.json` files as `logs/state_RUN.json` (as files or inside `states.tar.xz`) and, where present,
the evaluations' samples (`eval/NAME.samples.jsonl` or inside `samples.tar.xz`) for the accuracy with each distinct
problem counted once. A run is named CONFIG (seed 0) or CONFIG_sSEED.

  python benchmarks/accuracy_table.py RESULTS_DIR [--out table.md]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import tarfile
from pathlib import Path

SEED = re.compile(r"^(?P<config>.+?)(?:_s(?P<seed>\d+))?$")


def split_run(run: str) -> tuple[str, int]:
    m = SEED.match(run)
    return m["config"], int(m["seed"] or 0)


def _texts(folder: Path, files: str, archive: str, prefix: str, suffix: str) -> dict[str, str]:
    """The text of every file named PREFIX + NAME + SUFFIX under `folder/files` or inside `folder/archive`, by NAME
    (a loose file wins over the archive's copy)."""
    found: dict[str, str] = {}
    for f in sorted((folder / files).glob(f"{prefix}*{suffix}")):
        found[f.name.removeprefix(prefix).removesuffix(suffix)] = f.read_text()
    if (folder / archive).is_file():
        with tarfile.open(folder / archive) as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                if member.isfile() and name.startswith(prefix) and name.endswith(suffix):
                    found.setdefault(name.removeprefix(prefix).removesuffix(suffix),
                                     tar.extractfile(member).read().decode())
    return found


def load_states(folder: Path) -> dict[str, list[dict]]:
    """Each run's logged steps (the entries of trainer_state.json's log_history that carry a reward)."""
    texts = _texts(folder, "logs", "states.tar.xz", "state_", ".json")
    return {run: [h for h in json.loads(t)["log_history"] if "reward" in h] for run, t in texts.items()}


def load_samples(folder: Path) -> dict[str, list[dict]]:
    """Each evaluation's samples (eval.arith's `NAME.samples.jsonl`), without the header line."""
    texts = _texts(folder, "eval", "samples.tar.xz", "", ".samples.jsonl")
    return {name: [r for r in map(json.loads, filter(str.strip, t.splitlines())) if "correct" in r]
            for name, t in texts.items()}


def distinct_accuracy(samples: list[dict]) -> tuple[float, int]:
    """Accuracy with each distinct prompt counted once (its samples averaged), and how many prompts there were.
    Evaluations made before the held-out arith split listed each problem once drew some problems twice."""
    by_prompt: dict[str, list[float]] = {}
    for r in samples:
        by_prompt.setdefault(json.dumps(r["prompt"], sort_keys=True), []).append(float(r["correct"]))
    return _mean([_mean(v) for v in by_prompt.values()]), len(by_prompt)


def _mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else math.nan


def table(folder: Path, window: int = 10) -> str:
    evals = {f.stem: json.loads(f.read_text()) for f in sorted((folder / "eval").glob("*.json"))}
    if not evals:
        raise SystemExit(f"{folder}/eval holds no eval.arith summary (*.json): pass the results folder of 77b-77e")
    states = load_states(folder)
    samples = load_samples(folder)

    def distinct(name: str) -> str:
        if name not in samples:
            return "-"
        acc, n = distinct_accuracy(samples[name])
        return f"{100 * acc:.1f} ({n})"

    by_config: dict[str, dict[int, float]] = {}
    lines = ["| run | held-out accuracy % (± stderr) | each distinct problem once: % (problems) | training reward, "
             f"first / last {window} steps | steps |", "|---|---|---|---|---|"]
    for name, ev in evals.items():
        if name.startswith("base_"):
            lines.append(f"| base, {name.removeprefix('base_')} | {100 * ev['accuracy']:.1f} "
                         f"(± {100 * ev['stderr']:.1f}) | {distinct(name)} | - | - |")
    for name, ev in evals.items():
        if not name.startswith("trained_"):
            continue
        run = name.removeprefix("trained_")
        config, seed = split_run(run)
        by_config.setdefault(config, {})[seed] = 100 * ev["accuracy"]
        steps = states.get(run, [])
        first = _mean([h["reward"] for h in steps[:window]])
        last = _mean([h["reward"] for h in steps[-window:]])
        lines.append(f"| {run} | {100 * ev['accuracy']:.1f} (± {100 * ev['stderr']:.1f}) | {distinct(name)} | "
                     f"{first:.3f} / {last:.3f} | {len(steps)} |")
    seeds = sorted({s for per in by_config.values() for s in per})
    lines += ["", "| config | " + " | ".join(f"seed {s}" for s in seeds) + " | mean |",
              "|---|" + "---|" * (len(seeds) + 1)]
    for config, per in by_config.items():
        cells = [f"{per[s]:.1f}" if s in per else "-" for s in seeds]
        lines.append(f"| {config} | " + " | ".join(cells) + f" | {_mean(list(per.values())):.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path)
    p.add_argument("--out", type=Path, help="also write the table (markdown) here")
    args = p.parse_args(argv)
    text = table(args.folder)
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

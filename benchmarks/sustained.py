"""Sustained-load timing: the NVFP4 forward (``nvfp4_matmul``'s default dispatch) and cuBLAS BF16 each run for
seconds on end, with the SM clock, power and temperature sampled by ``nvidia-smi`` meanwhile.

Why: benchmarks/gemm_ws.py times ~25 ms of CUDA-graph replays per config, too short for the GPU to reach the clock
its power limit allows under a steady compute-bound load, so a kernel timed on a cool GPU and one timed right after
another heavy kernel are not on equal terms (the order effect of run 9). Here each variant replays back to back for
``--seconds`` (alternating BF16 / NVFP4 twice), and the time per call is taken over the second half only, with the
clock and power samples of that half.

    python benchmarks/sustained.py --cells 7b:gate_up:4096,14b:down:1024 --seconds 3 --out $OUT
    python benchmarks/sustained.py --cells "" --models 7b,14b,32b --ms 1024 --dirs fwd,bwd --layout pairs

``--alt-configs FILE`` adds a third variant in each pass, "alt": the same dispatch with FILE's table entries
(``load_tuned_configs``' format, as ``QERL_TUNED_CONFIGS`` takes: e.g. ``{"ws|1024|3584|18944": null}`` declines
that kernel there) while its graph is captured and replayed, so a route and its alternative are timed alternately in
one process:

    python benchmarks/sustained.py --cells 7b:down:1024,32b:down:4096:bwd --layout pairs --alt-configs alt.json

A cell is model:layer:M or model:layer:M:bwd (the input gradient, ``nvfp4_matmul_grad_input`` against dY @ W);
with ``--cells ""`` every layer of ``--models`` at every M of ``--ms`` in every direction of ``--dirs``. Writes
sustained.json under --out (after each cell).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import SHAPES, captured_graph  # noqa: E402

from qerl import nvfp4  # noqa: E402
from qerl.kernels import nvfp4_gemm as kern  # noqa: E402

_QUERY = "timestamp,clocks.sm,power.draw,temperature.gpu"


def _sampler(path: str) -> subprocess.Popen:
    """``nvidia-smi`` writing a CSV line every 50 ms to ``path`` until terminated."""
    return subprocess.Popen(["nvidia-smi", f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits", "-lms", "50",
                             "-f", path])


def _samples(path: str, t0: float, t1: float) -> dict:
    """Mean SM clock (MHz), power (W) and the last temperature of the samples between wall times t0 and t1."""
    rows = []
    for line in Path(path).read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            continue
        try:
            stamp = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S"))
            stamp += float("0." + parts[0].split(".")[1]) if "." in parts[0] else 0.0
            rows.append((stamp, float(parts[1]), float(parts[2]), float(parts[3])))
        except ValueError:
            continue
    sel = [r for r in rows if t0 <= r[0] <= t1]
    if not sel:
        return {"samples": 0}
    return {"samples": len(sel), "sm_mhz": statistics.mean(r[1] for r in sel),
            "power_w": statistics.mean(r[2] for r in sel), "temp_c": sel[-1][3]}


def sustained(fns: list, seconds: float) -> dict:
    """Replay a CUDA graph of ``fns`` (one call each) back to back for ``seconds``; the time per call over the second
    half, and that half's wall-clock span (for the clock samples, read once the sampler has flushed them)."""
    graph, per_replay = captured_graph(fns, fns)
    per_replay = max(per_replay, 1e-6)
    batch = max(1, math.ceil(0.05 / per_replay))  # replays between two timing events: ~50 ms
    end = time.time() + seconds
    marks = []
    while time.time() < end:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            graph.replay()
        stop.record()
        stop.synchronize()
        marks.append((time.time(), start.elapsed_time(stop) / 1e3 / (batch * len(fns))))
    del graph
    half = marks[len(marks) // 2:]
    return {"us_per_call": statistics.median(m[1] for m in half) * 1e6, "us_first_window": marks[0][1] * 1e6,
            "windows": len(marks), "span": (half[0][0] - 0.05, half[-1][0])}


@contextlib.contextmanager
def tables_with(path: str):
    """The launch tables (``nvfp4_gemm.TUNED`` and ``nvfp4_gemm_ws``'s) with ``path``'s entries for the block, the
    module's own entries back afterwards (the dicts are updated in place: every reference to them sees both)."""
    from qerl.kernels import nvfp4_gemm_ws as ws

    tables = [kern.TUNED, ws.TUNED, ws.TUNED_BWD, ws.TUNED_WORDS, ws.TUNED_BWD_ROWS]
    saved = [dict(t) for t in tables]
    try:
        kern.load_tuned_configs_file(path)
        yield
    finally:
        for table, own in zip(tables, saved):
            table.clear()
            table.update(own)


def _variants(model: str, layer: str, m: int, layout: str, l2_bytes: int, direction: str = "fwd") -> dict:
    """{"bf16": calls, "nvfp4": calls, "nk": (N, K)}: one call per weight copy, enough copies (3x L2 in all) that L2
    serves none of them, as benchmarks/gemm_nvfp4.py; ``direction`` "bwd": the input gradient dY [M, N] @ W."""
    n, k = next((n, k) for name, n, k in SHAPES[model] if name == layer)
    torch.manual_seed(0)
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    kw = kern.prepare_weight(q.packed, q.scale, q.global_scale, **({} if layout == "pairs" else {"layout": layout}))
    wb = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.bfloat16)
    kws = [kw] + [kw._replace(codes=kw.codes.clone(), scales=kw.scales.clone()) for _ in
                  range(max(1, math.ceil(3 * l2_bytes / kw.nbytes())) - 1)]
    wbs = [wb] + [wb.clone() for _ in range(max(1, math.ceil(3 * l2_bytes / (n * k * 2))) - 1)]
    if direction == "bwd":
        dy = torch.randn(m, n, device="cuda").to(torch.bfloat16)
        dx = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
        return {"bf16": [lambda w=w: torch.matmul(dy, w, out=dx) for w in wbs],
                "nvfp4": [lambda w=w: kern.nvfp4_matmul_grad_input(dy, w, out=dx) for w in kws], "nk": (n, k)}
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return {"bf16": [lambda w=w: torch.matmul(x, w.T, out=y) for w in wbs],
            "nvfp4": [lambda w=w: kern.nvfp4_matmul(x, w, out=y) for w in kws], "nk": (n, k)}


def _cells(args) -> list[tuple[str, str, int, str]]:
    if args.cells:
        out = []
        for cell in args.cells.split(","):
            parts = cell.split(":")
            out.append((parts[0], parts[1], int(parts[2]), parts[3] if len(parts) > 3 else "fwd"))
        return out
    return [(model, layer, int(m), d) for d in args.dirs.split(",") for m in args.ms.split(",")
            for model in args.models.split(",") for layer, _, _ in SHAPES[model]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", default="7b:gate_up:4096,32b:gate_up:1024,14b:down:1024,7b:o:2048",
                    help="model:layer:M[:bwd], comma-separated; empty: --models x --ms x --dirs")
    ap.add_argument("--models", default="7b,14b,32b")
    ap.add_argument("--ms", default="1024")
    ap.add_argument("--dirs", default="fwd", help="fwd, bwd or both, comma-separated (with --cells \"\")")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--layout", default="words", choices=["pairs", "words"])
    ap.add_argument("--alt-configs", default="",
                    help="time also the dispatch with this file's table entries (QERL_TUNED_CONFIGS' format)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    if args.alt_configs:
        try:
            with tables_with(args.alt_configs):  # a missing or malformed file stops here, before any GPU work
                pass
        except ValueError as e:
            ap.error(f"--alt-configs: {e}")
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2**20)
    smi_log = str(out / "smi_samples.csv")
    sampler = _sampler(smi_log)
    time.sleep(1.0)
    rows = []
    try:
        for model, layer, m, direction in _cells(args):
            variants = _variants(model, layer, m, args.layout, l2, direction)
            n, k = variants.pop("nk")
            if args.alt_configs:
                variants["alt"] = variants["nvfp4"]  # the same calls, captured and replayed on the other tables
            row = {"model": model, "layer": layer, "dir": direction, "n": n, "k": k, "m": m}
            for rep in (1, 2):
                for name, fns in variants.items():
                    with tables_with(args.alt_configs) if name == "alt" else contextlib.nullcontext():
                        r = sustained(fns, args.seconds)
                    r["tflops"] = 2 * m * n * k / (r["us_per_call"] * 1e-6) / 1e12
                    row[f"{name}{rep}"] = r
                    print(f"{model} {layer} {direction} M={m} {name} pass {rep}: {r['us_per_call']:.1f} us "
                          f"({r['tflops']:.0f} TFLOP/s; first window {r['us_first_window']:.1f} us)", flush=True)
            bf = statistics.geometric_mean([row["bf161"]["us_per_call"], row["bf162"]["us_per_call"]])
            fp = statistics.geometric_mean([row["nvfp41"]["us_per_call"],
                                            row["nvfp42"]["us_per_call"]])
            row["nvfp4_over_bf16"] = bf / fp
            print(f"{model} {layer} {direction} M={m}: NVFP4 over BF16, sustained: {bf / fp:.2f}x", flush=True)
            if args.alt_configs:
                alt = statistics.geometric_mean([row["alt1"]["us_per_call"], row["alt2"]["us_per_call"]])
                row["alt_over_bf16"], row["nvfp4_over_alt"] = bf / alt, alt / fp
                print(f"{model} {layer} {direction} M={m}: on --alt-configs' tables {bf / alt:.2f}x BF16 (the "
                      f"shipped tables {alt / fp:.2f}x that)", flush=True)
            rows.append(row)
            _write(out, rows, args)
    finally:
        sampler.terminate()
        sampler.wait()
    # nvidia-smi writes its samples in blocks: read them once it has exited.
    for row in rows:
        for key, r in row.items():
            if isinstance(r, dict):
                r.update(_samples(smi_log, *r.pop("span")))
                print(f"{row['model']} {row['layer']} {row['dir']} M={row['m']} {key}: {r['us_per_call']:.1f} us, SM "
                      f"{r.get('sm_mhz', float('nan')):.0f} MHz, {r.get('power_w', float('nan')):.0f} W, "
                      f"{r.get('temp_c', float('nan')):.0f} C ({r['samples']} samples)")
    _write(out, rows, args)


def _write(out: Path, rows: list, args) -> None:
    """sustained.json under ``out``, replaced whole (a run cut short keeps the cells done)."""
    props = torch.cuda.get_device_properties(0)
    meta = {"device": props.name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "layout": args.layout, "alt_configs": args.alt_configs or None, "command": "python benchmarks/sustained.py " + " ".join(sys.argv[1:])}
    tmp = out / "sustained.json.tmp"
    tmp.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    tmp.replace(out / "sustained.json")


if __name__ == "__main__":
    main()

"""What programmatic dependent launch (``qerl.kernels.pdl``) does to the rollout's forward (the "words" dispatch)
next to kernels that do not take part: each timed graph replays, per weight copy, one projection after a small torch
kernel (a copy of X into the projection's input, launched without PDL) or after the projection before it (the
chain of the issue's benchmark), with PDL and without, in the same run (graphs replayed in turn, round after round).

    python benchmarks/pdl_neighbours.py --models 7b,32b --ms 1,8,64

Writes pdl_neighbours.json under $OUT (or --out) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import SHAPES, interleaved_us  # noqa: E402
from gemm_ws import _copies  # noqa: E402

from qerl import nvfp4  # noqa: E402
from qerl.kernels import nvfp4_gemm as kern  # noqa: E402
from qerl.kernels.pdl import pdl  # noqa: E402


def _calls(weights: list, x: torch.Tensor, src: torch.Tensor | None, enabled: bool) -> list:
    """One call per weight copy: (a copy of ``src`` into ``x``, then) the projection, under PDL or not."""
    def call(w):
        with pdl(enabled):
            if src is not None:
                x.copy_(src)
            return kern.nvfp4_matmul(x, w)
    return [lambda w=w: call(w) for w in weights]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="7b,32b")
    p.add_argument("--layers", default="qkv,o,gate_up,down")
    p.add_argument("--ms", default="1,8,64")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    args = p.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    rows = []
    for model in args.models.split(","):
        for layer, n, k in SHAPES[model]:
            if layer not in args.layers.split(","):
                continue
            torch.manual_seed(n + k)
            q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
            weights = _copies(kern.prepare_weight(q.packed, q.scale, q.global_scale, layout="words"),
                              props.L2_cache_size)
            for m in map(int, args.ms.split(",")):
                x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
                src = x.clone()
                variants = {f"{after}_{'pdl' if on else 'serial'}": _calls(weights, x, src if after == "copy" else None,
                                                                           on)
                            for after in ("gemm", "copy") for on in (True, False)}
                us = interleaved_us(variants)
                row = {"model": model, "layer": layer, "n": n, "k": k, "m": m, **{f"{v}_us": t for v, t in us.items()},
                       "after_gemm_pdl_over_serial": us["gemm_pdl"] / us["gemm_serial"],
                       "after_copy_pdl_over_serial": us["copy_pdl"] / us["copy_serial"]}
                rows.append(row)
                print(f"{model} {layer:8s} M={m:4d} after a projection: PDL {us['gemm_pdl']:7.1f} serial "
                      f"{us['gemm_serial']:7.1f} us ({row['after_gemm_pdl_over_serial']:.3f}); after a copy: PDL "
                      f"{us['copy_pdl']:7.1f} serial {us['copy_serial']:7.1f} us ({row['after_copy_pdl_over_serial']:.3f})",
                      flush=True)
            del weights
            torch.cuda.empty_cache()
    for key in ("after_gemm_pdl_over_serial", "after_copy_pdl_over_serial"):
        for m in sorted({r["m"] for r in rows}):
            vals = [r[key] for r in rows if r["m"] == m]
            print(f"{key} M={m}: geomean {math.exp(sum(map(math.log, vals)) / len(vals)):.3f}, "
                  f"{min(vals):.3f}-{max(vals):.3f}")
    meta = {"device": props.name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "command": " ".join(["python"] + sys.argv)}
    (out_dir / "pdl_neighbours.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

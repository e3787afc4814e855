"""What the adapter's expand (and a bias) in the warp-specialized forward's epilogue saves at decode batches: per
Qwen2.5 7B / 32B projection with a LoRA adapter on every output slice (q / k / v and gate / up as the rollout
backends fuse them; the bias on q/k/v, as Qwen2 has it), ``nvfp4_matmul(x, w, bias, lora)`` with the expand in the
kernel's epilogue (``nvfp4_gemm_ws.bias_lora_config``, the default) against the same call with it switched off
(``BIAS_LORA_EPILOGUE = False``: the product, then ``add_bias_and_lora_``'s kernel; on "pairs" below
``LORA_WS_MIN_M`` rows the Triton kernel with the expand in its epilogue), and the product alone without an adapter,
in the same rounds (``gemm_nvfp4.interleaved_us``: CUDA graphs over weight copies that L2 does not hold, replayed in
turn). Both code layouts: "words" (vLLM's engine on Hopper) and "pairs" (the training model, which the transformers
rollout backend decodes with).

    python benchmarks/lora_epilogue.py --models 7b,32b --ms 1,8,16,64 --ranks 32

Writes lora_epilogue.json under $OUT (or --out) and prints a table.
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
from qerl.kernels import nvfp4_gemm_ws as ws  # noqa: E402

# Output slices of each projection's adapter: q / k / v (K / V heads of 128 dims: 4 on 7B, 8 on 32B), gate / up.
SLICES = {("7b", "qkv"): (3584, 512, 512), ("32b", "qkv"): (5120, 1024, 1024)}


def slices(model: str, layer: str, n: int) -> tuple[int, ...]:
    if layer == "gate_up":
        return (n // 2, n // 2)
    return SLICES.get((model, layer), (n,))


def _calls(weights: list, x: torch.Tensor, bias, lora, epilogue: bool) -> list:
    """One call per weight copy, with the epilogue switch as given while the graph is captured."""
    def call(w):
        before = ws.BIAS_LORA_EPILOGUE
        ws.BIAS_LORA_EPILOGUE = epilogue
        try:
            return kern.nvfp4_matmul(x, w, bias=bias, lora=lora)
        finally:
            ws.BIAS_LORA_EPILOGUE = before
    return [lambda w=w: call(w) for w in weights]


def _route(x, w, bias, lora) -> str:
    cfg = ws.bias_lora_config(x, w, bias, lora)
    return "epilogue " + str(tuple(cfg)) if cfg is not None else "after"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="7b,32b")
    p.add_argument("--layers", default="qkv,o,gate_up,down")
    p.add_argument("--layouts", default="words,pairs")
    p.add_argument("--ms", default="1,8,16,64")
    p.add_argument("--ranks", default="32")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    args = p.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    meta = {"device": props.name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "command": " ".join(["python"] + sys.argv)}
    rows = []
    for model in args.models.split(","):
        for layer, n, k in SHAPES[model]:
            if layer not in args.layers.split(","):
                continue
            torch.manual_seed(n + k)
            q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
            sizes = slices(model, layer, n)
            for layout in args.layouts.split(","):
                weights = _copies(kern.prepare_weight(q.packed, q.scale, q.global_scale, layout=layout),
                                  props.L2_cache_size)
                for rank in map(int, args.ranks.split(",")):
                    for m in map(int, args.ms.split(",")):
                        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
                        bias = (torch.randn(n, device="cuda").to(torch.bfloat16) * 0.1) if layer == "qkv" else None
                        u = torch.randn(len(sizes), m, rank, device="cuda") * 0.1
                        bs = tuple(torch.randn(s, rank, device="cuda").to(torch.bfloat16) * 0.02 for s in sizes)
                        lora = kern.LoRAEpilogue(u, bs)
                        # The two routes compute the same sum: checked once before timing.
                        a = _calls(weights[:1], x, bias, lora, True)[0]()
                        b = _calls(weights[:1], x, bias, lora, False)[0]()
                        diff = float((a.float() - b.float()).norm() / b.float().norm())
                        if not diff < 1e-2:
                            raise RuntimeError(f"{model} {layer} M={m} {layout}: routes differ by {diff:.2e}")
                        us = interleaved_us({"epilogue": _calls(weights, x, bias, lora, True),
                                             "after": _calls(weights, x, bias, lora, False),
                                             "plain": _calls(weights, x, None, None, True)})
                        row = {"model": model, "layer": layer, "n": n, "k": k, "layout": layout, "rank": rank, "m": m,
                               "slices": list(sizes), "bias": bias is not None, "route": _route(x, weights[0], bias,
                                                                                                   lora),
                               "rel_diff_routes": diff, **{f"{v}_us": t for v, t in us.items()},
                               "epilogue_over_after": us["epilogue"] / us["after"]}
                        rows.append(row)
                        print(f"{model} {layer:8s} {layout:5s} r={rank:3d} M={m:4d}: epilogue {us['epilogue']:7.1f} "
                              f"after {us['after']:7.1f} plain {us['plain']:7.1f} us "
                              f"({row['epilogue_over_after']:.3f}; {row['route']})", flush=True)
                        (out_dir / "lora_epilogue.json").write_text(
                            json.dumps({"meta": meta, "rows": rows}, indent=1))
                del weights
                torch.cuda.empty_cache()
    print(f"\n{props.name}: time with the expand in the epilogue / after the product, geomean (min-max) of the layers")
    for layout in args.layouts.split(","):
        for m in sorted({r["m"] for r in rows}):
            vals = [r["epilogue_over_after"] for r in rows if r["m"] == m and r["layout"] == layout]
            if vals:
                print(f"{layout:5s} M={m:4d}: {math.exp(sum(map(math.log, vals)) / len(vals)):.3f} "
                      f"({min(vals):.3f}-{max(vals):.3f})")


if __name__ == "__main__":
    main()

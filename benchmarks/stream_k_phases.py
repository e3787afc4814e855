"""Where the time of a stream-K launch with whole waves (``dp_waves``) goes: the same kernel and config timed on
plans that run only some of its CTAs (``nvfp4_gemm_ws.sk_plan`` replaced for the call), so the parts can be set
against the whole:

- ``plan``: the launch as shipped (the split leftover tiles, then whole tiles one per CTA);
- ``split_only``: only the CTAs of the split leftover tiles (their outputs complete, the other tiles not written);
- ``one_wave``: one wave of whole tiles, one per CTA (no split);
- ``all_whole``: every tile whole, one per CTA (the one-tile-per-CTA schedule on the stream-K kernel);
- ``pure``: plain stream-K (every CTA an equal run of the whole product).

Outputs of the partial plans are not checked (they do not cover the product); ``plan`` and ``pure`` are.

    python benchmarks/stream_k_phases.py --out results/...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import SHAPES, bench, checked, fp32_matmul  # noqa: E402
from gemm_ws import _copies  # noqa: E402

from qerl import nvfp4  # noqa: E402
from qerl.kernels import nvfp4_gemm as kern  # noqa: E402
from qerl.kernels import nvfp4_gemm_ws as ws  # noqa: E402

# (model, layer, direction, M, config): the run-14 dp_waves entries and the 14B / 32B qkv / o input gradient, where
# the search found dp_waves no faster than plain stream-K.
CELLS = [
    ("14b", "qkv", "bwd", 1024, ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2, dp_waves=True)),
    ("14b", "o", "bwd", 1024, ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2, dp_waves=True)),
    ("14b", "gate_up", "bwd", 1024, ws.WsBwdConfig(256, 5, 1, stream_k=1, consumers=2, dp_waves=True)),
    ("32b", "gate_up", "bwd", 1024, ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2, dp_waves=True)),
    ("32b", "down", "fwd", 1024, ws.WsConfig(128, 256, 3, 1, 2, False, stream_k=1, dp_waves=True)),
    ("14b", "o", "fwd", 1024, ws.WsConfig(128, 128, 4, 1, 2, False, stream_k=1, dp_waves=True)),
]


def plans(tiles: int, steps: int, wave: int) -> dict[str, tuple[int, int, int]]:
    iters, sk_total, grid = ws.sk_plan(tiles, steps, wave, dp_waves=True)
    split_ctas = -(-sk_total // iters) if sk_total else 0
    return {"plan": (iters, sk_total, grid), "split_only": (iters, sk_total, split_ctas),
            "one_wave": (steps, 0, min(tiles, wave)), "all_whole": (steps, 0, tiles),
            "pure": ws.sk_plan(tiles, steps, wave)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    wave = props.multi_processor_count
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    rows = []
    original = ws.sk_plan
    for model, layer, direction, m, cfg in CELLS:
        n, k = next((n, k) for lay, n, k in SHAPES[model] if lay == layer)
        torch.manual_seed(0)
        q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
        ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
        kw0 = kern.prepare_weight(q.packed, q.scale, q.global_scale)
        copies = _copies(kw0, l2)
        fwd = direction == "fwd"
        x = torch.randn(m, k if fwd else n, device="cuda").to(torch.bfloat16)
        run = ws.ws_matmul if fwd else ws.ws_matmul_grad_input
        ref = fp32_matmul(x.float(), ref_w.T if fwd else ref_w)
        if fwd:
            tiles, steps = -(-m // cfg.bm) * -(-n // cfg.bn), kw0.k_pad // kern.CHUNK
        else:
            tiles, steps = -(-m // cfg.bm) * (kw0.k_pad // kern.CHUNK), -(-n // 64)
        row = {"model": model, "layer": layer, "dir": direction, "m": m, "n": n, "k": k, "config": cfg._asdict(),
               "tiles": tiles, "steps": steps, "wave": wave}
        for name, plan in plans(tiles, steps, wave).items():
            ws.sk_plan = lambda *a, plan=plan, **kw: plan
            try:
                if name in ("plan", "pure"):
                    err, finite = checked(lambda out, x=x, r=run, w=kw0, c=cfg: r(x, w, c, out=out), (m, n if fwd else k), ref)
                    row[f"{name}_rel_err"] = err if finite else float("nan")
                row[f"{name}_us"] = bench([lambda w=w, x=x, r=run, c=cfg: r(x, w, c) for w in copies]) * 1e6
                row[f"{name}_plan"] = list(plan)
            finally:
                ws.sk_plan = original
        print(f"{model} {layer} {direction} M={m} tiles {tiles} steps {steps}: "
              + ", ".join(f"{p} {row[p + '_us']:.1f}" for p in ("plan", "split_only", "one_wave", "all_whole", "pure")),
              flush=True)
        rows.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"device": props.name, "sms": wave, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "command": "python benchmarks/stream_k_phases.py " + " ".join(sys.argv[1:])}
    (out / "stream_k_phases.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

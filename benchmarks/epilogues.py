"""What the decode step's kernel epilogues cost and save, per Qwen2.5-7B layer: each projection as the plain NVFP4
forward (``nvfp4_matmul``) and with its epilogue (``qerl.kernels.fused_norm`` / ``fused_qkv`` / SiLU x up), next to
the plain forward followed by the torch / Triton step the epilogue replaces (compiled residual add + RMSNorm,
``rope_and_cache``; "gate_up + silu_mul" is ``swiglu_torch`` in eager torch, several kernels, not the decode
harness's compiled one; "gate_up + swiglu kernel" the Triton kernel ``swiglu_interleaved`` takes on CUDA since run
29), at decode batch sizes; every time a CUDA-graph replay over enough weight copies that L2 does not serve them
(``gemm_nvfp4.bench``), in one run.

    python benchmarks/epilogues.py --ms 1,8,64
    python benchmarks/epilogues.py --ms 1,8,16 --rope-search   # also launch configs for qkv's RoPE epilogue

Writes epilogues.json under $OUT (or --out) and prints a table: microseconds per call.
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

from decode_nvfp4 import add_rms_norm  # noqa: E402
from gemm_nvfp4 import bench  # noqa: E402

from qerl import nvfp4  # noqa: E402
from qerl.kernels import interleave_gate_up, nvfp4_matmul, nvfp4_matmul_swiglu, prepare_weight  # noqa: E402
from qerl.kernels import nvfp4_gemm_ws as ws  # noqa: E402
from qerl.kernels.decode_attention import rope_and_cache  # noqa: E402
from qerl.kernels.fused_norm import NormStats, nvfp4_matmul_add_norm, nvfp4_matmul_normed  # noqa: E402
from qerl.kernels.fused_qkv import nvfp4_qkv_rope_cache  # noqa: E402
from qerl.kernels.nvfp4_gemm import swiglu_torch, swiglu_triton  # noqa: E402

HIDDEN, INTER, HEADS, KV, D, EPS = 3584, 18944, 28, 4, 128, 1e-6


def weights(n: int, k: int, copies: int, glu: bool = False) -> list:
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    packed, scale = q.packed, q.scale
    if glu:
        packed = interleave_gate_up(packed[: n // 2], packed[n // 2:])
        scale = interleave_gate_up(scale[: n // 2], scale[n // 2:])
    return [prepare_weight(packed.clone(), scale.clone(), q.global_scale.clone(), layout="words")
            for _ in range(copies)]


# One-head tiles (BN = 128 rows per consumer) for the RoPE epilogue, summed in the kernel: chunks in flight on 128
# registers (two CTAs per SM) or retired per chunk on 80 (three), split so that the 36 heads' tiles fill the SMs.
ROPE_CANDIDATES = ([ws.WsConfig(bm, 128, 6, s, 1, True, 128, True) for bm in (8, 16) for s in (4, 5, 6, 7, 8, 9)]
                   + [ws.WsConfig(bm, 128, st, s, 1, False, 80, True) for bm in (8, 16) for st in (4, 6)
                      for s in (7, 9, 11)])


def run(m: int, copies: int, step, rope_search: bool = False) -> dict:
    torch.manual_seed(m)
    x_h = torch.randn(m, HIDDEN, device="cuda").to(torch.bfloat16)
    x_i = torch.randn(m, INTER, device="cuda").to(torch.bfloat16)
    h = torch.randn(m, HIDDEN, device="cuda").to(torch.bfloat16)
    g = torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16)
    stats = NormStats(torch.rand(56, m, device="cuda") * HIDDEN / 56, EPS)
    bias = torch.zeros((HEADS + 2 * KV) * D, device="cuda", dtype=torch.bfloat16)
    cos = torch.ones(512, D, device="cuda", dtype=torch.bfloat16)
    sin = torch.zeros_like(cos)
    pos = torch.tensor([300], device="cuda")
    kc = torch.zeros(m, KV, 512, D, device="cuda", dtype=torch.bfloat16)
    vc = torch.zeros_like(kc)
    qkv, o = weights((HEADS + 2 * KV) * D, HIDDEN, copies), weights(HIDDEN, HIDDEN, copies)
    gu, down = weights(2 * INTER, HIDDEN, copies, glu=True), weights(HIDDEN, INTER, copies)
    cases = {
        "qkv": [lambda w=w: nvfp4_matmul(x_h, w) for w in qkv],
        "qkv + rope_and_cache": [lambda w=w: rope_and_cache(nvfp4_matmul(x_h, w), bias, cos, sin, pos, kc, vc, HEADS)
                                 for w in qkv],
        "qkv normed": [lambda w=w: nvfp4_matmul_normed(x_h, w, stats) for w in qkv],
        "qkv rope epilogue": [lambda w=w: nvfp4_qkv_rope_cache(x_h, w, bias, cos, sin, pos, kc, vc, HEADS)
                              for w in qkv],
        "qkv normed rope epilogue": [lambda w=w: nvfp4_qkv_rope_cache(x_h, w, bias, cos, sin, pos, kc, vc, HEADS,
                                                                      norm=stats) for w in qkv],
        "o": [lambda w=w: nvfp4_matmul(x_h, w) for w in o],
        "o + add_rms_norm": [lambda w=w: step(h, nvfp4_matmul(x_h, w), g, EPS) for w in o],
        "o add_norm epilogue": [lambda w=w: nvfp4_matmul_add_norm(x_h, w, h, g, EPS) for w in o],
        "gate_up": [lambda w=w: nvfp4_matmul(x_h, w) for w in gu],
        "gate_up + silu_mul": [lambda w=w: swiglu_torch(nvfp4_matmul(x_h, w)) for w in gu],
        "gate_up + swiglu kernel": [lambda w=w: swiglu_triton(nvfp4_matmul(x_h, w)) for w in gu],
        "gate_up swiglu epilogue": [lambda w=w: nvfp4_matmul_swiglu(x_h, w) for w in gu],
        "gate_up normed swiglu epilogue": [lambda w=w: nvfp4_matmul_normed(x_h, w, stats, swiglu=True) for w in gu],
        "down": [lambda w=w: nvfp4_matmul(x_i, w) for w in down],
        "down + add_rms_norm": [lambda w=w: step(h, nvfp4_matmul(x_i, w), g, EPS) for w in down],
        "down add_norm epilogue": [lambda w=w: nvfp4_matmul_add_norm(x_i, w, h, g, EPS) for w in down],
    }
    # Where the table's gate_up entry keeps SiLU x up out of the kernel (stream-K, or splits summed by a second
    # kernel), the same epilogue on the entry made one CTA a tile (``epilogue_config``'s reshape).
    reshaped = ws.epilogue_config(x_h, gu[0])
    if reshaped is not None and ws.epilogue_config(x_h, gu[0], reshape=False) is None:
        cases["gate_up swiglu epilogue, one CTA a tile"] = [lambda w=w: ws.ws_matmul(x_h, w, reshaped, glu=True)
                                                            for w in gu]
    if rope_search:
        rope = ws.RopeEpilogue(bias, cos, sin, pos, kc, vc, HEADS)
        row_norm = (stats.sumsq, EPS)
        for cfg in ROPE_CANDIDATES:
            if cfg.bm < m or (cfg.bm > 8 and cfg.bm // 2 >= m):
                continue
            cases[f"rope {tuple(cfg)[:8]}"] = [
                lambda w=w, cfg=cfg: ws.ws_matmul(x_h, w, cfg, row_norm=row_norm, rope=rope) for w in qkv]
    row = {"m": m}
    for name, fns in cases.items():
        fns[0]()  # compile, allocate the split counters outside the graph
        row[name] = bench(fns) * 1e6
    row["configs"] = {name: str(ws.pick(x, w[0].n, w[0].k, w[0].k_pad, True)) for name, x, w in
                      (("qkv", x_h, qkv), ("o", x_h, o), ("gate_up", x_h, gu), ("down", x_i, down))}
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ms", default="1,8,64")
    p.add_argument("--copies", type=int, default=8, help="weight copies per graph (L2 must not hold them)")
    p.add_argument("--rope-search", action="store_true", help="also time ROPE_CANDIDATES for qkv's RoPE epilogue")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    args = p.parse_args()
    step = torch.compile(add_rms_norm, fullgraph=True, dynamic=False)  # the decode harness's compiled step
    rows = [run(int(m), args.copies, step, args.rope_search) for m in args.ms.split(",")]
    import triton
    meta = {"device": torch.cuda.get_device_properties(0).name, "date": time.strftime("%Y-%m-%d"),
            "torch": torch.__version__, "triton": triton.__version__, "command": " ".join(["python"] + sys.argv)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "epilogues.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    names = list(dict.fromkeys(k for r in rows for k in r if k not in ("m", "configs")))
    print(f"{meta['device']}: us per call\n{'case':48s}" + "".join(f"{'M=' + str(r['m']):>9s}" for r in rows))
    for name in names:
        print(f"{name:48s}" + "".join(f"{r[name]:9.1f}" if name in r else f"{'':9s}" for r in rows))


if __name__ == "__main__":
    main()

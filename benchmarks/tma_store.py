"""The forward's whole tiles stored by TMA from shared memory (``nvfp4_gemm_ws._tma_store_tile``, run 30) against the
stores from registers, in the default dispatch (``nvfp4_matmul``) per layer and M, with cuBLAS's BF16 product in the
same rounds: each version captured in its own CUDA graph over weight copies L2 does not serve, the graphs replayed
in turn round after round (``slab_plans.interleaved_us``), medians. Before timing, each cell's output with the TMA
store is checked against the stores from registers (the same bits) and against dequantize-then-matmul in fp32.

    python benchmarks/tma_store.py --models 7b,14b,32b --ms 256,512,1024,2048,4096 --out benchmarks/out/tma_store
    python benchmarks/tma_store.py --ms 1024,2048 --candidates "256,128,3,1,2,False;128,128,4,1,2,False"

``--candidates``: ``WsConfig`` fields per config (semicolon-separated; stream-K: all ten fields, e.g.
"128,128,4,1,2,False,None,False,1,True"), each also timed per cell on the warp-specialized kernel directly
(``ws_matmul``, with the TMA store where it applies) and checked like the dispatch; ``--both`` times each also with
the stores from registers.

Writes tma_store.json under --out and prints per cell: BF16 us, with / without the TMA store us, their ratio,
NVFP4 / BF16 speed with it, and whether the dispatch reached the TMA store (``tma``: the warp-specialized kernel's
launch of whole tiles with 64 or 128 W rows per consumer, one per CTA or stream-K (run 31); split-K and the slab
path keep their stores).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gemm_nvfp4 import SHAPES  # noqa: E402
from gemm_ws import _copies  # noqa: E402
from slab_plans import interleaved_us  # noqa: E402

from qerl import nvfp4  # noqa: E402
from qerl.kernels import nvfp4_gemm as kern  # noqa: E402
from qerl.kernels import nvfp4_gemm_ws as ws  # noqa: E402


def _with_tma_store(on: bool, fn):
    """``fn`` run with ``nvfp4_gemm_ws.TMA_STORE`` set to ``on`` (read by ``ws_matmul`` at each launch, so also
    while a graph is captured), restored after."""
    def call():
        before = ws.TMA_STORE
        ws.TMA_STORE = on
        try:
            return fn()
        finally:
            ws.TMA_STORE = before
    return call


def _reached(fn) -> bool:
    """Whether ``fn`` launched the forward with the TMA store (``tma_store_tiles`` or, stream-K, ``sk_tma_store``
    said yes at some launch)."""
    seen = []
    names = ("tma_store_tiles", "sk_tma_store")
    orig = {name: getattr(ws, name) for name in names}

    def spy(name):
        def call(*a, **k):
            seen.append(orig[name](*a, **k))
            return seen[-1]
        return call

    for name in names:
        setattr(ws, name, spy(name))
    try:
        fn()
    finally:
        for name in names:
            setattr(ws, name, orig[name])
    return any(bool(v) for v in seen)


def _check(y: torch.Tensor, ref: torch.Tensor, what: str) -> float:
    rel = float((y.float() - ref).norm() / ref.norm())
    if not (rel < 4e-3 and torch.isfinite(y).all()):
        raise SystemExit(f"{what}: output wrong (relative error {rel:.2e})")
    return rel


def parse_candidates(text: str, cls=ws.WsConfig, example: str = "256,128,3,1,2,False,None,False,1,False") -> tuple:
    """``--candidates``: ``cls``'s fields (``WsConfig``; ``sk_fixup.py`` also ``WsBwdConfig``) in order per config
    ("True" / "False" / "None" as such, else integers), configs separated by semicolons."""
    words = {"True": True, "False": False, "None": None}
    try:
        return tuple(cls(*(words[v] if v in words else int(v) for v in c.split(","))) for c in text.split(";") if c)
    except (ValueError, TypeError) as e:
        raise SystemExit(f"--candidates: {cls.__name__} fields in order, e.g. \"{example}\" ({e})") from None


def _name(c: ws.WsConfig) -> str:
    """A candidate's short name: its first six fields, then ``sk<n>`` (+ ``dp``) for stream-K."""
    return "/".join(map(str, c[:6])) + (f"/sk{c.stream_k}" + ("dp" if c.dp_waves else "") if c.stream_k else "")


def layer_weights(n: int, k: int, layout: str, l2: int) -> tuple:
    """(the fp32 dequantized weight, the kernel weight's copies, cuBLAS's bf16 copies) of a random N x K NVFP4
    weight, in enough copies each that L2 serves none of them between calls."""
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    kws = _copies(kern.prepare_weight(q.packed, q.scale, q.global_scale, layout=layout), l2)
    w16 = q.dequantize(torch.bfloat16)
    dense = [w16] + [w16.clone() for _ in range(max(1, math.ceil(3 * l2 / w16.nbytes)) - 1)]
    return ref_w, kws, dense


def fp32_ref(x: torch.Tensor, ref_w: torch.Tensor) -> torch.Tensor:
    """x @ W^T in fp32 (TF32 off for the call)."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return x.float() @ ref_w.T
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def measure(model: str, layer: str, n: int, k: int, ms: list[int], layout: str, l2: int, log,
            candidates: tuple = (), both: bool = False) -> list[dict]:
    ref_w, kws, dense = layer_weights(n, k, layout, l2)
    rows = []
    for m in ms:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        with_tma = _with_tma_store(True, lambda x=x: kern.nvfp4_matmul(x, kws[0]))
        reached = _reached(with_tma)
        a = with_tma()
        b = _with_tma_store(False, lambda x=x: kern.nvfp4_matmul(x, kws[0]))()
        ref = fp32_ref(x, ref_w)
        rel = _check(a, ref, f"{model} {layer} M={m} (dispatch, TMA store)")
        if not torch.equal(a, b):
            raise SystemExit(f"{model} {layer} M={m}: the TMA store's bits differ from the stores from registers")
        variants = {
            "bf16": [lambda w=w, x=x: x @ w.t() for w in dense],
            "tma": [_with_tma_store(True, lambda kw=kw, x=x: kern.nvfp4_matmul(x, kw)) for kw in kws],
            "regs": [_with_tma_store(False, lambda kw=kw, x=x: kern.nvfp4_matmul(x, kw)) for kw in kws],
        }
        for c in candidates:
            _check(ws.ws_matmul(x, kws[0], c), ref, f"{model} {layer} M={m} {tuple(c)}")
            variants[c] = [lambda kw=kw, x=x, c=c: ws.ws_matmul(x, kw, c) for kw in kws]
            if both:
                regs = _with_tma_store(False, lambda x=x, c=c: ws.ws_matmul(x, kws[0], c))()
                if not torch.equal(ws.ws_matmul(x, kws[0], c), regs):
                    raise SystemExit(f"{model} {layer} M={m} {tuple(c)}: TMA store's bits differ from registers'")
                variants[(c, "regs")] = [_with_tma_store(False, lambda kw=kw, x=x, c=c: ws.ws_matmul(x, kw, c))
                                         for kw in kws]
        us = interleaved_us(variants)
        row = {"model": model, "layer": layer, "n": n, "k": k, "m": m, "layout": layout, "reached_tma": reached,
               "rel_err": rel, "bf16_us": us["bf16"], "tma_us": us["tma"], "regs_us": us["regs"],
               "tma_over_regs": us["tma"] / us["regs"], "speedup_tma": us["bf16"] / us["tma"],
               "speedup_regs": us["bf16"] / us["regs"],
               "candidates": [{"config": c._asdict(), "us": us[c], "over_dispatch": us[c] / us["tma"],
                               **({"regs_us": us[(c, "regs")]} if both else {})} for c in candidates]}
        rows.append(row)
        log(f"{model} {layer:8} M={m:5} {'tma ' if reached else 'none'}  bf16 {us['bf16']:8.1f}  "
            f"tma {us['tma']:8.1f}  regs {us['regs']:8.1f}  tma/regs {row['tma_over_regs']:.3f}  "
            f"x{row['speedup_regs']:.3f} -> x{row['speedup_tma']:.3f}"
            + "".join(f"  {_name(c)} {us[c]:.1f}" + (f" (regs {us[(c, 'regs')]:.1f})" if both else "")
                      for c in candidates))
    return rows


def cell_args(p: argparse.ArgumentParser, ms: str) -> None:
    """The per-cell options this script shares with ``sk_fixup.py``: models, layers, M values, code layout."""
    p.add_argument("--models", default="7b,14b,32b")
    p.add_argument("--layers", default="qkv,o,gate_up,down")
    p.add_argument("--ms", default=ms)
    p.add_argument("--layout", choices=("pairs", "words"), default="pairs",
                   help="the weight's code layout: 'pairs' (training's forward) or 'words' (the rollout's)")


def run_meta(p: argparse.ArgumentParser, script: str, argv: list[str] | None) -> tuple[dict, int]:
    """(the JSON's meta, the L2 size) on a Hopper with Gluon, else ``p.error``."""
    if not torch.cuda.is_available() or not ws.available():
        p.error("needs a Hopper GPU and Triton's Gluon")
    props = torch.cuda.get_device_properties(0)
    meta = {"device": props.name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "command": f"python benchmarks/{script} " + " ".join(sys.argv[1:] if argv is None else argv)}
    return meta, getattr(props, "L2_cache_size", 50 * 2**20)


def run_layers(args, out: Path, name: str, meta: dict, measure_layer) -> list[dict]:
    """The rows of ``measure_layer(model, layer, n, k)`` over ``--models`` / ``--layers``, the JSON ``out / name``
    rewritten after each layer (a run cut short keeps what it measured)."""
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for model in args.models.split(","):
        for layer, n, k in SHAPES[model]:
            if layer in args.layers.split(","):
                rows += measure_layer(model, layer, n, k)
                (out / name).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cell_args(p, "256,512,1024,2048,4096")
    p.add_argument("--candidates", default="", help="WsConfig fields per config, ';'-separated (see above)")
    p.add_argument("--both", action="store_true",
                   help="time each candidate also with the stores from registers (checked for the same bits)")
    p.add_argument("--out", default="benchmarks/out/tma_store")
    args = p.parse_args(argv)
    meta, l2 = run_meta(p, "tma_store.py", argv)
    ms = [int(v) for v in args.ms.split(",")]
    candidates = parse_candidates(args.candidates)
    rows = run_layers(args, Path(args.out), "tma_store.json", meta, lambda model, layer, n, k: measure(
        model, layer, n, k, ms, args.layout, l2, lambda s: print(s, flush=True), candidates, args.both))
    for m in ms:
        cells = [r for r in rows if r["m"] == m]
        if cells:
            geo = lambda key, cells=cells: math.exp(sum(math.log(r[key]) for r in cells) / len(cells))  # noqa: E731
            print(f"M={m}: {len(cells)} cells ({sum(r['reached_tma'] for r in cells)} with the TMA store), "
                  f"tma/regs geomean {geo('tma_over_regs'):.3f}, over BF16 x{geo('speedup_regs'):.3f} -> "
                  f"x{geo('speedup_tma'):.3f}")


if __name__ == "__main__":
    main()

"""Stream-K's split tiles summed by the CTA that holds their first chunk (``nvfp4_gemm_ws._sk_add_parts``, run 32)
against the same launch configs on an earlier tree's kernel file (``--previous``), where the CTA that completed a
tile's count of steps summed every part, its own included, after storing it. ``--grad-input``: the same for the input
gradient's stream-K kernel (``_ws_bwd_sk_kernel``, the new sum since run 33; candidates are ``WsBwdConfig`` fields).

Per layer, M and code layout: the stream-K config the default dispatch launches (if any) and each ``--candidates``
config (``tma_store.py``'s format: ``WsConfig`` fields, ';'-separated) run on both kernel files, checked against
dequantize-then-matmul in fp32 (and whether they give the same bits: the same sums in the same order; runs at least
a tile long now seed the summing CTA's accumulator with the other part, a different order), then timed
in the same rounds as cuBLAS's BF16 product and the default dispatch (``slab_plans.interleaved_us``: each version in
its own CUDA graph over weight copies L2 does not serve, replayed in turn, medians). Cells where the dispatch runs no
stream-K and no candidate is given are skipped.

    git show 8bb2f68:qerl/kernels/nvfp4_gemm_ws.py > /tmp/prev_ws.py
    python benchmarks/sk_fixup.py --previous /tmp/prev_ws.py --ms 1024,2048 \\
        --candidates "256,128,3,1,2,False,None,False,1,False" --out benchmarks/out/sk_fixup
    python benchmarks/sk_fixup.py --previous /tmp/prev_ws.py --layout words --ms 8,16,100,128,256,512
    python benchmarks/sk_fixup.py --previous /tmp/prev_ws.py --grad-input --ms 1024,2048 \\
        --candidates "256,4,1,None,False,1,2"

Writes sk_fixup.json under --out and prints per cell: BF16 and dispatch us, then per config its time on this tree
and on the previous file, their ratio, and its speed over BF16.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from slab_plans import interleaved_us  # noqa: E402
from tma_store import _check, _name, cell_args, fp32_ref, layer_weights, parse_candidates, run_layers, run_meta  # noqa: E402,E501

from qerl.kernels import nvfp4_gemm as kern  # noqa: E402
from qerl.kernels import nvfp4_gemm_ws as ws  # noqa: E402


def load_previous(path: str):
    """The kernel module of another tree (a copy of its ``qerl/kernels/nvfp4_gemm_ws.py``), imported under a name of
    its own next to this tree's (it shares ``nvfp4_gemm``: weights, counters, SM count)."""
    name = "qerl.kernels._nvfp4_gemm_ws_previous"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or not Path(path).is_file():
        raise SystemExit(f"--previous {path}: no such file (e.g. git show <commit>:qerl/kernels/nvfp4_gemm_ws.py > "
                         f"{path})")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def dispatch_stream_k(fn, grad: bool = False) -> ws.WsConfig | ws.WsBwdConfig | None:
    """The stream-K config ``fn`` (a default-dispatch call; ``grad``: of the input gradient) launched, or None (it
    took another route)."""
    seen = []
    name = "_stream_k_grad_input" if grad else "_stream_k"
    orig = getattr(ws, name)

    def spy(x2, w, cfg, *a, **k):
        seen.append(cfg)
        return orig(x2, w, cfg, *a, **k)

    setattr(ws, name, spy)
    try:
        fn()
    finally:
        setattr(ws, name, orig)
    return seen[0] if seen else None


def parse_bwd_candidates(text: str) -> tuple:
    """``--candidates`` with ``--grad-input``: ``WsBwdConfig`` fields in order per config, ';'-separated."""
    return parse_candidates(text, ws.WsBwdConfig, "256,4,1,None,False,1,2")


def config_name(c) -> str:
    """``tma_store._name`` for the forward's configs; an input gradient's: bm / stages / split, then sk<n> (+ dp)."""
    if isinstance(c, ws.WsBwdConfig):
        return f"bwd {c.bm}/{c.stages}/{c.split_n}" + (f"/sk{c.stream_k}" + ("dp" if c.dp_waves else "")
                                                        if c.stream_k else "")
    return _name(c)


def measure(model: str, layer: str, n: int, k: int, ms: list[int], layout: str, l2: int, prev, log,
            candidates: tuple = (), grad: bool = False) -> list[dict]:
    torch.manual_seed(hash((model, layer)) % 2**31)
    ref_w, kws, dense = layer_weights(n, k, layout, l2)
    # The forward: Y = X @ W^T; the input gradient: dX = dY @ W (``--grad-input``).
    dispatch = kern.nvfp4_matmul_grad_input if grad else kern.nvfp4_matmul
    new_run = ws.ws_matmul_grad_input if grad else ws.ws_matmul
    prev_run = prev.ws_matmul_grad_input if grad else prev.ws_matmul
    rows = []
    for m in ms:
        x = torch.randn(m, n if grad else k, device="cuda").to(torch.bfloat16)
        shipped = dispatch_stream_k(lambda x=x: dispatch(x, kws[0]), grad)
        configs = list(dict.fromkeys(([shipped] if shipped is not None else []) + list(candidates)))
        if not configs:
            continue
        ref = fp32_ref(x, ref_w.T if grad else ref_w)
        _check(dispatch(x, kws[0]), ref, f"{model} {layer} M={m} (dispatch)")
        same_bits = {}
        variants = {"bf16": [lambda w=w, x=x: x @ w if grad else x @ w.t() for w in dense],
                    "dispatch": [lambda kw=kw, x=x: dispatch(x, kw) for kw in kws]}
        for c in configs:
            a = new_run(x, kws[0], c, out=torch.full((m, k if grad else n), float("nan"), device="cuda",
                                                     dtype=torch.bfloat16))
            b = prev_run(x, kws[0], c)
            _check(a, ref, f"{model} {layer} M={m} {config_name(c)}")
            _check(b, ref, f"{model} {layer} M={m} {config_name(c)} (previous)")
            same_bits[c] = torch.equal(a, b)
            variants[(c, "new")] = [lambda kw=kw, x=x, c=c: new_run(x, kw, c) for kw in kws]
            variants[(c, "prev")] = [lambda kw=kw, x=x, c=c: prev_run(x, kw, c) for kw in kws]
        us = interleaved_us(variants)
        torch.cuda.synchronize()
        if int(kern._split_counters(x.device, 1).abs().sum()):
            raise SystemExit(f"{model} {layer} M={m}: tile counters left non-zero")
        row = {"model": model, "layer": layer, "dir": "bwd" if grad else "fwd", "n": n, "k": k, "m": m,
               "layout": layout, "bf16_us": us["bf16"],
               "dispatch_us": us["dispatch"], "dispatch_stream_k": None if shipped is None else shipped._asdict(),
               "configs": [{"config": c._asdict(), "shipped": c == shipped, "us": us[(c, "new")],
                            "previous_us": us[(c, "prev")], "over_previous": us[(c, "new")] / us[(c, "prev")],
                            "same_bits": same_bits[c],
                            "speedup": us["bf16"] / us[(c, "new")]} for c in configs]}
        rows.append(row)
        log(f"{model} {layer:8} {'bwd' if grad else 'fwd'} M={m:5} {layout:5} bf16 {us['bf16']:8.1f}  dispatch {us['dispatch']:8.1f} "
            f"(x{us['bf16'] / us['dispatch']:.3f})"
            + "".join(f"  {'*' if c == shipped else ''}{config_name(c)} {us[(c, 'new')]:.1f} / {us[(c, 'prev')]:.1f} "
                      f"= {us[(c, 'new')] / us[(c, 'prev')]:.3f} (x{us['bf16'] / us[(c, 'new')]:.3f})"
                      + ("" if same_bits[c] else " (other bits)")
                      for c in configs))
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--previous", required=True, help="a copy of another tree's qerl/kernels/nvfp4_gemm_ws.py")
    cell_args(p, "256,512,1024,2048")
    p.add_argument("--candidates", default="", help="WsConfig fields per config, ';'-separated (tma_store.py's; "
                   "WsBwdConfig fields with --grad-input)")
    p.add_argument("--grad-input", action="store_true", help="the input gradient's stream-K kernel, not the forward's")
    p.add_argument("--out", default="benchmarks/out/sk_fixup")
    args = p.parse_args(argv)
    meta, l2 = run_meta(p, "sk_fixup.py", argv)
    prev = load_previous(args.previous)
    ms = [int(v) for v in args.ms.split(",")]
    candidates = (parse_bwd_candidates if args.grad_input else parse_candidates)(args.candidates)
    rows = run_layers(args, Path(args.out), "sk_fixup.json", meta, lambda model, layer, n, k: measure(
        model, layer, n, k, ms, args.layout, l2, prev, lambda s: print(s, flush=True), candidates, args.grad_input))
    shipped = [c for r in rows for c in r["configs"] if c["shipped"]]
    if shipped:
        geo = math.exp(sum(math.log(c["over_previous"]) for c in shipped) / len(shipped))
        print(f"the dispatch's stream-K configs: {len(shipped)} cells, time over the previous kernel's geomean "
              f"{geo:.3f} ({min(c['over_previous'] for c in shipped):.3f}-{max(c['over_previous'] for c in shipped):.3f})")


if __name__ == "__main__":
    main()

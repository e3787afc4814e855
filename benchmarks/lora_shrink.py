"""The LoRA shrink of a decode step at Qwen2.5-7B's shapes: ``qerl.kernels.lora_shrink`` (reduce modes, program
counts, dot precisions) against the torch formulation the decode step used before it (a multiply-sum compiled by
torch.compile, then scaled and laid out per slice), all four groups of all 28 layers (each layer its own
adapter, so A streams from memory as in a real step) in one CUDA graph; time per step, median of the replays.

    python benchmarks/lora_shrink.py --out $OUT        (a CUDA GPU; writes lora_shrink.json)
    python benchmarks/lora_shrink.py --a-dtypes float32,bfloat16   # + every variant on bf16 A ('<variant>_abf16')
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qerl.kernels import reserve_split_counters  # noqa: E402
from qerl.kernels.lora_shrink import lora_shrink  # noqa: E402
from qerl.kernels.ops import lora_shrink_reference  # noqa: E402

HIDDEN, INTERMEDIATE, KV = 3584, 18944, 512
# (slices, K) of the step's four groups: q / k / v, o, gate / up, down.
GROUPS = ((3, HIDDEN), (1, HIDDEN), (2, HIDDEN), (1, INTERMEDIATE))


def torch_shrink(x: torch.Tensor, a_list: list[torch.Tensor], scales: torch.Tensor) -> torch.Tensor:
    """The decode step's torch shrink (at M <= 16, and everywhere with ``adapter_kernels=False``): fp32 products of
    x and A (on bf16 A, the step's copies of it, as ``DecodeStep(a_copies=True)`` reads them at M <= 16)."""
    a = torch.cat(a_list) if len(a_list) > 1 else a_list[0]
    u = (x.float()[:, None, :] * a.float()[None]).sum(-1)
    u = u.float().unflatten(-1, (len(a_list), -1)) * scales[:, None]
    return u.transpose(0, 1).contiguous()


def step_time_us(fn, layers, xs, replays: int) -> float:
    """Median microseconds of one replay of a graph that runs ``fn`` on every layer's four groups."""
    def run():
        return [fn(xs[g], a, s) for layer in layers for g, (a, s) in enumerate(layer)]

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def variant(spec: str):
    """``lora_shrink`` with the arguments of ``spec``: reduce_programs[_precision][_bmN][_sN]."""
    reduce, programs, *rest = spec.split("_")
    kw = {"reduce": reduce, "programs": int(programs)}
    for part in rest:
        if part.startswith("bm"):
            kw["block_m"] = int(part[2:])
        elif part.startswith("s") and part[1:].isdigit():
            kw["max_splits"] = int(part[1:])
        else:
            kw["precision"] = part
    return lambda x, a, s: lora_shrink(x, a, s, **kw)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ms", default="8,64")
    p.add_argument("--rank", type=int, default=32)
    p.add_argument("--layers", type=int, default=28)
    p.add_argument("--replays", type=int, default=50)
    p.add_argument("--variants", default="last_64,last_128,last_256,atomic_128,atomic_512,last_128_ieee",
                   help="kernel variants, each reduce_programs[_precision][_bmN][_sN] (lora_shrink's arguments: "
                        "precision, block_m, max_splits)")
    p.add_argument("--a-dtypes", default="float32",
                   help="A's dtypes, each with every variant (bfloat16: A as the decode step's copies of it, "
                        "DecodeStep(a_copies=True); named '<variant>_abf16')")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    args = p.parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda")
    reserve_split_counters(device)
    layers = [[([torch.randn(args.rank, k, device=device) * 0.02 for _ in range(s)],
                torch.full((s,), 2.0, device=device)) for s, k in GROUPS] for _ in range(args.layers)]
    a_bytes = sum(t.numel() * t.element_size() for layer in layers for a, _ in layer for t in a)
    by_dtype = {}  # A's dtype -> (suffix of the variants' names, every layer's adapters in it)
    for name in args.a_dtypes.split(","):
        dtype = getattr(torch, name)
        by_dtype[dtype] = ("" if dtype == torch.float32 else "_a" + {"bfloat16": "bf16"}.get(name, name),
                           [[([t.to(dtype) for t in a], s) for a, s in layer] for layer in layers])
    compiled = torch.compile(torch_shrink, dynamic=False)
    variants = {"torch_compiled": compiled}
    for spec in args.variants.split(","):
        variants[spec] = variant(spec)
    rows = []
    for m in (int(v) for v in args.ms.split(",")):
        xs = [torch.randn(m, k, device=device).to(torch.bfloat16) for _, k in GROUPS]
        row = {"m": m}
        for suffix, held in by_dtype.values():
            for name, fn in variants.items():
                worst = 0.0
                for g, (a, s) in enumerate(held[0]):
                    ref = lora_shrink_reference(xs[g], a, s)  # fp32 products of the A this variant reads
                    got = fn(xs[g], a, s)
                    worst = max(worst, float((got - ref).abs().max() / ref.abs().max()))
                row[f"{name}{suffix}_us"] = step_time_us(fn, held, xs, args.replays)
                row[f"{name}{suffix}_err"] = worst
        names = [f"{n}{suffix}" for suffix, _ in by_dtype.values() for n in variants]
        row["best_kernel"] = min((n for n in names if not n.startswith("torch_compiled")), key=lambda n: row[f"{n}_us"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    props = torch.cuda.get_device_properties(0)
    meta = {"device": props.name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "rank": args.rank, "layers": args.layers, "a_bytes_per_step": a_bytes, "groups": GROUPS,
            "a_dtypes": args.a_dtypes,
            "command": " ".join(["python"] + sys.argv)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "lora_shrink.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"\n{props.name}: shrink of {args.layers} layers x 4 groups, rank {args.rank}, fp32 A "
          f"({a_bytes / 1e6:.0f} MB a step; '_abf16': bf16 A, half that); us a step (max rel err)")
    for r in rows:
        print(f"M = {r['m']}: " + ", ".join(f"{n} {r[n + '_us']:.0f} ({r[n + '_err']:.1e})" for n in names))


if __name__ == "__main__":
    main()

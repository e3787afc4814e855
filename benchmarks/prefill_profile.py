"""Where the transformers backend's prefill spends its wall time, NVFP4 against BF16, at Qwen2.5-7B shape.

The backend prefills with the model's own eager forward (``qerl.rollout.static_decode``); on a 128-token prompt its
GPU work is a few milliseconds, so the host's time per module decides the call. This times calls that generate one
token (the prefill, the LM head on the last position, one sample) for the two models of ``rollout_hf.py`` and then
profiles one call each: the GPU kernels' total, the host operators by their own time, and Python's profile of the
call by function (cProfile, own time). Writes prefill_profile.json and one cProfile listing per model under $OUT.

    python benchmarks/prefill_profile.py --batch 8 --group 8
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rollout_hf import QWEN7B, build_models  # noqa: E402

from qerl.rollout.base import SamplingSettings  # noqa: E402
from qerl.rollout.hf import HFRolloutBackend  # noqa: E402


def one_token_calls(backend: HFRolloutBackend, prompts, repeats: int) -> list[float]:
    settings = SamplingSettings(max_new_tokens=1, temperature=1.0, seed=0)
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t = time.perf_counter()
        backend.generate(prompts, settings)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return times


def profile_call(backend: HFRolloutBackend, prompts, listing: Path) -> dict:
    from torch.profiler import ProfilerActivity, profile

    settings = SamplingSettings(max_new_tokens=1, temperature=1.0, seed=0)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        backend.generate(prompts, settings)
        torch.cuda.synchronize()
    events = prof.key_averages()
    gpu_us = sum(ev.self_device_time_total for ev in events)
    host = sorted(({"name": ev.key[:100], "self_cpu_us": ev.self_cpu_time_total, "calls": ev.count}
                   for ev in events), key=lambda r: -r["self_cpu_us"])
    kernels = sorted(({"name": ev.key[:100], "gpu_us": ev.self_device_time_total, "calls": ev.count}
                      for ev in events if ev.self_device_time_total > 0), key=lambda r: -r["gpu_us"])
    py = cProfile.Profile()
    torch.cuda.synchronize()
    py.enable()
    backend.generate(prompts, settings)
    torch.cuda.synchronize()
    py.disable()
    text = io.StringIO()
    stats = pstats.Stats(py, stream=text)
    stats.sort_stats("tottime").print_stats(40)
    stats.sort_stats("cumulative").print_stats(40)
    listing.write_text(text.getvalue())
    return {"gpu_kernels_ms": gpu_us / 1e3, "top_host_ops": host[:30], "top_kernels": kernels[:15],
            "python_total_s": stats.total_tt}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--group", type=int, default=8, help="rows per distinct prompt")
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--layers", type=int, default=28)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bf16, nvfp4 = build_models(args.layers)
    eos = [QWEN7B["vocab_size"]]
    tok = argparse.Namespace(pad_token_id=0, eos_token_id=eos[0])
    g = torch.Generator().manual_seed(args.batch)
    distinct = [torch.randint(2, QWEN7B["vocab_size"], (args.prompt,), generator=g).tolist()
                for _ in range(args.batch // args.group)]
    prompts = [q for q in distinct for _ in range(args.group)]
    result = {"device": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
              "batch": args.batch, "group": args.group, "prompt": args.prompt, "layers": args.layers,
              "command": " ".join(["python"] + sys.argv), "models": {}}
    for name, model in (("bf16", bf16), ("nvfp4", nvfp4)):
        backend = HFRolloutBackend(model, tok, eos)
        one_token_calls(backend, prompts, 2)  # warm-up
        times = one_token_calls(backend, prompts, args.repeats)
        row = {"call_ms": [1e3 * t for t in times], "median_ms": 1e3 * statistics.median(times)}
        row.update(profile_call(backend, prompts, out / f"cprofile_{name}.txt"))
        result["models"][name] = row
        print(f"{name}: {row['median_ms']:.1f} ms a call, GPU kernels {row['gpu_kernels_ms']:.1f} ms; host ops: "
              + ", ".join(f"{h['name'][:40]} {h['self_cpu_us'] / 1e3:.1f} ms / {h['calls']}"
                          for h in row["top_host_ops"][:8]), flush=True)
        (out / "prefill_profile.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

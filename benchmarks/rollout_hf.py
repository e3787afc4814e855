"""Rollout throughput of the project's transformers backend (``qerl.rollout.hf``) at a Qwen2.5 shape (``--shape``, 7B by
default), NVFP4 vs BF16.

Two ``Qwen2ForCausalLM`` models with random weights (no checkpoint needed): one whose linear layers are NVFP4
(``qerl.modules.quantize_``, the fused kernels' layout), one whose BF16 weights are the first one's dequantized
weights, so both compute the same function up to rounding. Each generates ``--new-tokens`` tokens for a batch of
random ``--prompt``-token prompts through ``HFRolloutBackend.generate``, exactly as a training step's rollouts do
(sampling at temperature 1, per-token log-probabilities returned, AQN off), with a LoRA adapter of each rank in ``--lora-ranks``
on every projection (0: none), and reports generated tokens per second of wall time (prefill and the log-probability
gather included). ``--modes``: ``fused`` (the CUDA default: the backend's own loop on a static KV cache, the
project's decode step ``qerl.rollout.decode_step`` compiled and replayed as one CUDA graph: q/k/v and gate/up as one
product each on both models, the Triton decode attention), ``compiled`` (the same loop with the model's own forward
as the step) and ``eager`` (transformers' ``generate`` on a dynamic cache, no compilation). The first call of each model
and mode compiles and is reported as ``first_call_s``; then ``--repeats`` timed calls per model, BF16 and NVFP4 in
turn, and the ratio of the medians.

    python benchmarks/rollout_hf.py                                  # batch 8, no adapter, fused step
    python benchmarks/rollout_hf.py --batches 1,8 --lora-ranks 0,32 --modes fused,compiled,eager
    python benchmarks/rollout_hf.py --profile                        # where a step's wall time goes
    python benchmarks/rollout_hf.py --lora-ranks 32 --ws-lora-epilogue-compare   # + NVFP4 with the expand after
    python benchmarks/rollout_hf.py --group 8 --decode-layout-compare   # + NVFP4 decoding on the modules' "pairs"
    python benchmarks/rollout_hf.py --batches 64 --lora-ranks 32 --group 8 --shrink-reduce-compare   # + atomic split sums
    python benchmarks/rollout_hf.py --batches 64 --lora-ranks 32 --group 8 --a-copies-compare   # + bf16 copies of A
    python benchmarks/rollout_hf.py --shape 32b --batches 8,64 --lora-ranks 32 --group 8 --decode-layout words

Unlike ``benchmarks/decode_nvfp4.py`` (a decode step written for the kernels, with the projections' epilogues:
RMSNorms, SiLU x up, RoPE), this runs a training model: transformers' Qwen2 modules with peft's adapters, the norms
and o / down projections as modules, and the backend's sampling loop. Writes rollout_hf.json under $OUT (or
--out) after every measurement and prints a table last.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # decode_nvfp4's kernel classes for --profile

from rollout_vllm import SHAPES  # noqa: E402  (the Qwen2.5 architectures, 3B to 32B)

from qerl.modules import NVFP4Linear, quantize_, use_kernel_layout  # noqa: E402
from qerl.rollout.base import SamplingSettings  # noqa: E402
from qerl.rollout.hf import HFRolloutBackend  # noqa: E402

# What the released Qwen2.5 configs share besides ``SHAPES``'s entries.
QWEN_COMMON = dict(max_position_embeddings=4096, rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=False)
QWEN7B = QWEN_COMMON | SHAPES["7b"]


# Both models again on a decode step built with other arguments ('<model>_<suffix>', with an adapter), and the NVFP4
# model again under a switch ``timed`` sets by the name ('nvfp4_<suffix>'): what the table calls them.
STEP_VARIANTS = {"torchadapter": "the adapter's shrink in torch, B cast each step",
                 "atomic": "the shrink's K-splits summed by atomic adds",
                 "acopies": "the shrink kernel on bf16 copies of A",  # run 48's name, when off by default
                 "fp32a": "the shrinks on the adapter's fp32 A (no copies)"}
NVFP4_VARIANTS = {"twolaunch": "the split sum and the epilogue in two launches",
                  "pdl": "programmatic dependent launch"}


def qwen_config(shape: str = "7b", layers: int | None = None):
    """A ``Qwen2Config`` of ``SHAPES[shape]`` (``layers``: that many decoder layers instead of the shape's)."""
    from transformers import Qwen2Config

    fields = QWEN_COMMON | SHAPES[shape]
    if layers is not None:
        fields["num_hidden_layers"] = layers
    return Qwen2Config(pad_token_id=0, eos_token_id=1, **fields)


def build_models(layers: int | None = None, shape: str = "7b", device: str = "cuda"):
    """(bf16 model, nvfp4 model) on ``device`` computing the same function up to rounding. The NVFP4 model is built
    one decoder layer at a time (a copy of the BF16 layer, quantized, before the next is copied), so the two fit
    where two BF16 copies would not (32B: 65 GB of BF16 weights on a 141 GB GPU)."""
    from torch import nn
    from transformers import Qwen2ForCausalLM

    config = qwen_config(shape, layers)
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            bf16 = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(torch.float32)
    with torch.no_grad():
        for name, p in bf16.named_parameters():
            if p.ndim == 2:  # weights of unit-variance outputs, so the logits are not flat
                p.normal_(0.0, p.shape[1] ** -0.5)
            elif "bias" in name:
                p.normal_(0.0, 0.02)
    body = bf16.model
    decoder_layers, body.layers = body.layers, nn.ModuleList()
    try:
        nvfp4 = copy.deepcopy(bf16)  # embeddings, final norm, LM head (tied or not)
    finally:
        body.layers = decoder_layers
    for layer in decoder_layers:
        packed = copy.deepcopy(layer)
        quantize_(packed)
        nvfp4.model.layers.append(packed)
    with torch.no_grad():
        for name, m in nvfp4.named_modules():
            if isinstance(m, NVFP4Linear):
                bf16.get_submodule(name).weight.copy_(m.dequantized_weight(torch.bfloat16))
    use_kernel_layout(nvfp4)
    if device == "cuda":
        torch.cuda.empty_cache()
    # Frozen, as a LoRA run's base is (peft freezes it too): the fused step then runs the BF16 model's q/k/v and
    # gate/up as one product each as well (``qerl.fusion`` leaves weights that train alone).
    bf16.requires_grad_(False)
    nvfp4.requires_grad_(False)
    return bf16.eval(), nvfp4.eval()


def with_adapter(model, rank: int):
    if rank == 0:
        return model
    from qerl.lora import attach_lora

    peft_model = attach_lora(model, r=rank, alpha=rank)
    with torch.no_grad():  # a trained adapter's B is not zero; peft starts it at zero
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.01)
    return peft_model.eval()


def timed_generate(backend: HFRolloutBackend, prompts: list[list[int]], settings: SamplingSettings) -> dict:
    torch.cuda.synchronize()
    result = backend.generate(prompts, settings)
    torch.cuda.synchronize()
    return {"seconds": result.seconds, "tokens": result.num_tokens, "tok_s": result.tokens_per_second}


def profile_generate(backend: HFRolloutBackend, prompts: list[list[int]], settings: SamplingSettings) -> dict:
    """Two more (warm) calls under the PyTorch profiler: wall time per generated step against the GPU time of its
    kernels per step by kind (``decode_nvfp4.kernel_times``; the eager prefill's kernels included), the difference
    being time the GPU waited on the host; then the host's operators per step (CPU activity only)."""
    from decode_nvfp4 import kernel_times
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        result = backend.generate(prompts, settings)
        torch.cuda.synchronize()
    steps = settings.max_new_tokens
    kinds, kernels = kernel_times(prof, steps)
    # Then the host's side: the operators torch ran from Python per step (inside CUDA graphs none run), slowest first.
    with profile(activities=[ProfilerActivity.CPU]) as host:
        host_result = backend.generate(prompts, settings)
        torch.cuda.synchronize()
    ops = sorted(({"name": ev.key[:120], "self_cpu_us_per_step": ev.self_cpu_time_total / steps,
                   "calls_per_step": ev.count / steps} for ev in host.key_averages()),
                 key=lambda r: -r["self_cpu_us_per_step"])
    return {"wall_us_per_step": result.seconds * 1e6 / steps, "gpu_us_per_step": sum(kinds.values()),
            "gpu_us_per_step_by_kind": kinds, "top_kernels": kernels[:12],
            "host_profiled_wall_us_per_step": host_result.seconds * 1e6 / steps, "top_host_ops": ops[:25]}


def timed(name: str, backend, prompts, settings) -> dict:
    """``timed_generate``; for "nvfp4_after" with the expand after the warp-specialized product while its step runs
    and is captured (the dispatch reads the switch as the graph is recorded); for "*_fullprefill" (the same backend
    as its model's own name) with the prefill's savings off: every row prefilled eagerly, the LM head on every
    position; for "*_eager" only the prefill's capture off; for "*_pdl" with programmatic dependent launch on
    (``qerl.kernels.pdl``); for "nvfp4_twolaunch" with split partials summed before a bias and an expand are added
    (``nvfp4_gemm.REDUCE_WITH_EPILOGUE`` off)."""
    from qerl.kernels import nvfp4_gemm, nvfp4_gemm_ws
    from qerl.kernels.pdl import pdl

    before = nvfp4_gemm_ws.BIAS_LORA_EPILOGUE
    nvfp4_gemm_ws.BIAS_LORA_EPILOGUE = name != "nvfp4_after"
    nvfp4_gemm.REDUCE_WITH_EPILOGUE = name != "nvfp4_twolaunch"
    decoder = backend.decoder
    full = name.endswith("_fullprefill")
    if decoder is not None:
        decoder.last_logits_only = decoder.share_prompt_prefill = not full
        decoder.capture_prefill = not (full or name.endswith("_eager"))
    try:
        with pdl(name.endswith("_pdl")):  # read as the step's graph is captured and at every launch outside it
            return timed_generate(backend, prompts, settings)
    finally:
        nvfp4_gemm_ws.BIAS_LORA_EPILOGUE = before
        nvfp4_gemm.REDUCE_WITH_EPILOGUE = True
        if decoder is not None:
            decoder.last_logits_only = decoder.share_prompt_prefill = decoder.capture_prefill = True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="8")
    p.add_argument("--lora-ranks", default="0")
    p.add_argument("--modes", default="fused", help="comma list of fused, compiled, eager")
    p.add_argument("--shape", default="7b", choices=[k for k in SHAPES if k != "tiny"],
                   help="the Qwen2.5 architecture the two random models take")
    p.add_argument("--layers", type=int, default=None, help="decoder layers (default: the shape's)")
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--profile", action="store_true", help="one more call per model under the PyTorch profiler")
    p.add_argument("--expand-after", action="store_true",
                   help="fused step, NVFP4 with an adapter: the adapter's expand after the product (the "
                        "warp-specialized kernel where its table has the shape) instead of in its epilogue")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    p.add_argument("--ws-lora-epilogue-compare", action="store_true",
                   help="also time the NVFP4 model with the adapter's expand added after the warp-specialized "
                        "product (nvfp4_gemm_ws.BIAS_LORA_EPILOGUE off) as 'nvfp4_after', in the same passes")
    p.add_argument("--decode-layout", default="auto", choices=("auto", "pairs", "words"),
                   help="the fused step's code layout (HFRolloutBackend's decode_layout; auto: words on a Hopper GPU "
                        "where the copy fits)")
    p.add_argument("--decode-layout-compare", action="store_true",
                   help="also time the NVFP4 model with the fused step on the modules' own 'pairs' codes "
                        "(decode_layout='pairs') as 'nvfp4_pairs', in the same passes")
    p.add_argument("--adapter-kernels-compare", action="store_true",
                   help="with an adapter: also time each model with the fused step's adapter shrink in torch and B "
                        "cast each step (DecodeStep's adapter_kernels off) as '<model>_torchadapter', in the same "
                        "passes")
    p.add_argument("--shrink-reduce-compare", action="store_true",
                   help="with an adapter: also time each model with the shrink kernel's K-splits summed by atomic "
                        "adds (DecodeStep's shrink_reduce='atomic') as '<model>_atomic', in the same passes")
    p.add_argument("--a-copies-compare", action="store_true",
                   help="with an adapter: both models again with the shrinks on the adapter's fp32 A instead of "
                        "the step's bf16 copies (DecodeStep(a_copies=False)), as '<model>_fp32a'")
    p.add_argument("--split-epilogue-compare", action="store_true",
                   help="also time the NVFP4 model with split partials summed by one kernel and the bias and expand "
                        "after them added by another (nvfp4_gemm.REDUCE_WITH_EPILOGUE off) as 'nvfp4_twolaunch', "
                        "in the same passes")
    p.add_argument("--pdl-compare", action="store_true",
                   help="also time the NVFP4 model with programmatic dependent launch on (QERL_PDL=1 while its step "
                        "is captured and run; off by default) as 'nvfp4_pdl', in the same passes")
    p.add_argument("--group", type=int, default=1,
                   help="rows per distinct prompt (GRPO's completions per prompt; the batch must divide by it)")
    p.add_argument("--prefill-compare", action="store_true",
                   help="also time each model with every row prefilled eagerly and the LM head on every prompt "
                        "position ('<model>_fullprefill') and with only the prefill's capture off ('<model>_eager'), "
                        "on the same backend and captured step, in the same passes")
    p.add_argument("--prefill-split", action="store_true",
                   help="also time calls that generate one token (the prefill, its LM head and one sample) per "
                        "model, and report the decode steps' share of a call as the difference")
    p.add_argument("--shrink-reduction-max-m", type=int, default=None,
                   help="fused step: rows up to which the adapters' shrink is a multiply-sum (default: the step's)")
    args = p.parse_args()
    from qerl.rollout import decode_step

    if args.expand_after:
        decode_step.ProjectionGroup.expand_in_epilogue = False
    if args.shrink_reduction_max_m is not None:
        decode_step.SHRINK_REDUCTION_MAX_M = args.shrink_reduction_max_m
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Every model, batch and mode compiles the same Qwen2 forward anew: more than dynamo's default of 8 entries.
    torch._dynamo.config.cache_size_limit = 64
    torch._dynamo.config.accumulated_cache_size_limit = 512
    torch.manual_seed(0)
    t0 = time.perf_counter()
    bf16, nvfp4 = build_models(args.layers, args.shape)
    args.layers = bf16.config.num_hidden_layers
    vocab = bf16.config.vocab_size
    print(f"built two {args.layers}-layer {args.shape} models in {time.perf_counter() - t0:.1f}s; "
          f"{torch.cuda.memory_allocated() / 2**30:.1f} GiB allocated", flush=True)
    import transformers
    import triton

    props = torch.cuda.get_device_properties(0)
    meta = {"device": props.name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "triton": triton.__version__, "transformers": transformers.__version__, "shape": args.shape,
            "layers": args.layers,
            "prompt": args.prompt, "new_tokens": args.new_tokens, "repeats": args.repeats,
            "expand_after": args.expand_after, "shrink_reduction_max_m": decode_step.SHRINK_REDUCTION_MAX_M,
            "ws_lora_epilogue_compare": args.ws_lora_epilogue_compare, "group": args.group,
            "prefill_compare": args.prefill_compare, "prefill_split": args.prefill_split,
            "decode_layout": args.decode_layout, "decode_layout_compare": args.decode_layout_compare,
            "adapter_kernels_compare": args.adapter_kernels_compare, "shrink_reduce_compare": args.shrink_reduce_compare,
            "a_copies_compare": args.a_copies_compare,
            "pdl_compare": args.pdl_compare, "split_epilogue_compare": args.split_epilogue_compare,
            "shrink_kernel_max_m": decode_step.SHRINK_KERNEL_MAX_M, "command": " ".join(["python"] + sys.argv)}
    # A token id past the vocabulary: no row stops early, every call generates batch x new_tokens tokens.
    eos = [vocab]
    tok = argparse.Namespace(pad_token_id=0, eos_token_id=eos[0])
    settings = SamplingSettings(max_new_tokens=args.new_tokens, temperature=1.0, seed=0)
    rows = []
    for rank in (int(r) for r in args.lora_ranks.split(",")):
        models = {"bf16": with_adapter(bf16, rank), "nvfp4": with_adapter(nvfp4, rank)}
        for mode in args.modes.split(","):
            compiled = mode != "eager"
            runs = dict(models)
            # The NVFP4 model again under a switch that ``timed`` sets by the backend's name.
            for flag, name in ((args.ws_lora_epilogue_compare, "nvfp4_after"),
                               (args.split_epilogue_compare, "nvfp4_twolaunch"), (args.pdl_compare, "nvfp4_pdl")):
                if flag:
                    runs[name] = models["nvfp4"]
            fused = {"fused": True, "compiled": False, "eager": None}[mode]
            layout = args.decode_layout if mode == "fused" else "auto"
            backends = {name: HFRolloutBackend(m, tok, eos, static_cache=compiled, compile=compiled, fused_step=fused,
                                               decode_layout=layout)
                        for name, m in runs.items()}
            if args.decode_layout_compare and mode == "fused":
                backends["nvfp4_pairs"] = HFRolloutBackend(models["nvfp4"], tok, eos, compile=True, fused_step=True,
                                                           decode_layout="pairs")
            variants = {"torchadapter": dict(adapter_kernels=False)} if args.adapter_kernels_compare else {}
            if args.shrink_reduce_compare:
                variants["atomic"] = dict(shrink_reduce="atomic")
            if args.a_copies_compare:
                variants["fp32a"] = dict(a_copies=False)
            if mode == "fused" and rank:
                from qerl.rollout.decode_step import DecodeStep

                for suffix, step_args in variants.items():
                    for name in models:
                        backend = HFRolloutBackend(models[name], tok, eos, compile=True, fused_step=True,
                                                   decode_layout=layout)
                        decoder = backend._static_decoder(torch.device("cuda"))
                        decoder._fused = DecodeStep(decoder.model, layout, **step_args)  # before any call
                        backends[f"{name}_{suffix}"] = backend
            if args.prefill_compare and compiled:
                backends.update({f"{name}_{v}": backends[name] for v in ("fullprefill", "eager") for name in models})
            for batch in (int(b) for b in args.batches.split(",")):
                if batch % args.group:
                    raise SystemExit(f"--group {args.group} does not divide batch {batch}")
                g = torch.Generator().manual_seed(batch)
                distinct = [torch.randint(2, vocab, (args.prompt,), generator=g).tolist()
                            for _ in range(batch // args.group)]
                prompts = [p for p in distinct for _ in range(args.group)]
                row = {"lora_rank": rank, "mode": mode, "batch": batch}
                for name, backend in backends.items():
                    row[f"{name}_first_call_s"] = timed(name, backend, prompts, settings)["seconds"]
                passes = [{name: timed(name, b, prompts, settings) for name, b in backends.items()}
                          for _ in range(args.repeats)]
                for name in backends:
                    row[f"{name}_tok_s_passes"] = [q[name]["tok_s"] for q in passes]
                    row[f"{name}_tok_s"] = statistics.median(row[f"{name}_tok_s_passes"])
                    row[f"{name}_tokens"] = passes[0][name]["tokens"]
                row["ratio"] = row["nvfp4_tok_s"] / row["bf16_tok_s"]
                if "nvfp4_fullprefill" in backends:
                    for v in ("fullprefill", "eager"):
                        row[f"ratio_{v}"] = row[f"nvfp4_{v}_tok_s"] / row[f"bf16_{v}_tok_s"]
                if args.prefill_split:
                    one = dataclasses.replace(settings, max_new_tokens=1)
                    for name, backend in backends.items():
                        calls = [timed(name, backend, prompts, one)["seconds"] for _ in range(args.repeats)]
                        row[f"{name}_prefill_ms"] = 1e3 * statistics.median(calls)
                        full_ms = 1e3 * batch * args.new_tokens / row[f"{name}_tok_s"]
                        row[f"{name}_step_ms"] = (full_ms - row[f"{name}_prefill_ms"]) / (args.new_tokens - 1)
                for suffix in variants:
                    if f"nvfp4_{suffix}" in backends:
                        row[f"ratio_{suffix}"] = row[f"nvfp4_{suffix}_tok_s"] / row[f"bf16_{suffix}_tok_s"]
                for suffix in NVFP4_VARIANTS:
                    if f"nvfp4_{suffix}" in backends:
                        row[f"ratio_{suffix}"] = row[f"nvfp4_{suffix}_tok_s"] / row["bf16_tok_s"]
                if "nvfp4_pairs" in backends:
                    row["ratio_pairs"] = row["nvfp4_pairs_tok_s"] / row["bf16_tok_s"]
                    row["layout_speedup"] = row["nvfp4_tok_s"] / row["nvfp4_pairs_tok_s"]
                if "nvfp4_after" in backends:
                    row["ratio_after"] = row["nvfp4_after_tok_s"] / row["bf16_tok_s"]
                    row["epilogue_speedup"] = row["nvfp4_tok_s"] / row["nvfp4_after_tok_s"]
                for name, backend in backends.items():
                    step = getattr(backend.decoder, "_fused", None)
                    row[f"{name}_fused_groups"] = None if step is None else step.fused_groups()
                    row[f"{name}_decode_layout"] = None if step is None else step.layout
                if args.profile:
                    row["profile"] = {name: profile_generate(b, prompts, settings) for name, b in backends.items()}
                row["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
                rows.append(row)
                print(json.dumps(row), flush=True)
                (out_dir / "rollout_hf.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        if rank:  # take the adapters off again for the next rank
            for m in models.values():
                m.unload()
    print(f"\n{props.name}, {args.shape} shape, {args.layers} layers, {args.new_tokens} new tokens (prompt {args.prompt})")
    print(f"{'rank':>4s} {'mode':>8s} {'batch':>5s} {'BF16 tok/s':>11s} {'NVFP4 tok/s':>12s} {'ratio':>6s} "
          f"{'first call s (BF16/NVFP4)':>26s}")
    for r in rows:
        print(f"{r['lora_rank']:4d} {r['mode']:>8s} {r['batch']:5d} {r['bf16_tok_s']:11.0f} {r['nvfp4_tok_s']:12.0f} "
              f"{r['ratio']:6.2f} {r['bf16_first_call_s']:12.1f} / {r['nvfp4_first_call_s']:.1f}")
        if "ratio_fullprefill" in r:
            print(f"     every row prefilled, LM head on every position: BF16 {r['bf16_fullprefill_tok_s']:.0f} / "
                  f"NVFP4 {r['nvfp4_fullprefill_tok_s']:.0f} tok/s, {r['ratio_fullprefill']:.2f}x")
            print(f"     the prefill uncaptured: BF16 {r['bf16_eager_tok_s']:.0f} / NVFP4 {r['nvfp4_eager_tok_s']:.0f} "
                  f"tok/s, {r['ratio_eager']:.2f}x")
        for name in (n[: -len("_prefill_ms")] for n in r if n.endswith("_prefill_ms")):
            print(f"     {name}: prefill {r[name + '_prefill_ms']:.1f} ms, then {r[name + '_step_ms']:.2f} ms a token")
        for suffix, what in STEP_VARIANTS.items():
            if f"ratio_{suffix}" in r:
                print(f"     {what}: BF16 {r[f'bf16_{suffix}_tok_s']:.0f} / NVFP4 {r[f'nvfp4_{suffix}_tok_s']:.0f} tok/s, "
                      f"{r[f'ratio_{suffix}']:.2f}x")
        for suffix, what in NVFP4_VARIANTS.items():
            if f"ratio_{suffix}" in r:
                print(f"     NVFP4 with {what}: {r[f'nvfp4_{suffix}_tok_s']:.0f} tok/s ({r[f'ratio_{suffix}']:.2f}x BF16)")
        if "nvfp4_pairs_tok_s" in r:
            print(f"     NVFP4's step on {r['nvfp4_decode_layout']}; on the modules' pairs: {r['nvfp4_pairs_tok_s']:.0f} "
                  f"tok/s ({r['ratio_pairs']:.2f}x BF16); {r['nvfp4_decode_layout']} / pairs "
                  f"{r['layout_speedup']:.3f}")
        if "nvfp4_after_tok_s" in r:
            print(f"     expand after the product: NVFP4 {r['nvfp4_after_tok_s']:.0f} tok/s ({r['ratio_after']:.2f}x "
                  f"BF16); in the epilogue {r['epilogue_speedup']:.3f}x faster")
    for r in rows:
        for name, prof in r.get("profile", {}).items():
            kinds = ", ".join(f"{k} {v:.0f}" for k, v in sorted(prof["gpu_us_per_step_by_kind"].items()))
            print(f"rank {r['lora_rank']} {r['mode']} batch {r['batch']} {name}: wall {prof['wall_us_per_step']:.0f} "
                  f"us a step, GPU {prof['gpu_us_per_step']:.0f} ({kinds})")
            print("  host ops, self us / calls a step: " + ", ".join(
                f"{op['name'][:40]} {op['self_cpu_us_per_step']:.0f} / {op['calls_per_step']:.1f}"
                for op in prof["top_host_ops"][:8]))


if __name__ == "__main__":
    main()

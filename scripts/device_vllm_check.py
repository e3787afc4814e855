"""Check the vLLM rollout backend on a CUDA machine: NVFP4 on Marlin kernels, adapter sync, AQN in the engine.

    python3 scripts/device_vllm_check.py --model DIR [--load nvfp4|bf16|nf4] [--rank 16] [--sigma 0.01]
        [--gpu-memory-utilization 0.35] [--max-model-len 1024] [--sleep-mode] [--cuda-graphs] [--json OUT.json]

Starts a colocated engine with ``VLLMRolloutBackend`` and a trainer-side policy (``qerl.load_policy``, same load
mode, on the same GPU) carrying a random LoRA adapter, then checks:
  kernels    every quantized linear layer of the engine runs the expected kernel (NVFP4: a Marlin FP4 kernel);
  adapter    after a sync the engine's LoRA tensors equal the trainer's (A, and B with the LoRA scaling folded in),
             and again after the trainer's adapter changes; the previous adapter version is unloaded;
  outputs    the adapter changes greedy outputs;
  logprobs   the returned log-probabilities are finite, one per token, and close to the trainer's recomputation
             (the rollout/training mismatch of the NVFP4 kernels is reported);
  aqn        during generation the engine's RMSNorm weights carry fresh noise of the scheduled sigma (RMS of
             applied - clean reported as the effective sigma of the engine's dtype) and are clean afterwards;
             AQN with sigma > 0 and no matched norm raises;
  sleep      (--sleep-mode) the engine sleeps after generating, frees GPU memory, and after waking serves the
             current adapter.
Prints one JSON summary; exit code 0 when every check passed.

The noise check records the weights with forward hooks, which fire in eager mode only: the engine runs with
``enforce_eager=True`` unless ``--cuda-graphs`` is given (then the noise is checked on the weights directly).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

EXPECTED_KERNEL = {"nvfp4": ("marlin", "fp4"), "bf16": (), "nf4": ()}
NORMS = ("input_layernorm", "post_attention_layernorm")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="checkpoint directory (compressed-tensors NVFP4 for --load nvfp4)")
    p.add_argument("--load", choices=("nvfp4", "bf16", "nf4"), default="nvfp4")
    p.add_argument("--fp4-kernel", choices=("marlin", "qerl"), default="marlin",
                   help="NVFP4 GEMM of the engine: vLLM's Marlin, or this project's Triton kernels")
    p.add_argument("--rank", type=int, default=16, help="LoRA rank (alpha = rank, so vLLM's folded B equals B)")
    p.add_argument("--sigma", type=float, default=1e-2, help="AQN sigma for the noise check")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.35)
    p.add_argument("--max-model-len", type=int, default=1024)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--batch", type=int, default=8, help="completions per generation")
    p.add_argument("--sleep-mode", action="store_true", help="start the engine with sleep mode and check it")
    p.add_argument("--cuda-graphs", action="store_true", help="do not force eager mode (noise checked on weights)")
    p.add_argument("--fuse-lora-expand", action=argparse.BooleanOptionalAction, default=None,
                   help="the adapter's expand in the NVFP4 GEMM's epilogue (vllm_lora_fusion); default: on with "
                        "--fp4-kernel qerl")
    p.add_argument("--max-mean-logprob-diff", type=float, default=0.25,
                   help="fail if mean |rollout - trainer| log-prob difference exceeds this (sanity bound)")
    p.add_argument("--trainer-device", default=None, help="device of the trainer-side policy (default: cuda if present)")
    p.add_argument("--json", help="also write the summary to this file")
    return p.parse_args(argv)


class Checks:
    def __init__(self) -> None:
        self.results: dict[str, dict] = {}

    def record(self, name: str, ok: bool, **info) -> None:
        self.results[name] = {"ok": bool(ok), **info}
        print(f"[check] {name}: {'PASS' if ok else 'FAIL'} {json.dumps(info, default=str)[:400]}", flush=True)

    @property
    def ok(self) -> bool:
        return all(r["ok"] for r in self.results.values())


def randomize_adapter(policy, seed: int, a_std: float = 0.02, b_std: float = 0.05) -> None:
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_A" in name or "lora_B" in name:
                std = b_std if "lora_B" in name else a_std
                p.copy_((torch.randn(p.shape, generator=g) * std).to(p.dtype))


def trainer_adapter(policy) -> dict:
    out = {}
    for name, module in policy.named_modules():
        lora_a = getattr(module, "lora_A", None)
        if lora_a is not None and "default" in lora_a:
            out[name.removeprefix("base_model.model.")] = (
                module.lora_A["default"].weight.detach().float(),
                module.lora_B["default"].weight.detach().float() * module.scaling["default"],
            )
    return out


def compare_adapter(backend, policy, rank: int) -> dict:
    from qerl.rollout import vllm_internals

    engine = vllm_internals.active_lora_weights(backend.llm, backend.lora_request.lora_int_id)
    expected = trainer_adapter(policy)
    missing = sorted(set(expected) - set(engine))
    worst_rel, exact, pad_zero = 0.0, True, True
    for name, (a, b) in expected.items():
        if name in missing:
            continue
        ea, eb = engine[name]
        for got, want in ((ea[:rank].float().cpu(), a.cpu()), (eb[:, :rank].float().cpu(), b.cpu())):
            err = float((got - want).abs().max())
            exact &= err == 0.0
            worst_rel = max(worst_rel, err / max(float(want.abs().max()), 1e-12))
        pad_zero &= bool((ea[rank:] == 0).all()) and bool((eb[:, rank:] == 0).all())
    return {"modules": len(expected), "missing_in_engine": missing[:5], "exact": exact,
            "max_rel_err": worst_rel, "padding_zero": pad_zero, "engine_lora_dtype": str(next(iter(engine.values()))[0].dtype)}


def capture_norms(model, names):
    modules = dict(model.named_modules())
    seen = {n: [] for n in names}
    handles = [modules[n].register_forward_pre_hook(
        lambda m, args, n=n: seen[n].append(m.weight.detach().float().clone())) for n in names]
    return seen, handles


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from qerl.aqn import AQNConfig, AQNController
    from qerl.loading import load_policy, load_tokenizer
    from qerl.lora import attach_lora
    from qerl.rollout import vllm_internals
    from qerl.rollout.base import SamplingSettings
    from qerl.rollout.vllm_backend import VLLMRolloutBackend, fuse_lora_expand_enabled

    device = args.trainer_device or ("cuda" if torch.cuda.is_available() else "cpu")
    checks = Checks()
    summary: dict = {"model": args.model, "load": args.load, "rank": args.rank, "sigma": args.sigma,
                     "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
    backend = None
    try:
        tok = load_tokenizer(args.model)
        t = time.perf_counter()
        backend = VLLMRolloutBackend(
            args.model, tok, load=args.load, max_lora_rank=args.rank,
            gpu_memory_utilization=args.gpu_memory_utilization, max_model_len=args.max_model_len,
            enable_sleep_mode=args.sleep_mode, enforce_eager=not args.cuda_graphs, seed=0, fp4_kernel=args.fp4_kernel,
            fuse_lora_expand=args.fuse_lora_expand,
        )
        summary["vllm_version"] = backend.vllm_version
        summary["engine_start_s"] = round(time.perf_counter() - t, 1)
        summary["engine_max_lora_rank"] = backend.max_lora_rank
        engine_model = backend.generating_model()

        # -- kernels -----------------------------------------------------------------------------------------
        modules = dict(engine_model.named_modules())
        # LoRA wrappers expose their base layer's quant method too; count each layer once, at the base layer.
        layers = {n: k for n, k in vllm_internals.linear_kernels(engine_model).items()
                  if not hasattr(modules[n], "base_layer")}
        combos: dict[str, int] = {}
        for k in layers.values():
            key = f"{k['quant_method']}/{k['scheme'] or '-'}/{k['kernel'] or '-'}"
            combos[key] = combos.get(key, 0) + 1
        # Linear layers only: attention modules carry a KV-cache quant method, embeddings an unquantized one.
        quantized = {n: k for n, k in layers.items() if not k["quant_method"].startswith("Unquantized")
                     and "KVCache" not in k["quant_method"]}
        want = EXPECTED_KERNEL[args.load]
        if args.load == "nvfp4" and args.fp4_kernel == "qerl":  # this project's method, on the Triton path
            bad = [n for n, k in quantized.items() if k["quant_method"] != "QeRLNVFP4LinearMethod"
                   or getattr(modules[n], "qerl_shape", None) is None]
            # Unless --no-fuse-lora-expand, the adapter's expand runs in the GEMM's epilogue on every one of them.
            fused = fuse_lora_expand_enabled(args.fuse_lora_expand, args.load, args.fp4_kernel)
            want_fused = len(quantized) if fused else 0
            ok = bool(quantized) and not bad and backend.fused_lora_layers == want_fused
            summary["fused_lora_layers"] = backend.fused_lora_layers
            summary["lora_fusion_at"] = backend.lora_fusion_at
        elif args.load == "nvfp4":
            bad = [n for n, k in quantized.items() if not all(w in k["kernel"].lower() for w in want)]
            ok = bool(quantized) and not bad
        elif args.load == "bf16":
            bad, ok = sorted(quantized)[:5], not quantized
        else:
            bad = [n for n, k in quantized.items() if "bitsandbytes" not in k["quant_method"].lower()]
            ok = bool(quantized) and not bad
        checks.record("kernels", ok, layer_kinds=combos, quantized_layers=len(quantized), unexpected=bad[:5])

        # -- trainer side: the same base with a random LoRA adapter -------------------------------------------
        t = time.perf_counter()
        model, _ = load_policy(args.model, load=args.load, device=device, dtype=torch.bfloat16)
        policy = attach_lora(model, r=args.rank, alpha=args.rank)
        policy.eval()
        summary["trainer_load_s"] = round(time.perf_counter() - t, 1)

        # -- (a) adapter in the engine == trainer's adapter ---------------------------------------------------
        randomize_adapter(policy, seed=1)
        t = time.perf_counter()
        backend.sync_policy(policy)
        summary["sync_s"] = round(time.perf_counter() - t, 3)
        first = backend.lora_request
        cmp1 = compare_adapter(backend, policy, args.rank)
        with torch.no_grad():
            for name, p in policy.named_parameters():
                if "layers.0." in name and ("lora_A" in name or "lora_B" in name):
                    p.mul_(-2.0).add_(0.01)
        backend.sync_policy(policy)
        cmp2 = compare_adapter(backend, policy, args.rank)
        unloaded = first.lora_int_id not in backend.llm.llm_engine.list_loras()
        trainer_dtype = str(next(p for n, p in policy.named_parameters() if "lora_A" in n).dtype)
        # Same dtype on both sides and alpha = rank (scaling 1): the engine must hold the very same numbers.
        # Otherwise one rounding to the engine's LoRA dtype (bf16: relative 2**-8) is allowed.
        tol = 0.0 if cmp1["engine_lora_dtype"] == trainer_dtype else 2**-8
        ok = all(not c["missing_in_engine"] and c["padding_zero"] and c["max_rel_err"] <= tol
                 for c in (cmp1, cmp2)) and unloaded
        checks.record("adapter", ok, first_sync=cmp1, after_change=cmp2, previous_version_unloaded=unloaded,
                      trainer_lora_dtype=trainer_dtype)

        # -- outputs change with the adapter -------------------------------------------------------------------
        texts = ["The capital of France is", "def fibonacci(n):", "Question: what is 12 * 7? Answer:",
                 "Once upon a time"]
        prompts = [tok.encode(texts[i % len(texts)]) for i in range(args.batch)]
        if not all(prompts):  # a random benchmark checkpoint may ship no real tokenizer: use fixed token ids
            prompts = [[100 + (37 * i + 11 * j) % 900 for j in range(24)] for i in range(args.batch)]
        greedy = SamplingSettings(max_new_tokens=args.max_new_tokens, temperature=0.0)
        adapted = backend.generate(prompts, greedy)
        backend.wake_up()  # with --sleep-mode every generate ends asleep; engine tensors are read below
        saved = {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_B" in n}
        with torch.no_grad():
            for n, p in policy.named_parameters():
                if "lora_B" in n:
                    p.zero_()
        backend.sync_policy(policy)
        base = backend.generate(prompts, greedy)
        with torch.no_grad():
            for n, p in policy.named_parameters():
                if n in saved:
                    p.copy_(saved[n])
        backend.sync_policy(policy)
        changed = sum(a != b for a, b in zip(adapted.completion_ids, base.completion_ids))
        checks.record("outputs", changed > 0, prompts_changed=changed, of=len(prompts))

        # -- logprobs: rollout vs trainer recomputation at T = 1, sigma = 0 ----------------------------------
        res = backend.generate(prompts, SamplingSettings(max_new_tokens=args.max_new_tokens, temperature=1.0, seed=5))
        summary["rollout_tokens_per_s"] = round(res.tokens_per_second, 1)
        diffs, shape_ok = [], True
        with torch.no_grad():
            for prompt, comp, lps in zip(prompts, res.completion_ids, res.logprobs):
                shape_ok &= len(lps) == len(comp) and all(math.isfinite(x) for x in lps)
                ids = torch.tensor([prompt + comp], device=device)
                logits = policy(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
                ref = torch.log_softmax(logits, -1).gather(-1, torch.tensor(comp, device=device)[:, None]).squeeze(-1)
                diffs.append(ref.cpu() - torch.tensor(lps))
        d = torch.cat(diffs)
        mean_abs = float(d.abs().mean())
        checks.record("logprobs", shape_ok and mean_abs <= args.max_mean_logprob_diff, tokens=d.numel(),
                      mean_abs_diff=mean_abs, max_abs_diff=float(d.abs().max()),
                      mean_ratio_trainer_over_rollout=float(d.exp().mean()))

        # -- (b) AQN noise on the engine's RMSNorms --------------------------------------------------------------
        controller = AQNController(AQNConfig(mode="constant", sigma_start=args.sigma))
        backend.attach_aqn(controller, NORMS, seed=0)
        names = sorted(backend.injector.modules)
        clean = {n: backend.injector.master[n].clone() for n in names}
        # Hooks only see eager forwards; with CUDA graphs / torch.compile the weights are checked directly below.
        seen, handles = capture_norms(engine_model, names) if not args.cuda_graphs else ({n: [] for n in names}, [])
        try:
            out = backend.generate(prompts, SamplingSettings(max_new_tokens=4, temperature=1.0, seed=1))
            backend.wake_up()
        finally:
            for h in handles:
                h.remove()
        hooks_fired = all(seen[n] for n in names)
        if hooks_fired:
            applied = {n: seen[n][0] for n in names}
            held = all(all(torch.equal(w, seen[n][0]) for w in seen[n]) for n in names)
        else:  # CUDA graphs replay without Python hooks: check the weights the injector writes instead
            stats = backend.injector.perturb(args.sigma)
            applied = {n: m.weight.detach().float().clone() for n, m in backend.injector.modules.items()}
            backend.injector.restore()
            out.noise, held = stats, True
        diff = torch.cat([(applied[n] - clean[n]).flatten() for n in names])
        restored = all(torch.equal(modules[n].weight.float(), clean[n]) for n in names)
        eff = float(diff.pow(2).mean().sqrt())
        ok = (len(names) > 0 and held and restored and abs(out.noise.effective_sigma - eff) <= 1e-3 * eff + 1e-12
              and 0.5 < eff / args.sigma < 1.5)
        checks.record("aqn", ok, modules=len(names), engine_norm_dtype=str(next(iter(backend.injector.modules.values())).weight.dtype),
                      sigma=args.sigma, effective_sigma=eff, per_channel_std=float(diff.std()),
                      channels_changed=float((diff != 0).float().mean()), measured_in_forward=hooks_fired,
                      one_draw_per_round=held, clean_after_round=restored)
        backend.attach_aqn(AQNController(AQNConfig(mode="constant", sigma_start=args.sigma)), ("no_such_norm",))
        try:
            backend.generate(prompts[:1], SamplingSettings(max_new_tokens=2))
            raised = False
        except RuntimeError as exc:
            raised = "no norm module matched" in str(exc)
        checks.record("aqn_zero_matched_raises", raised)
        backend.aqn = backend.injector = None

        # -- sleep mode ------------------------------------------------------------------------------------------
        if args.sleep_mode and torch.cuda.is_available():
            backend.wake_up()
            torch.cuda.synchronize()
            free_awake = torch.cuda.mem_get_info()[0]
            backend.sleep()
            free_asleep = torch.cuda.mem_get_info()[0]
            with torch.no_grad():
                for name, p in policy.named_parameters():
                    if "layers.1." in name and "lora_B" in name:
                        p.add_(0.01)
            backend.sync_policy(policy)  # wakes the engine
            cmp3 = compare_adapter(backend, policy, args.rank)
            again = backend.generate(prompts[:2], greedy)
            freed = (free_asleep - free_awake) / 2**30
            ok = freed > 0.1 and not cmp3["missing_in_engine"] and cmp3["max_rel_err"] <= tol and again.num_tokens > 0
            checks.record("sleep", ok, freed_gib=round(freed, 2), adapter_after_wake=cmp3, generated=again.num_tokens)
    except Exception as exc:  # report what broke in the summary, with the traceback on stderr
        traceback.print_exc()
        checks.record("run", False, error=f"{type(exc).__name__}: {exc}")
    finally:
        if backend is not None:
            try:
                backend.close()
            except Exception:  # shutting down is best effort; the summary matters more
                traceback.print_exc()
    summary["checks"] = checks.results
    summary["ok"] = checks.ok
    text = json.dumps(summary, indent=1, default=str)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0 if checks.ok else 1


if __name__ == "__main__":
    sys.exit(main())

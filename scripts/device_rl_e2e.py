"""RL steps end to end on a CUDA machine: the project's trainer (trl GRPO through ``QeRLTrainer``) with rollouts from
the colocated vLLM engine on an NVFP4 checkpoint, exactly as ``python -m qerl.train`` builds it.

    python3 scripts/device_rl_e2e.py --config configs/smollm2_arith_nvfp4.yaml --model DIR --steps 4 \\
        [--json OUT.json] [any QeRLConfig option, e.g. --max_completion_length 64]

Options after the script's own are parsed by ``trl.TrlParser`` like the training CLI's, on top of the YAML config;
the script forces ``--rollout_backend vllm``, ``--max_steps`` and ``--output_dir``.
After training it checks, from trl's log history and from the engine itself:
  steps       every step logged a finite loss, a reward, rollout tokens/s and the rollout/trainer log-prob mismatch;
  aqn         the sigma logged at each step is the schedule's (stage 0 noise-free), on every RMSNorm in the engine;
  adapter     after a final sync the LoRA tensors inside the engine equal the trained adapter (one bf16 rounding);
  trained     the adapter moved away from its initialisation (B starts at zero);
  saved       the final adapter directory was written (adapter_config.json, adapter_model.safetensors).
Prints one JSON summary (per-step wall time and metrics included); exit code 0 when every check passed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def trained_adapter(policy) -> dict:
    """Trainer-side LoRA tensors as the engine holds them: A, and B with the LoRA scaling folded in."""
    out = {}
    for name, module in policy.named_modules():
        lora_a = getattr(module, "lora_A", None)
        if lora_a is not None and "default" in lora_a:
            out[name.removeprefix("base_model.model.")] = (
                module.lora_A["default"].weight.detach().float(),
                module.lora_B["default"].weight.detach().float() * module.scaling["default"],
            )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True)
    p.add_argument("--model", required=True, help="checkpoint directory (with a tokenizer)")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--json", help="also write the summary here")
    p.add_argument("--output-dir", help="run directory (default: a fresh one under /tmp); the adapter goes to final/")
    p.add_argument("--token-reward", action="store_true",
                   help="add a reward that varies with the sampled tokens (share of even token ids): on a random-"
                        "weights checkpoint every task reward is 0, GRPO's advantages vanish and nothing would train")
    args, rest = p.parse_known_args(argv)

    import torch
    from trl import TrlParser

    from qerl.aqn import scheduled_sigma
    from qerl.config import QeRLConfig
    from qerl.rollout import vllm_internals
    from qerl.train import build_trainer

    out_dir = args.output_dir or tempfile.mkdtemp(prefix="qerl-e2e-")
    cli = ["--config", args.config, *rest, "--model_name_or_path", args.model, "--rollout_backend", "vllm",
           "--max_steps", str(args.steps), "--output_dir", out_dir, "--report_to", "none", "--save_strategy", "no"]
    (cfg,) = TrlParser((QeRLConfig,)).parse_args_and_config(cli)
    summary: dict = {"model": args.model, "config": args.config, "overrides": rest, "steps": args.steps,
                     "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
    results: dict[str, dict] = {}

    def record(name: str, ok: bool, **info) -> None:
        results[name] = {"ok": bool(ok), **info}
        print(f"[check] {name}: {'PASS' if ok else 'FAIL'} {json.dumps(info, default=str)[:400]}", flush=True)

    trainer = None
    try:
        t = time.perf_counter()
        reward_funcs = None
        if args.token_reward:
            from qerl.rewards import get_reward_funcs

            def even_token_share(completions, completion_ids=None, **kwargs):
                return [sum(1 for t in ids if t % 2 == 0) / max(len(ids), 1) for ids in completion_ids]

            reward_funcs = [*get_reward_funcs(cfg.reward_names), even_token_share]
        trainer = build_trainer(cfg, reward_funcs=reward_funcs)
        summary["build_s"] = round(time.perf_counter() - t, 1)
        summary["backend"] = trainer.backend.name
        summary["vllm_version"] = getattr(trainer.backend, "vllm_version", None)
        init = {k: (a.clone(), b.clone()) for k, (a, b) in trained_adapter(trainer.model).items()}

        stamps: list[float] = []

        from transformers import TrainerCallback

        class StepClock(TrainerCallback):
            def on_step_end(self, *a, **k):
                stamps.append(time.perf_counter())

        trainer.add_callback(StepClock())
        t = time.perf_counter()
        trainer.train()
        summary["train_s"] = round(time.perf_counter() - t, 1)
        summary["step_s"] = [round(b - a, 2) for a, b in zip([t, *stamps], stamps)]
        if torch.cuda.is_available():
            summary["peak_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        logs = [h for h in trainer.state.log_history if "loss" in h]
        keep = ("loss", "reward", "rollout/tokens_per_second", "aqn/sigma", "aqn/modules", "aqn/effective_sigma",
                "sampling/sampling_logp_difference/mean", "entropy", "completions/mean_length")
        summary["log"] = [{k: h.get(k) for k in ("step", *keep) if k in h} for h in logs]

        finite = all(math.isfinite(h["loss"]) for h in logs)
        have = all(all(k in h for k in ("reward", "rollout/tokens_per_second",
                                        "sampling/sampling_logp_difference/mean")) for h in logs)
        record("steps", len(logs) == args.steps and finite and have, logged_steps=len(logs), finite_loss=finite,
               metrics_present=have)

        if cfg.aqn_mode != "off":
            acfg = cfg.aqn_config()
            want = [scheduled_sigma(acfg, h["step"] - 1, args.steps) for h in logs]
            got = [h.get("aqn/sigma", 0.0) for h in logs]
            modules = {h.get("aqn/modules") for h in logs if h.get("aqn/sigma", 0.0) > 0}
            n_layers = trainer.model.config.num_hidden_layers
            ok = (all(math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-12) for g, w in zip(got, want)) and any(g > 0 for g in got)
                  and modules == {2.0 * n_layers})
            record("aqn", ok, logged_sigma=got, scheduled_sigma=want, modules=sorted(modules),
                   expected_modules=2 * n_layers)

        trainer.backend.sync_policy(trainer.model)
        engine = vllm_internals.active_lora_weights(trainer.backend.llm, trainer.backend.lora_request.lora_int_id)
        expected = trained_adapter(trainer.model)
        rank = cfg.lora_r
        worst, missing = 0.0, [n for n in expected if n not in engine]
        for name, (a, b) in expected.items():
            if name in missing:
                continue
            ea, eb = engine[name]
            for got_t, want_t in ((ea[:rank].float().cpu(), a.cpu()), (eb[:, :rank].float().cpu(), b.cpu())):
                err = float((got_t - want_t).abs().max())
                worst = max(worst, err / max(float(want_t.abs().max()), 1e-12))
        record("adapter", not missing and worst <= 2**-8, modules=len(expected), missing=missing[:5],
               max_rel_err=worst)

        moved = max(float((b - init[n][1]).abs().max()) for n, (_, b) in expected.items())
        record("trained", moved > 0, max_abs_change_of_B=moved)

        final = Path(out_dir) / "final"
        trainer.save_model(str(final))
        files = sorted(x.name for x in final.iterdir())
        record("saved", {"adapter_config.json", "adapter_model.safetensors"} <= set(files), files=files,
               path=str(final))
        summary["adapter_dir"] = str(final)
    except Exception as exc:  # the summary says what broke; the traceback goes to stderr
        traceback.print_exc()
        record("run", False, error=f"{type(exc).__name__}: {exc}")
    finally:
        if trainer is not None:
            try:
                trainer.backend.close()
            except Exception:
                traceback.print_exc()
    summary["checks"] = results
    summary["ok"] = all(r["ok"] for r in results.values())
    text = json.dumps(summary, indent=1, default=str)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

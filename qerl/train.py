"""`python -m qerl.train --config configs/X.yaml [--key value ...]`: RL on a 4-bit (or BF16 / NF4) base with LoRA.

The data flow: load policy (packed NVFP4 modules) -> LoRA -> rollout backend (vLLM or transformers) with AQN ->
rewards -> trl GRPO/DAPO update (+ importance-sampling correction) -> atomic checkpoints -> final adapter.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

import torch

from qerl.config import QeRLConfig
from qerl.errors import UserError

log = logging.getLogger("qerl.train")


def build_trainer(args: QeRLConfig, reward_funcs: list | None = None):
    """Everything the run needs, assembled from the config. ``reward_funcs`` replaces the named ones (tests)."""
    from transformers import set_seed
    from trl.rewards import get_soft_overlong_punishment

    from qerl import lora
    from qerl.aqn import AQNCallback, AQNController
    from qerl.data import load_task_dataset
    from qerl.loading import load_policy
    from qerl.rewards import get_reward_funcs, safe_reward
    from qerl.rollout import default_backend_name, make_backend
    from qerl.trainer import QeRLTrainer

    set_seed(args.seed)  # LoRA's random init happens before trl seeds anything
    if not args.model_name_or_path:
        raise UserError("no model given: pass --model_name_or_path PATH (an NVFP4 checkpoint for --load nvfp4)")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tokenizer = load_policy(args.model_name_or_path, load=args.load, device=device, dtype=args.torch_dtype,
                                   input_grad_rows=args.kernel_input_grad_rows)
    if args.gradient_checkpointing:
        model.config.use_cache = False

    peft_model = lora.attach_lora(
        model, r=args.lora_r, alpha=args.lora_alpha, dropout=args.lora_dropout, target_modules=args.lora_target_modules
    )
    norm_names = []
    if args.train_norms:
        for name, p in peft_model.named_parameters():
            if "norm" in name.rsplit(".", 2)[-2] and p.ndim == 1:
                p.requires_grad_(True)
                norm_names.append(name)

    options = {}
    if args.dataset_name == "arith":
        options["difficulty"] = args.dataset_difficulty
    if args.dataset_levels:
        options["levels"] = [int(x) for x in str(args.dataset_levels).split(",")]
    dataset = load_task_dataset(args.dataset_name, args.dataset_split, data_file=args.dataset_file,
                                limit=args.dataset_limit, seed=args.seed, **options)

    reward_funcs = list(reward_funcs) if reward_funcs is not None else get_reward_funcs(args.reward_names)
    if args.overlong_buffer_len:
        overlong = get_soft_overlong_punishment(args.max_completion_length, args.overlong_buffer_len)
        reward_funcs.append(safe_reward(_scaled(overlong, args.overlong_penalty_factor), args.reward_timeout_s))

    backend_name = default_backend_name() if args.rollout_backend == "auto" else args.rollout_backend
    log.info("rollout backend: %s%s", backend_name, " (auto)" if args.rollout_backend == "auto" else "")
    if backend_name == "vllm":
        backend = make_backend(
            "vllm", model_path=args.model_name_or_path, tokenizer=tokenizer, load=args.load,
            max_lora_rank=args.vllm_max_lora_rank, gpu_memory_utilization=args.vllm_gpu_memory_utilization,
            max_model_len=args.vllm_max_model_length or 4096, enable_sleep_mode=args.vllm_enable_sleep_mode,
            seed=args.seed, enforce_eager=args.vllm_enforce_eager, lora_dual_stream=args.vllm_lora_dual_stream,
            fp4_kernel=args.vllm_fp4_kernel,
            lora_kernel_configs=args.vllm_lora_kernel_configs,
            fuse_lora_expand=args.vllm_fuse_lora_expand,
        )
    else:
        eos = sorted({tokenizer.eos_token_id, *_as_list(model.generation_config.eos_token_id)} - {None})
        backend = make_backend("hf", model=peft_model, tokenizer=tokenizer, eos_token_ids=eos,
                               static_cache=args.hf_static_cache, compile=args.hf_compile,
                               fused_step=args.hf_fused_step, decode_layout=args.hf_decode_layout,
                               adapter_a_copies=args.hf_adapter_a_copies)

    aqn = None
    callbacks = []
    if args.aqn_mode != "off":
        aqn = AQNController(args.aqn_config())
        backend.attach_aqn(aqn, tuple(args.aqn_targets), seed=args.seed)
        callbacks.append(AQNCallback(aqn))

    return QeRLTrainer(
        model=peft_model,
        args=args,
        backend=backend,
        aqn=aqn,
        norm_param_names=norm_names,
        reward_funcs=reward_funcs,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=callbacks,
    )


def _as_list(x):
    return [] if x is None else list(x) if isinstance(x, (list, tuple)) else [x]


def _scaled(fn, factor: float):
    def overlong_penalty(completions, completion_ids=None, **kwargs):
        return [factor * r for r in fn(completion_ids=completion_ids)]

    return overlong_penalty


def last_checkpoint(output_dir: str) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None


def run(args: QeRLConfig) -> Path:
    """Train, then save the final adapter (and trained norms) atomically under ``output_dir/final``."""
    resume = last_checkpoint(args.output_dir) if args.resume else None
    if args.resume and resume is None:
        log.warning("--resume: no checkpoint in %s, starting from step 0", args.output_dir)
    elif not args.resume and last_checkpoint(args.output_dir) and not args.overwrite_output_dir:
        raise UserError(
            f"{args.output_dir} already holds checkpoints: pass --resume to continue that run, "
            "--overwrite_output_dir to start over there, or another --output_dir"
        )
    trainer = build_trainer(args)
    trainer.train(resume_from_checkpoint=resume)
    final = save_final(trainer, args.output_dir)
    log.info("final adapter: %s", final)
    return final


def save_final(trainer, output_dir: str | Path) -> Path:
    """The final adapter (and trained norms) with the run's log history, atomically under ``output_dir/final``.

    Every process calls ``save_model`` (sharded setups gather the weights there), but only the one that saves
    stages and renames: with data-parallel processes the others would otherwise race it for the same folders."""
    final = Path(output_dir) / "final"
    staging = Path(output_dir) / ".final.tmp"
    if trainer.args.should_save:
        shutil.rmtree(staging, ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    trainer.save_model(str(staging))
    if trainer.args.should_save:
        # The whole run's log history (rewards, AQN sigma, rollout speed per step) beside the adapter it produced,
        # so evaluation and comparison scripts need no intermediate checkpoint.
        trainer.state.save_to_json(str(staging / "trainer_state.json"))
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    trainer.accelerator.wait_for_everyone()
    return final


def main(argv: list[str] | None = None) -> int:
    from trl import TrlParser

    from qerl.data import DatasetLoadError

    logging.basicConfig(level=logging.INFO, format="[%(name)s] %(message)s")
    if not torch.cuda.is_available():
        torch.set_num_threads(int(os.environ.get("QERL_CPU_THREADS", "1")))  # 1 thread: fastest on small CPUs
    try:
        (args,) = TrlParser((QeRLConfig,)).parse_args_and_config(argv)
        run(args)
    except (UserError, ValueError, FileNotFoundError, DatasetLoadError) as exc:
        # Bad input (config, paths, data): one line naming the fix, no traceback.
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

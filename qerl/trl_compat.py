"""The few trl internals qerl's trainer relies on, in one place (tests/test_trl_compat.py fails if trl moves them).

1. ``GRPOTrainer._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, ...)`` returning
   ``(completion_ids, logprobs)``: the one method qerl overrides to route generation to its rollout backends
   (transformers or a colocated vLLM with the live adapter and AQN), instead of trl's vLLM path, whose weight sync
   merges LoRA into the base (wrong for a 4-bit base).
2. trl computes the training-side logprobs of rollouts, the rollout/training mismatch metrics and the truncated
   importance-sampling ratio only when its ``use_vllm`` and ``vllm_importance_sampling_correction`` attributes are
   set; qerl's backends return sampling logprobs too, so ``route_sampling_logprobs`` sets them after construction
   (trl itself is constructed with ``use_vllm=False`` so it starts no engine of its own).
"""

from __future__ import annotations

import inspect

from trl import GRPOTrainer

GENERATE_HOOK = "_generate_single_turn"
GENERATE_PARAMS = ("prompt_ids", "images", "multimodal_fields", "num_generations")
IS_GATE = "self.use_vllm and self.vllm_importance_sampling_correction"


def check_trl_internals() -> None:
    """Raise RuntimeError naming what moved if trl no longer has the hooks above."""
    hook = getattr(GRPOTrainer, GENERATE_HOOK, None)
    if hook is None:
        raise RuntimeError(f"trl.GRPOTrainer.{GENERATE_HOOK} is gone: qerl's rollout override needs updating")
    params = tuple(inspect.signature(hook).parameters)[1 : 1 + len(GENERATE_PARAMS)]
    if params != GENERATE_PARAMS:
        raise RuntimeError(f"trl.GRPOTrainer.{GENERATE_HOOK} takes {params}, qerl expects {GENERATE_PARAMS}")
    source = inspect.getsource(GRPOTrainer)
    for needle in (IS_GATE, '"importance_sampling_ratio"', "sampling_per_token_logps"):
        if needle not in source:
            raise RuntimeError(f"trl.GRPOTrainer no longer contains {needle!r}: qerl's IS routing needs updating")


def route_sampling_logprobs(trainer: GRPOTrainer, mode: str, cap: float) -> None:
    """Make trl score rollouts with the training model, log the mismatch and compute the truncated IS ratio."""
    trainer.use_vllm = True
    trainer.vllm_importance_sampling_correction = True
    trainer.vllm_importance_sampling_mode = mode
    trainer.vllm_importance_sampling_clip_max = cap
    trainer.vllm_importance_sampling_clip_min = None if "truncate" in mode else 1.0 / cap

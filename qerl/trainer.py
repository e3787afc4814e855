"""QeRLTrainer: trl's GRPOTrainer with qerl's rollout backends, AQN, DAPO dynamic sampling and atomic checkpoints.

Everything else (advantages, clipped token-level losses, KL, logging, optimizer, schedules) is trl's.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
from typing import Any

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints
from trl import GRPOTrainer

from qerl import lora, trl_compat
from qerl.aqn import AQNController
from qerl.config import QeRLConfig
from qerl.rewards import reward_failure_counts
from qerl.rollout.base import RolloutBackend, SamplingSettings

log = logging.getLogger(__name__)
AQN_STATE_FILE = "aqn_state.pt"


class QeRLTrainer(GRPOTrainer):
    def __init__(
        self,
        model,
        args: QeRLConfig,
        backend: RolloutBackend,
        aqn: AQNController | None = None,
        norm_param_names: list[str] | None = None,
        **kwargs,
    ) -> None:
        trl_compat.check_trl_internals()
        super().__init__(model=model, args=args, **kwargs)
        self.backend = backend
        self.aqn = aqn
        self.norm_param_names = norm_param_names or []
        self._synced_step = -1
        if args.rollout_is_correction or args.log_logprob_mismatch:
            trl_compat.route_sampling_logprobs(self, args.rollout_is_mode, args.rollout_is_cap)
        self._resample_rng = random.Random(args.seed)

    # ---- rollout ---------------------------------------------------------------------------------------------
    def sampling_settings(self) -> SamplingSettings:
        a = self.args
        return SamplingSettings(
            max_new_tokens=a.max_completion_length,
            temperature=a.temperature,
            top_p=a.top_p,
            top_k=a.top_k or 0,
            min_p=a.min_p or 0.0,
            repetition_penalty=a.repetition_penalty,
        )

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if images is not None or multimodal_fields:
            raise ValueError("qerl rollout backends generate text only")
        if self.state.global_step != self._synced_step:
            self.backend.sync_policy(self.model)
            self._synced_step = self.state.global_step
        result = self.backend.generate(prompt_ids, self.sampling_settings())
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["rollout/tokens_per_second"].append(result.tokens_per_second)
        if result.noise is not None:
            self._metrics[mode]["aqn/sigma"].append(result.noise.sigma)
            self._metrics[mode]["aqn/modules"].append(float(result.noise.num_modules))
            self._metrics[mode]["aqn/effective_sigma"].append(result.noise.effective_sigma)
        return result.completion_ids, result.logprobs

    # ---- scoring: IS neutralisation and DAPO dynamic sampling ------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        out = super()._generate_and_score_completions(inputs)
        out = self._neutralise_is(out)
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["rewards/failures_total"].append(float(sum(reward_failure_counts().values())))
        if not self.args.dynamic_sampling or not self.model.training:
            return out
        g = self.num_generations
        n_rows = len(inputs)
        keep = informative_groups(out["advantages"], g)
        kept = [(out, group_rows(keep, g))]
        have, rounds = int(keep.sum()) * g, 0
        while not self._all_processes_full(have >= n_rows) and rounds < self.args.dynamic_sampling_max_rounds:
            rounds += 1
            more = self._neutralise_is(super()._generate_and_score_completions(self._draw_groups(n_rows // g)))
            rows = group_rows(informative_groups(more["advantages"], g), g)
            kept.append((more, rows))
            have += len(rows)
        self._metrics["train"]["dynamic_sampling/informative_fraction"].append(float(keep.float().mean()))
        self._metrics["train"]["dynamic_sampling/resample_rounds"].append(float(rounds))
        # Keep the batch size fixed: informative groups first; if still short after the allowed rounds, the
        # first batch's uninformative groups fill up (zero advantage, so they add no gradient).
        parts, need = [], n_rows
        for batch, rows in kept:
            if rows[:need]:
                parts.append((batch, rows[:need]))
                need -= len(rows[:need])
        if need > 0:
            informative = set(kept[0][1])
            parts.append((out, [r for r in range(n_rows) if r not in informative][:need]))
        merged = merge_batches(parts, self.processing_class.pad_token_id)
        loss_mask = merged["completion_mask"] * merged.get("tool_mask", 1)
        merged["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return merged

    def _all_processes_full(self, full: bool) -> bool:
        # Every process must take the same number of extra rounds: scoring gathers rewards across processes.
        flag = torch.tensor([float(full)], device=self.accelerator.device)
        return bool(self.accelerator.gather(flag).min() > 0)

    def _neutralise_is(self, out: dict[str, Any]) -> dict[str, Any]:
        # The mismatch is always measured when log_logprob_mismatch is on; the loss is reweighted only when the
        # correction is requested (the paper-faithful presets leave it off).
        if "importance_sampling_ratio" in out and not self.args.rollout_is_correction:
            out["importance_sampling_ratio"] = torch.ones_like(out["importance_sampling_ratio"])
        return out

    def _draw_groups(self, n_groups: int) -> list[dict[str, Any]]:
        ds = self.train_dataset
        rows = [ds[self._resample_rng.randrange(len(ds))] for _ in range(n_groups)]
        return [dict(r) for r in rows for _ in range(self.num_generations)]

    # ---- checkpoints -------------------------------------------------------------------------------------------
    def _get_output_dir(self, trial) -> str:
        staging = getattr(self, "_staging_dir", None)
        return staging if staging is not None else super()._get_output_dir(trial)

    def _save_checkpoint(self, model, trial) -> None:
        """Write the checkpoint under a staging directory, add qerl's state, then publish it with one rename: a
        run killed mid-save leaves the previous checkpoint as the latest complete one."""
        run_dir = super()._get_output_dir(trial)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        self._staging_dir = os.path.join(run_dir, ".staging")
        shutil.rmtree(self._staging_dir, ignore_errors=True)
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._staging_dir = None
        staged = os.path.join(run_dir, ".staging", name)
        if self.args.should_save:
            self._save_qerl_state(staged)
            final = os.path.join(run_dir, name)
            if os.path.exists(final):
                shutil.rmtree(final)
            os.replace(staged, final)
            shutil.rmtree(os.path.join(run_dir, ".staging"), ignore_errors=True)
            rotate_checkpoints(output_dir=run_dir, save_total_limit=self.args.save_total_limit,
                               best_model_checkpoint=self.state.best_model_checkpoint, use_mtime=False)

    def _save_qerl_state(self, directory: str) -> None:
        if self.norm_param_names:
            lora.save_norms(self.model, directory, self.norm_param_names)
        if self.backend.injector is not None:
            torch.save({str(d): g.get_state() for d, g in self.backend.injector.generator.items()},
                       os.path.join(directory, AQN_STATE_FILE))
        with open(os.path.join(directory, "qerl_run.json"), "w") as f:
            json.dump({"backend": self.backend.name, "aqn": None if self.aqn is None else vars(self.aqn.config)},
                      f, default=str, indent=1)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        super().save_model(output_dir, _internal_call)
        if self.norm_param_names and self.args.should_save:
            lora.save_norms(self.model, output_dir or self.args.output_dir, self.norm_param_names)

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        lora.load_norms(self.model, resume_from_checkpoint)
        path = os.path.join(resume_from_checkpoint, AQN_STATE_FILE)
        if os.path.exists(path) and self.backend.injector is not None:
            for device, state in torch.load(path, weights_only=True).items():
                self.backend.injector._gen(torch.device(device)).set_state(state)
        if self.backend.injector is not None:
            self.backend.injector.resync_master()


def informative_groups(advantages: torch.Tensor, group_size: int) -> torch.Tensor:
    """Groups whose rewards are not all equal (all-equal rewards give exactly zero advantages)."""
    return advantages.view(-1, group_size).abs().sum(dim=1) > 0


def group_rows(keep: torch.Tensor, group_size: int) -> list[int]:
    return [int(i) * group_size + j for i in torch.nonzero(keep).flatten() for j in range(group_size)]


_LEFT_PADDED = ("prompt_ids", "prompt_mask")


def merge_batches(parts: list[tuple[dict[str, Any], list[int]]], pad_token_id: int) -> dict[str, Any]:
    """Concatenate selected rows of several scored batches, re-padding sequence tensors to a common width
    (prompts left-padded, completion-aligned tensors right-padded). ``num_items_in_batch`` is left to the caller."""
    merged: dict[str, Any] = {}
    for key, first in parts[0][0].items():
        if key == "num_items_in_batch":
            continue
        if not isinstance(first, torch.Tensor) or first.dim() == 0:
            merged[key] = first
            continue
        chunks = [batch[key][rows] for batch, rows in parts]
        per_token = first.dim() >= 2 and not (key == "importance_sampling_ratio" and first.shape[-1] == 1)
        if per_token:
            width = max(c.shape[1] for c in chunks)
            pad_value = pad_token_id if key in ("prompt_ids", "completion_ids") else 0
            if key == "importance_sampling_ratio":
                pad_value = 1.0
            left = key in _LEFT_PADDED
            chunks = [_pad_to(c, width, pad_value, left) for c in chunks]
        merged[key] = torch.cat(chunks, dim=0)
    return merged


def _pad_to(t: torch.Tensor, width: int, value: float, left: bool) -> torch.Tensor:
    extra = width - t.shape[1]
    if extra == 0:
        return t
    pad = torch.full((t.shape[0], extra, *t.shape[2:]), value, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t] if left else [t, pad], dim=1)

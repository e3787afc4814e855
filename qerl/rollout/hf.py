"""Rollouts with transformers' ``generate`` on the training model itself (CPU, tests, small GPU runs).

The policy that generates is the trained model, so the adapter is always current; AQN noise is written into its
norm weights for the duration of ``generate`` and the clean weights are restored before the gradient step.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from qerl.aqn import keep_norms_fp32
from qerl.modules import dense_weight_cache
from qerl.rollout.base import RolloutBackend, RolloutResult, SamplingSettings


class HFRolloutBackend(RolloutBackend):
    name = "hf"

    def __init__(self, model: nn.Module, tokenizer, eos_token_ids: list[int] | None = None, batch_size: int = 0):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.eos_token_ids = eos_token_ids or [tokenizer.eos_token_id]
        self.batch_size = batch_size  # 0: all prompts in one generate call

    def generating_model(self) -> nn.Module:
        return self.model

    def attach_aqn(self, controller, patterns, seed: int = 0) -> None:
        super().attach_aqn(controller, patterns, seed)
        keep_norms_fp32(self.injector.modules)
        self.injector.resync_master()

    def sync_policy(self, policy: nn.Module) -> None:
        # Same module as the trainer's: nothing to push. Norms may have been trained since the last round.
        if self.injector is not None and not self.injector.noised:
            self.injector.resync_master()

    @torch.no_grad()
    def generate(self, prompt_ids: list[list[int]], sampling: SamplingSettings) -> RolloutResult:
        noise = None
        if self.injector is not None and self.aqn is not None:
            noise = self.injector.perturb(self.aqn.sigma)
            self.aqn.last = noise
        start = time.perf_counter()
        try:
            step = self.batch_size or len(prompt_ids)
            completions, logprobs = [], []
            for i in range(0, len(prompt_ids), step):
                c, lp = self._generate_batch(prompt_ids[i : i + step], sampling)
                completions += c
                logprobs += lp
        finally:
            if self.injector is not None and not (self.aqn and self.aqn.config.noise_training_forward):
                self.injector.restore()
        seconds = time.perf_counter() - start
        return RolloutResult(completions, logprobs, sum(map(len, completions)), seconds, noise)

    def _generate_batch(self, prompt_ids: list[list[int]], s: SamplingSettings):
        device = next(p.device for p in self.model.parameters())
        width = max(map(len, prompt_ids))
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompt_ids], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompt_ids], device=device)
        if s.seed is not None:
            torch.manual_seed(s.seed)
        do_sample = s.temperature > 0
        kwargs = dict(
            max_new_tokens=s.max_new_tokens,
            do_sample=do_sample,
            pad_token_id=pad,
            eos_token_id=self.eos_token_ids,
            return_dict_in_generate=True,
            output_logits=True,
        )
        if do_sample:
            kwargs.update(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k or None, min_p=s.min_p or None)
        if s.repetition_penalty != 1.0:
            kwargs["repetition_penalty"] = s.repetition_penalty
        was_training = self.model.training
        self.model.eval()
        try:
            # Without the fused CUDA kernels, decode would dequantize every packed weight once per token.
            if device.type == "cuda":
                out = self.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
            else:
                with dense_weight_cache(self.model):
                    out = self.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        finally:
            self.model.train(was_training)
        new = out.sequences[:, width:]
        # Raw logits scaled by the temperature: the same distribution the trainer scores the tokens under.
        logits = torch.stack(out.logits, dim=1).float() / (s.temperature if do_sample else 1.0)
        token_logps = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        completions, logprobs = [], []
        for row, lps in zip(new.tolist(), token_logps.tolist()):
            end = len(row)
            for j, t in enumerate(row):
                if t in self.eos_token_ids:
                    end = j + 1
                    break
            completions.append(row[:end])
            logprobs.append(lps[:end])
        return completions, logprobs

"""Rollouts with transformers on the training model itself (CPU, tests, GPU runs without vLLM).

The policy that generates is the trained model, so the adapter is always current; AQN noise is written into its
norm weights for the duration of a call and the clean weights are restored before the gradient step.

On CUDA the batch decodes on a static KV cache in the project's own loop (``qerl.rollout.static_decode``: the
one-token step compiled and replayed as one CUDA graph, no host synchronisation per token), for Qwen2 / Llama-family
models with the project's own decode step (``qerl.rollout.decode_step``: fused q/k/v and gate/up products, the
project's decode attention); elsewhere, and with ``static_cache=False``, transformers' ``generate`` on a dynamic
cache. Both sample alike (a seed gives the same tokens).
"""

from __future__ import annotations

import time
from contextlib import nullcontext

import torch
from torch import nn

from qerl.aqn import keep_norms_fp32
from qerl.modules import dense_weight_cache, kernels_available
from qerl.rollout.base import RolloutBackend, RolloutResult, SamplingSettings
from qerl.rollout.decode_step import DECODE_LAYOUTS, unsupported_reason
from qerl.rollout.static_decode import StaticDecoder


class HFRolloutBackend(RolloutBackend):
    name = "hf"

    def __init__(self, model: nn.Module, tokenizer, eos_token_ids: list[int] | None = None, batch_size: int = 0,
                 static_cache: bool | None = None, compile: bool | None = None, fused_step: bool | None = None,
                 decode_layout: str = "auto", adapter_a_copies: bool | None = None):
        """``static_cache``: decode on a static KV cache in ``StaticDecoder``'s loop (default: on CUDA).
        ``compile``: compile its decode step into CUDA graphs (default: with the static cache on CUDA; needs both).
        ``fused_step``: that step is the project's ``DecodeStep`` instead of the model's forward (default: where it
        compiles and the model is of a family it supports; needs the static cache). ``decode_layout``: the code
        layout that step's NVFP4 products read (``DecodeStep``'s ``layout``: "pairs" the modules' own, "words" a
        copy, "auto" words on a Hopper GPU where the copy fits). ``adapter_a_copies``: that step's shrinks read bf16
        copies of the adapter's A (``DecodeStep``'s ``a_copies``; default on, False: A itself)."""
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.eos_token_ids = eos_token_ids or [tokenizer.eos_token_id]
        self.batch_size = batch_size  # 0: all prompts in one generate call
        if (compile or fused_step) and static_cache is False:
            raise ValueError("compile=True and fused_step=True need the static KV cache: leave static_cache unset or "
                             "pass True")
        if decode_layout not in DECODE_LAYOUTS:
            raise ValueError(f"decode_layout {decode_layout!r}: use one of {DECODE_LAYOUTS}")
        if decode_layout != "auto" and fused_step is False:
            raise ValueError(f"decode_layout {decode_layout!r} is read by the fused decode step: leave fused_step "
                             "unset or pass True, or leave decode_layout at 'auto'")
        if adapter_a_copies and fused_step is False:
            raise ValueError("adapter_a_copies=True is read by the fused decode step: leave fused_step unset or pass "
                             "True, or leave adapter_a_copies unset")
        if fused_step:
            reason = unsupported_reason(model)
            if reason is not None:
                raise ValueError(f"fused_step=True: the project's decode step does not support this model ({reason}); "
                                 "leave fused_step unset to decode with the model's own forward")
        self.static_cache = static_cache
        self.compile = compile
        self.fused_step = fused_step
        self.decode_layout = decode_layout
        self.adapter_a_copies = adapter_a_copies
        self.decoder: StaticDecoder | None = None  # made at the first static-cache call

    def generating_model(self) -> nn.Module:
        return self.model

    def attach_aqn(self, controller, patterns, seed: int = 0) -> None:
        super().attach_aqn(controller, patterns, seed)
        keep_norms_fp32(self.injector.modules)  # new fp32 tensors: a step captured before would read the old ones
        if self.decoder is not None:
            self.decoder.reset_graphs()
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
        decoder = self._static_decoder(device)
        if s.seed is not None:
            torch.manual_seed(s.seed)
        was_training = self.model.training
        self.model.eval()
        try:
            # Without the fused CUDA kernels, decode would dequantize every packed weight once per token.
            with nullcontext() if device.type == "cuda" else dense_weight_cache(self.model):
                if decoder is not None:
                    new, token_logps = decoder.generate(ids, mask, s, self.eos_token_ids, pad)
                else:
                    new, token_logps = self._hf_generate(ids, mask, s)
        finally:
            self.model.train(was_training)
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

    def _hf_generate(self, ids: torch.Tensor, mask: torch.Tensor, s: SamplingSettings):
        """transformers' ``generate`` on a dynamic cache: (new tokens, their log-probabilities)."""
        do_sample = s.temperature > 0
        kwargs = dict(
            max_new_tokens=s.max_new_tokens,
            do_sample=do_sample,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.eos_token_ids,
            return_dict_in_generate=True,
            output_logits=True,
            disable_compile=True,
        )
        if do_sample:
            kwargs.update(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k or None, min_p=s.min_p or None)
        if s.repetition_penalty != 1.0:
            kwargs["repetition_penalty"] = s.repetition_penalty
        out = self.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        new = out.sequences[:, ids.shape[1]:]
        # Raw logits scaled by the temperature: the same distribution the trainer scores the tokens under.
        logits = torch.stack(out.logits, dim=1).float() / (s.temperature if do_sample else 1.0)
        return new, torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)

    def _static_decoder(self, device: torch.device) -> StaticDecoder | None:
        """The static-cache decoder this device uses (made once), or None for ``generate`` on a dynamic cache."""
        cuda = device.type == "cuda"
        static = self.static_cache if self.static_cache is not None else cuda or bool(self.fused_step)
        compile = self.compile if self.compile is not None else static and cuda
        if compile and not cuda:
            raise ValueError("compile=True compiles the decode step into CUDA graphs: it needs the model on CUDA "
                             "(leave compile unset on CPU)")
        if not static:
            return None
        if self.decoder is None:
            if compile and kernels_available(device):
                from qerl.kernels import reserve_split_counters

                reserve_split_counters(device)  # room for every launch of the captured step: a capture cannot grow them
            fused = self.fused_step
            if fused is None:
                fused = compile and unsupported_reason(self.model) is None
            self.decoder = StaticDecoder(self.model, compile=compile, fused_step=fused, decode_layout=self.decode_layout,
                                         a_copies=self.adapter_a_copies)
        return self.decoder

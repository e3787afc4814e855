"""Rollouts with transformers' ``generate`` on the training model itself (CPU, tests, GPU runs without vLLM).

The policy that generates is the trained model, so the adapter is always current; AQN noise is written into its
norm weights for the duration of ``generate`` and the clean weights are restored before the gradient step.

On CUDA the decode steps run on a static KV cache with the forward compiled into CUDA graphs (transformers'
``CompileConfig``, mode "reduce-overhead"): a decode step of a small batch is otherwise bound by kernel launches,
which hides what the NVFP4 kernels save. The graphs read the norm weights and adapter tensors where they live, so
AQN noise written in place and a trained adapter reach them without recompiling. The cache's length is rounded up
to ``CACHE_BUCKET`` and kept between calls, so prompts of similar width share one compiled step.
"""

from __future__ import annotations

import time

import torch
from torch import nn
from transformers import StaticCache
from transformers.generation import CompileConfig

from qerl.aqn import keep_norms_fp32
from qerl.modules import dense_weight_cache, kernels_available
from qerl.rollout.base import RolloutBackend, RolloutResult, SamplingSettings

CACHE_BUCKET = 256  # static KV cache lengths are multiples of this
COMPILE = CompileConfig(mode="reduce-overhead")  # one object: transformers recompiles when the config changes


class HFRolloutBackend(RolloutBackend):
    name = "hf"

    def __init__(self, model: nn.Module, tokenizer, eos_token_ids: list[int] | None = None, batch_size: int = 0,
                 static_cache: bool | None = None, compile: bool | None = None):
        """``static_cache``: decode on a static KV cache (default: on CUDA). ``compile``: compile the decode step
        into CUDA graphs (default: with the static cache on CUDA; needs both)."""
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.eos_token_ids = eos_token_ids or [tokenizer.eos_token_id]
        self.batch_size = batch_size  # 0: all prompts in one generate call
        if compile and static_cache is False:
            raise ValueError("compile=True needs the static KV cache: leave static_cache unset or pass True")
        self.static_cache = static_cache
        self.compile = compile
        self._cache: StaticCache | None = None
        self._cache_shape: tuple[int, int] = (0, 0)  # (batch, length) of self._cache

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
        kwargs.update(self._cache_kwargs(device, len(prompt_ids), width + s.max_new_tokens))
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

    def _cache_kwargs(self, device: torch.device, batch: int, length: int) -> dict:
        """``generate`` arguments for the KV cache and compilation of one batch of ``batch`` rows that may reach
        ``length`` tokens."""
        cuda = device.type == "cuda"
        static = self.static_cache if self.static_cache is not None else cuda
        compile = self.compile if self.compile is not None else static and cuda
        if compile and not cuda:
            raise ValueError("compile=True compiles the decode step into CUDA graphs: it needs the model on CUDA "
                             "(leave compile unset on CPU)")
        if not static:
            return {"disable_compile": True}
        if compile and kernels_available(device):
            from qerl.kernels import reserve_split_counters

            reserve_split_counters(device)  # before the graphs' warm-up runs allocate from their pool
        return {"past_key_values": self.static_kv_cache(batch, length),
                **({"compile_config": COMPILE} if compile else {"disable_compile": True})}

    def static_kv_cache(self, batch: int, length: int) -> StaticCache:
        """The static cache for ``batch`` rows of up to ``length`` tokens, emptied: the one of the last call where it
        fits (same batch, at least as long: the compiled step and its graphs stay valid), else a new one of
        ``length`` rounded up to ``CACHE_BUCKET``."""
        held_batch, held_length = self._cache_shape
        if self._cache is None or held_batch != batch or held_length < length:
            self._cache = None  # free the old one before allocating
            length = -(-length // CACHE_BUCKET) * CACHE_BUCKET
            self._cache = StaticCache(config=self.model.config, max_cache_len=length)
            self._cache_shape = (batch, length)
        else:
            self._cache.reset()
        return self._cache

"""The transformers backend's decode loop on a static KV cache: on CUDA one CUDA graph per decode step, and no host
synchronisation per token.

transformers' ``generate`` reads ``unfinished_sequences.max()`` on the host after every token (on CUDA it does not
defer that check), so the host waits for each step to finish before it queues the next one, and its own work per
step (sampling, the compiled call's guards and graph launch) adds to the GPU's time instead of overlapping it. This
loop keeps the tokens, the finished flags and each token's log-probability on the GPU and reads the flags on the
host every ``STOP_CHECK_EVERY`` tokens. It calls the model's public forward with a ``StaticCache`` and samples with
transformers' public logits processors in ``generate``'s order and with its softmax + multinomial, so a seed gives
the tokens ``generate`` gives.

With ``compile``, the one-token step is compiled by torch.compile (inductor fuses the work between the projections)
and captured once per batch size and cache length into a plain CUDA graph, which each step replays after copying
its token, position and cache position into the graph's input buffers: no guards, no Python per module, one launch.
The graph reads the weights where they live, so values changed in place (AQN noise, the adapter's training) are
used; a weight replaced by a new tensor is not (``reset_graphs`` drops the graphs).

With ``fused_step`` the decode step is not the model's forward but ``qerl.rollout.decode_step.DecodeStep`` over the
same modules and the same cache tensors (one product per q/k/v and gate/up group, attention over the filled part of
the cache from each row's first prompt token); the prefill stays the model's forward.

The prefill computes the logits of each row's last position only (``logits_to_keep``: the LM head over every prompt
position would be the largest product of the call), and a prompt that appears in several rows (GRPO's group of
completions per prompt) is prefilled once: the distinct prompts run on a cache of their own, whose keys and values are
then written into every row of the static cache that holds that prompt, through the cache's public ``update``. With
``compile`` that prefill is the model's forward captured as a CUDA graph per (distinct prompts, width), the width
left-padded to a multiple of ``PREFILL_BUCKET``: eager, the host's launches took several times the GPU's time.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn
from transformers import DynamicCache, StaticCache
from transformers.generation.logits_process import (
    LogitsProcessorList,
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from qerl.kernels.graphs import warm_and_capture
from qerl.rollout.base import SamplingSettings
from qerl.rollout.decode_step import DecodeStep

CACHE_BUCKET = 256  # static KV cache lengths are multiples of this
PREFILL_BUCKET = 32  # prompts are left-padded to a multiple of this many positions: one captured prefill per width
PREFILL_GRAPHS = 4  # captured prefills kept (one memory pool for their activations, as large as the largest's)
STOP_CHECK_EVERY = 16  # tokens between the host's looks at the finished flags


def logits_processors(s: SamplingSettings) -> LogitsProcessorList:
    """What ``generate`` applies to the logits for ``s``, in its order: the repetition penalty, then (sampling only)
    temperature, top-k, top-p, min-p. Only the settings in ``s``: no defaults from a model's generation config."""
    procs = LogitsProcessorList()
    if s.repetition_penalty != 1.0:
        procs.append(RepetitionPenaltyLogitsProcessor(penalty=s.repetition_penalty))
    if s.temperature > 0:
        if s.temperature != 1.0:
            procs.append(TemperatureLogitsWarper(s.temperature))
        if s.top_k:
            procs.append(TopKLogitsWarper(top_k=s.top_k))
        if s.top_p < 1.0:
            procs.append(TopPLogitsWarper(top_p=s.top_p))
        if s.min_p:
            procs.append(MinPLogitsWarper(min_p=s.min_p))
    return procs


class StaticDecoder:
    """Generates from left-padded prompts on a static KV cache kept between calls. ``compile``: the one-token decode
    step compiled and replayed as a CUDA graph (CUDA only); ``fused_step``: that step is ``DecodeStep`` (Qwen2 /
    Llama families; see the module docstring), reading NVFP4 codes in ``decode_layout`` (its ``layout``), its shrink
    shrinks on bf16 copies of the adapter's A unless ``a_copies`` is False."""

    # The prefill: only the last position's logits, and each distinct prompt once (see the module docstring). Off
    # only to measure what they save (benchmarks/rollout_hf.py --prefill-compare).
    last_logits_only = True
    share_prompt_prefill = True
    capture_prefill = True  # with ``compile``: the prefill as a CUDA graph per (distinct prompts, padded width)

    def __init__(self, model: nn.Module, compile: bool = False, fused_step: bool = False,
                 decode_layout: str = "auto", a_copies: bool | None = None) -> None:
        # peft injects its LoRA layers into the transformers model's modules: calling that model directly runs them,
        # without peft's wrapper forward in the compiled step.
        self.model = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.compile = compile
        self.fused_step = fused_step
        self.decode_layout = decode_layout  # the fused step's code layout (``DecodeStep``'s ``layout``)
        self.a_copies = a_copies  # the fused step's shrinks on bf16 copies of A (``DecodeStep``'s ``a_copies``)
        step = self._fused_decode_step if fused_step else self._decode_step
        self._step = torch.compile(step, dynamic=False) if compile else step
        self._fused: DecodeStep | None = None  # made at the first fused step (it reads the adapter configuration)
        self._cache: StaticCache | None = None
        self._cache_shape: tuple[int, int] = (0, 0)  # (batch, length) of self._cache
        self._mask: torch.Tensor | None = None  # [batch, length]: the attention mask of the current call
        self._starts: torch.Tensor | None = None  # [batch]: each row's first prompt position (its pad count)
        self._rope: tuple[torch.Tensor, torch.Tensor] | None = None  # the fused step's cos / sin tables
        self._graph: _StepGraph | None = None  # the captured step for self._cache
        self._prefills: dict[tuple[int, int], _PrefillGraph] = {}  # captured prefills by (rows, width)
        # One memory pool for all of them: their activations take the largest one's memory, not the sum. Safe as
        # they run one at a time and the caller copies each one's outputs before the next replay.
        self._prefill_pool = None

    def reset_graphs(self) -> None:
        """Drop the captured step (the next call captures it anew), e.g. after weights were replaced by new tensors
        or adapters were added or switched."""
        self._graph = None
        self._fused = None
        self._prefills = {}
        self._prefill_pool = None

    def static_kv_cache(self, batch: int, length: int) -> StaticCache:
        """The cache for ``batch`` rows of up to ``length`` tokens, emptied: the one of the last call where it fits
        (same batch, at least as long: the compiled step and its graphs stay valid), else a new one of ``length``
        rounded up to ``CACHE_BUCKET``."""
        held_batch, held_length = self._cache_shape
        if self._cache is None or held_batch != batch or held_length < length:
            self._cache = self._graph = self._mask = None  # free the old ones before allocating
            length = -(-length // CACHE_BUCKET) * CACHE_BUCKET
            self._cache = StaticCache(config=self.model.config, max_cache_len=length)
            self._cache_shape = (batch, length)
            self._mask = torch.ones(batch, length, dtype=torch.long, device=self.model.device)
            self._starts = torch.zeros(batch, dtype=torch.long, device=self.model.device)
            self._rope = None
        else:
            self._cache.reset()
        return self._cache

    def _decode_step(self, ids: torch.Tensor, position_ids: torch.Tensor, cache_position: torch.Tensor,
                     mask: torch.Tensor, cache: StaticCache) -> torch.Tensor:
        out = self.model(input_ids=ids, position_ids=position_ids, cache_position=cache_position, attention_mask=mask,
                         past_key_values=cache, use_cache=True)
        return out.logits[:, -1].float()

    def _fused_decode_step(self, ids: torch.Tensor, position_ids: torch.Tensor, cache_position: torch.Tensor,
                           mask: torch.Tensor, cache: StaticCache) -> torch.Tensor:
        # The cache's own tensors (the prefill allocated them): DecodeStep writes the new k / v there itself.
        caches = [(layer.keys, layer.values) for layer in cache.layers]
        cos, sin = self._rope
        return self._fused(ids[:, 0], position_ids[:, 0], cache_position, self._starts, caches, cos, sin)

    def _prepare_fused(self) -> None:
        if self._fused is None:
            self._fused = DecodeStep(self.model, self.decode_layout, a_copies=self.a_copies)
        if self._rope is None:
            embed = self.model.get_input_embeddings().weight
            self._rope = self._fused.rope_tables(self._cache_shape[1], embed.device, embed.dtype)

    @torch.no_grad()
    def generate(self, ids: torch.Tensor, prompt_mask: torch.Tensor, s: SamplingSettings, eos_token_ids: list[int],
                 pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(tokens, logprobs)``, both [B, n <= s.max_new_tokens], for left-padded prompts ``ids`` [B, W] whose
        ``prompt_mask`` marks the real tokens. After a row's first EOS its tokens are ``pad_token_id`` (as
        ``generate``'s). ``logprobs``: each token's log-probability under the temperature-scaled raw logits (the
        distribution the trainer scores tokens under), fp32."""
        given = ids  # what generate's repetition penalty sees: without the padding added here
        padding = -ids.shape[1] % PREFILL_BUCKET  # more left padding: a captured prefill per width bucket
        ids = nn.functional.pad(ids, (padding, 0), value=pad_token_id)
        prompt_mask = nn.functional.pad(prompt_mask, (padding, 0), value=0)
        batch, width = ids.shape
        cache = self.static_kv_cache(batch, width + s.max_new_tokens)
        device = ids.device
        # One mask for every step: the prompt's padding masked, every later position open (the causal mask and the
        # cache position keep each query from what is not written yet). A fixed shape, so one compiled graph.
        mask = self._mask  # the same tensor every call on this cache: the captured step reads it
        mask.fill_(1)
        mask[:, :width] = prompt_mask
        position_ids = (prompt_mask.long().cumsum(-1) - 1).clamp_(min=0)  # as generate: pads at position 0
        if self.fused_step:
            # Before the prefill: building the step moves q / k / v and gate / up into one allocation per group
            # (``qerl.fusion``), and a prefill captured earlier would read the weights where they were.
            self._prepare_fused()
            self._fused.refresh_adapters()  # its copies of the adapter's B (if any) as the adapter is now
            self._starts.copy_((prompt_mask == 0).sum(-1))  # left padding: a row's pads come first
        logits = self._prefill(ids, prompt_mask, mask, position_ids, cache)
        next_position = position_ids[:, -1:] + 1
        procs = logits_processors(s)
        sample = s.temperature > 0
        scale = s.temperature if sample else 1.0
        eos = torch.tensor(eos_token_ids, device=device)
        pad = torch.full((batch,), pad_token_id, device=device, dtype=torch.long)
        unfinished = torch.ones(batch, dtype=torch.bool, device=device)
        tokens = torch.full((batch, s.max_new_tokens), pad_token_id, dtype=torch.long, device=device)
        logprobs = torch.zeros(batch, s.max_new_tokens, dtype=torch.float32, device=device)
        steps = s.max_new_tokens
        for t in range(s.max_new_tokens):
            # The sequence so far, as generate hands it to the processors (only the repetition penalty reads it).
            seen = torch.cat([given, tokens[:, :t]], dim=1) if s.repetition_penalty != 1.0 else given
            scores = procs(seen, logits) if procs else logits
            token = torch.multinomial(torch.softmax(scores, dim=-1), 1).squeeze(1) if sample else scores.argmax(-1)
            logprobs[:, t] = torch.log_softmax(logits / scale, dim=-1).gather(-1, token[:, None]).squeeze(1)
            token = torch.where(unfinished, token, pad)
            tokens[:, t] = token
            unfinished &= ~torch.isin(token, eos)
            if t + 1 == s.max_new_tokens or ((t + 1) % STOP_CHECK_EVERY == 0 and not bool(unfinished.any())):
                steps = t + 1
                break
            if self.compile:
                if self._graph is None:
                    self._graph = _StepGraph(self._step, mask, cache, batch)
                logits = self._graph.run(token, next_position, width + t)
            else:
                cache_position = torch.full((1,), width + t, dtype=torch.long, device=device)
                logits = self._step(token[:, None], next_position, cache_position, mask, cache)
            next_position = next_position + 1
        return tokens[:, :steps], logprobs[:, :steps]

    def _prefill(self, ids: torch.Tensor, prompt_mask: torch.Tensor, mask: torch.Tensor, position_ids: torch.Tensor,
                 cache: StaticCache) -> torch.Tensor:
        """Run the prompts ``ids`` [B, W] into ``cache`` (positions 0 .. W - 1; ``mask``: the cache's attention mask):
        fp32 logits [B, V] of each row's last position. Rows with the same prompt share one forward
        (``share_prompt_prefill``); with ``compile`` that forward is a captured CUDA graph (``capture_prefill``)."""
        width = ids.shape[1]
        keep = {"logits_to_keep": 1} if self.last_logits_only and _takes_logits_to_keep(self.model) else {}
        if self.share_prompt_prefill:
            firsts, inverse = _distinct_rows(torch.cat([ids, prompt_mask.to(ids.dtype)], dim=1))
        else:
            firsts = inverse = torch.arange(len(ids), device=ids.device)
        if self.compile and self.capture_prefill:
            graph = self._prefill_graph(len(firsts), width, keep)
            logits, layers = graph.run(ids[firsts], prompt_mask[firsts], position_ids[firsts])
        elif len(firsts) < len(inverse):
            shared = DynamicCache(config=self.model.config)
            out = self.model(input_ids=ids[firsts], attention_mask=prompt_mask[firsts],
                             position_ids=position_ids[firsts], past_key_values=shared, use_cache=True, **keep)
            logits, layers = out.logits[:, -1].float(), [(layer.keys, layer.values) for layer in shared.layers]
        else:  # every row its own prompt, uncaptured: straight into the cache
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=position_ids,
                             cache_position=torch.arange(width, device=ids.device), past_key_values=cache,
                             use_cache=True, **keep)
            return out.logits[:, -1].float()
        for i, (keys, values) in enumerate(layers):  # each distinct prompt's k / v into all of its rows
            cache.update(keys[inverse], values[inverse], i)
        return logits[inverse]

    def _prefill_graph(self, rows: int, width: int, keep: dict) -> _PrefillGraph:
        """The captured prefill for ``rows`` prompts of ``width`` positions (made and kept on first use; the least
        recently used one dropped beyond ``PREFILL_GRAPHS``)."""
        key = (rows, width)
        graph = self._prefills.pop(key, None)
        if graph is None:
            if len(self._prefills) >= PREFILL_GRAPHS:
                del self._prefills[next(iter(self._prefills))]
            if self._prefill_pool is None:
                self._prefill_pool = torch.cuda.graph_pool_handle()
            graph = _PrefillGraph(self.model, rows, width, keep, pool=self._prefill_pool)
        self._prefills[key] = graph  # most recent last
        return graph


def _distinct_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the first row of each distinct row of ``x`` [B, W], in order; each row's index among the distinct ones)."""
    seen: dict[tuple[int, ...], int] = {}
    firsts, inverse = [], []
    for b, row in enumerate(x.tolist()):
        index = seen.setdefault(tuple(row), len(seen))
        if index == len(firsts):
            firsts.append(b)
        inverse.append(index)
    return torch.tensor(firsts, device=x.device), torch.tensor(inverse, device=x.device)


def _takes_logits_to_keep(model: nn.Module) -> bool:
    return "logits_to_keep" in inspect.signature(model.forward).parameters


class _PrefillGraph:
    """The model's own forward over a batch of prompts, captured as one CUDA graph: fixed input buffers and a static
    cache of their own, whose keys and values the caller copies out. Eager, a 7B-shaped NVFP4 prefill of one
    128-token prompt spends ~150 ms on the host for ~20 ms of GPU work (benchmarks/RESULTS.md, run 44): every
    module's launches from Python. With the graph's own 4-D mask (``attention_mask_4d``) transformers builds none;
    from a 2-D mask it builds one without reading it on the host while a CUDA stream is capturing."""

    def __init__(self, model: nn.Module, rows: int, width: int, keep: dict, own_mask: bool = True,
                 pool=None) -> None:
        device = model.get_input_embeddings().weight.device
        self.ids = torch.zeros(rows, width, dtype=torch.long, device=device)
        # ``own_mask``: the 4-D boolean mask built here (``attention_mask_4d``), else transformers' from the 2-D one.
        self.own_mask = own_mask
        self.mask = (torch.zeros(rows, 1, width, width, dtype=torch.bool, device=device) if own_mask
                     else torch.zeros(rows, width, dtype=torch.long, device=device))
        self.position = torch.zeros(rows, width, dtype=torch.long, device=device)
        self.cache_position = torch.arange(width, device=device)
        self.cache = StaticCache(config=model.config, max_cache_len=width)
        self._call = lambda: model(input_ids=self.ids, attention_mask=self.mask, position_ids=self.position,
                                   cache_position=self.cache_position, past_key_values=self.cache, use_cache=True,
                                   **keep).logits[:, -1].float()
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None
        self.pool = pool

    def run(self, ids: torch.Tensor, mask: torch.Tensor, position: torch.Tensor):
        """(fp32 logits [rows, V] of the last position, each layer's (keys, values) [rows, KV, width, D]): views of
        the graph's buffers, valid until the next call."""
        self.ids.copy_(ids)
        self.mask.copy_(attention_mask_4d(mask) if self.own_mask else mask)
        self.position.copy_(position)
        self.cache.reset()  # the forward writes at the cache's own running length, which starts at 0
        if self.graph is None:
            # The warm-up call is this prefill.
            self.graph, self.logits, logits = warm_and_capture(self._call, pool=self.pool)
        else:
            self.graph.replay()
            logits = self.logits
        return logits, [(layer.keys, layer.values) for layer in self.cache.layers]


def attention_mask_4d(mask: torch.Tensor) -> torch.Tensor:
    """[B, 1, W, W] bool (True: may attend) for left-padded prompts whose ``mask`` [B, W] marks the real tokens:
    causal, padding keys masked, and each padding query attending to itself, so that no query row is left without a
    key. Given to the captured prefill so that its warm-up call and its replays run the same mask: from a 2-D mask
    transformers builds none where a batch has no padding (SDPA's causal flag instead) but builds one while a stream is
    capturing, and the two round differently (0.0156 in the logits of a bf16 model, benchmarks/RESULTS.md, run 44)."""
    width = mask.shape[1]
    causal = torch.ones(width, width, dtype=torch.bool, device=mask.device).tril_()
    itself = torch.eye(width, dtype=torch.bool, device=mask.device)
    return causal & (mask.bool()[:, None, None, :] | itself)


class _StepGraph:
    """The compiled decode step captured as one CUDA graph over fixed input buffers."""

    def __init__(self, step, mask: torch.Tensor, cache: StaticCache, batch: int) -> None:
        device = mask.device
        self.ids = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.position = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.cache_position = torch.zeros(1, dtype=torch.long, device=device)
        self._call = lambda: step(self.ids, self.position, self.cache_position, mask, cache)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None

    def run(self, token: torch.Tensor, position: torch.Tensor, cache_position: int) -> torch.Tensor:
        """The logits after ``token`` (at ``position`` per row, cache slot ``cache_position``): a view of the graph's
        output buffer, valid until the next call."""
        self.ids.copy_(token[:, None])
        self.position.copy_(position)
        self.cache_position.fill_(cache_position)
        if self.graph is None:
            # The warm-up call (compilation included) is this step itself: the cache advances once, as on a replay;
            # capturing records the step without running it.
            self.graph, self.logits, logits = warm_and_capture(self._call)
            return logits
        self.graph.replay()
        return self.logits

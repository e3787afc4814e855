"""The transformers rollout backend's two paths: the static-cache loop (``qerl.rollout.static_decode``) gives what
transformers' ``generate`` on a dynamic cache gives (greedy and seeded sampling, EOS handling) and keeps its cache
between calls; on CUDA its compiled decode step (CUDA graphs) reads norm weights and adapters as they are now."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from qerl.rollout.base import SamplingSettings
from qerl.rollout.hf import HFRolloutBackend
from qerl.rollout.static_decode import CACHE_BUCKET, PREFILL_BUCKET, STOP_CHECK_EVERY
from tests.conftest import attach_test_adapter, random_prompts, rollout_mismatch

TOKENIZER = SimpleNamespace(pad_token_id=0, eos_token_id=1)  # the backend reads only these two
GREEDY = SamplingSettings(max_new_tokens=12, temperature=0.0)


def _tiny_policy(device: str, dtype: torch.dtype, hidden: int = 128, intermediate: int = 256):
    """A random two-layer Qwen2 with NVFP4 linear layers (kernel layout on CUDA) and a LoRA adapter whose B is not
    zero, so the adapter changes what is generated."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from qerl.modules import quantize_, use_kernel_layout

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=256, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         tie_word_embeddings=False, pad_token_id=0, eos_token_id=1)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.normal_(0.0, p.shape[1] ** -0.5)
    model = model.to(device=device, dtype=dtype)
    quantize_(model)
    if device == "cuda":
        assert use_kernel_layout(model) > 0
    return attach_test_adapter(model, r=4, alpha=8)


_prompts = random_prompts


def test_static_cache_generates_what_the_dynamic_cache_does():
    model = _tiny_policy("cpu", torch.float32)
    prompts = _prompts((5, 9, 7))  # unequal widths: left padding under the static cache's mask
    dynamic = HFRolloutBackend(model, TOKENIZER, static_cache=False).generate(prompts, GREEDY)
    static_backend = HFRolloutBackend(model, TOKENIZER, static_cache=True)
    static = static_backend.generate(prompts, GREEDY)
    assert static_backend.decoder._cache is not None  # the static path ran
    assert static.completion_ids == dynamic.completion_ids
    assert len({tuple(c) for c in static.completion_ids}) > 1  # the prompts lead to different completions
    for a, b in zip(static.logprobs, dynamic.logprobs):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-4, rtol=0)


def test_seeded_sampling_and_eos_match_generate():
    """Every sampling setting the backend passes on, with a seed: the same tokens as transformers' generate; an EOS
    that some rows produce ends those rows there, as generate's."""
    model = _tiny_policy("cpu", torch.float32)
    prompts = _prompts((5, 9, 7, 9))
    settings = SamplingSettings(max_new_tokens=20, temperature=0.8, top_k=40, top_p=0.95, min_p=0.1,
                                repetition_penalty=1.2, seed=11)
    ref = HFRolloutBackend(model, TOKENIZER, static_cache=False).generate(prompts, settings)
    got = HFRolloutBackend(model, TOKENIZER, static_cache=True).generate(prompts, settings)
    assert got.completion_ids == ref.completion_ids
    for a, b in zip(got.logprobs, ref.logprobs):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-4, rtol=0)
    # An EOS id that one row samples at its fourth token: that row stops there, the others run on.
    eos = [ref.completion_ids[0][3]]
    ref = HFRolloutBackend(model, TOKENIZER, eos_token_ids=eos, static_cache=False).generate(prompts, settings)
    got = HFRolloutBackend(model, TOKENIZER, eos_token_ids=eos, static_cache=True).generate(prompts, settings)
    assert got.completion_ids == ref.completion_ids
    assert min(map(len, got.completion_ids)) <= 4 and max(map(len, got.completion_ids)) == 20


@pytest.mark.parametrize("fused_step", [False, True])
def test_repeated_prompts_are_prefilled_once_and_generate_what_generate_does(fused_step):
    """GRPO's batches hold each prompt once per completion of its group: the static path prefills each distinct
    prompt once (the LM head on its last position only) and copies its keys and values into all of its rows; the
    seeded samples and their log-probabilities are still transformers' generate's."""
    model = _tiny_policy("cpu", torch.float32)
    distinct = _prompts((5, 9, 7))
    prompts = [distinct[i] for i in (0, 0, 0, 1, 1, 2, 0, 2)]  # groups, and a prompt that comes back later
    settings = SamplingSettings(max_new_tokens=16, temperature=1.0, seed=5)
    ref = HFRolloutBackend(model, TOKENIZER, static_cache=False).generate(prompts, settings)
    backend = HFRolloutBackend(model, TOKENIZER, static_cache=True, fused_step=fused_step)
    shapes, heads = [], []  # (rows, positions) of every forward of the transformers body; the LM head's inputs
    base = model.get_base_model()
    hooks = [base.model.register_forward_pre_hook(
                 lambda m, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True),
             base.lm_head.register_forward_pre_hook(lambda m, args: heads.append(tuple(args[0].shape[:-1])))]
    try:
        got = backend.generate(prompts, settings)
    finally:
        for hook in hooks:
            hook.remove()
    assert shapes[0] == (3, PREFILL_BUCKET)  # the prefill: three distinct prompts, left-padded to the width bucket
    assert heads[0] == (3, 1)  # and the LM head on their last positions only
    assert all(s == (8, 1) for s in shapes[1:]) and (len(shapes) > 1) != fused_step  # the fused step has its own body
    assert got.completion_ids == ref.completion_ids
    assert len({tuple(c) for c in got.completion_ids[:3]}) == 3  # the rows of one prompt sample apart
    for a, b in zip(got.logprobs, ref.logprobs):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-4, rtol=0)
    backend.decoder.share_prompt_prefill = False  # every row prefilled: the same samples
    unshared = backend.generate(prompts, settings)
    assert unshared.completion_ids == got.completion_ids


def test_4d_prefill_mask_matches_transformers_padding_mask():
    """The captured prefill's own 4-D mask (padding queries attend to themselves) gives the logits and the real
    positions' keys and values of transformers' 2-D padding mask, and a padding position's keys stay finite."""
    from transformers import DynamicCache, StaticCache

    from qerl.rollout.static_decode import attention_mask_4d

    model = _tiny_policy("cpu", torch.float32).get_base_model()
    prompts = _prompts((5, 9, 7))
    ids = torch.tensor([[0] * (9 - len(p)) + p for p in prompts])
    mask = (ids != 0).long()
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        ref_cache, own_cache = DynamicCache(config=model.config), StaticCache(config=model.config, max_cache_len=9)
        ref = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=ref_cache).logits[:, -1]
        own = model(input_ids=ids, attention_mask=attention_mask_4d(mask), position_ids=pos,
                    cache_position=torch.arange(9), past_key_values=own_cache).logits[:, -1]
    torch.testing.assert_close(own, ref, atol=1e-5, rtol=1e-5)
    real = mask.bool()[:, None, :, None]
    for a, b in zip(own_cache.layers, ref_cache.layers):
        for x, y in ((a.keys, b.keys), (a.values, b.values)):
            assert torch.isfinite(x).all()
            torch.testing.assert_close(x.where(real, 0), y.where(real, 0), atol=1e-5, rtol=1e-5)


def test_decoding_stops_once_every_row_has_ended():
    """The loop reads the finished flags every ``STOP_CHECK_EVERY`` tokens (not every token): with every id an EOS,
    all rows end at their first token and the loop stops at the first check."""
    from qerl.rollout.static_decode import StaticDecoder

    model = _tiny_policy("cpu", torch.float32)
    ids = torch.tensor(_prompts((6, 6)))
    settings = SamplingSettings(max_new_tokens=40, temperature=0.0)
    tokens, logprobs = StaticDecoder(model).generate(ids, torch.ones_like(ids), settings, list(range(256)),
                                                     pad_token_id=0)
    assert tokens.shape == logprobs.shape == (2, STOP_CHECK_EVERY)
    assert (tokens[:, 1:] == 0).all() and (logprobs[:, 0] < 0).all()


def test_static_cache_is_reused_and_emptied_between_calls():
    model = _tiny_policy("cpu", torch.float32)
    backend = HFRolloutBackend(model, TOKENIZER, static_cache=True)
    first = backend.generate(_prompts((6, 8)), GREEDY)
    cache = backend.decoder._cache
    assert backend.decoder._cache_shape == (2, CACHE_BUCKET)
    # Other prompts in between fill the cache; the same prompts again must give the same tokens (no stale keys).
    backend.generate(_prompts((8, 8), seed=7), GREEDY)
    again = backend.generate(_prompts((6, 8)), GREEDY)
    assert backend.decoder._cache is cache
    assert again.completion_ids == first.completion_ids
    backend.generate(_prompts((6, 8, 5)), GREEDY)  # another batch size: a new cache
    assert backend.decoder._cache is not cache and backend.decoder._cache_shape == (3, CACHE_BUCKET)
    long = SamplingSettings(max_new_tokens=CACHE_BUCKET, temperature=0.0)
    backend.generate(_prompts((6, 8, 5)), long)  # longer than the bucket: rounded up to the next one
    assert backend.decoder._cache_shape == (3, 2 * CACHE_BUCKET)


def test_compile_needs_cuda_and_the_static_cache():
    model = _tiny_policy("cpu", torch.float32)
    with pytest.raises(ValueError, match="need the static KV cache"):
        HFRolloutBackend(model, TOKENIZER, static_cache=False, compile=True)
    with pytest.raises(ValueError, match="needs the model on CUDA"):
        HFRolloutBackend(model, TOKENIZER, compile=True).generate(_prompts((4,)), GREEDY)


@pytest.mark.gpu
@pytest.mark.parametrize("fused_step, decode_layout, rows, a_copies",
                         [(True, "auto", 2, False), (False, "auto", 2, False), (True, "pairs", 2, False),
                          (True, "auto", 20, False), (True, "auto", 20, True), (True, "auto", 2, True)])
def test_compiled_decode_reads_norms_and_adapter_in_place(fused_step, decode_layout, rows, a_copies, monkeypatch):
    """The compiled decode step's tokens and log-probabilities are the model's as it is at each call: after the
    first call has recorded the CUDA graphs, norm weights (AQN writes noise there) and the adapter (the trainer
    updates it) change in place, and the next call's log-probabilities follow them. Both steps: the project's
    (``qerl.rollout.decode_step``, fused products, left padding skipped by the attention; on its own "words" copy of
    the codes, the default on a Hopper GPU, and on the modules' "pairs"; its bf16 copies of the fp32 adapter's B;
    with 20 rows the adapter's shrink in ``qerl.kernels.lora_shrink``; with ``adapter_a_copies`` the kernel (20 rows)
    or the multiply-sum (2 rows) on the step's bf16 copies of A) and the model's forward."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from qerl.kernels import lora_shrink as shrink_module

    launches = []
    kernel = shrink_module.lora_shrink
    monkeypatch.setattr(shrink_module, "lora_shrink", lambda *args, **kw: launches.append(1) or kernel(*args, **kw))
    model = _tiny_policy("cuda", torch.bfloat16)
    # CUDA defaults: static cache, compiled
    backend = HFRolloutBackend(model, TOKENIZER, fused_step=fused_step, decode_layout=decode_layout,
                               adapter_a_copies=a_copies)
    prompts = _prompts((6, 9)) if rows == 2 else _prompts(tuple(5 + i % 5 for i in range(rows)))
    settings = SamplingSettings(max_new_tokens=24, temperature=0.0)

    def mismatch(result) -> float:
        return rollout_mismatch(model, prompts, result)

    clean = backend.generate(prompts, settings)
    assert backend.decoder.compile and backend.decoder._graph is not None  # the compiled decode step ran
    if fused_step:
        assert backend.decoder._fused.fused_groups() == 4  # q/k/v and gate/up of both layers, one product each
        from qerl.kernels import nvfp4_gemm_ws

        # "auto": the step's own words copy where the warp-specialized kernels run (a Hopper GPU)
        want = "words" if decode_layout == "auto" and nvfp4_gemm_ws.available() else "pairs"
        layouts = {g.fused.weight.layout for layer in backend.decoder._fused.layers for g in layer[1:]}
        assert backend.decoder._fused.layout == want and layouts == {want}
        assert all(g.b_copies is not None and (g.a_copies is not None) == a_copies
                   for layer in backend.decoder._fused.layers for g in layer[1:])
    assert (len(launches) > 0) == (fused_step and rows > 16)  # the kernel from 17 rows on
    assert all(len(c) == 24 for c in clean.completion_ids)
    assert mismatch(clean) < 0.05
    clean_state = {n: p.detach().clone() for n, p in model.named_parameters() if "norm" in n or "lora_" in n}
    with torch.no_grad():
        g = torch.Generator(device="cuda").manual_seed(3)
        for name, p in model.named_parameters():
            if "norm" in name:
                p.mul_(1 + 0.3 * torch.randn(p.shape, device="cuda", generator=g).to(p.dtype))
            elif "lora_B" in name:
                p.normal_(0.0, 0.2, generator=g)
            elif "lora_A" in name:
                p.mul_(1 + 0.5 * torch.randn(p.shape, device="cuda", generator=g))
    changed = backend.generate(prompts, settings)
    # The graphs read the new weights... (the larger adapter's bf16 rounding in the expand, over 20 rows' tokens
    # reaches past 0.05; the torch shrink's rollouts show the same, so the kernel adds nothing to it)
    assert mismatch(changed) < (0.05 if rows == 2 else 0.1)
    if rows > 16:
        from qerl.rollout import decode_step

        monkeypatch.setattr(decode_step, "SHRINK_KERNEL_MAX_M", 16)
        on_torch = HFRolloutBackend(model, TOKENIZER, fused_step=True, decode_layout=decode_layout)
        assert mismatch(changed) < mismatch(on_torch.generate(prompts, settings)) + 0.02
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in clean_state:
                p.copy_(clean_state[name])
    assert mismatch(changed) > 0.5  # ...which differ enough that the old ones would not have matched


@pytest.mark.gpu
@pytest.mark.parametrize("fused_step", [True, False])
def test_compiled_decode_with_split_kernels(monkeypatch, fused_step):
    """Layers wide enough that the decode-sized products run split kernels, whose tile counters the launcher keeps
    between calls: the backend reserves them before generating, as a CUDA-graph capture cannot allocate them (and
    under torch.compile's CUDA-graph trees, which allocate warm-up runs from the graphs' pool, a 7B-shaped model
    whose prefill ran no split kernel failed to record)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from qerl.kernels import nvfp4_gemm

    monkeypatch.setattr(nvfp4_gemm, "_COUNTERS", {})  # as in a fresh process
    model = _tiny_policy("cuda", torch.bfloat16, hidden=1024, intermediate=2816)
    backend = HFRolloutBackend(model, TOKENIZER, fused_step=fused_step)
    backend._static_decoder(torch.device("cuda"))  # what generate() does first
    reserved = dict(nvfp4_gemm._COUNTERS)
    assert [b.numel() for b in reserved.values()] == [nvfp4_gemm.COUNTERS_RESERVE]
    prompts = _prompts((6, 6))
    result = backend.generate(prompts, SamplingSettings(max_new_tokens=16, temperature=0.0))
    assert all(len(c) == 16 for c in result.completion_ids)
    assert rollout_mismatch(model, prompts, result) < 0.05
    assert all(nvfp4_gemm._COUNTERS[k] is b for k, b in reserved.items())  # no launch needed a larger buffer


@pytest.mark.gpu
@pytest.mark.parametrize("fused_step, decode_layout", [(True, "auto"), (False, "auto"), (True, "pairs")])
def test_compiled_decode_after_a_captured_shared_prefill(fused_step, decode_layout):
    """Groups of one prompt on CUDA: the distinct prompts' prefill runs as a captured CUDA graph (one per rows and
    padded width, replayed for new prompts of the same shape) and is copied into every row of the static cache that
    the captured step then reads; each row's log-probabilities are an eager forward's over its own tokens, and greedy
    decoding gives what the uncaptured prefill gives."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    model = _tiny_policy("cuda", torch.bfloat16)
    backend = HFRolloutBackend(model, TOKENIZER, eos_token_ids=[256], fused_step=fused_step,  # no EOS: full lengths
                               decode_layout=decode_layout)
    distinct = _prompts((6, 9, 4, 40))
    sampled = SamplingSettings(max_new_tokens=24, temperature=1.0, seed=1)
    for order in ((0, 0, 0, 0, 1, 1, 1, 1), (2, 2, 2, 2, 0, 0, 0, 0), (3, 3, 3, 3, 1, 1, 1, 1)):
        prompts = [distinct[i] for i in order]
        result = backend.generate(prompts, sampled)
        assert all(len(c) == 24 for c in result.completion_ids)
        assert len({tuple(c) for c in result.completion_ids[:4]}) > 1  # one prompt's rows sample apart
        worst = rollout_mismatch(model, prompts, result)
        assert worst < 0.1, worst
    prefills = backend.decoder._prefills
    assert sorted(prefills) == [(2, PREFILL_BUCKET), (2, 2 * PREFILL_BUCKET)]
    assert len({g.graph.pool() for g in prefills.values()}) == 1  # one memory pool for both
    prompts = [distinct[i] for i in (1, 1, 1, 1, 2, 2, 2, 2)]  # the first shape again, after the second's capture
    assert rollout_mismatch(model, prompts, backend.generate(prompts, sampled)) < 0.1
    greedy = SamplingSettings(max_new_tokens=24, temperature=0.0)
    captured = backend.generate(prompts, greedy)
    backend.decoder.capture_prefill = False
    eager = backend.generate(prompts, greedy)
    assert captured.completion_ids == eager.completion_ids
    for a, b in zip(captured.logprobs, eager.logprobs):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=0.02, rtol=0)

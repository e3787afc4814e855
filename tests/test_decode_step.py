"""The transformers backend's own decode step (``qerl.rollout.decode_step``) and the sibling fusion it runs on
(``qerl.fusion``), on CPU through the kernels' torch references: fusing q/k/v and gate/up moves their packed tensors
into one allocation without changing any module's output; the warp-specialized kernels' scale descriptor of a fused
member reads that member's bytes; the step generates what transformers' ``generate`` does (left padding, LoRA,
NVFP4 and dense bases, groups that cannot be fused) and reads the adapter in place. GPU tests: tests/test_rollout_hf.py
(compiled into CUDA graphs) and tests/test_kernels_gpu.py (kernels on a fused member's views)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from qerl.fusion import GATE_UP, QKV, fuse_projections, fuse_siblings, packed_base, unfuse_projections
from qerl.modules import NVFP4Linear, quantize_
from qerl.rollout.base import SamplingSettings
from qerl.rollout.decode_step import DecodeStep, unsupported_reason
from qerl.rollout.hf import HFRolloutBackend
from qerl.rollout.static_decode import StaticDecoder
from tests.conftest import attach_test_adapter, random_prompts, rollout_mismatch

TOKENIZER = SimpleNamespace(pad_token_id=0, eos_token_id=1)
GREEDY = SamplingSettings(max_new_tokens=12, temperature=0.0)


def _tiny(base: str = "nvfp4", lora: bool = True, shared_scales: bool = True, bias: bool = True):
    """A random two-layer Qwen2 in fp32: ``base`` "nvfp4" (packed layers in the kernels' layout, made on CPU) or
    "dense"; a LoRA adapter whose B is not zero."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         tie_word_embeddings=False, pad_token_id=0, eos_token_id=1)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2:
                p.normal_(0.0, p.shape[1] ** -0.5)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.5 if bias else 0.0)
    if base == "nvfp4":
        quantize_(model, fused_groups=(QKV, GATE_UP) if shared_scales else ())
        for m in model.modules():
            if isinstance(m, NVFP4Linear):
                m.to_kernel_layout()
    return attach_test_adapter(model, r=4, alpha=8) if lora else model.eval()


_prompts = random_prompts


def _generates_like_generate(model, prompts, fused_groups: int, atol: float = 1e-4, **backend_kwargs):
    """Greedy rollouts of the project's step against transformers' generate on a dynamic cache: the same tokens,
    log-probabilities within ``atol``, ``fused_groups`` q/k/v and gate/up groups run as one product. The backend."""
    ref = HFRolloutBackend(model, TOKENIZER, static_cache=False).generate(prompts, GREEDY)
    backend = HFRolloutBackend(model, TOKENIZER, fused_step=True, **backend_kwargs)
    got = backend.generate(prompts, GREEDY)
    assert backend.decoder.fused_step and backend.decoder._fused.fused_groups() == fused_groups
    assert got.completion_ids == ref.completion_ids
    for a, b in zip(got.logprobs, ref.logprobs):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=atol, rtol=0)
    return backend, got


def _storage_bytes(model) -> int:
    seen = {}
    for t in model.buffers():
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def test_fusing_siblings_shares_one_allocation_and_keeps_every_output():
    model = _tiny(lora=False)
    x = torch.randn(5, 128)
    leaves = [(name, leaf) for name, m in model.named_modules() for leaf in (*QKV, *GATE_UP) if hasattr(m, leaf)]
    before = {(n, leaf): model.get_submodule(n).get_submodule(leaf)(x) for n, leaf in leaves}
    bytes_before = _storage_bytes(model)
    assert fuse_projections(model) == 4  # two groups in each of two layers
    assert _storage_bytes(model) == bytes_before  # moved, not copied
    for (n, leaf), y in before.items():
        assert torch.equal(model.get_submodule(n).get_submodule(leaf)(x), y), (n, leaf)
    attn = model.model.layers[0].self_attn
    fused = fuse_siblings(attn, QKV)
    assert fused.sizes == (128, 64, 64) and fused.weight.n == 256
    codes = fused.weight.codes
    assert all(packed_base(getattr(attn, p)).kernel_codes.untyped_storage().data_ptr()
               == codes.untyped_storage().data_ptr() for p in QKV)
    dense = torch.cat([getattr(attn, p).dequantized_weight(torch.float32) for p in QKV])
    from qerl import nvfp4
    from qerl.kernels import codec_from_kernel_weight

    packed, scale = codec_from_kernel_weight(fused.weight)
    assert torch.equal(nvfp4.dequantize(packed, scale, fused.weight.global_scale, dtype=torch.float32), dense)
    # Again: the groups are found as they are, nothing moves.
    ptrs = [b.kernel_codes.data_ptr() for b in model.modules() if isinstance(b, NVFP4Linear)]
    assert fuse_projections(model) == 4
    assert fuse_siblings(attn, QKV).weight.codes.data_ptr() == codes.data_ptr()
    assert [b.kernel_codes.data_ptr() for b in model.modules() if isinstance(b, NVFP4Linear)] == ptrs
    assert unfuse_projections(model) == 4
    assert _storage_bytes(model) == bytes_before  # each member's own tensors again, the group's freed
    for (n, leaf), y in before.items():
        assert torch.equal(model.get_submodule(n).get_submodule(leaf)(x), y), (n, leaf)


def test_frozen_dense_siblings_are_fused_trained_ones_are_not():
    model = _tiny(base="dense", lora=False)
    assert fuse_projections(model) == 0  # weights that train keep their own tensors
    model.requires_grad_(False)
    attn = model.model.layers[1].self_attn
    held = attn.k_proj.weight
    attn.k_proj.weight = torch.nn.Parameter(torch.cat([held, held])[:held.shape[0]], requires_grad=False)
    assert attn.k_proj.weight._base is None  # a Parameter made from a view is not one; a plain view is:
    attn.k_proj._parameters["weight"] = torch.cat([held, held])[:held.shape[0]]
    assert fuse_siblings(attn, QKV) is None  # a weight that is a view of another tensor (e.g. FSDP's): left alone
    attn.k_proj.weight = torch.nn.Parameter(held, requires_grad=False)
    x = torch.randn(5, 128)
    mlp = model.model.layers[0].mlp
    before = [mlp.gate_proj(x), mlp.up_proj(x)]
    ptr = mlp.gate_proj.weight.data_ptr()
    assert fuse_projections(model) == 4
    fused = fuse_siblings(mlp, GATE_UP)
    assert fused.sizes == (256, 256) and fused.weight.shape == (512, 128) and fused.weight.data_ptr() != ptr
    assert mlp.up_proj.weight.data_ptr() == fused.weight[256].data_ptr()
    assert torch.equal(mlp.gate_proj(x), before[0]) and torch.equal(mlp.up_proj(x), before[1])
    assert torch.equal(x @ fused.weight.T, torch.cat(before, -1))
    # Separate again (e.g. to save a merged model): own storage per weight, same outputs, nothing fused left.
    assert unfuse_projections(model) == 4
    storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    assert len(storages) == len(list(model.parameters()))
    assert torch.equal(mlp.gate_proj(x), before[0]) and torch.equal(mlp.up_proj(x), before[1])
    assert unfuse_projections(model) == 0


def test_siblings_with_their_own_global_scales_are_not_fused():
    model = _tiny(lora=False, shared_scales=False)
    attn = model.model.layers[0].self_attn
    assert not torch.equal(attn.q_proj.weight_global_scale, attn.k_proj.weight_global_scale)
    assert fuse_siblings(attn, QKV) is None


def test_scale_descriptor_of_a_fused_member_reads_its_own_bytes():
    """The warp-specialized kernels' TMA box of a member's scales (chunk c, rows n0 .. n0 + 32) is that member's
    slice of the group's scale rows: the descriptor spans the group's row pitch from the member's first byte."""
    pytest.importorskip("triton")
    ws = pytest.importorskip("qerl.kernels.nvfp4_gemm_ws")
    from torch import nn

    from qerl import nvfp4

    torch.manual_seed(0)
    dense = [nn.Linear(384, rows, bias=False) for rows in (96, 64)]  # K = 384: three chunks of 128
    shared = nvfp4.global_scale_for([d.weight for d in dense])
    mlp = nn.Module()
    for leaf, d in zip(GATE_UP, dense):
        setattr(mlp, leaf, NVFP4Linear.from_linear(d, shared))
        getattr(mlp, leaf).to_kernel_layout()
    assert fuse_siblings(mlp, GATE_UP).sizes == (96, 64)
    for leaf in GATE_UP:
        w = mlp.get_submodule(leaf).kernel_weight()
        assert ws.scale_pitch(w) == (96 + 64) // 32  # the group's rows / 32, not the member's
        _, s_desc = ws.weight_descriptors(w, 32)
        rows = s_desc.base
        for c in range(3):
            for n0 in range(0, w.n, 32):
                box = rows[c * ws.scale_pitch(w) + n0 // 32]
                assert torch.equal(box, w.scales[c, n0 * 8:(n0 + 32) * 8]), (leaf, c, n0)
        own = w._replace(scales=torch.empty(w.scales.shape, dtype=torch.uint8).copy_(w.scales))
        assert ws.scale_pitch(own) == w.n // 32


@pytest.mark.parametrize("shrink", ["op", "torch"])
@pytest.mark.parametrize("base", ["nvfp4", "dense"])
def test_decode_step_generates_what_generate_does(base, shrink, monkeypatch):
    """Greedy tokens and log-probabilities of the project's step against transformers' generate on a dynamic cache:
    prompts of unequal widths (left padding skipped by the attention, rows rotated at their own positions), a LoRA
    adapter on every projection; on the NVFP4 base q/k/v and gate/up run as one product each. The adapter's shrink
    in torch (up to ``SHRINK_REDUCTION_MAX_M`` rows, as this batch of 3) or through ``qerl::lora_shrink`` (above)."""
    from qerl.kernels import ops
    from qerl.rollout import decode_step

    calls = []
    reference = ops.lora_shrink_reference
    monkeypatch.setattr(ops, "lora_shrink_reference", lambda *args: calls.append(1) or reference(*args))
    if shrink == "op":
        monkeypatch.setattr(decode_step, "SHRINK_REDUCTION_MAX_M", 2)  # the batch of 3 takes the op
    _, got = _generates_like_generate(_tiny(base), _prompts((5, 9, 7)), 4, static_cache=True)
    assert len({tuple(c) for c in got.completion_ids}) > 1
    assert (len(calls) > 0) == (shrink == "op")


def test_shrink_reduce_reaches_the_kernel_op_and_an_unknown_one_is_refused(monkeypatch):
    """``shrink_reduce`` is handed to every group and from there to ``qerl::lora_shrink`` as its ``reduce``; a mode the
    kernel does not have is refused when the step is built."""
    from qerl.kernels import ops
    from qerl.rollout import decode_step

    model = _tiny().get_base_model()
    with pytest.raises(ValueError, match="shrink_reduce 'store'"):
        DecodeStep(model, layout="pairs", shrink_reduce="store")
    seen = []
    op = ops.lora_shrink_op
    monkeypatch.setattr(ops, "lora_shrink_op", lambda x, a, scales, reduce: seen.append(reduce) or op(x, a, scales,
                                                                                                       reduce))
    monkeypatch.setattr(decode_step, "SHRINK_REDUCTION_MAX_M", 2)  # the 3 rows below take the op
    step = DecodeStep(model, layout="pairs", shrink_reduce="atomic")
    groups = [g for layer in step.layers for g in layer[1:]]
    assert groups and all(g.shrink_reduce == "atomic" for g in groups)
    x = torch.randn(3, 128)
    want = groups[0].modules[0](x)
    torch.testing.assert_close(groups[0](x, add_bias=True)[:, :want.shape[1]], want, atol=1e-4, rtol=1e-4)
    assert seen == ["atomic"]


def test_decode_step_on_its_own_words_copy_generates_what_generate_does():
    """``decode_layout="words"``: every packed product of the step reads its own copy of the codes in the words layout
    (the same scales tensor), the training modules keep theirs in "pairs", and the step still generates what generate
    does. A layout no forward reads is refused."""
    model = _tiny()
    before = {n: b.clone() for n, b in model.named_buffers() if n.endswith("kernel_codes")}
    backend, _ = _generates_like_generate(model, _prompts((5, 9, 7)), 4, static_cache=True, decode_layout="words")
    step = backend.decoder._fused
    module_codes = {b.untyped_storage().data_ptr() for n, b in model.named_buffers() if n.endswith("kernel_codes")}
    groups = [g for layer in step.layers for g in (layer.qkv, layer.o, layer.gate_up, layer.down)]
    assert len(groups) == 8 and all(g.fused.weight.layout == "words" for g in groups)
    assert not {g.fused.weight.codes.untyped_storage().data_ptr() for g in groups} & module_codes
    for layer in step.layers:  # the scales: the modules' own fused tensor, not a copy
        for g in (layer.qkv, layer.gate_up):
            held = fuse_siblings(*_parent_and_leaves(layer, g)).weight.scales
            assert (g.fused.weight.scales.data_ptr(), g.fused.weight.scales.shape) == (held.data_ptr(), held.shape)
    after = {n: b for n, b in model.named_buffers() if n.endswith("kernel_codes")}
    assert before.keys() == after.keys() and all(torch.equal(before[n], after[n]) for n in before)
    with pytest.raises(ValueError, match="decode_layout 'rows'"):
        HFRolloutBackend(model, TOKENIZER, decode_layout="rows")
    with pytest.raises(ValueError, match="decode layout 'rows'"):
        DecodeStep(model, "rows")
    with pytest.raises(ValueError, match="read by the fused decode step"):
        HFRolloutBackend(model, TOKENIZER, fused_step=False, decode_layout="words")
    pairs = DecodeStep(model.get_base_model(), "pairs")  # the modules' own codes, no copy
    assert pairs.layout == "pairs" and pairs.layers[0].qkv.fused.weight.codes.data_ptr() in {
        b.data_ptr() for n, b in model.named_buffers() if n.endswith("kernel_codes")}


def test_auto_layout_copies_to_words_on_hopper_where_the_copy_fits(monkeypatch):
    """``layout="auto"`` (the default) takes "words" only where the warp-specialized kernels run (faked here: the
    model is on CPU) and the copy of the packed codes takes at most a quarter of the free memory; "pairs" on CPU."""
    from qerl.kernels import nvfp4_gemm_ws
    from qerl.rollout import decode_step

    model = _tiny().get_base_model()
    codes = sum(b.numel() for n, b in model.named_buffers() if n.endswith("kernel_codes"))
    assert DecodeStep(model).layout == "pairs"  # CPU: no warp-specialized kernels
    monkeypatch.setattr(nvfp4_gemm_ws, "available", lambda device=None: True)
    free = {"bytes": 4 * codes}
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free["bytes"], 8 * codes))
    assert decode_step.auto_layout(model) == "words"
    step = DecodeStep(model)
    assert step.layout == "words" and step.layers[1].down.fused.weight.layout == "words"
    free["bytes"] = 4 * codes - 4
    assert decode_step.auto_layout(model) == "pairs" and DecodeStep(model).layout == "pairs"
    assert decode_step.auto_layout(_tiny(base="dense")) == "pairs"  # nothing packed to copy


def _parent_and_leaves(layer, group):
    return (layer.layer.self_attn, QKV) if group is layer.qkv else (layer.layer.mlp, GATE_UP)


def test_groups_that_cannot_be_fused_run_their_modules():
    """Siblings with their own global scales: the step calls their modules (and still generates generate's tokens);
    members without an adapter next to adapted ones: a zero expand for them."""
    model = _tiny(shared_scales=False)
    prompts = _prompts((6, 8))
    ref = HFRolloutBackend(model, TOKENIZER, static_cache=False).generate(prompts, GREEDY)
    decoder = StaticDecoder(model, fused_step=True)
    ids = torch.tensor([[0] * 2 + prompts[0], prompts[1]])
    tokens, _ = decoder.generate(ids, (ids != 0).long(), GREEDY, [1], 0)
    assert decoder._fused.fused_groups() == 0
    assert [row[:len(c)] for row, c in zip(tokens.tolist(), ref.completion_ids)] == ref.completion_ids

    partial = attach_test_adapter(_tiny(lora=False), r=4, alpha=8, target_modules=("q_proj", "up_proj", "o_proj"))
    _generates_like_generate(partial, prompts, 4, static_cache=True)


def test_decode_step_reads_the_adapter_in_place():
    """The step keeps references to the adapter's A and B, not copies: after the optimizer-like in-place update the
    next call's log-probabilities are the updated model's."""
    model = _tiny()
    prompts = _prompts((6, 8))
    backend = HFRolloutBackend(model, TOKENIZER, static_cache=True, fused_step=True)
    first = backend.generate(prompts, GREEDY)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_A" in name or "lora_B" in name:
                p.add_(torch.randn_like(p) * 0.2)
    ref = HFRolloutBackend(model, TOKENIZER, static_cache=False).generate(prompts, GREEDY)
    got = backend.generate(prompts, GREEDY)
    assert got.completion_ids == ref.completion_ids != first.completion_ids
    for a, b in zip(got.logprobs, ref.logprobs):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-4, rtol=0)


def test_llama_models_decode_with_the_step_too():
    """A Llama-family model (SmolLM2's architecture: no biases, tied embeddings) with a LoRA adapter on a frozen dense
    base: the step fuses its groups and generates what generate does."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, rope_theta=10000.0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.normal_(0.0, p.shape[1] ** -0.5)
    _generates_like_generate(attach_test_adapter(model, r=4, alpha=8), _prompts((5, 9, 7)), 4)


def test_models_the_step_does_not_support_are_refused_or_left_to_their_forward():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    qwen3 = Qwen3ForCausalLM(Qwen3Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=2, head_dim=16))
    assert "qwen3" in unsupported_reason(qwen3)
    with pytest.raises(ValueError, match="does not support this model"):
        HFRolloutBackend(qwen3, TOKENIZER, fused_step=True)
    with pytest.raises(ValueError, match="does not support this model"):
        DecodeStep(qwen3)
    model = _tiny(lora=False)
    model.config.layer_types = ["sliding_attention"] * 2
    assert "sliding" in unsupported_reason(model)
    # Unset, the step is used only where the decode step is compiled (CUDA): on CPU the model's forward decodes.
    backend = HFRolloutBackend(_tiny(lora=False), TOKENIZER, static_cache=True)
    backend.generate(_prompts((4,)), GREEDY)
    assert not backend.decoder.fused_step
    # Asked for, it brings the static cache it needs (on CPU too).
    backend = HFRolloutBackend(_tiny(lora=False), TOKENIZER, fused_step=True)
    backend.generate(_prompts((4,)), GREEDY)
    assert backend.decoder.fused_step
    with pytest.raises(ValueError, match="need the static KV cache"):
        HFRolloutBackend(model, TOKENIZER, static_cache=False, fused_step=True)


def test_decode_step_with_fp32_norms_as_aqn_keeps_them():
    """AQN holds the norm weights in fp32 with a hook casting each output back (``keep_norms_fp32``); the step calls
    the norm modules, so a bf16 model with noised fp32 norms generates what generate does."""
    from qerl.aqn import keep_norms_fp32

    model = _tiny().to(torch.bfloat16)
    norms = {n: m for n, m in model.named_modules() if n.endswith("layernorm")}
    keep_norms_fp32(norms)
    with torch.no_grad():
        for m in norms.values():
            m.weight.mul_(1 + 0.05 * torch.randn_like(m.weight))
    _generates_like_generate(model, _prompts((5, 8)), 4, atol=0.05, static_cache=True)


def test_bf16_copies_of_an_fp32_adapters_b_follow_it_at_every_generation():
    """A bf16 model whose adapters peft keeps in fp32: the step keeps bf16 copies of B (the epilogue's dtype) and reads
    A itself; its log-probabilities stay within bf16 rounding of an eager forward's over its own tokens, and after an
    optimizer-like in-place update of A and B the next generation refreshes the copies and follows the adapter."""
    model = attach_test_adapter(_tiny(lora=False).to(torch.bfloat16), r=4, alpha=8)
    lora = {n: p for n, p in model.named_parameters() if "lora_" in n}
    assert lora and all(p.dtype == torch.float32 for p in lora.values())  # peft's autocast of bf16 adapters
    prompts = _prompts((5, 8))
    backend = HFRolloutBackend(model, TOKENIZER, fused_step=True)
    first = backend.generate(prompts, GREEDY)
    groups = [g for layer in backend.decoder._fused.layers for g in layer[1:]]
    assert len(groups) == 8 and all(g.b_copies is not None and g.shrink_kernel for g in groups)
    copies = [t for g in groups for t in g.b_copies[1]]
    assert all(t.dtype == torch.bfloat16 for t in copies)
    ptrs = {n: p.untyped_storage().data_ptr() for n, p in lora.items()}
    assert not {t.untyped_storage().data_ptr() for t in copies} & set(ptrs.values())
    a_ptrs = {t.untyped_storage().data_ptr() for g in groups for t in g.lora[0]}
    assert a_ptrs == {v for n, v in ptrs.items() if "lora_A" in n}  # A: the adapter's own tensors

    assert rollout_mismatch(model, prompts, first) < 0.1
    with torch.no_grad():
        for p in lora.values():
            p.add_(torch.randn_like(p) * 0.1)
    assert rollout_mismatch(model, prompts, first) > 0.5  # the update changes the model enough to tell
    assert rollout_mismatch(model, prompts, backend.generate(prompts, GREEDY)) < 0.1  # the refreshed copies

    plain = DecodeStep(model.get_base_model(), adapter_kernels=False)  # the torch shrink, B cast each step
    assert all(g.b_copies is None and not g.shrink_kernel for layer in plain.layers for g in layer[1:])


def test_bf16_copies_of_an_fp32_adapters_a_feed_the_shrink_kernel_and_follow_it(monkeypatch):
    """``a_copies`` (the default): the shrink kernel's op reads bf16 copies of A (not A itself) and the copies follow
    an in-place update of the adapter at the next generation; with ``a_copies=False``, and without the adapter
    kernels, no copies (asking for them there is refused)."""
    from qerl.kernels import ops
    from qerl.rollout import decode_step

    seen = []
    op = ops.lora_shrink_op
    monkeypatch.setattr(ops, "lora_shrink_op", lambda x, a, scales, reduce: seen.append([t.dtype for t in a])
                        or op(x, a, scales, reduce))
    monkeypatch.setattr(decode_step, "SHRINK_REDUCTION_MAX_M", 1)  # the 2 rows below take the kernel's op
    model = attach_test_adapter(_tiny(lora=False).to(torch.bfloat16), r=4, alpha=8)
    lora = {n: p for n, p in model.named_parameters() if "lora_" in n}
    assert lora and all(p.dtype == torch.float32 for p in lora.values())
    with pytest.raises(ValueError, match="adapter_kernels=True"):
        DecodeStep(model.get_base_model(), a_copies=True, adapter_kernels=False)
    for step in (DecodeStep(model.get_base_model(), a_copies=False),
                 DecodeStep(model.get_base_model(), adapter_kernels=False)):
        assert all(g.a_copies is None for layer in step.layers for g in layer[1:])
    with pytest.raises(ValueError, match="adapter_a_copies=True is read by the fused decode step"):
        HFRolloutBackend(model, TOKENIZER, fused_step=False, adapter_a_copies=True)
    HFRolloutBackend(model, TOKENIZER, fused_step=False)  # the default is no reason to refuse
    prompts = _prompts((5, 8))
    backend = HFRolloutBackend(model, TOKENIZER, fused_step=True)
    first = backend.generate(prompts, GREEDY)
    decoder = backend.decoder
    groups = [g for layer in decoder._fused.layers for g in layer[1:]]
    assert len(groups) == 8 and all(g.a_copies is not None for g in groups)
    copies = [t for g in groups for t in g.a_copies[1]]
    assert all(t.dtype == torch.bfloat16 for t in copies)
    a_ptrs = {p.untyped_storage().data_ptr() for n, p in lora.items() if "lora_A" in n}
    assert not {t.untyped_storage().data_ptr() for t in copies} & a_ptrs
    assert seen and all(dtypes == [torch.bfloat16] * len(dtypes) for dtypes in seen)

    assert rollout_mismatch(model, prompts, first) < 0.1
    with torch.no_grad():
        for p in lora.values():
            p.add_(torch.randn_like(p) * 0.1)
    assert rollout_mismatch(model, prompts, first) > 0.5
    assert rollout_mismatch(model, prompts, backend.generate(prompts, GREEDY)) < 0.1  # the refreshed copies
    for g in groups:
        for held, copy in zip(*g.a_copies):
            assert torch.equal(copy, held.detach().to(torch.bfloat16))


def test_the_multiply_sum_shrink_reads_the_copies_of_a_with_fp32_products():
    """At M <= SHRINK_REDUCTION_MAX_M the torch shrink reads the step's bf16 copies of A where it keeps them (their
    exact fp32 products with x, as the kernel's), A itself without copies; a copy changed alone changes u."""
    from qerl.kernels.ops import lora_shrink_reference
    from qerl.rollout.decode_step import SHRINK_REDUCTION_MAX_M

    model = attach_test_adapter(_tiny(lora=False).to(torch.bfloat16), r=4, alpha=8)
    base = model.get_base_model()
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_A" in name:
                p.normal_(0.0, 0.1)  # values bf16 cannot hold
    x = torch.randn(SHRINK_REDUCTION_MAX_M, 128).to(torch.bfloat16)
    with_copies, plain = (DecodeStep(base).layers[0].qkv, DecodeStep(base, a_copies=False).layers[0].qkv)
    a_list, _, scales = plain.lora
    copies = with_copies.a_copies[1]
    assert all(c.dtype == torch.bfloat16 for c in copies) and all(a.dtype == torch.float32 for a in a_list)
    u_copies, u_plain = with_copies._shrink(x, cast_b=False)[0], plain._shrink(x, cast_b=False)[0]
    on_copies, on_a = lora_shrink_reference(x, copies, scales), lora_shrink_reference(x, a_list, scales)
    assert (on_copies - on_a).abs().max() > 1e-3  # bf16 rounding of A shows at this tolerance
    torch.testing.assert_close(u_copies, on_copies, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(u_plain, on_a, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        copies[0].zero_()  # the copy alone: the adapter's A is untouched
    assert with_copies._shrink(x, cast_b=False)[0][0].abs().max() == 0
    torch.testing.assert_close(plain._shrink(x, cast_b=False)[0], on_a, rtol=1e-5, atol=1e-5)

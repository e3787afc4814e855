"""Loading a packed NVFP4 policy: logits match the dequantized dense model, memory is ~4.5 bits per weight, the
format survives dtype moves, and bad inputs give clear errors."""

from __future__ import annotations

import copy
import shutil

import pytest
import torch
from torch import nn

from qerl import nvfp4
from qerl.errors import NotNVFP4CheckpointError, UserError
from qerl.loading import load_policy, packed_model_bytes
from qerl.modules import NVFP4Linear, quantize_

pytestmark = pytest.mark.quantize_env


def dense_copy(model: nn.Module) -> nn.Module:
    """The same model with every NVFP4Linear replaced by an nn.Linear holding its dequantized weight."""
    dense = copy.deepcopy(model)
    for name, module in list(dense.named_modules()):
        if isinstance(module, NVFP4Linear):
            lin = nn.Linear(module.in_features, module.out_features, bias=module.bias is not None)
            lin.weight.data = module.dequantized_weight(torch.float32)
            if module.bias is not None:
                lin.bias.data = module.bias.data.float()
            parent, _, leaf = name.rpartition(".")
            setattr(dense.get_submodule(parent), leaf, lin)
    return dense


def _check_logits(path, tokenizer_text="What is 12 + 7? Answer:"):
    model, tok = load_policy(path, load="nvfp4", dtype=torch.float32)
    assert not any(type(m) is nn.Linear for n, m in model.named_modules() if not n.endswith("lm_head"))
    ids = tok(tokenizer_text, return_tensors="pt").input_ids
    with torch.no_grad():
        got = model(ids).logits
        want = dense_copy(model)(ids).logits
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), (got - want).abs().max()
    return model


def test_packed_logits_equal_dequantized_dense_tiny(tiny_qwen2_nvfp4_dir):
    model = _check_logits(tiny_qwen2_nvfp4_dir)
    q = model.model.layers[0].self_attn.q_proj
    assert isinstance(q, NVFP4Linear) and q.bias is not None  # Qwen2 q/k/v biases survive


def test_packed_logits_equal_dequantized_dense_smollm2(smollm2_nvfp4_dir):
    _check_logits(smollm2_nvfp4_dir)


def test_packed_memory_is_4_5_bits_per_weight(smollm2_nvfp4_dir):
    model, _ = load_policy(smollm2_nvfp4_dir, load="nvfp4")
    stats = packed_model_bytes(model)
    bits = stats["quantized_bytes"] * 8 / stats["quantized_weights"]
    assert 4.5 <= bits < 4.51, bits
    # No dense copy of any quantized weight is held anywhere in the model.
    n_dense = sum(p.numel() for n, p in model.named_parameters())
    embed = model.model.embed_tokens.weight.numel()
    norms_and_biases = n_dense - embed
    assert norms_and_biases < 0.01 * stats["quantized_weights"]


def test_dtype_moves_keep_the_format(tiny_qwen2_nvfp4_dir):
    model, _ = load_policy(tiny_qwen2_nvfp4_dir, load="nvfp4", dtype=torch.float32)
    q = model.model.layers[0].self_attn.q_proj
    before = (q.weight_packed.clone(), q.weight_scale.view(torch.uint8).clone(), q.weight_global_scale.clone())
    model.to(torch.bfloat16)
    assert q.weight_scale.dtype == torch.float8_e4m3fn and q.weight_global_scale.dtype == torch.float32
    assert torch.equal(q.weight_packed, before[0]) and torch.equal(q.weight_scale.view(torch.uint8), before[1])
    assert torch.equal(q.weight_global_scale, before[2])
    assert q.compute_dtype == torch.bfloat16 and q.bias.dtype == torch.bfloat16


def test_input_gradient_matches_dense():
    torch.manual_seed(0)
    lin = nn.Linear(64, 32)
    packed = NVFP4Linear.from_linear(lin)
    dense = nn.Linear(64, 32)
    dense.weight.data = packed.dequantized_weight(torch.float32)
    dense.bias.data = packed.bias.data.clone()
    x1 = torch.randn(3, 64, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    g = torch.randn(3, 32)
    (packed(x1) * g).sum().backward()
    (dense(x2) * g).sum().backward()
    assert torch.allclose(x1.grad, x2.grad, atol=1e-6)
    assert not any(t.requires_grad for t in packed.buffers())


def test_quantize_in_memory_matches_checkpoint(tiny_qwen2_dir, tiny_qwen2_nvfp4_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_qwen2_dir), dtype=torch.bfloat16)
    replaced = quantize_(model)
    assert len(replaced) == 14 and "lm_head" not in replaced
    loaded, _ = load_policy(tiny_qwen2_nvfp4_dir, load="nvfp4")
    for name in replaced:
        a, b = model.get_submodule(name), loaded.get_submodule(name)
        assert torch.equal(a.weight_packed, b.weight_packed), name
        assert torch.equal(a.weight_global_scale, b.weight_global_scale), name


def test_bad_inputs(tmp_path, tiny_qwen2_dir, tiny_qwen2_nvfp4_dir):
    with pytest.raises(UserError, match="does not exist"):
        load_policy(tmp_path / "nope", load="nvfp4")
    with pytest.raises(UserError, match="no config.json"):
        load_policy(tmp_path, load="bf16")
    with pytest.raises(NotNVFP4CheckpointError, match="quantize_nvfp4.py"):
        load_policy(tiny_qwen2_dir, load="nvfp4")
    with pytest.raises(UserError, match="--load nvfp4"):
        load_policy(tiny_qwen2_nvfp4_dir, load="bf16")
    with pytest.raises(UserError, match="unknown load mode"):
        load_policy(tiny_qwen2_dir, load="int3")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="nf4"):
            load_policy(tiny_qwen2_dir, load="nf4")
    # a checkpoint whose weights were removed: names what is missing
    broken = tmp_path / "broken"
    shutil.copytree(tiny_qwen2_nvfp4_dir, broken)
    from safetensors.torch import load_file, save_file

    st = next(broken.glob("*.safetensors"))
    tensors = load_file(str(st))
    del tensors["model.norm.weight"]
    save_file(tensors, str(st), metadata={"format": "pt"})
    with pytest.raises(UserError, match="missing weights"):
        load_policy(broken, load="nvfp4")


def test_odd_input_dim_cannot_be_packed():
    with pytest.raises(ValueError, match="multiple of 16"):
        NVFP4Linear(40, 16)
    assert nvfp4.GROUP_SIZE == 16


def test_kernel_layout_keeps_one_copy_and_the_same_function():
    pytest.importorskip("triton")
    torch.manual_seed(3)
    lin = nn.Linear(576, 40, bias=True)  # K not a multiple of the kernels' 128-element chunk
    packed = NVFP4Linear.from_linear(lin)
    x = torch.randn(2, 576)
    want = packed(x)
    before = packed.packed()
    packed.to_kernel_layout()
    assert packed.kernel_layout and packed._buffers["weight_packed"] is None
    assert "weight_packed" not in packed.state_dict() and "kernel_codes" in packed.state_dict()
    after = packed.packed()  # reconstructed exactly from the kernel layout
    assert torch.equal(after.packed, before.packed)
    assert torch.equal(after.scale.view(torch.uint8), before.scale.view(torch.uint8))
    assert torch.equal(packed(x), want)  # off CUDA it still computes through the codec
    packed.to(torch.bfloat16)
    assert packed.weight_global_scale.dtype == torch.float32 and packed.kernel_codes.dtype == torch.uint8


def test_input_gradient_rows_copy_is_the_same_weight_and_not_saved():
    """``to_kernel_layout(input_grad_rows=True)`` (before or after the switch) keeps the codes a second time in the
    "rows" layout, converting back to the same codec tensors, outside the state dict (derived data); the backward
    keeps the "pairs" weight off CUDA."""
    pytest.importorskip("triton")
    from qerl.kernels import codec_from_kernel_weight
    from qerl.kernels.nvfp4_gemm import grad_input_weight

    torch.manual_seed(5)
    for switched_first in (False, True):
        packed = NVFP4Linear.from_linear(nn.Linear(576, 40))
        before = packed.packed()
        assert packed.kernel_weight_rows() is None
        if switched_first:
            packed.to_kernel_layout()
            assert packed.kernel_weight_rows() is None
        packed.to_kernel_layout(input_grad_rows=True)
        rows = packed.kernel_weight_rows()
        assert rows.rows and rows.codes.shape == packed.kernel_codes.shape
        assert rows.scales is packed.kernel_scales  # one copy of the scales serves both layouts
        back_packed, back_scale = codec_from_kernel_weight(rows)
        assert torch.equal(back_packed, before.packed)
        assert torch.equal(back_scale.view(torch.uint8), before.scale.view(torch.uint8))
        assert "kernel_codes_rows" not in packed.state_dict() and "kernel_codes" in packed.state_dict()
        dy = torch.randn(3, 40, dtype=torch.bfloat16)
        assert grad_input_weight(dy, packed.kernel_weight(), rows) is not rows  # no GPU: the "pairs" weight
    with pytest.raises(ValueError, match="--load nvfp4"):
        from qerl.config import QeRLConfig

        QeRLConfig(output_dir="/tmp/unused", load="bf16", kernel_input_grad_rows=True)


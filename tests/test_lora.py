"""peft LoRA on packed NVFP4 layers: placement, gradients only in adapters, save/load, refusal to merge, and the
peft hooks this relies on (the test fails if peft moves them)."""

from __future__ import annotations

import pytest
import torch

from qerl import lora
from qerl.errors import AdapterMismatchError, UserError
from qerl.loading import load_policy
from qerl.modules import NVFP4Linear

pytestmark = pytest.mark.quantize_env


def test_peft_hooks_we_rely_on_exist():
    from peft import LoraConfig
    from peft.tuners.lora import Linear as LoraLinear

    assert callable(getattr(LoraConfig, "_register_custom_module", None)), "peft removed custom-module dispatch"
    assert callable(getattr(LoraLinear, "_get_base_layer_device_and_dtype", None)), "peft renamed the device hook"


def test_lora_attaches_to_all_seven_projections(tiny_qwen2_nvfp4_dir):
    model, _ = load_policy(tiny_qwen2_nvfp4_dir, load="nvfp4", dtype=torch.float32)
    peft_model = lora.attach_lora(model, r=8, alpha=16)
    wrapped = [n for n, m in peft_model.named_modules() if isinstance(m, lora.NVFP4LoraLinear)]
    assert len(wrapped) == 2 * 7
    layer = peft_model.base_model.model.model.layers[0].mlp.down_proj
    assert isinstance(layer.base_layer, NVFP4Linear)
    assert layer.lora_A["default"].weight.dtype == torch.float32


def test_gradients_reach_only_adapter_params(tiny_qwen2_nvfp4_dir):
    model, tok = load_policy(tiny_qwen2_nvfp4_dir, load="nvfp4", dtype=torch.float32)
    peft_model = lora.attach_lora(model, r=4, alpha=8)
    # make B non-zero so A also receives gradient
    for name, p in peft_model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02)
    ids = tok("Compute 3 + 4.", return_tensors="pt").input_ids
    peft_model(ids, labels=ids).loss.backward()
    with_grad = {n for n, p in peft_model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    trainable = {n for n, p in peft_model.named_parameters() if p.requires_grad}
    assert with_grad == trainable and len(trainable) == 2 * 7 * 2
    assert all("lora_" in n for n in trainable)
    assert all(not b.requires_grad for b in peft_model.buffers())


def test_adapter_save_load_roundtrip_and_merge_refused(tiny_qwen2_nvfp4_dir, tmp_path):
    model, tok = load_policy(tiny_qwen2_nvfp4_dir, load="nvfp4", dtype=torch.float32)
    peft_model = lora.attach_lora(model, r=4, alpha=8)
    for name, p in peft_model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)
    ids = tok("Hello there", return_tensors="pt").input_ids
    with torch.no_grad():
        want = peft_model(ids).logits
        base = peft_model.get_base_model()
        with peft_model.disable_adapter():
            plain = base(ids).logits
    assert not torch.allclose(want, plain)  # the adapter changes outputs
    peft_model.save_pretrained(str(tmp_path / "adapter"))
    fresh, _ = load_policy(tiny_qwen2_nvfp4_dir, load="nvfp4", dtype=torch.float32)
    loaded = lora.load_adapter(fresh, tmp_path / "adapter")
    with torch.no_grad():
        got = loaded(ids).logits
    assert torch.allclose(got, want, atol=1e-5)
    with pytest.raises(UserError, match="merging"):
        loaded.merge_and_unload()


def test_adapter_for_another_base_is_refused(tiny_qwen2_nvfp4_dir, smollm2_nvfp4_dir, tmp_path):
    model, _ = load_policy(tiny_qwen2_nvfp4_dir, load="nvfp4", dtype=torch.float32)
    lora.attach_lora(model, r=4).save_pretrained(str(tmp_path / "tiny_adapter"))
    other, _ = load_policy(smollm2_nvfp4_dir, load="nvfp4", dtype=torch.float32)
    with pytest.raises(AdapterMismatchError, match="does not fit"):
        lora.load_adapter(other, tmp_path / "tiny_adapter")
    with pytest.raises(UserError, match="adapter_config.json"):
        lora.load_adapter(other, tmp_path)


def test_trained_norms_save_and_load(tiny_qwen2_nvfp4_dir, tmp_path):
    model, _ = load_policy(tiny_qwen2_nvfp4_dir, load="nvfp4", dtype=torch.float32)
    peft_model = lora.attach_lora(model, r=4)
    names = [n for n, _ in peft_model.named_parameters() if n.endswith("input_layernorm.weight")]
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if n in names:
                p.add_(0.25)
    peft_model.save_pretrained(str(tmp_path / "a"))
    lora.save_norms(peft_model, tmp_path / "a", names)
    fresh, _ = load_policy(tiny_qwen2_nvfp4_dir, load="nvfp4", dtype=torch.float32)
    loaded = lora.load_adapter(fresh, tmp_path / "a")
    got = loaded.base_model.model.model.layers[1].input_layernorm.weight
    want = peft_model.base_model.model.model.layers[1].input_layernorm.weight
    assert torch.equal(got, want)

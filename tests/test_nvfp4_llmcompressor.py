"""Our codec agrees bit for bit with llmcompressor's NVFP4A16 checkpoints (made by quantize_nvfp4.py in the
quantize env inside the test session), on a tiny random Qwen2 and on the real SmolLM2-135M-Instruct."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from qerl import nvfp4

pytestmark = pytest.mark.quantize_env

FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"), ("o_proj",), ("down_proj",))


def _compare(src_dir, quant_dir) -> int:
    from transformers import AutoModelForCausalLM

    # quantize_nvfp4.py loads the source in bf16 before quantizing; do the same here.
    dense = AutoModelForCausalLM.from_pretrained(str(src_dir), dtype=torch.bfloat16).state_dict()
    packed = {}
    for f in sorted(quant_dir.glob("*.safetensors")):
        packed.update(load_file(str(f)))
    n_layers = json.loads((src_dir / "config.json").read_text())["num_hidden_layers"]
    checked = 0
    for layer in range(n_layers):
        for group in FUSED:
            block = "self_attn" if group[0] in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
            names = [f"model.layers.{layer}.{block}.{g}" for g in group]
            gs = nvfp4.global_scale_for([dense[n + ".weight"] for n in names])
            for n in names:
                ours = nvfp4.quantize(dense[n + ".weight"], gs)
                assert torch.equal(ours.global_scale, packed[n + ".weight_global_scale"]), n
                assert torch.equal(ours.scale.view(torch.uint8), packed[n + ".weight_scale"].view(torch.uint8)), n
                assert torch.equal(ours.packed, packed[n + ".weight_packed"]), n
                theirs = nvfp4.dequantize(packed[n + ".weight_packed"], packed[n + ".weight_scale"],
                                          packed[n + ".weight_global_scale"])
                assert torch.equal(ours.dequantize(), theirs)
                checked += 1
    return checked


def test_bit_exact_tiny_qwen2(tiny_qwen2_dir, tiny_qwen2_nvfp4_dir):
    assert _compare(tiny_qwen2_dir, tiny_qwen2_nvfp4_dir) == 2 * 7


def test_bit_exact_smollm2(smollm2_dir, smollm2_nvfp4_dir):
    assert _compare(smollm2_dir, smollm2_nvfp4_dir) == 30 * 7


def test_checkpoint_layout(tiny_qwen2_nvfp4_dir):
    cfg = json.loads((tiny_qwen2_nvfp4_dir / "config.json").read_text())["quantization_config"]
    assert cfg["quant_method"] == "compressed-tensors" and cfg["format"] == "nvfp4-pack-quantized"
    assert "lm_head" in cfg["ignore"]
    weights = cfg["config_groups"]["group_0"]["weights"]
    assert (weights["num_bits"], weights["group_size"], weights["type"]) == (4, 16, "float")
    manifest = json.loads((tiny_qwen2_nvfp4_dir / "qerl_quantize.json").read_text())
    assert manifest["method"] == "rtn" and "llmcompressor" in manifest["versions"]
    t = load_file(str(next(tiny_qwen2_nvfp4_dir.glob("*.safetensors"))))
    q = "model.layers.0.self_attn.q_proj"
    assert t[q + ".weight_packed"].dtype == torch.uint8 and t[q + ".weight_packed"].shape == (64, 32)
    assert t[q + ".weight_scale"].dtype == torch.float8_e4m3fn and t[q + ".weight_scale"].shape == (64, 4)
    assert t[q + ".weight_global_scale"].dtype == torch.float32
    assert q + ".weight" not in t

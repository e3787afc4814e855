"""scripts/nvfp4_rebuild.py: llmcompressor's NVFP4 checkpoint rebuilt from its dense source with the codec, checked
against the original's tensor hashes; a wrong source is refused and nothing is written."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

pytestmark = pytest.mark.quantize_env

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "nvfp4_rebuild.py"


def _script():
    spec = importlib.util.spec_from_file_location("nvfp4_rebuild", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8)


def test_rebuild_equals_llmcompressor_checkpoint(tmp_path, tiny_qwen2_dir, tiny_qwen2_nvfp4_dir):
    rb = _script()
    assert rb.main(["manifest", "--checkpoint", str(tiny_qwen2_nvfp4_dir), "--out", str(tmp_path / "man")]) == 0
    # The manifest is small: hashes and the non-weight files, no tensor data.
    assert not list((tmp_path / "man").glob("*.safetensors"))
    assert (tmp_path / "man" / "config.json").read_text() == (tiny_qwen2_nvfp4_dir / "config.json").read_text()
    out = tmp_path / "rebuilt"
    assert rb.main(["rebuild", "--dense", str(tiny_qwen2_dir), "--manifest", str(tmp_path / "man"),
                    "--out", str(out)]) == 0
    ours = load_file(str(out / "model.safetensors"))
    theirs = {}
    for f in tiny_qwen2_nvfp4_dir.glob("*.safetensors"):
        theirs.update(load_file(str(f)))
    assert ours.keys() == theirs.keys()
    for name, t in theirs.items():
        assert ours[name].dtype == t.dtype and torch.equal(_bytes(ours[name]), _bytes(t)), name
    # Quantized projections and bf16 tensors (q/k/v biases, norms, embeddings) are both covered.
    assert any(n.endswith(".weight_packed") for n in ours) and any(n.endswith("q_proj.bias") for n in ours)
    assert (out / "tokenizer.json").is_file() and not (out / rb.MANIFEST).exists()


def test_rebuild_from_another_source_is_refused(tmp_path, tiny_qwen2_dir, tiny_qwen2_nvfp4_dir, capsys):
    rb = _script()
    rb.write_manifest(tiny_qwen2_nvfp4_dir, tmp_path / "man")
    dense = tmp_path / "dense"
    shutil.copytree(tiny_qwen2_dir, dense)
    f = next(dense.glob("*.safetensors"))
    state = load_file(str(f))
    name = "model.layers.1.mlp.down_proj.weight"
    state[name] = state[name] * 1.5
    save_file(state, str(f), metadata={"format": "pt"})
    out = tmp_path / "rebuilt"
    assert rb.main(["rebuild", "--dense", str(dense), "--manifest", str(tmp_path / "man"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "differ from the manifest" in err and "model.layers.1.mlp.down_proj.weight_" in err
    assert not out.exists() and not list(tmp_path.glob("rebuilt.tmp-*"))


def test_rebuild_without_manifest_names_the_fix(tmp_path, tiny_qwen2_dir, capsys):
    rb = _script()
    assert rb.main(["rebuild", "--dense", str(tiny_qwen2_dir), "--manifest", str(tmp_path), "--out",
                    str(tmp_path / "o")]) == 2
    assert "nvfp4_rebuild.py manifest" in capsys.readouterr().err


def test_manifest_records_every_tensor(tmp_path, tiny_qwen2_nvfp4_dir):
    rb = _script()
    rb.write_manifest(tiny_qwen2_nvfp4_dir, tmp_path / "man")
    tensors = json.loads((tmp_path / "man" / rb.MANIFEST).read_text())["tensors"]
    t = load_file(str(next(tiny_qwen2_nvfp4_dir.glob("*.safetensors"))))
    assert set(tensors) == set(t)
    q = "model.layers.0.self_attn.q_proj.weight_scale"
    assert tensors[q]["dtype"] == "float8_e4m3fn" and tensors[q]["shape"] == list(t[q].shape)
    assert tensors[q]["sha256"] == rb.tensor_sha256(t[q])

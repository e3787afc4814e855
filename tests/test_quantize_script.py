"""llm-compressor/quantize_nvfp4.py: bad inputs give one clear error (exit 2) and never leave partial output;
layers NVFP4 cannot hold stay BF16 and are listed; GGUF input works (exercised by the SmolLM2 fixture)."""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import run_quantize

pytestmark = pytest.mark.quantize_env


def _err(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr[-2000:]
    return lines[0]


def test_missing_model_path(tmp_path):
    assert "does not exist" in _err(run_quantize("--model", str(tmp_path / "missing"), check=False))
    assert "exactly one" in _err(run_quantize("--output", str(tmp_path / "o"), check=False))


def test_unsupported_architecture(tmp_path, tiny_qwen2_dir):
    src = tmp_path / "gpt"
    src.mkdir()
    cfg = json.loads((tiny_qwen2_dir / "config.json").read_text())
    cfg["architectures"] = ["GPT2LMHeadModel"]
    (src / "config.json").write_text(json.dumps(cfg))
    msg = _err(run_quantize("--model", str(src), "--output", str(tmp_path / "out"), check=False))
    assert "unsupported architecture" in msg and "Qwen2ForCausalLM" in msg
    assert not (tmp_path / "out").exists()


def test_existing_output_refused_unless_overwrite(tmp_path, tiny_qwen2_dir):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    msg = _err(run_quantize("--model", str(tiny_qwen2_dir), "--output", str(out), check=False))
    assert "--overwrite" in msg and (out / "keep.txt").read_text() == "precious"
    run_quantize("--model", str(tiny_qwen2_dir), "--output", str(out), "--overwrite")
    assert (out / "config.json").is_file() and not (out / "keep.txt").exists()


def test_already_quantized_source_refused(tmp_path, tiny_qwen2_nvfp4_dir):
    msg = _err(run_quantize("--model", str(tiny_qwen2_nvfp4_dir), "--output", str(tmp_path / "o"), check=False))
    assert "already quantized" in msg


def test_failed_run_leaves_no_partial_output(tmp_path, tiny_qwen2_dir):
    empty = tmp_path / "calib.jsonl"
    empty.write_text("")
    out = tmp_path / "out"
    proc = run_quantize("--model", str(tiny_qwen2_dir), "--output", str(out), "--method", "gptq",
                        "--calib-dataset", str(empty), check=False)
    assert proc.returncode != 0
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".quantize-")]


def test_odd_input_dims_stay_bf16_and_are_listed(tmp_path, smollm2_dir):
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(str(smollm2_dir))
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=40, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    src = tmp_path / "odd"
    Qwen2ForCausalLM(cfg).save_pretrained(str(src))
    tok.save_pretrained(str(src))
    proc = run_quantize("--model", str(src), "--output", str(tmp_path / "odd-nvfp4"))
    assert "model.layers.0.mlp.down_proj" in proc.stdout and "multiple of 16" in proc.stdout
    manifest = json.loads((tmp_path / "odd-nvfp4" / "qerl_quantize.json").read_text())
    assert "model.layers.0.mlp.down_proj" in manifest["bf16_layers"]
    from qerl.loading import load_policy
    from qerl.modules import NVFP4Linear

    model, _ = load_policy(tmp_path / "odd-nvfp4", load="nvfp4")
    assert type(model.model.layers[0].mlp.down_proj) is torch.nn.Linear
    assert isinstance(model.model.layers[0].mlp.up_proj, NVFP4Linear)


def test_gguf_source(tmp_path):
    missing = _err(run_quantize("--gguf-file", str(tmp_path / "x.gguf"), "--output", str(tmp_path / "o"),
                                check=False))
    assert "does not exist" in missing


def test_gptq_calibrated_checkpoint_loads_and_differs_from_rtn(tmp_path, tiny_qwen2_dir, tiny_qwen2_nvfp4_dir):
    import json as _json

    from qerl.loading import load_policy

    calib = tmp_path / "calib.jsonl"
    calib.write_text("\n".join(_json.dumps({"question": f"What is {a} + {b}?", "answer": str(a + b)})
                               for a in range(4) for b in range(4)))
    out = tmp_path / "gptq"
    run_quantize("--model", str(tiny_qwen2_dir), "--output", str(out), "--method", "gptq",
                 "--calib-dataset", str(calib), "--num-calib-samples", "8", "--max-seq-len", "64")
    manifest = json.loads((out / "qerl_quantize.json").read_text())
    assert manifest["method"] == "gptq" and manifest["calibration"]["num_samples"] == 8
    gptq, tok = load_policy(out, load="nvfp4", dtype=torch.float32)
    rtn, _ = load_policy(tiny_qwen2_nvfp4_dir, load="nvfp4", dtype=torch.float32)
    name = "model.layers.0.mlp.down_proj"
    assert not torch.equal(gptq.get_submodule(name).weight_packed, rtn.get_submodule(name).weight_packed)
    ids = tok("What is 2 + 2?", return_tensors="pt").input_ids
    assert torch.isfinite(gptq(ids).logits).all()


def test_awq_without_gpu_is_refused(tmp_path, tiny_qwen2_dir):
    if torch.cuda.is_available():
        pytest.skip("AWQ runs on GPU machines")
    msg = _err(run_quantize("--model", str(tiny_qwen2_dir), "--output", str(tmp_path / "awq"), "--method", "awq",
                            check=False))
    assert "needs a CUDA GPU" in msg and not (tmp_path / "awq").exists()

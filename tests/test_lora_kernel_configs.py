"""Launch-config tables: vLLM's LoRA kernels (qerl/rollout/vllm_lora_configs.py + the shipped tables +
benchmarks/tune_vllm_lora.py's table helpers) and this project's NVFP4 GEMM (QERL_TUNED_CONFIGS)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qerl.config import QeRLConfig
from qerl.errors import UserError
from qerl.rollout import vllm_lora_configs as lkc

ROOT = Path(__file__).resolve().parents[1]


def _tune_module():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("tune_vllm_lora", ROOT / "benchmarks" / "tune_vllm_lora.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


# ------------------------------------------------------------------------------------------ choosing the folder
def test_auto_uses_shipped_tables_only_for_a_gpu_they_cover(monkeypatch):
    monkeypatch.delenv(lkc.ENV, raising=False)
    for gpu in ("NVIDIA_H200", "NVIDIA_H100_80GB_HBM3"):
        for kind in ("SHRINK", "EXPAND_TRUE", "EXPAND_FALSE"):
            assert (lkc.SHIPPED_DIR / f"{gpu}_{kind}.json").is_file()
    assert lkc.resolve("auto", "NVIDIA H100 80GB HBM3") == str(lkc.SHIPPED_DIR)
    assert lkc.resolve("auto", "NVIDIA H200") == str(lkc.SHIPPED_DIR)
    assert lkc.resolve("auto", "NVIDIA A10G") is None  # no table for it: vLLM's defaults
    assert lkc.resolve("auto", None) is None  # no GPU


def test_auto_keeps_a_folder_the_user_already_set(monkeypatch, tmp_path):
    monkeypatch.setenv(lkc.ENV, str(tmp_path))
    assert lkc.resolve("auto", "NVIDIA H200") == str(tmp_path)


def test_vllm_choice_clears_the_variable(monkeypatch):
    monkeypatch.setenv(lkc.ENV, "/somewhere")
    assert lkc.apply("vllm", "NVIDIA H200") is None
    assert lkc.ENV not in os.environ


def test_a_folder_must_hold_tables(monkeypatch, tmp_path):
    monkeypatch.delenv(lkc.ENV, raising=False)
    with pytest.raises(UserError, match="tune_vllm_lora.py"):
        lkc.resolve(str(tmp_path), "NVIDIA H200")
    with pytest.raises(UserError, match="not a folder"):
        lkc.resolve(str(tmp_path / "missing"), "NVIDIA H200")
    (tmp_path / "NVIDIA_H100_80GB_HBM3_SHRINK.json").write_text("{}")
    assert lkc.apply(str(tmp_path), "NVIDIA H100 80GB HBM3") == str(tmp_path.resolve())
    assert os.environ[lkc.ENV] == str(tmp_path.resolve())


def test_gpu_file_stem_matches_vllms_file_names():
    assert lkc.gpu_file_stem("NVIDIA H100 80GB HBM3") == "NVIDIA_H100_80GB_HBM3"
    assert lkc.gpu_file_stem("NVIDIA H200") == "NVIDIA_H200"
    assert lkc.gpu_file_stem("NVIDIA GH200 480GB-x") == "NVIDIA_GH200_480GB_x"


def test_config_field_defaults_to_auto():
    assert QeRLConfig(output_dir="/tmp/x").vllm_lora_kernel_configs == "auto"


# ------------------------------------------------------------------------------------------ the table helpers
def test_candidates_are_launchable_shapes():
    t = _tune_module()
    for m in (1, 8, 64):
        for c in t.shrink_candidates(m):
            assert min(c["block_m"], c["block_n"], c["block_k"]) >= 16 and c["split_k"] >= 1
            assert {"num_warps", "num_stages", "num_ctas", "group_size_m"} <= set(c)
        for c in t.expand_candidates(m, 32):
            assert min(c["block_m"], c["block_n"], c["block_k"]) >= 16
            assert {"num_warps", "num_stages", "num_ctas"} <= set(c)
    assert all(c["block_k"] <= 32 for c in t.expand_candidates(8, 32))  # K of the expand is the rank


def test_large_token_counts_keep_vllms_default_and_every_slice_count_has_an_entry():
    t = _tune_module()
    table: dict = {}
    t.nested_set(table, ["2", "3", "8", "5120", "32"], {"tuned": "qkv"})
    t.nested_set(table, ["2", "1", "8", "13824", "32"], {"tuned": "down"})
    seen = []

    def default_for(op, batch, num_slices):
        seen.append((op, batch, num_slices))
        return {"default": batch}

    t.add_default_at(table, "shrink", 128, default_for)
    assert table["2"]["3"]["128"] == {"5120": {"32": {"default": 128}}}
    assert table["2"]["1"]["128"] == {"13824": {"32": {"default": 128}}}
    assert ("shrink", 128, 3) in seen
    t.nested_set(table, ["2", "3", "128", "5120", "32"], {"tuned": "kept"})
    t.add_default_at(table, "shrink", 128, default_for)  # a tuned entry at that M is not replaced
    assert table["2"]["3"]["128"]["5120"]["32"] == {"tuned": "kept"}
    t.fill_slice_counts(table)
    assert sorted(table["2"], key=int) == ["1", "2", "3", "4"]
    assert table["2"]["2"] == table["2"]["1"]  # ties go to the smaller count
    assert table["2"]["4"] == table["2"]["3"]


@pytest.mark.parametrize("name", sorted(p.name for p in lkc.SHIPPED_DIR.glob("*.json")))
def test_shipped_tables_have_the_structure_vllm_indexes(name):
    table = json.loads((lkc.SHIPPED_DIR / name).read_text())
    need = {"block_m", "block_n", "block_k", "num_warps", "num_stages", "num_ctas"}
    need |= {"split_k"} if "SHRINK" in name else set()
    for per_loras in table.values():
        assert {"1", "2", "3", "4"} <= set(per_loras)
        for per_m in per_loras.values():
            assert "128" in per_m  # vLLM's default from here up
            for per_k in per_m.values():
                for per_n in per_k.values():
                    for cfg in per_n.values():
                        assert need <= set(cfg), cfg


@pytest.mark.vllm_cpu
def test_installed_vllm_reads_the_shipped_tables(monkeypatch):
    """Through vLLM's own lookup (what its shrink / expand ops call): tuned entries for decode, its defaults for
    prefill-sized token counts, and an answer for every slice count and size. Fails when upstream moves the lookup."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("vllm")
    import vllm.envs as envs
    from vllm.lora.ops.triton_ops import utils

    if hasattr(envs, "disable_envs_cache"):
        envs.disable_envs_cache()  # an engine started earlier in this process may have frozen the environment
    monkeypatch.setenv(lkc.ENV, str(lkc.SHIPPED_DIR))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "NVIDIA H200")
    utils.load_lora_op_config.cache_clear()
    utils.get_lora_op_configs.cache_clear()
    try:
        shipped = json.loads((lkc.SHIPPED_DIR / "NVIDIA_H200_SHRINK.json").read_text())
        got = utils.get_lora_op_configs("shrink", max_loras=2, batch=8, hidden_size=5120, rank=32, num_slices=3)
        assert got == shipped["2"]["3"]["8"]["5120"]["32"]
        monkeypatch.delenv(lkc.ENV)
        utils.load_lora_op_config.cache_clear()
        utils.get_lora_op_configs.cache_clear()
        vllm_default = utils.get_lora_op_configs("shrink", max_loras=2, batch=4096, hidden_size=5120, rank=32,
                                                 num_slices=3)
        monkeypatch.setenv(lkc.ENV, str(lkc.SHIPPED_DIR))
        utils.load_lora_op_config.cache_clear()
        utils.get_lora_op_configs.cache_clear()
        prefill = utils.get_lora_op_configs("shrink", max_loras=2, batch=4096, hidden_size=5120, rank=32,
                                            num_slices=3)
        assert {k: prefill[k] for k in ("block_m", "block_k", "split_k")} == \
            {k: vllm_default[k] for k in ("block_m", "block_k", "split_k")}
        for op in ("shrink", "expand"):
            for slices in (1, 2, 3, 4):
                for batch in (1, 3, 8, 16, 64, 200, 8192):
                    for size in (896, 3584, 5120, 27648):
                        kw = {"add_inputs": True} if op == "expand" else {}
                        cfg = utils.get_lora_op_configs(op, max_loras=2, batch=batch, hidden_size=size, rank=16,
                                                        num_slices=slices, **kw)
                        assert cfg["block_m"] >= 16 and cfg["num_warps"] >= 1
    finally:
        utils.load_lora_op_config.cache_clear()
        utils.get_lora_op_configs.cache_clear()


# ------------------------------------------------------------------------------------------ NVFP4 GEMM tables
def test_gemm_tables_load_from_the_environment(tmp_path):
    table = {"fwd|8|1234|5120": {"mode": 2, "bm": 8, "bn": 64, "ch": 1, "split_k": 9, "num_warps": 2,
                                 "num_stages": 3, "group_m": 8, "asm": True, "fused": True, "maxnreg": None}}
    path = tmp_path / "tuned_configs.json"
    path.write_text(json.dumps(table))
    code = ("from qerl.kernels import nvfp4_gemm as k; import torch; "
            "print(k.fwd_config(5, 1234, 5120, torch.device('cpu')))")
    env = {**os.environ, "QERL_TUNED_CONFIGS": f"{tmp_path / 'none.json'}"}
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert bad.returncode != 0 and "unset QERL_TUNED_CONFIGS" in bad.stderr
    env["QERL_TUNED_CONFIGS"] = str(path)
    good = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert good.returncode == 0, good.stderr
    assert "FwdConfig(mode=2, bm=8, bn=64, ch=1, split_k=9" in good.stdout

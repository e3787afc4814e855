"""training/smollm2_nvfp4_vs_bf16.sh end to end on tiny checkpoints: each base and config trains, every base and
adapter is evaluated, the table is written, and a second call keeps what the first finished."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.quantize_env

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "training" / "smollm2_nvfp4_vs_bf16.sh"
TINY = ["--max_steps", "2", "--per_device_train_batch_size", "4", "--num_generations", "2",
        "--max_completion_length", "8", "--report_to", "none", "--disable_tqdm", "true"]


def _run(out: Path, dense: Path, nvfp4: Path, *extra: str, configs: str = "nvfp4_aqn bf16"):
    env = dict(os.environ, QERL_SKIP_SETUP="1", OUT=str(out), DENSE=str(dense), NVFP4=str(nvfp4), SEEDS="1",
               CONFIGS=configs, EVAL_LIMIT="4")
    return subprocess.run(["bash", str(SCRIPT), *TINY, *extra], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)


def test_compare_script_trains_evaluates_and_resumes(tmp_path, tiny_qwen2_dir, tiny_qwen2_nvfp4_dir):
    out = tmp_path / "cmp"
    proc = _run(out, tiny_qwen2_dir, tiny_qwen2_nvfp4_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = ["nvfp4_aqn_s1", "bf16_s1"]  # seed 1: the runs' names carry it
    assert proc.stdout.count("[compare] training") == 2
    for run in runs:
        assert (out / "runs" / run / "final" / "adapter_model.safetensors").is_file()
        ev = json.loads((out / "eval" / f"trained_{run}.json").read_text())
        assert ev["n_problems"] == 4 and ev["adapter"]
        history = json.loads((out / "logs" / f"state_{run}.json").read_text())["log_history"]
        assert [h["step"] for h in history if "reward" in h] == [1, 2]
    # The BF16 run trains on the dense checkpoint, the others on the NVFP4 one.
    assert json.loads((out / "eval" / "trained_bf16_s1.json").read_text())["load"] == "bf16"
    assert json.loads((out / "eval" / "trained_nvfp4_aqn_s1.json").read_text())["load"] == "nvfp4"
    assert json.loads((out / "eval" / "base_nvfp4.json").read_text())["load"] == "nvfp4"
    table = (out / "table.md").read_text()
    assert "| base, bf16 |" in table and "| config | seed 1 | mean |" in table
    assert "\n| nvfp4_aqn | " in table and "\n| bf16 | " in table
    assert table.count("| 2 |") == 2  # every run's two logged steps

    again = _run(out, tiny_qwen2_dir, tiny_qwen2_nvfp4_dir)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "[compare] training" not in again.stdout  # finished runs are kept, not retrained


def test_compare_script_refuses_an_unknown_config(tmp_path, tiny_qwen2_dir, tiny_qwen2_nvfp4_dir):
    proc = _run(tmp_path / "cmp", tiny_qwen2_dir, tiny_qwen2_nvfp4_dir, configs="nvfp4 fp8")
    assert proc.returncode == 2 and "unknown config fp8" in proc.stderr
    assert not (tmp_path / "cmp").exists()

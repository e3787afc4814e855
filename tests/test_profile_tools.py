"""benchmarks/profile_gemm.py (the launch Nsight Compute profiles) and benchmarks/profile_summary.py (its per-instruction
CSVs condensed), on CPU: the launch under Triton's interpreter on a tiny shape, the summary on a run's real CSVs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN6 = ROOT / "benchmarks/results/run6_h200_2026-11-23"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_profile_launch_runs_the_shipped_config_under_the_interpreter(direction):
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks/profile_gemm.py"), "--model", "tiny", "--layer", "x",
                          "--m", "3", "--dir", direction, "--calls", "2"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["finite"] and info["out_shape"] == [3, 96 if direction == "fwd" else 128]
    assert {"mode", "bm", "bn"} <= set(info["config"])


def test_profile_launch_names_the_layers_of_a_model():
    with pytest.raises(SystemExit):
        _load("profile_gemm").main(["--model", "7b", "--layer", "lm_head"])


def test_summary_of_a_real_profile_finds_the_uncoalesced_scale_loads():
    """Run 6's CSVs (ncu 2025.3.1, H200): the previous scale layout's 4-byte loads pulled a 32-byte sector each."""
    summary = _load("profile_summary")
    md = summary.main([str(RUN6 / "profile/sass.tar.gz"), "--top", "3"])
    section = md.split("### 7b_gate_up_m1_fwd_qerl")[1].split("###")[0]
    assert "excessive 805120 (21.5%)" in section
    assert "LDGSTS.E" in section.split("Global sectors")[1]
    after = summary.main([str(RUN6 / "scale_layout/sass_new.tar.gz"), "--top", "3"])
    assert "(0.3%)" in after.split("### 7b_gate_up_m1_fwd_qerl")[1]


def test_summary_counts_stall_reasons_per_instruction(tmp_path):
    header = ('"Address","Source","Warp Stall Sampling (All Samples)","L2 Theoretical Sectors Global Excessive",'
              '"L2 Theoretical Sectors Global","L2 Theoretical Sectors Global Ideal","stall_long_sb","stall_math",'
              '"stall_long_sb (Not Issued)"')
    rows = ['"0x0","  LDG.E R2, [R4]","30","6","8","2","30","0","29"', '"0x10","  FFMA R1, R2, R3, R1","10","0","0",'
            '"0","2","8","0"']
    (tmp_path / "k.csv").write_text('"Kernel Name","k",\n' + "\n".join([header, *rows]) + "\n")
    md = _load("profile_summary").main([str(tmp_path), "--md", str(tmp_path / "s.md")])
    assert "long_sb 80.0, math 20.0" in md and "| `LDG.E R2, [R4]` | 75.0 | long_sb 100% |" in md
    assert "excessive 6 (75.0%)" in md and (tmp_path / "s.md").read_text() == md
    (tmp_path / "k.csv").write_text("no table here\n")
    with pytest.raises(ValueError, match="no per-instruction table"):
        _load("profile_summary").main([str(tmp_path)])

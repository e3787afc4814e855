"""Every shipped config parses with trl's TrlParser into QeRLConfig; the launch scripts point at real configs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from trl import TrlParser

from qerl.config import QeRLConfig

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted(p for p in (ROOT / "configs").glob("*.yaml") if not p.name.startswith("accelerate"))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_config_parses(config, tmp_path):
    (args,) = TrlParser((QeRLConfig,)).parse_args_and_config(
        ["--config", str(config), "--output_dir", str(tmp_path), "--model_name_or_path", "m", "--lora_r", "8"]
    )
    assert args.lora_r == 8  # CLI overrides YAML
    assert args.loss_type in ("grpo", "dapo", "dr_grpo")


def test_paper_presets(tmp_path):
    def parse(name, *extra):
        (a,) = TrlParser((QeRLConfig,)).parse_args_and_config(
            ["--config", str(ROOT / "configs" / name), "--output_dir", str(tmp_path), *extra])
        return a

    g = parse("gsm8k_grpo.yaml", "--load", "bf16")
    assert (g.loss_type, g.num_generations, g.max_completion_length, g.beta, g.lora_r) == ("grpo", 8, 4096, 0.0, 32)
    assert g.learning_rate == 5e-6 and not g.rollout_is_correction
    d = parse("bigmath_dapo.yaml")
    assert (d.loss_type, d.epsilon, d.epsilon_high, d.num_generations) == ("dapo", 0.2, 0.28, 16)
    assert d.dynamic_sampling and d.mask_truncated_completions and d.overlong_buffer_len == 2048
    assert d.learning_rate == 1e-5 and d.max_completion_length == 8192
    assert (d.aqn_sigma_start, d.aqn_sigma_end, d.aqn_num_stages) == (1e-2, 5e-4, 10)


def test_launch_scripts_cover_the_grid():
    scripts = {p.name for p in (ROOT / "training").glob("qwen2.5-*.sh")}
    for size in ("3b", "7b", "14b", "32b"):
        for task in ("gsm8k_grpo", "bigmath_dapo"):
            for load in ("nvfp4", "bf16", "nf4"):
                assert f"qwen2.5-{size}_{task}_{load}.sh" in scripts
                # The NVFP4 rollouts take this project's kernels where they run (measured faster than Marlin on
                # every size, benchmarks/RESULTS.md runs 38-39); the flag means nothing to the other bases.
                (launch,) = [line for line in (ROOT / "training" / f"qwen2.5-{size}_{task}_{load}.sh").read_text()
                             .splitlines() if line.startswith("exec ")]
                assert ("--vllm_fp4_kernel auto" in launch) == (load == "nvfp4"), launch


def test_launcher_rejects_bad_arguments():
    proc = subprocess.run(["bash", str(ROOT / "training" / "_launch.sh"), "9B", "nvfp4", "gsm8k_grpo"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown size 9B" in proc.stderr


def test_rollout_kernel_choice_is_checked_when_the_config_is_parsed(tmp_path):
    def parse(*extra):
        (a,) = TrlParser((QeRLConfig,)).parse_args_and_config(
            ["--config", str(ROOT / "configs" / "gsm8k_grpo.yaml"), "--output_dir", str(tmp_path), *extra])
        return a

    assert parse().vllm_fp4_kernel == "marlin" and not parse().vllm_lora_dual_stream
    assert parse("--vllm_fp4_kernel", "qerl", "--vllm_lora_dual_stream", "true").vllm_fp4_kernel == "qerl"
    with pytest.raises(ValueError, match="vllm_fp4_kernel 'cutlass' is not one of"):
        parse("--vllm_fp4_kernel", "cutlass")
    assert parse().hf_decode_layout == "auto" and parse("--hf_decode_layout", "words").hf_decode_layout == "words"
    with pytest.raises(ValueError, match="hf_decode_layout 'rows' is not one of"):
        parse("--hf_decode_layout", "rows")
    assert parse().hf_adapter_a_copies is None and parse("--hf_adapter_a_copies", "true").hf_adapter_a_copies
    assert parse("--hf_adapter_a_copies", "false").hf_adapter_a_copies is False
    assert parse("--hf_fused_step", "false").hf_adapter_a_copies is None  # the default is not refused there
    with pytest.raises(ValueError, match="drop --hf_fused_step false or --hf_adapter_a_copies"):
        parse("--hf_adapter_a_copies", "true", "--hf_fused_step", "false")
    # Default None: the backend fuses wherever it applies (NVFP4 on qerl); an explicit value is kept as given.
    assert parse().vllm_fuse_lora_expand is None
    assert parse("--vllm_fp4_kernel", "qerl").vllm_fuse_lora_expand is None
    assert parse("--vllm_fp4_kernel", "qerl", "--vllm_fuse_lora_expand", "true").vllm_fuse_lora_expand is True
    assert parse("--vllm_fp4_kernel", "qerl", "--vllm_fuse_lora_expand", "false").vllm_fuse_lora_expand is False
    with pytest.raises(ValueError, match="needs --vllm_fp4_kernel qerl or auto"):
        parse("--vllm_fuse_lora_expand", "true")
    with pytest.raises(ValueError, match="needs --vllm_fp4_kernel qerl or auto"):
        parse("--vllm_fp4_kernel", "marlin", "--vllm_fuse_lora_expand", "true")
    auto = parse("--vllm_fp4_kernel", "auto", "--vllm_fuse_lora_expand", "true")
    assert auto.vllm_fp4_kernel == "auto" and auto.vllm_fuse_lora_expand is True

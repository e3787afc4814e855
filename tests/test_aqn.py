"""AQN: schedule values, noise statistics, fp32 master (no rounding away, no drift), zero-match error, and that
the model which generates really carries the noise."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from qerl.aqn import AQNConfig, AQNController, NoiseInjector, find_norm_modules, keep_norms_fp32, scheduled_sigma


def test_schedule_values():
    cfg = AQNConfig(sigma_start=1e-2, sigma_end=5e-4, num_stages=10)
    total = 100
    sigmas = [scheduled_sigma(cfg, s, total) for s in range(total)]
    assert sigmas[:10] == [0.0] * 10  # stage 0 is noise-free
    stage_values = [sigmas[10 * j] for j in range(10)]
    for j in range(1, 10):
        want = 1e-2 * (5e-4 / 1e-2) ** ((j - 1) / 8)
        assert math.isclose(stage_values[j], want, rel_tol=1e-12)
        assert all(s == stage_values[j] for s in sigmas[10 * j: 10 * j + 10])  # constant within a stage
    assert stage_values[1] == pytest.approx(1e-2) and stage_values[9] == pytest.approx(5e-4)
    assert scheduled_sigma(cfg, 10_000, total) == pytest.approx(5e-4)  # past the end: last stage
    assert scheduled_sigma(AQNConfig(mode="constant", sigma_start=3e-3), 0, 10) == 3e-3
    assert scheduled_sigma(AQNConfig(mode="off"), 50, 100) == 0.0
    with pytest.raises(ValueError, match="num_stages >= 3"):
        AQNConfig(num_stages=2)
    with pytest.raises(ValueError, match="mode"):
        AQNConfig(mode="cosine")


class RMSNorm(nn.Module):
    def __init__(self, n, dtype=torch.float32):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n, dtype=dtype))

    def forward(self, x):
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * y.to(x.dtype)


class Block(nn.Module):
    def __init__(self, n, dtype):
        super().__init__()
        self.input_layernorm = RMSNorm(n, dtype)
        self.post_attention_layernorm = RMSNorm(n, dtype)
        self.q_norm = RMSNorm(n, dtype)  # not targeted by default
        self.proj = nn.Linear(n, n).to(dtype)


def toy(n=4096, layers=3, dtype=torch.float32):
    m = nn.Module()
    m.layers = nn.ModuleList(Block(n, dtype) for _ in range(layers))
    with torch.no_grad():
        for b in m.layers:
            b.input_layernorm.weight.uniform_(0.5, 2.0)
    return m


def test_targets_by_name_and_duck_type():
    m = toy(64)
    found = find_norm_modules(m)
    assert sorted(found) == sorted(f"layers.{i}.{n}" for i in range(3)
                                   for n in ("input_layernorm", "post_attention_layernorm"))
    assert "layers.0.q_norm" in find_norm_modules(m, ["re:q_norm$"])
    assert not find_norm_modules(m, ["proj"])  # a Linear is not a norm even if the name matches


def test_noise_statistics_fp32_master_and_restore():
    m = toy()
    clean = {n: mod.weight.detach().clone() for n, mod in find_norm_modules(m).items()}
    inj = NoiseInjector(m, seed=0)
    for sigma in (1e-2, 5e-4, 1e-5):
        stats = inj.perturb(sigma)
        assert stats.num_modules == 6
        for name, mod in inj.modules.items():
            z = mod.weight.detach() - clean[name]
            assert abs(z.std().item() / sigma - 1) < 0.05, (name, z.std().item(), sigma)
            assert abs(z.mean().item()) < 4 * sigma / math.sqrt(z.numel())
        assert stats.effective_sigma == pytest.approx(sigma, rel=0.03)
    inj.restore()
    for name, mod in inj.modules.items():
        assert torch.equal(mod.weight, clean[name])
    assert all(v.dtype == torch.float32 for v in inj.master.values())


def test_fresh_draw_each_round_and_no_drift():
    m = toy(1024)
    clean = {n: mod.weight.detach().clone() for n, mod in find_norm_modules(m).items()}
    inj = NoiseInjector(m, seed=1)
    name = "layers.0.input_layernorm"
    prev = None
    for _ in range(200):
        inj.perturb(1e-3)
        cur = inj.modules[name].weight.detach().clone()
        if prev is not None:
            assert not torch.equal(cur, prev)  # fresh noise every generation round
        prev = cur
    # after 200 rounds the noise has not accumulated: still one draw of sigma around the clean weight
    assert (prev - clean[name]).std().item() == pytest.approx(1e-3, rel=0.1)
    inj.restore()
    assert torch.equal(inj.modules[name].weight, clean[name])


def test_bf16_weights_keep_small_noise_with_fp32_norms():
    # A bf16 model: adding sigma=5e-4 to bf16 weights near 1 rounds the noise away entirely (bf16 spacing there is
    # 2^-7); keep_norms_fp32 stores the norm scales in fp32 so the scheduled noise is really applied.
    m = toy(4096, dtype=torch.bfloat16)
    naive = NoiseInjector(m, seed=0)
    assert naive.perturb(5e-4).effective_sigma < 1e-4  # the defect this design avoids
    naive.restore()
    kept = NoiseInjector(m, seed=0)
    keep_norms_fp32(kept.modules)
    kept.resync_master()
    assert kept.perturb(5e-4).effective_sigma == pytest.approx(5e-4, rel=0.05)
    x = torch.randn(2, 4096, dtype=torch.bfloat16)
    assert m.layers[0].input_layernorm(x).dtype == torch.bfloat16  # outputs stay in the model's dtype


def test_zero_matched_modules_raise():
    m = nn.Sequential(nn.Linear(4, 4))
    inj = NoiseInjector(m)
    with pytest.raises(RuntimeError, match="no norm module matched"):
        inj.perturb(1e-3)
    assert inj.perturb(0.0).num_modules == 0  # sigma 0 (stage 0) is fine


def test_generating_model_is_the_noised_one(tiny_qwen2_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from qerl.rollout.base import SamplingSettings
    from qerl.rollout.hf import HFRolloutBackend

    model = AutoModelForCausalLM.from_pretrained(str(tiny_qwen2_dir), dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(tiny_qwen2_dir))
    backend = HFRolloutBackend(model, tok)
    controller = AQNController(AQNConfig(mode="constant", sigma_start=0.05))
    backend.attach_aqn(controller, ("input_layernorm", "post_attention_layernorm"))
    norm = model.model.layers[0].input_layernorm
    clean = norm.weight.detach().clone()
    seen = []
    hook = norm.register_forward_hook(lambda mod, args, out: seen.append(mod.weight.detach().clone()))
    ids = tok("1 + 1 =").input_ids
    result = backend.generate([ids, ids], SamplingSettings(max_new_tokens=4, temperature=1.0))
    hook.remove()
    assert seen and all((w - clean).std().item() == pytest.approx(0.05, rel=0.5) for w in seen)
    assert result.noise.sigma == 0.05 and result.noise.num_modules == 4
    assert torch.equal(norm.weight, clean)  # the gradient step sees the clean weights
    assert len(result.logprobs[0]) == len(result.completion_ids[0])

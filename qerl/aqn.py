"""Adaptive Quantization Noise (AQN): channel-wise Gaussian noise on RMSNorm scales of the model that generates.

A norm scale multiplies every input channel of the following projections (q/k/v after ``input_layernorm``,
gate/up after ``post_attention_layernorm``), so noise on it acts as row-wise multiplicative noise on those weights:
extra, controllable exploration on top of the quantization noise of the 4-bit base. The schedule anneals it over
K stages: stage 0 is noise-free, stages 1..K-1 decay exponentially from ``sigma_start`` to exactly ``sigma_end``.

Each generation round draws fresh noise and writes ``master + z`` into the norm weights, where ``master`` is an fp32
copy of the clean weights: noise never accumulates round over round, and the sum is formed in fp32, not in bf16
where a small sigma would round away. Targets are found by name pattern and by duck type (a 1-D ``weight`` on a
module whose class name says it is a norm), so the same code reaches transformers' RMSNorm and vLLM's own
RMSNorm modules inside a running engine. Matching nothing while sigma > 0 is an error, never a silent no-op.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn
from transformers import TrainerCallback

log = logging.getLogger(__name__)

DEFAULT_TARGETS = ("input_layernorm", "post_attention_layernorm")
AQN_MODES = ("exponential", "constant", "off")


@dataclass
class AQNConfig:
    mode: str = "exponential"
    sigma_start: float = 1e-2
    sigma_end: float = 5e-4
    num_stages: int = 10
    targets: tuple[str, ...] = DEFAULT_TARGETS
    noise_training_forward: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.mode not in AQN_MODES:
            raise ValueError(f"aqn mode {self.mode!r} is not one of {AQN_MODES}")
        if self.mode != "off" and (self.sigma_start < 0 or self.sigma_end < 0):
            raise ValueError("aqn sigmas must be >= 0")
        if self.mode == "exponential":
            if self.num_stages < 3:
                raise ValueError("aqn exponential schedule needs num_stages >= 3 (stage 0 is noise-free); "
                                 "use mode 'constant' for a single noise level")
            if self.sigma_start <= 0 or self.sigma_end <= 0:
                raise ValueError("aqn exponential schedule needs sigma_start > 0 and sigma_end > 0")
        self.targets = tuple(self.targets)


def scheduled_sigma(config: AQNConfig, step: int, total_steps: int) -> float:
    """Sigma for a training step: stage = floor(step * K / total_steps); stage 0 -> 0; stage j >= 1 ->
    sigma_start * (sigma_end / sigma_start) ** ((j - 1) / (K - 2))."""
    if config.mode == "off":
        return 0.0
    if config.mode == "constant":
        return config.sigma_start
    k = config.num_stages
    stage = min(k - 1, max(0, step) * k // max(1, total_steps))
    if stage == 0:
        return 0.0
    return config.sigma_start * (config.sigma_end / config.sigma_start) ** ((stage - 1) / (k - 2))


def is_norm_module(module: nn.Module) -> bool:
    """Duck type: a 1-D floating ``weight`` on a module whose class name contains 'Norm' (RMSNorm, LayerNorm,
    vLLM's RMSNorm / GemmaRMSNorm ...)."""
    weight = getattr(module, "weight", None)
    return (
        isinstance(weight, torch.Tensor)
        and weight.ndim == 1
        and weight.is_floating_point()
        and "norm" in type(module).__name__.lower()
    )


def find_norm_modules(model: nn.Module, patterns: Iterable[str] = DEFAULT_TARGETS) -> dict[str, nn.Module]:
    """Norm modules whose name matches a pattern: a plain name matches the last component exactly
    (``input_layernorm``), a pattern starting with ``re:`` is a regex searched in the full name."""
    plain = {p for p in patterns if not p.startswith("re:")}
    regexes = [re.compile(p[3:]) for p in patterns if p.startswith("re:")]
    found = {}
    for name, module in model.named_modules():
        if not is_norm_module(module):
            continue
        leaf = name.rsplit(".", 1)[-1]
        if leaf in plain or any(r.search(name) for r in regexes):
            found[name] = module
    return found


@dataclass
class NoiseStats:
    sigma: float
    num_modules: int
    # RMS of (applied weight - clean weight): equals sigma for fp32 weights; shows how much of the noise a
    # low-precision weight (e.g. bf16 inside an inference engine) keeps.
    effective_sigma: float


class NoiseInjector:
    """Applies and removes AQN on one model's norm weights (the model that generates)."""

    def __init__(self, model: nn.Module, patterns: Iterable[str] = DEFAULT_TARGETS, seed: int = 0) -> None:
        self.modules = find_norm_modules(model, patterns)
        self.patterns = tuple(patterns)
        self.master: dict[str, torch.Tensor] = {}
        self.resync_master()
        self.generator: dict[torch.device, torch.Generator] = {}
        self.seed = seed
        self.noised = False
        self.last = NoiseStats(0.0, len(self.modules), 0.0)

    def resync_master(self, weights: dict[str, torch.Tensor] | None = None) -> None:
        """Take the clean weights as the new master (after norms were trained, or pushed from the trainer)."""
        for name, module in self.modules.items():
            src = module.weight if weights is None else weights[name]
            self.master[name] = src.detach().to(device=module.weight.device, dtype=torch.float32).clone()

    def _gen(self, device: torch.device) -> torch.Generator:
        if device not in self.generator:
            g = torch.Generator(device=device)
            g.manual_seed(self.seed)
            self.generator[device] = g
        return self.generator[device]

    @torch.no_grad()
    def perturb(self, sigma: float) -> NoiseStats:
        """Write ``master + N(0, sigma^2)`` (fresh draw per channel) into every target; sigma 0 restores."""
        if sigma > 0 and not self.modules:
            raise RuntimeError(
                f"AQN sigma is {sigma} but no norm module matched {self.patterns}: set aqn targets to the norm "
                "module names of this model (e.g. 're:layernorm$') or disable AQN with aqn_mode=off"
            )
        if sigma <= 0:
            self.restore()
            self.last = NoiseStats(0.0, len(self.modules), 0.0)
            return self.last
        sq_err, count = 0.0, 0
        for name, module in self.modules.items():
            master = self.master[name]
            z = torch.randn(master.shape, generator=self._gen(master.device), device=master.device) * sigma
            module.weight.copy_((master + z).to(module.weight.dtype))
            sq_err += float(((module.weight.float() - master) ** 2).sum())
            count += master.numel()
        self.noised = True
        self.last = NoiseStats(sigma, len(self.modules), math.sqrt(sq_err / max(1, count)))
        return self.last

    @torch.no_grad()
    def restore(self) -> None:
        for name, module in self.modules.items():
            module.weight.copy_(self.master[name].to(module.weight.dtype))
        self.noised = False


def keep_norms_fp32(modules: dict[str, nn.Module]) -> None:
    """Hold the targeted norm weights in fp32 inside a bf16/fp16 model, with each output cast back to the input's
    dtype. Then ``master + z`` is stored exactly and the product (w + z) * x is rounded once, so noise far below
    bf16's resolution still shifts outputs (dithered) instead of being rounded away in the weight."""
    for module in modules.values():
        if module.weight.dtype == torch.float32:
            continue
        module.weight.data = module.weight.data.float()

        def cast_back(mod, args, output):
            return output.to(args[0].dtype) if isinstance(output, torch.Tensor) else output

        module.register_forward_hook(cast_back)


@dataclass
class AQNController:
    """Shared between the callback (which knows the step) and the rollout backend (which generates)."""

    config: AQNConfig
    total_steps: int = 1
    step: int = 0
    last: NoiseStats | None = None  # what the latest generation round applied

    @property
    def sigma(self) -> float:
        return scheduled_sigma(self.config, self.step, self.total_steps)


class AQNCallback(TrainerCallback):
    """Advances the AQN schedule with the trainer's step and logs sigma / matched modules / effective sigma."""

    def __init__(self, controller: AQNController) -> None:
        self.controller = controller

    def on_train_begin(self, args, state, control, **kwargs):
        self.controller.total_steps = max(1, state.max_steps)
        self.controller.step = state.global_step

    def on_step_begin(self, args, state, control, **kwargs):
        self.controller.step = state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        last = self.controller.last
        if logs is None or last is None:
            return
        # A trainer that averages these per logging window (QeRLTrainer) has already set them.
        logs.setdefault("aqn/sigma", last.sigma)
        logs.setdefault("aqn/modules", last.num_modules)
        logs.setdefault("aqn/effective_sigma", last.effective_sigma)

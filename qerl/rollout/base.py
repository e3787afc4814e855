"""The rollout backend contract shared by the transformers (HF) and vLLM backends."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from torch import nn

from qerl.aqn import AQNController, NoiseInjector, NoiseStats


@dataclass
class SamplingSettings:
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None


@dataclass
class RolloutResult:
    completion_ids: list[list[int]]  # one per prompt, EOS included when generated, no padding
    # log-probability of each sampled token under the sampling policy (temperature-scaled logits of the model that
    # generated, AQN noise included); None when the backend cannot report it.
    logprobs: list[list[float]] | None
    num_tokens: int
    seconds: float
    noise: NoiseStats | None = None

    @property
    def tokens_per_second(self) -> float:
        return self.num_tokens / self.seconds if self.seconds > 0 else 0.0


class RolloutBackend(ABC):
    """Generates completions for token-id prompts with the current policy (base + live adapter + AQN noise)."""

    name = "base"

    def __init__(self) -> None:
        self.aqn: AQNController | None = None
        self.injector: NoiseInjector | None = None

    def attach_aqn(self, controller: AQNController, patterns: tuple[str, ...], seed: int = 0) -> None:
        """Find the norm modules of the generating model; raises later if sigma > 0 and none matched."""
        self.aqn = controller
        self.injector = NoiseInjector(self.generating_model(), patterns, seed=seed)

    @abstractmethod
    def generating_model(self) -> nn.Module:
        """The torch module whose weights produce the tokens (the engine's own model for vLLM)."""

    @abstractmethod
    def sync_policy(self, policy: nn.Module) -> None:
        """Make the next generation use the trainer's current adapter (and trained norms)."""

    @abstractmethod
    def generate(self, prompt_ids: list[list[int]], sampling: SamplingSettings) -> RolloutResult:
        """One completion per prompt (the trainer repeats prompts for a group)."""

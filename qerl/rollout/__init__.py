"""Rollout backends: who generates the completions an RL step learns from."""

from qerl.rollout.base import RolloutBackend, RolloutResult, SamplingSettings

__all__ = ["RolloutBackend", "RolloutResult", "SamplingSettings", "make_backend", "default_backend_name"]


def default_backend_name() -> str:
    """vLLM on CUDA machines where it is importable, else the transformers backend."""
    import importlib.util

    import torch

    if torch.cuda.is_available() and importlib.util.find_spec("vllm") is not None:
        return "vllm"
    return "hf"


def make_backend(name: str, **kwargs) -> RolloutBackend:
    if name == "hf":
        from qerl.rollout.hf import HFRolloutBackend

        return HFRolloutBackend(**kwargs)
    if name == "vllm":
        from qerl.rollout.vllm_backend import VLLMRolloutBackend

        return VLLMRolloutBackend(**kwargs)
    raise ValueError(f"unknown rollout backend {name!r}: use 'hf' or 'vllm'")

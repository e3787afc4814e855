"""Evaluation: average pass@1 over K samples on GSM8K, MATH500, AIME24/25, AMC23 and an offline arithmetic set.

Each task runs as ``python -m eval.<task>`` (or ``python -m eval --task <task>``); all share ``eval.runner``.
"""

from __future__ import annotations

__all__ = ["EvalConfig", "TASKS", "run_eval", "score_completion", "summarize"]


def __getattr__(name: str):
    # Lazy: ``python -m eval.gsm8k --help`` should not import torch before it has to.
    if name in __all__:
        from eval import runner

        return getattr(runner, name)
    raise AttributeError(name)

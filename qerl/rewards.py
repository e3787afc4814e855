"""Reward functions with trl's GRPOTrainer signature ``fn(completions, **kwargs) -> list[float | None]``.

``completions`` holds strings or conversational message lists; the dataset's ``answer`` column arrives as
``kwargs["answer"]`` (aligned with completions). ``None`` means "not applicable" (trl turns it into NaN).
``get_reward_funcs`` returns the functions wrapped by ``safe_reward`` so a failing or hanging reward never
stops training.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from typing import Any

from qerl.answers import (
    extract_all_boxed,
    extract_final_answer,
    extract_last_number,
    extract_marker_answers,
    math_correct,
    math_verify_workers,
    parse_number,
)

logger = logging.getLogger(__name__)

RewardFunc = Callable[..., list]

__all__ = [
    "accuracy_reward",
    "completion_text",
    "format_reward",
    "get_reward_funcs",
    "partial_credit_reward",
    "reset_reward_failure_counts",
    "reward_failure_counts",
    "reward_failure_counts_by_function",
    "safe_reward",
]


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts: [{"type": "text", "text": ...}, ...]
        return "".join(p.get("text") or "" if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def completion_text(completion: Any) -> str:
    """Plain text of a completion: a string as is; for messages, the assistant contents joined by newlines."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        msgs = [m for m in completion if isinstance(m, dict)]
        assistant = [m for m in msgs if m.get("role") in (None, "assistant")] or msgs
        return "\n".join(_content_text(m.get("content")) for m in assistant)
    return str(completion)


def _golds(answer: Any, completions: Sequence[Any], fn_name: str) -> list[Any]:
    if answer is None:
        raise ValueError(f"{fn_name} needs the dataset column 'answer' (not found in the reward kwargs)")
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Sequence):
        raise ValueError(f"{fn_name}: 'answer' must be a list aligned with completions, got {type(answer).__name__}")
    if len(answer) != len(completions):
        raise ValueError(f"{fn_name}: {len(answer)} answers for {len(completions)} completions")
    return list(answer)


def _missing_gold(gold: Any) -> bool:
    return gold is None or (isinstance(gold, str) and not gold.strip())


def accuracy_reward(
    completions: Sequence[Any], answer: Sequence[Any] | None = None, **kwargs: Any
) -> list[float | None]:
    """1.0 if the completion's final answer matches the gold (``math_correct``: exact number or math-verify
    equivalence; the last number is used when no answer marker is present), else 0.0; None for a missing gold.
    """
    golds = _golds(answer, completions, "accuracy_reward")
    texts = [completion_text(c) for c in completions]

    def one(i: int) -> float | None:
        if _missing_gold(golds[i]):
            return None
        return 1.0 if math_correct(texts[i], str(golds[i]))[0] else 0.0

    if len(texts) <= 1:
        return [one(i) for i in range(len(texts))]
    # math_correct mostly waits on worker processes, so threads give real parallelism here.
    with ThreadPoolExecutor(max_workers=min(len(texts), math_verify_workers())) as ex:
        return list(ex.map(one, range(len(texts))))


def format_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """Rewards a single, parseable final answer.

    1.0: exactly one non-empty top-level ``\\boxed{...}`` (the format the system prompt asks for);
    0.5: no box, but exactly one ``#### X`` / ``Answer: X`` / ``The answer is X`` marker with content;
    0.0: no marker, or several competing ones (e.g. two boxes), which makes the answer ambiguous.
    """
    out: list[float] = []
    for c in completions:
        text = completion_text(c)
        boxes = [b for b in extract_all_boxed(text) if b]
        if boxes:
            out.append(1.0 if len(boxes) == 1 else 0.0)
            continue
        hashes, texts = extract_marker_answers(text)
        out.append(0.5 if len(hashes) + len(texts) == 1 else 0.0)
    return out


def partial_credit_reward(
    completions: Sequence[Any], answer: Sequence[Any] | None = None, **kwargs: Any
) -> list[float | None]:
    """Graded numeric reward for the synthetic arithmetic task, so a small model gets a gradient early.

    1.0 for the exact number; otherwise ``0.5 * max(0, 1 - |pred - gold| / max(|gold|, 1))`` (an answer off by
    10% earns 0.45, off by 100% or more earns 0); 0.0 when no number can be read. The answer is the final-answer
    marker, or the last number when there is none. None when the gold is not a number (not applicable).
    """
    golds = _golds(answer, completions, "partial_credit_reward")
    out: list[float | None] = []
    for c, gold_raw in zip(completions, golds):
        gold = None if _missing_gold(gold_raw) else parse_number(str(gold_raw))
        if gold is None:
            out.append(None)
            continue
        text = completion_text(c)
        pred = parse_number(extract_final_answer(text) or extract_last_number(text))
        if pred is None:
            out.append(0.0)
        elif pred == gold:
            out.append(1.0)
        else:
            rel = abs(pred - gold) / max(abs(gold), Fraction(1))
            out.append(float(0.5 * max(Fraction(0), 1 - rel)))
    return out


# --------------------------------------------------------------------------------------------------------------
# Failure isolation
# --------------------------------------------------------------------------------------------------------------

_counts_lock = threading.Lock()
_counts: dict[str, int] = {}
_counts_by_fn: dict[str, int] = {}
_warned: set[tuple[str, str]] = set()


def _record(name: str, kind: str, items: int, detail: str) -> None:
    if items <= 0:
        return
    with _counts_lock:
        _counts[kind] = _counts.get(kind, 0) + items
        key = f"{name}/{kind}"
        _counts_by_fn[key] = _counts_by_fn.get(key, 0) + items
        first = (name, kind) not in _warned
        _warned.add((name, kind))
    if first:
        logger.warning(
            "reward %s: %s (%s); the affected items get 0.0 (further %s failures of this reward not logged)",
            name,
            kind,
            detail,
            kind,
        )


def reward_failure_counts() -> dict[str, int]:
    """Batch items that got a fallback 0.0, by cause ("error", "timeout", "invalid_output"); the values can be
    summed. Empty until something fails."""
    with _counts_lock:
        return dict(_counts)


def reward_failure_counts_by_function() -> dict[str, int]:
    """The same counts split per reward function, under "<fn name>/<cause>"."""
    with _counts_lock:
        return dict(_counts_by_fn)


def reset_reward_failure_counts() -> None:
    with _counts_lock:
        _counts.clear()
        _counts_by_fn.clear()
        _warned.clear()


def _run_with_timeout(thunk: Callable[[], Any], timeout_s: float, name: str) -> tuple[str, Any]:
    """("ok", value) / ("error", exc) / ("timeout", None).

    A fresh daemon thread per call: a hung call cannot be killed, so it is abandoned, and because it does not
    occupy a shared pool it cannot starve later calls.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = thunk()
        except BaseException as exc:  # noqa: BLE001 - any failure of user code becomes a 0.0 reward
            box["error"] = exc

    t = threading.Thread(target=run, name=f"reward-{name}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        return "timeout", None
    if "error" in box:
        return "error", box["error"]
    return "ok", box.get("value")


def _coerce(values: Any, n: int) -> list[float | None] | None:
    """Validated rewards (None kept, numbers as float), or None when the output is malformed."""
    if not isinstance(values, (list, tuple)) or len(values) != n:
        return None
    out: list[float | None] = []
    for v in values:
        if v is None:
            out.append(None)
        elif isinstance(v, (int, float, Fraction)) or hasattr(v, "__float__"):
            try:
                out.append(float(v))
            except (TypeError, ValueError):
                return None
        else:
            return None
    return out


def _item_kwargs(kwargs: dict[str, Any], i: int, n: int) -> dict[str, Any]:
    # Per-completion columns are lists of length n; everything else (trainer_state, log_metric, ...) is shared.
    return {k: ([v[i]] if isinstance(v, list) and len(v) == n else v) for k, v in kwargs.items()}


def safe_reward(fn: RewardFunc, timeout_s: float = 10.0) -> RewardFunc:
    """Wrap a reward function so it can never crash or stall training.

    * The call runs in a helper thread; if it does not return within ``timeout_s`` every item gets 0.0.
    * If it raises, each item is retried alone (within one more ``timeout_s`` overall) so only the items that
      fail get 0.0.
    * A malformed result (wrong length, non-numbers) gives 0.0 to every item.

    Each fallback increments ``reward_failure_counts()`` and the first of each kind per function is logged.
    The wrapper keeps ``__name__`` (trl logs rewards under it).
    """
    name = getattr(fn, "__name__", type(fn).__name__)

    @functools.wraps(fn)
    def wrapper(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        n = len(completions)
        status, value = _run_with_timeout(lambda: fn(completions, **kwargs), timeout_s, name)
        if status == "ok":
            out = _coerce(value, n)
            if out is not None:
                return out
            _record(name, "invalid_output", n, f"returned {type(value).__name__} of length {_len(value)} for {n} items")
            return [0.0] * n
        if status == "timeout":
            _record(name, "timeout", n, f"no result within {timeout_s:g}s")
            return [0.0] * n
        return _retry_items(fn, name, completions, kwargs, timeout_s, value)

    wrapper.__name__ = name
    wrapper.__qualname__ = getattr(fn, "__qualname__", name)
    return wrapper


def _len(value: Any) -> str:
    try:
        return str(len(value))
    except TypeError:
        return "n/a"


def _retry_items(
    fn: RewardFunc, name: str, completions: Sequence[Any], kwargs: dict[str, Any], timeout_s: float, batch_exc: Any
) -> list[float | None]:
    n = len(completions)
    results: list[float | None] = [0.0] * n
    state = {"done": 0, "errors": 0, "invalid": 0, "first_error": batch_exc}
    cancelled = threading.Event()
    lock = threading.Lock()

    def run_all() -> None:
        for i in range(n):
            if cancelled.is_set():
                return
            try:
                item = _coerce(fn([completions[i]], **_item_kwargs(kwargs, i, n)), 1)
                with lock:
                    if item is None:
                        state["invalid"] += 1
                    else:
                        results[i] = item[0]
            except BaseException:  # noqa: BLE001
                with lock:
                    state["errors"] += 1
            with lock:
                state["done"] += 1

    status, _ = _run_with_timeout(run_all, timeout_s, name)
    if status == "timeout":
        cancelled.set()
    with lock:
        snapshot = list(results)
        done, errors, invalid = state["done"], state["errors"], state["invalid"]
    detail = f"raised {type(batch_exc).__name__}: {str(batch_exc)[:300]}"
    _record(name, "error", errors, detail)
    _record(name, "invalid_output", invalid, detail)
    _record(name, "timeout", n - done, f"{detail}; per-item retry exceeded {timeout_s:g}s")
    if errors == 0 and invalid == 0 and done == n:
        logger.warning("reward %s %s on the batch but succeeded item by item", name, detail)
    # Items whose retry is still running when the budget ran out keep the 0.0 fallback.
    return [snapshot[i] if i < done else 0.0 for i in range(n)]


# --------------------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------------------

# accuracy may need several math-verify calls per batch (each bounded by its own 5 s timeout), so its batch
# budget is larger than the default.
_REGISTRY: dict[str, tuple[RewardFunc, float]] = {
    "accuracy": (accuracy_reward, 120.0),
    "format": (format_reward, 10.0),
    "partial_credit": (partial_credit_reward, 10.0),
}


def get_reward_funcs(names: Sequence[str]) -> list[RewardFunc]:
    """Reward functions by name ("accuracy", "format", "partial_credit"), each wrapped by ``safe_reward``."""
    if isinstance(names, str):
        names = [names]
    funcs: list[RewardFunc] = []
    for raw in names:
        key = raw.strip().lower().replace("-", "_")
        if key not in _REGISTRY:
            raise ValueError(f"Unknown reward function {raw!r}; valid names: {', '.join(sorted(_REGISTRY))}")
        fn, timeout_s = _REGISTRY[key]
        funcs.append(safe_reward(fn, timeout_s=timeout_s))
    if not funcs:
        raise ValueError(f"No reward functions given; valid names: {', '.join(sorted(_REGISTRY))}")
    return funcs

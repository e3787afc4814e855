import logging
import threading
import time

import pytest

from qerl.rewards import (
    accuracy_reward,
    completion_text,
    format_reward,
    get_reward_funcs,
    partial_credit_reward,
    reset_reward_failure_counts,
    reward_failure_counts,
    reward_failure_counts_by_function,
    safe_reward,
)


def conv(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


@pytest.fixture(autouse=True)
def _fresh_counters():
    reset_reward_failure_counts()
    yield
    reset_reward_failure_counts()


def test_completion_text_shapes():
    assert completion_text("plain") == "plain"
    assert completion_text(conv("hi")) == "hi"
    assert (
        completion_text(
            [{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
        )
        == "ab"
    )
    assert completion_text(None) == ""


def test_accuracy_reward_strings_and_conversations():
    completions = [
        r"3 + 15 = 18, so \boxed{18}",
        r"\boxed{17}",
        conv("#### 1,000"),
        conv(r"\boxed{\frac{1}{2}}"),
        "no idea",
        r"\boxed{\frac{1}{\sqrt{2}}}",
    ]
    answer = ["18", "18", "1000", "0.5", "18", r"\frac{\sqrt{2}}{2}"]
    assert accuracy_reward(completions, answer=answer) == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]


def test_accuracy_reward_missing_gold_is_not_applicable():
    assert accuracy_reward([r"\boxed{1}", r"\boxed{1}"], answer=[None, "1"]) == [None, 1.0]


def test_accuracy_reward_requires_answer_column():
    with pytest.raises(ValueError, match="answer"):
        accuracy_reward(["x"])
    with pytest.raises(ValueError, match="2 answers for 1"):
        accuracy_reward(["x"], answer=["1", "2"])


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"work... \boxed{42}", 1.0),
        (r"The answer is \boxed{42}.", 1.0),  # the text marker wraps the box: still one answer
        (r"\boxed{\frac{a}{b}}", 1.0),
        (r"\boxed{41} no wait \boxed{42}", 0.0),  # ambiguous
        (r"\boxed{}", 0.0),
        ("#### 42", 0.5),
        ("Answer: 42", 0.5),
        ("Answer: 41\nAnswer: 42", 0.0),
        ("just 42", 0.0),
        ("", 0.0),
    ],
)
def test_format_reward(text, expected):
    assert format_reward([text]) == [expected]
    assert format_reward([conv(text)]) == [expected]


def test_partial_credit_reward_is_graded():
    completions = [r"\boxed{100}", r"\boxed{90}", r"\boxed{50}", r"\boxed{300}", "no number", "I get 100"]
    rewards = partial_credit_reward(completions, answer=["100"] * len(completions))
    assert rewards[0] == 1.0
    assert rewards[1] == pytest.approx(0.45)
    assert rewards[2] == pytest.approx(0.25)
    assert rewards[3] == 0.0
    assert rewards[4] == 0.0
    assert rewards[5] == 1.0  # last-number fallback
    # Closer answers never earn less, and only the exact answer earns more than 0.5.
    vals = partial_credit_reward([rf"\boxed{{{v}}}" for v in (60, 80, 95, 99)], answer=["100"] * 4)
    assert vals == sorted(vals) and max(vals) <= 0.5
    # Small golds: distance is relative to max(|gold|, 1).
    assert partial_credit_reward([r"\boxed{-1}"], answer=["0"]) == [0.0]
    assert partial_credit_reward([r"\boxed{-3}"], answer=["-3"]) == [1.0]
    # Non-numeric gold: not applicable.
    assert partial_credit_reward([r"\boxed{x}"], answer=[r"\sqrt{2}"]) == [None]


# ---------------------------------------------------------------------------------------------- safe_reward


def test_safe_reward_keeps_name_and_passes_results_through():
    wrapped = safe_reward(format_reward)
    assert wrapped.__name__ == "format_reward"
    assert wrapped([r"\boxed{1}", "nothing"], prompts=["p", "q"], trainer_state=object()) == [1.0, 0.0]
    assert reward_failure_counts() == {}


def test_safe_reward_exception_gives_zero_and_counts(caplog):
    def boom(completions, **kwargs):
        raise RuntimeError("reward crashed")

    wrapped = safe_reward(boom)
    assert wrapped.__name__ == "boom"
    with caplog.at_level(logging.WARNING, logger="qerl.rewards"):
        assert wrapped(["a", "b", "c"], answer=["1", "2", "3"]) == [0.0, 0.0, 0.0]
        assert wrapped(["a"], answer=["1"]) == [0.0]
    assert reward_failure_counts() == {"error": 4}
    assert reward_failure_counts_by_function() == {"boom/error": 4}
    warnings = [r for r in caplog.records if "boom" in r.getMessage()]
    assert len(warnings) == 1  # logged once, counted every time
    assert "reward crashed" in warnings[0].getMessage()


def test_safe_reward_isolates_the_failing_item():
    def picky(completions, answer, **kwargs):
        if any(c == "bad" for c in completions):
            raise ValueError("cannot score 'bad'")
        return [float(a) for a in answer]

    wrapped = safe_reward(picky)
    log_metric_calls = []
    out = wrapped(["ok", "bad", "ok"], answer=["1", "2", "3"], log_metric=log_metric_calls.append)
    assert out == [1.0, 0.0, 3.0]
    assert reward_failure_counts()["error"] == 1


def test_safe_reward_timeout_returns_zero_quickly():
    release = threading.Event()

    def hangs(completions, **kwargs):
        release.wait(30)
        return [1.0] * len(completions)

    wrapped = safe_reward(hangs, timeout_s=0.5)
    start = time.monotonic()
    assert wrapped(["a", "b"], answer=["1", "2"]) == [0.0, 0.0]
    assert time.monotonic() - start < 2.0
    assert reward_failure_counts()["timeout"] == 2
    release.set()


def test_safe_reward_item_retry_is_bounded_by_the_timeout():
    def raise_then_hang(completions, **kwargs):
        if len(completions) > 1:
            raise RuntimeError("batch failure")
        time.sleep(0.3)  # each single item is slow
        return [1.0]

    wrapped = safe_reward(raise_then_hang, timeout_s=1.0)
    start = time.monotonic()
    out = wrapped(["a", "b", "c", "d", "e"])
    assert time.monotonic() - start < 2.5
    assert out[0] == 1.0  # scored before the retry budget ran out
    assert out[-1] == 0.0  # would have finished after 1.5 s
    assert reward_failure_counts()["timeout"] == out.count(0.0)


@pytest.mark.parametrize("bad_output", [[1.0], None, ["high", "low"], 3.0])
def test_safe_reward_invalid_output(bad_output):
    wrapped = safe_reward(lambda completions, **kw: bad_output)
    assert wrapped(["a", "b"]) == [0.0, 0.0]
    assert reward_failure_counts()["invalid_output"] == 2


def test_safe_reward_keeps_none_and_converts_numbers():
    wrapped = safe_reward(lambda completions, **kw: [None, 1, True])
    assert wrapped(["a", "b", "c"]) == [None, 1.0, 1.0]


# ---------------------------------------------------------------------------------------------- registry


def test_get_reward_funcs():
    funcs = get_reward_funcs(["accuracy", "format", "partial_credit"])
    assert [f.__name__ for f in funcs] == ["accuracy_reward", "format_reward", "partial_credit_reward"]
    # Called the way trl calls them.
    kwargs = {
        "prompts": [[{"role": "user", "content": "q"}]] * 2,
        "completion_ids": [[1, 2], [3]],
        "answer": ["18", "18"],
        "trainer_state": object(),
        "log_extra": lambda *a, **k: None,
        "log_metric": lambda *a, **k: None,
    }
    completions = [conv(r"\boxed{18}"), conv("it is 17")]
    acc, fmt, partial = (f(completions=completions, **kwargs) for f in funcs)
    assert acc == [1.0, 0.0]
    assert fmt == [1.0, 0.0]
    assert partial == [1.0, pytest.approx(0.5 * (1 - 1 / 18))]


def test_get_reward_funcs_without_answer_column_does_not_crash():
    (acc,) = get_reward_funcs(["accuracy"])
    assert acc(completions=["\\boxed{1}"]) == [0.0]
    assert reward_failure_counts_by_function() == {"accuracy_reward/error": 1}


def test_get_reward_funcs_unknown_name():
    with pytest.raises(ValueError, match="accuracy, format, partial_credit"):
        get_reward_funcs(["accuracy", "length"])

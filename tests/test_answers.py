import threading
import time
from fractions import Fraction

import pytest

from qerl import answers
from qerl.answers import (
    extract_all_boxed,
    extract_boxed,
    extract_final_answer,
    extract_last_number,
    extract_marker_answers,
    failure_counts,
    gsm8k_correct,
    gsm8k_gold,
    math_correct,
    numbers_match,
    parse_number,
    reset_failure_counts,
)

# Answers that make math-verify (sympy) compute for minutes while holding the GIL.
HANGING_ANSWER = r"\boxed{10^{10^{10}}}"


# ---------------------------------------------------------------------------------------------- extraction


def test_extract_boxed_last_and_nested():
    text = r"first \boxed{1} then \boxed{\frac{a^{2}}{b_{1}}} end"
    assert extract_boxed(text) == r"\frac{a^{2}}{b_{1}}"
    assert extract_all_boxed(text) == ["1", r"\frac{a^{2}}{b_{1}}"]


def test_extract_boxed_variants():
    assert extract_boxed(r"\fbox{7}") == "7"
    assert extract_boxed(r"\boxed{\boxed{5}}") == "5"
    assert extract_boxed(r"\boxed 9 and more") == "9"
    assert extract_boxed(r"set \boxed{\{1, 2\}}") == r"\{1, 2\}"  # escaped braces are not grouping
    assert extract_boxed(r"\boxed{-3}") == "-3"
    assert extract_boxed("no box here") is None
    assert extract_boxed(None) is None


def test_extract_boxed_ignores_unclosed_trailing_box():
    # A truncated generation: the last complete box is the answer.
    assert extract_boxed(r"\boxed{5} wait, actually \boxed{6") == "5"
    assert extract_boxed(r"\boxed{6") is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so the total is 42.\n#### 42", "42"),
        ("Answer: 42", "42"),
        ("answer: 42", "42"),
        ("**Final Answer:** $42$", "42"),
        ("The answer is 42. Because 40 + 2 = 42.", "42"),
        ("Thus the final answer is \\(7\\).", "7"),
        ("Final answer:\n\n 12", "12"),
        ("#### Step 1\nwork\nAnswer: 5", "5"),  # a markdown heading is not a #### answer
        ("Answer: 3\n#### 4", "4"),  # #### outranks Answer:
        ("#### 4\nThe answer is \\boxed{5}", "5"),  # \boxed outranks everything
        ("Answer: 1\nlater... Answer: 2", "2"),  # the last one wins
        ("I think it is 17 or so", None),
        ("", None),
    ],
)
def test_extract_final_answer(text, expected):
    assert extract_final_answer(text) == expected


def test_extract_marker_answers_counts_each_kind():
    hashes, texts = extract_marker_answers("Answer: 1\n#### 2\nThe answer is 3")
    assert hashes == ["2"]
    assert texts == ["1", "3"]
    assert extract_marker_answers(None) == ([], [])


@pytest.mark.parametrize(
    "text, expected",
    [
        ("she has 3 apples and pays 1,250 dollars", "1250"),
        ("the result is −3", "-3"),
        ("x went from 5-3", "3"),  # a hyphen between numbers is not a sign
        ("about 2.50 each", "2.50"),
        ("a ratio of 3/4", "3/4"),
        ("no digits", None),
    ],
)
def test_extract_last_number(text, expected):
    assert extract_last_number(text) == expected


def test_gsm8k_gold():
    assert gsm8k_gold("Natalia sold 48/2 = 24 clips.\n#### 72") == "72"
    assert gsm8k_gold("... #### 1,000") == "1000"
    assert gsm8k_gold("#### -5") == "-5"
    with pytest.raises(ValueError, match="####"):
        gsm8k_gold("no marker, 72")
    with pytest.raises(ValueError, match="empty"):
        gsm8k_gold("####   ")


# ---------------------------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    "text, expected",
    [
        ("18", Fraction(18)),
        ("1,000", Fraction(1000)),
        ("1,234,567.5", Fraction(2469135, 2)),
        ("$18.00", Fraction(18)),
        (r"\$18", Fraction(18)),
        ("18 dollars", Fraction(18)),
        ("18 apples", Fraction(18)),
        (r"18 \text{ apples}", Fraction(18)),
        ("18.0", Fraction(18)),
        ("18.", Fraction(18)),
        (".5", Fraction(1, 2)),
        ("3/4", Fraction(3, 4)),
        (r"\frac{3}{4}", Fraction(3, 4)),
        (r"\dfrac{3}{4}", Fraction(3, 4)),
        (r"\frac34", Fraction(3, 4)),
        (r"-\frac{1}{2}", Fraction(-1, 2)),
        (r"\frac{1}{-2}", Fraction(-1, 2)),
        ("-3", Fraction(-3)),
        ("−3", Fraction(-3)),
        (r"\boxed{-3}", Fraction(-3)),
        ("25%", Fraction(25)),  # documented: percent sign dropped
        (r"25\%", Fraction(25)),
        (r"1{,}000", Fraction(1000)),
        (r"1\,000", Fraction(1000)),
        (r"1\!000", None),
        ("x = 5", Fraction(5)),
        (r"30^\circ", Fraction(30)),
        (7, Fraction(7)),
        (0.5, Fraction(1, 2)),
    ],
)
def test_parse_number_accepts(text, expected):
    assert parse_number(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "3 or 4",
        "(1, 2)",
        "2x",
        "5cm",
        "1.5x",
        "2^3",
        r"\sqrt{2}",
        r"2\pi",
        "2 pi",
        "1/0",
        "99!",
        "1,5",
        "5-3",
        None,
    ],
)
def test_parse_number_rejects(text):
    assert parse_number(text) is None


def test_numbers_match_traps():
    assert numbers_match("17", "18") is False
    assert numbers_match("1,000", "1000") is True
    assert numbers_match("18.0", "18") is True
    assert numbers_match("$18.00", "18") is True
    assert numbers_match(r"\frac{1}{2}", "0.5") is True
    assert numbers_match("1/2", "0.5") is True
    assert numbers_match(None, "18") is False
    assert numbers_match("eighteen", "18") is False
    assert numbers_match("18", "not a number") is False


def test_gsm8k_correct():
    assert gsm8k_correct("3 + 15 = 18\n#### 18", "18") == (True, "18")
    assert gsm8k_correct("The answer is 17.", "18") == (False, "17")
    assert gsm8k_correct(r"so \boxed{-3}", "-3") == (True, "-3")
    assert gsm8k_correct("Answer: 1,000", "1000") == (True, "1,000")
    # No marker at all: the last number is used.
    assert gsm8k_correct("She pays 3 times 6, so 18.", "18") == (True, "18")
    # A marker whose content is not a number is not replaced by the last number.
    assert gsm8k_correct("6 * 3 = 18. Answer: eighteen", "18") == (False, "eighteen")
    # Nothing to extract at all.
    assert gsm8k_correct("I do not know.", "18") == (False, None)
    assert gsm8k_correct("", "18") == (False, None)


# ---------------------------------------------------------------------------------------------- math-verify


def test_math_correct_numeric_and_symbolic():
    assert math_correct(r"\boxed{\frac{1}{2}}", "0.5") == (True, r"\frac{1}{2}")
    assert math_correct(r"\boxed{0.5}", r"\frac{1}{2}")[0] is True
    assert math_correct("Answer: 1/2", r"\frac{1}{2}")[0] is True
    assert math_correct(r"\boxed{-3}", "-3")[0] is True
    assert math_correct(r"\boxed{17}", "18") == (False, "17")
    assert math_correct("no answer here", "18") == (False, None)
    # These need math-verify (not plain numbers).
    assert math_correct(r"\boxed{\frac{1}{\sqrt{2}}}", r"\frac{\sqrt{2}}{2}")[0] is True
    assert math_correct(r"\boxed{(3, \pi/2)}", r"\left( 3, \frac{\pi}{2} \right)")[0] is True
    assert math_correct(r"\boxed{\sqrt{3}}", r"\sqrt{2}")[0] is False


def test_math_correct_timeout_returns_false_and_counts():
    math_correct(r"\boxed{\sqrt{8}}", r"2\sqrt{2}")  # start a worker so startup is not in the timing
    reset_failure_counts()
    start = time.monotonic()
    ok, extracted = math_correct(f"so {HANGING_ANSWER}", "5", timeout_s=1.0)
    elapsed = time.monotonic() - start
    assert (ok, extracted) == (False, "10^{10^{10}}")
    assert elapsed < 4.0
    assert failure_counts()["timeout"] == 1
    # The hung worker was replaced: later checks still work.
    assert math_correct(r"\boxed{\sqrt{8}}", r"2\sqrt{2}")[0] is True
    assert failure_counts()["timeout"] == 1


def test_math_correct_from_many_threads():
    cases = [(rf"\boxed{{\frac{{{k}}}{{\sqrt{{2}}}}}}", rf"\frac{{{k}\sqrt{{2}}}}{{2}}", True) for k in range(1, 7)]
    cases += [(rf"\boxed{{\frac{{{k}}}{{\sqrt{{3}}}}}}", rf"\frac{{{k}\sqrt{{2}}}}{{2}}", False) for k in range(1, 5)]
    results: dict[int, bool] = {}
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = math_correct(cases[i][0], cases[i][1], timeout_s=30.0)[0]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    reset_failure_counts()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert results == {i: expected for i, (_, _, expected) in enumerate(cases)}
    assert failure_counts() == {"timeout": 0, "error": 0, "busy": 0}


def test_math_correct_hang_in_worker_thread_does_not_block_others():
    out: dict[str, tuple[bool, float]] = {}

    def hang() -> None:
        start = time.monotonic()
        out["hang"] = (math_correct(HANGING_ANSWER, "5", timeout_s=1.5)[0], time.monotonic() - start)

    t = threading.Thread(target=hang)
    t.start()
    time.sleep(0.2)
    # Meanwhile another check from the main thread completes (a second worker is used).
    assert math_correct(r"\boxed{\sqrt{8}}", r"2\sqrt{2}", timeout_s=30.0)[0] is True
    t.join(30)
    assert not t.is_alive()
    assert out["hang"][0] is False
    assert out["hang"][1] < 15.0


def test_worker_crash_is_counted_as_error(monkeypatch):
    # A worker that exits immediately: the check fails cleanly and is counted, no exception escapes.
    answers.shutdown_math_verify()
    monkeypatch.setattr(answers, "_WORKER_BOOT", "import sys; sys.exit(3)")
    reset_failure_counts()
    assert math_correct(r"\boxed{\sqrt{8}}", r"2\sqrt{2}") == (False, r"\sqrt{8}")
    assert failure_counts()["error"] == 1
    monkeypatch.undo()
    answers.shutdown_math_verify()
    assert math_correct(r"\boxed{\sqrt{8}}", r"2\sqrt{2}")[0] is True

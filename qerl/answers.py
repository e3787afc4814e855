"""Answer extraction and comparison, shared by the reward functions and by evaluation.

Two layers:

* Cheap, pure-Python extraction (``extract_*``) and exact rational comparison (``parse_number`` /
  ``numbers_match``), used for GSM8K-style numeric answers.
* ``math_correct``: symbolic comparison with math-verify for competition-math answers.

math-verify's own timeouts rely on ``signal.alarm`` (main thread only), and a thread cannot be used instead:
pathological answers such as ``\\boxed{99999999!}`` or ``10^{10^{10}}`` spend minutes inside C code that holds
the GIL, so a watchdog thread never even gets to run. math-verify therefore runs in a small pool of long-lived
worker *processes* (plain ``subprocess`` + JSON lines, no ``multiprocessing``: nothing is forked from a process
that may hold CUDA state or threads, and the caller's ``__main__`` is never re-imported). A request that
exceeds its time budget gets its worker killed; a fresh one is started on demand. This works from any thread
of any process. Each worker also caps its own CPU time per request (RLIMIT_CPU), so an orphaned worker stuck
in a computation dies by itself.

Only the standard library is imported at module level: the worker loads this file on its own (without the
``qerl`` package) and imports math-verify lazily.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import selectors
import subprocess
import sys
import threading
import time
from decimal import Decimal, InvalidOperation
from fractions import Fraction

logger = logging.getLogger(__name__)

__all__ = [
    "extract_all_boxed",
    "extract_boxed",
    "extract_final_answer",
    "extract_last_number",
    "extract_marker_answers",
    "failure_counts",
    "gsm8k_correct",
    "gsm8k_gold",
    "math_correct",
    "math_verify_workers",
    "numbers_match",
    "parse_number",
    "reset_failure_counts",
    "shutdown_math_verify",
]

# --------------------------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------------------------

_BOX_CMD = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def _boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every complete top-level ``\\boxed{...}`` / ``\\fbox{...}``."""
    spans: list[tuple[int, int, str]] = []
    covered_until = -1
    for m in _BOX_CMD.finditer(text):
        if m.start() < covered_until:  # nested inside the previous box: part of its content
            continue
        i = m.end()
        n = len(text)
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] == "{":
            depth = 0
            j = i
            end = -1
            while j < n:
                c = text[j]
                if c == "\\":  # an escaped brace (\{, \}) is a literal character, not grouping
                    j += 2
                    continue
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        end = j
                        break
                j += 1
            if end < 0:  # unclosed (e.g. truncated generation): not an answer
                continue
            spans.append((m.start(), end + 1, text[i + 1 : end].strip()))
            covered_until = end + 1
        elif i > m.end() and i < n:  # "\boxed 5" (TeX allows a single unbraced token)
            tok = re.match(r"[^\s$]+", text[i:])
            if tok:
                spans.append((m.start(), i + tok.end(), tok.group(0)))
                covered_until = i + tok.end()
    return spans


def _unwrap_boxed(content: str) -> str:
    # "\boxed{\boxed{5}}" -> "5"
    while True:
        inner = _boxed_spans(content)
        if len(inner) == 1 and inner[0][0] == 0 and inner[0][1] == len(content):
            content = inner[0][2]
        else:
            return content


def extract_all_boxed(text: str | None) -> list[str]:
    """Contents of all complete top-level ``\\boxed{}``/``\\fbox{}`` in order (nested braces handled)."""
    if not text:
        return []
    return [_unwrap_boxed(c) for _, _, c in _boxed_spans(text)]


def extract_boxed(text: str | None) -> str | None:
    """Content of the last complete ``\\boxed{...}`` (or ``\\fbox{...}``); None if there is none.

    An unclosed trailing ``\\boxed{`` (truncated generation) is ignored, so the last *complete* box wins.
    """
    boxes = extract_all_boxed(text)
    return boxes[-1] if boxes else None


# "#### 42": the GSM8K convention. The content must start like a value so that markdown headings
# ("#### Step 2") are not mistaken for an answer.
_HASH_ANSWER = re.compile(r"####[ \t]*(?=[-−+$\\\d.(\[{])([^\n]+)")
# "Answer: 42", "**Final Answer:** 42", "The final answer is 42".
_TEXT_ANSWER = re.compile(
    r"(?:\banswer[ \t]*(?:\*\*)?[ \t]*[:：]|\bthe[ \t]+(?:final[ \t]+)?answer[ \t]+is\b[ \t]*:?)[ \t]*([^\n]*)",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"\.(?=\s)")


def _clean_answer(s: str) -> str | None:
    s = s.strip()
    m = _SENTENCE_END.search(s)  # "42. Because ..." -> "42" (decimals like 3.5 have no space after the dot)
    if m:
        s = s[: m.start()]
    prev = None
    while s != prev:
        prev = s
        s = s.strip().strip("*").strip()
        s = s.rstrip(".;,").strip()
        for left, right in (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            if s.startswith(left) and s.endswith(right) and len(s) >= len(left) + len(right):
                s = s[len(left) : len(s) - len(right)]
    return s or None


def extract_marker_answers(text: str | None) -> tuple[list[str], list[str]]:
    """Cleaned, non-empty answers behind ``#### X`` markers and behind ``Answer: X``-style markers, in order."""
    if not text:
        return [], []
    hashes = [a for a in (_clean_answer(m.group(1)) for m in _HASH_ANSWER.finditer(text)) if a]
    texts: list[str] = []
    for m in _TEXT_ANSWER.finditer(text):
        raw = m.group(1)
        if not raw.strip():  # "Final answer:\n42": the value is on the next non-empty line
            rest = text[m.end() :].lstrip("\n")
            raw = rest.split("\n", 1)[0] if rest else ""
        a = _clean_answer(raw)
        if a:
            texts.append(a)
    return hashes, texts


def extract_final_answer(text: str | None) -> str | None:
    """Final answer by priority: last ``\\boxed{}``, else last ``#### X``, else last ``Answer: X`` /
    ``The (final) answer is X`` (case-insensitive); None when no marker is present.

    Text markers take the rest of their line, cut at the first sentence end and stripped of ``$``,
    ``**`` and a trailing period.
    """
    if not text:
        return None
    boxed = extract_boxed(text)
    if boxed:
        return boxed
    hashes, texts = extract_marker_answers(text)
    if hashes:
        return hashes[-1]
    if texts:
        return texts[-1]
    return None


_LAST_NUMBER = re.compile(r"(?:(?<![\w.])-)?(?<![\d.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[ \t]*/[ \t]*\d+)?")


def extract_last_number(text: str | None) -> str | None:
    """Last number in ``text`` ("1,000" -> "1000", "−3" -> "-3", "3/4" stays "3/4"); None if there is none."""
    if not text:
        return None
    matches = _LAST_NUMBER.findall(text.replace("−", "-"))
    if not matches:
        return None
    return re.sub(r"\s+", "", matches[-1]).replace(",", "")


def gsm8k_gold(answer_field: str) -> str:
    """The number after the last ``####`` of a GSM8K answer field, thousands separators removed."""
    matches = list(re.finditer(r"####[ \t]*([^\n]*)", answer_field or ""))
    if not matches:
        raise ValueError(f"GSM8K answer field has no '#### <number>' line: {answer_field[-200:]!r}")
    gold = matches[-1].group(1).strip().rstrip(".").replace(",", "").replace("−", "-")
    if not gold:
        raise ValueError(f"GSM8K answer field has an empty '####' line: {answer_field[-200:]!r}")
    return gold


# --------------------------------------------------------------------------------------------------------------
# Numeric parsing
# --------------------------------------------------------------------------------------------------------------

_NUM_CORE = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"
_VALUE_TOKEN = re.compile(
    rf"(?<![\w.])(?P<sign>-[ \t]*)?(?P<num>{_NUM_CORE})"
    rf"(?:[ \t]*/[ \t]*(?P<dsign>-[ \t]*)?(?P<den>{_NUM_CORE}))?(?!\w|\.\d|,\d)"
)
_TEXT_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox|operatorname)\s*\{([^{}]*)\}")
_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?\s*[\d.,]+)\s*\}\s*\{\s*(-?\s*[\d.,]+)\s*\}")
_LATEX_FRAC_SHORT = re.compile(r"\\[dt]?frac\s*(\d)\s*(\d)")
_VAR_ASSIGN = re.compile(r"^\s*[A-Za-z]\w*\s*=\s*")
# Anything left beside the single number that makes the string an expression rather than "number + units".
_FORBIDDEN = re.compile(r"[+*/^=<>|\\_&#@!±∓√π∞×÷·≈]")
_LONE_HYPHEN = re.compile(r"(?<![A-Za-z])-|-(?![A-Za-z])")
_MATH_WORDS = {"pi", "sqrt", "root", "i", "e", "inf", "infinity", "ln", "log", "sin", "cos", "tan", "exp", "mod"}


def _normalize_numeric_text(s: str) -> str:
    if "\\boxed" in s or "\\fbox" in s:
        s = extract_boxed(s) or s
    s = s.replace("−", "-").replace("\u2009", " ").replace("\u00a0", " ")
    s = s.replace("{,}", ",")
    s = re.sub(r"(?<=\d)\\,(?=\d{3}(?!\d))", "", s)  # "1\,000": thin space as thousands separator
    s = s.replace("\\$", "").replace("$", "").replace("\\%", "").replace("%", "")
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?|°", "", s)
    s = re.sub(r"\\(?:left|right|displaystyle)\b", "", s)
    s = re.sub(r"\\[!,;: ]|\\q?quad\b|~", " ", s)
    prev = None
    while prev != s:
        prev = s
        s = _TEXT_WRAPPERS.sub(lambda m: f" {m.group(1)} ", s)
    s = _LATEX_FRAC.sub(lambda m: f" {m.group(1)}/{m.group(2)} ", s)
    s = _LATEX_FRAC_SHORT.sub(lambda m: f" {m.group(1)}/{m.group(2)} ", s)
    s = s.replace("{", "").replace("}", "")
    return _VAR_ASSIGN.sub("", s, count=1).strip()


def _to_fraction(core: str) -> Fraction:
    return Fraction(Decimal(core.replace(",", "")))


def parse_number(s: str | int | float | None) -> Fraction | None:
    """Parse a single number out of an answer string; None if it holds no number or is an expression.

    Accepted: thousands separators ("1,000", LaTeX "1{,}000"), ``$``/``\\$``, ``%`` (dropped: "25%" -> 25,
    because GSM8K golds for percentage questions are the bare number), units/surrounding words
    ("18 dollars", "\\text{ apples}"), trailing zeros ("18.00"), degrees, ``x = 5``, simple fractions
    ("3/4", ``\\frac{3}{4}``, ``\\dfrac``), negatives ("-3", "−3").
    Rejected (None): several numbers ("3 or 4", "(1, 2)"), operators or leftover LaTeX commands
    ("2^3", "\\sqrt{2}", "2\\pi"), a number glued to a letter ("2x", "5cm"), division by zero.
    """
    if s is None or isinstance(s, bool):
        return None
    if isinstance(s, int):
        return Fraction(s)
    if isinstance(s, float):
        return Fraction(Decimal(repr(s))) if s == s and s not in (float("inf"), float("-inf")) else None
    text = _normalize_numeric_text(str(s))
    if not text:
        return None
    tokens = list(_VALUE_TOKEN.finditer(text))
    if len(tokens) != 1:
        return None
    tok = tokens[0]
    residual = f"{text[: tok.start()]} {text[tok.end() :]}"
    if _FORBIDDEN.search(residual) or _LONE_HYPHEN.search(residual) or re.search(r"\d", residual):
        return None
    if any(w.lower() in _MATH_WORDS for w in re.findall(r"[A-Za-z]+", residual)):
        return None
    try:
        value = _to_fraction(tok.group("num"))
        if tok.group("den") is not None:
            den = _to_fraction(tok.group("den"))
            if den == 0:
                return None
            value /= den
            if tok.group("dsign"):
                value = -value
    except (InvalidOperation, ValueError, ZeroDivisionError):
        return None
    return -value if tok.group("sign") else value


def numbers_match(pred: str | None, gold: str) -> bool:
    """Exact rational equality of ``parse_number(pred)`` and ``parse_number(gold)``; False if either fails."""
    if pred is None:
        return False
    p = parse_number(pred)
    g = parse_number(gold)
    return p is not None and g is not None and p == g


def _extract_with_fallback(completion: str) -> str | None:
    return extract_final_answer(completion) or extract_last_number(completion)


def gsm8k_correct(completion: str, gold: str) -> tuple[bool, str | None]:
    """Numeric check of a completion against a GSM8K gold.

    The answer is ``extract_final_answer``; when the completion has no marker at all, the last number in it
    is used instead (so an unformatted "... she pays 18." still counts). A marker whose content is not a
    number ("Answer: eighteen") is *not* replaced by the last number. Returns (correct, extracted); extracted
    is None only when the completion contains neither a marker nor any number.
    """
    extracted = _extract_with_fallback(completion or "")
    return numbers_match(extracted, gold), extracted


# --------------------------------------------------------------------------------------------------------------
# Failure counters
# --------------------------------------------------------------------------------------------------------------

_COUNT_KEYS = ("timeout", "error", "busy")
_counts_lock = threading.Lock()
_counts: dict[str, int] = dict.fromkeys(_COUNT_KEYS, 0)
_warned: set[str] = set()


def _record_failure(kind: str, detail: str) -> None:
    with _counts_lock:
        _counts[kind] = _counts.get(kind, 0) + 1
        first = kind not in _warned
        _warned.add(kind)
    if first:  # once per kind: these can happen every step of a long run
        logger.warning(
            "math-verify check failed (%s): %s; counted as incorrect (further ones not logged)", kind, detail
        )


def failure_counts() -> dict[str, int]:
    """How many math-verify checks ended in "timeout", "error" (worker crash/start failure/bad reply) or
    "busy" (no worker free in time), since import or the last ``reset_failure_counts``."""
    with _counts_lock:
        return dict(_counts)


def reset_failure_counts() -> None:
    with _counts_lock:
        for k in list(_counts):
            _counts[k] = 0
        _warned.clear()


# --------------------------------------------------------------------------------------------------------------
# math-verify worker processes
# --------------------------------------------------------------------------------------------------------------

_STARTUP_TIMEOUT_S = 120.0  # importing sympy on a loaded machine can be slow; not charged to timeout_s
_ACQUIRE_TIMEOUT_S = 120.0  # waiting for a free worker; busy workers free up within their own timeout
_MAX_EXPR_CHARS = 4000  # a longer "answer" is degenerate output, not worth a symbolic comparison

_WORKER_BOOT = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('_qerl_answers_worker', sys.argv[1])\n"
    "mod = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(mod)\n"
    "mod._worker_main()\n"
)


def _default_workers() -> int:
    env = os.environ.get("QERL_MATH_VERIFY_WORKERS")
    if env:
        return max(1, int(env))
    return max(1, min(4, os.cpu_count() or 1))


def _worker_main() -> None:
    """Entry point of a worker process: one JSON request per stdin line, one JSON reply per stdout line."""
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # stray prints from libraries must not corrupt the protocol
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    try:
        import resource
    except ImportError:  # non-POSIX: rely on the parent killing us
        resource = None  # type: ignore[assignment]
    from math_verify import parse, verify

    def reply(obj: dict) -> None:
        out.write(json.dumps(obj).encode() + b"\n")
        out.flush()

    reply({"ready": True})
    for raw in sys.stdin.buffer:
        try:
            req = json.loads(raw)
            if resource is not None:
                # Self-destruct (SIGXCPU) if this request burns far more CPU than allowed, even if the
                # parent is gone; the parent normally kills us much earlier on wall-clock time.
                usage = resource.getrusage(resource.RUSAGE_SELF)
                used = usage.ru_utime + usage.ru_stime
                hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
                soft = int(used + float(req.get("cpu_s", 30.0))) + 1
                if hard == resource.RLIM_INFINITY or soft <= hard:
                    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
            # Timeouts off: signal.alarm is what this process design replaces.
            gold = parse(req["gold"], parsing_timeout=None)
            pred = parse(req["pred"], parsing_timeout=None)
            ok = bool(gold) and bool(pred) and bool(verify(gold, pred, timeout_seconds=None))
            reply({"ok": ok})
        except Exception as exc:  # str(exc) of sympy objects can itself hang: report the type only
            reply({"error": type(exc).__name__})


class _WorkerDied(RuntimeError):
    pass


class _PoolBusy(RuntimeError):
    pass


class _Worker:
    def __init__(self) -> None:
        cmd = [sys.executable]
        if sys.version_info >= (3, 11):
            cmd.append("-P")  # do not put the cwd on sys.path: a stray local file cannot shadow a module
        cmd += ["-c", _WORKER_BOOT, os.path.abspath(__file__)]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            close_fds=True,
            start_new_session=True,  # a terminal Ctrl-C goes to the trainer, not to idle workers
        )
        self._buf = b""
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            msg = self.read_message(time.monotonic() + _STARTUP_TIMEOUT_S)
            if not msg.get("ready"):
                raise _WorkerDied(f"unexpected startup message {msg!r}")
        except BaseException:
            self.kill()
            raise

    def send(self, obj: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()

    def read_message(self, deadline: float) -> dict:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._sel.select(remaining):
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                raise _WorkerDied(f"math-verify worker exited (code {self.proc.poll()})")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def kill(self) -> None:
        try:
            self._sel.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


class _VerifierPool:
    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers
        self.pid = os.getpid()
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._live = 0
        self._all: set[_Worker] = set()
        self._closed = False

    def acquire(self, wait_s: float) -> _Worker:
        deadline = time.monotonic() + wait_s
        with self._cond:
            while True:
                while self._idle:
                    w = self._idle.pop()
                    if w.proc.poll() is None:
                        return w
                    self._discard_locked(w)
                if self._live < self.max_workers:
                    self._live += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _PoolBusy(f"all {self.max_workers} math-verify workers busy for {wait_s:.0f}s")
                self._cond.wait(remaining)
        try:  # start outside the lock: other threads may keep using idle workers meanwhile
            w = _Worker()
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._all.add(w)
        return w

    def _discard_locked(self, w: _Worker) -> None:
        if w in self._all:
            self._all.discard(w)
            self._live -= 1

    def release(self, w: _Worker, reusable: bool) -> None:
        with self._cond:
            if self._closed:
                reusable = False
            if reusable:
                self._idle.append(w)
            else:
                self._discard_locked(w)
            self._cond.notify()
        if not reusable:
            w.kill()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
            self._live = 0
            self._cond.notify_all()
        for w in workers:
            w.kill()


_pool_lock = threading.Lock()
_pool: _VerifierPool | None = None


def _get_pool() -> _VerifierPool:
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            # After a fork the inherited workers belong to the parent; start our own.
            _pool = _VerifierPool(_default_workers())
        return _pool


def math_verify_workers() -> int:
    """Maximum number of math-verify worker processes (env ``QERL_MATH_VERIFY_WORKERS``, default min(4, CPUs))."""
    return _get_pool().max_workers


def shutdown_math_verify() -> None:
    """Stop all math-verify workers of this process (they are restarted on demand)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()


atexit.register(shutdown_math_verify)


def _math_verify(pred: str, gold: str, timeout_s: float) -> bool | None:
    """math-verify equivalence of two LaTeX snippets in a worker process; None on timeout/failure."""
    pool = _get_pool()
    try:
        w = pool.acquire(_ACQUIRE_TIMEOUT_S)
    except _PoolBusy as exc:
        _record_failure("busy", str(exc))
        return None
    except Exception as exc:
        _record_failure("error", f"could not start a math-verify worker: {exc!r}")
        return None
    reusable = False
    try:
        w.send({"gold": gold, "pred": pred, "cpu_s": timeout_s + 5.0})
        msg = w.read_message(time.monotonic() + timeout_s)
        reusable = True
        if "ok" in msg:
            return bool(msg["ok"])
        _record_failure("error", f"math-verify raised {msg.get('error')}")
        return None
    except TimeoutError:
        _record_failure("timeout", f"no verdict within {timeout_s:g}s for {pred[:80]!r} vs {gold[:80]!r}")
        return None
    except Exception as exc:
        _record_failure("error", repr(exc))
        return None
    finally:
        pool.release(w, reusable)


_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")


def _as_latex_target(s: str) -> str:
    """Wrap an answer so math-verify's LaTeX extraction picks it up as a whole."""
    s = s.strip()
    if "\\boxed" in s or "\\fbox" in s or _UNESCAPED_DOLLAR.search(s):
        return s
    return f"\\boxed{{{s}}}"


def math_correct(completion: str, gold: str, timeout_s: float = 5.0) -> tuple[bool, str | None]:
    """Check a completion against a competition-math gold answer.

    The answer is extracted like ``gsm8k_correct`` (markers first, last number as fallback). It is correct if
    it equals the gold as an exact number (``numbers_match``, no worker needed), or else if math-verify finds
    the two equivalent. When both sides are plain integers the numeric verdict is final. The math-verify call
    runs in a worker process and is abandoned (worker killed) after ``timeout_s``; a timeout or failure counts
    as incorrect and is tallied in ``failure_counts()``. Safe to call from any thread.
    """
    extracted = _extract_with_fallback(completion or "")
    if extracted is None:
        return False, None
    gold = str(gold).strip()
    if numbers_match(extracted, gold):
        return True, extracted
    p, g = parse_number(extracted), parse_number(gold)
    if p is not None and g is not None and p.denominator == 1 and g.denominator == 1:
        return False, extracted
    if not gold or len(extracted) > _MAX_EXPR_CHARS:
        return False, extracted
    pred_text = _clean_answer(extracted) or extracted
    verdict = _math_verify(_as_latex_target(pred_text), _as_latex_target(gold), timeout_s)
    return bool(verdict), extracted

"""Task datasets as ``datasets.Dataset`` with columns ``prompt`` (conversational), ``answer`` (gold string),
``question`` (raw problem text) and ``source`` (task name).

Prompts stay conversational (system + user messages): trl applies the tokenizer's chat template itself.
Every hub task can instead read a local json/jsonl/parquet/csv file with the hub's column layout
(``data_file=...``), which is how the loaders work offline.
"""

from __future__ import annotations

import logging
import random
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import datasets
from datasets import Dataset

from qerl.answers import extract_boxed, gsm8k_gold, parse_number

logger = logging.getLogger(__name__)

__all__ = [
    "DATASET_NAMES",
    "SYSTEM_PROMPT",
    "DatasetLoadError",
    "apply_chat_template_prompts",
    "build_prompt",
    "load_task_dataset",
    "arith_held_out_count",
    "make_arith_dataset",
]

SYSTEM_PROMPT = (
    "You are a careful math assistant. Reason step by step, then state the exact final answer at the end "
    "of your response in the form \\boxed{ANSWER}. Put only the final answer inside \\boxed{}: a number or a "
    "simplified expression, without units."
)
# Used instead of the system message when a model has no system role (``system_prompt=None``).
USER_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

_DAPO_PREFIX = "Solve the following math problem step by step."
_DAPO_SUFFIX = 'Remember to put your answer on its own line after "Answer:"'


class DatasetLoadError(RuntimeError):
    """A hub dataset could not be loaded (typically: no network and nothing cached)."""


def build_prompt(question: str, system_prompt: str | None = SYSTEM_PROMPT) -> list[dict[str, str]]:
    """Conversational prompt for one problem."""
    if system_prompt is None:
        return [{"role": "user", "content": f"{question}\n\n{USER_INSTRUCTION}"}]
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": question}]


# --------------------------------------------------------------------------------------------------------------
# Synthetic arithmetic
# --------------------------------------------------------------------------------------------------------------


def _arith_expression(rng: random.Random, difficulty: int) -> str:
    if difficulty == 0:
        return f"{rng.randint(0, 9)} + {rng.randint(0, 9)}"
    if difficulty == 1:
        return f"{rng.randint(10, 99)} {rng.choice('+-')} {rng.randint(10, 99)}"
    if difficulty == 2:
        op = rng.choice("+-**")  # multiplication half of the time
        b = rng.randint(2, 99) if op == "*" else rng.randint(100, 999)
        return f"{rng.randint(100, 999)} {op} {b}"
    # difficulty 3: three operations with random grouping, e.g. "(12 + 7) * 3 - 40"
    nums = [rng.randint(2, 50) for _ in range(4)]
    ops = [rng.choice("+-*") for _ in range(3)]
    a, b, c, d = nums
    shape = rng.randrange(4)
    if shape == 0:
        return f"({a} {ops[0]} {b}) {ops[1]} {c} {ops[2]} {d}"
    if shape == 1:
        return f"{a} {ops[0]} ({b} {ops[1]} {c}) {ops[2]} {d}"
    if shape == 2:
        return f"({a} {ops[0]} {b}) {ops[1]} ({c} {ops[2]} {d})"
    return f"{a} {ops[0]} {b} {ops[1]} ({c} {ops[2]} {d})"


def _eval_arith(expr: str) -> int:
    """Exact value of an expression built by ``_arith_expression`` (integers, + - *, parentheses)."""
    tokens = expr.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def atom() -> int:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            v = expr_sum()
            pos += 1  # ")"
            return v
        return int(tok)

    def term() -> int:
        nonlocal pos
        v = atom()
        while pos < len(tokens) and tokens[pos] == "*":
            pos += 1
            v *= atom()
        return v

    def expr_sum() -> int:
        nonlocal pos
        v = term()
        while pos < len(tokens) and tokens[pos] in "+-":
            op = tokens[pos]
            pos += 1
            v = v + term() if op == "+" else v - term()
        return v

    return expr_sum()


def _is_held_out(expr: str) -> bool:
    # A fixed 10% of all possible problems is reserved for evaluation, so the train split never contains an
    # evaluation problem whatever the sizes and seeds.
    return zlib.crc32(expr.encode()) % 10 == 0


def arith_held_out_count(difficulty: int) -> int | None:
    """How many distinct problems the held-out split of this difficulty has (None: too many to matter)."""
    if difficulty == 0:
        exprs = (f"{a} + {b}" for a in range(10) for b in range(10))
    elif difficulty == 1:
        exprs = (f"{a} {op} {b}" for a in range(10, 100) for op in "+-" for b in range(10, 100))
    else:
        return None  # 2: over a million problems, 3: billions
    return sum(_is_held_out(e) for e in exprs)


def make_arith_dataset(
    n: int,
    difficulty: int = 1,
    seed: int = 0,
    *,
    split: str = "train",
    system_prompt: str | None = SYSTEM_PROMPT,
) -> Dataset:
    """Deterministic synthetic arithmetic problems; ``answer`` is the exact integer as a string.

    difficulty 0: one-digit a + b; 1: two-digit + or -; 2: three-digit +, - or * (by a 2-99 multiplier);
    3: three operations with parentheses. The same arguments always give the same rows, and a larger n extends
    a smaller one. ``split="train"`` draws from 90% of the possible problems, with repeats; any other split draws
    distinct problems from the disjoint remaining 10%, so an evaluation counts each problem once (difficulty 0 has
    only 14 of them, see ``arith_held_out_count``).
    """
    if n <= 0:
        raise ValueError(f"arith dataset size must be positive, got n={n}")
    if difficulty not in (0, 1, 2, 3):
        raise ValueError(f"arith difficulty must be 0, 1, 2 or 3, got {difficulty}")
    held_out = split != "train"
    available = arith_held_out_count(difficulty) if held_out else None
    if available is not None and n > available:
        raise ValueError(f"the held-out arith split of difficulty {difficulty} has {available} distinct problems: "
                         f"ask for at most {available}")
    drawn: set[str] = set()
    # str seeds are stable across runs and platforms
    rng = random.Random(f"qerl-arith:{difficulty}:{seed}:{split}")
    questions, answers, exprs = [], [], []
    while len(exprs) < n:
        expr = _arith_expression(rng, difficulty)
        if _is_held_out(expr) != held_out or (held_out and expr in drawn):
            continue
        drawn.add(expr)
        exprs.append(expr)
        questions.append(f"Compute {expr}.")
        answers.append(str(_eval_arith(expr)))
    return Dataset.from_dict(
        {
            "prompt": [build_prompt(q, system_prompt) for q in questions],
            "answer": answers,
            "question": questions,
            "source": ["arith"] * n,
            "expression": exprs,
        }
    )


# --------------------------------------------------------------------------------------------------------------
# Loading helpers
# --------------------------------------------------------------------------------------------------------------

_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


def _load_local_file(path: str | Path) -> Dataset:
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"Dataset file not found: {p}")
    builder = _BUILDERS.get(p.suffix.lower())
    if builder is None:
        raise ValueError(f"Unsupported dataset file type {p.suffix!r} ({p}); use one of {sorted(_BUILDERS)}")
    if _file_has_no_rows(p, builder):
        raise ValueError(f"Dataset file {p} is empty (no rows)")
    return datasets.load_dataset(builder, data_files=str(p), split="train")


def _file_has_no_rows(p: Path, builder: str) -> bool:
    # datasets fails on row-less files with unrelated-looking errors (StopIteration, "corresponds to no data").
    if p.stat().st_size == 0:
        return True
    if builder == "parquet":
        import pyarrow.parquet as pq

        return pq.read_metadata(p).num_rows == 0
    lines: list[bytes] = []
    with p.open("rb") as f:
        for line in f:
            if line.strip():
                lines.append(line)
                if len(lines) == 2:
                    break
    if builder == "csv":
        return len(lines) < 2  # header only
    return not lines or lines[0].strip() in (b"[]", b"{}")


def _is_unreachable(exc: BaseException) -> bool:
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        # datasets reports "no network and not cached" as ConnectionError (an OSError); a missing/gated repo is
        # a FileNotFoundError subclass. Both are fixed the same way.
        if isinstance(e, OSError) or type(e).__name__ in {"OfflineModeIsEnabled", "LocalEntryNotFoundError"}:
            return True
        e = e.__cause__ or e.__context__
    return False


def _load_hub(hub_id: str, config: str | None, split: str) -> Dataset:
    try:
        if config is None:
            return datasets.load_dataset(hub_id, split=split)
        return datasets.load_dataset(hub_id, config, split=split)
    except Exception as exc:
        if _is_unreachable(exc):
            what = hub_id + (f" (config {config!r})" if config else "")
            raise DatasetLoadError(
                f"Could not load {what}, split {split!r}, from the Hugging Face Hub: {type(exc).__name__}: {exc}. "
                "Without network access, pass a local copy with --dataset-file PATH (json/jsonl/parquet/csv with "
                "the hub's columns), or pre-download it into the Hugging Face cache on a machine with network "
                "(datasets.load_dataset(...) once, then copy HF_HOME)."
            ) from exc
        raise


def _pick_column(ds: Dataset, candidates: Iterable[str], what: str, task: str, override: str | None = None) -> str:
    cols = list(ds.column_names)
    if override is not None:
        if override not in cols:
            raise ValueError(f"{task}: {what} column {override!r} not found; found columns: {cols}")
        return override
    candidates = list(candidates)
    for c in candidates:
        if c in cols:
            return c
    raise ValueError(f"{task}: no {what} column (looked for {candidates}); found columns: {cols}")


def _message_text(value: Any) -> str:
    """Problem text from a string or a chat-message list (the user turn)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return str(value.get("content") or "")
    if isinstance(value, (list, tuple)):
        msgs = [m for m in value if isinstance(m, dict)]
        users = [m for m in msgs if m.get("role") == "user"] or msgs
        return "\n\n".join(str(m.get("content") or "") for m in users)
    return str(value)


def _strip_dapo_instructions(text: str) -> str:
    text = text.strip()
    if text.startswith(_DAPO_PREFIX):
        _, sep, body = text.partition("\n\n")
        if sep:
            text = body
    cut = text.rfind(_DAPO_SUFFIX)
    if cut >= 0:
        text = text[:cut]
    return text.strip()


def _gold_str(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, dict):  # verl layout: reward_model = {"ground_truth": ..., "style": ...}
        return _gold_str(value.get("ground_truth"))
    if isinstance(value, float):
        if value != value:
            return None
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int):
        return str(value)
    text = str(value).strip()
    if not text:
        return None
    if "\\boxed" in text or "\\fbox" in text:  # a worked solution: its boxed result is the answer
        return extract_boxed(text) or text
    if "####" in text:
        return gsm8k_gold(text)
    return text


def _gsm8k_gold_lenient(value: Any) -> str | None:
    if isinstance(value, str) and "####" not in value and parse_number(value) is not None:
        return value.strip()  # already-clean gold (e.g. a pre-processed copy)
    if isinstance(value, (int, float)):
        return _gold_str(value)
    return gsm8k_gold(value) if value is not None else None


def _convert(
    ds: Dataset,
    task: str,
    question_col: str,
    row_fn: Callable[[dict[str, Any]], tuple[str, str | None]],
    *,
    dedupe: bool,
    system_prompt: str | None,
    limit: int | None,
    seed: int,
    needed: list[str],
) -> Dataset:
    """Stream ``ds`` in batches (hub sets can have millions of rows) into the output columns."""
    ds = ds.select_columns(sorted(set(needed)))
    questions: list[str] = []
    answers: list[str] = []
    seen: set[str] = set()
    dropped = 0
    for batch in ds.iter(batch_size=4096):
        rows = len(batch[question_col])
        for i in range(rows):
            question, gold = row_fn({k: v[i] for k, v in batch.items()})
            question = question.strip()
            if not question or not gold:
                dropped += 1
                continue
            if dedupe:
                if question in seen:
                    continue
                seen.add(question)
            questions.append(question)
            answers.append(gold)
    if dropped:
        logger.warning("%s: dropped %d rows without a problem or an answer", task, dropped)
    if not questions:
        raise ValueError(f"Dataset {task!r} is empty (no rows with both a problem and an answer)")
    if limit is not None and limit < len(questions):
        # A seeded random subset rather than the head: hub files are often sorted by source or difficulty.
        keep = sorted(random.Random(seed).sample(range(len(questions)), limit))
        questions = [questions[i] for i in keep]
        answers = [answers[i] for i in keep]
    return Dataset.from_dict(
        {
            "prompt": [build_prompt(q, system_prompt) for q in questions],
            "answer": answers,
            "question": questions,
            "source": [task] * len(questions),
        }
    )


def _level_of(value: Any) -> int | None:
    """1..5 from 3, "3", "Level 3", "level_3"."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    digits = "".join(ch for ch in str(value) if ch.isdigit())
    return int(digits) if digits else None


# --------------------------------------------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------------------------------------------

_COMMON_OPTIONS = {"system_prompt", "question_column", "answer_column", "dedupe"}

# name -> (hub id, config, default split, problem columns, answer columns)
_SIMPLE_TASKS: dict[str, tuple[str, str | None, str, tuple[str, ...], tuple[str, ...]]] = {
    "gsm8k": ("openai/gsm8k", "main", "train", ("question",), ("answer",)),
    "math500": ("HuggingFaceH4/MATH-500", None, "test", ("problem",), ("answer",)),
    "aime24": ("HuggingFaceH4/aime_2024", None, "train", ("problem", "question"), ("answer",)),
    "aime25": ("yentinglin/aime_2025", None, "train", ("problem", "question"), ("answer",)),
    "amc23": ("zwhe99/amc23", None, "test", ("question", "problem"), ("answer",)),
    "local": ("", None, "train", ("question", "problem", "prompt"), ("answer", "solution", "gold")),
}
_BIGMATH = ("open-r1/Big-Math-RL-Verified-Processed", "train")
_DAPO = ("BytedTsinghua-SIA/DAPO-Math-17k", "train")

DATASET_NAMES: tuple[str, ...] = (
    "gsm8k",
    "bigmath",
    "dapo17k",
    "math500",
    "aime24",
    "aime25",
    "amc23",
    "local",
    "arith",
)


def _check_options(name: str, options: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(f"Unknown option(s) {unknown} for dataset {name!r}; accepted: {sorted(allowed)}")


def load_task_dataset(
    name: str,
    split: str | None = None,
    *,
    data_file: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    **options: Any,
) -> Dataset:
    """Load a task as a Dataset with ``prompt``/``answer``/``question``/``source`` columns.

    ``split=None`` means the task's natural split ("train" for training sets; the only split of the
    evaluation sets: "test" for math500/amc23, "train" for aime24/aime25). With ``data_file`` the file is read
    instead of the hub (``split`` is then ignored). ``limit`` keeps a seeded random subset of that size.

    Options for all tasks: ``system_prompt`` (str, or None to put the instruction in the user turn),
    ``question_column``/``answer_column`` (override column detection), ``dedupe`` (drop repeated problems;
    default True for dapo17k, False otherwise).
    bigmath: ``levels`` (iterable of 1..5; 5 = hardest, i.e. lowest Llama-8B solve rate), ``min_level``/
    ``max_level``, ``min_solve_rate``/``max_solve_rate`` (on ``llama8b_solve_rate``), ``config`` (hub config,
    default "all"). dapo17k: ``strip_instructions`` (default True: drop DAPO's "Answer:" instructions so the
    boxed format of the system prompt is the only one asked for). arith: ``difficulty`` (0-3), ``n`` (size,
    default ``limit`` or 1000); its non-train splits hold problems disjoint from "train".
    """
    key = name.strip().lower()
    if key not in DATASET_NAMES:
        raise ValueError(f"Unknown dataset {name!r}; valid names: {', '.join(DATASET_NAMES)}")
    if limit is not None and limit <= 0:
        raise ValueError(f"limit must be positive, got {limit}")
    system_prompt = options.get("system_prompt", SYSTEM_PROMPT)

    if key == "arith":
        _check_options(key, options, {"system_prompt", "difficulty", "n"})
        n = int(options.get("n") or limit or 1000)
        if limit is not None:
            n = min(n, limit)
        if (split or "train") != "train":  # as with any test set, a limit above its size takes all of it
            n = min(n, arith_held_out_count(int(options.get("difficulty", 1))) or n)
        return make_arith_dataset(
            n,
            difficulty=int(options.get("difficulty", 1)),
            seed=seed,
            split=split or "train",
            system_prompt=system_prompt,
        )
    if key == "bigmath":
        return _load_bigmath(split, data_file, limit, seed, options)
    if key == "dapo17k":
        return _load_dapo(split, data_file, limit, seed, options)

    _check_options(key, options, _COMMON_OPTIONS)
    hub_id, config, default_split, q_cols, a_cols = _SIMPLE_TASKS[key]
    if data_file is not None:
        ds = _load_local_file(data_file)
    elif key == "local":
        raise ValueError("dataset 'local' needs data_file=PATH (json/jsonl/parquet/csv)")
    else:
        ds = _load_hub(hub_id, config, split or default_split)
    if len(ds) == 0:
        raise ValueError(f"Dataset {key!r} is empty ({data_file or hub_id})")
    q_col = _pick_column(ds, q_cols, "problem", key, options.get("question_column"))
    a_col = _pick_column(ds, a_cols, "answer", key, options.get("answer_column"))
    gold_fn = _gsm8k_gold_lenient if key == "gsm8k" else _gold_str

    def row_fn(row: dict[str, Any]) -> tuple[str, str | None]:
        return _message_text(row[q_col]), gold_fn(row[a_col])

    return _convert(
        ds,
        key,
        q_col,
        row_fn,
        dedupe=bool(options.get("dedupe", False)),
        system_prompt=system_prompt,
        limit=limit,
        seed=seed,
        needed=[q_col, a_col],
    )


def _bigmath_levels(options: dict[str, Any]) -> list[int] | None:
    levels = options.get("levels")
    lo, hi = options.get("min_level"), options.get("max_level")
    if levels is None and lo is None and hi is None:
        return None
    if levels is None:
        levels = range(int(lo or 1), int(hi or 5) + 1)
    elif isinstance(levels, (int, str)):
        levels = [levels]
    chosen = sorted({_level_of(v) for v in levels} - {None})  # type: ignore[arg-type]
    if lo is not None:
        chosen = [v for v in chosen if v >= int(lo)]
    if hi is not None:
        chosen = [v for v in chosen if v <= int(hi)]
    bad = [v for v in chosen if not 1 <= v <= 5]
    if bad or not chosen:
        raise ValueError(f"bigmath levels must be within 1..5, got {list(levels)} (min={lo}, max={hi})")
    return chosen


def _load_bigmath(
    split: str | None, data_file: str | None, limit: int | None, seed: int, options: dict[str, Any]
) -> Dataset:
    task = "bigmath"
    _check_options(
        task,
        options,
        _COMMON_OPTIONS | {"levels", "min_level", "max_level", "min_solve_rate", "max_solve_rate", "config"},
    )
    levels = _bigmath_levels(options)
    hub_id, default_split = _BIGMATH
    if data_file is not None:
        ds = _load_local_file(data_file)
        if levels is not None:
            level_col = _pick_column(ds, ("level", "difficulty"), "level", task)
            wanted = set(levels)
            ds = ds.filter(lambda v: _level_of(v) in wanted, input_columns=[level_col])
    elif levels is not None:
        # The hub set has no level column: levels are configs (level_k = k-th quintile of Llama-8B solve rate).
        parts = [_load_hub(hub_id, f"level_{k}", split or default_split) for k in levels]
        ds = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    else:
        ds = _load_hub(hub_id, options.get("config", "all"), split or default_split)
    lo, hi = options.get("min_solve_rate"), options.get("max_solve_rate")
    if lo is not None or hi is not None:
        rate_col = _pick_column(ds, ("llama8b_solve_rate", "solve_rate"), "solve-rate", task)
        lo_f = float("-inf") if lo is None else float(lo)
        hi_f = float("inf") if hi is None else float(hi)
        ds = ds.filter(lambda r: r is not None and lo_f <= r <= hi_f, input_columns=[rate_col])
    if len(ds) == 0:
        raise ValueError(f"Dataset {task!r} is empty after filtering ({data_file or hub_id}, levels={levels})")
    # Processed hub layout: prompt (problem text) / solution (short answer); the original Big-Math layout
    # uses problem / answer.
    q_col = _pick_column(ds, ("problem", "prompt", "question"), "problem", task, options.get("question_column"))
    a_col = _pick_column(ds, ("answer", "solution", "ground_truth"), "answer", task, options.get("answer_column"))
    return _convert(
        ds,
        task,
        q_col,
        lambda row: (_message_text(row[q_col]), _gold_str(row[a_col])),
        dedupe=bool(options.get("dedupe", False)),
        system_prompt=options.get("system_prompt", SYSTEM_PROMPT),
        limit=limit,
        seed=seed,
        needed=[q_col, a_col],
    )


def _load_dapo(
    split: str | None, data_file: str | None, limit: int | None, seed: int, options: dict[str, Any]
) -> Dataset:
    task = "dapo17k"
    _check_options(task, options, _COMMON_OPTIONS | {"strip_instructions"})
    hub_id, default_split = _DAPO
    ds = _load_local_file(data_file) if data_file is not None else _load_hub(hub_id, None, split or default_split)
    if len(ds) == 0:
        raise ValueError(f"Dataset {task!r} is empty ({data_file or hub_id})")
    q_col = _pick_column(ds, ("prompt", "problem", "question"), "problem", task, options.get("question_column"))
    a_col = _pick_column(
        ds, ("reward_model", "answer", "solution", "ground_truth"), "answer", task, options.get("answer_column")
    )
    strip = bool(options.get("strip_instructions", True))

    def row_fn(row: dict[str, Any]) -> tuple[str, str | None]:
        text = _message_text(row[q_col])
        return (_strip_dapo_instructions(text) if strip else text), _gold_str(row[a_col])

    # The hub file repeats every problem many times (about 1.8M rows for 17k problems): dedupe by default.
    return _convert(
        ds,
        task,
        q_col,
        row_fn,
        dedupe=bool(options.get("dedupe", True)),
        system_prompt=options.get("system_prompt", SYSTEM_PROMPT),
        limit=limit,
        seed=seed,
        needed=[q_col, a_col],
    )


def apply_chat_template_prompts(dataset: Dataset, tokenizer: Any, **template_kwargs: Any) -> Dataset:
    """Add a ``prompt_text`` column (the chat template applied, generation prompt appended), e.g. for vLLM
    or logging; training keeps the conversational ``prompt`` column."""

    def render(row: dict[str, Any]) -> dict[str, str]:
        text = tokenizer.apply_chat_template(
            row["prompt"], tokenize=False, add_generation_prompt=True, **template_kwargs
        )
        return {"prompt_text": text}

    return dataset.map(render)

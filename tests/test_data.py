import ast
import json
import operator
import re
import zlib

import datasets
import pytest

from qerl import data
from qerl.data import (
    DATASET_NAMES,
    SYSTEM_PROMPT,
    DatasetLoadError,
    apply_chat_template_prompts,
    arith_held_out_count,
    load_task_dataset,
    make_arith_dataset,
)
from qerl.rewards import accuracy_reward, format_reward

DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
)
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'


@pytest.fixture(autouse=True)
def _private_datasets_cache(tmp_path, monkeypatch):
    # Keep the arrow files datasets writes for local files out of the user's cache.
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_datasets_cache")


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def write_parquet(path, rows):
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return str(path)


def assert_task_format(ds, source):
    assert {"prompt", "answer", "question", "source"} <= set(ds.column_names)
    for row in ds:
        assert row["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT}
        assert row["prompt"][1] == {"role": "user", "content": row["question"]}
        assert row["source"] == source
        assert isinstance(row["answer"], str) and row["answer"]


def test_system_prompt_asks_for_boxed():
    assert "\\boxed{" in SYSTEM_PROMPT and "step by step" in SYSTEM_PROMPT


# ---------------------------------------------------------------------------------------------- hub layouts


def test_gsm8k_layout(tmp_path):
    rows = [
        {"question": "Natalia sold 48 clips, then half as many. Total?", "answer": "48/2 = 24\n48+24 = 72\n#### 72"},
        {"question": "Big number?", "answer": "it is\n#### 1,000"},
    ]
    ds = load_task_dataset("gsm8k", data_file=write_jsonl(tmp_path / "gsm8k.jsonl", rows))
    assert_task_format(ds, "gsm8k")
    assert ds["answer"] == ["72", "1000"]
    assert ds["question"][0] == rows[0]["question"]


def test_gsm8k_answer_without_marker_is_rejected(tmp_path):
    rows = [{"question": "q", "answer": "no final line"}]
    with pytest.raises(ValueError, match="####"):
        load_task_dataset("gsm8k", data_file=write_jsonl(tmp_path / "g.jsonl", rows))


def test_bigmath_processed_layout_with_solve_rate_filter(tmp_path):
    # open-r1/Big-Math-RL-Verified-Processed: prompt = problem text, solution = short answer.
    rows = [
        {"prompt": "Find 2+2.", "solution": "4", "source": "cn_k12", "domain": ["Algebra"], "llama8b_solve_rate": 0.9},
        {
            "prompt": "Find x.",
            "solution": "\\frac{1}{2}",
            "source": "olympiads",
            "domain": ["Algebra"],
            "llama8b_solve_rate": 0.1,
        },
        {"prompt": "Find y.", "solution": "7", "source": "aops", "domain": ["Geometry"], "llama8b_solve_rate": None},
    ]
    path = write_parquet(tmp_path / "bigmath.parquet", rows)
    ds = load_task_dataset("bigmath", data_file=path)
    assert_task_format(ds, "bigmath")
    assert ds["answer"] == ["4", "\\frac{1}{2}", "7"]
    hard = load_task_dataset("bigmath", data_file=path, max_solve_rate=0.5)
    assert hard["question"] == ["Find x."]


def test_bigmath_original_layout_with_level_column(tmp_path):
    rows = [{"problem": f"p{i}", "answer": str(i), "level": f"Level {i % 5 + 1}"} for i in range(10)]
    path = write_jsonl(tmp_path / "bigmath.jsonl", rows)
    ds = load_task_dataset("bigmath", data_file=path, levels=[4, 5])
    assert sorted(ds["answer"], key=int) == ["3", "4", "8", "9"]
    ds = load_task_dataset("bigmath", data_file=path, min_level=5)
    assert sorted(ds["answer"], key=int) == ["4", "9"]
    with pytest.raises(ValueError, match="1..5"):
        load_task_dataset("bigmath", data_file=path, levels=[6])


def test_bigmath_levels_need_a_level_column_in_local_files(tmp_path):
    path = write_jsonl(tmp_path / "b.jsonl", [{"problem": "p", "answer": "1"}])
    with pytest.raises(ValueError, match=r"level.*found columns: \['problem', 'answer'\]"):
        load_task_dataset("bigmath", data_file=path, levels=[5])


def test_bigmath_hub_levels_are_configs(monkeypatch):
    calls = []

    def fake_load_dataset(hub_id, config=None, split=None):
        calls.append((hub_id, config, split))
        return datasets.Dataset.from_list(
            [{"prompt": f"problem of {config}", "solution": "1", "llama8b_solve_rate": 0.2}]
        )

    monkeypatch.setattr(data.datasets, "load_dataset", fake_load_dataset)
    ds = load_task_dataset("bigmath", levels=[4, 5])
    assert calls == [
        ("open-r1/Big-Math-RL-Verified-Processed", "level_4", "train"),
        ("open-r1/Big-Math-RL-Verified-Processed", "level_5", "train"),
    ]
    assert ds["question"] == ["problem of level_4", "problem of level_5"]
    calls.clear()
    load_task_dataset("bigmath")
    assert calls == [("open-r1/Big-Math-RL-Verified-Processed", "all", "train")]


def test_dapo_layout_dedupes_and_strips_instructions(tmp_path):
    def row(problem, gt, idx):
        return {
            "data_source": "math_dapo",
            "prompt": [{"content": DAPO_PREFIX + problem + DAPO_SUFFIX, "role": "user"}],
            "ability": "MATH",
            "reward_model": {"ground_truth": gt, "style": "rule-lean"},
            "extra_info": {"index": idx},
        }

    rows = [row("What is $1+1$?", "2", "a"), row("What is $1+1$?", "2", "b"), row("Find $k$.", "34", "c")]
    path = write_parquet(tmp_path / "dapo.parquet", rows)
    ds = load_task_dataset("dapo17k", data_file=path)
    assert_task_format(ds, "dapo17k")
    assert ds["question"] == ["What is $1+1$?", "Find $k$."]
    assert ds["answer"] == ["2", "34"]
    raw = load_task_dataset("dapo17k", data_file=path, dedupe=False, strip_instructions=False)
    assert len(raw) == 3
    assert raw["question"][0].startswith("Solve the following") and "Answer:" in raw["question"][0]


def test_math500_layout(tmp_path):
    rows = [
        {
            "problem": "Convert $(0,3)$ to polar.",
            "solution": "... so $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.",
            "answer": "\\left( 3, \\frac{\\pi}{2} \\right)",
            "subject": "Precalculus",
            "level": 2,
            "unique_id": "test/precalculus/807.json",
        }
    ]
    ds = load_task_dataset("math500", data_file=write_jsonl(tmp_path / "math500.jsonl", rows))
    assert_task_format(ds, "math500")
    assert ds["answer"] == [rows[0]["answer"]]  # the short answer column wins over the worked solution


def test_aime24_layout(tmp_path):
    rows = [
        {"id": 60, "problem": "Every morning Aya ...", "solution": "...", "answer": "204", "url": "u", "year": 2024}
    ]
    ds = load_task_dataset("aime24", data_file=write_parquet(tmp_path / "aime24.parquet", rows))
    assert_task_format(ds, "aime24")
    assert ds["answer"] == ["204"]


def test_aime25_layout_with_integer_answers(tmp_path):
    rows = [{"id": "0", "problem": "Find the sum ...", "answer": 70, "solution": "", "url": "u", "year": "2025"}]
    ds = load_task_dataset("aime25", data_file=write_jsonl(tmp_path / "aime25.jsonl", rows))
    assert ds["answer"] == ["70"]


def test_amc23_layout_with_float_answers(tmp_path):
    rows = [
        {"id": 0, "question": "In the state of Texas ...", "answer": 27.0, "url": "u"},
        {"id": 1, "question": "q2", "answer": 0.5, "url": "u"},
    ]
    ds = load_task_dataset("amc23", data_file=write_parquet(tmp_path / "amc23.parquet", rows))
    assert_task_format(ds, "amc23")
    assert ds["answer"] == ["27", "0.5"]


def test_local_files_auto_detect_columns(tmp_path):
    jsonl = write_jsonl(
        tmp_path / "mine.jsonl",
        [{"problem": "p1", "solution": "worked... so \\boxed{12}."}, {"problem": "p2", "solution": "#### 5"}],
    )
    ds = load_task_dataset("local", data_file=jsonl)
    assert_task_format(ds, "local")
    assert ds["answer"] == ["12", "5"]

    csv = tmp_path / "mine.csv"
    csv.write_text("question,gold\nWhat is 3*3?,9\n")
    assert load_task_dataset("local", data_file=str(csv))["answer"] == ["9"]

    conv = write_jsonl(
        tmp_path / "conv.jsonl", [{"prompt": [{"role": "user", "content": "Compute 1+2."}], "answer": "3"}]
    )
    assert load_task_dataset("local", data_file=conv)["question"] == ["Compute 1+2."]

    custom = write_jsonl(tmp_path / "custom.jsonl", [{"q": "x", "a": "1"}])
    ds = load_task_dataset("local", data_file=custom, question_column="q", answer_column="a")
    assert ds["answer"] == ["1"]


def test_system_prompt_override(tmp_path):
    path = write_jsonl(tmp_path / "l.jsonl", [{"question": "Compute 1+2.", "answer": "3"}])
    ds = load_task_dataset("local", data_file=path, system_prompt=None)
    (msg,) = ds[0]["prompt"]
    assert msg["role"] == "user" and msg["content"].startswith("Compute 1+2.") and "\\boxed{}" in msg["content"]
    ds = load_task_dataset("local", data_file=path, system_prompt="Be brief.")
    assert ds[0]["prompt"][0] == {"role": "system", "content": "Be brief."}


def test_limit_is_a_seeded_subset(tmp_path):
    path = write_jsonl(tmp_path / "l.jsonl", [{"question": f"q{i}", "answer": str(i)} for i in range(50)])
    a = load_task_dataset("local", data_file=path, limit=10, seed=1)
    b = load_task_dataset("local", data_file=path, limit=10, seed=1)
    c = load_task_dataset("local", data_file=path, limit=10, seed=2)
    assert len(a) == 10 and a["question"] == b["question"]
    assert a["question"] != c["question"]
    assert set(a["question"]) <= {f"q{i}" for i in range(50)}
    assert len(load_task_dataset("local", data_file=path, limit=500)) == 50


# ---------------------------------------------------------------------------------------------- errors


def test_unknown_dataset():
    with pytest.raises(ValueError, match="gsm8k.*arith"):
        load_task_dataset("mnist")


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        load_task_dataset("gsm8k", data_file=str(missing))


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "csv", "no_usable_rows"])
def test_empty_dataset(tmp_path, kind):
    if kind == "jsonl":
        path = tmp_path / "e.jsonl"
        path.write_text("")
    elif kind == "parquet":
        path = tmp_path / "e.parquet"
        datasets.Dataset.from_dict({"problem": [], "answer": []}).to_parquet(str(path))
    elif kind == "csv":
        path = tmp_path / "e.csv"
        path.write_text("problem,answer\n")
    else:
        path = tmp_path / "blank.jsonl"
        write_jsonl(path, [{"problem": "", "answer": "1"}, {"problem": "p", "answer": ""}])
    with pytest.raises(ValueError, match="empty"):
        load_task_dataset("math500", data_file=str(path))


def test_missing_columns_lists_found_columns(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"text": "hello", "label": 1}])
    with pytest.raises(ValueError, match=r"found columns: \['text', 'label'\]"):
        load_task_dataset("math500", data_file=path)
    with pytest.raises(ValueError, match="found columns"):
        load_task_dataset("local", data_file=path)


def test_unsupported_file_type_and_unknown_option(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("hi")
    with pytest.raises(ValueError, match="Unsupported"):
        load_task_dataset("local", data_file=str(path))
    with pytest.raises(ValueError, match="Unknown option"):
        load_task_dataset("gsm8k", data_file=str(path), level=3)
    with pytest.raises(ValueError, match="data_file"):
        load_task_dataset("local")


def test_hub_without_network_names_the_fix(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(data.datasets, "load_dataset", offline)
    with pytest.raises(DatasetLoadError, match="--dataset-file") as info:
        load_task_dataset("gsm8k")
    assert "openai/gsm8k" in str(info.value)
    assert isinstance(info.value.__cause__, ConnectionError)


def test_hub_default_splits(monkeypatch):
    calls = []

    def fake(hub_id, config=None, split=None):
        calls.append((hub_id, config, split))
        return datasets.Dataset.from_list([{"problem": "p", "question": "p", "answer": "1"}])

    monkeypatch.setattr(data.datasets, "load_dataset", fake)
    for name in ("gsm8k", "math500", "aime24", "aime25", "amc23"):
        load_task_dataset(name)
    load_task_dataset("math500", split="test")
    assert calls == [
        ("openai/gsm8k", "main", "train"),
        ("HuggingFaceH4/MATH-500", None, "test"),
        ("HuggingFaceH4/aime_2024", None, "train"),
        ("yentinglin/aime_2025", None, "train"),
        ("zwhe99/amc23", None, "test"),
        ("HuggingFaceH4/MATH-500", None, "test"),
    ]


# ---------------------------------------------------------------------------------------------- arith

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def independent_eval(expr: str) -> int:
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        raise AssertionError(f"unexpected syntax in {expr!r}")

    return ev(ast.parse(expr, mode="eval"))


@pytest.mark.parametrize("difficulty", [0, 1, 2, 3])
def test_arith_answers_are_correct(difficulty):
    ds = make_arith_dataset(200, difficulty=difficulty, seed=3)
    assert_task_format(ds, "arith")
    for row in ds:
        expr = re.fullmatch(r"Compute (.+)\.", row["question"]).group(1)
        assert row["expression"] == expr
        assert row["answer"] == str(independent_eval(expr))
        numbers = [int(x) for x in re.findall(r"\d+", expr)]
        if difficulty == 0:
            assert len(numbers) == 2 and all(n <= 9 for n in numbers) and "+" in expr
        elif difficulty == 1:
            assert len(numbers) == 2 and all(10 <= n <= 99 for n in numbers)
        elif difficulty == 2:
            assert len(numbers) == 2 and 100 <= numbers[0] <= 999
        else:
            assert len(numbers) == 4 and "(" in expr
    if difficulty == 1:
        assert any(a.startswith("-") for a in ds["answer"])  # subtraction can go negative
    if difficulty == 2:
        assert any("*" in q for q in ds["question"])


def test_arith_is_deterministic_and_seeded():
    a = make_arith_dataset(50, difficulty=2, seed=0)
    b = make_arith_dataset(50, difficulty=2, seed=0)
    c = make_arith_dataset(50, difficulty=2, seed=1)
    assert a["question"] == b["question"] and a["answer"] == b["answer"]
    assert a["question"] != c["question"]
    assert make_arith_dataset(80, difficulty=2, seed=0)["question"][:50] == a["question"]
    with pytest.raises(ValueError, match="difficulty"):
        make_arith_dataset(5, difficulty=4)


@pytest.mark.parametrize("difficulty, n, n_held_out", [(0, 60, 14), (1, 3000, 1613)])
def test_arith_splits_are_disjoint(difficulty, n, n_held_out):
    train = set(make_arith_dataset(n, difficulty=difficulty, seed=0)["question"])
    for split, seed in (("test", 0), ("test", 1), ("validation", 0)):
        held_out = make_arith_dataset(n_held_out, difficulty=difficulty, seed=seed, split=split)
        assert not train & set(held_out["question"])
        assert held_out["answer"] == [str(independent_eval(e)) for e in held_out["expression"]]


@pytest.mark.parametrize("difficulty", [0, 1])
def test_arith_held_out_split_lists_each_problem_once(difficulty):
    # An evaluation must not count a problem twice: at difficulty 0 only 14 of the 100 sums are held out, and 500
    # draws with repeats from difficulty 1's held-out problems would hold only about 430 distinct ones.
    total = arith_held_out_count(difficulty)
    if difficulty == 0:
        everything = [f"{a} + {b}" for a in range(10) for b in range(10)]
    else:
        everything = [f"{a} {op} {b}" for a in range(10, 100) for op in "+-" for b in range(10, 100)]
    assert total == sum(zlib.crc32(e.encode()) % 10 == 0 for e in everything)
    n = min(total, 500)
    held_out = make_arith_dataset(n, difficulty=difficulty, split="test")
    assert len(set(held_out["expression"])) == n
    # a larger n still extends a smaller one
    assert make_arith_dataset(n - 5, difficulty=difficulty, split="test")["expression"] == held_out["expression"][:-5]
    with pytest.raises(ValueError, match=f"has {total} distinct problems"):
        make_arith_dataset(total + 1, difficulty=difficulty, split="test")
    # the loader (eval's --limit) takes all of a held-out split asked for more than it holds
    assert len(load_task_dataset("arith", "test", limit=total + 50, difficulty=difficulty)) == total
    # training draws keep their repeats (GRPO samples prompts with replacement anyway)
    assert len(set(make_arith_dataset(200, difficulty=0)["expression"])) < 200


def test_arith_via_loader():
    train = load_task_dataset("arith", limit=30, difficulty=1)
    assert len(train) == 30
    assert train["question"] == load_task_dataset("arith", limit=30, difficulty=1)["question"]
    test = load_task_dataset("arith", "test", limit=30, difficulty=1)
    assert train["question"] != test["question"]
    assert len(load_task_dataset("arith", n=12, difficulty=0)) == 12


def test_arith_rows_work_with_rewards():
    ds = make_arith_dataset(8, difficulty=3, seed=5)
    right = [f"step by step... \\boxed{{{a}}}" for a in ds["answer"]]
    wrong = [f"\\boxed{{{int(a) + 1}}}" for a in ds["answer"]]
    assert accuracy_reward(right, answer=ds["answer"]) == [1.0] * 8
    assert accuracy_reward(wrong, answer=ds["answer"]) == [0.0] * 8
    assert format_reward(right) == [1.0] * 8


def test_dataset_names_cover_the_tasks():
    assert set(DATASET_NAMES) == {
        "gsm8k",
        "bigmath",
        "dapo17k",
        "math500",
        "aime24",
        "aime25",
        "amc23",
        "local",
        "arith",
    }


def test_apply_chat_template_prompts():
    class FakeTokenizer:
        def apply_chat_template(self, messages, tokenize, add_generation_prompt, **kwargs):
            assert tokenize is False and add_generation_prompt is True
            return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    ds = make_arith_dataset(3, difficulty=0, seed=0)
    out = apply_chat_template_prompts(ds, FakeTokenizer())
    assert out["prompt"] == ds["prompt"]  # conversational prompt kept
    assert out["prompt_text"][0] == f"<system>{SYSTEM_PROMPT}<user>{ds['question'][0]}<assistant>"

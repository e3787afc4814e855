"""Shared fixtures: offline models built once per test session (cached under .cache/ between runs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("QERL_CACHE", str(ROOT / ".cache"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

torch.set_num_threads(1)  # measured several times faster than 2 threads for these small models on 2 cores

QUANTIZE_PYTHON = ROOT / ".venv-quantize" / "bin" / "python"
QUANTIZE_SCRIPT = ROOT / "llm-compressor" / "quantize_nvfp4.py"


def pytest_addoption(parser):
    parser.addoption("--shard", default=None, metavar="I/N",
                     help="run only every N-th collected test, starting at the I-th (0-based): N processes with "
                          "I = 0..N-1 share a suite, e.g. the GPU tests on one device")


def _shard(config, items) -> None:
    spec = config.getoption("--shard")
    if spec is None:
        return
    try:
        index, count = (int(v) for v in spec.split("/"))
        if not 0 <= index < count:
            raise ValueError
    except ValueError:
        raise pytest.UsageError(f"--shard {spec!r}: expected I/N with 0 <= I < N, e.g. --shard 0/4") from None
    keep = [item for i, item in enumerate(items) if i % count == index]
    config.hook.pytest_deselected(items=[item for i, item in enumerate(items) if i % count != index])
    items[:] = keep


def pytest_collection_modifyitems(config, items):
    _shard(config, items)
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    skip_q = pytest.mark.skip(reason="needs the quantize env: bash setup_env.sh quantize")
    for item in items:
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip_gpu)
        if "quantize_env" in item.keywords and not QUANTIZE_PYTHON.exists():
            item.add_marker(skip_q)


def hopper_gpu() -> bool:
    """Whether the warp-specialized Gluon kernels can run here (a Hopper GPU, Triton with Gluon)."""
    if not torch.cuda.is_available():
        return False
    from qerl.kernels import nvfp4_gemm_ws

    return nvfp4_gemm_ws.available()


def capture_graph(fn):
    """(a CUDA graph of ``fn()``, what ``fn`` returned while captured), after one warm-up call on a side stream."""
    from qerl.kernels.graphs import capture

    return capture(fn)


def same_bits_with_and_without_pdl(fn) -> None:
    """``fn()`` captured in a CUDA graph (``capture_graph``) with programmatic dependent launch and without
    (``qerl.kernels.pdl``), its output poisoned with NaN before each of three replays: finite, the same bits on every
    replay, and the same bits either way (the same kernels; with PDL their launches overlap on the GPU)."""
    from qerl.kernels.pdl import pdl

    outs = {}
    for enabled in (False, True):
        with pdl(enabled):
            graph, out = capture_graph(fn)
        for _ in range(3):
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert torch.isfinite(out).all(), enabled
            outs.setdefault(enabled, out.clone())
            assert torch.equal(out, outs[enabled]), enabled
    assert torch.equal(outs[True], outs[False])


def random_prompts(widths: tuple[int, ...], seed: int = 1, vocab: int = 256) -> list[list[int]]:
    """Prompts of these token counts, ids 2 .. vocab - 1 (0 and 1 stay pad and EOS)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(2, vocab, (w,), generator=g).tolist() for w in widths]


def attach_test_adapter(model, **lora_kwargs):
    """``qerl.lora.attach_lora`` with every LoRA B drawn from N(0, 0.2) instead of zeros, so the adapter changes what
    the model generates; in eval mode."""
    from qerl.lora import attach_lora

    peft_model = attach_lora(model, **lora_kwargs)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.2)
    return peft_model.eval()


def run_interpreted(script: str, timeout: int = 300) -> dict:
    """Run ``script`` (Python source that prints a JSON report as its last line) in a fresh interpreter with Triton's
    CPU interpreter on (it must be switched on before triton is imported, hence the subprocess); the report."""
    import json
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=str(ROOT),
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_quantize(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run llm-compressor/quantize_nvfp4.py in the quantize env (llmcompressor cannot share the train env)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(QUANTIZE_PYTHON), str(QUANTIZE_SCRIPT), *args], capture_output=True, text=True,
                          env=env, cwd=str(ROOT), timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"quantize failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    from qerl.fixtures import smollm2_checkpoint

    return smollm2_checkpoint()


@pytest.fixture(scope="session")
def tiny_qwen2_dir(tmp_path_factory, smollm2_dir) -> Path:
    from qerl.fixtures import make_tiny_qwen2

    return make_tiny_qwen2(tmp_path_factory.mktemp("tiny") / "qwen2", tokenizer_from=smollm2_dir)


def _quantized(src: Path | str, out: Path) -> Path:
    if not (out / "config.json").is_file():
        if not QUANTIZE_PYTHON.exists():
            pytest.skip("needs the quantize env: bash setup_env.sh quantize")
        source = ["--gguf-file", src] if src == "smollm2" else ["--model", str(src)]
        run_quantize(*source, "--output", str(out), "--overwrite")
    return out


@pytest.fixture(scope="session")
def tiny_qwen2_nvfp4_dir(tiny_qwen2_dir, tmp_path_factory) -> Path:
    return _quantized(tiny_qwen2_dir, tmp_path_factory.mktemp("tiny_nvfp4") / "qwen2-nvfp4")


@pytest.fixture(scope="session")
def smollm2_nvfp4_dir(smollm2_dir) -> Path:
    from qerl.fixtures import cache_dir

    # Straight from the GGUF file (the script's --gguf-file path), as the demo job does.
    return _quantized("smollm2", cache_dir() / (smollm2_dir.name + "-nvfp4"))


def rollout_mismatch(model, prompts, result) -> float:
    """The largest difference between a rollout's log-probabilities and an eager forward's over its tokens."""
    return max((teacher_forced_logprobs(model, p, c) - torch.tensor(lp)).abs().max().item()
               for p, c, lp in zip(prompts, result.completion_ids, result.logprobs))


def teacher_forced_logprobs(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """Log-probabilities of ``completion``'s tokens from one eager forward over prompt + completion."""
    device = next(model.parameters()).device
    ids = torch.tensor([prompt + completion], device=device)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion, device=device)[:, None])[:, 0].cpu()

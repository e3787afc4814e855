"""Generation backends for evaluation: Hugging Face ``generate`` (CPU and tests) and vLLM (GPU).

Both take the same requests (prompt token ids, number of samples, seed) and return decoded completions, so the
runner does not care which one produced them. Checks that can fail on user input (missing paths, wrong load mode,
an adapter trained on another base) run in ``preflight`` before any weights are loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from qerl.errors import AdapterMismatchError, NotNVFP4CheckpointError, UserError
from qerl.modules import dense_weight_cache

log = logging.getLogger(__name__)

BACKENDS = ("vllm", "hf")
ADAPTER_CONFIG = "adapter_config.json"
NORMS_FILE = "norms.safetensors"
# Ranks vLLM's punica kernels are built for; max_lora_rank must be one of them.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


@dataclass(frozen=True)
class SamplingSettings:
    """How completions are sampled (temperature 0 means greedy)."""

    max_tokens: int = 4096
    temperature: float = 0.6
    top_p: float = 0.95


@dataclass
class GenRequest:
    """``n`` completions of one prompt; ``seed`` makes the draw reproducible."""

    prompt_ids: list[int]
    n: int
    seed: int


@dataclass
class Completion:
    text: str
    num_tokens: int
    finish_reason: str  # "stop" (end of sequence) or "length" (hit max_tokens)


@dataclass
class ModelSpec:
    """A checked model + adapter pair, ready to load."""

    model: str  # as the user gave it
    path: Path  # resolved checkpoint directory
    load: str
    adapter: Path | None = None
    adapter_rank: int | None = None
    has_norms: bool = False


class Backend(Protocol):
    name: str
    tokenizer: Any

    def generate(self, requests: list[GenRequest]) -> list[list[Completion]]: ...

    def close(self) -> None: ...


def derive_seed(seed: int, *parts: object) -> int:
    """A 31-bit seed from the run seed and a request's identity, independent of batching and resumption."""
    digest = hashlib.sha256(":".join(str(p) for p in (seed, *parts)).encode()).hexdigest()
    return int(digest[:8], 16) & 0x7FFFFFFF


# --------------------------------------------------------------------------------------------------- checks


def cuda_available() -> bool:
    """Whether a CUDA device is usable, asked through NVML: a plain ``torch.cuda.is_available()`` initializes the
    CUDA runtime in this process, and vLLM's engine process, forked afterwards, then fails with "Cannot
    re-initialize CUDA in forked subprocess"."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    return torch.cuda.is_available()


def resolve_backend(requested: str | None) -> str:
    """"vllm" or "hf"; ``None``/"auto" picks vllm when CUDA and vllm are both available, and says which."""
    if requested in BACKENDS:
        if requested == "vllm" and importlib.util.find_spec("vllm") is None:
            raise UserError("--backend vllm needs the vllm package (CUDA machines: bash setup_env.sh); or use --backend hf")
        return requested
    if requested not in (None, "auto"):
        raise UserError(f"unknown backend {requested!r}: use vllm, hf or auto")
    has_vllm = importlib.util.find_spec("vllm") is not None
    cuda = cuda_available()
    backend = "vllm" if cuda and has_vllm else "hf"
    why = "CUDA and vllm are available" if backend == "vllm" else ("no CUDA device" if not cuda else "vllm is not installed")
    log.info("backend: %s (%s)", backend, why)
    return backend


def _same_base(trained_on: str, model: str, path: Path) -> bool:
    """Whether an adapter's recorded base names the given model: the same string, the same directory, or the same
    final name (a hub id and its local download, or one checkpoint in two places)."""
    if trained_on == model:
        return True
    try:
        if Path(trained_on).expanduser().exists() and Path(trained_on).expanduser().resolve() == path.resolve():
            return True
    except OSError:
        pass
    names = {Path(model.rstrip("/")).name.lower(), path.name.lower()}
    return Path(trained_on.rstrip("/")).name.lower() in names


def _meta_model(path: Path, config: dict) -> torch.nn.Module:
    """The model's architecture on the meta device (no memory, no weights) for shape checks."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    hf_config = AutoConfig.from_pretrained(str(path))
    if hasattr(hf_config, "quantization_config"):  # shapes only; do not set up a quantizer
        del hf_config.quantization_config
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(hf_config)
    model.name_or_path = str(path)
    return model


def check_norms_compatible(model: torch.nn.Module, adapter_dir: Path) -> list[str]:
    """Names of the norm weights saved beside the adapter, after checking each one exists in ``model`` with the same
    shape (a norm vector of another base would otherwise broadcast silently)."""
    from safetensors import safe_open

    path = adapter_dir / NORMS_FILE
    if not path.is_file():
        return []
    params = {_plain_name(n): p for n, p in model.named_parameters()}
    problems, names = [], []
    with safe_open(str(path), framework="pt") as f:
        for key in f.keys():
            name = _plain_name(key)
            shape = tuple(f.get_slice(key).get_shape())
            if name not in params:
                problems.append(f"{name} (not in the model)")
            elif tuple(params[name].shape) != shape:
                problems.append(f"{name}: saved {shape} vs model {tuple(params[name].shape)}")
            names.append(name)
    if problems:
        raise AdapterMismatchError(
            f"{path} does not fit model {model.name_or_path}: {'; '.join(problems[:5])}. "
            "Pass the base model the adapter was trained on."
        )
    return names


def _plain_name(name: str) -> str:
    """A parameter name without peft's wrapper prefix (norms may be saved from a wrapped or a bare model)."""
    for prefix in ("base_model.model.", "model.base_model.model."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def preflight(model: str, load: str, adapter: str | None, allow_base_mismatch: bool = False) -> ModelSpec:
    """Check the model, load mode and adapter without loading weights; raise UserError naming the fix."""
    from qerl.loading import LOAD_MODES, nvfp4_quantization_config, read_config, resolve_model_path
    from qerl.lora import check_adapter_compatible

    if load not in LOAD_MODES:
        raise UserError(f"unknown --load {load!r}: use one of {', '.join(LOAD_MODES)}")
    path = resolve_model_path(model)
    config = read_config(path)
    is_nvfp4 = nvfp4_quantization_config(config) is not None
    if load == "nvfp4" and not is_nvfp4:
        raise NotNVFP4CheckpointError(
            f"--load nvfp4 needs an NVFP4 checkpoint, but {path}/config.json has no compressed-tensors "
            "nvfp4-pack-quantized quantization_config: quantize it first "
            "(python llm-compressor/quantize_nvfp4.py --model PATH) or evaluate it with --load bf16"
        )
    if load != "nvfp4" and is_nvfp4:
        raise UserError(f"{path} is an NVFP4 checkpoint: evaluate it with --load nvfp4 (or pass the BF16 source model)")
    spec = ModelSpec(model=model, path=path, load=load)
    if adapter is None:
        return spec

    adapter_dir = Path(adapter).expanduser()
    if not adapter_dir.is_dir():
        raise UserError(f"adapter directory {adapter_dir} does not exist: pass the directory a training run saved")
    cfg_file = adapter_dir / ADAPTER_CONFIG
    if not cfg_file.is_file():
        raise UserError(f"{adapter_dir} has no {ADAPTER_CONFIG}: pass a peft adapter directory (e.g. a checkpoint-N)")
    adapter_cfg = json.loads(cfg_file.read_text())
    trained_on = str(adapter_cfg.get("base_model_name_or_path") or "")
    if not trained_on:
        log.warning("%s records no base_model_name_or_path; checking tensor shapes only", cfg_file)
    elif not allow_base_mismatch and not _same_base(trained_on, model, path):
        raise AdapterMismatchError(
            f"adapter {adapter_dir} was trained on base '{trained_on}', but --model is '{model}': evaluate it with "
            f"--model {trained_on}, or pass --allow-base-mismatch if '{model}' holds the same base weights"
        )
    meta = _meta_model(path, config)
    check_adapter_compatible(meta, adapter_dir)  # tensor shapes against the model's modules
    spec.has_norms = bool(check_norms_compatible(meta, adapter_dir))
    spec.adapter = adapter_dir
    ranks = [int(adapter_cfg.get("r") or 0), *(int(v) for v in (adapter_cfg.get("rank_pattern") or {}).values())]
    spec.adapter_rank = max(ranks) or None
    return spec


# --------------------------------------------------------------------------------------------------- HF


class HFBackend:
    """``model.generate`` over a qerl-loaded policy (NVFP4 / BF16 / NF4) with the adapter applied through peft.

    Requests of one call are generated together (left padding) and seeded with the first request's seed."""

    name = "hf"

    def __init__(
        self,
        spec: ModelSpec,
        sampling: SamplingSettings,
        device: str | None = None,
        dtype: torch.dtype = torch.bfloat16,
    ) -> None:
        from qerl.loading import load_policy
        from qerl.lora import load_adapter

        self.device = torch.device(device or ("cuda" if cuda_available() else "cpu"))
        self.sampling = sampling
        model, tokenizer = load_policy(str(spec.path), spec.load, self.device, dtype)
        if spec.adapter is not None:
            # Checks shapes again on the real modules and copies norms.safetensors into the model.
            model = load_adapter(model, spec.adapter)
            log.info("applied adapter %s%s", spec.adapter, " and its trained norms" if spec.has_norms else "")
        model.eval()
        self.model = model
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        self.eos_ids = _eos_ids(model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]

    def _generation_config(self):
        from transformers import GenerationConfig

        # Knobs are set explicitly: generate() fills unset ones from the checkpoint's generation_config.json
        # (top_k=20, repetition_penalty=1.05, ... in many instruct models), which would make this backend sample
        # from another distribution than vLLM with the same settings.
        common = dict(
            max_new_tokens=self.sampling.max_tokens, num_beams=1, repetition_penalty=1.0, no_repeat_ngram_size=0,
            eos_token_id=self.eos_ids, pad_token_id=self.pad_id,
        )
        if self.sampling.temperature <= 0:
            return GenerationConfig(do_sample=False, **common)
        return GenerationConfig(
            do_sample=True, temperature=self.sampling.temperature, top_p=self.sampling.top_p, top_k=0, min_p=None,
            typical_p=1.0, **common,
        )

    @torch.inference_mode()
    def generate(self, requests: list[GenRequest]) -> list[list[Completion]]:
        if not requests:
            return []
        rows = [r.prompt_ids for r in requests for _ in range(r.n)]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row):] = 1
        torch.manual_seed(requests[0].seed)
        # Without fused CUDA kernels, dequantize each packed layer once per batch rather than once per token.
        cache = dense_weight_cache(self.model) if torch.device(self.device).type != "cuda" else nullcontext()
        with cache:
            out = self.model.generate(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                generation_config=self._generation_config(),
            )
        new = out[:, width:].tolist()
        completions = [self._decode(tokens) for tokens in new]
        result, i = [], 0
        for r in requests:
            result.append(completions[i:i + r.n])
            i += r.n
        return result

    def _decode(self, tokens: list[int]) -> Completion:
        eos = set(self.eos_ids)
        end = next((j for j, t in enumerate(tokens) if t in eos), None)
        kept = tokens if end is None else tokens[:end]
        reason = "stop" if end is not None else ("length" if len(tokens) >= self.sampling.max_tokens else "stop")
        return Completion(self.tokenizer.decode(kept, skip_special_tokens=True), len(kept), reason)

    def close(self) -> None:
        self.model = None


def _eos_ids(model, tokenizer) -> list[int]:
    """End-of-sequence ids from the tokenizer and the checkpoint's generation config (instruct models often list
    several: end of turn and end of text)."""
    ids: list[int] = []
    for value in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        for v in value if isinstance(value, list | tuple) else [value]:
            if v is not None and int(v) not in ids:
                ids.append(int(v))
    if not ids:
        raise UserError("the tokenizer defines no eos token: set eos_token in tokenizer_config.json")
    return ids


# --------------------------------------------------------------------------------------------------- vLLM


class VLLMBackend:
    """``vllm.LLM`` with the adapter served as a LoRARequest on every request and trained norms written into the
    engine's weights. NVFP4 checkpoints load through vLLM's compressed-tensors support, NF4 through bitsandbytes."""

    name = "vllm"

    def __init__(
        self,
        spec: ModelSpec,
        sampling: SamplingSettings,
        seed: int = 0,
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        tensor_parallel_size: int = 1,
        enforce_eager: bool = False,
    ) -> None:
        from qerl.loading import load_tokenizer

        if spec.has_norms:
            # Norm weights are written into the model in this process (LLM.apply_model); the in-process engine makes
            # that a plain function call instead of a pickled one sent to a worker process.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM
        from vllm.lora.request import LoRARequest

        self.sampling = sampling
        kwargs: dict[str, Any] = {
            "model": str(spec.path),
            "tokenizer": str(spec.path),
            "seed": seed,
            "dtype": "bfloat16",
            "gpu_memory_utilization": gpu_memory_utilization,
            "tensor_parallel_size": tensor_parallel_size,
            "enforce_eager": enforce_eager,
        }
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        if spec.load == "nf4":
            kwargs["quantization"] = "bitsandbytes"
        self.lora = None
        if spec.adapter is not None:
            rank = spec.adapter_rank or 16
            fit = [r for r in VLLM_LORA_RANKS if r >= rank]
            if not fit:
                raise UserError(f"adapter rank {rank} is above vLLM's maximum {VLLM_LORA_RANKS[-1]}: use --backend hf")
            kwargs.update(enable_lora=True, max_lora_rank=fit[0], max_loras=1)
            self.lora = LoRARequest("eval-adapter", 1, str(spec.adapter))
        self.llm = LLM(**kwargs)
        self.tokenizer = load_tokenizer(spec.path)
        if spec.has_norms:
            loaded = load_norms_into_vllm(self.llm, spec.adapter / NORMS_FILE)
            log.info("wrote %d trained norm weights from %s into the vLLM model", len(loaded), spec.adapter)

    def generate(self, requests: list[GenRequest]) -> list[list[Completion]]:
        from vllm import SamplingParams

        if not requests:
            return []
        prompts = [{"prompt_token_ids": list(r.prompt_ids)} for r in requests]
        params = [
            SamplingParams(
                n=r.n,
                temperature=self.sampling.temperature,
                top_p=self.sampling.top_p if self.sampling.temperature > 0 else 1.0,
                max_tokens=self.sampling.max_tokens,
                seed=r.seed,
            )
            for r in requests
        ]
        lora = [self.lora] * len(requests) if self.lora is not None else None
        outputs = self.llm.generate(prompts, params, lora_request=lora, use_tqdm=False)
        return [
            [Completion(c.text, len(c.token_ids), "length" if c.finish_reason == "length" else "stop") for c in o.outputs]
            for o in outputs
        ]

    def close(self) -> None:
        # Drop the engine and hand its GPU memory back, so a later engine in this process can start.
        self.llm = None
        import gc

        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()


def load_norms_into_vllm(llm: Any, norms_path: Path) -> list[str]:
    """Write saved RMSNorm weights into every worker's model and read them back, so an adapter's trained norms are
    really used (vLLM's LoRA support covers only the low-rank matrices)."""
    from safetensors.torch import load_file

    tensors = {_plain_name(k): v for k, v in load_file(str(norms_path)).items()}

    def write(model: torch.nn.Module) -> list[str]:
        model.load_weights(weights=list(tensors.items()))
        params = dict(model.named_parameters())
        wrong = [n for n, t in tensors.items() if n not in params or not torch.equal(params[n].detach().cpu(), t.to(params[n].dtype))]
        if wrong:
            raise RuntimeError(f"norm weights did not reach the vLLM model: {wrong[:3]}")
        return sorted(tensors)

    return llm.apply_model(write)[0]


def make_backend(name: str, spec: ModelSpec, sampling: SamplingSettings, seed: int, **options: Any) -> Backend:
    """Construct the named backend; ``options`` not meant for it are ignored."""
    if name == "hf":
        return HFBackend(spec, sampling, device=options.get("device"), dtype=options.get("dtype", torch.bfloat16))
    if name == "vllm":
        return VLLMBackend(
            spec,
            sampling,
            seed=seed,
            max_model_len=options.get("max_model_len"),
            gpu_memory_utilization=options.get("gpu_memory_utilization", 0.9),
            tensor_parallel_size=options.get("tensor_parallel_size", 1),
            enforce_eager=options.get("enforce_eager", False),
        )
    raise UserError(f"unknown backend {name!r}: use vllm or hf")

"""Load a policy model: packed NVFP4 (QeRL), plain BF16 (LoRA baseline) or bitsandbytes NF4 (QLoRA baseline).

``load="nvfp4"`` reads a compressed-tensors NVFP4 checkpoint (as written by ``llm-compressor/quantize_nvfp4.py``)
straight into NVFP4Linear modules: the packed codes, E4M3 scales and global scales are copied from the safetensors
files as they are, and no dense BF16 weight is ever built. (transformers' own compressed-tensors loader decompresses
the whole model to dense weights, which is the memory this project exists to save.)
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from torch import nn

from qerl.errors import NotNVFP4CheckpointError, UserError
from qerl.modules import NVFP4Linear, use_kernel_layout

log = logging.getLogger(__name__)
LOAD_MODES = ("nvfp4", "bf16", "nf4")


def read_config(path: str | Path) -> dict:
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        raise UserError(f"{path} is not a model directory (no config.json): pass a local Hugging Face checkpoint")
    return json.loads(cfg.read_text())


def nvfp4_quantization_config(config: dict) -> dict | None:
    """The checkpoint's compressed-tensors quantization config if it stores NVFP4 packed weights, else None."""
    qc = config.get("quantization_config")
    if not isinstance(qc, dict) or qc.get("quant_method") != "compressed-tensors":
        return None
    formats = {qc.get("format")} | {g.get("format") for g in (qc.get("config_groups") or {}).values()}
    return qc if "nvfp4-pack-quantized" in formats else None


def is_nvfp4_checkpoint(path: str | Path) -> bool:
    return nvfp4_quantization_config(read_config(path)) is not None


def resolve_model_path(path_or_id: str) -> Path:
    """A local directory as is; a hub id through the local Hugging Face cache (downloading if the hub is reachable)."""
    p = Path(path_or_id).expanduser()
    if p.exists():
        if not (p / "config.json").is_file():
            raise UserError(f"{p} is not a model directory (no config.json): pass a Hugging Face checkpoint directory")
        return p
    if path_or_id.count("/") != 1 or path_or_id.startswith(("/", ".")):
        raise UserError(f"model path {path_or_id} does not exist: pass an existing directory or a hub id (org/name)")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(path_or_id))
    except Exception as exc:  # offline, unknown id, gated repo
        raise UserError(
            f"could not fetch {path_or_id} from the Hugging Face hub ({type(exc).__name__}: {exc}); "
            "download it first or pass a local checkpoint directory"
        ) from exc


def load_tokenizer(path: str | Path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_policy(
    path: str | Path,
    load: str = "bf16",
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.bfloat16,
    input_grad_rows: bool = False,
):
    """Return ``(model, tokenizer)``. ``load``: "nvfp4" (packed 4-bit base), "bf16" (dense), "nf4" (bitsandbytes).
    ``input_grad_rows`` (nvfp4 on CUDA): the packed layers also keep the input gradient's "rows" code layout
    (``NVFP4Linear.to_kernel_layout``)."""
    if load not in LOAD_MODES:
        raise UserError(f"unknown load mode {load!r}: use one of {', '.join(LOAD_MODES)}")
    path = resolve_model_path(str(path))
    config = read_config(path)
    qc = nvfp4_quantization_config(config)
    if load == "nvfp4":
        if qc is None:
            raise NotNVFP4CheckpointError(
                f"{path} is not an NVFP4 checkpoint (config.json has no compressed-tensors nvfp4-pack-quantized "
                "quantization_config): quantize it with `.venv-quantize/bin/python llm-compressor/quantize_nvfp4.py --model PATH` "
                "or use --load bf16"
            )
        model = _load_packed(path, torch.device(device), dtype, input_grad_rows)
    elif qc is not None:
        raise UserError(f"{path} is an NVFP4 checkpoint: load it with --load nvfp4 (or pass the BF16 source model)")
    elif load == "bf16":
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype).to(device)
    else:
        model = _load_nf4(path, device, dtype)
    model.eval()
    return model, load_tokenizer(path)


def _load_nf4(path: Path, device, dtype: torch.dtype):
    try:
        import bitsandbytes  # noqa: F401
    except ImportError as exc:
        raise UserError("--load nf4 needs bitsandbytes (CUDA machines): pip install bitsandbytes") from exc
    if not torch.cuda.is_available():
        raise UserError("--load nf4 (bitsandbytes) needs a CUDA GPU; use --load nvfp4 or bf16 on this machine")
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    bnb = BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype, bnb_4bit_use_double_quant=True
    )
    return AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, quantization_config=bnb, device_map={"": device})


def _safetensors_files(path: Path) -> list[Path]:
    index = path / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [path / n for n in names]
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise UserError(f"{path} has no *.safetensors weights")
    return files


def _load_packed(path: Path, device: torch.device, dtype: torch.dtype, input_grad_rows: bool = False) -> nn.Module:
    from accelerate import init_empty_weights
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    hf_config = AutoConfig.from_pretrained(str(path))
    # Build the architecture without transformers' quantizer: parameters on the meta device (no memory), buffers
    # such as rotary frequencies created for real.
    if hasattr(hf_config, "quantization_config"):
        del hf_config.quantization_config
    with init_empty_weights(include_buffers=False):
        model = AutoModelForCausalLM.from_config(hf_config, dtype=dtype)

    files = _safetensors_files(path)
    keys: dict[str, Path] = {}
    for f in files:
        with safe_open(str(f), framework="pt") as sf:
            keys.update(dict.fromkeys(sf.keys(), f))
    packed_modules = sorted(k.removesuffix(".weight_packed") for k in keys if k.endswith(".weight_packed"))
    if not packed_modules:
        raise NotNVFP4CheckpointError(f"{path} declares NVFP4 quantization but holds no weight_packed tensors")
    for name in packed_modules:
        old = model.get_submodule(name)
        if not isinstance(old, nn.Linear):
            raise UserError(f"{path}: quantized module {name} is a {type(old).__name__}, expected a Linear layer")
        parent_name, _, leaf = name.rpartition(".")
        new = NVFP4Linear(old.in_features, old.out_features, old.bias is not None, device=device, dtype=dtype)
        setattr(model.get_submodule(parent_name), leaf, new)

    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    loaded = set()
    for f in files:
        with safe_open(str(f), framework="pt", device=str(device)) as sf:
            for key in sf.keys():
                if key not in state:
                    if key.endswith(("input_global_scale", "weight_zero_point")):
                        continue  # activation/zero-point params of other schemes: not used by weight-only NVFP4
                    log.warning("ignoring checkpoint tensor %s (no such parameter in the model)", key)
                    continue
                _assign(model, key, sf.get_tensor(key), device, dtype)
                loaded.add(key)
    if getattr(hf_config, "tie_word_embeddings", False):
        model.tie_weights()
    still_meta = [n for n, p in model.named_parameters() if p.device.type == "meta"]
    if still_meta:
        raise UserError(f"{path} is missing weights for {still_meta[:5]}{' ...' if len(still_meta) > 5 else ''}")
    model.to(device)
    if device.type == "cuda":
        use_kernel_layout(model, input_grad_rows)  # one 4-bit copy in the kernels' layout (two with the rows copy)
        # Hand the replaced codec-layout blocks back to the device: a colocated engine started after this sizes its
        # KV cache from the free memory it sees.
        torch.cuda.empty_cache()
    model.name_or_path = str(path)
    model.config._name_or_path = str(path)
    model.config.qerl_load = "nvfp4"
    return model


def _assign(model: nn.Module, key: str, tensor: torch.Tensor, device: torch.device, dtype: torch.dtype) -> None:
    module_name, _, leaf = key.rpartition(".")
    module = model.get_submodule(module_name)
    if isinstance(module, NVFP4Linear) and leaf in ("weight_packed", "weight_scale", "weight_global_scale"):
        target = module._buffers[leaf]
        if target.shape != tensor.reshape(target.shape).shape or target.dtype != tensor.dtype:
            raise UserError(f"checkpoint tensor {key} has dtype/shape {tensor.dtype}{tuple(tensor.shape)}")
        module._buffers[leaf] = tensor.reshape(target.shape).to(device)
        return
    value = tensor.to(device=device, dtype=dtype if tensor.is_floating_point() else tensor.dtype)
    if leaf in module._parameters:
        old = module._parameters[leaf]
        if old is not None and old.shape != value.shape:
            raise UserError(f"checkpoint tensor {key} has shape {tuple(value.shape)}, the model expects {tuple(old.shape)}")
        module._parameters[leaf] = nn.Parameter(value, requires_grad=old.requires_grad if old is not None else False)
    else:
        module._buffers[leaf] = value


def packed_model_bytes(model: nn.Module) -> dict[str, int]:
    """Bytes held by quantized layers (codes + scales) and the quantized weight count, for the 4.5-bit check."""
    qbytes = qweights = 0
    for m in model.modules():
        if isinstance(m, NVFP4Linear):
            qbytes += sum(m._buffers[n].numel() * m._buffers[n].element_size() for n in m._buffers)
            qweights += m.in_features * m.out_features
    return {"quantized_bytes": qbytes, "quantized_weights": qweights}

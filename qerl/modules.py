"""Packed NVFP4 Linear: the frozen base weight stays 4-bit in memory; forward dequantizes on the fly.

The module holds exactly the compressed-tensors tensors (``weight_packed``, ``weight_scale``,
``weight_global_scale``) as buffers, so a checkpoint's state dict loads into it unchanged and no dense copy of the
weight outlives a forward or backward call. On CUDA the fused Triton kernels (``qerl.kernels``) are used when
present; elsewhere the torch reference from ``qerl.nvfp4``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from qerl import nvfp4

FORMAT_BUFFERS = ("weight_packed", "weight_scale", "weight_global_scale")  # the codec layout (checkpoint format)


class _DequantMatmul(torch.autograd.Function):
    """y = x @ W^T (+ b) with W rebuilt from its packed form in forward and again in backward.

    Saving only the packed tensors (not the dense W that F.linear would save) keeps training memory at 4.5 bits
    per base weight. The base is frozen, so only the input gets a gradient."""

    @staticmethod
    def forward(ctx, x, packed, scale, global_scale, bias):  # type: ignore[override]
        w = nvfp4.dequantize(packed, scale, global_scale, dtype=x.dtype)
        ctx.save_for_backward(packed, scale, global_scale)
        return nn.functional.linear(x, w, None if bias is None else bias.to(x.dtype))

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[override]
        packed, scale, global_scale = ctx.saved_tensors
        w = nvfp4.dequantize(packed, scale, global_scale, dtype=grad_out.dtype)
        return grad_out @ w, None, None, None, None


def kernels_available(device: torch.device) -> bool:
    """True where the fused Triton kernels can run (a CUDA device with triton installed)."""
    if device.type != "cuda":
        return False
    try:
        from qerl.kernels import triton_available
    except Exception:  # triton missing
        return False
    return triton_available(device)


class NVFP4Linear(nn.Module):
    """A Linear layer whose weight is stored as NVFP4 (see ``qerl.nvfp4``); frozen, gradients flow to the input."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.bfloat16,
    ) -> None:
        super().__init__()
        nvfp4.check_quantizable((out_features, in_features))
        self.in_features = in_features
        self.out_features = out_features
        self.register_buffer("weight_packed", torch.zeros(out_features, in_features // 2, dtype=torch.uint8, device=device))
        self.register_buffer(
            "weight_scale",
            torch.zeros(out_features, in_features // nvfp4.GROUP_SIZE, dtype=torch.float8_e4m3fn, device=device),
        )
        self.register_buffer("weight_global_scale", torch.ones(1, dtype=torch.float32, device=device))
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features, dtype=dtype, device=device), requires_grad=False)
        else:
            self.register_parameter("bias", None)
        # The dtype activations (and LoRA adapters, which peft creates in this dtype) are computed in.
        self.compute_dtype = dtype
        self.use_kernels = True
        self._dense_cache: torch.Tensor | None = None
        self._cache_enabled = False

    @classmethod
    def from_linear(cls, linear: nn.Linear, global_scale: torch.Tensor | None = None) -> NVFP4Linear:
        """Quantize a dense Linear (round to nearest) into a packed module on the same device."""
        q = nvfp4.quantize(linear.weight.detach(), global_scale)
        module = cls(
            linear.in_features, linear.out_features, linear.bias is not None, linear.weight.device, linear.weight.dtype
        )
        module.load_packed(q)
        if linear.bias is not None:
            module.bias.data.copy_(linear.bias.detach().to(module.bias.dtype))
        return module

    def load_packed(self, q: nvfp4.NVFP4Tensor) -> None:
        if q.shape != (self.out_features, self.in_features):
            raise ValueError(f"packed weight of shape {q.shape} does not fit {self}")
        self.weight_packed.copy_(q.packed)
        self.weight_scale.copy_(q.scale)
        self.weight_global_scale.copy_(q.global_scale.reshape(1))

    @property
    def qweight(self) -> torch.Tensor:
        """The packed codes. peft looks for a ``qweight`` tensor (as on GPTQ layers) to find a quantized layer's
        device when it places LoRA adapters."""
        return self.weight_global_scale if self.kernel_layout else self.weight_packed

    @property
    def kernel_layout(self) -> bool:
        return self._buffers.get("weight_packed") is None

    def to_kernel_layout(self, input_grad_rows: bool = False) -> None:
        """Replace the codec tensors by the fused kernels' layout (``qerl.kernels.prepare_weight``), once, on CUDA:
        the module then holds one 4-bit copy in the form the kernels read, not two.

        ``input_grad_rows``: also keep the codes in the input gradient's "rows" layout (another 0.5 byte per weight;
        an even number of output features), which the backward takes wherever the warp-specialized input-gradient
        kernel's table covers the product (Hopper, M <= 1024): the same bits, fewer instructions per weight
        (benchmarks/RESULTS.md, run 22). Callable again on a module already in the kernel layout."""
        from qerl.kernels import codec_from_kernel_weight, prepare_weight

        if self.kernel_layout:
            if input_grad_rows and self._buffers.get("kernel_codes_rows") is None:
                packed, scale = codec_from_kernel_weight(self.kernel_weight())
                rows = prepare_weight(packed, scale, self.weight_global_scale, layout="rows")
                self.register_buffer("kernel_codes_rows", rows.codes, persistent=False)  # derived, not saved
            return
        kw = prepare_weight(self.weight_packed, self.weight_scale, self.weight_global_scale)
        if input_grad_rows:
            rows = prepare_weight(self.weight_packed, self.weight_scale, self.weight_global_scale, layout="rows")
            self.register_buffer("kernel_codes_rows", rows.codes, persistent=False)
        self.register_buffer("kernel_codes", kw.codes)
        self.register_buffer("kernel_scales", kw.scales)
        self._buffers["weight_packed"] = None
        self._buffers["weight_scale"] = None

    def kernel_weight(self):
        from qerl.kernels import KernelWeight

        return KernelWeight(self.kernel_codes, self.kernel_scales, self.weight_global_scale, self.out_features,
                            self.in_features)

    def kernel_weight_rows(self):
        """The weight in the input gradient's "rows" layout (``to_kernel_layout(input_grad_rows=True)``), or None."""
        codes = self._buffers.get("kernel_codes_rows")
        if codes is None:
            return None
        from qerl.kernels import KernelWeight

        return KernelWeight(codes, self.kernel_scales, self.weight_global_scale, self.out_features, self.in_features,
                            "rows")

    def packed(self) -> nvfp4.NVFP4Tensor:
        if self.kernel_layout:
            from qerl.kernels import codec_from_kernel_weight

            packed, scale = codec_from_kernel_weight(self.kernel_weight())
            return nvfp4.NVFP4Tensor(packed, scale, self.weight_global_scale)
        return nvfp4.NVFP4Tensor(self.weight_packed, self.weight_scale, self.weight_global_scale)

    def dequantized_weight(self, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        """A dense copy of the weight (for tests and export; the forward pass never keeps one)."""
        return self.packed().dequantize(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel_layout and x.is_cuda and self.use_kernels:
            if torch.is_grad_enabled() and x.requires_grad:
                from qerl.kernels import NVFP4MatmulFn

                y = NVFP4MatmulFn.apply(x.to(torch.bfloat16), self.kernel_weight(), self.bias,
                                        self.kernel_weight_rows())
            else:
                # No gradient to carry (rollouts, scoring): the custom op, which torch.compile keeps as one opaque
                # call (the compiled decode step) instead of tracing the launcher's Python.
                from qerl.kernels.ops import nvfp4_linear

                y = nvfp4_linear(x.to(torch.bfloat16), *self.kernel_weight())
                if self.bias is not None:
                    y = y + self.bias.to(y.dtype)
            return y.to(x.dtype)
        if self._cache_enabled and not torch.is_grad_enabled():
            if self._dense_cache is None or self._dense_cache.dtype != x.dtype:
                self._dense_cache = self.packed().dequantize(x.dtype)
            return nn.functional.linear(x, self._dense_cache, None if self.bias is None else self.bias.to(x.dtype))
        q = self.packed()
        return _DequantMatmul.apply(x, q.packed, q.scale, q.global_scale, self.bias)

    def _apply(self, fn, recurse=True):  # type: ignore[override]
        # Module.to(dtype) / .half() cast every floating tensor, and float8 counts as floating: that would turn
        # the E4M3 scales and the fp32 global scale into bf16. The format must stay as stored, so these buffers
        # follow device moves only.
        held = {name: self._buffers[name] for name in FORMAT_BUFFERS if self._buffers.get(name) is not None}
        for name in held:
            self._buffers[name] = None
        try:
            super()._apply(fn, recurse)
        finally:
            probe = fn(torch.zeros(1, dtype=self.compute_dtype, device=held["weight_global_scale"].device))
            self.compute_dtype = probe.dtype
            for name, tensor in held.items():
                self._buffers[name] = tensor.to(probe.device)
        return self

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, nvfp4"


@contextmanager
def dense_weight_cache(model: nn.Module) -> Iterator[None]:
    """For the duration of a no-grad generation without fused kernels (CPU), dequantize each packed layer once
    instead of once per decoded token. The dense copies are dropped on exit; training never uses them."""
    layers = [m for m in model.modules() if isinstance(m, NVFP4Linear)]
    for m in layers:
        m._cache_enabled = True
    try:
        yield
    finally:
        for m in layers:
            m._cache_enabled = False
            m._dense_cache = None


def use_kernel_layout(model: nn.Module, input_grad_rows: bool = False) -> int:
    """Switch every packed layer on a kernel-capable CUDA device to the fused kernels' layout (``input_grad_rows``:
    with the input gradient's "rows" copy, on layers of an even number of output features; see
    ``NVFP4Linear.to_kernel_layout``); returns how many."""
    count = 0
    for m in model.modules():
        if isinstance(m, NVFP4Linear) and kernels_available(m.weight_global_scale.device):
            m.to_kernel_layout(input_grad_rows and m.out_features % 2 == 0)
            count += 1
    return count


def quantize_(
    model: nn.Module,
    filter_fn: Callable[[str, nn.Linear], bool] | None = None,
    fused_groups: tuple[tuple[str, ...], ...] = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")),
) -> list[str]:
    """Replace the model's Linear layers in place by NVFP4Linear (round to nearest), sharing one global scale within
    each fused group of siblings (as llmcompressor does). Returns the names of the replaced modules.

    Default filter: every Linear except ``lm_head`` whose input dim is a multiple of 16."""

    def default_filter(name: str, module: nn.Linear) -> bool:
        return not name.endswith("lm_head") and module.in_features % nvfp4.GROUP_SIZE == 0

    keep = filter_fn or default_filter
    targets = {n: m for n, m in model.named_modules() if type(m) is nn.Linear and keep(n, m)}
    shared: dict[str, torch.Tensor] = {}
    for group in fused_groups:
        parents = {n.rsplit(".", 1)[0] for n in targets if n.rsplit(".", 1)[-1] in group}
        for parent in parents:
            members = [f"{parent}.{leaf}" for leaf in group if f"{parent}.{leaf}" in targets]
            gs = nvfp4.global_scale_for([targets[m].weight for m in members])
            shared.update(dict.fromkeys(members, gs))
    for name, linear in targets.items():
        parent_name, _, leaf = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, leaf, NVFP4Linear.from_linear(linear, shared.get(name)))
    return list(targets)

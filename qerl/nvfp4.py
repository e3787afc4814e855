"""NVFP4: the one definition of the 4-bit weight format used everywhere in qerl.

A weight W of shape [N, K] (out_features, in_features) is stored as
  * ``packed``  uint8 [N, K // 2]: E2M1 codes, two per byte along the input dim; element 2j in the low nibble,
    element 2j+1 in the high nibble. A code is ``sign << 3 | index`` with index into E2M1_VALUES.
  * ``scale``   float8_e4m3fn [N, K // 16]: one scale per group of 16 consecutive input elements.
  * ``global_scale`` float32 [1]: ``448 * 6 / amax(|W|)``, stored the way llmcompressor / compressed-tensors
    store ``weight_global_scale`` (so the group scales use the whole E4M3 range).
Decoding: ``W[n, k] = e2m1(code[n, k]) * (float(scale[n, k // 16]) / global_scale)``.

The quantizer mirrors compressed-tensors' NVFP4 data-free path operation by operation, including the dtype of
each intermediate (statistics in the weight's own dtype, scales in fp32), so checkpoints made by
llmcompressor and by this module agree bit for bit (tests/test_nvfp4_llmcompressor.py checks it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

E2M1_VALUES: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
FP4_MAX = 6.0
FP8_E4M3_MAX = 448.0
GROUP_SIZE = 16
# A group whose amax is 0 gets the smallest positive E4M3 step compressed-tensors uses instead of 0.
ZERO_GROUP_SCALE = 0.125

# Rounding |x| (already scaled into [0, 6]) to the nearest E2M1 magnitude, ties to the even code:
# index = number of thresholds passed; ``strict`` thresholds need x > t (tie rounds down to the even code),
# the others x >= t (tie rounds up to the even code).
_THRESHOLDS: tuple[tuple[float, bool], ...] = (
    (0.25, True), (0.75, False), (1.25, True), (1.75, False), (2.5, True), (3.5, False), (5.0, True),
)


@dataclass
class NVFP4Tensor:
    """A quantized 2-D weight in the codec's layout (see module docstring)."""

    packed: torch.Tensor  # uint8 [N, K // 2]
    scale: torch.Tensor  # float8_e4m3fn [N, K // 16]
    global_scale: torch.Tensor  # float32 [1]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.packed.shape[0], self.packed.shape[1] * 2)

    def dequantize(self, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        return dequantize(self.packed, self.scale, self.global_scale, dtype=dtype)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.packed, self.scale, self.global_scale))


def check_quantizable(shape: Sequence[int]) -> None:
    """Raise a ValueError unless a [N, K] weight can be stored as NVFP4 (K a multiple of 16)."""
    if len(shape) != 2:
        raise ValueError(f"NVFP4 quantizes 2-D weights, got shape {tuple(shape)}")
    if shape[1] % GROUP_SIZE != 0:
        raise ValueError(
            f"NVFP4 needs the input dim to be a multiple of {GROUP_SIZE}, got shape {tuple(shape)}; "
            "keep this layer in BF16 (add it to the ignore list)"
        )


def global_scale_from_amax(amax: torch.Tensor) -> torch.Tensor:
    """``448 * 6 / amax`` as compressed-tensors computes it (in amax's dtype, then fp32), shape [1]."""
    amax = amax.clamp(min=torch.finfo(amax.dtype).tiny)
    gs = FP8_E4M3_MAX * FP4_MAX / amax
    gs = torch.nan_to_num(gs, nan=1.0, posinf=1.0, neginf=1.0)
    return gs.to(torch.float32).reshape(1)


def global_scale_for(weights: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
    """The global scale of one weight, or the shared one of fused weights (q/k/v; gate/up): the max amax wins."""
    if isinstance(weights, torch.Tensor):
        weights = [weights]
    amax = torch.stack([w.detach().abs().amax() for w in weights]).amax()
    return global_scale_from_amax(amax)


def group_scales(weight: torch.Tensor, global_scale: torch.Tensor) -> torch.Tensor:
    """E4M3 scale per 16-element group: ``global_scale * amax_group / 6`` rounded to float8_e4m3fn."""
    n, k = weight.shape
    amax = weight.detach().reshape(n, k // GROUP_SIZE, GROUP_SIZE).abs().amax(dim=-1)
    # amax / 6 is evaluated in the weight's dtype, the product with the fp32 global scale in fp32.
    scales = global_scale.to(weight.device) * (amax / torch.tensor(FP4_MAX, dtype=amax.dtype, device=amax.device))
    scales = scales.clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn).to(torch.float32)
    scales = torch.where(scales == 0, torch.full_like(scales, ZERO_GROUP_SCALE), scales)
    return scales.to(torch.float8_e4m3fn)


def e2m1_codes(x: torch.Tensor) -> torch.Tensor:
    """Round values (already divided by their scale) to E2M1 codes, uint8 in [0, 15], same shape as x."""
    mag = x.abs().clamp(max=FP4_MAX)
    index = torch.zeros(x.shape, dtype=torch.uint8, device=x.device)
    for t, strict in _THRESHOLDS:
        index += (mag > t if strict else mag >= t).to(torch.uint8)
    # The sign bit follows the sign of x, so tiny negatives become code 8 (-0), as compressed-tensors writes them.
    return index | (torch.signbit(x).to(torch.uint8) << 3)


def e2m1_decode(codes: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Codes (uint8, 0..15) to their E2M1 values."""
    table = torch.tensor(E2M1_VALUES + tuple(-v for v in E2M1_VALUES), dtype=dtype, device=codes.device)
    return table[codes.long()]


def pack(codes: torch.Tensor) -> torch.Tensor:
    """[..., K] codes -> [..., K // 2] bytes: element 2j in the low nibble, 2j+1 in the high nibble."""
    if codes.shape[-1] % 2:
        raise ValueError(f"packing needs an even last dim, got {tuple(codes.shape)}")
    c = codes.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """[..., K // 2] bytes -> [..., K] codes (inverse of ``pack``)."""
    low, high = packed & 0x0F, packed >> 4
    return torch.stack((low, high), dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def quantize(weight: torch.Tensor, global_scale: torch.Tensor | None = None) -> NVFP4Tensor:
    """Quantize a [N, K] weight (round to nearest, data-free). Pass ``global_scale`` to share it across fused
    layers (see ``global_scale_for``)."""
    check_quantizable(weight.shape)
    w = weight.detach()
    gs = global_scale_for(w) if global_scale is None else global_scale.to(torch.float32).reshape(1)
    gs = gs.to(w.device)
    scale = group_scales(w, gs)
    n, k = w.shape
    step = scale.to(torch.float32) / gs  # fp32, [N, K/16]
    scaled = w.reshape(n, k // GROUP_SIZE, GROUP_SIZE) / step.unsqueeze(-1)
    codes = e2m1_codes(scaled.clamp(-FP4_MAX, FP4_MAX)).reshape(n, k)
    return NVFP4Tensor(pack(codes), scale, gs)


def dequantize(
    packed: torch.Tensor,
    scale: torch.Tensor,
    global_scale: torch.Tensor,
    dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """Packed NVFP4 -> dense [N, K] weight in ``dtype`` (arithmetic in fp32, one rounding at the end)."""
    n, k = packed.shape[0], packed.shape[1] * 2
    values = e2m1_decode(unpack(packed)).reshape(n, k // GROUP_SIZE, GROUP_SIZE)
    step = scale.to(torch.float32) / global_scale.to(device=packed.device, dtype=torch.float32)
    return (values * step.unsqueeze(-1)).reshape(n, k).to(dtype)


def quantize_dequantize(weight: torch.Tensor, global_scale: torch.Tensor | None = None) -> torch.Tensor:
    """The weight as the NVFP4 model sees it, in the weight's dtype (fake quantization)."""
    return quantize(weight, global_scale).dequantize(weight.dtype)


def packed_bits_per_weight(n: int, k: int) -> float:
    """Storage cost in bits per weight element: 4 (code) + 8 / 16 (scale) + 32 / (N * K) (global scale)."""
    return (n * k // 2 + n * k // GROUP_SIZE + 4) * 8 / (n * k)

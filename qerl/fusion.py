"""Sibling projections that read the same input (q / k / v, gate / up) held as one weight, without a copy.

A decode step at small batch is bound by reading weights and by fixed costs per launch, so one product over the
group's rows beats one per projection (Qwen2.5-7B: q 3584, k and v 512 rows each; the small ones cannot fill the
GPU alone), and the fused shapes are the ones the kernels' launch tables were tuned on. ``fuse_siblings`` moves the
members' kernel-layout tensors into one allocation per group and gives each module views of its rows: the codes
[N, K / 2] are row slices, the chunk-major scale rows [K / 128, N * 8] column slices (the kernels read the scales'
row stride). The modules keep working as before, for training too, and memory does not grow; the fused weight is a
view over the same bytes, found again from where the members' tensors lie, so it needs no bookkeeping. Frozen
dense bases (BF16 LoRA) are fused the same way: each member's weight becomes a row slice of one [N, K] tensor.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from qerl.modules import NVFP4Linear

QKV = ("q_proj", "k_proj", "v_proj")
GATE_UP = ("gate_proj", "up_proj")


class FusedWeight(NamedTuple):
    """A group's rows as one weight, and each member's row count, in order. ``weight``: a kernel-layout NVFP4 weight
    (``qerl.kernels.KernelWeight``) or, for frozen dense bases, a dense [N, K] tensor."""

    weight: object
    sizes: tuple[int, ...]

    @property
    def packed(self) -> bool:
        return not isinstance(self.weight, torch.Tensor)


def packed_base(module: nn.Module) -> NVFP4Linear | None:
    """The NVFP4Linear under ``module`` (itself, or the base layer of a peft LoRA wrapper), or None."""
    base = getattr(module, "base_layer", module)
    return base if isinstance(base, NVFP4Linear) else None


def linear_base(module: nn.Module) -> nn.Module | None:
    """The base layer under ``module`` (itself, or a peft LoRA wrapper's): an NVFP4Linear or a plain nn.Linear."""
    base = getattr(module, "base_layer", module)
    return base if isinstance(base, (NVFP4Linear, nn.Linear)) else None


def _members(parent: nn.Module, leaves: tuple[str, ...]) -> list[nn.Module] | None:
    bases = [linear_base(getattr(parent, leaf, None)) for leaf in leaves]
    if any(b is None for b in bases) or len({type(b) for b in bases}) != 1:
        return None
    first = bases[0]
    if isinstance(first, NVFP4Linear):
        if any(not b.kernel_layout for b in bases):
            return None
        tensors = [b.kernel_codes for b in bases]
        # One global scale for the group (llmcompressor and ``quantize_`` share it within these groups): the fused
        # product multiplies by one.
        if any(not torch.equal(b.weight_global_scale, first.weight_global_scale) for b in bases):
            return None
    else:
        tensors = [b.weight for b in bases]
        # A frozen base only (LoRA): a trained weight's views would share one gradient buffer's lifetime and an
        # optimizer's state across modules. Weights that are views already, or not plain tensors, belong to a
        # wrapper that manages their storage (FSDP's flat parameters, DTensors, DeepSpeed's ZeRO-3): left alone.
        if any(t.requires_grad or t._base is not None or type(t) not in (torch.Tensor, nn.Parameter)
               or hasattr(t, "ds_id") for t in tensors) or len({t.dtype for t in tensors}) != 1:
            return None
    if any(b.in_features != first.in_features or t.device != tensors[0].device or t.dim() != 2
           for b, t in zip(bases, tensors)):
        return None
    return bases


def _one_view(parts: list[torch.Tensor], offsets: list[int], shape: tuple[int, int],
              strides: tuple[int, int]) -> torch.Tensor | None:
    """A view of ``shape`` / ``strides`` from ``parts[0]``'s first element if every part lies ``offsets`` elements
    after it in one storage with those strides, else None."""
    first = parts[0]
    for t, offset in zip(parts, offsets):
        if (t.untyped_storage().data_ptr() != first.untyped_storage().data_ptr() or t.stride() != strides
                or t.data_ptr() != first.data_ptr() + offset * t.element_size()):
            return None
    return first.detach().as_strided(shape, strides)


def _held_group(bases: list[nn.Module]):
    """The group's fused tensors if its members already hold consecutive views of one allocation, else None: the
    codes and weights as rows one after another, the scales as column blocks of 8 bytes a row."""
    sizes = [b.out_features for b in bases]
    total = sum(sizes)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    if isinstance(bases[0], NVFP4Linear):
        cols, chunks = bases[0].kernel_codes.shape[1], bases[0].kernel_scales.shape[0]
        codes = _one_view([b.kernel_codes for b in bases], [r * cols for r in starts], (total, cols), (cols, 1))
        scales = _one_view([b.kernel_scales for b in bases], [r * 8 for r in starts], (chunks, total * 8),
                           (total * 8, 1))
        return None if codes is None or scales is None else (codes, scales)
    k = bases[0].in_features
    return _one_view([b.weight for b in bases], [r * k for r in starts], (total, k), (k, 1))


def fuse_siblings(parent: nn.Module, leaves: tuple[str, ...]) -> FusedWeight | None:
    """The fused weight of ``parent``'s projections ``leaves`` (e.g. an attention module's ``QKV``), moving their
    tensors into one allocation the first time. None where they are not all NVFP4 layers in the kernels' layout
    with one global scale, or all frozen dense Linear layers of one dtype, of one input size."""
    from qerl.kernels import KernelWeight

    bases = _members(parent, leaves)
    if bases is None:
        return None
    sizes = tuple(b.out_features for b in bases)
    held = _held_group(bases)
    if held is None:
        row = 0
        if isinstance(bases[0], NVFP4Linear):
            codes = torch.cat([b.kernel_codes for b in bases])
            scales = torch.cat([b.kernel_scales for b in bases], dim=1)
            for b, rows in zip(bases, sizes):
                b._buffers["kernel_codes"] = codes[row:row + rows]
                b._buffers["kernel_scales"] = scales[:, row * 8:(row + rows) * 8]
                row += rows
            held = codes, scales
        else:
            held = torch.cat([b.weight.detach() for b in bases])
            for b, rows in zip(bases, sizes):
                b.weight = nn.Parameter(held[row:row + rows], requires_grad=False)
                row += rows
    if isinstance(bases[0], NVFP4Linear):
        codes, scales = held
        weight = KernelWeight(codes, scales, bases[0].weight_global_scale, codes.shape[0], bases[0].in_features)
        return FusedWeight(weight, sizes)
    return FusedWeight(held, sizes)


def fuse_projections(model: nn.Module) -> int:
    """``fuse_siblings`` on every attention's q / k / v and every MLP's gate / up in ``model``; how many groups are
    fused."""
    count = 0
    for module in model.modules():
        for leaves in (QKV, GATE_UP):
            if all(hasattr(module, leaf) for leaf in leaves) and fuse_siblings(module, leaves) is not None:
                count += 1
    return count


def unfuse_projections(model: nn.Module) -> int:
    """Give every fused group's members their own tensors again (copies of their rows), e.g. before saving a dense
    model whose merged weights would otherwise share one storage (safetensors refuses that); how many groups."""
    count = 0
    for module in model.modules():
        for leaves in (QKV, GATE_UP):
            if not all(hasattr(module, leaf) for leaf in leaves):
                continue
            bases = _members(module, leaves)
            if bases is None or _held_group(bases) is None:
                continue
            for b in bases:
                if isinstance(b, NVFP4Linear):
                    for name in ("kernel_codes", "kernel_scales"):
                        view = b._buffers[name]
                        b._buffers[name] = torch.empty(view.shape, dtype=view.dtype, device=view.device).copy_(view)
                else:
                    b.weight = nn.Parameter(b.weight.detach().clone(), requires_grad=False)
            count += 1
    return count


__all__ = ["GATE_UP", "QKV", "FusedWeight", "fuse_projections", "fuse_siblings", "linear_base", "packed_base",
           "unfuse_projections"]

"""RMSNorm folded into the NVFP4 projections around it, for decoding (one kernel less per norm).

A decoder layer runs ``h = h + o_proj(attn)``, ``x = rmsnorm(h) * g``, ``gate_up_proj(x)`` (and the same around the
MLP into the next layer's ``qkv_proj``). RMSNorm scales each row of h by r = rsqrt(mean(h**2) + eps), a number per
row, so the next projection can apply it to its output instead of its input:

    (r * h * g) @ W^T = r * ((h * g) @ W^T)

The projection that produces h (``nvfp4_matmul_add_norm``) adds the residual in its epilogue and also writes
``u = h * g`` and the partial sums of h**2 of each of its output tiles (``NormStats``); the projection that consumes
the norm (``nvfp4_matmul_normed``) multiplies row m of ``u @ W^T`` by r_m as it stores its tiles. The result equals
RMSNorm-then-projection up to bf16 rounding (u is rounded where the unfused path rounds r * h, then times g).

The epilogues run up to ``NORM_EPILOGUE_MAX_M`` rows of X (decode batches, where they were measured to pay:
benchmarks/epilogues.py); above, and where the warp-specialized kernel cannot take them (no Hopper GPU, a shape
outside its table), ``nvfp4_matmul_add_norm`` runs the projection and then one kernel for the residual add and the
whole RMSNorm, and hands on the normalized input (``NormStats`` without statistics), which ``nvfp4_matmul_normed``
then projects as it is; on CPU the same in torch. Callers need no second code path.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - the CPU path needs no Triton
    triton = None

from qerl import nvfp4
from qerl.kernels.nvfp4_gemm import (
    KernelWeight,
    _as_2d,
    codec_from_kernel_weight,
    nvfp4_matmul,
    nvfp4_matmul_swiglu,
    swiglu_interleaved,
)
from qerl.kernels.pdl import launch_options

# Rows of X up to which the projections apply the RMSNorm in their epilogues. Measured per 7B layer on an H200
# (benchmarks/RESULTS.md, run 17): at M = 8 the four projections with the epilogues took 5 us less than without
# them plus the compiled add + RMSNorm steps; at M = 64 the row scale's epilogue cost more than it saved.
NORM_EPILOGUE_MAX_M = 16


class NormStats(NamedTuple):
    """What an RMSNorm over the last dimension of h [M, K] needs besides h: ``sumsq`` [T, M] fp32, partial sums of
    h**2 over T column blocks of h (their sum over dim 0 is each row's sum of squares; the kernels write one row per
    output tile, so no buffer needs zeroing), and ``eps``. ``sumsq`` None: the input handed on with it is already
    normalized (and weighted)."""

    sumsq: torch.Tensor | None
    eps: float

    def scale(self, k: int) -> torch.Tensor:
        """r = rsqrt(mean(h**2) + eps) per row, fp32 [M], for rows of length ``k``."""
        return torch.rsqrt(self.sumsq.sum(0) / k + self.eps)


def rms_norm_input(h: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, NormStats]:
    """(u = h * weight in h's dtype, the statistics) of an RMSNorm of ``h`` [M, K] (torch; for a norm no projection
    produced, e.g. the first layer's over the embeddings): ``nvfp4_matmul_normed(u, w, stats)`` is then
    ``nvfp4_matmul(rmsnorm(h) * weight, w)``."""
    _check_norm_weight(weight, h.shape[-1])
    hf = h.float()
    return (hf * weight.float()).to(h.dtype), NormStats(hf.pow(2).sum(-1)[None, :].contiguous(), float(eps))


def nvfp4_matmul_normed(u: torch.Tensor, w: KernelWeight, stats: NormStats, swiglu: bool = False) -> torch.Tensor:
    """RMSNorm-then-projection from the norm's input times its weight ``u`` [M, K] (bf16) and its ``stats``: row m
    of ``u @ W^T`` times rsqrt(mean(h_m**2) + eps), bf16 [M, N] (``stats.sumsq`` None: ``u`` is already normalized,
    plain ``u @ W^T``); ``swiglu``: then SiLU x up of a weight of interleaved gate and up rows
    (``nvfp4_matmul_swiglu``), [M, N / 2]."""
    u2 = _as_2d(u, w.k, "u")
    m = u2.shape[0]
    if stats.sumsq is None:  # already normalized
        if not u2.is_cuda:
            y = _project(u2, w)
            return swiglu_interleaved(y) if swiglu else y
        return nvfp4_matmul_swiglu(u2, w) if swiglu else nvfp4_matmul(u2, w)
    if stats.sumsq.dim() != 2 or stats.sumsq.shape[1] != m:
        raise ValueError(f"stats.sumsq must be [T, {m}] (one column per row of u), not {tuple(stats.sumsq.shape)}")
    cfg = _ws_config(u2, w, swiglu) if m <= NORM_EPILOGUE_MAX_M else None
    if cfg is not None:
        from qerl.kernels import nvfp4_gemm_ws as ws

        return ws.ws_matmul(u2, w, cfg, glu=swiglu, row_norm=(stats.sumsq.float().contiguous(), stats.eps))
    x = (u2.float() * stats.scale(w.k).to(u2.device)[:, None]).to(torch.bfloat16)  # normalize first
    return nvfp4_matmul_normed(x, w, NormStats(None, stats.eps), swiglu)


def nvfp4_matmul_add_norm(x: torch.Tensor, w: KernelWeight, residual: torch.Tensor, norm_weight: torch.Tensor,
                          eps: float) -> tuple[torch.Tensor, torch.Tensor, NormStats]:
    """A residual branch's projection and the RMSNorm after it, for ``nvfp4_matmul_normed``: (h = residual +
    x @ W^T bf16 [M, N], the next norm's input, its ``NormStats``). In the kernel's epilogue (up to
    ``NORM_EPILOGUE_MAX_M`` rows) the input is h * norm_weight with the statistics of h; otherwise the projection
    and then ``add_rms_norm`` hand on rmsnorm(h) * norm_weight itself (statistics None)."""
    x2 = _as_2d(x, w.k, "x")
    m = x2.shape[0]
    if residual.shape != (m, w.n) or residual.dtype != torch.bfloat16:
        raise ValueError(f"residual must be bf16 [{m}, {w.n}], not {tuple(residual.shape)} {residual.dtype}")
    _check_norm_weight(norm_weight, w.n)
    cfg = _ws_config(x2, w, epilogue=True) if m <= NORM_EPILOGUE_MAX_M else None
    if cfg is not None:
        from qerl.kernels import nvfp4_gemm_ws as ws

        residual = residual.contiguous()
        u = ws.padded_empty(m, w.n, residual)  # the next projection's X: whole tiles of it (``ws.tma_rows``)
        sumsq = torch.empty(ws.norm_slots(cfg, w.n), m, dtype=torch.float32, device=x2.device)
        h = ws.ws_matmul(x2, w, cfg, add_norm=(residual, norm_weight.to(torch.bfloat16).contiguous(), u, sumsq))
        return h, u, NormStats(sumsq, float(eps))
    return (*add_rms_norm(residual, _project(x2, w), norm_weight, eps), NormStats(None, float(eps)))


def add_rms_norm(residual: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(h = residual + delta, rmsnorm(h) * weight), bf16 [M, N]: h rounded to bf16, normalized in fp32 and rounded,
    then times the weight in bf16 (as Qwen2's RMSNorm); one Triton kernel on CUDA, torch elsewhere."""
    if residual.is_cuda and triton is not None:
        r2, d2 = residual.contiguous(), delta.contiguous()
        n = r2.shape[-1]
        h = torch.empty_like(r2)
        # x is the next projection's X: rows past M in its storage let the kernels read whole tiles (``tma_rows``).
        from qerl.kernels.nvfp4_gemm_ws import padded_empty

        x = padded_empty(r2.shape[0], n, r2) if r2.dim() == 2 else torch.empty_like(r2)
        _add_rms_norm_kernel[(r2.shape[0],)](r2, d2, weight.contiguous(), h, x, n, float(eps),
                                             BLOCK=triton.next_power_of_2(n), num_warps=8,
                                             **launch_options(r2.device))
        return h, x
    h = (residual.float() + delta.float()).to(torch.bfloat16)
    hf = h.float()
    x = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps)).to(torch.bfloat16)
    return h, x * weight.to(torch.bfloat16)


if triton is not None:
    from qerl.kernels.pdl import grid_dependency

    @triton.jit
    def _add_rms_norm_kernel(res_ptr, delta_ptr, w_ptr, h_ptr, x_ptr, N, eps, BLOCK: tl.constexpr,
                             PDL: tl.constexpr = False):
        grid_dependency(PDL)  # (between two projections of a decode step: qerl.kernels.pdl)
        row = tl.program_id(0).to(tl.int64) * N
        c = tl.arange(0, BLOCK)
        mask = c < N
        h = (tl.load(res_ptr + row + c, mask=mask, other=0.0).to(tl.float32)
             + tl.load(delta_ptr + row + c, mask=mask, other=0.0).to(tl.float32)).to(tl.bfloat16)
        tl.store(h_ptr + row + c, h, mask=mask)
        hf = h.to(tl.float32)
        x = (hf * tl.rsqrt(tl.sum(hf * hf, 0) / N + eps)).to(tl.bfloat16)
        tl.store(x_ptr + row + c, x * tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.bfloat16), mask=mask)


def _project(x2: torch.Tensor, w: KernelWeight) -> torch.Tensor:
    """x2 @ W^T as bf16: ``nvfp4_matmul`` on CUDA, the codec's dequantization and an fp32 product elsewhere (the
    Triton kernels need a GPU)."""
    if x2.is_cuda:
        return nvfp4_matmul(x2, w)
    packed, scale = codec_from_kernel_weight(w)
    wf = nvfp4.dequantize(packed, scale, w.global_scale, dtype=torch.float32)
    return (x2.float() @ wf.T).to(torch.bfloat16)


def _check_norm_weight(weight: torch.Tensor, k: int) -> None:
    if weight.shape != (k,):
        raise ValueError(f"the RMSNorm weight must be [{k}] (the normalized dimension), not {tuple(weight.shape)}")


def _ws_config(x2: torch.Tensor, w: KernelWeight, swiglu: bool = False, epilogue: bool = False):
    """The warp-specialized forward's config for an epilogue on ``x2`` (``nvfp4_gemm_ws.epilogue_config``: the whole
    tile in one CTA for SiLU x up and the residual + norm, stream-K allowed for the row scale alone), or None."""
    if not x2.is_cuda or x2.shape[0] == 0:
        return None
    from qerl.kernels import nvfp4_gemm_ws as ws

    return ws.epilogue_config(x2, w, whole=swiglu or epilogue)


__all__ = ["NORM_EPILOGUE_MAX_M", "NormStats", "add_rms_norm", "nvfp4_matmul_add_norm", "nvfp4_matmul_normed",
           "rms_norm_input"]

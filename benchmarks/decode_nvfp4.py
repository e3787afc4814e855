"""Decode throughput of a full Qwen2.5-7B-shaped decoder (28 layers, random weights), NVFP4 vs BF16 linear layers.

A minimal decoder (RMSNorm, fused QKV with bias, RoPE, GQA attention over a static KV cache, SwiGLU MLP, BF16
embeddings and lm_head) runs one greedy decode step per CUDA-graph replay; the graph also advances the token and
position buffers, so 256 replays are 256 decode steps with no host work in between. The KV cache holds a random
128-token prompt. The BF16 model's weights are the dequantized NVFP4 weights, so both models compute the same
function up to rounding (checked: first-step logits and greedy tokens).

The work between the projections (residual add + RMSNorm, bias + RoPE, SiLU x up) is written as three small
functions; ``--compile`` hands each to ``torch.compile`` so it becomes one fused kernel, as in a serving engine,
for both models alike (the projections and attention stay the same calls). By default the step around attention
is the project's Triton decode kernels (``qerl.kernels.decode_attention``): bias, rotary embedding and the KV-cache
write in one kernel, then attention reading each KV head's cache once for its query heads, split over the sequence.
``--attention sdpa`` runs the torch version instead (bias + RoPE as above, ``index_copy_`` into the caches,
``F.scaled_dot_product_attention`` with a length mask: on an H200 only its cuDNN and math backends accept the mask
with grouped-query heads). ``--profile`` also records one eager step per batch and format with the PyTorch profiler
and reports GPU time per kind of kernel.

    python benchmarks/decode_nvfp4.py                       # batch 1, 8, 64; 256 new tokens
    python benchmarks/decode_nvfp4.py --compile             # fused elementwise work between the projections
    python benchmarks/decode_nvfp4.py --batches 8 --layers 4
    python benchmarks/decode_nvfp4.py --compile --attention sdpa --profile
    python benchmarks/decode_nvfp4.py --compile --layout words --swiglu-epilogue   # SiLU x up in gate_up's kernel
    python benchmarks/decode_nvfp4.py --compile --layout words --swiglu-epilogue --fused-norm   # RMSNorms too
    python benchmarks/decode_nvfp4.py --compile --layout words --swiglu-epilogue --fused-norm --rope-epilogue

``--rope-epilogue`` (NVFP4 model, Triton step): the QKV bias, RoPE and the KV-cache write in the QKV projection's
kernel epilogue (``qerl.kernels.fused_qkv``) instead of ``rope_and_cache`` after it.

``--fused-norm`` (NVFP4 model): the residual add and RMSNorm after o_proj and down_proj move into the projections
around them (``qerl.kernels.fused_norm``): o / down add the residual and write the norm's input times its weight and
its row statistics, qkv / gate_up scale their output rows by the norm's factor; the first layer's input norm and the
final norm stay separate steps. Above ``NORM_EPILOGUE_MAX_M`` rows (batch 64) the projections are followed by one
add + RMSNorm kernel instead. The BF16 model keeps cuBLAS and the compiled add + RMSNorm.

``--pdl`` (NVFP4 model): its kernels launch with programmatic dependent launch (``qerl.kernels.pdl``): each
projection's first copies of W and each launch's set-up overlap the kernel before it; with the three epilogue flags
above every kernel between the projections is the project's and takes part. ``--pdl-compare`` also times the NVFP4
model without it (the same kernels, so the same logits bit for bit: checked). The BF16 model launches as before.

    python benchmarks/decode_nvfp4.py --compile --layout words --swiglu-epilogue --fused-norm --rope-epilogue --pdl

Writes decode_nvfp4.json under $OUT (or --out) and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qerl import nvfp4  # noqa: E402
from qerl.kernels import interleave_gate_up, nvfp4_matmul, nvfp4_matmul_swiglu, prepare_weight  # noqa: E402
from qerl.kernels.decode_attention import decode_attention, rope_and_cache  # noqa: E402
from qerl.kernels.fused_norm import (  # noqa: E402
    NORM_EPILOGUE_MAX_M,
    NormStats,
    nvfp4_matmul_add_norm,
    nvfp4_matmul_normed,
)
from qerl.kernels.fused_qkv import nvfp4_qkv_rope_cache  # noqa: E402
from qerl.kernels.graphs import capture  # noqa: E402
from qerl.kernels.nvfp4_gemm import load_tuned_configs_file  # noqa: E402


@dataclass
class Qwen7BShape:
    hidden: int = 3584
    intermediate: int = 18944
    heads: int = 28
    kv_heads: int = 4
    head_dim: int = 128
    layers: int = 28
    vocab: int = 152064
    rope_theta: float = 1e6
    eps: float = 1e-6


CODE_LAYOUT = "pairs"  # the kernel code layout of the NVFP4 weights (--layout)
ATTENTION = "triton"  # the step around attention: the project's Triton kernels or torch SDPA (--attention)
SWIGLU_EPILOGUE = False  # NVFP4 gate_up of interleaved rows, SiLU x up in its kernel (--swiglu-epilogue)
FUSED_NORM = False  # NVFP4 model: residual add + RMSNorm in the projections' epilogues (--fused-norm)
ROPE_EPILOGUE = False  # NVFP4 model: QKV bias + RoPE + KV-cache write in qkv's kernel epilogue (--rope-epilogue)


class Linear:
    """One projection held both ways: BF16 (dequantized NVFP4) and the NVFP4 kernel layout."""

    def __init__(self, n: int, k: int, std: float, bias: bool = False, glu: bool = False):
        w = torch.randn(n, k, device="cuda") * std
        q = nvfp4.quantize(w)
        del w
        packed, scale = q.packed, q.scale
        if glu:  # the gate and up halves' rows interleaved (nvfp4_matmul_swiglu); the BF16 weight keeps the halves
            packed = interleave_gate_up(packed[: n // 2], packed[n // 2:])
            scale = interleave_gate_up(scale[: n // 2], scale[n // 2:])
        self.glu = glu
        self.kw = prepare_weight(packed, scale, q.global_scale,
                                 **({} if CODE_LAYOUT == "pairs" else {"layout": CODE_LAYOUT}))
        self.w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.bfloat16)
        self.b = (torch.randn(n, device="cuda") * 0.02).to(torch.bfloat16) if bias else None

    def __call__(self, x: torch.Tensor, fp4: bool) -> torch.Tensor:
        """x @ W^T without the bias (the caller fuses it into the next elementwise step)."""
        if self.glu:
            raise ValueError("a gate_up of interleaved rows is called through swiglu()")
        return nvfp4_matmul(x, self.kw) if fp4 else F.linear(x, self.w)

    def swiglu(self, x: torch.Tensor, fp4: bool) -> torch.Tensor:
        """SiLU(x @ G^T) * (x @ U^T) of a gate_up projection: in the NVFP4 kernel's epilogue for a weight of
        interleaved rows (``glu``), else the projection and then the (compiled) ``silu_mul``."""
        if fp4 and self.glu:
            return nvfp4_matmul_swiglu(x, self.kw)
        return FUSED["silu_mul"](nvfp4_matmul(x, self.kw) if fp4 else F.linear(x, self.w))


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def add_rms_norm(h: torch.Tensor, delta: torch.Tensor, w: torch.Tensor, eps: float):
    """Residual add, then RMSNorm of the sum: (h + delta, norm(h + delta))."""
    h = h + delta
    return h, rms_norm(h, w, eps)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


def bias_rope(qkv: torch.Tensor, bias: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int,
              kv_heads: int, head_dim: int):
    """QKV bias, split into heads, RoPE on q and k: (q [B, H, D], k [B, KV, D], v [B, KV, D])."""
    b = qkv.shape[0]
    q, k, v = (qkv + bias).split([heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], -1)
    q = _rope(q.view(b, heads, head_dim), cos, sin)
    k = _rope(k.view(b, kv_heads, head_dim), cos, sin)
    return q, k, v.view(b, kv_heads, head_dim)


def norm_input(h: torch.Tensor, w: torch.Tensor):
    """An RMSNorm split for ``nvfp4_matmul_normed``: (h * w, sum of h**2 per row as [1, M]), as
    ``qerl.kernels.fused_norm.rms_norm_input`` (written here so that torch.compile makes it one kernel)."""
    hf = h.float()
    return (hf * w.float()).to(h.dtype), hf.pow(2).sum(-1)[None, :]


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.chunk(2, -1)
    return F.silu(gate) * up


FUSED = {"add_rms_norm": add_rms_norm, "bias_rope": bias_rope, "silu_mul": silu_mul, "rms_norm": rms_norm,
         "norm_input": norm_input}


def compile_elementwise() -> None:
    """Replace the elementwise steps with torch.compile'd versions (one fused kernel each)."""
    for name, fn in list(FUSED.items()):
        FUSED[name] = torch.compile(fn, fullgraph=True, dynamic=False)


class Decoder:
    def __init__(self, cfg: Qwen7BShape, max_len: int):
        self.cfg = cfg
        h, i = cfg.hidden, cfg.intermediate
        qkv_n = (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim
        self.embed = (torch.randn(cfg.vocab, h, device="cuda") * 0.02).to(torch.bfloat16)
        self.lm_head = (torch.randn(cfg.vocab, h, device="cuda") * 0.02).to(torch.bfloat16)
        self.norm = torch.ones(h, device="cuda", dtype=torch.bfloat16)
        self.layers = []
        for _ in range(cfg.layers):
            self.layers.append({
                "ln1": torch.ones(h, device="cuda", dtype=torch.bfloat16),
                "ln2": torch.ones(h, device="cuda", dtype=torch.bfloat16),
                "qkv": Linear(qkv_n, h, h ** -0.5, bias=True),
                "o": Linear(h, cfg.heads * cfg.head_dim, (cfg.heads * cfg.head_dim) ** -0.5),
                "gate_up": Linear(2 * i, h, h ** -0.5, glu=SWIGLU_EPILOGUE),
                "down": Linear(h, i, i ** -0.5),
            })
        inv = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, device="cuda").float() / cfg.head_dim)
        ang = torch.arange(max_len, device="cuda").float()[:, None] * inv[None, :]
        self.cos = torch.cat([ang.cos(), ang.cos()], -1).to(torch.bfloat16)
        self.sin = torch.cat([ang.sin(), ang.sin()], -1).to(torch.bfloat16)
        self.max_len = max_len

    def new_cache(self, batch: int, prompt: int):
        c = self.cfg
        shape = (batch, c.kv_heads, self.max_len, c.head_dim)
        caches = []
        for _ in range(c.layers):
            k = torch.zeros(shape, device="cuda", dtype=torch.bfloat16)
            v = torch.zeros(shape, device="cuda", dtype=torch.bfloat16)
            k[:, :, :prompt].normal_()
            v[:, :, :prompt].normal_()
            caches.append((k, v))
        return caches

    def attention_inputs(self, pos: torch.Tensor, impl: str) -> dict:
        """What the step around attention needs from the position, computed once per decode step (not per layer):
        the RoPE rows and the length mask for the torch step, the lengths for the Triton kernels."""
        if impl == "sdpa":
            return {"cos": self.cos.index_select(0, pos)[:, None, :],  # [1, 1, D]
                    "sin": self.sin.index_select(0, pos)[:, None, :],
                    "visible": (torch.arange(self.max_len, device="cuda") <= pos)[None, None, None, :]}
        return {"lengths": pos + 1}  # one length for the whole batch, read on the device by the kernel

    def attention(self, q: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, inputs: dict, impl: str,
                  splits: int | None = None) -> torch.Tensor:
        """Attention of q [B, H, D] over the caches: SDPA with the length mask, or the Triton decode kernel."""
        if impl == "sdpa":
            return F.scaled_dot_product_attention(q[:, :, None, :], kc, vc, attn_mask=inputs["visible"],
                                                  enable_gqa=True)[:, :, 0]
        return decode_attention(q, kc, vc, inputs["lengths"], splits=splits)

    def around_attention(self, qkv: torch.Tensor, bias: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor,
                         pos: torch.Tensor, inputs: dict, impl: str) -> torch.Tensor:
        """One layer's step from the QKV projection (without its bias) to the attention output [B, H * D]: bias,
        RoPE, K/V written into the caches at ``pos``, attention."""
        c = self.cfg
        if impl == "sdpa":
            q, k, v = FUSED["bias_rope"](qkv, bias, inputs["cos"], inputs["sin"], c.heads, c.kv_heads, c.head_dim)
            kc.index_copy_(2, pos, k[:, :, None, :])
            vc.index_copy_(2, pos, v[:, :, None, :])
        else:
            q = rope_and_cache(qkv, bias, self.cos, self.sin, pos, kc, vc, c.heads)
        return self.attention(q, kc, vc, inputs, impl).reshape(qkv.shape[0], c.heads * c.head_dim)

    def step(self, tok: torch.Tensor, pos: torch.Tensor, caches, fp4: bool) -> torch.Tensor:
        """One decode step for a batch: tok [B] -> logits [B, vocab]; writes K/V at ``pos`` (a 1-element tensor)."""
        c = self.cfg
        hdn = self.embed[tok]
        inputs = self.attention_inputs(pos, ATTENTION)
        f = FUSED
        if fp4 and FUSED_NORM:
            return self.step_fused_norm(hdn, pos, caches, inputs)
        x = f["rms_norm"](hdn, self.layers[0]["ln1"], c.eps)
        for i, (layer, (kc, vc)) in enumerate(zip(self.layers, caches)):
            if fp4 and ROPE_EPILOGUE:
                att = self.qkv_attention(x, None, layer, kc, vc, pos, inputs)
            else:
                att = self.around_attention(layer["qkv"](x, fp4), layer["qkv"].b, kc, vc, pos, inputs, ATTENTION)
            hdn, x = f["add_rms_norm"](hdn, layer["o"](att, fp4), layer["ln2"], c.eps)
            delta = layer["down"](layer["gate_up"].swiglu(x, fp4), fp4)
            last = i + 1 == len(self.layers)
            hdn, x = f["add_rms_norm"](hdn, delta, self.norm if last else self.layers[i + 1]["ln1"], c.eps)
        return F.linear(x, self.lm_head)

    def qkv_attention(self, x: torch.Tensor, stats: NormStats | None, layer: dict, kc: torch.Tensor,
                      vc: torch.Tensor, pos: torch.Tensor, inputs: dict) -> torch.Tensor:
        """The NVFP4 model's QKV projection with bias, RoPE and the cache write in its kernel (``--rope-epilogue``;
        ``stats``: ``x`` is an RMSNorm's input times its weight), then the Triton decode attention: [B, H * D]."""
        if ATTENTION != "triton":
            raise ValueError("--rope-epilogue runs with the Triton step around attention (--attention triton)")
        c = self.cfg
        q = nvfp4_qkv_rope_cache(x, layer["qkv"].kw, layer["qkv"].b, self.cos, self.sin, pos, kc, vc, c.heads,
                                 norm=stats)
        return self.attention(q, kc, vc, inputs, ATTENTION).reshape(x.shape[0], c.heads * c.head_dim)

    def step_fused_norm(self, hdn: torch.Tensor, pos: torch.Tensor, caches, inputs: dict) -> torch.Tensor:
        """``step`` of the NVFP4 model with the RMSNorms inside the projections (``--fused-norm``): from the
        embeddings ``hdn`` [B, hidden] to the logits."""
        c, f = self.cfg, FUSED
        if hdn.shape[0] <= NORM_EPILOGUE_MAX_M:  # the first norm deferred to qkv's epilogue, as the later ones
            u, sumsq = f["norm_input"](hdn, self.layers[0]["ln1"])
            stats = NormStats(sumsq, c.eps)
        else:  # above, the projections hand on normalized inputs (nvfp4_matmul_add_norm)
            u, stats = f["rms_norm"](hdn, self.layers[0]["ln1"], c.eps), NormStats(None, c.eps)
        for i, (layer, (kc, vc)) in enumerate(zip(self.layers, caches)):
            if ROPE_EPILOGUE:
                att = self.qkv_attention(u, stats, layer, kc, vc, pos, inputs)
            else:
                qkv = nvfp4_matmul_normed(u, layer["qkv"].kw, stats)
                att = self.around_attention(qkv, layer["qkv"].b, kc, vc, pos, inputs, ATTENTION)
            hdn, u, stats = nvfp4_matmul_add_norm(att, layer["o"].kw, hdn, layer["ln2"], c.eps)
            gate_up = layer["gate_up"]
            act = nvfp4_matmul_normed(u, gate_up.kw, stats, swiglu=gate_up.glu)
            if not gate_up.glu:
                act = f["silu_mul"](act)
            if i + 1 == len(self.layers):  # the final norm feeds the BF16 lm_head: a separate step
                hdn, x = f["add_rms_norm"](hdn, layer["down"](act, True), self.norm, c.eps)
            else:
                hdn, u, stats = nvfp4_matmul_add_norm(act, layer["down"].kw, hdn, self.layers[i + 1]["ln1"], c.eps)
        return F.linear(x, self.lm_head)


def run_batch(model: Decoder, batch: int, prompt: int, new_tokens: int, fp4: bool) -> dict:
    torch.manual_seed(batch)  # the same prompt cache and first tokens for the BF16 and the NVFP4 run
    caches = model.new_cache(batch, prompt)
    tok = torch.randint(0, model.cfg.vocab, (batch,), device="cuda")
    pos = torch.tensor([prompt], device="cuda")
    first_tok, first_pos = tok.clone(), pos.clone()

    def step():
        logits = model.step(tok, pos, caches, fp4)
        tok.copy_(logits.argmax(-1))
        pos.add_(1)
        return logits

    graph, logits = capture(step, warmups=2)
    # Reset state and decode: the first replay's logits are kept for the NVFP4-vs-BF16 check.
    tok.copy_(first_tok)
    pos.copy_(first_pos)
    graph.replay()
    first_logits = logits.float().clone()
    tokens = [tok.clone()]
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(new_tokens - 1):
        graph.replay()
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1e3
    tokens.append(tok.clone())
    return {"batch": batch, "fp4": fp4, "steps_timed": new_tokens - 1, "seconds": seconds,
            "tokens_per_s": batch * (new_tokens - 1) / seconds, "ms_per_step": seconds * 1e3 / (new_tokens - 1),
            "first_logits": first_logits, "first_tokens": tokens[0]}


def kernel_kind(name: str) -> str:
    """A coarse class for a CUDA kernel's name, for the per-step breakdown. torch.compile's pointwise / reduction
    kernels come first: their names list the operators around them, an NVFP4 op's included (``nvfp4_lora_linear``)."""
    low = name.lower()
    if low.startswith(("triton_poi_", "triton_red_", "triton_per_")):
        return "fused_elementwise"
    if "lora_shrink" in low:  # the adapters' shrink (qerl.kernels.lora_shrink)
        return "lora_shrink"
    if "decode_attn" in low or "attention" in low or "softmax" in low or "fmha" in low or "flash" in low:
        return "attention"
    if "nvfp4" in low or "_fwd_" in low or "_ws_" in low or "_reduce_kernel" in low or "_bias_lora" in low:
        return "nvfp4_gemm"
    if "gemm" in low or "nvjet" in low or "xmma" in low or "cutlass" in low or "gemv" in low:
        return "cublas_gemm"
    if "triton_" in low:
        return "fused_elementwise"
    return "other"


def kernel_times(prof, steps: int) -> tuple[dict[str, float], list[dict]]:
    """A profiler's GPU time per step: microseconds by ``kernel_kind``, and per kernel (slowest first)."""
    kinds: dict[str, float] = {}
    kernels = []
    for ev in prof.key_averages():
        us = ev.self_device_time_total / steps
        if us <= 0:
            continue
        kinds[kernel_kind(ev.key)] = kinds.get(kernel_kind(ev.key), 0.0) + us
        kernels.append({"name": ev.key[:120], "us_per_step": us, "calls_per_step": ev.count / steps})
    kernels.sort(key=lambda r: -r["us_per_step"])
    return kinds, kernels


def profile_step(model: Decoder, batch: int, prompt: int, fp4: bool) -> dict:
    """GPU time of one eager decode step by kind of kernel (PyTorch profiler, the kernels of three steps averaged
    per step; the SDPA math path's batched matmuls count as cuBLAS GEMMs, see ``time_attention``)."""
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(batch)
    caches = model.new_cache(batch, prompt)
    tok = torch.randint(0, model.cfg.vocab, (batch,), device="cuda")
    pos = torch.tensor([prompt], device="cuda")
    for _ in range(2):
        model.step(tok, pos, caches, fp4)
    torch.cuda.synchronize()
    steps = 3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            model.step(tok, pos, caches, fp4)
        torch.cuda.synchronize()
    kinds, kernels = kernel_times(prof, steps)
    del caches
    return {"batch": batch, "fp4": fp4, "us_per_step_by_kind": kinds, "us_per_step": sum(kinds.values()),
            "top_kernels": kernels[:15]}


def time_attention(model: Decoder, batch: int, prompt: int, impl: str, splits: int | None = None,
                   reps: int = 20) -> float:
    """Microseconds per layer of decode attention alone: one CUDA graph of every layer's attention call (each on
    its own cache, so the caches stream from memory as in a step), replayed ``reps`` times. ``splits``: the Triton
    kernel's sequence slices (default: its own choice)."""
    c = model.cfg
    torch.manual_seed(batch)
    caches = model.new_cache(batch, prompt)
    q = torch.randn(batch, c.heads, c.head_dim, device="cuda", dtype=torch.bfloat16)
    inputs = model.attention_inputs(torch.tensor([prompt], device="cuda"), impl)

    def all_layers():
        for kc, vc in caches:
            model.attention(q, kc, vc, inputs, impl, splits)

    graph, _ = capture(all_layers)
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        graph.replay()
    end.record()
    end.synchronize()
    del graph
    return start.elapsed_time(end) * 1e3 / (reps * len(model.layers))


def compare_attention_paths(model: Decoder, batch: int, prompt: int) -> float:
    """Relative difference of the first layer's attention output between the Triton step (rope and cache write,
    decode attention) and the torch step (compiled bias + RoPE, ``index_copy_``, SDPA), from the same projection
    output and caches: checks the Triton path inside the harness."""
    c = model.cfg
    torch.manual_seed(batch)
    layer = model.layers[0]
    kc, vc = model.new_cache(batch, prompt)[0]
    qkv = layer["qkv"](torch.randn(batch, c.hidden, device="cuda").to(torch.bfloat16), False)
    pos = torch.tensor([prompt], device="cuda")
    out = {impl: model.around_attention(qkv, layer["qkv"].b, kc.clone(), vc.clone(), pos,
                                        model.attention_inputs(pos, impl), impl).float()
           for impl in ("triton", "sdpa")}
    return float((out["triton"] - out["sdpa"]).norm() / out["sdpa"].norm())


def sdpa_backends(model: Decoder, batch: int, prompt: int) -> dict:
    """Which of PyTorch's SDPA backends accept the harness's SDPA call (length mask, grouped-query heads), each
    forced alone: the one SDPA picks is among these."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    c = model.cfg
    q = torch.randn(batch, c.heads, 1, c.head_dim, device="cuda", dtype=torch.bfloat16)
    kc = torch.randn(batch, c.kv_heads, model.max_len, c.head_dim, device="cuda", dtype=torch.bfloat16)
    visible = (torch.arange(model.max_len, device="cuda") <= prompt)[None, None, None, :]
    usable = {}
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                    SDPBackend.MATH):
        try:
            with sdpa_kernel([backend]):
                F.scaled_dot_product_attention(q, kc, kc, attn_mask=visible, enable_gqa=True)
            usable[backend.name] = True
        except RuntimeError:
            usable[backend.name] = False
    return usable


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="1,8,64")
    p.add_argument("--new-tokens", type=int, default=256)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--layers", type=int, default=28, help="decoder layers (28 = Qwen2.5-7B; fewer only for tests)")
    p.add_argument("--configs", default="", help="tuned_configs.json from benchmarks/gemm_nvfp4.py --tune")
    p.add_argument("--compile", action="store_true", help="torch.compile the elementwise steps (both models)")
    p.add_argument("--layout", default="pairs", choices=["pairs", "words"],
                   help="kernel code layout of the NVFP4 weights (prepare_weight's layout)")
    p.add_argument("--attention", default="triton", choices=["triton", "sdpa"],
                   help="the step around attention: the project's Triton kernels (rope + cache write, attention) "
                        "or torch (compiled bias + RoPE, index_copy_, SDPA with a length mask)")
    p.add_argument("--repeats", type=int, default=1,
                   help="timed passes per batch and format, BF16 and NVFP4 in turn (the medians are reported)")
    p.add_argument("--profile", action="store_true", help="also report GPU time per kind of kernel in one step")
    p.add_argument("--swiglu-epilogue", action="store_true",
                   help="NVFP4 model: gate_up's rows interleaved and SiLU x up applied in its kernel's epilogue "
                        "(nvfp4_matmul_swiglu) instead of the compiled silu_mul after it; BF16 unchanged")
    p.add_argument("--fused-norm", action="store_true",
                   help="NVFP4 model: residual add + RMSNorm in the o / down projections' epilogues and the norm's "
                        "row scale in qkv / gate_up's (qerl.kernels.fused_norm); BF16 unchanged")
    p.add_argument("--rope-epilogue", action="store_true",
                   help="NVFP4 model: the QKV bias, RoPE and KV-cache write in the QKV projection's kernel epilogue "
                        "(qerl.kernels.fused_qkv) instead of rope_and_cache; BF16 unchanged")
    p.add_argument("--no-spare-rows", action="store_true",
                   help="NVFP4 model: X's descriptors end at row M even where the producer left rows past M in the "
                        "storage (nvfp4_gemm_ws.SPARE_ROWS off), to time what those rows save at batches that are not "
                        "whole tiles (e.g. --batches 40,100)")
    p.add_argument("--whole-boxes", action="store_true",
                   help="NVFP4 model: a last tile's X in one box however far it reaches past M "
                        "(nvfp4_gemm_ws.SUB_BOX_ROWS 0)")
    p.add_argument("--torch-swiglu", action="store_true",
                   help="NVFP4 model with --swiglu-epilogue: SiLU x up after the product in torch where the kernel "
                        "epilogue does not apply (nvfp4_gemm.SWIGLU_KERNEL off; before run 29: four kernels)")
    p.add_argument("--pdl", action="store_true",
                   help="the NVFP4 model's kernels launched with programmatic dependent launch (qerl.kernels.pdl)")
    p.add_argument("--pdl-compare", action="store_true",
                   help="with --pdl: also time the NVFP4 model without programmatic dependent launch")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    args = p.parse_args()
    if args.pdl_compare and not args.pdl:
        p.error("--pdl-compare times the NVFP4 model without PDL against --pdl: pass both")
    from qerl.kernels import nvfp4_gemm_ws
    from qerl.kernels.pdl import pdl

    nvfp4_gemm_ws.SPARE_ROWS = not args.no_spare_rows
    if args.whole_boxes:
        nvfp4_gemm_ws.SUB_BOX_ROWS = 0
    if args.torch_swiglu:
        from qerl.kernels import nvfp4_gemm

        nvfp4_gemm.SWIGLU_KERNEL = False
    global CODE_LAYOUT, ATTENTION, SWIGLU_EPILOGUE, FUSED_NORM, ROPE_EPILOGUE
    CODE_LAYOUT = args.layout
    ATTENTION = args.attention
    SWIGLU_EPILOGUE = args.swiglu_epilogue
    FUSED_NORM = args.fused_norm
    ROPE_EPILOGUE = args.rope_epilogue
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.configs and Path(args.configs).is_file():
        print(f"loaded {load_tuned_configs_file(args.configs)} tuned configs")
    if args.compile:
        compile_elementwise()
    torch.manual_seed(0)
    t0 = time.perf_counter()
    cfg = Qwen7BShape(layers=args.layers)
    model = Decoder(cfg, args.prompt + args.new_tokens + 1)
    print(f"built {cfg.layers}-layer model in {time.perf_counter() - t0:.1f}s; "
          f"{torch.cuda.memory_allocated() / 2**30:.1f} GiB allocated", flush=True)
    rows = []
    batches = [int(b) for b in args.batches.split(",")]
    paths_diff = compare_attention_paths(model, batches[0], args.prompt)
    print(f"Triton vs torch step around attention, first layer's attention output rel diff: {paths_diff:.2e}",
          flush=True)
    for batch in batches:
        # BF16 and NVFP4 in turn, ``--repeats`` times each: the medians' ratio, not one pass's.
        passes = []
        for _ in range(args.repeats):
            r16 = run_batch(model, batch, args.prompt, args.new_tokens, fp4=False)
            with pdl(args.pdl):
                passes.append((r16, run_batch(model, batch, args.prompt, args.new_tokens, fp4=True)))
        r16, r4 = passes[0]
        rel = float((r4["first_logits"] - r16["first_logits"]).norm() / r16["first_logits"].norm())
        agree = float((r4["first_tokens"] == r16["first_tokens"]).float().mean())
        ms16 = [a["ms_per_step"] for a, _ in passes]
        ms4 = [b["ms_per_step"] for _, b in passes]
        bf16_ms, nvfp4_ms = statistics.median(ms16), statistics.median(ms4)
        row = {"batch": batch, "bf16_tok_s": batch * 1e3 / bf16_ms, "nvfp4_tok_s": batch * 1e3 / nvfp4_ms,
               "ratio": bf16_ms / nvfp4_ms, "bf16_ms_step": bf16_ms, "nvfp4_ms_step": nvfp4_ms,
               "bf16_ms_step_passes": ms16, "nvfp4_ms_step_passes": ms4,
               "first_logits_rel_diff": rel, "first_token_agreement": agree}
        if args.pdl_compare:
            # The NVFP4 model again, its graph captured with every kernel launched only after the one before it has
            # completed (``QERL_PDL=0``): the same kernels and arithmetic, so the same logits bit for bit.
            serial = []
            for _ in range(args.repeats):
                with pdl(False):
                    serial.append(run_batch(model, batch, args.prompt, args.new_tokens, fp4=True))
            serial_ms = statistics.median(r["ms_per_step"] for r in serial)
            row.update({"nvfp4_serial_tok_s": batch * 1e3 / serial_ms, "nvfp4_serial_ms_step": serial_ms,
                        "nvfp4_serial_ms_step_passes": [r["ms_per_step"] for r in serial],
                        "ratio_serial": bf16_ms / serial_ms, "pdl_speedup": serial_ms / nvfp4_ms,
                        "serial_logits_equal": bool(torch.equal(serial[0]["first_logits"], r4["first_logits"]))})
        if args.profile:
            row["profile"] = [profile_step(model, batch, args.prompt, fp4) for fp4 in (False, True)]
            row["attention_us_per_layer"] = {impl: time_attention(model, batch, args.prompt, impl)
                                             for impl in ("sdpa", "triton")}
            row["attention_us_per_layer"].update({f"triton_splits{sp}": time_attention(
                model, batch, args.prompt, "triton", sp) for sp in (1, 2, 4, 8)})
            row["sdpa_backends_usable"] = sdpa_backends(model, batch, args.prompt)
        rows.append(row)
        print(json.dumps(row), flush=True)
    props = torch.cuda.get_device_properties(0)
    import triton
    meta = {"device": props.name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "triton": triton.__version__, "compile": args.compile, "layers": cfg.layers, "prompt": args.prompt,
            "layout": args.layout, "attention": args.attention, "repeats": args.repeats,
            "swiglu_epilogue": args.swiglu_epilogue, "fused_norm": args.fused_norm,
            "rope_epilogue": args.rope_epilogue, "spare_rows": not args.no_spare_rows,
            "sub_box_rows": nvfp4_gemm_ws.SUB_BOX_ROWS, "swiglu_kernel": not args.torch_swiglu,
            "attention_paths_rel_diff": paths_diff,
            "new_tokens": args.new_tokens, "pdl": args.pdl,
            "command": " ".join(["python"] + sys.argv)}
    (out_dir / "decode_nvfp4.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"\n{props.name}, {cfg.layers} layers, {args.new_tokens} new tokens (prompt {args.prompt})")
    print(f"{'batch':>5s} {'BF16 tok/s':>11s} {'NVFP4 tok/s':>12s} {'ratio':>6s} {'logit rel':>10s} {'tok agree':>9s}")
    for r in rows:
        print(f"{r['batch']:5d} {r['bf16_tok_s']:11.0f} {r['nvfp4_tok_s']:12.0f} {r['ratio']:6.2f} "
              f"{r['first_logits_rel_diff']:10.2e} {r['first_token_agreement']:9.2f}")
    for r in rows:
        if "pdl_speedup" in r:
            print(f"batch {r['batch']}: NVFP4 without PDL {r['nvfp4_serial_tok_s']:.0f} tok/s ({r['ratio_serial']:.2f}x "
                  f"BF16); PDL {r['pdl_speedup']:.3f}x; logits equal {r['serial_logits_equal']}")
    for r in rows:
        for prof in r.get("profile", []):
            kinds = ", ".join(f"{k} {v:.0f}" for k, v in sorted(prof["us_per_step_by_kind"].items()))
            print(f"batch {r['batch']} {'NVFP4' if prof['fp4'] else 'BF16 '} eager step, GPU us: "
                  f"{prof['us_per_step']:.0f} ({kinds})")
        if "attention_us_per_layer" in r:
            print(f"batch {r['batch']} attention alone, us per layer: "
                  + ", ".join(f"{k} {v:.1f}" for k, v in r["attention_us_per_layer"].items())
                  + f"; SDPA backends that accept the call: {r['sdpa_backends_usable']}")


if __name__ == "__main__":
    main()

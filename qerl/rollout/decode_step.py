"""The transformers backend's one-token decode step for Qwen2 / Llama-family models, in the project's kernels.

The model's own forward, even compiled, runs q, k and v (and gate, up) as separate products, and attends over the
whole static cache with the KV heads copied out per query head (what limited the backend after it decoded in CUDA
graphs; benchmarks/RESULTS.md, run 18). This step walks the same model's layers itself:

    x = input_layernorm(h)                     the model's module (AQN's noise and trained norms read in place)
    q = rope_and_cache(x @ [Wq; Wk; Wv]^T)     one product per group (``qerl.fusion``, no copy of the weights; on
                                               NVFP4 the LoRA adapters' expand per slice in the kernel's epilogue);
                                               bias + rotary + the new k / v written into the cache in one kernel
    h = h + o_proj(decode_attention(q))        attention over the filled part of the cache, from each row's first
                                               prompt token (left padding skipped), no KV-head copies
    x = post_attention_layernorm(h)
    h = h + down_proj(silu(g) * u), [g, u] = x @ [Wg; Wu]^T

o_proj and down_proj are products of their own (the adapter's expand in the epilogue, as for the groups); the norms,
embeddings and the LM head are the model's modules.
Where a group cannot be fused (a trained dense base, different global scales, DoRA, several active adapters, adapters
of different ranks) its modules are called one by one, so every model of these families runs, fused or not.

``layout``: the code layout the packed products read. "pairs" keeps the training modules' own (which the input
gradient reads; no copy). "words" gives the step its own copy of the packed groups' codes in the layout the
warp-specialized forward decodes fastest (``qerl.kernels.with_layout``; the scales are shared): 0.5 byte a weight
more, about 3.3 GB on Qwen2.5-7B's layers, made when the step is built. At decode batches the "pairs" products run
the Triton kernels, where "words" runs the warp-specialized ones: 7B rollouts 8-9% faster without an adapter, 4-5%
with a rank-32 one (benchmarks/RESULTS.md, run 45). "auto" (the default) takes "words" on a Hopper GPU where the
copy takes at most a quarter of the free memory (the KV cache and the training step need the rest), else "pairs".

The adapter is read where it lives (updated in place by the optimizer), or from the step's copies of it, refreshed
in place before every generation, so a step captured in a CUDA graph keeps using the current adapter; the adapter
configuration (which adapter is active) is read when the step is built. With ``adapter_kernels`` (the default)
three things change around the adapter:
- where B's dtype is not the model's (peft keeps trained adapters in fp32; the NVFP4 epilogue and the dense path's
  expand take the model's bf16), the step keeps its own copies of B in the model's dtype, refreshed in place before
  every generation (``refresh_adapters``), as vLLM's engine receives an adapter in its own dtype. On NVFP4 that is
  the rounding of B the epilogue's cast each step made, without the cast's kernels; a frozen dense base's expand
  runs in bf16 where it ran in fp32;
- at decode batches of 17-128 rows the shrink ``u = scale * x @ A^T`` of each group is one launch of
  ``qerl.kernels.lora_shrink``, which reads A in its own dtype and writes u where the expand reads it (fewer rows
  keep the multiply-sum below, which is faster there);
- where A's dtype is not the model's, the kernel and the multiply-sum read the step's copies of A in the model's
  dtype (``a_copies``, on by default with the adapter kernels), refreshed as B's are: half the bytes, exact fp32
  products of x and A's rounding (one 16-bit product in the kernel instead of three tf32 ones), the rounding vLLM's
  engine makes of a pushed adapter; above 128 rows the matmul reads A itself. All 28 layers' shrinks of a 7B step
  at M = 64 alone: 777 us on fp32 A, 549 on the copies; rollouts with a rank-32 adapter: at batch 64 NVFP4 +4.9%,
  BF16 +2.9% (an H200, benchmarks/RESULTS.md, run 48); at batch 8 NVFP4 +1.0%, BF16 +0.4% (an H100, run 49).
  ``a_copies=False`` (the trainer's ``--hf_adapter_a_copies false``) reads peft's A itself.
7B-shaped rollouts with a rank-32 adapter, NVFP4: 12% more tokens a second at batch 8 (the copies of B), 22% at
batch 64 (both; benchmarks/RESULTS.md, run 46). Adapter dropout is not applied: rollouts run in eval mode.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from qerl.fusion import GATE_UP, QKV, FusedWeight, fuse_siblings, linear_base
from qerl.modules import NVFP4Linear

# Up to this many rows (decode batches) the adapters' shrink is written as a multiply-sum (``ProjectionGroup._shrink``).
SHRINK_REDUCTION_MAX_M = 16
# Above SHRINK_REDUCTION_MAX_M and up to this many rows the shrink runs ``qerl::lora_shrink`` (with
# ``adapter_kernels``); above, one matmul. All 28 layers' shrinks of a 7B step with a rank-32 adapter, alone: at M = 8
# the multiply-sum took 539 us against the kernel's 709; at M = 64, 1913 against 950 (benchmarks/RESULTS.md, run 46;
# 776 with the kernel's blocks of 16 rows, run 47).
SHRINK_KERNEL_MAX_M = 128
# How the shrink kernel's K-splits meet (``qerl.kernels.lora_shrink.SPLIT_SUMS``, which needs triton to import).
SHRINK_REDUCES = ("last", "atomic")
O_PROJ = ("o_proj",)
DOWN = ("down_proj",)

SUPPORTED_MODEL_TYPES = ("qwen2", "llama")


def unsupported_reason(model: nn.Module) -> str | None:
    """Why ``DecodeStep`` cannot run ``model`` (a transformers causal LM, peft's LoRA layers injected, or its peft
    wrapper), or None."""
    model = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", None) not in SUPPORTED_MODEL_TYPES:
        return f"model type {getattr(cfg, 'model_type', None)!r} (supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
    if "sliding_attention" in (getattr(cfg, "layer_types", None) or ()):
        return "sliding-window attention layers"
    if getattr(cfg, "hidden_act", None) != "silu":
        return f"activation {cfg.hidden_act!r} (SiLU only)"
    body = getattr(model, "model", None)
    layers = getattr(body, "layers", None)
    if layers is None or not hasattr(body, "rotary_emb") or not hasattr(model, "lm_head"):
        return "no model.model.layers / rotary_emb / lm_head"
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if head_dim & (head_dim - 1) or head_dim < 16:
        return f"head dim {head_dim} (the attention kernel takes powers of two >= 16)"
    for layer in layers:
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        if attn is None or mlp is None or not all(hasattr(attn, p) for p in (*QKV, "o_proj")) \
                or not all(hasattr(mlp, p) for p in (*GATE_UP, "down_proj")):
            return "a layer without q/k/v/o_proj and gate/up/down_proj"
        if any(hasattr(attn, extra) for extra in ("q_norm", "k_norm")):
            return "per-head q / k norms"
    return None


def _adapter(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor, float] | None | bool:
    """(A [r, K], B [N, r], scaling) of ``module``'s one active plain LoRA adapter; None without an adapter; False
    where the fused product cannot stand in for it (DoRA, a bias on B, several active adapters, merged)."""
    if not hasattr(module, "lora_A"):
        return None
    if getattr(module, "disable_adapters", False):
        return None
    if getattr(module, "merged", False):
        return False
    active = [name for name in module.active_adapters if name in module.lora_A]
    if not active:
        return None
    if len(active) > 1:
        return False
    name = active[0]
    if getattr(module, "use_dora", {}).get(name, False) or getattr(module.lora_B[name], "bias", None) is not None:
        return False
    return module.lora_A[name].weight, module.lora_B[name].weight, float(module.scaling[name])


class ProjectionGroup:
    """Projections that read one input, as one product where ``qerl.fusion`` can fuse them (see the module
    docstring), else their modules one by one. ``bias``: the fused product's bias, which the caller adds (the QKV
    group's goes to ``rope_and_cache``); None where there is none or the modules add their own."""

    # NVFP4 with an adapter: its expand in the product's epilogue (``qerl::nvfp4_lora_linear``), else after it.
    expand_in_epilogue = True

    def __init__(self, parent: nn.Module, leaves: tuple[str, ...], layout: str | None = None,
                 b_dtype: torch.dtype | None = None, shrink_kernel: bool = False, shrink_reduce: str = "last",
                 a_dtype: torch.dtype | None = None) -> None:
        self.modules = [getattr(parent, leaf) for leaf in leaves]
        self.fused: FusedWeight | None = fuse_siblings(parent, leaves)
        self.bias: torch.Tensor | None = None
        self.lora: tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor] | None = None  # A's, B's, scalings
        # (the adapter's B's, the step's copies of them in ``b_dtype``) where they differ in dtype
        self.b_copies: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None
        # (the adapter's A's, the copies in ``a_dtype`` the shrink kernel reads) where they differ in dtype
        self.a_copies: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None
        self.shrink_kernel = shrink_kernel
        self.shrink_reduce = shrink_reduce  # how the shrink kernel's K-splits meet (``lora_shrink``'s ``reduce``)
        if self.fused is None:
            return
        adapters = [_adapter(m) for m in self.modules]
        ranks = {a[0].shape[0] for a in adapters if a}
        if any(a is False for a in adapters) or len(ranks) > 1:
            self.fused = None  # the modules compute what the fused product cannot
            return
        bases = [linear_base(m) for m in self.modules]
        if any(b.bias is not None for b in bases):
            # The frozen base's biases, concatenated once (a copy of a few KB; the base does not train).
            like = next(b.bias for b in bases if b.bias is not None)
            self.bias = torch.cat([b.bias.detach() if b.bias is not None else like.new_zeros(b.out_features)
                                   for b in bases]).contiguous()
        if ranks:
            like_a, like_b, _ = next(a for a in adapters if a)
            a_list, b_list, scales = [], [], []
            for a, base in zip(adapters, bases):
                if a:
                    a_list.append(a[0])
                    b_list.append(a[1])
                    scales.append(a[2])
                else:  # a member without an adapter: a zero expand of the same rank
                    a_list.append(like_a.new_zeros(like_a.shape[0], base.in_features))
                    b_list.append(like_b.new_zeros(base.out_features, like_b.shape[1]))
                    scales.append(0.0)
            if b_dtype is not None and like_b.dtype != b_dtype:
                # The step's own copies (module docstring), which ``DecodeStep.refresh_adapters`` updates.
                self.b_copies = (b_list, [b.detach().to(b_dtype) for b in b_list])
                b_list = self.b_copies[1]
            if a_dtype is not None and like_a.dtype != a_dtype:
                self.a_copies = (a_list, [a.detach().to(a_dtype) for a in a_list])
            self.lora = (a_list, b_list, torch.tensor(scales, dtype=torch.float32, device=like_a.device))
        if layout is not None and self.fused.packed:
            from qerl.kernels import with_layout

            self.fused = self.fused._replace(weight=with_layout(self.fused.weight, layout))  # the step's own codes

    def __call__(self, x: torch.Tensor, add_bias: bool = False) -> torch.Tensor:
        """[M, sum of the members' N]: the members' outputs side by side; a fused product's bias only with
        ``add_bias`` (the modules add their own)."""
        if self.fused is None:
            return self.modules[0](x) if len(self.modules) == 1 else torch.cat([m(x) for m in self.modules], dim=-1)
        w = self.fused.weight
        bias = self.bias if add_bias else None
        cuda = x.is_cuda
        if not self.fused.packed:  # a frozen dense base: one matmul over the group's rows
            xin = x.to(w.dtype)
            y = nn.functional.linear(xin, w, None if bias is None else bias.to(w.dtype))
            lora = self._shrink(xin, cast_b=False)
            if lora is not None:
                y = y + _expand(*lora).to(y.dtype)
            return y.to(x.dtype)
        xin = x.to(torch.bfloat16) if cuda else x  # the kernels take bf16; the CPU reference computes in x's dtype
        lora = self._shrink(xin, cast_b=cuda)
        if cuda:
            from qerl.kernels.ops import nvfp4_linear, nvfp4_lora_linear

            if lora is None or not self.expand_in_epilogue:
                y = nvfp4_linear(xin, *w)
                if bias is not None:
                    y = y + bias
                if lora is not None:
                    y = y + _expand(*lora).to(y.dtype)
            else:  # the bias and each slice's expand in the product's epilogue
                y = nvfp4_lora_linear(xin, w.codes, w.scales, w.global_scale, w.n, w.k,
                                      None if bias is None else bias.to(torch.bfloat16), lora[0], lora[1],
                                      layout=w.layout)
        else:  # the torch reference (CPU tests): the group's rows dequantized, then the adapters' slices
            y = _reference_product(xin, w, lora)
            if bias is not None:
                y = y + bias
        return y.to(x.dtype)

    def _shrink(self, x: torch.Tensor, cast_b: bool) -> tuple[torch.Tensor, list[torch.Tensor]] | None:
        """The adapters' shrink for every member at once: (u [S, M, r] fp32, scaled; the members' B), or None."""
        if self.lora is None:
            return None
        a_list, b_list, scales = self.lora
        bs = [b.to(torch.bfloat16) if cast_b else b for b in b_list]  # no kernel where B is bf16 (its copies)
        held = a_list if self.a_copies is None else self.a_copies[1]  # the A the kernel and the multiply-sum read
        if self.shrink_kernel and SHRINK_REDUCTION_MAX_M < x.shape[0] <= SHRINK_KERNEL_MAX_M:
            from qerl.kernels.ops import lora_shrink_op

            return lora_shrink_op(x, held, scales, self.shrink_reduce), bs
        if x.shape[0] <= SHRINK_REDUCTION_MAX_M:
            # A product this skinny ([M, K] x [K, S r], K in the thousands) gets a handful of CTAs from cuBLAS: ~9 us
            # each at M = 8 on an H200, ~1 ms a 7B step with a rank-32 adapter (benchmarks/RESULTS.md, run 19). As a
            # multiply-sum, torch.compile makes it one reduction kernel with a program per output block. It reads
            # the copies of A where the step keeps them (half the bytes of fp32 A); the products are fp32 either
            # way (a bf16 x bf16 product is exact in fp32), as the kernel's.
            a = torch.cat(held) if len(held) > 1 else held[0]  # [S * r, K], in place of S small products
            u = (x.float()[:, None, :] * a.float()[None]).sum(-1)
        else:
            a = torch.cat(a_list) if len(a_list) > 1 else a_list[0]
            u = x.to(a.dtype) @ a.T
        u = u.float().unflatten(-1, (len(a_list), -1)) * scales[:, None]
        return u.transpose(0, 1).contiguous(), bs


def _expand(u: torch.Tensor, bs: list[torch.Tensor]) -> torch.Tensor:
    """Each slice's ``u_s @ B_s^T``, side by side: [M, sum of the slices' N]."""
    return torch.cat([u[s].to(b.dtype) @ b.T for s, b in enumerate(bs)], dim=-1)


def _reference_product(x: torch.Tensor, w, lora) -> torch.Tensor:
    """``x @ W^T`` (+ each slice's ``u_s @ B_s^T``) in fp32 torch for a kernel-layout weight ``w`` (B in any dtype,
    accumulated in fp32 as the kernel's epilogue does; ``add_bias_and_lora_``'s torch path wants B in y's dtype)."""
    from qerl import nvfp4
    from qerl.kernels import codec_from_kernel_weight

    packed, scale = codec_from_kernel_weight(w)
    y = x.float() @ nvfp4.dequantize(packed, scale, w.global_scale, dtype=torch.float32).T
    if lora is not None:
        y = y + _expand(lora[0], [b.float() for b in lora[1]])
    return y


class _Layer(NamedTuple):
    layer: nn.Module
    qkv: ProjectionGroup
    o: ProjectionGroup
    gate_up: ProjectionGroup
    down: ProjectionGroup


# Code layouts the step's packed products can read (``layout``, module docstring); "rows" serves no forward.
DECODE_LAYOUTS = ("auto", "pairs", "words")
# "auto" makes the words copy where it takes at most this share of the GPU's free memory.
WORDS_COPY_MAX_FREE_FRACTION = 0.25


def auto_layout(model: nn.Module) -> str:
    """The layout ``layout="auto"`` picks for ``model``'s packed layers: "words" where the warp-specialized kernels
    run on their GPU (a Hopper) and the copy of their codes takes at most ``WORDS_COPY_MAX_FREE_FRACTION`` of its free
    memory, else "pairs"."""
    codes = [m.kernel_codes for m in model.modules() if isinstance(m, NVFP4Linear) and m.kernel_layout]
    if not codes:
        return "pairs"
    try:
        from qerl.kernels import nvfp4_gemm_ws
    except ImportError:  # no triton: the packed layers run their torch reference
        return "pairs"
    device = codes[0].device
    if not nvfp4_gemm_ws.available(device):
        return "pairs"
    free, _ = torch.cuda.mem_get_info(device)
    return "words" if sum(c.numel() for c in codes) <= WORDS_COPY_MAX_FREE_FRACTION * free else "pairs"


class DecodeStep:
    """One new token per sequence through ``model`` (see the module docstring); ``unsupported_reason`` must be None.
    Building it fuses the packed groups' storage (``qerl.fusion``, once per model); with ``layout`` "words" (or
    "auto" picking it) it also copies their codes into that layout. ``adapter_kernels``: the adapters' shrink in
    ``qerl.kernels.lora_shrink`` and B in the model's dtype (module docstring); ``shrink_reduce``: how that kernel's
    K-splits meet, "last" (deterministic) or "atomic" (``lora_shrink``'s ``reduce``); ``a_copies`` (default: with
    ``adapter_kernels``; False: none): the shrinks up to 128 rows read copies of A in the model's dtype (module
    docstring)."""

    def __init__(self, model: nn.Module, layout: str = "auto", adapter_kernels: bool = True,
                 shrink_reduce: str = "last", a_copies: bool | None = None) -> None:
        reason = unsupported_reason(model)
        if reason is not None:
            raise ValueError(f"the fused decode step does not support this model: {reason}")
        if layout not in DECODE_LAYOUTS:
            raise ValueError(f"decode layout {layout!r}: use one of {DECODE_LAYOUTS}")
        if shrink_reduce not in SHRINK_REDUCES:
            raise ValueError(f"shrink_reduce {shrink_reduce!r}: use one of {SHRINK_REDUCES}")
        if a_copies and not adapter_kernels:
            raise ValueError("a_copies come with the adapter kernels: pass adapter_kernels=True with it")
        self.layout = auto_layout(model) if layout == "auto" else layout
        b_dtype = model.get_input_embeddings().weight.dtype if adapter_kernels else None
        a_dtype = b_dtype if a_copies is not False else None  # default: copies wherever B has them
        self.model = model
        cfg = model.config
        self.heads = cfg.num_attention_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        # o_proj and down_proj as groups of one: on a packed or frozen base their adapter's expand joins the
        # product's epilogue (two kernels fewer than peft's layer, which adds a scaled second product).
        self.layers = [_Layer(layer, *(ProjectionGroup(parent, leaves, self.layout, b_dtype, adapter_kernels,
                                                       shrink_reduce, a_dtype)
                                       for parent, leaves in ((layer.self_attn, QKV), (layer.self_attn, O_PROJ),
                                                              (layer.mlp, GATE_UP), (layer.mlp, DOWN))))
                       for layer in model.model.layers]

    @torch.no_grad()
    def refresh_adapters(self) -> None:
        """Copy the adapters' current B (and A, with ``a_copies``) into the step's copies of them (where it keeps
        copies: see the module docstring), in place, so a captured step reads them. Call before each generation
        (``StaticDecoder`` does)."""
        for p in self.layers:
            for group in p[1:]:
                for copies in (group.b_copies, group.a_copies):
                    if copies is not None:
                        for held, copy in zip(*copies):
                            copy.copy_(held)

    def fused_groups(self) -> int:
        """How many of the layers' q/k/v and gate/up groups run as one product."""
        return sum((p.qkv.fused is not None) + (p.gate_up.fused is not None) for p in self.layers)

    @torch.no_grad()
    def rope_tables(self, length: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The model's rotary cos / sin for positions 0 .. length - 1, [length, D] each (its own rotary module:
        scaling variants and attention scaling included)."""
        positions = torch.arange(length, device=device)[None]
        cos, sin = self.model.model.rotary_emb(torch.zeros(1, dtype=dtype, device=device), positions)
        return cos[0].contiguous(), sin[0].contiguous()

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor, slot: torch.Tensor, starts: torch.Tensor,
                 caches: list[tuple[torch.Tensor, torch.Tensor]], cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """fp32 logits [B, V] after ``ids`` [B] at rotary ``positions`` [B], their k / v written at cache position
        ``slot`` [1] of ``caches`` (each layer's [B, KV, L, D] keys and values), attending to cache positions
        ``starts[b] .. slot``. ``cos`` / ``sin``: ``rope_tables`` of the caches' length."""
        from qerl.kernels.ops import decode_attention_op, rope_and_cache_op

        body = self.model.model
        h = body.embed_tokens(ids)
        batch = h.shape[0]
        lengths = slot + 1
        for p, (k_cache, v_cache) in zip(self.layers, caches):
            layer = p.layer
            x = layer.input_layernorm(h)
            q = rope_and_cache_op(p.qkv(x).to(k_cache.dtype), p.qkv.bias, cos, sin, positions, slot, k_cache,
                                  v_cache, self.heads)
            a = decode_attention_op(q, k_cache, v_cache, lengths, starts, float(layer.self_attn.scaling))
            h = h + p.o(a.reshape(batch, self.heads * self.head_dim), add_bias=True)
            x = layer.post_attention_layernorm(h)
            g, u = p.gate_up(x, add_bias=True).chunk(2, dim=-1)
            h = h + p.down(layer.mlp.act_fn(g) * u, add_bias=True)
        return self.model.lm_head(body.norm(h)).float()


__all__ = ["DECODE_LAYOUTS", "SUPPORTED_MODEL_TYPES", "DecodeStep", "ProjectionGroup", "auto_layout", "unsupported_reason"]

"""The NVFP4 Triton kernels on a CUDA GPU (inline-PTX and plain-Triton dequantization) against dequantize-then-matmul
in fp32. Fresh random inputs each check, odd shapes, outputs poisoned with NaN before each run."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from qerl import nvfp4  # noqa: E402
from qerl.kernels import (  # noqa: E402
    BwdConfig,
    FwdConfig,
    NVFP4MatmulFn,
    nvfp4_matmul,
    nvfp4_matmul_grad_input,
    prepare_weight,
    triton_available,
)


def _weight(n: int, k: int):
    w = torch.randn(n, k, device="cuda") * 0.02
    q = nvfp4.quantize(w)
    ref = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    return prepare_weight(q.packed, q.scale, q.global_scale), ref


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def _matmul_fp32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def test_available():
    assert triton_available("cuda")
    assert not triton_available("cpu")


FWD = [None, FwdConfig(0, 1, 64, 1, 4), FwdConfig(0, 4, 64, 1, 2), FwdConfig(1, 16, 64, 1, 4),
       FwdConfig(1, 16, 128, 2, 2), FwdConfig(2, 16, 128, 1, 4), FwdConfig(1, 64, 128, 1, 2),
       FwdConfig(2, 64, 128, 1, 1), FwdConfig(1, 128, 128, 1, 1, 8), FwdConfig(2, 128, 128, 1, 1, 8),
       FwdConfig(2, 8, 64, 1, 4, 2), FwdConfig(2, 8, 128, 2, 2, 4), FwdConfig(1, 16, 256, 1, 2, 4),
       FwdConfig(2, 8, 128, 2, 2, 4, maxnreg=128), FwdConfig(2, 64, 128, 1, 2, 8), FwdConfig(2, 64, 256, 1, 1, 8),
       FwdConfig(2, 256, 128, 1, 1, 8, 3, group_m=16),
       # Both halves of a chunk in one dot (the default of MODE 2 at BM >= 64) or in two.
       FwdConfig(2, 64, 128, 1, 2, 8, one_dot=False), FwdConfig(2, 256, 128, 1, 1, 8, 3, one_dot=False),
       FwdConfig(1, 64, 128, 1, 2, one_dot=True), FwdConfig(1, 16, 64, 1, 4, one_dot=True),
       FwdConfig(2, 8, 128, 2, 2, 4, one_dot=True)]
BWD = [None, BwdConfig(1, 16, 64, 4), BwdConfig(2, 16, 64, 2), BwdConfig(1, 64, 64, 2), BwdConfig(1, 128, 64, 1, 8),
       BwdConfig(2, 128, 64, 1, 8), BwdConfig(1, 16, 128, 4, one_dot=True), BwdConfig(1, 128, 64, 1, 8, one_dot=True)]


@pytest.mark.parametrize("asm", [True, False, 2])
@pytest.mark.parametrize("m,n,k", [(1, 4608, 3584), (5, 1000, 1040), (16, 3584, 3584), (130, 520, 784),
                                   (1024, 4608, 3584)])
def test_forward_and_grad_input_match_reference(m, n, k, asm):
    kw, ref_w = _weight(n, k)
    for cfg in FWD:
        if cfg is not None:
            if cfg.mode == 0 and cfg.bm < m:
                continue
            if (kw.k_pad // 128) % cfg.ch:  # multi-chunk steps need the chunk count to divide evenly
                cfg = cfg._replace(ch=1)
            cfg = cfg._replace(asm=asm)
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        y = nvfp4_matmul(x, kw, cfg, out=out)
        assert torch.isfinite(y).all(), f"unwritten/NaN output: {cfg}"
        err = _rel(y, _matmul_fp32(x.float(), ref_w.T))
        assert err < 1e-2, f"fwd {m}x{n}x{k} {cfg}: rel {err:.3g}"
    for cfg in BWD:
        if cfg is not None:
            cfg = cfg._replace(asm=asm)
        dy = torch.randn(m, n, device="cuda").to(torch.bfloat16)
        out = torch.full((m, k), float("nan"), device="cuda", dtype=torch.bfloat16)
        dx = nvfp4_matmul_grad_input(dy, kw, cfg, out=out)
        assert torch.isfinite(dx).all(), f"unwritten/NaN output: {cfg}"
        err = _rel(dx, _matmul_fp32(dy.float(), ref_w))
        assert err < 1e-2, f"bwd {m}x{n}x{k} {cfg}: rel {err:.3g}"


@pytest.mark.parametrize("m,n,k", [(1, 4608, 3584), (5, 1000, 1040), (130, 520, 784), (1100, 5120, 5120)])
def test_words_layout_on_the_triton_kernels_agrees_with_pairs(m, n, k):
    # The "words" layout takes the plain-Triton dequantization in these kernels: the same exact bf16 tiles as the
    # pairs layout's plain path (the dequantized rows agree bit for bit); the products agree to accumulation order
    # only (the tiles are reordered in registers and the compiler picks its own operand layouts: bitwise equality
    # held in one H200 run and failed in another). The default dispatch: the warp-specialized kernel on a Hopper
    # GPU, else these kernels or the slab path.
    from qerl.kernels.nvfp4_gemm import dequantize_rows

    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    pairs = prepare_weight(q.packed, q.scale, q.global_scale)
    words = prepare_weight(q.packed, q.scale, q.global_scale, layout="words")
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    dy = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    for cfg in (FwdConfig(1, 16, 64, 1, 4), FwdConfig(2, 8, 64, 1, 4, 2), FwdConfig(2, 64, 128, 1, 2, 8, asm=2),
                FwdConfig(0, 4, 64, 1, 2), FwdConfig(1, 16, 128, 2, 2, one_dot=True)):
        if (cfg.mode == 0 and cfg.bm < m) or (pairs.k_pad // 128) % cfg.ch:
            continue
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        y = nvfp4_matmul(x, words, cfg, out=out)
        assert torch.isfinite(y).all() and _rel(y, nvfp4_matmul(x, pairs, cfg._replace(asm=False)).float()) < 1e-3, cfg
    for bcfg in (BwdConfig(1, 16, 64, 4), BwdConfig(2, 16, 64, 2), BwdConfig(1, 64, 64, 2, one_dot=True)):
        out = torch.full((m, k), float("nan"), device="cuda", dtype=torch.bfloat16)
        dx = nvfp4_matmul_grad_input(dy, words, bcfg, out=out)
        assert torch.isfinite(dx).all()
        assert _rel(dx, nvfp4_matmul_grad_input(dy, pairs, bcfg._replace(asm=False)).float()) < 1e-3, bcfg
    assert torch.equal(dequantize_rows(words, 3, 200), dequantize_rows(pairs, 3, 200, asm=False))
    y = nvfp4_matmul(x, words)
    assert torch.isfinite(y).all() and _rel(y, _matmul_fp32(x.float(), ref_w.T)) < 1e-2
    dx = nvfp4_matmul_grad_input(dy, words)
    assert torch.isfinite(dx).all() and _rel(dx, _matmul_fp32(dy.float(), ref_w)) < 1e-2


@pytest.mark.parametrize("m,cfg", [(16, FwdConfig(1, 16, 64, 1, 1)), (64, FwdConfig(2, 64, 128, 1, 1, 8))])
def test_asm_and_plain_dequantization_agree_bitwise(m, cfg):
    # All paths feed the same exact bf16 tiles to the same dot, so the outputs must be identical.
    kw, _ = _weight(768, 1024)
    x = torch.randn(m, 1024, device="cuda").to(torch.bfloat16)
    outs = [nvfp4_matmul(x, kw, cfg._replace(asm=asm)) for asm in (True, 2, False)]
    assert torch.equal(outs[0], outs[2]) and torch.equal(outs[1], outs[2])


@pytest.mark.parametrize("m,cfg", [(64, FwdConfig(2, 64, 128, 1, 2, 8, asm=2)), (300, FwdConfig(2, 256, 128, 1, 1, 8, asm=2)),
                                   (16, FwdConfig(1, 16, 64, 1, 4)), (8, FwdConfig(2, 8, 128, 2, 2, 4))])
def test_one_dot_and_two_dots_agree(m, cfg):
    # The same exact bf16 tiles in the same k16 order: only the fp32 accumulation may differ (in the last bits).
    kw, _ = _weight(1000, 2048)
    x = torch.randn(m, 2048, device="cuda").to(torch.bfloat16)
    one, two = (nvfp4_matmul(x, kw, cfg._replace(one_dot=v)) for v in (True, False))
    assert _rel(one, two.float()) < 2e-3
    dy = torch.randn(m, 1000, device="cuda").to(torch.bfloat16)
    bcfg = BwdConfig(1, 16 if m <= 16 else 64, 64, 2)
    one, two = (nvfp4_matmul_grad_input(dy, kw, bcfg._replace(one_dot=v)) for v in (True, False))
    assert _rel(one, two.float()) < 2e-3


def test_autograd_function():
    kw, ref_w = _weight(384, 272)
    x = torch.randn(3, 7, 272, device="cuda").to(torch.bfloat16).requires_grad_(True)
    b = torch.randn(384, device="cuda").to(torch.bfloat16).requires_grad_(True)
    y = NVFP4MatmulFn.apply(x, kw, b)
    assert y.shape == (3, 7, 384) and y.dtype == torch.bfloat16
    g = torch.randn_like(y)
    y.backward(g)
    assert _rel(y.detach(), _matmul_fp32(x.detach().float(), ref_w.T) + b.detach().float()) < 1e-2
    assert _rel(x.grad, _matmul_fp32(g.float(), ref_w)) < 1e-2
    assert _rel(b.grad, g.float().sum((0, 1))) < 1e-2


def test_cuda_graph_capture():
    kw, ref_w = _weight(4608, 3584)
    x = torch.randn(8, 3584, device="cuda").to(torch.bfloat16)
    nvfp4_matmul(x, kw)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = nvfp4_matmul(x, kw)
    x.copy_(torch.randn_like(x))
    graph.replay()
    assert _rel(y, _matmul_fp32(x.float(), ref_w.T)) < 1e-2


def test_packed_linear_uses_fused_kernels_on_cuda():
    torch.manual_seed(4)
    from torch import nn

    from qerl.modules import NVFP4Linear

    lin = nn.Linear(3584, 512, bias=True)
    packed = NVFP4Linear.from_linear(lin).to("cuda", torch.bfloat16)
    dense_w = packed.dequantized_weight(torch.float32)
    packed.to_kernel_layout()
    for m in (1, 16, 300):
        x = torch.randn(m, 3584, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        y = packed(x)
        ref = x.detach().float() @ dense_w.T + packed.bias.float()
        assert ((y.float() - ref).norm() / ref.norm()).item() < 1e-2
        g = torch.randn_like(y)
        y.backward(g)
        ref_dx = g.float() @ dense_w
        assert ((x.grad.float() - ref_dx).norm() / ref_dx.norm()).item() < 1e-2
        with torch.no_grad():  # no gradient to carry: the custom op, the same kernel
            assert torch.equal(packed(x.detach()), y.detach())
    # The custom op keeps the launcher out of compiled graphs: one graph, no break (fullgraph), same result.
    compiled = torch.compile(packed, fullgraph=True)
    x = torch.randn(8, 3584, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        assert torch.equal(compiled(x), packed(x))


def test_fused_split_reduction_matches_two_kernel_reduction_and_replays():
    """The last program of each tile sums the split partials in split order, exactly like the separate reduce
    kernel; counters return to zero after every launch, so CUDA-graph replays keep giving correct results."""
    from qerl.kernels import nvfp4_gemm

    kw, ref_w = _weight(4608, 3584)
    for m in (1, 16, 40):
        x = torch.randn(m, 3584, device="cuda").to(torch.bfloat16)
        fused = nvfp4_matmul(x, kw, FwdConfig(1, 16, 64, 1, 7))
        two = nvfp4_matmul(x, kw, FwdConfig(1, 16, 64, 1, 7, fused=False))
        assert torch.equal(fused, two)
        dy = torch.randn(m, 4608, device="cuda").to(torch.bfloat16)
        assert torch.equal(nvfp4_matmul_grad_input(dy, kw, BwdConfig(1, 16, 64, 9)),
                           nvfp4_matmul_grad_input(dy, kw, BwdConfig(1, 16, 64, 9, fused=False)))
    x = torch.randn(8, 3584, device="cuda").to(torch.bfloat16)
    cfg = FwdConfig(1, 16, 64, 1, 4)
    nvfp4_matmul(x, kw, cfg)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = nvfp4_matmul(x, kw, cfg)
    for _ in range(5):
        x.copy_(torch.randn_like(x))
        graph.replay()
        assert _rel(y, _matmul_fp32(x.float(), ref_w.T)) < 1e-2
    torch.cuda.synchronize()
    assert all(int(c.abs().sum()) == 0 for c in nvfp4_gemm._COUNTERS.values())


def test_large_m_slabs_overlap_on_a_second_stream(monkeypatch):
    """Slabs dequantized on a side stream into two alternating buffers give exactly the one-stream result (same
    dequantized slabs, same cuBLAS products), also inside a captured CUDA graph."""
    from qerl.kernels import nvfp4_gemm as kern

    monkeypatch.setattr(kern, "SCRATCH_ELEMENTS", 256 * 1040)  # 1000 rows of K = 1040: four slabs
    monkeypatch.setattr(kern, "SLAB_MIN_FLOP", 0.0)  # a product this small would otherwise stay on the tile loop
    monkeypatch.setattr(kern, "OVERLAP_MIN_FLOP", 0.0)
    kw, ref_w = _weight(1000, 1040)
    x = torch.randn(kern.LARGE_M_FWD + 5, 1040, device="cuda").to(torch.bfloat16)
    results = {}
    for overlap in (True, False):
        monkeypatch.setattr(kern, "OVERLAP_SLABS", overlap)
        results[overlap] = nvfp4_matmul(x, kw)
    assert _rel(results[True], _matmul_fp32(x.float(), ref_w.T)) < 1e-2
    assert torch.equal(results[True], results[False])

    monkeypatch.setattr(kern, "OVERLAP_SLABS", True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = nvfp4_matmul(x, kw)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert _rel(y, _matmul_fp32(x.float(), ref_w.T)) < 1e-2


def test_dequantize_rows_program_orders_agree():
    """The slab dequantization's two program orders (along the rows, along K) write the same bits, on a ragged
    row range and a partial last chunk, and match the codec."""
    from qerl.kernels.nvfp4_gemm import dequantize_rows

    kw, ref_w = _weight(1000, 1040)
    along_k = dequantize_rows(kw, 3, 900, chunks_first=True)
    assert torch.equal(along_k, dequantize_rows(kw, 3, 900, chunks_first=False))
    block = dequantize_rows(kw, 0, 1000, chunks_first=True, chunk0=2, chunks=7)  # K columns 256-1039
    assert torch.equal(block[3:903], along_k[:, 256:])
    assert _rel(along_k, ref_w[3:903]) < 1e-2 and torch.isfinite(along_k).all()


def test_input_gradient_slab_plans_agree(monkeypatch):
    """The input gradient on row slabs (accumulated) and on column slabs (each its own columns of dX), one stream or
    overlapped: the fp32 reference within bf16 rounding, and the column slabs the same bits with or without the
    second stream, also inside a captured CUDA graph."""
    from qerl.kernels import nvfp4_gemm as kern

    monkeypatch.setattr(kern, "SCRATCH_ELEMENTS", 256 * 1040)
    kw, ref_w = _weight(1000, 1040)  # K = 1040: nine chunks, the last one partial
    dy = torch.randn(kern.LARGE_M_BWD + 7, 1000, device="cuda").to(torch.bfloat16)
    ref = _matmul_fp32(dy.float(), ref_w)
    got = {}
    for along in ("n", "k"):
        for overlap in (False, True):
            for count in (1, 3):
                dx = torch.full((dy.shape[0], 1040), float("nan"), device="cuda", dtype=torch.bfloat16)
                plan = kern.SlabPlan(along, count, overlap)
                got[along, overlap, count] = kern._grad_input_large_m(dy, kw, dx, plan)
                assert torch.isfinite(dx).all() and _rel(dx, ref) < 1e-2, (along, overlap, count)
    assert torch.equal(got["k", True, 3], got["k", False, 3])
    assert torch.equal(got["n", True, 3], got["n", False, 3])
    graph = torch.cuda.CUDAGraph()
    dx = torch.empty((dy.shape[0], 1040), device="cuda", dtype=torch.bfloat16)
    with torch.cuda.graph(graph):
        kern._grad_input_large_m(dy, kw, dx, kern.SlabPlan("k", 3, True))
    for _ in range(3):
        dy.copy_(torch.randn_like(dy))
        graph.replay()
        torch.cuda.synchronize()
        assert _rel(dx, _matmul_fp32(dy.float(), ref_w)) < 1e-2


def test_split_reduction_without_counters_during_capture_uses_the_reduce_kernel(monkeypatch):
    """A graph captured before the counter buffer exists cannot allocate it inside the capture: that launch sums
    its partials with the separate reduce kernel instead, and the graph still computes the right product."""
    from qerl.kernels import nvfp4_gemm as kern

    kw, ref_w = _weight(4608, 3584)
    x = torch.randn(8, 3584, device="cuda").to(torch.bfloat16)
    cfg = FwdConfig(1, 16, 64, 1, 4)
    nvfp4_matmul(x, kw, cfg)  # compile both variants outside the capture
    nvfp4_matmul(x, kw, cfg._replace(fused=False))
    monkeypatch.setattr(kern, "_COUNTERS", {})
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = nvfp4_matmul(x, kw, cfg)
    assert kern._COUNTERS == {}
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    assert _rel(y, _matmul_fp32(x.float(), ref_w.T)) < 1e-2


def _lora_case(m: int, slices: tuple[int, ...], k: int, r: int):
    """A weight, input, bias and LoRA epilogue (u with one adapter-less token) plus their fp32 reference."""
    from qerl.kernels.nvfp4_gemm import LoRAEpilogue

    kw, ref_w = _weight(sum(slices), k)
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    u = torch.randn(len(slices), m, r, device="cuda")
    u[:, m // 2] = 0.0
    bs = tuple((torch.randn(s, r, device="cuda") * 0.05).to(torch.bfloat16) for s in slices)
    bias = torch.randn(sum(slices), device="cuda").to(torch.bfloat16)
    lora = LoRAEpilogue(u, bs)

    def reference() -> torch.Tensor:
        expand = torch.cat([_matmul_fp32(u[i], bs[i].float().T) for i in range(len(slices))], dim=1)
        return _matmul_fp32(x.float(), ref_w.T) + bias.float() + expand

    return kw, x, bias, lora, reference


LORA_FWD = [None, FwdConfig(2, 8, 128, 2, 4, 4), FwdConfig(2, 8, 64, 1, 8, 2), FwdConfig(1, 16, 64, 1, 4),
            FwdConfig(0, 1, 64, 1, 4), FwdConfig(1, 64, 128, 1, 2), FwdConfig(2, 16, 128, 1, 1),
            FwdConfig(1, 16, 64, 1, 4, fused=False), FwdConfig(2, 64, 128, 1, 2, 8, asm=2),
            FwdConfig(2, 128, 128, 1, 1, 8, asm=2), FwdConfig(2, 8, 32, 1, 4, 1)]


@pytest.mark.parametrize("m", [1, 8, 64, 1100])
def test_bias_and_lora_on_the_words_layout_match_reference(m):
    """The default dispatch on a words-layout weight (warp-specialized kernel on a Hopper GPU, then the epilogue
    kernel; the slab path at M = 1100) with the bias and a q/k/v adapter."""
    from qerl.kernels import nvfp4_gemm

    kw, x, bias, lora, reference = _lora_case(m, (1024, 256, 256), 1264, 32)
    words = nvfp4_gemm.prepare_weight(*nvfp4_gemm.codec_from_kernel_weight(kw), kw.global_scale, layout="words")
    out = torch.full((m, kw.n), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = nvfp4_matmul(x, words, out=out, bias=bias, lora=lora)
    assert torch.isfinite(y).all() and _rel(y, reference()) < 1e-2


@pytest.mark.parametrize("r", [32, 8])
@pytest.mark.parametrize("m", [1, 8, 16, 64, 200, 1100])
def test_bias_and_lora_epilogue_match_reference(m, r):
    """q/k/v-like slices (inner ends on 128-column tiles): the bias and the adapter's expand added in the kernel's
    epilogue (or after it where the tiles do not allow: large M) equal the fp32 reference."""
    from qerl.kernels.nvfp4_gemm import _lora_fits

    kw, x, bias, lora, reference = _lora_case(m, (1024, 256, 256), 1264, r)  # 10 chunks, K not a multiple of 128
    ref = reference()
    in_kernel = []
    for cfg in LORA_FWD:
        if cfg is not None and ((cfg.mode == 0 and cfg.bm < m) or (kw.k_pad // 128) % cfg.ch):
            continue
        out = torch.full((m, kw.n), float("nan"), device="cuda", dtype=torch.bfloat16)
        y = nvfp4_matmul(x, kw, cfg, out=out, bias=bias, lora=lora)
        assert torch.isfinite(y).all(), f"unwritten/NaN output: {cfg}"
        err = _rel(y, ref)
        assert err < 1e-2, f"m={m} r={r} {cfg}: rel {err:.3g}"
        if cfg is not None:
            in_kernel.append(_lora_fits(lora, m, kw.n, cfg.bn))
    assert m >= 1024 or all(in_kernel), "the q/k/v slice ends lie on tile ends: the kernel must take the epilogue"


@pytest.mark.parametrize("slices,r", [((1024, 256, 256), 32), ((384, 384), 8), ((512,), 64), ((192, 64, 64), 320)])
@pytest.mark.parametrize("m", [1, 7, 16, 33, 200, 300])
def test_bias_and_lora_after_the_gemm_in_one_kernel(m, slices, r):
    """``add_bias_and_lora_`` (the epilogue after a GEMM that did not take it: the warp-specialized kernel, the words
    layout): one kernel up to EPILOGUE_KERNEL_MAX_M rows, torch above; both equal the fp32 reference, in place."""
    from qerl.kernels.nvfp4_gemm import EPILOGUE_KERNEL_MAX_M, LoRAEpilogue, add_bias_and_lora_

    n = sum(slices)
    y0 = torch.randn(m, n, device="cuda").to(torch.bfloat16)
    u = torch.randn(len(slices), m, r, device="cuda")
    bs = tuple((torch.randn(s, r, device="cuda") * 0.05).to(torch.bfloat16) for s in slices)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    expand = torch.cat([_matmul_fp32(u[i].to(torch.bfloat16).float(), bs[i].float().T) for i in range(len(slices))],
                       dim=1)
    for with_bias, with_lora in ((True, True), (False, True), (True, False)):
        y = y0.clone()
        out = add_bias_and_lora_(y, bias if with_bias else None, LoRAEpilogue(u, bs) if with_lora else None)
        assert out.data_ptr() == y.data_ptr()
        ref = y0.float() + (bias.float() if with_bias else 0) + (expand if with_lora else 0)
        assert _rel(y, ref) < 6e-3, (m, slices, r, with_bias, with_lora)  # bf16 output: about 2e-3
    assert m > EPILOGUE_KERNEL_MAX_M or not torch.equal(y, y0)


@pytest.mark.parametrize("m, split", [(1, 2), (33, 7), (64, 4), (200, 3)])
def test_split_sum_with_the_bias_and_lora_after_it_in_one_kernel(m, split):
    """``nvfp4_gemm._reduce`` with an epilogue (split partials summed by a second kernel, then a bias and an expand
    the product did not take: the warp-specialized kernel at M = 64 on 7B's o / down): one launch sums the partials,
    adds both and rounds once; against the fp32 reference and the two-launch path (sum rounded, then the epilogue)."""
    from qerl.kernels.nvfp4_gemm import LoRAEpilogue, _reduce, add_bias_and_lora_

    slices, r = (3584,), 32
    n = sum(slices)
    ws = torch.randn(split, m, n, device="cuda")
    u = torch.randn(len(slices), m, r, device="cuda")
    bs = tuple((torch.randn(s, r, device="cuda") * 0.05).to(torch.bfloat16) for s in slices)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    lora = LoRAEpilogue(u, bs)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    _reduce(ws, out, split, bias, lora)
    ref = ws.sum(0) + bias.float() + _matmul_fp32(u[0].to(torch.bfloat16).float(), bs[0].float().T)
    assert _rel(out, ref) < 6e-3
    two = add_bias_and_lora_(ws.sum(0).to(torch.bfloat16), bias, lora)
    assert (out.float() - two.float()).abs().max() <= 2 * ref.abs().max() * 2**-8  # one bf16 rounding apart


def test_lora_epilogue_op_in_a_cuda_graph_reads_the_adapter_in_place():
    """What vLLM does: the graph is captured once, then adapter loads refill B in place and each step's shrink
    writes u; replays must use the current values (the op reads the tensors, not copies)."""
    from qerl.kernels.ops import nvfp4_lora_linear

    kw, x, bias, lora, reference = _lora_case(8, (2048, 2048), 1024, 32)
    args = (kw.codes, kw.scales, kw.global_scale, kw.n, kw.k, bias, lora.u, list(lora.b), torch.tensor([False]))
    nvfp4_lora_linear(x, *args)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = nvfp4_lora_linear(x, *args)
    for seed in range(3):
        torch.manual_seed(seed)
        x.copy_(torch.randn_like(x))
        lora.u.copy_(torch.randn_like(lora.u))
        for b in lora.b:
            b.copy_(torch.randn_like(b) * 0.05)
        graph.replay()
        torch.cuda.synchronize()
        assert _rel(y, reference()) < 1e-2


@pytest.mark.parametrize("sizes", [(3584, 512, 512), (18944, 18944)])
def test_fused_members_read_through_their_views_as_through_copies(sizes):
    """q / k / v (and gate / up) moved into one allocation by ``qerl.fusion``: each member's scales are a column
    slice of the group's scale rows (a row stride larger than its own N * 8), which every kernel must honour. Every
    member's forward and input gradient on its views equal, bit for bit, the same kernels on contiguous copies (M
    from decode to prefill sizes, so the warp-specialized kernels run on them too), and the group's one product
    matches the reference."""
    from torch import nn

    from qerl.fusion import fuse_siblings
    from qerl.kernels import KernelWeight
    from qerl.kernels import nvfp4_gemm_ws as ws
    from qerl.modules import NVFP4Linear

    k = 3584
    leaves = ("q_proj", "k_proj", "v_proj") if len(sizes) == 3 else ("gate_proj", "up_proj")
    dense = [torch.randn(n, k, device="cuda") * 0.02 for n in sizes]
    shared = nvfp4.global_scale_for(dense)
    parent = nn.Module()
    for leaf, w in zip(leaves, dense):
        linear = nn.Linear(k, w.shape[0], bias=False, device="cuda")
        linear.weight.data.copy_(w)
        setattr(parent, leaf, NVFP4Linear.from_linear(linear, shared))
        getattr(parent, leaf).to_kernel_layout()
    fused = fuse_siblings(parent, leaves)
    assert fused is not None and fused.sizes == sizes
    members = [getattr(parent, leaf).kernel_weight() for leaf in leaves]
    assert all(w.scales.stride(0) == sum(sizes) * 8 for w in members)
    ran_ws = False
    for m in (1, 8, 64, 256, 1029):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        for w in members:
            own = KernelWeight(w.codes.clone(), torch.empty(w.scales.shape, dtype=torch.uint8, device="cuda")
                               .copy_(w.scales), w.global_scale, w.n, w.k, w.layout)
            ran_ws |= ws.pick(x, w.n, w.k, w.k_pad, w.words) is not None
            out = torch.full((m, w.n), float("nan"), device="cuda", dtype=torch.bfloat16)
            dy = torch.randn(m, w.n, device="cuda").to(torch.bfloat16)
            for direction, view_out, copies in (
                    ("fwd", nvfp4_matmul(x, w, out=out), [nvfp4_matmul(x, own) for _ in range(2)]),
                    ("bwd", nvfp4_matmul_grad_input(dy, w), [nvfp4_matmul_grad_input(dy, own) for _ in range(2)])):
                where = (direction, m, w.n)
                assert torch.isfinite(view_out).all(), where
                if torch.equal(copies[0], copies[1]):  # a deterministic launch: the views give the same bits
                    diff = (view_out.float() - copies[0].float()).abs().max().item()
                    assert torch.equal(view_out, copies[0]), (*where, diff)
                else:  # split parts summed in arrival order: rounding apart at most
                    assert _rel(view_out, copies[0].float()) < 1e-2, where
        ref = _matmul_fp32(x.float(), torch.cat([NVFP4Linear.dequantized_weight(getattr(parent, leaf), torch.float32)
                                                 for leaf in leaves]).T)
        got = nvfp4_matmul(x, fused.weight)
        assert torch.isfinite(got).all() and _rel(got, ref) < 1e-2, m
    if len(sizes) == 3 and ws.available(torch.device("cuda")):
        assert ran_ws  # q has o_proj's shape, which the tables cover: its views went through the TMA descriptors

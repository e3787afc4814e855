"""The LoRA shrink kernel (``qerl.kernels.lora_shrink``): under Triton's CPU interpreter on small odd shapes, and on a
CUDA GPU (marked ``gpu``) on Qwen2.5-7B's shapes, in and out of CUDA graphs, against the fp32 torch reference."""

from __future__ import annotations

import pytest
import torch

from qerl.kernels.ops import lora_shrink_op, lora_shrink_reference
from tests.conftest import run_interpreted

triton = pytest.importorskip("triton")

_SCRIPT = r"""
import json, os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from qerl.kernels import nvfp4_gemm
from qerl.kernels.lora_shrink import lora_shrink
from qerl.kernels.ops import lora_shrink_reference

seed = int.from_bytes(os.urandom(4), "little")
gen = torch.Generator().manual_seed(seed)
results = []
# (M, K, R, slices, A's dtype, programs, reduce, other arguments): rows past one 16-row block, K not a multiple of
# the K step, ranks not a power of two, one to three slices, each way the splits meet (one split only: "store"),
# blocks of fewer rows than M, fewer splits than the programs ask for; A in x's bf16 (multiplied as it is) or in
# fp16 (cast to fp32 with x).
for m, k, r, s, dtype, programs, reduce, kw in [
        (5, 80, 4, 3, torch.float32, None, "atomic", {}), (1, 144, 16, 1, torch.float32, 3, "last", {}),
        (20, 200, 12, 2, torch.bfloat16, 4, "atomic", {}), (8, 384, 32, 3, torch.float32, None, "last", {}),
        (17, 96, 8, 1, torch.float32, 1, "atomic", {}), (33, 48, 64, 2, torch.float32, 5, "last", {}),
        (40, 520, 8, 2, torch.float32, 64, "last", {"block_m": 16, "max_splits": 2}),
        (70, 260, 4, 1, torch.float32, 16, "atomic", {"block_m": 32}),
        (24, 300, 16, 3, torch.bfloat16, 8, "last", {}), (9, 112, 8, 1, torch.float16, None, "atomic", {})]:
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    a = [(torch.randn(r, k, generator=gen) * 0.1).to(dtype) for _ in range(s)]
    scales = torch.rand(s, generator=gen) + 0.5
    u = lora_shrink(x, a, scales, programs=programs, reduce=reduce, **kw)
    ref = lora_shrink_reference(x, a, scales)
    results.append({"case": [m, k, r, s, str(dtype), programs, reduce, kw], "shape": list(u.shape),
                    "want": list(ref.shape), "err": float((u - ref).abs().max() / ref.abs().max()),
                    "finite": bool(torch.isfinite(u).all())})
counters = nvfp4_gemm._COUNTERS.get(("cpu", None))
print(json.dumps({"seed": seed, "results": results,
                  "counters": None if counters is None else int(counters.abs().sum())}))
"""


def test_shrink_kernel_matches_reference_under_interpreter():
    report = run_interpreted(_SCRIPT)
    assert len(report["results"]) == 10
    assert report["counters"] == 0, "the split sums must use the tile counters and leave them zero"
    for r in report["results"]:
        where = f"{r['case']} (seed {report['seed']})"
        assert r["shape"] == r["want"] and r["finite"], where
        assert r["err"] < 1e-5, f"max error {r['err']:.3g}: {where}"  # fp32 sums in another order


def test_shrink_multiplies_16_bit_operands_of_one_dtype_as_they_are(monkeypatch):
    """x and A both bf16 (or both fp16): the kernel's dot on them as loaded (``CAST`` off); any other pair, or fp32
    A, is cast to fp32 and multiplied at ``precision``."""
    from qerl.kernels import lora_shrink as mod

    launches = []

    class Recorder:  # stands in for the jitted kernel: records the launch's constexprs
        def __getitem__(self, grid):
            return lambda *args, **kw: launches.append(kw)

    monkeypatch.setattr(mod, "_lora_shrink_kernel", Recorder())
    x = torch.randn(20, 64)
    pairs = [(torch.bfloat16, torch.bfloat16, False), (torch.float16, torch.float16, False),
             (torch.bfloat16, torch.float32, True), (torch.bfloat16, torch.float16, True),
             (torch.float32, torch.float32, True)]
    for x_dtype, a_dtype, cast in pairs:
        mod.lora_shrink(x.to(x_dtype), [torch.randn(8, 64).to(a_dtype)], torch.ones(1), reduce="atomic")
        assert launches[-1]["CAST"] is cast, (x_dtype, a_dtype)
        assert mod.multiplies_natively(x_dtype, a_dtype) is not cast


def test_shrink_refuses_what_it_cannot_compute():
    from qerl.kernels.lora_shrink import lora_shrink

    x = torch.randn(4, 64)
    a = torch.randn(8, 64)
    scales = torch.ones(1)
    with pytest.raises(ValueError, match="1 to 3"):
        lora_shrink(x, [a] * 4, torch.ones(4))
    with pytest.raises(ValueError, match=r"contiguous \[8, 64\]"):
        lora_shrink(x, [a, torch.randn(8, 32)], torch.ones(2))
    with pytest.raises(ValueError, match="unit last stride"):
        lora_shrink(x.T.contiguous().T, [a], scales)
    with pytest.raises(ValueError, match=r"fp32 \[1\]"):
        lora_shrink(x, [a], torch.ones(1, dtype=torch.float64))
    with pytest.raises(ValueError, match="reduce 'tree'"):
        lora_shrink(x, [a], scales, reduce="tree")
    with pytest.raises(ValueError, match="block_m 8"):
        lora_shrink(x, [a], scales, block_m=8)
    with pytest.raises(ValueError, match="reduce 'store'"):  # the kernel's mode for a single split, not a choice
        lora_shrink(x, [a], scales, reduce="store")


def test_op_on_cpu_is_the_reference_and_traces_under_compile():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 40, generator=gen).to(torch.bfloat16)
    a = [torch.randn(4, 40, generator=gen) for _ in range(2)]
    scales = torch.tensor([0.5, 2.0])
    want = torch.stack([(x.float() @ t.T) * s for t, s in zip(a, scales)])
    assert torch.equal(lora_shrink_op(x, a, scales), lora_shrink_reference(x, a, scales))
    torch.testing.assert_close(lora_shrink_op(x, a, scales), want)
    compiled = torch.compile(lambda x, a0, a1: lora_shrink_op(x, [a0, a1], scales) + 1, fullgraph=True)
    torch.testing.assert_close(compiled(x, *a), want + 1)


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _case(m: int, k: int, r: int, slices: int, dtype: torch.dtype):
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    a = [(torch.randn(r, k, device="cuda") * 0.05).to(dtype) for _ in range(slices)]
    scales = torch.rand(slices, device="cuda") + 0.5
    return x, a, scales


def _reference(x, a, scales) -> torch.Tensor:
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 reference
    try:
        return lora_shrink_reference(x, a, scales)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("m", [1, 8, 16, 64, 128])
@pytest.mark.parametrize("k,r,slices,dtype", [(3584, 32, 3, torch.float32), (3584, 32, 2, torch.float32),
                                              (18944, 32, 1, torch.float32), (3584, 64, 3, torch.bfloat16),
                                              (18944, 32, 1, torch.bfloat16), (1000, 12, 2, torch.float32)])
def test_shrink_kernel_matches_reference_on_gpu(m, k, r, slices, dtype):
    from qerl.kernels.lora_shrink import lora_shrink

    x, a, scales = _case(m, k, r, slices, dtype)
    u = lora_shrink(x, a, scales)
    ref = _reference(x, a, scales)
    assert u.shape == ref.shape and torch.isfinite(u).all()
    err = float((u - ref).abs().max() / ref.abs().max())
    assert err < 1e-5, (m, k, r, slices, dtype, err)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("reduce", ["atomic", "last"])
def test_shrink_in_a_cuda_graph_reads_x_and_a_in_place_and_leaves_the_counters_zero(reduce):
    """As the decode step's captured graph uses it: x and A refilled in place between replays (the optimizer updates
    A in place), the split sums correct on every replay (the atomic adds' u zeroed each time; the last program's
    tile counters back at zero after each)."""
    from qerl.kernels import nvfp4_gemm, reserve_split_counters
    from qerl.kernels.lora_shrink import lora_shrink

    reserve_split_counters(torch.device("cuda"))
    x, a, scales = _case(8, 18944, 32, 1, torch.float32)
    lora_shrink(x, a, scales, reduce=reduce)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        u = lora_shrink(x, a, scales, reduce=reduce)
    counters = nvfp4_gemm._COUNTERS[("cuda", torch.cuda.current_device())]
    for seed in range(3):
        torch.manual_seed(seed)
        x.copy_(torch.randn_like(x))
        a[0].copy_(torch.randn_like(a[0]) * 0.05)
        graph.replay()
        torch.cuda.synchronize()
        err = float((u - _reference(x, a, scales)).abs().max() / u.abs().max())
        assert err < 1e-5, (seed, err)
        assert int(counters.abs().sum()) == 0


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("reduce", ["atomic", "last"])
@pytest.mark.parametrize("programs", [64, 512])
@pytest.mark.parametrize("block_m, max_splits", [(None, None), (16, 8)])
def test_every_reduce_mode_and_program_count_matches_reference_on_gpu(reduce, programs, block_m, max_splits):
    from qerl.kernels.lora_shrink import lora_shrink

    for m, k, slices in ((8, 3584, 3), (64, 18944, 1), (1, 3584, 2), (100, 3584, 2)):
        x, a, scales = _case(m, k, 32, slices, torch.float32)
        u = lora_shrink(x, a, scales, programs=programs, reduce=reduce, block_m=block_m, max_splits=max_splits)
        err = float((u - _reference(x, a, scales)).abs().max() / u.abs().max())
        assert err < 1e-5, (m, k, slices, err)

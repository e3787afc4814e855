"""Programmatic dependent launch (``qerl.kernels.launch``): off unless asked for, never on the CPU or under Triton's
interpreter; on a Hopper GPU the PDL launches of the forward GEMM and the decode-step kernels give the same bits as
plain launches inside a CUDA graph in which the kernel just before each one writes its input."""

from __future__ import annotations

import pytest
import torch

from qerl.kernels import launch


@pytest.fixture
def pdl_switch():
    saved = launch._ENABLED
    yield
    launch.set_programmatic_launch(saved)


def test_off_by_default_and_never_on_the_cpu(pdl_switch, monkeypatch):
    launch.set_programmatic_launch(False)
    assert not launch.programmatic_launch(torch.device("cpu"))
    launch.set_programmatic_launch(True)
    assert not launch.programmatic_launch(torch.device("cpu"))
    if torch.cuda.is_available():
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        assert not launch.programmatic_launch(torch.device("cuda"))


def _hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


def _graph(fn):
    """A CUDA graph of ``fn`` (warmed up once on a side stream first)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def _replays(fn_for, inputs: list[torch.Tensor]) -> dict:
    """{pdl: [outputs]}: for PDL off and on, a graph of ``fn_for(src)`` (``src`` a buffer the graph reads) replayed
    once per input."""
    out = {}
    for on in (False, True):
        launch.set_programmatic_launch(on)
        src = torch.empty_like(inputs[0])
        result, fn = fn_for(src)
        graph = _graph(fn)
        got = []
        for value in inputs:
            src.copy_(value)
            result.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            got.append(result.clone())
        out[on] = got
        del graph
    return out


@pytest.mark.gpu
@pytest.mark.skipif(not _hopper(), reason="needs a Hopper GPU")
@pytest.mark.parametrize("m", [1, 8, 16])
def test_forward_with_programmatic_launch_gives_the_same_bits(pdl_switch, m):
    pytest.importorskip("triton.experimental.gluon")
    from qerl import nvfp4
    from qerl.kernels import nvfp4_matmul, prepare_weight

    for n, k in ((4608, 3584), (3584, 18944)):  # 7B qkv and down (split-K partials summed in the kernel)
        q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
        w = prepare_weight(q.packed, q.scale, q.global_scale, layout="words")
        ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
        inputs = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(3)]

        def fn_for(src, w=w, m=m, n=n, k=k):
            x = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
            y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

            def step():
                x.copy_(src * 2.0)  # the kernel just before the GEMM writes its input
                y.copy_(nvfp4_matmul(x, w))
            return y, step

        got = _replays(fn_for, inputs)
        for value, plain, pdl in zip(inputs, got[False], got[True]):
            assert torch.equal(plain, pdl), (n, k, m)
            ref = (value.float() * 2.0) @ ref_w.T
            assert float((pdl.float() - ref).norm() / ref.norm()) < 1e-2, (n, k, m)


@pytest.mark.gpu
@pytest.mark.skipif(not _hopper(), reason="needs a Hopper GPU")
@pytest.mark.parametrize("batch,cache", [(8, 385), (1, 2049)])  # one slice; eight slices and the merge kernel
def test_decode_step_with_programmatic_launch_gives_the_same_bits(pdl_switch, batch, cache):
    from qerl.kernels.decode_attention import decode_attention, rope_and_cache

    h, kv, d = 28, 4, 128
    bias = torch.randn((h + 2 * kv) * d, device="cuda", dtype=torch.bfloat16)
    ang = torch.arange(cache, device="cuda")[:, None].float() * torch.rand(d // 2, device="cuda")[None]
    cos = torch.cat([ang.cos(), ang.cos()], -1).bfloat16()
    sin = torch.cat([ang.sin(), ang.sin()], -1).bfloat16()
    k0 = torch.randn(batch, kv, cache, d, device="cuda", dtype=torch.bfloat16)
    v0 = torch.randn_like(k0)
    pos = torch.tensor([cache - 2], device="cuda")
    inputs = [torch.randn(batch, (h + 2 * kv) * d, device="cuda", dtype=torch.bfloat16) for _ in range(3)]

    def fn_for(src):
        kc, vc = k0.clone(), v0.clone()
        qkv = torch.empty_like(src)
        out = torch.empty(batch, h * d, device="cuda", dtype=torch.bfloat16)

        def step():
            qkv.copy_(src + 1.0)  # the projection before writes qkv
            q = rope_and_cache(qkv, bias, cos, sin, pos, kc, vc, h)
            out.copy_(decode_attention(q, kc, vc, pos + 1).reshape(batch, h * d) * 0.5)
        return out, step

    got = _replays(fn_for, inputs)
    for plain, pdl in zip(got[False], got[True]):
        assert torch.isfinite(pdl).all()
        assert torch.equal(plain, pdl)

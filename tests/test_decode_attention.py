"""The Triton decode-step kernels (``qerl.kernels.decode_attention``) against fp32 torch: attention against
per-sequence softmax attention, the bias + rotary + cache write against the same steps in torch; under Triton's CPU
interpreter on small shapes, and on the GPU at the Qwen2.5-7B head shape with outputs poisoned, lengths and positions
changing under a captured CUDA graph."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from qerl.kernels.decode_attention import (  # noqa: E402
    decode_attention,
    decode_attention_reference,
    decode_attention_splits,
    rope_and_cache,
    rope_and_cache_reference,
)
from tests.conftest import capture_graph, run_interpreted  # noqa: E402

# Runs in a subprocess: the interpreter must be switched on before triton is imported.
_SCRIPT = r"""
import json, os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from qerl.kernels.decode_attention import decode_attention, decode_attention_reference
seed = int.from_bytes(os.urandom(4), "little")
gen = torch.Generator().manual_seed(seed)
cases = [
    # batch, query heads, KV heads, head dim, cache length, lengths, splits, block, starts (left padding)
    (2, 6, 2, 16, 40, [1, 37], 1, 16, None),      # one slice: the first kernel writes the output
    (2, 6, 2, 16, 40, [1, 37], 4, 16, None),      # length 1: three of four slices past the length
    (3, 7, 1, 32, 70, [70], 2, 16, None),         # a group of 7 heads (padded to 16 rows), one length for all
    (2, 28, 4, 32, 129, [129, 64], 2, 32, None),  # 7B's head grouping; a length on a slice boundary
    (1, 4, 4, 16, 33, [17], 8, 16, None),         # no grouping; more slices than blocks up to the length
    (3, 6, 2, 16, 40, [40], 1, 16, [0, 5, 39]),   # pads skipped; a row whose only position is the last
    (3, 6, 2, 16, 40, [40], 4, 16, [0, 21, 33]),  # whole slices before a row's start
]
results = []
for b, h, kv, d, cache, lens, splits, block, starts in cases:
    q = torch.randn(b, h, d, generator=gen).bfloat16()
    k = torch.randn(b, kv, cache, d, generator=gen).bfloat16()
    v = torch.randn(b, kv, cache, d, generator=gen).bfloat16()
    ln = torch.tensor(lens, dtype=torch.int32)
    st = None if starts is None else torch.tensor(starts)
    out = decode_attention(q, k, v, ln, splits=splits, block_n=block, starts=st)
    ref = decode_attention_reference(q, k, v, ln, starts=st)
    # Positions past the length and before the start must not matter: overwrite them and run again.
    k2, v2 = k.clone(), v.clone()
    for i, n in enumerate(lens * b if len(lens) == 1 else lens):
        k2[i, :, n:] = 1e4
        v2[i, :, n:] = float("nan")
        if starts is not None:
            k2[i, :, :starts[i]] = 1e4
            v2[i, :, :starts[i]] = float("nan")
    out2 = decode_attention(q, k2, v2, ln, splits=splits, block_n=block, starts=st)
    results.append({"case": [b, h, kv, d, cache, lens, splits, block, starts], "shape_ok": list(out.shape) == [b, h, d],
                    "rel": float((out.float() - ref).norm() / ref.norm()), "same_past_length": bool(torch.equal(out, out2))})

from qerl.kernels.decode_attention import rope_and_cache, rope_and_cache_reference
rope = []
for b, h, kv, d, cache, positions, bias, slots in [
        (3, 6, 2, 16, 20, [7], True, None), (3, 6, 2, 16, 20, [0, 5, 19], False, None), (2, 7, 1, 32, 9, [8], True, None),
        (3, 6, 2, 16, 20, [0, 5, 11], True, [17])]:  # left padding: rows' own positions, one cache slot
    qkv = torch.randn(b, (h + 2 * kv) * d, generator=gen).bfloat16()
    bvec = torch.randn((h + 2 * kv) * d, generator=gen).bfloat16() if bias else None
    ang = torch.arange(cache)[:, None].float() * torch.rand(d // 2, generator=gen)[None]
    cos = torch.cat([ang.cos(), ang.cos()], -1).bfloat16()
    sin = torch.cat([ang.sin(), ang.sin()], -1).bfloat16()
    pos = torch.tensor(positions)
    kc = torch.randn(b, kv, cache, d, generator=gen).bfloat16()
    vc = torch.randn(b, kv, cache, d, generator=gen).bfloat16()
    kr, vr = kc.clone(), vc.clone()
    sl = None if slots is None else torch.tensor(slots)
    q = rope_and_cache(qkv, bvec, cos, sin, pos, kc, vc, h, slots=sl)
    qr = rope_and_cache_reference(qkv, bvec, cos, sin, pos, kr, vr, h, slots=sl)
    written = torch.zeros(b, kv, cache, dtype=torch.bool)
    where = positions if slots is None else slots
    for i, n in enumerate(where * b if len(where) == 1 else where):
        written[i, :, n] = True
    rope.append({"case": [b, h, kv, d, cache, positions, bias, slots],
                 "q_rel": float((q.float() - qr.float()).norm() / qr.float().norm()),
                 "k_rel": float((kc.float() - kr.float()).norm() / kr.float().norm()),
                 "v_rel": float((vc.float() - vr.float()).norm() / vr.float().norm()),
                 "rest_untouched": bool(torch.equal(kc[~written], kr[~written]))})
print(json.dumps({"seed": seed, "results": results, "rope": rope}))
"""


def test_decode_attention_matches_reference_under_interpreter():
    report = run_interpreted(_SCRIPT)
    assert len(report["results"]) == 7
    for r in report["results"]:
        where = f"case {r['case']} (seed {report['seed']})"
        assert r["shape_ok"], where
        # bf16 rounding of the probabilities fed to the second dot and of the output.
        assert r["rel"] < 2e-2, f"rel error {r['rel']:.3g}: {where}"
        assert r["same_past_length"], f"cache positions past the length changed the output: {where}"
    assert len(report["rope"]) == 4
    for r in report["rope"]:
        where = f"rope case {r['case']} (seed {report['seed']})"
        # bf16 rounding of the outputs only (the interpreter rounds fp32 -> bf16 toward zero, the GPU to nearest:
        # the GPU test checks v bit for bit).
        assert r["q_rel"] < 1e-2 and r["k_rel"] < 1e-2 and r["v_rel"] < 1e-2, where
        assert r["rest_untouched"], f"only the new position may be written: {where}"


def test_splits_fill_the_gpu_with_long_enough_slices():
    # One sequence, 4 KV heads, a 4096-position cache: 33 slices wanted for one program per SM, 16 of 256 positions.
    assert decode_attention_splits(1, 4, 4096, num_sms=132) == 16
    assert decode_attention_splits(1, 4, 4096, min_slice=64, num_sms=132) == 32  # a power of two
    # 7B decode with a 385-position cache: one slice; with 2049 positions, 8 at batch 1 and 4 at batch 8.
    assert decode_attention_splits(8, 4, 385, num_sms=132) == 1
    assert decode_attention_splits(1, 4, 2049, num_sms=132) == 8
    assert decode_attention_splits(8, 4, 2049, num_sms=132) == 4
    # Batch 64 and a long cache: 256 programs already cover the SMs.
    assert decode_attention_splits(64, 4, 8192, num_sms=132) == 1


@pytest.mark.parametrize("bad", ["heads", "dim", "lengths", "splits"])
def test_decode_attention_rejects_bad_input(bad):
    q = torch.zeros(2, 8, 32, dtype=torch.bfloat16)
    k = torch.zeros(2, 2, 16, 32, dtype=torch.bfloat16)
    lengths = torch.tensor([4, 4])
    kwargs = {}
    if bad == "heads":
        q = torch.zeros(2, 7, 32, dtype=torch.bfloat16)
    elif bad == "dim":
        q, k = torch.zeros(2, 8, 24, dtype=torch.bfloat16), torch.zeros(2, 2, 16, 24, dtype=torch.bfloat16)
    elif bad == "lengths":
        lengths = torch.tensor([4, 4, 4])
    else:
        kwargs["splits"] = 3
    with pytest.raises(ValueError, match="decode_attention"):
        decode_attention(q, k, k.clone(), lengths, **kwargs)


def _graph(fn) -> torch.cuda.CUDAGraph:
    """A CUDA graph of ``fn`` after one warm-up call on a side stream."""
    return capture_graph(fn)[0]


@pytest.mark.parametrize("bad", ["width", "tables", "positions"])
def test_rope_and_cache_rejects_bad_input(bad):
    b, h, kv, d, cache = 2, 4, 2, 16, 8
    qkv = torch.zeros(b, (h + 2 * kv) * d, dtype=torch.bfloat16)
    cos = sin = torch.zeros(cache, d, dtype=torch.bfloat16)
    kc = torch.zeros(b, kv, cache, d, dtype=torch.bfloat16)
    positions = torch.tensor([3])
    if bad == "width":
        qkv = torch.zeros(b, (h + kv) * d, dtype=torch.bfloat16)
    elif bad == "tables":
        cos = sin = torch.zeros(cache - 1, d, dtype=torch.bfloat16)
    else:
        positions = torch.tensor([1, 2, 3])
    with pytest.raises(ValueError, match="rope_and_cache"):
        rope_and_cache(qkv, None, cos, sin, positions, kc, kc.clone(), h)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("batch", [1, 8, 64])
def test_rope_and_cache_on_gpu_under_a_cuda_graph(batch):
    h, kv, d, cache = 28, 4, 128, 385
    qkv = torch.randn(batch, (h + 2 * kv) * d, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn((h + 2 * kv) * d, device="cuda", dtype=torch.bfloat16)
    ang = torch.arange(cache, device="cuda")[:, None].float() * torch.rand(d // 2, device="cuda")[None]
    cos = torch.cat([ang.cos(), ang.cos()], -1).bfloat16()
    sin = torch.cat([ang.sin(), ang.sin()], -1).bfloat16()
    kc = torch.randn(batch, kv, cache, d, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn(batch, kv, cache, d, device="cuda", dtype=torch.bfloat16)
    pos = torch.tensor([0], device="cuda")
    q = torch.full((batch, h, d), float("nan"), device="cuda", dtype=torch.bfloat16)
    graph = _graph(lambda: q.copy_(rope_and_cache(qkv, bias, cos, sin, pos, kc, vc, h)))
    for p in (0, 200, cache - 1):  # the graph reads the position on the device each replay
        pos.fill_(p)
        qkv.normal_()
        q.fill_(float("nan"))
        kr, vr = kc.clone(), vc.clone()
        graph.replay()
        torch.cuda.synchronize()
        qr = rope_and_cache_reference(qkv, bias, cos, sin, pos, kr, vr, h)
        assert torch.isfinite(q).all(), p
        assert float((q.float() - qr.float()).norm() / qr.float().norm()) < 1e-2, p
        assert float((kc.float() - kr.float()).norm() / kr.float().norm()) < 1e-2, p
        assert torch.equal(vc, vr), p


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("batch", [1, 8, 64])
def test_decode_attention_on_gpu_under_a_cuda_graph(batch):
    h, kv, d, cache = 28, 4, 128, 385  # Qwen2.5-7B heads; a cache length that is not a multiple of the block
    q = torch.randn(batch, h, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, kv, cache, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(batch, kv, cache, d, device="cuda", dtype=torch.bfloat16)
    lengths = torch.tensor([129], device="cuda")
    out = torch.full_like(q, float("nan"))
    graph = _graph(lambda: out.copy_(decode_attention(q, k, v, lengths)))
    for n in (1, 64, 129, 300, cache):  # the graph reads the length on the device each replay
        out.fill_(float("nan"))
        lengths.fill_(n)
        q.normal_()
        graph.replay()
        torch.cuda.synchronize()
        ref = decode_attention_reference(q, k, v, lengths)
        assert torch.isfinite(out).all(), n
        rel = float((out.float() - ref).norm() / ref.norm())
        assert rel < 2e-2, (n, rel)
    # Per-sequence lengths, one slice and many.
    per_seq = torch.randint(1, cache + 1, (batch,), device="cuda", dtype=torch.int32)
    ref = decode_attention_reference(q, k, v, per_seq)
    for splits in (1, 4):
        got = decode_attention(q, k, v, per_seq, splits=splits)
        assert float((got.float() - ref).norm() / ref.norm()) < 2e-2, splits
    # Left padding: each row from its own start (below its length); the positions before it poisoned.
    starts = (torch.rand(batch, device="cuda") * per_seq).long()
    k2, v2 = k.clone(), v.clone()
    for i, lo in enumerate(starts.tolist()):
        k2[i, :, :lo] = 1e4
        v2[i, :, :lo] = float("nan")
    ref = decode_attention_reference(q, k, v, per_seq, starts=starts)
    for splits in (1, 4):
        got = decode_attention(q, k2, v2, per_seq, splits=splits, starts=starts)
        assert torch.isfinite(got).all(), splits
        assert float((got.float() - ref).norm() / ref.norm()) < 2e-2, splits

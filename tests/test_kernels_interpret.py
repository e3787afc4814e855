"""The NVFP4 Triton kernels under Triton's CPU interpreter (TRITON_INTERPRET=1), on small odd shapes.

The interpreter must be switched on before triton is imported, so the kernel checks run in a fresh subprocess.
They use the plain-Triton dequantization path (inline PTX cannot be interpreted); the PTX path has the same
contract and is checked on the GPU (tests/test_kernels_gpu.py).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from qerl import nvfp4  # noqa: E402
from qerl.kernels.nvfp4_gemm import (  # noqa: E402
    CHUNK,
    WORD_BITS,
    WORD_ELEMENTS,
    codec_from_kernel_weight,
    decode_e5m3,
    encode_e5m3,
    prepare_weight,
)
from tests.conftest import run_interpreted  # noqa: E402

# Runs inside the subprocess: every launcher mode on odd shapes, against dequantize + matmul in fp32.
_SCRIPT = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
from qerl import nvfp4
from qerl.kernels import NVFP4MatmulFn, nvfp4_matmul, nvfp4_matmul_grad_input, prepare_weight
from qerl.kernels.nvfp4_gemm import BwdConfig, FwdConfig

seed = int.from_bytes(os.urandom(4), "little")
gen = torch.Generator().manual_seed(seed)
results = []

def rel(out, ref):
    return float((out.detach().float() - ref).norm() / ref.norm())

def weight(n, k, zero_group=False, layout="pairs"):
    w = torch.randn(n, k, generator=gen) * 0.05
    if zero_group:
        w[1, 16:32] = 0.0  # an all-zero group (scale 0.125, codes 0)
    q = nvfp4.quantize(w)
    if zero_group:
        q.scale[2, 0] = torch.tensor(0.0).to(torch.float8_e4m3fn)  # a zero scale must zero its group
    ref_w = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.float32)
    return prepare_weight(q.packed, q.scale, q.global_scale, layout=layout), ref_w

def check(name, out, ref):
    results.append({"name": name, "rel": rel(out, ref), "finite": bool(torch.isfinite(out).all()),
                    "shape": list(out.shape), "want": list(ref.shape)})

fwd = [None, FwdConfig(0, 4, 16, 1, 2), FwdConfig(0, 1, 32, 1, 1), FwdConfig(1, 16, 16, 1, 3),
       FwdConfig(1, 16, 32, 1, 1, group_m=2), FwdConfig(2, 16, 32, 1, 2), FwdConfig(1, 16, 16, 1, 3, fused=False),
       FwdConfig(2, 8, 32, 1, 2, 2, maxnreg=64), FwdConfig(1, 16, 16, 1, 3, one_dot=True),
       FwdConfig(2, 8, 32, 1, 2, one_dot=True)]
bwd = [None, BwdConfig(1, 16, 16, 3), BwdConfig(1, 16, 32, 1, group_m=2), BwdConfig(2, 16, 16, 2),
       BwdConfig(1, 16, 16, 3, fused=False), BwdConfig(1, 16, 16, 3, one_dot=True)]
for m, n, k in [(3, 48, 80), (1, 40, 144), (20, 36, 384)]:
    kw, ref_w = weight(n, k, zero_group=(m == 3))
    for cfg in fwd:
        if cfg is not None and cfg.mode == 0 and cfg.bm < m:
            continue
        x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
        y = nvfp4_matmul(x, kw, cfg, out=out)
        assert y.data_ptr() == out.data_ptr()
        check(f"fwd {m}x{n}x{k} {cfg}", y, x.float() @ ref_w.T)
    for cfg in bwd:
        dy = torch.randn(m, n, generator=gen).to(torch.bfloat16)
        out = torch.full((m, k), float("nan"), dtype=torch.bfloat16)
        dx = nvfp4_matmul_grad_input(dy, kw, cfg, out=out)
        check(f"bwd {m}x{n}x{k} {cfg}", dx, dy.float() @ ref_w)

# The "words" code layout (decoded word by word in plain Triton, then put back in element order) on the same paths.
for m, n, k in [(3, 48, 80), (20, 36, 384)]:
    kw, ref_w = weight(n, k, zero_group=(m == 3), layout="words")
    for cfg in (None, FwdConfig(0, 4, 16, 1, 2), FwdConfig(1, 16, 16, 1, 3), FwdConfig(2, 8, 32, 1, 2, one_dot=True)):
        if cfg is not None and cfg.mode == 0 and cfg.bm < m:
            continue
        x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
        check(f"words fwd {m}x{n}x{k} {cfg}", nvfp4_matmul(x, kw, cfg), x.float() @ ref_w.T)
    for cfg in (None, BwdConfig(2, 16, 16, 2), BwdConfig(1, 16, 16, 3, one_dot=True)):
        dy = torch.randn(m, n, generator=gen).to(torch.bfloat16)
        check(f"words bwd {m}x{n}x{k} {cfg}", nvfp4_matmul_grad_input(dy, kw, cfg), dy.float() @ ref_w)

# Two chunks per step with both halves of each in one dot: the [BN, 256] operand keeps element order across chunks.
kw, ref_w = weight(24, 256)
x = torch.randn(5, 256, generator=gen).to(torch.bfloat16)
for cfg in (FwdConfig(2, 8, 16, 2, 1, one_dot=True), FwdConfig(1, 16, 16, 2, 1, one_dot=True)):
    check(f"fwd 5x24x256 {cfg}", nvfp4_matmul(x, kw, cfg), x.float() @ ref_w.T)

# Large M: slabs of W dequantized into a re-used bf16 buffer, then matmul (several slabs, a ragged last one).
from qerl.kernels import nvfp4_gemm
nvfp4_gemm.SCRATCH_ELEMENTS = 128 * 208
nvfp4_gemm.SLAB_MIN_FLOP = 0.0  # a product this small would otherwise stay on the tile loop
kw, ref_w = weight(300, 208)
m = max(nvfp4_gemm.LARGE_M_FWD, nvfp4_gemm.LARGE_M_BWD) + 3
x = torch.randn(m, 208, generator=gen).to(torch.bfloat16)
check("fwd large-M slabs", nvfp4_matmul(x, kw), x.float() @ ref_w.T)
dy = torch.randn(m, 300, generator=gen).to(torch.bfloat16)
check("bwd large-M slabs", nvfp4_matmul_grad_input(dy, kw), dy.float() @ ref_w)
check("dequantize rows", nvfp4_gemm.dequantize_rows(kw, 100, 150, asm=False), ref_w[100:250])
# Column slabs: K columns [128, 208) of rows 7-226, then the input gradient over column slabs (one product each, ragged
# last slab) and over row slabs with a forced count, on one stream (the second stream needs CUDA).
check("dequantize column block", nvfp4_gemm.dequantize_rows(kw, 7, 220, asm=False, chunk0=1, chunks=1),
      ref_w[7:227, 128:208])
check("dequantize rows, programs along K", nvfp4_gemm.dequantize_rows(kw, 7, 220, asm=False, chunks_first=True),
      ref_w[7:227])
dx = torch.full((m, 208), float("nan")).to(torch.bfloat16)
SlabPlan = nvfp4_gemm.SlabPlan
check("bwd large-M column slabs", nvfp4_gemm._grad_input_large_m(dy, kw, dx, SlabPlan("k", 2)),
      dy.float() @ ref_w)
dx = torch.full((m, 208), float("nan")).to(torch.bfloat16)
check("bwd large-M three row slabs", nvfp4_gemm._grad_input_large_m(dy, kw, dx, SlabPlan("n", 3)), dy.float() @ ref_w)
y = torch.full((m, 300), float("nan")).to(torch.bfloat16)
check("fwd large-M three row slabs", nvfp4_gemm._matmul_large_m(x, kw, y, SlabPlan("n", 3)),
      x.float() @ ref_w.T)
kw, ref_w = weight(300, 208, layout="words")
check("words fwd large-M slabs", nvfp4_matmul(x, kw), x.float() @ ref_w.T)
check("words dequantize rows", nvfp4_gemm.dequantize_rows(kw, 100, 150), ref_w[100:250])

# Leading dims and a strided (non-contiguous rows) input.
kw, ref_w = weight(24, 96)
base = torch.randn(2, 3, 200, generator=gen).to(torch.bfloat16)
x = base[..., 7:103]  # row stride 200, not contiguous
y = nvfp4_matmul(x, kw)
check("fwd strided 2x3", y, x.float() @ ref_w.T)

# The autograd function: y = x W^T + b; grads for x and b, none for the frozen weight.
x = torch.randn(5, 96, generator=gen).to(torch.bfloat16).requires_grad_(True)
b = torch.randn(24, generator=gen).to(torch.bfloat16).requires_grad_(True)
y = NVFP4MatmulFn.apply(x, kw, b)
g = torch.randn(5, 24, generator=gen).to(torch.bfloat16)
y.backward(g)
check("autograd y", y, x.detach().float() @ ref_w.T + b.detach().float())
check("autograd dx", x.grad, g.float() @ ref_w)
check("autograd db", b.grad, g.float().sum(0))
# Fused split reduction (the last program of a tile sums the partials in split order) == the separate reduce kernel.
kw, _ = weight(40, 384)
x = torch.randn(5, 384, generator=gen).to(torch.bfloat16)
dy = torch.randn(5, 40, generator=gen).to(torch.bfloat16)
same = (torch.equal(nvfp4_matmul(x, kw, FwdConfig(1, 16, 16, 1, 3)),
                    nvfp4_matmul(x, kw, FwdConfig(1, 16, 16, 1, 3, fused=False)))
        and torch.equal(nvfp4_matmul_grad_input(dy, kw, BwdConfig(1, 16, 16, 3)),
                        nvfp4_matmul_grad_input(dy, kw, BwdConfig(1, 16, 16, 3, fused=False))))

# The epilogue: a bias and a LoRA adapter's expand (u_s @ B_s^T for each output slice s, as vLLM's fused q/k/v and
# gate/up layers hold it), in the kernel where inner slice ends lie on tile ends and in torch after it otherwise;
# MODE 1/2 take tensor cores (rank 8 zero-padded to a 16-wide step), MODE 0 FMAs. A token without an adapter has
# u = 0.
from qerl.kernels.nvfp4_gemm import LoRAEpilogue, _lora_fits, fwd_config
lora_in_kernel = []
for m, slices, r, cfgs in [
        (3, (32, 16, 16), 16, [FwdConfig(1, 16, 16, 1, 3), FwdConfig(2, 8, 16, 1, 2), FwdConfig(2, 16, 16, 1, 1),
                               FwdConfig(0, 4, 16, 1, 2), FwdConfig(1, 16, 32, 1, 1),
                               FwdConfig(1, 16, 32, 1, 2, fused=False)]),
        (9, (48, 40), 8, [None, FwdConfig(1, 16, 16, 1, 1), FwdConfig(2, 16, 16, 1, 3)]),
        (2, (40,), 16, [FwdConfig(2, 8, 16, 1, 1)])]:
    n, k = sum(slices), 144
    kw, ref_w = weight(n, k)
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    u = torch.randn(len(slices), m, r, generator=gen)
    u[:, m // 2] = 0.0
    bs = tuple((torch.randn(s, r, generator=gen) * 0.1).to(torch.bfloat16) for s in slices)
    bias = torch.randn(n, generator=gen).to(torch.bfloat16)
    lora = LoRAEpilogue(u, bs)
    ref = (x.float() @ ref_w.T + bias.float()
           + torch.cat([u[i] @ bs[i].float().T for i in range(len(slices))], dim=1))
    for cfg in cfgs:
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
        y = nvfp4_matmul(x, kw, cfg, out=out, bias=bias, lora=lora)
        check(f"fwd+bias+lora {m}x{slices}x{k} r{r} {cfg}", y, ref)
        lora_in_kernel.append(_lora_fits(lora, m, n, (cfg or fwd_config(m, n, kw.k_pad, x.device)).bn))
    check(f"fwd+bias {m}x{n}", nvfp4_matmul(x, kw, FwdConfig(1, 16, 16, 1, 3), bias=bias),
          x.float() @ ref_w.T + bias.float())

# Split partials summed by a second kernel, then a bias and an expand the product did not take: one launch of the
# epilogue's kernel sums them too (nvfp4_gemm._reduce), against the sum's kernel followed by the epilogue's.
from qerl.kernels import nvfp4_gemm as ng
launched = []
for name in ("_reduce_kernel", "_launch_bias_lora"):
    fn = getattr(ng, name)
    if name == "_reduce_kernel":
        class _Recorded:
            def __getitem__(self, grid, fn=fn):
                launched.append("reduce")
                return fn[grid]
        setattr(ng, name, _Recorded())
    else:
        setattr(ng, name, lambda *a, fn=fn, **kw: launched.append("epilogue") or fn(*a, **kw))
m, slices, r = 5, (64, 32), 16
n = sum(slices)
ws = torch.randn(3, m, n, generator=gen)
u = torch.randn(len(slices), m, r, generator=gen)
bs = tuple((torch.randn(s, r, generator=gen) * 0.1).to(torch.bfloat16) for s in slices)
bias = torch.randn(n, generator=gen).to(torch.bfloat16)
expand = torch.cat([u[i].to(torch.bfloat16).float() @ bs[i].float().T for i in range(len(slices))], dim=1)
reduce_launches = []
for with_bias, with_lora in ((True, True), (False, True), (True, False), (False, False)):
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    launched.clear()
    ng._reduce(ws, out, 3, bias if with_bias else None, LoRAEpilogue(u, bs) if with_lora else None)
    reduce_launches.append(list(launched))
    check(f"split sum + bias {with_bias} + lora {with_lora}", out,
          ws.sum(0) + (bias.float() if with_bias else 0) + (expand if with_lora else 0))
    two = ws.sum(0).to(torch.bfloat16)  # what the sum's kernel and then the epilogue's give, rounded twice
    ng.add_bias_and_lora_(two, bias if with_bias else None, LoRAEpilogue(u, bs) if with_lora else None)
    check(f"split sum + epilogue in one launch against two, bias {with_bias} lora {with_lora}", out, two.float())

# The op as vLLM's fused layers call it: with vLLM's "no adapter in this batch" flag set, u was never written (NaN
# here) and must be ignored; without it, the adapter's term is added.
from qerl.kernels.ops import nvfp4_lora_linear
kw, ref_w = weight(64, 144)
x = torch.randn(3, 144, generator=gen).to(torch.bfloat16)
bias = torch.randn(64, generator=gen).to(torch.bfloat16)
bs = [(torch.randn(32, 16, generator=gen) * 0.1).to(torch.bfloat16) for _ in range(2)]
u = torch.full((2, 3, 16), float("nan"))
op_args = (kw.codes, kw.scales, kw.global_scale, kw.n, kw.k, bias, u, bs)
check("op, no adapter in the batch", nvfp4_lora_linear(x, *op_args, torch.tensor([True])),
      x.float() @ ref_w.T + bias.float())
u.copy_(torch.randn(u.shape, generator=gen))
check("op, adapter", nvfp4_lora_linear(x, *op_args, torch.tensor([False])),
      x.float() @ ref_w.T + bias.float() + torch.cat([u[i] @ bs[i].float().T for i in range(2)], dim=1))

# vLLM's fused LoRA layer (qerl/rollout/vllm_lora_fusion.py) on its CUDA branch, wired to stand-ins with the
# attributes vLLM's layer and CUDA punica wrapper have: the shrink writes u only when the batch has an adapter
# (like vLLM's), B is read from slot 0 of the (max_loras, 1, N_s, R) stacks, the bias goes into the epilogue.
import types
from qerl.rollout import vllm_lora_fusion

class PunicaWrapperGPU:  # the name selects the CUDA branch of vllm_internals.lora_shrink
    def __init__(self):
        self.token_mapping_meta = types.SimpleNamespace(no_lora_flag_cpu=torch.tensor([False]))
    def add_shrink(self, y, x, lora_a_stacked, scale):
        if self.token_mapping_meta.no_lora_flag_cpu.item():
            y.fill_(float("nan"))  # vLLM leaves the buffer unwritten then; poisoned, so reading it would show
            return
        for s, a in enumerate(lora_a_stacked):
            y[s] = (x.float() @ a[0, 0].float().T) * scale

kw, ref_w = weight(96, 144)
layer = torch.nn.Module()
layer.base_layer = types.SimpleNamespace(qerl_shape=(kw.n, kw.k), weight=kw.codes, weight_scale=kw.scales,
                                         weight_global_scale=kw.global_scale)
layer.lora_a_stacked = tuple((torch.randn(1, 1, 16, 144, generator=gen) * 0.1).to(torch.bfloat16) for _ in range(3))
layer.lora_b_stacked = tuple((torch.randn(1, 1, n, 16, generator=gen) * 0.1).to(torch.bfloat16) for n in (32, 32, 32))
layer.punica_wrapper = PunicaWrapperGPU()
x = torch.randn(5, 144, generator=gen).to(torch.bfloat16)
bias = torch.randn(96, generator=gen).to(torch.bfloat16)
u = [x.float() @ a[0, 0].float().T for a in layer.lora_a_stacked]
expand = torch.cat([u[s].to(torch.bfloat16).float() @ b[0, 0].float().T for s, b in enumerate(layer.lora_b_stacked)], 1)
check("vLLM fused layer, adapter", vllm_lora_fusion._fused_apply(layer, x, bias), x.float() @ ref_w.T + bias.float() + expand)
layer.punica_wrapper.token_mapping_meta.no_lora_flag_cpu.fill_(True)
check("vLLM fused layer, no adapter in the batch", vllm_lora_fusion._fused_apply(layer, x, bias),
      x.float() @ ref_w.T + bias.float())

# Siblings moved into one allocation (qerl.fusion): a member's scales are a column slice of the group's scale rows
# (row stride the group's N * 8, not its own): forward, input gradient and the slab dequantization read that stride.
from torch import nn
from qerl.fusion import fuse_siblings
from qerl.modules import NVFP4Linear
parent = nn.Module()
dense = [torch.randn(n, 384, generator=gen) * 0.05 for n in (64, 32, 32)]
shared = nvfp4.global_scale_for(dense)
leaves = ("q_proj", "k_proj", "v_proj")
for leaf, w in zip(leaves, dense):
    linear = nn.Linear(384, w.shape[0], bias=False)
    linear.weight.data.copy_(w)
    setattr(parent, leaf, NVFP4Linear.from_linear(linear, shared))
    getattr(parent, leaf).to_kernel_layout()
group = fuse_siblings(parent, leaves)
member_strides = []
x = torch.randn(5, 384, generator=gen).to(torch.bfloat16)
refs = []
for leaf in leaves:
    kw = getattr(parent, leaf).kernel_weight()
    ref_w = getattr(parent, leaf).dequantized_weight(torch.float32)  # through the codec, not the kernels
    refs.append(ref_w)
    member_strides.append(kw.scales.stride(0))
    for cfg in (None, FwdConfig(1, 16, 16, 1, 3), FwdConfig(0, 8, 16, 1, 2)):
        check(f"fused member {leaf} fwd {cfg}", nvfp4_matmul(x, kw, cfg), x.float() @ ref_w.T)
    dy = torch.randn(5, kw.n, generator=gen).to(torch.bfloat16)
    check(f"fused member {leaf} bwd", nvfp4_matmul_grad_input(dy, kw, BwdConfig(1, 16, 16, 3)), dy.float() @ ref_w)
    check(f"fused member {leaf} dequantize rows", nvfp4_gemm.dequantize_rows(kw, 0, kw.n, asm=False), ref_w)
check("fused group fwd", nvfp4_matmul(x, group.weight), x.float() @ torch.cat(refs).T)

# The fused split reductions leave every tile counter at zero for the next launch.
counters = nvfp4_gemm._COUNTERS.get(("cpu", None))
print(json.dumps({"seed": seed, "results": results, "fused_equals_two_kernel": same, "lora_in_kernel": lora_in_kernel,
                  "reduce_launches": reduce_launches,
                  "counters": None if counters is None else int(counters.abs().sum()),
                  "member_strides": member_strides}))
"""


def test_kernels_match_reference_under_interpreter():
    report = run_interpreted(_SCRIPT)
    results = report["results"]
    assert len(results) >= 30
    assert report["counters"] == 0, "fused split reductions must be used and must reset their tile counters"
    assert report["fused_equals_two_kernel"], "the fused split reduction must sum like the reduce kernel"
    # Both epilogue paths ran: slices on tile ends (in the kernel) and not (torch after the kernel).
    assert True in report["lora_in_kernel"] and False in report["lora_in_kernel"], report["lora_in_kernel"]
    assert report["member_strides"] == [128 * 8] * 3  # the fused members' scale rows: the group's stride
    # A bias or an expand after split partials: the epilogue's kernel sums them (one launch); neither: the sum's own.
    assert report["reduce_launches"] == [["epilogue"]] * 3 + [["reduce"]], report["reduce_launches"]
    for r in results:
        where = f"{r['name']} (seed {report['seed']})"
        assert r["shape"] == r["want"], where
        assert r["finite"], f"NaN/inf left in the output: {where}"
        # bf16 output rounding only: the dequantized tiles are exact.
        assert r["rel"] < 1e-2, f"rel error {r['rel']:.3g}: {where}"


def test_e5m3_reencodes_every_e4m3_scale_exactly():
    v = torch.arange(1, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()  # all positive finite E4M3
    u = encode_e5m3(v)
    assert torch.equal(decode_e5m3(u), v)
    # The kernels read u as the bf16 bits of v * 2**112 after one shift-add.
    bits = ((u.to(torch.int32) << 4) + (230 << 7)).to(torch.int16).view(torch.bfloat16).float()
    assert torch.equal(bits, v * 2.0**112)


def test_prepare_weight_layout():
    n, k = 5, 144  # K padded to 256
    w = torch.randn(n, k)
    q = nvfp4.quantize(w)
    kw = prepare_weight(q.packed, q.scale, q.global_scale)
    assert (kw.n, kw.k, kw.k_pad) == (n, k, 2 * CHUNK)
    assert kw.codes.shape == (n, CHUNK) and kw.scales.shape == (2, n * 8)
    codes = nvfp4.unpack(q.packed)
    # Byte j of chunk c: element 128c + j in the low nibble, 128c + 64 + j in the high nibble; padding is 0.
    padded = torch.nn.functional.pad(codes, (0, 2 * CHUNK - k))
    for c in range(2):
        chunk = kw.codes[:, c * 64:(c + 1) * 64]
        assert torch.equal(chunk & 15, padded[:, c * CHUNK:c * CHUNK + 64])
        assert torch.equal(chunk >> 4, padded[:, c * CHUNK + 64:(c + 1) * CHUNK])
    # Scale row c holds chunk c's 8 group scales of W row r at bytes 8r .. 8r + 7, i.e. groups 8c .. 8c + 7 of row r.
    by_group = torch.empty(n, 16, dtype=torch.uint8)
    for c in range(2):
        by_group[:, 8 * c:8 * c + 8] = kw.scales[c].reshape(n, 8)
    assert torch.equal(decode_e5m3(by_group[:, :9]), q.scale.float())
    assert torch.equal(decode_e5m3(by_group[:, 9:]), torch.ones(n, 7))  # padding groups: scale 1, codes 0
    back_packed, back_scale = codec_from_kernel_weight(kw)
    assert torch.equal(back_packed, q.packed) and torch.equal(back_scale.float(), q.scale.float())


def test_words_layout_places_each_code_where_the_decoder_reads_it(monkeypatch):
    n, k = 3, 272  # K padded to 384
    q = nvfp4.quantize(torch.randn(n, k))
    kw = prepare_weight(q.packed, q.scale, q.global_scale, layout="words")
    assert kw.words and kw.codes.shape == (n, 192)
    codes = torch.nn.functional.pad(nvfp4.unpack(q.packed), (0, 384 - k)).to(torch.int64)
    b = kw.codes.to(torch.int64)
    for row in range(n):
        for byte0 in range(0, 192, 4):  # one 32-bit word, little-endian
            word = sum(int(b[row, byte0 + i]) << (8 * i) for i in range(4))
            c, q16, u = byte0 // 64, (byte0 % 64) // 16, (byte0 % 16) // 4
            for i, bits in enumerate(WORD_BITS):  # the low half's codes of bytes 0..3, then the high half's
                elem = c * CHUNK + 64 * (i // 4) + 16 * q16 + 2 * u + WORD_ELEMENTS[i % 4]
                got = sum(((word >> pos) & 1) << j for j, pos in enumerate(bits))
                assert got == int(codes[row, elem]), (row, byte0, i)
    assert sorted(p for bits in WORD_BITS for p in bits) == list(range(32))  # every bit of a word used once
    from qerl.kernels import nvfp4_gemm

    monkeypatch.setattr(nvfp4_gemm, "WORDS_PASS_BYTES", 16 * 384 * 2)  # two rows a pass: the same bytes
    assert torch.equal(prepare_weight(q.packed, q.scale, q.global_scale, layout="words").codes, kw.codes)
    back_packed, back_scale = codec_from_kernel_weight(kw)
    assert torch.equal(back_packed, q.packed) and torch.equal(back_scale.float(), q.scale.float())
    assert torch.equal(kw.scales, prepare_weight(q.packed, q.scale, q.global_scale).scales)  # scales as "pairs"
    with pytest.raises(ValueError, match="layout must be one of"):
        prepare_weight(q.packed, q.scale, q.global_scale, layout="nibbles")


def test_with_layout_recodes_the_codes_and_shares_the_scales(monkeypatch):
    """``with_layout`` gives a weight's codes in another layout byte for byte as ``prepare_weight`` writes them, from
    every layout to every other, in slabs of rows or whole; the scales tensor is the same object, and a weight
    already in the layout is returned as it is."""
    from qerl.kernels import nvfp4_gemm, with_layout

    n, k = 6, 272
    q = nvfp4.quantize(torch.randn(n, k))
    made = {lay: prepare_weight(q.packed, q.scale, q.global_scale, layout=lay) for lay in ("pairs", "words", "rows")}
    for slab_rows in (None, 2):
        if slab_rows:
            monkeypatch.setattr(nvfp4_gemm, "WORDS_PASS_BYTES", 32 * 192 * slab_rows)
        for src, w in made.items():
            assert with_layout(w, src) is w
            for dst, want in made.items():
                got = with_layout(w, dst)
                assert got.layout == dst and torch.equal(got.codes, want.codes), (src, dst)
                assert got.scales is w.scales and got.global_scale is w.global_scale and (got.n, got.k) == (n, k)
    odd = prepare_weight(q.packed[:5], q.scale[:5], q.global_scale)
    with pytest.raises(ValueError, match="N must be even"):
        with_layout(odd, "rows")
    with pytest.raises(ValueError, match="layout must be one of"):
        with_layout(odd, "nibbles")


def _run_ptx(text: str, regs: dict) -> dict:
    """Execute the straight-line PTX of the dequantization snippets (the instructions they use) on Python ints."""
    def val(tok):
        tok = tok.strip()
        return regs[tok] if tok in regs else int(tok, 0)

    def bf16(bits):
        return torch.tensor([bits], dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float().item()

    def to_bf16_bits(v):
        t = torch.tensor([v], dtype=torch.float32).to(torch.bfloat16)
        assert t.float().item() == v, "not exact in bf16"
        return int(t.view(torch.int16).item()) & 0xFFFF

    for line in text.splitlines():
        line = line.strip().rstrip(";")
        if not line or line in "{}" or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        dst, *src = [a.strip() for a in args.split(",")]
        if op == "mov.b32":
            out = val(src[0])
        elif op == "and.b32":
            out = val(src[0]) & val(src[1])
        elif op == "mul.lo.u32":
            out = val(src[0]) * val(src[1])
        elif op == "mad.lo.u32":
            out = val(src[0]) * val(src[1]) + val(src[2])
        elif op == "shf.l.wrap.b32":  # funnel shift of {src1:src0} left, upper word: a rotation when src0 == src1
            hi_lo = (val(src[1]) << 32) | val(src[0])
            out = (hi_lo << (val(src[2]) & 31)) >> 32
        elif op == "prmt.b32":
            pool = val(src[0]) | (val(src[1]) << 32)
            sel = val(src[2])
            out = sum(((pool >> (8 * ((sel >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4))
        elif op == "fma.rn.bf16x2":
            a, b, c = (val(t) for t in src)
            out = 0
            for lane in range(2):
                v = bf16((a >> 16 * lane) & 0xFFFF) * bf16((b >> 16 * lane) & 0xFFFF) + bf16((c >> 16 * lane) & 0xFFFF)
                out |= to_bf16_bits(v) << (16 * lane)
        else:
            raise AssertionError(f"unexpected instruction {op}")
        regs[dst] = out & 0xFFFFFFFF
    return regs


def test_word_ptx_dequantizes_every_code_exactly():
    """The words layout's 12-instruction PTX, executed instruction by instruction: every code in every position of
    a word, with E5M3 scales converted by the paired-scale PTX, gives E2M1 * scale * 2**-14 in the right lane."""
    from qerl.kernels.nvfp4_gemm import _SCALES_PTX, _word_dequant_ptx

    e2m1 = nvfp4.E2M1_VALUES
    gen = torch.Generator().manual_seed(0)
    scale_bytes = [0x48, 0x01, 0x9F, 0x77]  # E5M3 of 1.0, 2**-9 * 9/8 (an E4M3 subnormal's), 448, and another
    for trial in range(64):
        codes = [int(c) for c in torch.randint(0, 16, (8,), generator=gen)]
        if trial < 16:
            codes = [trial] * 8
        word = 0
        for code, bits in zip(codes, WORD_BITS):
            word |= sum(((code >> j) & 1) << pos for j, pos in enumerate(bits))
        sb = scale_bytes[trial % 4]
        pairs = _run_ptx(_SCALES_PTX, {"$2": sb * 0x01010101})  # bf16 pairs of scale * 2**112
        scale = float(decode_e5m3(torch.tensor([sb], dtype=torch.uint8)))
        regs = _run_ptx(_word_dequant_ptx(), {"$4": word, "$5": pairs["$0"], "$6": pairs["$0"], "$7": pairs["$0"],
                                              "$8": pairs["$0"]})
        for out in range(4):
            for lane in range(2):
                code = codes[2 * out + lane]
                want = (-1 if code & 8 else 1) * e2m1[code & 7] * scale * 2.0**-14
                bits = (regs[f"${out}"] >> (16 * lane)) & 0xFFFF
                got = torch.tensor([bits], dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float().item()
                assert got == want, (trial, out, lane, code, got, want)


def test_row_pair_ptx_dequantizes_both_columns_and_nibbles_exactly():
    """The input gradient's PTX on an ``ldmatrix.trans`` word (rows n, n + 1 of byte columns 2j, 2j + 1), executed
    instruction by instruction: every code in every nibble of the four bytes, each row with its own scale, gives E2M1
    * scale * 2**-14 for the right row, column and nibble, for the low, the high and both halves."""
    from qerl.kernels.nvfp4_gemm import _SCALES_PTX, _dequant_rows_ptx

    e2m1 = nvfp4.E2M1_VALUES
    gen = torch.Generator().manual_seed(1)
    scale_bytes = [0x48, 0x01, 0x9F, 0x77, 0x30, 0x5A]
    for trial in range(48):
        # byte b of the word: (row, column) = (b // 2, b % 2); low nibble (half 0) and high nibble (half 1)
        nib = [[int(v) for v in torch.randint(0, 16, (2,), generator=gen)] for _ in range(4)]
        if trial < 16:
            nib = [[trial, 15 - trial]] * 4
        word = sum((lo | hi << 4) << (8 * b) for b, (lo, hi) in enumerate(nib))
        sb = [scale_bytes[(trial + i) % 6] for i in range(4)]  # (half, row): half 0 rows 0 / 1, half 1 rows 0 / 1
        pairs = [_run_ptx(_SCALES_PTX, {"$2": sb[2 * h] | sb[2 * h + 1] << 8})["$0"] for h in range(2)]
        scale = [float(decode_e5m3(torch.tensor([v], dtype=torch.uint8))) for v in sb]
        for halves in ((False,), (True,), (False, True)):
            n_out = 2 * len(halves)
            inputs = {f"${n_out}": word}
            inputs.update({f"${n_out + 1 + i}": pairs[int(high)] for i, high in enumerate(halves)})
            regs = _run_ptx(_dequant_rows_ptx(halves), inputs)
            for i, high in enumerate(halves):
                for col in range(2):
                    for row in range(2):
                        code = nib[2 * row + col][int(high)]
                        want = (-1 if code & 8 else 1) * e2m1[code & 7] * scale[2 * int(high) + row] * 2.0**-14
                        bits = (regs[f"${2 * i + col}"] >> (16 * row)) & 0xFFFF
                        got = torch.tensor([bits], dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
                        assert got.item() == want, (trial, halves, high, col, row, code)


def test_rows_layout_words_decode_to_each_row_column_and_half():
    """The input gradient's "rows" layout: the word ``ldmatrix.trans`` hands a thread (byte columns 2j, 2j + 1 of rows
    n and n + 1, n even) holds those rows' codes at elements 2j, 2j + 1 of both halves where the words decoder reads
    them, so its PTX (one scale pair per half), executed instruction by instruction, gives E2M1 * scale * 2**-14 of
    the right row, column and half; the layout converts back to the codec exactly, in slabs or whole."""
    from qerl.kernels import nvfp4_gemm
    from qerl.kernels.nvfp4_gemm import _SCALES_PTX, _word_dequant_ptx

    n, k = 6, 272  # K padded to 384: three chunks, the last mostly padding
    q = nvfp4.quantize(torch.randn(n, k))
    kw = prepare_weight(q.packed, q.scale, q.global_scale, layout="rows")
    assert kw.rows and not kw.words and kw.codes.shape == (n, 192)
    codes = torch.nn.functional.pad(nvfp4.unpack(q.packed), (0, 384 - k)).to(torch.int64)
    scales = torch.nn.functional.pad(q.scale.float(), (0, 384 // 16 - k // 16), value=1.0)
    b = kw.codes.to(torch.int64)
    e2m1 = nvfp4.E2M1_VALUES
    decoded = 0
    for r in range(0, n, 2):
        for col in range(0, 192, 2):  # byte columns 2j, 2j + 1 of a chunk
            word = int(b[r, col]) | int(b[r, col + 1]) << 8 | int(b[r + 1, col]) << 16 | int(b[r + 1, col + 1]) << 24
            c, j = col // 64, (col % 64) // 2
            for i, bits in enumerate(WORD_BITS):  # code 2o + row: output o = (column bit o & 1, half o >> 1)
                o, row = divmod(i, 2)
                elem = c * CHUNK + 64 * (o >> 1) + 2 * j + (o & 1)
                got = sum(((word >> pos) & 1) << bit for bit, pos in enumerate(bits))
                assert got == int(codes[r + row, elem]), (r, col, i)
            if (r * 96 + col // 2) % 7:  # the PTX on every 7th word (the interpreter of it is slow)
                continue
            decoded += 1
            for outputs in ((0, 1), (2, 3), (0, 1, 2, 3)):
                halves = sorted({o >> 1 for o in outputs})
                inputs = {f"${len(outputs)}": word}
                for h in halves:  # the scale pair (rows r, r + 1) of the half's group, as the scale warp writes it
                    group = (c * CHUNK + 64 * h + 2 * j) // 16
                    sb = encode_e5m3(scales[r : r + 2, group])
                    pair = _run_ptx(_SCALES_PTX, {"$2": int(sb[0]) | int(sb[1]) << 8})["$0"]
                    inputs[f"${len(outputs) + 1 + halves.index(h)}"] = pair
                regs = _run_ptx(_word_dequant_ptx(outputs, scale_per_half=True), inputs)
                for slot, o in enumerate(outputs):
                    elem = c * CHUNK + 64 * (o >> 1) + 2 * j + (o & 1)
                    for row in range(2):
                        code = int(codes[r + row, elem])
                        want = (-1 if code & 8 else 1) * e2m1[code & 7] * float(scales[r + row, elem // 16]) * 2.0**-14
                        bits = (regs[f"${slot}"] >> (16 * row)) & 0xFFFF
                        got = torch.tensor([bits], dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
                        assert got.item() == want, (r, col, outputs, o, row, code)
    assert decoded >= 40
    back_packed, back_scale = codec_from_kernel_weight(kw)
    assert torch.equal(back_packed, q.packed) and torch.equal(back_scale.float(), q.scale.float())
    assert torch.equal(kw.scales, prepare_weight(q.packed, q.scale, q.global_scale).scales)  # scales as "pairs"
    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as mp:
        mp.setattr(nvfp4_gemm, "WORDS_PASS_BYTES", 16 * 384 * 2)  # two rows a pass: the same bytes
        assert torch.equal(prepare_weight(q.packed, q.scale, q.global_scale, layout="rows").codes, kw.codes)
    odd = nvfp4.quantize(torch.randn(5, 64))
    with pytest.raises(ValueError, match="N must be even"):
        prepare_weight(odd.packed, odd.scale, odd.global_scale, layout="rows")


def test_rows_layout_is_refused_where_no_kernel_reads_it():
    """Only the warp-specialized input gradient reads "rows": a forward, or an input gradient the Hopper kernel does
    not take (here: no GPU), says which layout to use instead of computing garbage."""
    from qerl.kernels import nvfp4_matmul, nvfp4_matmul_grad_input

    q = nvfp4.quantize(torch.randn(64, 128))
    kw = prepare_weight(q.packed, q.scale, q.global_scale, layout="rows")
    with pytest.raises(ValueError, match="layout='pairs' or 'words'"):
        nvfp4_matmul(torch.randn(3, 128, dtype=torch.bfloat16), kw)
    with pytest.raises(ValueError, match="read only by the warp-specialized input-gradient kernel"):
        nvfp4_matmul_grad_input(torch.randn(3, 64, dtype=torch.bfloat16), kw)


def test_scale_warp_transpose_ptx_moves_every_byte():
    """The input gradient's scale warp transposes 4 rows x 4 groups of scale bytes with 8 prmt: byte j of input word
    i lands in byte i of output word j, for distinct bytes everywhere."""
    from qerl.kernels.nvfp4_gemm import _TRANSPOSE_4X4_PTX

    words = {f"${4 + i}": sum((16 * i + j + 1) << (8 * j) for j in range(4)) for i in range(4)}
    regs = _run_ptx(_TRANSPOSE_4X4_PTX, dict(words))
    for j in range(4):
        for i in range(4):
            assert (regs[f"${j}"] >> (8 * i)) & 0xFF == 16 * i + j + 1, (i, j, hex(regs[f"${j}"]))


def test_large_m_slabs_are_even_and_bounded():
    """Slabs split W into the fewest pieces under the scratch budget, of (nearly) equal height, whole chunks."""
    from types import SimpleNamespace

    from qerl.kernels import nvfp4_gemm as kern

    budget = kern.SCRATCH_ELEMENTS
    for n, k in ((4608, 3584), (3584, 18944), (37888, 3584), (55296, 5120), (5120, 27648), (300, 208)):
        rows = kern._slab_rows(SimpleNamespace(n=n, k=k))
        count = -(-n // rows)
        assert rows % kern.CHUNK == 0 and rows * k <= max(budget, kern.CHUNK * k)
        assert count == -(-n // max(kern.CHUNK, budget // k // kern.CHUNK * kern.CHUNK))  # fewest slabs
        assert n - (count - 1) * rows > rows - kern.CHUNK * count  # the last slab is not a thin remainder
    # 7B down projection: two slabs of 1792 rows, not four of 885 and a remainder.
    assert kern._slab_rows(SimpleNamespace(n=3584, k=18944)) == 1792
    # Overlapped slabs (a second stream dequantizes the next slab) need two at least: 7B qkv fits one buffer whole.
    assert kern._slab_rows(SimpleNamespace(n=4608, k=3584)) == 4608
    assert kern._slab_rows(SimpleNamespace(n=4608, k=3584), min_count=2) == 2304


def test_slab_plans_apply_from_their_m_on_and_per_direction(monkeypatch):
    """A measured slab plan serves its (direction, N, K) from its own M on; other products, and the same shapes
    below that M, take the default plan (the fewest row slabs, overlapped for large forward products only);
    ``OVERLAP_SLABS`` off turns the second stream off for table entries too; the forward refuses column slabs."""
    from qerl.kernels import nvfp4_gemm as kern

    assert kern.slab_plan("bwd", 2048, 37888, 3584) == kern.SlabPlan("k", 1, True)  # 7B gate_up's input gradient
    assert kern.slab_plan("bwd", 2047, 37888, 3584) == kern.SlabPlan("n", 1, False)
    assert kern.slab_plan("bwd", 4096, 3584, 18944) == kern.SlabPlan("k", 1, True)  # 7B down: from M = 4096 on
    assert kern.slab_plan("bwd", 2048, 3584, 18944) == kern.SlabPlan("n", 1, False)
    assert kern.slab_plan("fwd", 2048, 3584, 18944) == kern.SlabPlan("n", 3, True)  # 7B down's forward
    assert kern.slab_plan("fwd", 4096, 3584, 3584) == kern.SlabPlan("n", 1, False)  # no entry, 1e11 FLOP
    assert kern.slab_plan("fwd", 8192, 3584, 3584) == kern.SlabPlan("n", 1, True)  # no entry, 2.1e11 FLOP
    assert kern.slab_plan("bwd", 8192, 3584, 3584) == kern.SlabPlan("n", 1, False)  # no entry: one stream
    assert all(p.along == "n" for (d, _, _), (_, p) in kern.SLAB_PLANS.items() if d == "fwd")
    monkeypatch.setattr(kern, "OVERLAP_SLABS", False)
    assert kern.slab_plan("bwd", 2048, 37888, 3584) == kern.SlabPlan("k", 1, False)
    with pytest.raises(ValueError, match="row slabs only"):
        kern._matmul_large_m(torch.zeros(2, 8), None, None, kern.SlabPlan("k", 1))


def test_small_products_stay_on_the_tile_loop_at_large_m():
    """The default dispatch sends large-M products to the slab path only when they are large enough to pay for it
    (run 7: the tile loop was faster on the 7B qkv / o products at M = 1024, slower on the 32B ones)."""
    from qerl.kernels.nvfp4_gemm import LARGE_M_BWD, LARGE_M_FWD, _slab_path

    assert not _slab_path(1024, 3584, 3584, LARGE_M_FWD)  # 7B o, 26 GFLOP
    assert not _slab_path(1024, 4608, 3584, LARGE_M_FWD)  # 7B qkv, 34 GFLOP
    assert _slab_path(1024, 5120, 5120, LARGE_M_FWD)  # 32B o, 54 GFLOP
    assert _slab_path(4096, 3584, 3584, LARGE_M_FWD)
    # Past M = 1024 (the tile loop's tables end there) every product takes it, however small (7B o at M = 1536).
    assert _slab_path(LARGE_M_FWD + 1, 3584, 3584, LARGE_M_FWD) and _slab_path(1536, 3584, 3584, LARGE_M_BWD)
    assert not _slab_path(LARGE_M_FWD - 1, 55296, 5120, LARGE_M_FWD)
    assert _slab_path(LARGE_M_BWD, 37888, 3584, LARGE_M_BWD) and not _slab_path(LARGE_M_BWD, 3584, 3584, LARGE_M_BWD)

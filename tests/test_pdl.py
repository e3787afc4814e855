"""Programmatic dependent launch (``qerl.kernels.pdl``) without a GPU: the switch, the launch options off a Hopper
GPU, and the decode step's small Triton kernels compiled ahead of time for sm_90a, each waiting for the launch before
it before its first load. The chains' bits under PDL are checked on the GPU (tests/test_kernels_pdl_gpu.py); the
warp-specialized projections' copies before the wait in tests/test_kernels_ws.py."""

from __future__ import annotations

import os

import pytest
import torch

from qerl.kernels import pdl

triton = pytest.importorskip("triton")


def test_switch_and_options_follow_the_environment(monkeypatch):
    monkeypatch.delenv("QERL_PDL", raising=False)
    assert not pdl.pdl_enabled()  # off unless asked for: a launch with it after one without costs time
    with pdl.pdl(True):
        assert pdl.pdl_enabled() and os.environ["QERL_PDL"] == "1"
    assert "QERL_PDL" not in os.environ
    monkeypatch.setenv("QERL_PDL", "1")
    with pdl.pdl(False):
        assert not pdl.pdl_enabled()
    assert pdl.pdl_enabled()
    assert pdl.launch_options(torch.device("cpu")) == {}  # no griddepcontrol off the GPU (nor in the interpreter)


def _triton_kernels():
    from qerl.kernels import decode_attention as da
    from qerl.kernels import fused_norm, nvfp4_gemm

    attn = {"KV_HEADS": 4, "SPLITS": 4, "GROUP_PAD": 16, "HEAD_DIM": 128}
    return [
        (da._decode_attn_part_kernel, {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "out_ptr": "*bf16",
                                       "len_ptr": "*i32", "start_ptr": "*i32", "part_acc_ptr": "*fp32",
                                       "part_ml_ptr": "*fp32", "qk_scale": "fp32"},
         {**attn, "BLOCK_N": 64, "HAS_START": False}),
        (da._decode_attn_merge_kernel, {"part_acc_ptr": "*fp32", "part_ml_ptr": "*fp32", "out_ptr": "*bf16"}, attn),
        (fused_norm._add_rms_norm_kernel, {"res_ptr": "*bf16", "delta_ptr": "*bf16", "w_ptr": "*bf16",
                                           "h_ptr": "*bf16", "x_ptr": "*bf16", "eps": "fp32"}, {"BLOCK": 4096}),
        (nvfp4_gemm._swiglu_kernel, {"y_ptr": "*bf16", "out_ptr": "*bf16"}, {"BLOCK": 1024, "GLU": 8}),
    ]


@pytest.mark.parametrize("index", range(4), ids=["attention", "attention_merge", "add_rms_norm", "swiglu"])
def test_decode_step_kernels_wait_for_the_launch_before_their_first_load(index):
    from qerl.kernels import aot

    if aot.ptxas_path() is None:
        pytest.skip("this Triton build ships no ptxas")
    fn, pointers, const = _triton_kernels()[index]
    for on in (False, True):
        _, sass = aot._assemble(fn, {**const, "PDL": on}, pointers, 4, 3, None, 90, disassemble=True)
        # griddepcontrol.wait is ACQBULK in the SASS, launch_dependents PREEXIT.
        assert sass.count("ACQBULK") == sass.count("PREEXIT") == int(on), (fn.__name__, on)
        if on:
            assert sass.index("ACQBULK") < sass.index("LDG"), fn.__name__

"""The NVFP4 forward kernel compiled ahead of time for Hopper (sm_90a) on a machine without a GPU
(``qerl.kernels.aot``): the bias + LoRA epilogue (``LoRAEpilogue``) assembles on the launch configs the 14B decode
shapes use, and costs no extra spills against the same configs without it."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from qerl.kernels import aot  # noqa: E402
from qerl.kernels import nvfp4_gemm as kern  # noqa: E402

pytestmark = pytest.mark.skipif(aot.ptxas_path() is None, reason="this Triton build ships no ptxas")

# Qwen2.5-14B projection groups: (N, K, output slices of vLLM's LoRA layer, bias)
SHAPES_14B = {"qkv": (7168, 5120, 3, True), "o": (5120, 5120, 1, False), "gate_up": (27648, 5120, 2, False),
              "down": (5120, 13824, 1, False)}


def test_lora_epilogue_assembles_for_hopper_without_extra_registers_or_spills():
    seen = set()
    for n, k, slices, bias in SHAPES_14B.values():
        for m in (1, 8, 16, 64):
            cfg = kern.fwd_config(m, n, k, torch.device("cpu"))
            if (cfg, slices, bias) in seen:
                continue
            seen.add((cfg, slices, bias))
            plain = aot.fwd_resources(cfg)
            for rank in (32, 8):
                fused = aot.fwd_resources(cfg, slices, rank, bias)
                # The epilogue runs once per tile after the main loop: it must not push the loop's state to memory
                # nor take registers from it (fewer resident warps per SM).
                assert fused["spill_bytes"] <= plain["spill_bytes"], (cfg, slices, rank, plain, fused)
                assert fused["registers"] <= plain["registers"] + 16, (cfg, slices, rank, plain, fused)
    assert len(seen) >= 4


def test_resource_report_sees_register_pressure():
    """The report distinguishes configs: the same 128-row tile on twice the warps holds fewer registers per thread."""
    narrow = aot.fwd_resources(kern.FwdConfig(2, 8, 128, 1, 4, 4))
    wide = aot.fwd_resources(kern.FwdConfig(2, 8, 128, 1, 4, 8))
    assert 0 < wide["registers"] < narrow["registers"] <= 255


def test_main_loop_profile_counts_the_loop_of_the_decode_kernel():
    """The SASS loop finder on a hand-written listing, then on the real decode kernel: its loop holds the tensor-core
    instructions and the dequantization's bf16x2 multiplies (one per 2 weights per lane: BN x 128 / 2 / 32 per warp
    and step), and far fewer than one warp instruction per weight."""
    listing = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_3:
        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0020*/              @!P0 HMMA.16816.F32.BF16 R8, R4, R6, R8 ;
        /*0030*/                   ISETP.GE.AND P0, PT, R0, 0x4, PT ;
        /*0040*/               @P0 BRA `(.L_x_3) ;
        /*0050*/                   EXIT ;
"""
    assert dict(aot.main_loop_opcodes(listing)) == {"LDG": 1, "HMMA": 1, "ISETP": 1, "BRA": 1}
    cfg = kern.FwdConfig(2, 8, 64, 1, 4, 2)
    prof = aot.fwd_loop_profile(cfg)
    assert prof["opcodes"].get("HMMA", 0) > 0
    weights_per_lane = cfg.bn * cfg.ch * 128 // cfg.num_warps // 32
    assert prof["opcodes"].get("HMUL2", 0) == weights_per_lane // 2
    assert 0 < prof["per_weight"] < 1


def test_input_gradient_streams_dy_in_16_byte_copies():
    """The input gradient's dY column blocks start on whole BN steps, so the compiler proves their alignment: the
    main loop copies dY asynchronously in 16-byte pieces. Counting rows per split instead (an unspecialized value
    of unknown divisibility) gave 16 synchronous 2-byte dY loads per step, the kernel's top stall in Nsight Compute
    (run 6). What may stay synchronous: the two scale halves where the tile leaves a thread under 4 bytes of them."""
    for m, n, k in ((1, 37888, 3584), (16, 3584, 18944)):
        cfg = kern.bwd_config(m, n, k, torch.device("cpu"))
        loads = aot.bwd_loop_global_loads(cfg)
        assert any(op.startswith("LDGSTS") and op.endswith(".128") for op in loads), loads
        assert sum(c for op, c in loads.items() if op.startswith("LDG.")) <= 2, loads


def test_register_operand_wgmma_takes_code_byte_pairs_without_repacking():
    """With W as the register operand of wgmma (MODE 2, BM = 64), each thread's codes arrive as 2-byte pairs. The
    4-byte PTX dequantization made the compiler split every pair into bytes and re-pack them (5 PRMT per 4 code
    bytes); the 2-byte one (asm=2) takes the pair as loaded: one PRMT per pair in the dequantization, plus the
    scales' byte extraction."""
    cfg = kern.FwdConfig(2, 64, 128, 1, 2, 8, fused=False)
    four, two = aot.fwd_loop_profile(cfg), aot.fwd_loop_profile(cfg._replace(asm=2))
    for prof in (four, two):
        assert prof["opcodes"].get("HGMMA", 0) > 0
    code_pairs = cfg.bn * 64 // (cfg.num_warps * 32) // 2  # 2-byte code pairs per thread and loop step
    assert four["opcodes"]["PRMT"] >= 4 * code_pairs
    assert two["opcodes"]["PRMT"] <= 2 * code_pairs
    assert two["loop_instructions"] < 0.9 * four["loop_instructions"]


def test_one_dot_keeps_the_register_operand_wgmma_in_flight():
    """Two dots per chunk (one per 64-element half) into one accumulator: Triton waits for the first dot's wgmma to
    finish (0 pending) before issuing the second, in every loop step. One dot over the chunk's 128 elements
    (``one_dot``, ``_halves_to_k``): no wait for 0 pending in the loop, so the step's wgmma runs under the next step's
    loads and dequantization; and the halves' concatenation is register relabelling (same PRMT / HMUL2 counts)."""
    for cfg in (kern.FwdConfig(2, 64, 128, 1, 2, 8, asm=2), kern.FwdConfig(2, 256, 128, 1, 1, 8, asm=2)):
        one = aot.fwd_loop_profile(cfg._replace(one_dot=True))
        two = aot.fwd_loop_profile(cfg._replace(one_dot=False))
        assert 0 in two["wgmma_waits"], two["wgmma_waits"]
        assert one["wgmma_waits"] and 0 not in one["wgmma_waits"], one["wgmma_waits"]
        for op in ("PRMT", "HMUL2", "HGMMA"):
            assert one["opcodes"][op] == two["opcodes"][op], (cfg, op, one["opcodes"], two["opcodes"])
    # The default where it measured faster (one_dot's docstring): 128-row register-operand tiles, MODE 1 wgmma tiles.
    assert kern.one_dot(kern.FwdConfig(2, 128, 128, 1, 2, 8, asm=2)) and kern.one_dot(kern.FwdConfig(1, 64, 128))
    assert not kern.one_dot(kern.FwdConfig(2, 64, 128, 1, 2, 8, asm=2))
    assert not kern.one_dot(kern.FwdConfig(2, 8, 128, 1, 2, 4))


def test_decode_tile_converts_two_scales_per_instruction():
    """In the 8 x 128 decode tile each thread converts the E5M3 scales of 4 W rows x 16 groups per loop step (the
    mma.sync operand layout spreads a thread over every group of its rows). One shift-add (LEA) per scale made the
    scales about 0.5 instructions per weight; two per multiply-add (``_SCALES_ASM``) leaves the LEAs to addressing."""
    cfg = kern.FwdConfig(2, 8, 128, 2, 2, 4)
    prof = aot.fwd_loop_profile(cfg)
    rows_per_thread = cfg.bn // (16 * cfg.num_warps) * 2  # m16 blocks per warp x the 2 rows a thread holds in each
    scales_per_thread = rows_per_thread * cfg.ch * 8
    assert prof["opcodes"].get("LEA", 0) < 0.75 * scales_per_thread, prof["opcodes"]

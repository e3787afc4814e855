"""The GPU benchmarks' host-side logic, on CPU: benchmarks/read_pattern.py's box layouts and grids,
benchmarks/gemm_ws.py's whole-wave splits, decode_nvfp4.py's profile sums, and benchmarks/ws_probe.py's edits of the
kernel source (which must fail loudly, not silently time the unedited kernel, when the kernel's text moves)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses look their module up there
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_tile_major_boxes_hold_the_row_major_boxes():
    rp = _load("read_pattern")
    codes = torch.randint(0, 256, (192, 448), dtype=torch.uint8)
    for box in (64, 448 // 7):
        tiled = rp.tile_major(codes, box)
        boxes = 448 // box
        assert tiled.shape == (192 * boxes, box)
        for tile in range(3):
            for b in range(boxes):
                r0 = (tile * boxes + b) * 64
                assert torch.equal(tiled[r0:r0 + 64], codes[tile * 64:(tile + 1) * 64, b * box:(b + 1) * box])


def test_read_grid_covers_every_box_once():
    rp = _load("read_pattern")
    assert rp.grid_of(37888, 3584, 64, 1) == (592, 1, 28)
    tiles, parts, per = rp.grid_of(3584, 18944, 64, 8)  # 148 boxes a row: runs of 19, the last one 15
    assert (tiles, parts, per) == (56, 8, 19)
    assert sum(min(per, 148 - p * per) for p in range(parts)) == 148
    with pytest.raises(ValueError, match="multiple of 64"):
        rp.grid_of(100, 3584, 64, 1)
    with pytest.raises(ValueError, match="empty"):
        rp.grid_of(64, 512, 64, 4 + 3)  # 4 boxes in 7 runs
    # The input gradient's order: a program per 64-byte box column (28 of 7B gate_up's), walking its 592 row tiles.
    assert rp.grid_of(37888, 3584, 64, 16, "n") == (28, 16, 37)
    assert rp.grid_of(3584, 18944, 64, 1, "n") == (148, 1, 56)
    with pytest.raises(ValueError, match="order"):
        rp.grid_of(3584, 18944, 64, 1, "m")


def test_fill_searches_time_both_split_sums_at_decode_m():
    """At M <= 16 every split candidate comes with its partials summed in the kernel and by the second kernel (the
    rule that picks one is run 4's; run 23 found the second kernel faster at M = 16 on narrow layers), both
    directions; at M = 32 the input gradient keeps the rule's."""
    gw = _load("gemm_ws")
    for m in (1, 16):
        for cands, split in ((gw.bwd_fill_candidates(m, 5120, 5120, 132), "split_n"),
                             (gw.fill_candidates(m, 5120, 5120, 132), "split_k")):
            table = (gw.ws.TUNED_BWD.get((m, 5120, 5120)),)  # the shipped config, a candidate as it is
            split_cfgs = [c for c in cands if getattr(c, split) > 1 and not c.stream_k and c not in table]
            assert split_cfgs
            assert all(c._replace(fused=not c.fused) in cands for c in split_cfgs), m
    assert not any(c.fused for c in gw.bwd_fill_candidates(32, 5120, 5120, 132))


def test_wave_splits_fill_whole_waves():
    gw = _load("gemm_ws")
    # 7B down at M = 8: 56 tiles of 64 rows, three CTAs per SM on 132 SMs -> 7 splits (392 of 396 slots).
    assert gw.wave_splits(56, 396, 148)[0] == 7
    # 7B gate_up: 592 tiles -> 2 splits (1184 CTAs, 2.99 waves), not 3 (4.48 waves).
    splits = gw.wave_splits(592, 396, 28)
    assert 2 in splits and 3 not in splits
    for tiles, slots, chunks in ((56, 396, 148), (72, 396, 28), (80, 528, 40), (864, 264, 40)):
        for sp in gw.wave_splits(tiles, slots, chunks):
            assert 2 <= sp <= min(16, chunks // 2)
            waves = tiles * sp / slots
            assert waves / -(-waves // 1) >= 0.9


def test_fill_candidates_are_configs_the_kernel_takes():
    gw = _load("gemm_ws")
    from qerl.kernels import nvfp4_gemm_ws as ws

    for m, n, k in ((8, 3584, 18944), (16, 37888, 3584), (1, 5120, 27648)):
        cands = gw.candidates(m, n, k, 132, tile_set="fill", words=True)
        assert cands and len(set(cands)) == len(cands)
        assert ws.TUNED_WORDS[(m, n, k)] in cands  # the table's own config is measured alongside
        for c in cands:
            assert not (c.stream_k and (c.in_flight or c.split_k != 1))
            assert c.stream_k in (0, 1, 2, 3, 4)
            assert c.split_k <= k // 128


def test_warm_shards_split_a_search_into_disjoint_parts_that_cover_it():
    """``gemm_ws.py --warm-only --warm-shard i/n``: every config of a search falls in exactly one of the n shards, the
    same in every process (a checksum of the config, not Python's per-process hash), and the shards share the work."""
    gw = _load("gemm_ws")
    cfgs = {c for m in (16, 64, 128) for n, k in ((4608, 3584), (55296, 5120))
            for c in gw.candidates(m, n, k, 132, tile_set="default", words=True, stream_k=True, dp_waves=True)}
    n = 14
    shards = [{c for c in cfgs if gw.warm_shard(c, i, n)} for i in range(n)]
    assert sum(map(len, shards)) == len(cfgs) and set().union(*shards) == cfgs
    assert max(map(len, shards)) < len(cfgs) / 3  # no shard holds most of the search
    # Another process (another string-hash seed) puts each config in the same shard.
    code = ("import ast, sys; sys.path.insert(0, 'benchmarks'); import gemm_ws as g; from qerl.kernels import "
            "nvfp4_gemm_ws as ws; cfgs = [ws.WsConfig(*c) for c in ast.literal_eval(sys.argv[1])]; "
            "print([next(i for i in range(14) if g.warm_shard(c, i, 14)) for c in cfgs])")
    order = sorted(cfgs, key=repr)
    got = subprocess.run([sys.executable, "-c", code, repr([tuple(c) for c in order])], cwd=ROOT, check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout
    assert ast.literal_eval(got.strip().splitlines()[-1]) == [next(i for i in range(n) if c in shards[i])
                                                              for c in order]


def test_sk_in_flight_candidates_hold_m_on_one_consumer_in_flight():
    gw = _load("gemm_ws")
    from qerl.kernels import nvfp4_gemm_ws as ws

    for m, n, k in ((1, 4608, 3584), (16, 55296, 5120), (32, 3584, 3584), (64, 4608, 3584), (100, 5120, 5120),
                    (128, 37888, 3584)):
        cands = gw.candidates(m, n, k, 132, tile_set="sk_in_flight", words=True)
        assert len(set(cands)) == len(cands) and ws.TUNED_WORDS.get((m, n, k)) in cands + [None]
        sk = gw.sk_in_flight_candidates(m, n, k, 132)
        assert sk and set(sk) <= set(cands)
        for c in sk:
            assert c.in_flight and c.consumers == 1 and c.split_k == 1 and c.stream_k in (1, 2)
            assert c.bm >= m or (c.bm == 64 and m > 64)  # one tile of rows holds M (or two of 64 at M = 65-128)
            # Two CTAs per SM on 96 / 128 registers, one uncapped or on 168, each with its ring in shared memory.
            assert (c.stream_k == 2) == (c.maxnreg in (96, 128))
            assert c.stream_k * (ws.fwd_ring_bytes(c) + 2048) <= ws.SMEM_PER_SM
            tiles = -(-m // c.bm) * -(-n // c.bn)
            assert not c.dp_waves or tiles >= c.stream_k * 132
        # Wide layers have whole waves of tiles to run one per CTA.
        assert any(c.dp_waves for c in sk) == (n >= 37888 or (n >= 5120 and m > 64))


def test_deep_ring_candidates_fit_shared_memory_for_their_ctas_per_sm():
    """``--tile-set deep`` (run 42): every candidate holds M in one tile of rows, is a config ``ws_matmul`` takes, and
    fits as many rings per SM as its stream-K CTAs or register cap put there; the table's config leads."""
    gw = _load("gemm_ws")
    from qerl.kernels import nvfp4_gemm_ws as ws

    for m in (1, 8, 16, 32):
        deep = gw.deep_ring_candidates(m)
        assert len(set(deep)) == len(deep) and any(c.stages >= 16 for c in deep)
        for c in deep:
            assert c.bm == next(b for b in (8, 16, 32) if b >= m) and c.consumers == 1 and c.split_k == 1
            assert not (c.in_flight and c.stream_k) and c.stream_k in (0, 1, 2)
            per_sm = c.stream_k or {None: 1, 80: 3}[c.maxnreg]
            assert per_sm * (ws.fwd_ring_bytes(c) + 2048) <= ws.SMEM_PER_SM
        cands = gw.candidates(m, 37888, 3584, 132, tile_set="deep", words=True)
        assert cands[0] == ws.TUNED_WORDS[(m, 37888, 3584)] and set(deep) <= set(cands)
    # 30 stages of 16-row tiles do not fit one CTA's shared memory: left out.
    assert not any(c.stages == 30 for c in gw.deep_ring_candidates(16))


def test_bf16_copies_cycle_past_three_l2_sizes():
    """The benchmarks' BF16 weight copies (``gemm_nvfp4.bf16_copies``): the weight itself and clones in separate
    storage, at least three L2 sizes in all, so that replaying calls over them L2 serves none."""
    gn = _load("gemm_nvfp4")
    w = torch.zeros(64, 64, dtype=torch.bfloat16)  # 8 KiB
    copies = gn.bf16_copies(w, 10_000)
    assert len(copies) == 4 and copies[0] is w and len({c.data_ptr() for c in copies}) == 4
    assert sum(c.nbytes for c in copies) >= 3 * 10_000 > sum(c.nbytes for c in copies[1:])
    one = gn.bf16_copies(w, 100)
    assert len(one) == 1 and one[0] is w


def test_l2_promotion_hook_points_are_where_the_script_expects_them():
    """benchmarks/tma_l2_promotion.py wraps Triton's ``make_tensordesc_arg`` (looked up by name at each launch) and
    rewrites the CUtensorMap at the end of Triton's descriptor object: this fails when Triton moves either (the
    script also checks its encoding against Triton's bit for bit on the GPU)."""
    import inspect

    from triton.backends.nvidia import driver as nv

    assert list(inspect.signature(nv.make_tensordesc_arg).parameters) == ["arg", "metadata"]
    assert "make_tensordesc_arg(arg, tensordesc_meta[tensordesc_idx])" in inspect.getsource(nv.wrap_handle_tensordesc)
    src = (Path(nv.__file__).parent / "driver.c").read_text()
    assert "_Alignas(128) CUtensorMap tensorMap;" in src and "CU_TENSOR_MAP_L2_PROMOTION_L2_128B" in src
    assert _load("tma_l2_promotion").TRITON_PROMOTION == "128B"


def test_cell_operands_callers_unpack_every_field():
    """``gemm_ws.cell_operands`` builds a cell on CUDA only; its callers unpack its tuple, so each must name as many
    targets as ``Cell`` has fields, in the same order (checked on their source)."""
    gw = _load("gemm_ws")
    fields = list(gw.Cell._fields)
    seen = 0
    for name in ("routes", "slab_plans", "tma_l2_promotion"):
        tree = ast.parse((ROOT / "benchmarks" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and getattr(node.value.func, "id", None) == "cell_operands":
                assert [t.id for t in node.targets[0].elts] == fields, name
                seen += 1
    assert seen == 3


def test_l2_promotion_descriptor_parameters_follow_tritons_order():
    """benchmarks/tma_l2_promotion.py re-encodes Triton's descriptors from the launcher's arguments: dims, byte
    strides and box innermost first, as Triton 3.6's ``fill_tma_descriptor`` builds them (on the GPU the script also
    checks its 128-byte encoding against Triton's bit for bit before timing)."""
    tp = _load("tma_l2_promotion")
    # W's code bytes [N, K / 2] in boxes of [64 rows, 64 bytes]
    assert tp.encode_params([37888, 1792], [1792, 1], [64, 64], 1) == ([1792, 37888], [1792, 37888 * 1792], [64, 64])
    # X [M, K] bf16 in boxes of [8, 64]: 2-byte elements
    assert tp.encode_params([8, 3584], [3584, 1], [8, 64], 2) == ([3584, 8], [7168, 8 * 7168], [64, 8])
    # fp4-padded operands double the innermost dim; a 1-D descriptor's one stride is its size in bytes
    assert tp.encode_params([4, 32], [32, 1], [4, 16], 1, fp4_padded=True)[0] == [64, 4]
    assert tp.encode_params([100], [1], [16], 4) == ([100], [400], [16])
    assert tp.PROMOTIONS["128B"] == 2 and tp.TRITON_PROMOTION == "128B"


def test_stream_k_keeps_a_consumers_chunks_in_flight_at_the_searched_caps():
    """Stream-K with ``in_flight`` (run 34): at the register caps the search takes (benchmarks/gemm_ws.py
    ``SK_IN_FLIGHT_TILES``) the consumer waits for two pending wgmma groups in its chunk loop, ptxas serializes none
    and spills nothing there, within the cap; with chunks retired one by one the same tiles wait for none. On 80
    registers (the one-tile-per-CTA kernel's decode cap) the stream-K consumer's loop over tiles leaves ptxas too
    few registers: it serializes the wgmmas, which is why the search does not take that cap."""
    pytest.importorskip("triton.experimental.gluon")
    from qerl.kernels import aot
    from qerl.kernels import nvfp4_gemm_ws as ws

    if aot.ptxas_path() is None:
        pytest.skip("this Triton build ships no ptxas")
    gw = _load("gemm_ws")
    for bm, tiles in gw.SK_IN_FLIGHT_TILES.items():
        for bn, st, reg, ctas in tiles:
            cfg = ws.WsConfig(bm, bn, st, 1, 1, True, reg, stream_k=ctas)
            r = aot.ws_report(cfg, words=True)
            assert not r["wgmma_serialized"] and r["wgmma_waits"] == [0, 2], (cfg, r)
            assert r["registers"] <= (reg or 255), (cfg, r)
            loop = r["chunk_loop_opcodes"]
            # Two chunks a trip: 2 x 8 k-steps of wgmma per 64 rows of W.
            assert loop.get("HGMMA") == bn // 4 and not loop.get("LDL") and not loop.get("STL"), (cfg, loop)
    assert aot.ws_report(ws.WsConfig(16, 64, 6, 1, 1, False, 96, stream_k=2), words=True)["wgmma_waits"] == [0]
    assert aot.ws_report(ws.WsConfig(16, 64, 6, 1, 1, True, 80, stream_k=3), words=True)["wgmma_serialized"]


def test_few_wave_splits_stay_within_two_waves():
    gw = _load("gemm_ws")
    # 7B down's input gradient at M = 1: 148 chunk tiles, 56 steps of 64 rows, four CTAs per SM on 132 SMs (528
    # slots): the earlier searches never split it (more tiles than SMs); 4 splits give 592 CTAs in 1.12 waves and
    # are the smallest split that occupies every slot.
    splits = gw.few_wave_splits(148, 528, 56, True, 4)
    assert 4 in splits
    for tiles, slots, steps, even, run in ((148, 528, 56, True, 4), (40, 528, 432, True, 4), (72, 132, 28, False, 2),
                                           (28, 264, 80, True, 4)):
        for sp in gw.few_wave_splits(tiles, slots, steps, even, run):
            assert 2 <= sp <= steps // run and tiles * sp <= 2 * slots
            assert not even or steps % sp == 0
    assert gw.few_wave_splits(600, 132, 56, True, 4) == []  # already more than two waves unsplit


def test_fill_search_candidates_for_the_input_gradient_and_mid_m_forward():
    gw = _load("gemm_ws")
    from qerl.kernels import nvfp4_gemm_ws as ws

    for m, n, k in ((1, 3584, 18944), (16, 27648, 5120), (32, 4608, 3584), (64, 55296, 5120), (128, 5120, 27648)):
        cands = gw.bwd_candidates(m, n, k, 132, tile_set="fill")
        assert cands and len(set(cands)) == len(cands)
        if ws.TUNED_BWD.get((m, n, k)) is not None:
            assert ws.TUNED_BWD[(m, n, k)] in cands  # the table's own config is measured alongside
        assert any(c.in_flight for c in cands) and any(not c.in_flight for c in cands)
        for c in cands:
            assert not (c.in_flight and c.consumers == 2) and not (c.stream_k and c.split_n != 1)
            assert c.bm >= min(m, 64) or c.bm == max(8, 1 << max(0, (m - 1).bit_length()))
            assert 1 <= c.split_n <= (-(-n // 64)) // 4  # runs of at least four steps (as even as the count allows)
            if c.in_flight:  # only at the register caps where ptxas keeps the wgmmas in flight
                assert c.maxnreg == {8: 80, 16: 80, 32: 96, 64: 128, 128: None}[c.bm] or c.maxnreg == 128
        assert any(c.stream_k for c in cands) == (m <= 32)
    for m, n, k, split in ((64, 4608, 3584, True), (128, 55296, 5120, False)):
        cands = gw.candidates(m, n, k, 132, tile_set="fill")
        assert ws.TUNED[(m, n, k)] in cands and len(set(cands)) == len(cands)
        assert all(c.bm <= max(64, m) for c in cands)
        # 7B qkv's 72 / 144 tiles leave SMs idle, so splits are tried; 32B gate_up's hundreds of tiles fill >= 2 waves.
        assert any(c.split_k > 1 for c in cands) == split


def test_probe_variants_edit_the_kernel_source():
    wp = _load("ws_probe")
    src = (ROOT / "qerl/kernels/nvfp4_gemm_ws.py").read_text()
    assert wp.variant_source(src, "full") == src
    no_compute = wp.variant_source(src, "no_compute")
    step = no_compute[no_compute.index("    def _mma_step("):no_compute.index("    def _mma_partition(")]
    assert "warpgroup_mma(" not in step and "mbarrier.wait(ready" in step and "mbarrier.arrive(empty" in step
    # (The loader's loop; the probes launch without PDL, whose first copies come before it: ``_load_worker``.)
    no_x = wp.variant_source(src, "no_x")
    loader = no_x[no_x.index("    def _load_worker("):no_x.index("    def _mma_step(")]
    loop = loader[loader.index("for i in range(first, n_chunks):"):]
    assert "_x_box(x_desc" not in loop and "w_desc, [off_n" in loop and "2 * x_desc" not in loader
    no_scales = wp.variant_source(src, "no_scales")
    loader = no_scales[no_scales.index("    def _load_worker("):no_scales.index("    def _mma_step(")]
    loop = loader[loader.index("for i in range(first, n_chunks):"):]
    assert "s_desc, [c *" not in loop and "_x_box(x_desc" in loop and "+ s_desc.block_type" not in loader
    codes_only = wp.variant_source(src, "codes_only")
    loader = codes_only[codes_only.index("    def _load_worker("):codes_only.index("    def _mma_step(")]
    loop = loader[loader.index("for i in range(first, n_chunks):"):]
    assert loop.count("tma.async_copy_global_to_shared(") == 1 and "nbytes: gl.constexpr = w_desc.block_type.nbytes\n" in loader
    # Run 30's: the wgmmas on code bytes without their decode; the tile's stores (registers and TMA) left out; every
    # tile stored from registers.
    no_dequant = wp.variant_source(src, "no_dequant")
    step = no_dequant[no_dequant.index("    def _mma_step("):no_dequant.index("    def _mma_partition(")]
    assert "_DQ_PAIR_ASM" not in step and "_DQ_WORD_ASM" not in step and step.count("warpgroup_mma(") == 2
    no_store = wp.variant_source(src, "no_store")
    store = no_store[no_store.index("    def _store_tile("):no_store.index("    def _epilogue_operands(")]
    assert "offs_n[:, None], out.to(gl.bfloat16)" not in store and "gl.sum(gl.sum(out" in store
    assert "        elif False:\n" in no_store and "        elif TMA_STORE:\n" not in no_store
    assert "\nTMA_STORE = False\n" in wp.variant_source(src, "regs_store") and "\nTMA_STORE = True\n" in src
    # Run 32's: the stream-K consumer without its split tiles' parts (none stored, waited for or added).
    sk = wp.variant_source(src, "sk_no_fixup")
    consumer = sk[sk.index("    def _sk_mma_partition("):sk.index("    def _rows_own(")]
    assert "_sk_put_part(" not in consumer and "_sk_add_parts(" not in consumer and consumer.count("acc * 1.0") == 3
    assert "_sk_put_part(" in src[src.index("    def _sk_mma_partition("):src.index("    def _rows_own(")]
    for variant, gone in (("sk_no_wait", "while seen < count:"),
                          ("sk_no_add", "acc += gl.load(part_ptr"), ("sk_no_add", "return gl.load(part_ptr + _sk_part_offsets(like"),
                          ("sk_no_put", "gl.store(part_ptr + _sk_part_offsets(acc, slot), acc)")):
        assert gone in src and gone not in wp.variant_source(src, variant), variant
    with pytest.raises(RuntimeError, match="anchor"):
        wp.variant_source(src.replace("is_async=True)\n        acc = warpgroup_mma(w_hi", "is_async=True)\n"
                                      "        acc = warpgroup_mma( w_hi"), "no_compute")


def test_probe_config_edits():
    from qerl.kernels import nvfp4_gemm_ws as ws

    wp = _load("ws_probe")
    cfg = ws.WsBwdConfig(8, 6, 16, 64)
    assert wp.replaced(cfg, "") is cfg
    assert wp.replaced(cfg, "stages=8,maxnreg=None,fused=True") == ws.WsBwdConfig(8, 8, 16, None, True)
    with pytest.raises(ValueError, match="not a field"):
        wp.replaced(cfg, "split_k=2")


def test_probe_input_gradient_variants_edit_the_kernel_source():
    wp = _load("ws_probe")
    src = (ROOT / "qerl/kernels/nvfp4_gemm_ws.py").read_text()

    def part(text: str, start: str, end: str) -> str:
        return text[text.index(start):text.index(end)]

    assert wp.bwd_variant_source(src, "full") == src
    no_compute = wp.bwd_variant_source(src, "no_compute")
    step = part(no_compute, "    def _bwd_step(", "    def _bwd_mma_partition(")
    assert "warpgroup_mma(" not in step and "_bwd_codes(" not in step
    assert "mbarrier.wait(ready" in step and "mbarrier.arrive(empty.index(s))" in step
    assert "_TRANSPOSE_ASM" in part(no_compute, "    def _bwd_scale_worker(", "    def _codes_layout_bwd(")
    copies = wp.bwd_variant_source(src, "copies_only")
    scale_warp = part(copies, "    def _bwd_scale_worker(", "    def _codes_layout_bwd(")
    assert "_TRANSPOSE_ASM" not in scale_warp and "mbarrier.wait(s_ready" in scale_warp
    assert "mbarrier.arrive(ready" in scale_warp
    codes = wp.bwd_variant_source(src, "codes_only")
    copy_step = part(codes, "    def _bwd_copy_step(", "    def _bwd_scale_worker(")
    assert copy_step.count("tma.async_copy_global_to_shared(") == 1 and "mbarrier.arrive(s_ready" in copy_step
    direct = wp.bwd_variant_source(src, "codes_direct")
    assert "for i in range(0):" in part(direct, "    def _bwd_scale_worker(", "    def _codes_layout_bwd(")
    assert "mbarrier.init(ready.index(s), count=1)" in part(direct, "    def _bwd_stages(", "    def _load_worker(")
    assert "n_steps = 0 * (" in wp.bwd_variant_source(src, "empty")
    assert "chunks_per_split = 0 * (" in wp.variant_source(src, "empty")
    # Only the one-consumer step is cut; the two-consumer half step keeps its work.
    assert "warpgroup_mma(" in part(codes, "    def _bwd_half_step(", "    def _bwd_half_partition(")
    with pytest.raises(RuntimeError, match="anchor"):
        wp.bwd_variant_source(src.replace("        codes = _bwd_codes(w_smem, s)\n", "        codes = _bwd_codes(w_smem,s)\n"),
                              "no_compute")


def test_kernel_times_sum_by_kind_per_step():
    """decode_nvfp4.kernel_times (used by decode_nvfp4.py and rollout_hf.py --profile): each kernel's GPU time per
    step, summed by kind; events without GPU time (host-side ops) left out."""
    from types import SimpleNamespace

    dn = _load("decode_nvfp4")
    events = [SimpleNamespace(key="_fwd_kernel", self_device_time_total=600.0, count=6),
              SimpleNamespace(key="nvjet_sm90_tst_384x8_64x4_2x1_v_bz_TNT", self_device_time_total=90.0, count=3),
              SimpleNamespace(key="cudnn_generated_fort_native_sdpa_sm80_flash_fprop", self_device_time_total=30.0,
                              count=3),
              SimpleNamespace(key="triton_poi_fused_mul_silu_8", self_device_time_total=12.0, count=3),
              SimpleNamespace(key="aten::mm", self_device_time_total=0.0, count=3)]
    kinds, kernels = dn.kernel_times(SimpleNamespace(key_averages=lambda: events), steps=3)
    assert kinds == {"nvfp4_gemm": 200.0, "cublas_gemm": 30.0, "attention": 10.0, "fused_elementwise": 4.0}
    assert [k["name"] for k in kernels] == [e.key for e in events[:4]]
    assert kernels[0]["calls_per_step"] == 2.0


def test_bounds_floors_and_verdicts():
    """benchmarks/bounds.py: an NVFP4 product's minimal traffic, its bound over BF16 and the verdict per target."""
    bd = _load("bounds")
    # 7B gate_up forward at M = 8: 4-bit codes + one scale byte per 16 weights, X in, Y out (bytes).
    n, k = 37888, 3584
    assert bd.traffic(8, n, k, "fwd") == (n * k // 2 + n * k // 16 + 2 * 8 * k, 2 * 8 * n)
    assert bd.traffic(8, n, k, "bwd") == (n * k // 2 + n * k // 16 + 2 * 8 * n, 2 * 8 * k)
    assert [bd.target(m) for m in (1, 5, 16, 17, 32, 64, 128, 256, 1024, 4096)] == [3.0, 3.0, 3.0, None, None, 2.5, 1.5,
                                                                                   None, 0.9, 0.9]
    assert bd.spec_of("NVIDIA H200") == (4.8e12, 989.4e12) and bd.spec_of("NVIDIA A100") is None

    # A memory-bound cell: BF16 70 us, the streaming floor 20 us, the MMA floor negligible -> 3.5x at best.
    row = bd.cell(8, n, k, "fwd", 70e-6, 20e-6, 800e12, bd.spec_of("H200"))
    assert row["bound_measured"] == pytest.approx(3.5)
    assert row["mma_us"] == pytest.approx(2 * 8 * n * k / 800e12 * 1e6)
    io_spec = sum(bd.traffic(8, n, k, "fwd")) / 4.8e12
    assert row["bound_spec"] == pytest.approx(70e-6 / io_spec)
    # A compute-bound cell: the MMA floor decides.
    big = bd.cell(1024, n, k, "fwd", 400e-6, 100e-6, 800e12, None)
    assert big["bound_measured"] == pytest.approx(400e-6 / (2 * 1024 * n * k / 800e12))
    assert "bound_spec" not in big

    def verdict(ratio, measured, spec=None, m=8):
        r = {"target": bd.target(m), "shipped_over_bf16": ratio, "bound_measured": measured}
        if spec is not None:
            r["bound_spec"] = spec
        return bd.verdict(r)

    assert verdict(3.1, 3.5) == "met"
    assert verdict(2.6, 3.5, 5.0) == "open"
    assert verdict(2.6, 2.8, 5.0) == "beyond measured"
    assert verdict(2.6, 2.8, 2.9) == "beyond spec"
    assert verdict(1.0, 2.0, m=32) == "-"


def test_bounds_rows_and_table():
    bd = _load("bounds")
    raw = [{"model": "7b", "layer": "qkv", "dir": "fwd", "m": m, "n": 4608, "k": 3584, "_bf16_s": 11e-6,
            "_io_s": 4e-6, "io_variant": "block 2048 x 4 warps, 132 programs", "shipped_us": 8.0,
            "shipped_layout": "words", "shipped_over_bf16": 11 / 8} for m in (8, 32)]
    rows = bd.finish(raw, 700e12, bd.spec_of("H100"))
    assert all(not any(key.startswith("_") for key in r) for r in rows)
    assert rows[0]["bound_measured"] == pytest.approx(11 / 4) and rows[0]["verdict"] == "beyond measured"
    assert rows[0]["shipped_of_bound"] == pytest.approx((11 / 8) / (11 / 4))
    assert rows[1]["verdict"] == "-"
    meta = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-27", "peak_tflops": 700.0, "command": "python x",
            "spec": {"dram_bytes_s": 3.35e12, "bf16_flops": 989.4e12}}
    table = bd.markdown(rows, meta).splitlines()
    cells = [line for line in table if line.startswith("| 7b | qkv | fwd |")]
    assert len(cells) == 2 and "| 2.75x |" in cells[0] and cells[0].endswith("| beyond measured |")
    # The summary counts only cells with a target, by verdict.
    more = bd.finish([dict(raw[0], m=16, shipped_us=3.5, shipped_over_bf16=11 / 3.5),
                      dict(raw[0], m=1, _io_s=3e-6, shipped_over_bf16=2.0)], 700e12, bd.spec_of("H100"))
    summary = bd.summarize(rows + more)
    assert list(summary) == [("fwd", 1), ("fwd", 8), ("fwd", 16)]
    assert summary[("fwd", 16)]["met"] == 1 and summary[("fwd", 1)]["open"] == 1
    assert summary[("fwd", 8)]["beyond measured"] == 1 and summary[("fwd", 8)]["cells"] == 1
    assert summary[("fwd", 8)]["shipped_geomean"] == pytest.approx(11 / 8)
    assert "| fwd | 8 | 3.0x | 1 | 0 | 0 | 1 | 0 | 1.38x | 2.75x |" in bd.markdown(rows, meta)


def test_bounds_streaming_kernel_reads_every_byte():
    """The streaming kernel (bounds.py's traffic floor) under Triton's CPU interpreter: every program count of the
    launches it times reads each input word once (the programs' XORs combine to the input's) and writes the output."""
    from conftest import run_interpreted

    report = run_interpreted("""
import json, sys, torch
sys.path.insert(0, "benchmarks")
import bounds as bd
torch.manual_seed(0)
res = []
for n_in, n_out, block in ((5000, 300, 256), (700, 4100, 512)):
    src = torch.randint(-2**31, 2**31 - 1, (n_in,), dtype=torch.int32)
    for grid in bd.stream_grids(n_in, n_out, block, sms=3):
        dst = torch.full((n_out + 7,), 5, dtype=torch.int32)
        sums = torch.empty(grid, dtype=torch.int32)
        bd.launch_stream(src, dst, n_out, sums, block, 4, stages=3)
        res.append([grid, bd.xor_all(sums) == bd.xor_all(src), bool((dst[:n_out] == 0).all()),
                    bool((dst[n_out:] == 5).all())])
print(json.dumps(res))
""")
    assert len(report) >= 4 and {grid for grid, *_ in report} == {3, 6, 9, 12, 20}
    assert all(ok_sum and ok_out and untouched for _, ok_sum, ok_out, untouched in report), report


def test_slab_plans_are_distinct_and_overlap_on_two_slabs_at_least(monkeypatch):
    """benchmarks/slab_plans.py times each distinct cut once: overlapped plans have two slabs or more, column slabs are
    offered for the input gradient only, and each plan's slab count is the number of products ``_slab_products``
    runs for it (here on CPU with the dequantization stubbed: the overlapped stream needs CUDA, so those plans are cut
    with their two-slab floor on one stream)."""
    from types import SimpleNamespace

    from qerl.kernels import nvfp4_gemm as kern

    monkeypatch.setattr(kern, "dequantize_rows", lambda w, row0, rows, out, **kw: out)
    monkeypatch.setattr(kern, "SCRATCH_ELEMENTS", 2**16)  # small buffers: the cuts below allocate them on CPU
    sp = _load("slab_plans")
    for n, k in ((4608, 3584 // 8), (37888 // 8, 3584 // 8), (5120 // 8, 27648 // 8)):
        w = SimpleNamespace(n=n, k=k)
        fwd, bwd = sp.plans(kern, w, "fwd"), sp.plans(kern, w, "bwd")
        assert {p["along"] for p in fwd} == {"n"} and {p["along"] for p in bwd} == {"n", "k"}
        for plans in (fwd, bwd):
            keys = [(p["along"], p["slabs"], p["overlap"]) for p in plans]
            assert len(keys) == len(set(keys))
            for p in plans:
                assert p["slabs"] >= 2 or not p["overlap"]
                cuts = []
                kern._slab_products(w, torch.device("cpu"), lambda start, size, block, cuts=cuts: cuts.append(size),
                                    False, max(p["min_count"], 2 if p["overlap"] else 1), p["along"])
                assert len(cuts) == p["slabs"] and sum(cuts) == (n if p["along"] == "n" else k)
    # A weight that fits one buffer whole: one slab on one stream, two when overlapped.
    whole = sp.plans(kern, SimpleNamespace(n=256, k=128), "fwd")
    assert whole[0] == {"along": "n", "slabs": 1, "overlap": False, "min_count": 1}
    assert {"along": "n", "slabs": 2, "overlap": True, "min_count": 1} in whole


def test_layer_cells_take_each_layer_shape_once():
    """gemm_nvfp4.layer_cells, the grid routes.py and partial_tiles.py walk: every (direction, M) of each asked layer,
    14B / 32B qkv and o (the same shapes) once."""
    import argparse

    gn = _load("gemm_nvfp4")
    p = argparse.ArgumentParser()
    gn.add_layer_args(p, "136,264")
    cells = list(gn.layer_cells(p.parse_args(["--layers", "qkv,down", "--dirs", "fwd,bwd"])))
    shapes = {(layer, n, k) for model in ("7b", "14b", "32b") for layer, n, k in gn.SHAPES[model]
              if layer in ("qkv", "down")}
    assert len(cells) == len(shapes) * 2 * 2 == len(set(cells))
    assert {(c[1], c[2], c[3]) for c in cells} == shapes and {c[4] for c in cells} == {"fwd", "bwd"}
    assert [c[0] for c in cells if c[1] == "qkv"].count("32b") == 0  # 32B qkv is 14B's shape


def test_sustained_alt_configs_apply_only_inside_and_bad_files_stop_first(tmp_path, monkeypatch, capsys):
    """benchmarks/sustained.py ``--alt-configs`` (run 33): inside ``tables_with`` the dispatch's tables hold the
    file's entries (a declined key, a forward config), outside them their own again, after an error inside too; a
    missing file stops ``main`` with one message naming the option and the fix, before any GPU work."""
    from qerl.kernels import nvfp4_gemm as kern
    from qerl.kernels import nvfp4_gemm_ws as ws

    su = _load("sustained")
    path = tmp_path / "alt.json"
    path.write_text(json.dumps({"ws|1024|3584|18944": None,
                                "wsbwd|4096|5120|27648": {"bm": 256, "stages": 4, "stream_k": 1, "consumers": 2}}))
    before = (dict(ws.TUNED), dict(ws.TUNED_BWD), dict(kern.TUNED))
    assert ws.TUNED[(1024, 3584, 18944)] is not None and ws.TUNED_BWD[(4096, 5120, 27648)] is None
    with pytest.raises(RuntimeError, match="inside"):
        with su.tables_with(str(path)):
            assert ws.TUNED[(1024, 3584, 18944)] is None
            assert ws.TUNED_BWD[(4096, 5120, 27648)] == ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2)
            raise RuntimeError("inside")
    assert (ws.TUNED, ws.TUNED_BWD, kern.TUNED) == before
    monkeypatch.setattr(sys, "argv", ["sustained.py", "--alt-configs", str(tmp_path / "missing.json"),
                                      "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit):
        su.main()
    err = capsys.readouterr().err
    assert "--alt-configs" in err and "tuned_configs.json" in err and not (tmp_path / "out").exists()


def test_gemm_nvfp4_reports_the_default_dispatch_beside_the_triton_kernels():
    """benchmarks/gemm_nvfp4.py (run 33): each row's default-dispatch columns ("pairs"; the forward also on "words")
    next to the Triton tile kernels' in the markdown, and the summary's geomean / min per column over the shapes, "-"
    where a column has no value (no Marlin, no "words" input gradient); a dispatch that fails leaves an error field,
    not a crash (the cell is then timed without it)."""
    gn = _load("gemm_nvfp4")
    base = {"layer": "o", "n": 3584, "k": 3584, "dir": "fwd", "m": 1024, "bf16_us": 40.0, "ours_us": 80.0,
            "speedup": 0.5, "rel_err": 1e-3}
    rows = [dict(base, model="7b", dispatch_us=40.0, dispatch_speedup=1.0, words_us=50.0, words_speedup=0.8,
                 words_pdl_us=40.0, words_pdl_speedup=1.0),
            dict(base, model="32b", dispatch_us=40.0, dispatch_speedup=0.25, words_us=50.0, words_speedup=0.8),
            dict(base, model="7b", dir="bwd", dispatch_us=20.0, dispatch_speedup=2.0)]
    md = gn.markdown(rows, {"device": "d", "date": "x", "torch": "t", "triton": "tr", "copy_gbps": 1.0,
                            "command": "c"})
    header, rule, first = md.splitlines()[4:7]
    assert header.count("|") == rule.count("|") == first.count("|") == 23
    assert "| 40.0 | 1.00 |" in first and "| 50.0 | 0.80 | - | 40.0 | 1.00 |" in first  # (words with PDL last)
    lines = gn.summary(rows).splitlines()
    fwd = next(line for line in lines if line.startswith("fwd")).split()
    bwd = next(line for line in lines if line.startswith("bwd")).split()
    # ours (geomean, min), ours/Marlin, dispatch, words, words/Marlin, words with PDL (one row of two has it)
    assert fwd[2:] == ["0.50", "0.50", "-", "-", "0.50", "0.25", "0.80", "0.80", "-", "-", "1.00", "1.00"]
    assert bwd[2:] == ["0.50", "0.50", "-", "-", "2.00", "2.00", "-", "-", "-", "-", "-", "-"]
    logged = []

    def broken(x, w, out=None):
        raise ValueError("no kernel reads this layout here")

    got = gn.check_dispatch("words", broken, torch.zeros(2, 4), None, (2, 8), torch.ones(2, 8), logged.append, "cell")
    assert list(got) == ["words_error"] and logged and "cell words" in logged[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_gpu_benchmarks_refuse_without_cuda_before_writing(tmp_path, capsys):
    """The GPU benchmarks' shared start (gemm_nvfp4.run_setup) stops with one message naming what is missing, before
    it creates the output folder."""
    for name, need in (("slab_plans", "needs a CUDA GPU"), ("host_overhead", "needs a CUDA GPU"),
                       ("l2_reread", "needs a CUDA GPU (TMA loads)"), ("routes", "needs a CUDA GPU"),
                       ("partial_tiles", "needs a CUDA GPU"), ("tma_store", "needs a Hopper GPU"),
                       ("tma_l2_promotion", "needs a CUDA GPU")):
        out = tmp_path / name
        with pytest.raises(SystemExit):
            _load(name).main(["--out", str(out)])
        assert need in capsys.readouterr().err and not out.exists()


def test_layer_runs_keep_each_layers_rows_and_stop_without_a_gpu(tmp_path):
    """tma_store.py / sk_fixup.py (run 32): the layers named by --models / --layers, in order, the JSON rewritten
    after each one (a run cut short keeps what it measured); fp32_ref leaves TF32 as it found it; without a Hopper
    GPU both scripts stop."""
    import argparse
    import json

    import torch

    ts = _load("tma_store")
    args = argparse.Namespace(models="7b,32b", layers="o,down")
    seen = []

    def measure_layer(model, layer, n, k):
        seen.append((model, layer, n, k))
        if len(seen) == 3:  # what the JSON held when the third layer began
            seen.append(json.loads((tmp_path / "r.json").read_text())["rows"])
        return [{"layer": f"{model} {layer}"}]

    rows = ts.run_layers(args, tmp_path, "r.json", {"device": "x"}, measure_layer)
    assert [r["layer"] for r in rows] == ["7b o", "7b down", "32b o", "32b down"]
    assert seen[:3] == [("7b", "o", 3584, 3584), ("7b", "down", 3584, 18944), ("32b", "o", 5120, 5120)]
    assert seen[3] == rows[:2]
    assert json.loads((tmp_path / "r.json").read_text()) == {"meta": {"device": "x"}, "rows": rows}
    before = torch.backends.cuda.matmul.allow_tf32
    x, w = torch.randn(3, 8), torch.randn(5, 8)
    assert torch.equal(ts.fp32_ref(x, w), x @ w.T) and torch.backends.cuda.matmul.allow_tf32 == before
    if not torch.cuda.is_available():
        for name, argv in (("tma_store", []), ("sk_fixup", ["--previous", str(tmp_path / "none.py")])):
            with pytest.raises(SystemExit):
                _load(name).main(argv)


def test_tma_store_candidates_parse_stream_k_configs_and_name_them():
    """benchmarks/tma_store.py ``--candidates``: all ten ``WsConfig`` fields (run 31's stream-K configs) or the first
    six, named in its log with their stream-K mode; a malformed one stops with the format to use."""
    from qerl.kernels import nvfp4_gemm_ws as ws

    ts = _load("tma_store")
    pure, waves, tile = ts.parse_candidates("256,128,3,1,2,False,None,False,1,False;"
                                            "256,128,3,1,2,False,None,False,1,True;256,128,3,1,2,False")
    assert pure == ws.WsConfig(256, 128, 3, 1, 2, False, stream_k=1) == ws._SK_RING
    assert waves == pure._replace(dp_waves=True) and tile == pure._replace(stream_k=0)
    assert [ts._name(c) for c in (pure, waves, tile)] == ["256/128/3/1/2/False/sk1", "256/128/3/1/2/False/sk1dp",
                                                         "256/128/3/1/2/False"]
    assert ts.parse_candidates("") == ()
    with pytest.raises(SystemExit, match="WsConfig fields in order"):
        ts.parse_candidates("256,128,three")


def test_sk_fixup_grad_input_candidates_and_the_dispatch_spy(monkeypatch):
    """benchmarks/sk_fixup.py ``--grad-input`` (run 33): ``WsBwdConfig`` candidates, named as the input gradient's;
    the spy reports the config the dispatch gave the input gradient's stream-K launcher (not the forward's) and puts
    the launcher back; a malformed candidate stops with the format to use."""
    from qerl.kernels import nvfp4_gemm_ws as ws

    sf = _load("sk_fixup")
    pure, waves = sf.parse_bwd_candidates("256,4,1,None,False,1,2;256,5,1,None,False,1,2,True")
    assert pure == ws.WsBwdConfig(256, 4, 1, stream_k=1, consumers=2) and waves == pure._replace(stages=5,
                                                                                                 dp_waves=True)
    assert [sf.config_name(c) for c in (pure, waves, ws._SK_RING)] == ["bwd 256/4/1/sk1", "bwd 256/5/1/sk1dp",
                                                                      "256/128/3/1/2/False/sk1"]
    with pytest.raises(SystemExit, match="WsBwdConfig fields in order"):
        sf.parse_bwd_candidates("256,four")
    launched = []
    monkeypatch.setattr(ws, "_stream_k_grad_input", lambda dy2, w, cfg, *a: launched.append(cfg) or True)
    monkeypatch.setattr(ws, "_stream_k", lambda *a: pytest.fail("the forward's launcher"))
    spy_target = ws._stream_k_grad_input
    assert sf.dispatch_stream_k(lambda: ws._stream_k_grad_input(None, None, pure, None, 1, 80), grad=True) == pure
    assert launched == [pure] and ws._stream_k_grad_input is spy_target
    assert sf.dispatch_stream_k(lambda: None, grad=True) is None


def test_routes_candidates_and_the_previous_tables(tmp_path, monkeypatch):
    """benchmarks/routes.py: the table configs it times per cell are the distinct ones of the layer's buckets from
    M / 4 to 4 M (declined buckets left out); the tables it dumps (with ``FINE_MS`` and ``SLAB_RANGES``) load back
    equal; its "previous" dispatch runs on a dump's tables with the dump's keys between the buckets, slab ranges and
    last-tile shift (off where the dump does not say, or as asked), or, for a dump without keys (before run 27), on
    the powers of two without ``SLAB_RANGES``, restoring the module's own afterwards."""
    import json

    from qerl.kernels import nvfp4_gemm as kern
    from qerl.kernels import nvfp4_gemm_ws as ws

    rt = _load("routes")
    n, k = 37888, 3584
    cands = rt.ws_candidates(ws.TUNED, 640, n, k)
    assert set(cands.values()) == {cfg for (m, tn, tk), cfg in ws.TUNED.items()
                                   if (tn, tk) == (n, k) and cfg is not None and 160 <= m <= 2560}
    assert len(cands) == len(set(cands.values())) and all(int(label[3:]) >= 160 for label in cands)
    assert ws.TUNED[(16, 4608, 3584)] is None
    assert rt.ws_candidates(ws.TUNED, 16, 4608, 3584).get("ws@16") is None  # declined there
    path = tmp_path / "tables.json"
    rt.dump_tables(str(path))
    tables = rt.load_tables(str(path))
    assert (tables["TUNED"], tables["TUNED_BWD"], tables["TUNED_WORDS"]) == (ws.TUNED, ws.TUNED_BWD, ws.TUNED_WORDS)
    assert (tables["FINE_MS"], tables["SLAB_RANGES"]) == (kern.FINE_MS, kern.SLAB_RANGES)
    assert tables["SHIFT_LAST_TILE"] is ws.SHIFT_LAST_TILE is True
    own = ws.TUNED, kern.SLAB_RANGES, kern._bucket_keys, ws.SHIFT_LAST_TILE

    def lookup():
        return kern._nearest_bucket(ws.TUNED, 640, lambda b: (b, n, k))

    # A dump with its own keys between the buckets: 640 is not among them, 768 is, and 7B o's forward at M = 700
    # is in no slab range of that dump; it does not say whether the last tile is shifted (a tree before run 27's).
    raw = json.loads(path.read_text())
    raw["FINE_MS"] = [768]
    raw["SLAB_RANGES"] = [["fwd", 3584, 3584, [[769, 896]]]]
    del raw["SHIFT_LAST_TILE"]
    path.write_text(json.dumps(raw))
    other = rt.load_tables(str(path))
    assert other["SHIFT_LAST_TILE"] is False

    def probe_other(shift=False):
        assert ws.TUNED == other["TUNED"] and not kern._slab_range("fwd", 700, 3584, 3584)
        assert kern._slab_range("fwd", 800, 3584, 3584) and ws.SHIFT_LAST_TILE is shift
        return lookup()

    assert rt.previous_dispatch(kern, ws, other, probe_other) == ws.TUNED[(768, n, k)] != ws.TUNED[(640, n, k)]
    assert (ws.TUNED, kern.SLAB_RANGES, kern._bucket_keys, ws.SHIFT_LAST_TILE) == own
    assert rt.previous_dispatch(kern, ws, other, lambda: probe_other(True), shift=True) == ws.TUNED[(768, n, k)]

    # A dump before run 27: the powers of two only, no slab ranges.
    older = {"TUNED": {key: cfg for key, cfg in ws.TUNED.items() if key[0] not in kern.FINE_MS}, "TUNED_BWD": {}}

    def probe():
        assert ws.TUNED is older["TUNED"] and kern.SLAB_RANGES == {} and not kern._slab_range("fwd", 700, 3584, 3584)
        return lookup()

    assert rt.previous_dispatch(kern, ws, older, probe) == ws.TUNED[(1024, n, k)] != ws.TUNED[(640, n, k)]
    assert (ws.TUNED, kern.SLAB_RANGES, kern._bucket_keys, ws.SHIFT_LAST_TILE) == own
    assert lookup() == ws.TUNED[(640, n, k)]


def test_routes_proposals_take_only_wins_beyond_the_noise(capsys, tmp_path):
    """routes.py's proposals: a route wins a cell only at least 3% faster than the default dispatch and by more than
    twice the gap between the dispatch's two graphs; the winner's config is named, and --propose prints them."""
    rt = _load("routes")

    def row(m, shipped, repeat, **routes):
        times = {"shipped": shipped, **routes}
        return {"model": "7b", "layer": "o", "dir": "fwd", "m": m, "n": 3584, "k": 3584, "shipped_repeat_us": repeat,
                "routes": times, "best": min(times, key=times.get), "configs": {"ws@512": "WsConfig(128, 128)"}}

    rows = [row(640, 10.0, 10.0, slab=9.0), row(768, 10.0, 10.0, slab=9.8),  # 1.11x: taken; 1.02x: not
            row(896, 10.0, 9.0, slab=9.0),  # 1.11x, but the dispatch's own graphs 11% apart: noise
            row(1024, 10.0, 10.05, **{"ws@512": 8.0}), row(1536, 9.0, 9.0, slab=9.5)]
    got = rt.proposals(rows)
    assert [(c["m"], c["route"], c["config"]) for c in got] == [(640, "slab", "slab"), (1024, "ws@512",
                                                                                          "WsConfig(128, 128)")]
    assert got[0]["layout"] == "pairs" and abs(got[1]["gain"] - 1.25) < 1e-9
    path = tmp_path / "routes.json"
    path.write_text(json.dumps({"rows": rows}))
    rt.main(["--propose", str(path)])
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 and "M=  640" in printed[0] and "ws@512 1.250x" in printed[1]


def test_rollout_checkpoint_of_a_tied_shape_loads_with_the_embedding_as_lm_head(tmp_path, monkeypatch):
    """benchmarks/rollout_vllm.py's 3B shape ties lm_head to the embedding, as the released Qwen2.5-3B does: its
    random checkpoint carries no lm_head tensor and transformers serves the embedding as the head (so a decode step
    reads the same bytes as the real model). Checked on the tiny shape with the tie switched on."""
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the script sets it if unset; kept out of this process
    bench = _load("rollout_vllm")
    assert {k: bench.SHAPES["3b"][k] for k in ("vocab_size", "tie_word_embeddings")} == {
        "vocab_size": 151936, "tie_word_embeddings": True}
    assert bench.hf_config("3b", "nvfp4")["tie_word_embeddings"] is True
    assert bench.hf_config("7b", "nvfp4")["tie_word_embeddings"] is False
    monkeypatch.setitem(bench.SHAPES, "tiny", {**bench.SHAPES["tiny"], "tie_word_embeddings": True})
    path = bench.write_checkpoint(tmp_path, "tiny", "bf16", "random", device="cpu")
    weight_map = json.loads((path / "model.safetensors.index.json").read_text())["weight_map"]
    assert "lm_head.weight" not in weight_map and "model.embed_tokens.weight" in weight_map
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert model.lm_head.weight.abs().sum() > 0  # the random embedding, not an uninitialised head


def test_rollout_benchmark_rl_step_takes_the_engines_fp4_kernel(monkeypatch):
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    bench = _load("rollout_vllm")
    assert bench.parse_args(["rl-step"]).fp4_kernel == "marlin"
    assert bench.parse_args(["rl-step", "--fp4-kernel", "auto"]).fp4_kernel == "auto"
    with pytest.raises(SystemExit):
        bench.parse_args(["rl-step", "--fp4-kernel", "cutlass"])


def test_rollout_compare_puts_separate_calls_side_by_side_and_refuses_mixed_files(tmp_path, monkeypatch, capsys):
    """benchmarks/rollout_vllm.py compare: BF16 / Marlin / this project's kernels from separate calls' JSONs, their
    ratios per rank and batch; a JSON without the kernel recorded (before it was) counts as Marlin, a failed engine is
    skipped, and the same engine twice or two shapes stop with a message naming the problem."""
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    bench = _load("rollout_vllm")

    def write(name, runs, shape="32b", **top):
        path = tmp_path / name
        path.write_text(json.dumps({"shape": shape, "runs": runs, **top}))
        return str(path)

    def run(fmt, kernel, tps, rank=32):
        r = {"format": fmt, "rank": rank, "rows": [{"batch": b, "decode_tokens_per_s": t} for b, t in tps.items()]}
        return r if kernel is None else {**r, "fp4_kernel": kernel}

    bf16 = write("bf16.json", [run("bf16", None, {1: 50.0, 8: 400.0})])
    old_marlin = write("marlin.json", [run("nvfp4", None, {1: 75.0, 8: 600.0}), {"format": "nvfp4", "rank": 0,
                                                                                   "error": "exit 1"}])
    qerl = write("qerl.json", [run("nvfp4", "qerl", {1: 100.0, 8: 900.0})])
    out = tmp_path / "cmp.json"
    assert bench.main(["compare", bf16, old_marlin, qerl, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["rank"], r["batch"]) for r in rows] == [(32, 1), (32, 8)]
    assert rows[0]["marlin_over_bf16"] == pytest.approx(1.5) and rows[1]["qerl_over_bf16"] == pytest.approx(2.25)
    assert rows[1]["qerl_over_marlin"] == pytest.approx(1.5)
    assert "| 32 | 8 | 400 | 600 | 900 | 1.50 | 2.25 | 1.50 |" in capsys.readouterr().out

    # BF16 alone: no ratios, and no ratio columns in the table
    alone = bench.compare([bf16])
    assert "over" not in alone["table"] and "marlin" not in alone["rows"][0]
    with pytest.raises(SystemExit, match="qerl rank 32 batch 1 is in two of the files"):
        bench.compare([qerl, write("again.json", [run("nvfp4", None, {1: 1.0})], fp4_kernel="qerl")])
    with pytest.raises(SystemExit, match=r"one shape; these hold \['32b', '7b'\]"):
        bench.compare([bf16, write("7b.json", [run("bf16", None, {1: 1.0})], shape="7b")])


def _accuracy_fixture(folder: Path) -> None:
    (folder / "eval").mkdir(parents=True)
    (folder / "logs").mkdir()
    for name, acc in {"base_bf16": 0.07, "trained_bf16": 0.5, "trained_bf16_s1": 0.4, "trained_nvfp4_aqn_s2": 0.3}.items():
        (folder / "eval" / f"{name}.json").write_text(json.dumps({"accuracy": acc, "stderr": 0.02}))
    for run, rewards in {"bf16": [0.1, 0.2, 0.9, 1.0], "bf16_s1": [0.0, 0.5]}.items():
        history = [{"reward": r, "step": i} for i, r in enumerate(rewards)] + [{"train_runtime": 1.0}]
        (folder / "logs" / f"state_{run}.json").write_text(json.dumps({"log_history": history}))


def test_accuracy_table_groups_runs_by_config_and_seed(tmp_path):
    acc = _load("accuracy_table")
    assert acc.split_run("nvfp4_aqn_lr4e-4_s2") == ("nvfp4_aqn_lr4e-4", 2)
    assert acc.split_run("nvfp4_aqn") == ("nvfp4_aqn", 0)
    _accuracy_fixture(tmp_path)
    text = acc.table(tmp_path, window=2)
    assert "| base, bf16 | 7.0 (± 2.0) | - | - | - |" in text  # no samples: no distinct-problem accuracy
    assert "| bf16 | 50.0 (± 2.0) | - | 0.150 / 0.950 | 4 |" in text  # the first / last two steps' rewards
    assert "| bf16_s1 | 40.0 (± 2.0) | - | 0.250 / 0.250 | 2 |" in text
    assert "| nvfp4_aqn_s2 | 30.0 (± 2.0) | - | nan / nan | 0 |" in text  # no trainer state: no rewards
    assert "| bf16 | 50.0 | 40.0 | - | 45.0 |" in text
    assert "| nvfp4_aqn | - | - | 30.0 | 30.0 |" in text


def test_accuracy_table_reads_states_from_the_archive(tmp_path):
    import tarfile

    acc = _load("accuracy_table")
    _accuracy_fixture(tmp_path)
    with tarfile.open(tmp_path / "states.tar.xz", "w:xz") as tar:
        tar.add(tmp_path / "logs" / "state_bf16.json", arcname="logs/state_bf16.json")
    (tmp_path / "logs" / "state_bf16.json").unlink()
    assert acc.load_states(tmp_path)["bf16"][-1]["reward"] == 1.0
    with pytest.raises(SystemExit, match="no eval.arith summary"):
        acc.table(tmp_path / "logs")


def test_accuracy_table_counts_each_distinct_problem_once(tmp_path):
    acc = _load("accuracy_table")
    _accuracy_fixture(tmp_path)
    # A problem drawn twice (right both times) and two drawn once (one right): 3 of 4 draws, 2 of 3 problems.
    rows = [{"format": "qerl-eval-samples/1"}] + [
        {"prompt": p, "sample": 0, "correct": c} for p, c in (("a", True), ("a", True), ("b", False), ("c", True))]
    (tmp_path / "eval" / "trained_bf16.samples.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert acc.distinct_accuracy(acc.load_samples(tmp_path)["trained_bf16"]) == (2 / 3, 3)
    assert "| bf16 | 50.0 (± 2.0) | 66.7 (3) | 0.150 / 0.950 | 4 |" in acc.table(tmp_path, window=2)
    # several samples of one problem are averaged before the problems are
    rows += [{"prompt": "b", "sample": 1, "correct": True}]
    assert acc.distinct_accuracy(rows[1:]) == ((1 + 0.5 + 1) / 3, 3)



def test_kernel_kinds_keep_compiled_elementwise_kernels_apart_from_the_products():
    """torch.compile names a pointwise or reduction kernel after the operators around it, so one that feeds the NVFP4
    op carries "nvfp4" in its name; the profile's breakdown still counts it as elementwise work."""
    kind = _load("decode_nvfp4").kernel_kind
    assert kind("triton_red_fused__to_copy_mul_nvfp4_lora_linear_sum_unsqueeze_view_10") == "fused_elementwise"
    assert kind("triton_poi_fused__to_copy_add_embedding_mean_mul_nvfp4_lora_linear_pow_rsqrt_4") == "fused_elementwise"
    assert kind("triton_per_fused_add_mean_mul_pow_rsqrt_2") == "fused_elementwise"
    assert kind("_ws_fwd_sk_kernel") == kind("_fwd_kernel") == "nvfp4_gemm"
    assert kind("nvjet_sm90_tst_384x8_64x4_2x1_v_bz_TNT") == "cublas_gemm"
    assert kind("_decode_attn_part_kernel") == "attention"
    assert kind("_lora_shrink_kernel") == "lora_shrink"


def test_shrink_variant_specs_become_the_kernels_arguments(monkeypatch):
    """benchmarks/lora_shrink.py's variants name ``lora_shrink``'s arguments: reduce_programs, then a precision,
    ``bm`` rows per block and ``s`` splits per tile in any order."""
    bench = _load("lora_shrink")
    calls = []
    monkeypatch.setattr(bench, "lora_shrink", lambda x, a, s, **kw: calls.append(kw))
    for spec in ("last_128", "atomic_512_bm16", "last_256_ieee_bm32_s16"):
        bench.variant(spec)(None, None, None)
    assert calls == [{"reduce": "last", "programs": 128}, {"reduce": "atomic", "programs": 512, "block_m": 16},
                     {"reduce": "last", "programs": 256, "precision": "ieee", "block_m": 32, "max_splits": 16}]


def test_rollout_models_built_a_layer_at_a_time_match_quantizing_a_whole_copy():
    """benchmarks/rollout_hf.py builds its NVFP4 model one decoder layer at a time (so a 32B pair fits one GPU): the
    same codes, scales and global scales as quantizing a copy of the whole model, the BF16 model on those weights
    dequantized, no storage shared between the two, and both computing the same function up to rounding."""
    import copy

    from torch import nn

    from qerl.modules import NVFP4Linear, quantize_

    bench = _load("rollout_hf")
    torch.manual_seed(0)
    bf16, nvfp4 = bench.build_models(shape="tiny", device="cpu")
    assert bf16.config.num_hidden_layers == len(nvfp4.model.layers) == 2
    whole = copy.deepcopy(bf16)
    quantize_(whole)  # the BF16 weights are already on the NVFP4 grid: they quantize to the same codes
    packed = {n: m for n, m in nvfp4.named_modules() if isinstance(m, NVFP4Linear)}
    assert len(packed) == 2 * 7 and "lm_head" not in packed
    for name, m in packed.items():
        ref = whole.get_submodule(name)
        for buf in ("weight_packed", "weight_scale", "weight_global_scale"):
            assert torch.equal(getattr(m, buf), getattr(ref, buf)), (name, buf)
        dense = bf16.get_submodule(name)
        assert type(dense) is nn.Linear
        assert torch.equal(dense.weight, m.dequantized_weight(torch.bfloat16))
    bf16_storage = {p.untyped_storage().data_ptr() for p in bf16.parameters()}
    assert not bf16_storage & {t.untyped_storage().data_ptr() for t in [*nvfp4.parameters(), *nvfp4.buffers()]}
    ids = torch.randint(2, bf16.config.vocab_size, (2, 12))
    with torch.no_grad():
        a, b = bf16(ids).logits.float(), nvfp4(ids).logits.float()
    assert (a - b).abs().max() <= 0.05 * a.abs().max()

"""The GPU benchmarks' host-side logic, on CPU: benchmarks/read_pattern.py's box layouts and grids,
benchmarks/gemm_ws.py's whole-wave splits, decode_nvfp4.py's profile sums, and benchmarks/ws_probe.py's edits of the
kernel source (which must fail loudly, not silently time the unedited kernel, when the kernel's text moves)."""

from __future__ import annotations

import importlib.util
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


def test_probe_variants_edit_the_kernel_source():
    wp = _load("ws_probe")
    src = (ROOT / "qerl/kernels/nvfp4_gemm_ws.py").read_text()
    assert wp.variant_source(src, "full") == src
    no_compute = wp.variant_source(src, "no_compute")
    step = no_compute[no_compute.index("    def _mma_step("):no_compute.index("    def _mma_partition(")]
    assert "warpgroup_mma(" not in step and "mbarrier.wait(ready" in step and "mbarrier.arrive(empty" in step
    no_x = wp.variant_source(src, "no_x")
    loader = no_x[no_x.index("    def _load_worker("):no_x.index("    def _mma_step(")]
    assert "x_desc, [off_m" not in loader and "w_desc, [off_n" in loader
    no_scales = wp.variant_source(src, "no_scales")
    loader = no_scales[no_scales.index("    def _load_worker("):no_scales.index("    def _mma_step(")]
    assert "s_desc, [c *" not in loader and "x_desc, [off_m" in loader and "+ s_desc.block_type" not in loader
    codes_only = wp.variant_source(src, "codes_only")
    loader = codes_only[codes_only.index("    def _load_worker("):codes_only.index("    def _mma_step(")]
    assert loader.count("tma.async_copy_global_to_shared(") == 1 and "nbytes: gl.constexpr = w_desc.block_type.nbytes\n" in loader
    with pytest.raises(RuntimeError, match="anchor"):
        wp.variant_source(src.replace("is_async=True)\n        acc = warpgroup_mma(w_hi", "is_async=True)\n"
                                      "        acc = warpgroup_mma( w_hi"), "no_compute")


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

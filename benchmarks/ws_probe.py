"""Where the warp-specialized forward spends its time: the kernel with parts of each chunk's work left
out, timed against the kernel itself (the "leave a stage out and take differences" method, for a GPU without
hardware counters or where they do not say which part of the loop is slow).

The variants are built from ``qerl/kernels/nvfp4_gemm_ws.py``'s own source, edited as text into a module under a
temporary directory (the shipped kernels stay as they are; an edit whose anchor text is gone fails loudly):

- ``full``: the kernel as shipped;
- ``no_compute``: the consumer only waits for each stage and releases it (the copies, barriers and epilogue alone);
- ``no_x``: the full kernel without the copies of X (the wgmmas read whatever the stage holds);
- ``no_scales``: the full kernel without the copies of the scale bytes;
- ``codes_only``: ``no_compute`` without the copies of X and of the scales (the code bytes' copies alone);
- ``empty``: no chunks at all (the launch, the barriers' set-up, the warp-specialized partitions and the epilogue).
- ``no_dequant``: the full kernel with the dequantization replaced by the cheapest operand made from the code bytes
  (each byte shifted into a bf16's high bits: no scale loads, no decode): the copies, the wgmmas and the epilogue;
- ``no_store``: the full kernel storing one value per consumer instead of its tile (the epilogue's stores left out,
  the TMA store of whole tiles too; the tile is still reduced, so the wgmmas stay);
- ``regs_store``: the full kernel with every tile stored from registers (``TMA_STORE`` off: the stores before run 30).
- ``sk_no_fixup`` (stream-K configs): the full kernel without the split tiles' parts: no part stored, counted,
  waited for or added (``_sk_put_part`` / ``_sk_add_parts`` left out; the CTA holding a tile's first chunk stores
  its own part as the tile).

- ``sk_no_wait``: the full kernel whose summing CTA adds the later CTAs' parts (or seeds its accumulator with one)
  without waiting for their count (it may read stale values: time only);
- ``sk_no_add``: the summing CTA waits for the count but neither adds a part nor loads its seed;
- ``sk_no_put``: the part's stores left out (the count is still made, so the summing CTA waits and adds what the
  buffer holds).

A stream-K config (the shipped one, or one made with ``--configs``, e.g. ``bm=256,stages=3,stream_k=1``) runs the
variants that edit code it shares with the one-tile kernel (``full``, ``no_compute``, ``no_dequant``,
``regs_store``) and ``sk_no_fixup``; the others are reported as not applicable.

With ``--dir bwd`` the input gradient (``_ws_bwd_kernel``, one consumer; ``--bwd-layout`` "rows" or "pairs"):

- ``full``: the kernel as shipped;
- ``no_compute``: the consumer only waits for each stage and releases it (the scale warp still rearranges the scales);
- ``copies_only``: ``no_compute`` with the scale warp only passing each stage on (the copies and barriers alone);
- ``codes_only``: ``copies_only`` without the copies of dY and of the scales (the code bytes' copies alone);
- ``codes_direct``: ``codes_only`` with the scale warp out of the chain (``ready`` completes on the copy alone);
- ``empty``: no steps at all, as the forward's.

Outputs of the edited variants are wrong by design; only their time is reported, per layer, M and launch config
(the shipped config of ``TUNED_WORDS`` / of the input gradient's tables by default), with the weight in enough copies
that L2 serves none of it. The launches are without programmatic dependent launch (``qerl.kernels.pdl``, off by
default): the forward variants edit the loader's loop, not the first copies a launch with it makes before the loop.

    python benchmarks/ws_probe.py --models 7b --ms 1,8,16 --out benchmarks/out/ws_probe
    python benchmarks/ws_probe.py --dir bwd --models 7b --ms 1,16,64 --out benchmarks/out/ws_probe_bwd
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gemm_nvfp4 import SHAPES, bench, bf16_copies  # noqa: E402

# Anchor texts in _mma_step / _load_worker and their replacements; each anchor must occur exactly once.
_MMA = ('''        acc = warpgroup_mma(w_lo, x_smem.index(2 * s).permute((1, 0)), acc, is_async=True)
        acc = warpgroup_mma(w_hi, x_smem.index(2 * s + 1).permute((1, 0)), acc, is_async=True)
''', "")
_STEP_BODY_START = "        codes = w_smem.index(s)\n        if RB < BN:\n            codes = codes.slice(ROW0, RB, dim=0)\n"
_X_COPIES = ('''            _x_box(x_desc, xs_desc, off_m, c * 128, M, bar, x_smem.index(2 * s), BM, XB)
            _x_box(x_desc, xs_desc, off_m, c * 128 + 64, M, bar, x_smem.index(2 * s + 1), BM, XB)
            tma.async_copy_global_to_shared(w_desc, [off_n, c * 64], bar, w_smem.index(s))''',
             '''            tma.async_copy_global_to_shared(w_desc, [off_n, c * 64], bar, w_smem.index(s))''')
# (The probes time launches without programmatic dependent launch, whose first copies of W come before the loop.)
_X_BYTES = ('''        nbytes: gl.constexpr = 2 * x_desc.block_type.nbytes + w_desc.block_type.nbytes + s_desc.block_type.nbytes
        first = 0
        if PDL:
            first = gl.minimum(n_chunks, STAGES)''', '''        nbytes: gl.constexpr = w_desc.block_type.nbytes + s_desc.block_type.nbytes
        first = 0
        if PDL:
            first = gl.minimum(n_chunks, STAGES)''')
# (A variant without the wgmmas alone cannot be made this way: the dequantization whose result no wgmma reads is
# dropped by the compiler, even as non-pure inline PTX, so it would time the copies alone, as no_compute does.)
_S_COPY = ('''
            tma.async_copy_global_to_shared(w_desc, [off_n, c * 64], bar, w_smem.index(s))
            tma.async_copy_global_to_shared(s_desc, [c * s_rows_per_chunk + off_n // 32, 0], bar, s_smem.index(s))''',
           '''
            tma.async_copy_global_to_shared(w_desc, [off_n, c * 64], bar, w_smem.index(s))''')
_FWD_CHUNKS = ("        chunks_per_split = (pid_k + 1) * n_chunks // gl.num_programs(1) - c0\n",
               "        chunks_per_split = 0 * ((pid_k + 1) * n_chunks // gl.num_programs(1) - c0)\n")
_DQ_PAIRS = ('''            w_lo, w_hi = gl.inline_asm_elementwise(
                _DQ_PAIR_ASM, "=r,=r,h,r,r", [codes, p_lo, p_hi],
                dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=2,
            )
''', '''            w_lo, w_hi = gl.inline_asm_elementwise(
                "{ .reg .b32 t; cvt.u32.u16 t, $2; prmt.b32 $0, t, 0, 0x1404; mov.b32 $1, $0; }", "=r,=r,h", [codes],
                dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=2,
            )
''')
_DQ_WORDS = ('''            w_lo, w_hi = gl.inline_asm_elementwise(
                _DQ_WORD_ASM, "=r,=r,=r,=r,r,r,r,r,r", [codes, p_lo, p_hi],
                dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=4,
            )
''', _DQ_PAIRS[1])
_TILE_STORE = ('''            gl.store(y_ptr + offs_m[None, :].to(gl.int64) * stride_ym + offs_n[:, None], out.to(gl.bfloat16),
                     mask=mask)
''', '''            gl.store(y_ptr + gl.program_id(0), gl.sum(gl.sum(out, 1), 0).to(gl.bfloat16))
''')
_TMA_PATH = ("        elif TMA_STORE:\n", "        elif False:\n")
_TMA_FLAG = ("\nTMA_STORE = True\n", "\nTMA_STORE = False\n")
_SK_ADD = ("                    acc = _sk_add_parts(part_ptr, cnt_ptr, acc, t, iters, n_chunks, CONSUMERS, ME)\n",
           "                    acc = acc * 1.0\n")
_SK_SEED = ("                acc = _sk_seed_part(part_ptr, cnt_ptr, acc, t, CONSUMERS, ME)\n",
            "                acc = acc * 1.0\n")
_SK_SEED_LOAD = ("        return gl.load(part_ptr + _sk_part_offsets(like, (gl.program_id(0) + 1) * CONSUMERS + ME),\n"
                 "                       cache_modifier=\".cg\")\n", "        return gl.zeros_like(like)\n")
_SK_PUT = ("                _sk_put_part(part_ptr, cnt_ptr, acc, t, t0, CONSUMERS, ME)\n",
           "                acc = acc * 1.0\n")
_SK_WAIT = ("        while seen < count:\n", "        while seen < 0:\n")
_SK_ADD_LOADS = ("            acc += gl.load(part_ptr + _sk_part_offsets(acc, h * CONSUMERS + ME), cache_modifier=\".cg\")\n",
                 "            acc = acc * 1.0\n")
_SK_PUT_STORE = ("        gl.store(part_ptr + _sk_part_offsets(acc, slot), acc)\n", "")
VARIANTS = ("full", "no_compute", "no_x", "no_scales", "codes_only", "empty", "no_dequant", "no_store", "regs_store",
            "sk_no_fixup", "sk_no_wait", "sk_no_add", "sk_no_put")
SK_VARIANTS = ("full", "no_compute", "no_dequant", "regs_store")  # with sk_*: the ones that edit stream-K's code

# The input gradient's anchors: _bwd_step from its code load to the release (kept), the scale warp's work, the copies.
_BWD_STEP = ("        codes = _bwd_codes(w_smem, s)\n        lo_even, lo_odd, hi_even, hi_odd",
             "            mbarrier.arrive(empty.index(s))\n        return acc_lo, acc_hi\n")
_BWD_SCALES = ("            v = s_raw.index(s)._reinterpret(gl.uint32, [64, 2], plain).load(rows)\n",
               "            gl.thread_barrier()  # every lane's words written before the (one-thread) arrival\n")
_BWD_COPIES = ("        mbarrier.expect(bar, dy_desc.block_type.nbytes + w_desc.block_type.nbytes)\n"
               "        _x_box(dy_desc, dys_desc, off_m, n0, M, bar, dy_smem.index(s), BM, XB)\n"
               "        tma.async_copy_global_to_shared(w_desc, [n0, col], bar, w_smem.index(s))\n"
               "        mbarrier.expect(s_ready.index(s), s_desc.block_type.nbytes)\n"
               "        tma.async_copy_global_to_shared(s_desc, [s_row, 0], s_ready.index(s), s_raw.index(s))\n",
               "        mbarrier.expect(bar, w_desc.block_type.nbytes)\n"
               "        tma.async_copy_global_to_shared(w_desc, [n0, col], bar, w_smem.index(s))\n"
               "        mbarrier.arrive(s_ready.index(s))\n")
_BWD_READY = ("            mbarrier.init(ready.index(s), count=2)\n", "            mbarrier.init(ready.index(s), count=1)\n")
_BWD_SCALE_LOOP = ("        for i in range(n_iters):\n", "        for i in range(0):\n")
_BWD_STEPS = ("        n_steps = (pid_s + 1) * total_steps // gl.num_programs(1) - s0\n",
              "        n_steps = 0 * ((pid_s + 1) * total_steps // gl.num_programs(1) - s0)\n")
VARIANTS_BWD = ("full", "no_compute", "copies_only", "codes_only", "codes_direct", "empty")


def _replace_once(src: str, old: str, new: str, what: str) -> str:
    if src.count(old) != 1:
        raise RuntimeError(f"{what}: the anchor text occurs {src.count(old)} times in nvfp4_gemm_ws.py (expected 1); "
                           "update benchmarks/ws_probe.py to the kernel's source")
    return src.replace(old, new)


def variant_source(src: str, variant: str) -> str:
    """``nvfp4_gemm_ws.py``'s source edited into ``variant`` (see the module docstring)."""
    if variant == "full":
        return src
    if variant == "no_compute":
        # Cut _mma_step from its first shared-memory load to the wgmmas: the wait for the stage, then the release.
        return _cut(src, _STEP_BODY_START, _MMA[0], "", variant)
    if variant == "no_x":
        src = _replace_once(src, *_X_COPIES, "no_x")
        return _replace_once(src, *_X_BYTES, "no_x")
    if variant == "no_scales":
        src = _replace_once(src, *_S_COPY, "no_scales")
        return _replace_once(src, _X_BYTES[0], _X_BYTES[0].replace(" + s_desc.block_type.nbytes", ""), "no_scales")
    if variant == "codes_only":  # no_compute, no copies of X or of the scales: the code bytes' copies alone
        src = variant_source(src, "no_compute")
        src = _replace_once(src, *_X_COPIES, "codes_only")
        src = _replace_once(src, *_S_COPY, "codes_only")
        return _replace_once(src, *_X_BYTES, "codes_only").replace(
            _X_BYTES[1], _X_BYTES[1].replace(" + s_desc.block_type.nbytes", ""))
    if variant == "empty":
        return _replace_once(src, *_FWD_CHUNKS, variant)
    if variant == "no_dequant":
        return _replace_once(_replace_once(src, *_DQ_PAIRS, variant), *_DQ_WORDS, variant)
    if variant == "no_store":
        return _replace_once(_replace_once(src, *_TILE_STORE, variant), *_TMA_PATH, variant)
    if variant == "regs_store":
        return _replace_once(src, *_TMA_FLAG, variant)
    if variant == "sk_no_fixup":
        src = _replace_once(_replace_once(src, *_SK_ADD, variant), *_SK_SEED, variant)
        return _replace_once(src, *_SK_PUT, variant)
    if variant == "sk_no_wait":
        return _replace_once(src, *_SK_WAIT, variant)
    if variant == "sk_no_add":
        return _replace_once(_replace_once(src, *_SK_ADD_LOADS, variant), *_SK_SEED_LOAD, variant)
    if variant == "sk_no_put":
        return _replace_once(src, *_SK_PUT_STORE, variant)
    raise ValueError(f"unknown variant {variant!r}: one of {VARIANTS}")


def _cut(src: str, start: str, end: str, keep: str, what: str) -> str:
    """``src`` with the text from ``start`` up to and including ``end`` replaced by ``keep``."""
    for anchor in (start, end):
        if src.count(anchor) != 1:
            raise RuntimeError(f"{what}: an anchor text occurs {src.count(anchor)} times in nvfp4_gemm_ws.py "
                               "(expected 1); update benchmarks/ws_probe.py to the kernel's source")
    i, j = src.index(start), src.index(end)
    if j < i:
        raise RuntimeError(f"{what}: the anchor texts are out of order in nvfp4_gemm_ws.py")
    return src[:i] + keep + src[j + len(end):]


def bwd_variant_source(src: str, variant: str) -> str:
    """``nvfp4_gemm_ws.py``'s source edited into the input gradient's ``variant`` (see the module docstring)."""
    if variant == "full":
        return src
    if variant == "no_compute":
        return _cut(src, *_BWD_STEP, "        mbarrier.arrive(empty.index(s))\n        return acc_lo, acc_hi\n",
                    variant)
    if variant == "copies_only":
        return _cut(bwd_variant_source(src, "no_compute"), *_BWD_SCALES, "", variant)
    if variant == "codes_only":
        return _replace_once(bwd_variant_source(src, "copies_only"), *_BWD_COPIES, variant)
    if variant == "codes_direct":
        src = _replace_once(bwd_variant_source(src, "codes_only"), *_BWD_READY, variant)
        return _replace_once(src, *_BWD_SCALE_LOOP, variant)
    if variant == "empty":
        return _replace_once(src, *_BWD_STEPS, variant)
    raise ValueError(f"unknown variant {variant!r}: one of {VARIANTS_BWD}")


def replaced(cfg, edit: str):
    """``cfg`` (a config NamedTuple) with the fields of ``edit`` ("field=value,...": ints, True / False, None)
    replaced; ValueError naming the fields for an unknown one."""
    if not edit:
        return cfg
    fields = {}
    for item in edit.split(","):
        name, _, value = item.partition("=")
        if name not in cfg._fields:
            raise ValueError(f"{name!r} is not a field of {type(cfg).__name__}: one of {', '.join(cfg._fields)}")
        words = {"True": True, "False": False, "None": None}
        fields[name] = words[value] if value in words else int(value)
    return cfg._replace(**fields)


def load_variant(variant: str, workdir: Path, direction: str = "fwd"):
    """The edited module, imported under its own name from ``workdir`` (Gluon compiles from the file's source)."""
    src = (ROOT / "qerl/kernels/nvfp4_gemm_ws.py").read_text()
    path = workdir / f"qerl_ws_probe_{direction}_{variant}.py"
    path.write_text(variant_source(src, variant) if direction == "fwd" else bwd_variant_source(src, variant))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="7b")
    p.add_argument("--ms", default="1,8,16")
    p.add_argument("--dir", choices=("fwd", "bwd"), default="fwd", help="the forward or the input gradient")
    p.add_argument("--bwd-layout", choices=("rows", "pairs"), default="rows", help="the input gradient's codes")
    p.add_argument("--fwd-layout", choices=("words", "pairs"), default="words",
                   help="the forward's codes: 'words' (the rollout's, TUNED_WORDS) or 'pairs' (training's, TUNED)")
    p.add_argument("--bf16", action="store_true", help="also time torch's BF16 product (cuBLAS) of each cell")
    p.add_argument("--variants", default=None, help="comma-separated; default: every variant of the direction")
    p.add_argument("--layers", default=None, help="comma-separated layer names (default: every layer)")
    p.add_argument("--configs", default="", help="the shipped config with fields replaced, one row each: "
                   "semicolon-separated sets of field=value, e.g. 'stages=8;maxnreg=64,split_n=12' ('' the shipped; "
                   "the forward's cells without a config start from 256 x 128 tiles, one per CTA)")
    p.add_argument("--out", default="benchmarks/out/ws_probe")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a Hopper GPU")
    from qerl import nvfp4
    from qerl.kernels import nvfp4_gemm as kern
    from qerl.kernels import nvfp4_gemm_ws as ws

    if not ws.available():
        p.error("needs a Hopper GPU and Triton's Gluon")
    from gemm_ws import _copies

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    work = Path(tempfile.mkdtemp(prefix="ws_probe_"))
    variants = args.variants.split(",") if args.variants else list(VARIANTS if args.dir == "fwd" else VARIANTS_BWD)
    mods = {v: load_variant(v, work, args.dir) for v in variants}
    meta = {"device": props.name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "command": "python benchmarks/ws_probe.py " + " ".join(sys.argv[1:] if argv is None else argv)}
    rows = []
    for model in args.models.split(","):
        for layer, n, k in SHAPES[model]:
            if args.layers and layer not in args.layers.split(","):
                continue
            q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
            layout = args.fwd_layout if args.dir == "fwd" else args.bwd_layout
            kws = _copies(kern.prepare_weight(q.packed, q.scale, q.global_scale, layout=layout), l2)
            dense = []
            if args.bf16:  # cuBLAS's product on the same weight, copies past L2 as ours
                dense = bf16_copies(q.dequantize(torch.bfloat16), l2)
            for m in (int(v) for v in args.ms.split(",")):
                if args.dir == "fwd":
                    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
                    cfg = ws.pick(x, n, k, kws[0].k_pad, words=layout == "words")
                else:
                    x = torch.randn(m, n, device="cuda").to(torch.bfloat16)
                    cfg = ws.pick_grad_input(x, n, k, kws[0].k_pad, rows=layout == "rows")
                bf16_us = None
                if dense:
                    fns = ([lambda w=w, x=x: x @ w.t() for w in dense] if args.dir == "fwd"
                           else [lambda w=w, x=x: x @ w for w in dense])
                    bf16_us = bench(fns) * 1e6
                for edit in args.configs.split(";") if args.configs else [""]:
                    # An edit on a cell the dispatch sends elsewhere (the slab path) starts from the forward's 256 x 128
                    # one-tile config.
                    base = cfg if cfg is not None or not edit or args.dir != "fwd" else ws.WsConfig(256, 128, 3, 1, 2,
                                                                                                     False)
                    c0 = replaced(base, edit) if base is not None else None
                    # The edits apply to the forward's kernels (stream-K: SK_VARIANTS) and to the input gradient's
                    # one-tile-per-CTA kernel with one consumer; a config reaching another path is skipped.
                    runnable = c0 is not None and (args.dir == "fwd" or (c0.consumers == 1 and not c0.stream_k))
                    if not runnable:
                        print(f"{model} {layer} M={m}: {c0} is not a kernel the variants edit; skipped")
                        continue
                    row = {"model": model, "layer": layer, "n": n, "k": k, "m": m, "dir": args.dir,
                           "layout": layout, "config": c0._asdict(), "edit": edit}
                    if bf16_us is not None:
                        row["bf16_us"] = bf16_us
                    for v, mod in mods.items():
                        if args.dir == "fwd" and c0.stream_k and v not in SK_VARIANTS and not v.startswith("sk_"):
                            row[f"{v}_us"] = float("nan")  # the edit does not reach the stream-K kernel
                            continue
                        if args.dir == "fwd" and not c0.stream_k and v.startswith("sk_"):
                            row[f"{v}_us"] = float("nan")
                            continue
                        if args.dir == "fwd":
                            c = mod.WsConfig(*c0)
                            fns = [lambda kw=kw, c=c, mod=mod, x=x: mod.ws_matmul(x, kw, c) for kw in kws]
                        else:
                            c = mod.WsBwdConfig(*c0)
                            fns = [lambda kw=kw, c=c, mod=mod, x=x: mod.ws_matmul_grad_input(x, kw, c) for kw in kws]
                        try:
                            row[f"{v}_us"] = bench(fns) * 1e6
                        except Exception as e:  # e.g. an edited config the compiler refuses: report it, go on
                            row[f"{v}_us"] = float("nan")
                            row[f"{v}_error"] = f"{type(e).__name__}: {e}"[:300]
                    rows.append(row)
                    print(f"{model} {layer:8} M={m:3} {tuple(c0)}: " + "  ".join(
                        f"{v} {row[f'{v}_us']:.1f}" for v in ["bf16"] * (bf16_us is not None) + list(mods)),
                          flush=True)
                    (out / "ws_probe.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

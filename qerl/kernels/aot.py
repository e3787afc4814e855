"""Compile the NVFP4 kernels (forward and input gradient) ahead of time for a GPU target on a machine without one.

Triton lowers a kernel to PTX for a named target with no device present, and the ptxas that ships with Triton
assembles it. That checks GPU-only code paths the CPU interpreter never runs (tl.dot operand shapes and layouts,
inline PTX) and reports what each launch config costs in registers and spills, which bounds how many programs an SM
holds and whether the main loop's state goes through local memory. Used by tests/test_kernels_aot.py and
benchmarks/kernel_resources.py; it says nothing about time (that is measured on the GPU, benchmarks/gemm_nvfp4.py).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from qerl.kernels import nvfp4_gemm as kern

# Pointer arguments of ``_fwd_kernel`` and the element types ``nvfp4_matmul`` passes (split-K workspace in fp32).
_POINTERS = {"x_ptr": "*bf16", "w_ptr": "*u8", "s_ptr": "*u8", "gs_ptr": "*fp32", "y_ptr": "*fp32",
             "out_ptr": "*bf16", "cnt_ptr": "*i32", "bias_ptr": "*bf16", "lu_ptr": "*fp32", "lb0_ptr": "*bf16",
             "lb1_ptr": "*bf16", "lb2_ptr": "*bf16"}


def ptxas_path() -> str | None:
    """The ptxas bundled with Triton's NVIDIA backend, or None if this Triton build has none."""
    if kern.triton is None:
        return None
    path = os.path.join(os.path.dirname(kern.triton.__file__), "backends", "nvidia", "bin", "ptxas")
    return path if os.path.exists(path) else None


def _assemble(fn, const: dict, pointers: dict, num_warps: int, num_stages: int, maxnreg: int | None,
              capability: int, disassemble: bool = False) -> tuple[str, str]:
    """(ptxas -v report, SASS listing if ``disassemble``) of ``fn`` specialised on ``const``."""
    from triton.compiler import ASTSource

    missing = set(const) - set(fn.arg_names)
    if missing:
        raise RuntimeError(f"{fn.__name__} has no parameters {sorted(missing)}: update qerl/kernels/aot.py")
    sig = {n: "constexpr" if n in const else pointers.get(n, "i32") for n in fn.arg_names}
    # What a launch on the shapes this project serves specialises on (Triton's runtime does it from the values):
    # 16-byte aligned pointers and integer arguments that are multiples of 16 (every Qwen2.5 dimension and stride),
    # except the arguments the kernel opts out of (M, per-split step counts). Without these hints Triton cannot
    # prove contiguity and alignment and emits byte-wise loads, a different kernel from the one that runs.
    skip = {p.name for p in fn.params if p.do_not_specialize}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names)
             if n not in const and n not in skip}
    return _assemble_source(ASTSource(fn, sig, const, attrs), const, num_warps, num_stages, maxnreg, capability,
                            disassemble)


def _assemble_source(src, const: dict, num_warps: int, num_stages: int, maxnreg: int | None, capability: int,
                     disassemble: bool = False, meta: dict | None = None) -> tuple[str, str]:
    """(ptxas -v report, SASS listing if ``disassemble``) of a Triton or Gluon source for ``sm_<capability>a``;
    ``meta``, if given, receives the launch's threads per CTA and shared-memory bytes."""
    from triton.backends.compiler import GPUTarget

    ptxas = ptxas_path()
    if ptxas is None:
        raise RuntimeError("this Triton build ships no ptxas: cannot assemble kernels ahead of time")
    options = {"num_warps": num_warps, "num_stages": num_stages}
    if maxnreg is not None:
        options["maxnreg"] = maxnreg
    compiled = kern.triton.compile(src, target=GPUTarget("cuda", capability, 32), options=options)
    if meta is not None:  # a warp-specialized kernel's warps include its partitions' (and their padding)
        meta.update(threads=32 * compiled.metadata.num_warps, shared_bytes=compiled.metadata.shared,
                    ptx=compiled.asm["ptx"])
    arch = f"sm_{capability}a" if capability >= 90 else f"sm_{capability}"
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = os.path.join(tmp, "kernel.ptx"), os.path.join(tmp, "kernel.cubin")
        with open(ptx, "w") as f:
            f.write(compiled.asm["ptx"])
        proc = subprocess.run([ptxas, "-v", "--gpu-name", arch, ptx, "-o", cubin], capture_output=True, text=True,
                              timeout=300)
        if proc.returncode:
            raise RuntimeError(f"ptxas failed for {const}: {proc.stderr[-2000:]}")
        sass = ""
        if disassemble:
            nvdisasm = os.path.join(os.path.dirname(ptxas), "nvdisasm")
            sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, timeout=300,
                                  check=True).stdout
    return proc.stderr, sass


def _resources(fn, const: dict, pointers: dict, num_warps: int, num_stages: int, maxnreg: int | None,
               capability: int) -> dict[str, int]:
    report, _ = _assemble(fn, const, pointers, num_warps, num_stages, maxnreg, capability)
    regs = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores", report)
    if not regs or not spills:
        raise RuntimeError(f"unexpected ptxas report: {report[-1000:]}")
    return {"registers": int(regs.group(1)), "spill_bytes": int(spills.group(1))}


def _fwd_constexprs(cfg: kern.FwdConfig, lora_slices: int = 0, lora_rank: int = 1, bias: bool = False,
                    even_k: bool = True) -> dict:
    """The constexprs ``nvfp4_matmul`` launches ``_fwd_kernel`` with for ``cfg`` (split-K partials in fp32, summed
    by the last program)."""
    return kern.fwd_constexprs(cfg, cfg.split_k, cfg.fused and cfg.split_k > 1, even_k, bias,
                               kern.lora_constexprs(cfg, lora_slices, lora_rank))


_SASS_LINE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")


def main_loop_instructions(sass: str) -> list[str]:
    """The instructions of the largest loop in a SASS listing: the longest stretch closed by a backward branch."""
    loops = _loops(sass)
    return max(loops, key=len) if loops else []


def mma_loop_instructions(sass: str) -> list[str]:
    """The instructions of the innermost loop that issues wgmma (``HGMMA``): the shortest loop body holding one. In a
    persistent kernel the largest loop is the one over tiles, epilogue included; this is the chunk loop inside it."""
    loops = [body for body in _loops(sass) if any(t.startswith("HGMMA") for t in body)]
    return min(loops, key=len) if loops else []


def densest_mma_loop_instructions(sass: str) -> list[str]:
    """The loop body with the most wgmma (``HGMMA``) per instruction: the chunk loop itself, where a backward branch
    of a wait further on (e.g. in an epilogue) closes longer stretches that also hold wgmmas, some shorter than it."""
    loops = [body for body in _loops(sass) if any(t.startswith("HGMMA") for t in body)]
    return max(loops, key=lambda b: sum(t.startswith("HGMMA") for t in b) / len(b)) if loops else []


def _loops(sass: str) -> list[list[str]]:
    """Every stretch of a SASS listing closed by a backward branch (a loop body, from its label to the branch)."""
    instrs, labels = [], {}
    pending: list[str] = []
    for line in sass.splitlines():
        label = re.match(r"^\s*\.(L_x_\d+):", line)
        if label:
            pending.append(label.group(1))
            continue
        m = _SASS_LINE.match(line)
        if m:
            addr = int(m.group(1), 16)
            for name in pending:
                labels[name] = addr
            pending = []
            instrs.append((addr, m.group(2)))
    loops = []
    for addr, text in instrs:
        target = re.search(r"\bBRA\b.*?\.?(L_x_\d+)", text)
        if target and labels.get(target.group(1), addr + 1) < addr:
            loops.append([t for a, t in instrs if labels[target.group(1)] <= a <= addr])
    return loops


def main_loop_opcodes(sass: str) -> Counter:
    """Opcode counts (predicates and modifiers dropped: ``@P0 LDG.E.128`` -> ``LDG``) of the largest loop in a SASS
    listing (``main_loop_instructions``)."""
    return _opcodes(main_loop_instructions(sass))


def _opcodes(instructions: list[str]) -> Counter:
    ops = Counter()
    for text in instructions:
        words = [w for w in text.split() if not w.startswith("@")]
        ops[words[0].split(".")[0]] += 1
    return ops


def fwd_loop_profile(cfg: kern.FwdConfig, capability: int = 90) -> dict:
    """Instructions in ``_fwd_kernel``'s main loop for ``cfg`` (SASS, sm_<capability>a): opcode counts and warp
    instructions per weight (one loop step covers BN x CH x 128 weights on ``num_warps`` warps). A warp scheduler
    issues about one instruction per cycle, so this bounds the weights per second an SM can dequantize and
    multiply, whatever the memory bandwidth."""
    _, sass = _assemble(kern._fwd_kernel, _fwd_constexprs(cfg), _POINTERS, cfg.num_warps, cfg.num_stages, cfg.maxnreg, capability,
                        disassemble=True)
    loop = main_loop_instructions(sass)
    ops = _opcodes(loop)
    if not ops:
        raise RuntimeError(f"no loop found in the SASS of {cfg}")
    weights_per_warp = cfg.bn * cfg.ch * kern.CHUNK / cfg.num_warps
    # wgmma waits in the loop: each ``WARPGROUP.DEPBAR.LE gsb0, n`` stalls until at most n wgmma groups are pending
    # (n = 0: the tensor cores drain before the warp goes on).
    waits = [int(w, 16) for w in re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", "\n".join(loop))]
    return {"loop_instructions": sum(ops.values()), "per_weight": sum(ops.values()) / weights_per_warp,
            "opcodes": dict(ops.most_common()), "wgmma_waits": waits}


def fwd_resources(cfg: kern.FwdConfig, lora_slices: int = 0, lora_rank: int = 1, bias: bool = False,
                  even_k: bool = True, capability: int = 90) -> dict[str, int]:
    """Registers per thread and spill bytes of ``_fwd_kernel`` as ``nvfp4_matmul`` launches it with ``cfg`` (and
    optionally the bias / LoRA epilogue), compiled for ``sm_<capability>a``."""
    const = _fwd_constexprs(cfg, lora_slices, lora_rank, bias, even_k)
    return _resources(kern._fwd_kernel, const, _POINTERS, cfg.num_warps, cfg.num_stages, cfg.maxnreg, capability)


_BWD_POINTERS = {"dy_ptr": "*bf16", "w_ptr": "*u8", "s_ptr": "*u8", "gs_ptr": "*fp32", "dx_ptr": "*fp32",
                 "out_ptr": "*bf16", "cnt_ptr": "*i32"}


def _bwd_constexprs(cfg: kern.BwdConfig, even_n: bool = True) -> dict:
    return kern.bwd_constexprs(cfg, cfg.split_n, cfg.fused and cfg.split_n > 1, even_n)


def bwd_resources(cfg: kern.BwdConfig, even_n: bool = True, capability: int = 90) -> dict[str, int]:
    """The same for ``_bwd_kernel`` (input gradient) as ``nvfp4_matmul_grad_input`` launches it with ``cfg``."""
    return _resources(kern._bwd_kernel, _bwd_constexprs(cfg, even_n), _BWD_POINTERS, cfg.num_warps, cfg.num_stages,
                      None, capability)


def bwd_loop_global_loads(cfg: kern.BwdConfig, capability: int = 90) -> Counter:
    """Global-memory load instructions (``LDG`` / ``LDGSTS`` with their width suffixes, e.g. ``LDGSTS.E.BYPASS.128``)
    in ``_bwd_kernel``'s main loop for ``cfg``: what the loop streams W's bytes and dY with."""
    _, sass = _assemble(kern._bwd_kernel, _bwd_constexprs(cfg), _BWD_POINTERS, cfg.num_warps, cfg.num_stages, None,
                        capability, disassemble=True)
    loads = Counter()
    for text in main_loop_instructions(sass):
        op = next(w for w in text.split() if not w.startswith("@"))
        if op.startswith("LDG"):
            loads[op] += 1
    return loads


# ptxas's notes that it serialized a kernel's wgmma instructions (C7510-C7515: register pressure, or registers of an
# in-flight wgmma written by other instructions): each is a loss a timing would only show indirectly.
_WGMMA_SERIALIZED = re.compile(r"\(C751\d\)[^\n]*wgmma[^\n]*serialized")


_TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global"


def _copies_before_wait(ptx: str) -> list[int]:
    """Per stretch of PTX between two register reallocations (``setmaxnreg``: each warp-specialized partition sets
    its own) that holds TMA loads and a griddepcontrol.wait, the loads before the wait (the loader's: W's first
    copies, which no other launch writes)."""
    out = []
    for stretch in re.split(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+\d+;", ptx):
        if _TMA_LOAD in stretch and "griddepcontrol.wait" in stretch:
            out.append(stretch.split("griddepcontrol.wait")[0].count(_TMA_LOAD))
    return out


# ``ws_report``'s results by (config, options): the CPU tests ask for the same kernel from several tests.
_WS_REPORTS: dict = {}


def ws_report(cfg, out_f32: bool = False, **options) -> dict:
    """``_ws_report(cfg, out_f32, **options)`` (see there), computed once per config and options in this process."""
    key = (cfg, bool(out_f32), tuple(sorted(options.items())))
    if key not in _WS_REPORTS:
        _WS_REPORTS[key] = _ws_report(cfg, out_f32, **options)
    return copy.deepcopy(_WS_REPORTS[key])


def ws_reports(calls: list, workers: int | None = None) -> list[dict]:
    """``ws_report(*args, **options)`` for each ``(args, options)`` of ``calls``, several at once: most of a report's
    time is ptxas and nvdisasm, processes of their own, which threads overlap (1.6x on two cores)."""
    workers = workers or min(4, len(os.sched_getaffinity(0)))
    with ThreadPoolExecutor(max(1, workers)) as pool:
        return list(pool.map(lambda call: ws_report(*call[0], **call[1]), calls))


def _ws_report(cfg, out_f32: bool = False, capability: int = 90, words: bool = False, glu: bool = False,
              row_norm: bool = False, add_norm: bool = False, norm_nt: int = 64, rope: bool = False,
              rows: bool = False, shift_last: bool = False, sub_box: int = 0, tma_store: bool | int = False,
              pdl: bool = False, bias: bool = False, lora_slices: int = 0, lora_rank: int = 16) -> dict:
    """The warp-specialized kernel (``nvfp4_gemm_ws``) compiled for ``cfg`` as ``ws_matmul`` (a ``WsConfig``) or
    ``ws_matmul_grad_input`` (a ``WsBwdConfig``) launches it: registers per thread, threads per CTA, shared-memory
    bytes, spill bytes, whether ptxas
    serialized the wgmmas, the wgmma waits in the SASS (``WARPGROUP.DEPBAR.LE gsb0, n``: n = 2 keeps a chunk's
    two wgmma groups in flight), the global atomics (the fused split sum's tile counter) and the barriers scoped to
    one warpgroup's 128 threads (a warp-specialized partition's). ``shift_last``: the forward's last M tile ending at
    row M (``_tile_m0``; also the input gradient's), as ``ws_matmul`` / ``ws_matmul_grad_input`` launch it where the
    last tile is short (``nvfp4_gemm_ws.shift_last_tile``). ``sub_box``: XB, the last tile's X (dY) copied in boxes
    of that many rows where it reaches past M (``_x_box``, ``nvfp4_gemm_ws.sub_box_rows``). ``tma_store``: the
    forward's whole tiles stored by TMA from shared memory (``_tma_store_tile``; stream-K: 1 from boxes of their own,
    ``_sk_tma_store_tile``, 2 through the ring's stage, ``_sk_ring_store_tile``). ``pdl``: the forward launched with
    programmatic dependent launch (``nvfp4_gemm_ws.pdl_enabled``). ``bias`` / ``lora_slices`` / ``lora_rank``: the
    forward's bias and adapter expand in its epilogue (``ws_matmul(bias=, lora=)``)."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource

    from qerl.kernels import nvfp4_gemm_ws as ws

    if isinstance(cfg, ws.WsBwdConfig):
        fn = ws._ws_bwd_sk_kernel if cfg.stream_k else ws._ws_bwd_kernel
        const = ({"BM": cfg.bm, "STAGES": cfg.stages, "CONSUMER_REGS": ws.CONSUMER_REGS, "ROWS": rows}
                 if cfg.stream_k else
                 {"BM": cfg.bm, "STAGES": cfg.stages, "OUT_F32": out_f32, "FUSED": out_f32 and cfg.fused,
                  "CONSUMERS": cfg.consumers, "CONSUMER_REGS": ws.CONSUMER_REGS, "IN_FLIGHT": cfg.in_flight,
                  "ROWS": rows})
        const["SHIFT_LAST"] = bool(shift_last)
        const["XB"] = sub_box
        x_l = gl.NVMMASharedLayout.get_default_for([cfg.bm, 64], gl.bfloat16)
        _, w_l, s_l = ws.shared_layouts(64, 64)
        descs = {"dy_desc": f"tensordesc<bf16[{cfg.bm}, 64],{x_l!r}>", "w_desc": f"tensordesc<u8[64, 64],{w_l!r}>",
                 "s_desc": f"tensordesc<u8[2, 256],{s_l!r}>",
                 "dys_desc": f"tensordesc<bf16[{sub_box or cfg.bm}, 64],{x_l!r}>"}
        pointers = {"dx_ptr": "*fp32" if out_f32 else "*bf16", "out_ptr": "*bf16",
                    "cnt_ptr": "*i32" if (out_f32 and cfg.fused) or cfg.stream_k else "*fp32", "gs_ptr": "*fp32"}
        if cfg.stream_k:
            pointers.update(dx_ptr="*bf16", part_ptr="*fp32")
    elif cfg.stream_k:
        fn = ws._ws_fwd_sk_kernel
        const = {"BM": cfg.bm, "BN": cfg.bn, "CONSUMERS": cfg.consumers, "STAGES": cfg.stages,
                 "CONSUMER_REGS": ws.CONSUMER_REGS, "WORDS": words, "ROW_NORM": row_norm, "NORM_NT": norm_nt,
                 "SHIFT_LAST": bool(shift_last), "XB": sub_box, "TMA_STORE": int(tma_store),
                 "IN_FLIGHT": cfg.in_flight, "PDL": pdl}
        x_l, w_l, s_l = ws.shared_layouts(cfg.bm, cfg.bn)
        descs = {"x_desc": f"tensordesc<bf16[{cfg.bm}, 64],{x_l!r}>", "w_desc": f"tensordesc<u8[{cfg.bn}, 64],{w_l!r}>",
                 "s_desc": f"tensordesc<u8[{cfg.bn // 32}, 256],{s_l!r}>",
                 "xs_desc": f"tensordesc<bf16[{sub_box or cfg.bm}, 64],{x_l!r}>",
                 "y_desc": f"tensordesc<bf16[{cfg.bm}, 64],{x_l!r}>"}
        pointers = {"y_ptr": "*bf16", "part_ptr": "*fp32", "cnt_ptr": "*i32", "gs_ptr": "*fp32",
                    "norm_ptr": "*fp32" if row_norm else "*bf16", "eps": "fp32"}
    else:
        fn = ws._ws_fwd_kernel
        const = {"BM": cfg.bm, "BN": cfg.bn, "CONSUMERS": cfg.consumers, "STAGES": cfg.stages, "OUT_F32": out_f32,
                 "CONSUMER_REGS": ws.CONSUMER_REGS, "IN_FLIGHT": cfg.in_flight, "FUSED": out_f32 and cfg.fused,
                 "WORDS": words, "GLU": glu, "ROW_NORM": row_norm, "NORM_NT": norm_nt, "ADD_NORM": add_norm,
                 "ROPE": rope, "ROPE_BIAS": rope,
                 "SHIFT_LAST": bool(shift_last) and not add_norm and not rope, "XB": sub_box,
                 "TMA_STORE": tma_store, "PDL": pdl, "HAS_BIAS": bias, "LORA_S": lora_slices, "LORA_R": lora_rank}
        x_l, w_l, s_l = ws.shared_layouts(cfg.bm, cfg.bn)
        descs = {"x_desc": f"tensordesc<bf16[{cfg.bm}, 64],{x_l!r}>", "w_desc": f"tensordesc<u8[{cfg.bn}, 64],{w_l!r}>",
                 "s_desc": f"tensordesc<u8[{cfg.bn // 32}, 256],{s_l!r}>",
                 "xs_desc": f"tensordesc<bf16[{sub_box or cfg.bm}, 64],{x_l!r}>",
                 "y_desc": f"tensordesc<bf16[{cfg.bm}, 64],{x_l!r}>"}
        pointers = {"y_ptr": "*fp32" if out_f32 else "*bf16", "out_ptr": "*bf16",
                    "cnt_ptr": "*i32" if out_f32 and cfg.fused else "*fp32", "gs_ptr": "*fp32",
                    "norm_ptr": "*fp32" if row_norm else "*bf16", "eps": "fp32", "res_ptr": "*bf16", "u_ptr": "*bf16",
                    "g_ptr": "*bf16", "ssq_ptr": "*fp32" if add_norm else "*bf16", "rope_bias_ptr": "*bf16",
                    "cos_ptr": "*bf16", "sin_ptr": "*bf16", "pos_ptr": "*i64" if rope else "*bf16", "k_ptr": "*bf16",
                    "v_ptr": "*bf16", "bias_ptr": "*bf16", "lu_ptr": "*fp32" if lora_slices else "*bf16",
                    "lb0_ptr": "*bf16", "lb1_ptr": "*bf16", "lb2_ptr": "*bf16"}
    sig = {n: "constexpr" if n in const else descs.get(n) or pointers.get(n, "i32") for n in fn.arg_names}
    skip = {p.name for p in fn.params if p.do_not_specialize}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names)
             if n not in const and n not in descs and n not in skip}
    meta: dict = {}
    report, sass = _assemble_source(GluonASTSource(fn, sig, const, attrs), const, 4, 1, cfg.maxnreg, capability,
                                    disassemble=True, meta=meta)
    ptx = meta.pop("ptx")
    regs = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores", report)
    if not regs or not spills:
        raise RuntimeError(f"unexpected ptxas report: {report[-1000:]}")
    return {"registers": int(regs.group(1)), "spill_bytes": int(spills.group(1)), **meta,
            "wgmma_serialized": bool(_WGMMA_SERIALIZED.search(report)),
            "wgmma_waits": sorted({int(w, 16) for w in re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", sass)}),
            "counter_atomics": len(re.findall(r"\b(?:ATOMG|REDG)\.", sass)),
            "tma_stores": len(re.findall(r"\bUTMASTG\b", sass)),
            "global_stores": len(re.findall(r"\bSTG\.", sass)),
            "consumer_barriers": len(re.findall(r"BAR\.SYNC\S* 0x[0-9a-f]+, 0x80\b", sass)),
            # Programmatic dependent launch (``pdl``): griddepcontrol.wait / .launch_dependents (one per partition's
            # path), and the TMA copies the loader issues before its wait (W's code and scale bytes only).
            "grid_waits": len(re.findall(r"\bACQBULK\b", sass)),
            "dependent_launches": len(re.findall(r"\bPREEXIT\b", sass)),
            "copies_before_wait": _copies_before_wait(ptx),
            "loop_opcodes": dict(main_loop_opcodes(sass).most_common()),
            "mma_loop_opcodes": dict(_opcodes(mma_loop_instructions(sass)).most_common()),
            "chunk_loop_opcodes": dict(_opcodes(densest_mma_loop_instructions(sass)).most_common())}

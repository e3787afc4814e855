"""Compile the forward NVFP4 kernel ahead of time for a GPU target on a machine without one.

Triton lowers a kernel to PTX for a named target with no device present, and the ptxas that ships with Triton
assembles it. That checks GPU-only code paths the CPU interpreter never runs (tl.dot operand shapes and layouts,
inline PTX) and reports what each launch config costs in registers and spills, which bounds how many programs an SM
holds and whether the main loop's state goes through local memory. Used by tests/test_kernels_aot.py and
benchmarks/kernel_resources.py; it says nothing about time (that is measured on the GPU, benchmarks/gemm_nvfp4.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

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


def _resources(fn, const: dict, pointers: dict, num_warps: int, num_stages: int, maxnreg: int | None,
               capability: int) -> dict[str, int]:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    ptxas = ptxas_path()
    if ptxas is None:
        raise RuntimeError("this Triton build ships no ptxas: cannot assemble kernels ahead of time")
    missing = set(const) - set(fn.arg_names)
    if missing:
        raise RuntimeError(f"{fn.__name__} has no parameters {sorted(missing)}: update qerl/kernels/aot.py")
    sig = {n: "constexpr" if n in const else pointers.get(n, "i32") for n in fn.arg_names}
    options = {"num_warps": num_warps, "num_stages": num_stages}
    if maxnreg is not None:
        options["maxnreg"] = maxnreg
    compiled = kern.triton.compile(ASTSource(fn, sig, const), target=GPUTarget("cuda", capability, 32),
                                   options=options)
    arch = f"sm_{capability}a" if capability >= 90 else f"sm_{capability}"
    with tempfile.TemporaryDirectory() as tmp:
        ptx = os.path.join(tmp, "kernel.ptx")
        with open(ptx, "w") as f:
            f.write(compiled.asm["ptx"])
        proc = subprocess.run([ptxas, "-v", "--gpu-name", arch, ptx, "-o", os.path.join(tmp, "kernel.cubin")],
                              capture_output=True, text=True, timeout=300)
    if proc.returncode:
        raise RuntimeError(f"ptxas failed for {const}: {proc.stderr[-2000:]}")
    regs = re.search(r"Used (\d+) registers", proc.stderr)
    spills = re.search(r"(\d+) bytes spill stores", proc.stderr)
    if not regs or not spills:
        raise RuntimeError(f"unexpected ptxas report: {proc.stderr[-1000:]}")
    return {"registers": int(regs.group(1)), "spill_bytes": int(spills.group(1))}


def fwd_resources(cfg: kern.FwdConfig, lora_slices: int = 0, lora_rank: int = 1, bias: bool = False,
                  even_k: bool = True, capability: int = 90) -> dict[str, int]:
    """Registers per thread and spill bytes of ``_fwd_kernel`` as ``nvfp4_matmul`` launches it with ``cfg`` (and
    optionally the bias / LoRA epilogue), compiled for ``sm_<capability>a``."""
    dot = lora_slices > 0 and kern._lora_dot(cfg)
    const = dict(BM=cfg.bm, BN=cfg.bn, CH=cfg.ch, MODE=cfg.mode, ASM=cfg.asm, GROUP_M=cfg.group_m, EVEN_K=even_k,
                 OUT_F32=cfg.split_k > 1, FUSED=cfg.fused and cfg.split_k > 1, HAS_BIAS=bias,
                 LORA_SLICES=lora_slices, LORA_R=lora_rank, LORA_RC=kern._rank_chunk(lora_rank, dot), LORA_DOT=dot)
    return _resources(kern._fwd_kernel, const, _POINTERS, cfg.num_warps, cfg.num_stages, cfg.maxnreg, capability)


def bwd_resources(cfg: kern.BwdConfig, even_n: bool = True, capability: int = 90) -> dict[str, int]:
    """The same for ``_bwd_kernel`` (input gradient) as ``nvfp4_matmul_grad_input`` launches it with ``cfg``."""
    const = dict(BM=cfg.bm, BN=cfg.bn, MODE=cfg.mode, ASM=cfg.asm, GROUP_M=cfg.group_m, EVEN_N=even_n,
                 OUT_F32=cfg.split_n > 1, FUSED=cfg.fused and cfg.split_n > 1)
    pointers = {"dy_ptr": "*bf16", "w_ptr": "*u8", "s_ptr": "*u8", "gs_ptr": "*fp32", "dx_ptr": "*fp32",
                "out_ptr": "*bf16", "cnt_ptr": "*i32"}
    return _resources(kern._bwd_kernel, const, pointers, cfg.num_warps, cfg.num_stages, None, capability)

"""How many CTAs of the warp-specialized kernels an SM holds, per launch config: the CUDA driver's occupancy for the
compiled kernel (``cuOccupancyMaxActiveBlocksPerMultiprocessor`` with its threads and shared memory), next to the
registers it was compiled with. The "fill" searches of ``benchmarks/gemm_ws.py`` choose splits that fill whole waves
of these CTAs, so their tables of CTAs per SM must agree with what the driver reports.

    python benchmarks/ws_occupancy.py --out benchmarks/out/ws_occupancy.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BWD = [(8, 6, 1, 48), (8, 6, 1, 64), (8, 6, 1, 80), (16, 6, 1, 80), (32, 6, 1, 96), (64, 4, 1, 128),
       (8, 6, 1, 80, False, 0, 1, False, True), (16, 6, 1, 128, False, 0, 1, False, True)]
FWD = [(8, 64, 6, 1, 1, True, 64), (8, 64, 6, 1, 1, True, 80), (8, 128, 6, 1, 1, True, 128),
       (8, 64, 6, 1, 1, False, 48)]


def occupancy(kernel) -> dict:
    """The driver's CTAs per SM for a compiled Triton / Gluon kernel, with its registers, warps and shared memory."""
    kernel._init_handles()
    cuda = ctypes.CDLL("libcuda.so.1")
    n = ctypes.c_int()
    threads = 32 * kernel.metadata.num_warps
    err = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), ctypes.c_void_p(kernel.function),
                                                           threads, kernel.metadata.shared)
    if err:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed ({err})")
    return {"ctas_per_sm": n.value, "registers": kernel.n_regs, "threads": threads, "shared": kernel.metadata.shared}


def newest(fn, device: int):
    """The kernel ``fn`` compiled last on ``device`` (Triton's per-device cache keeps insertion order)."""
    return list(fn.device_caches[device][0].values())[-1]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="benchmarks/out/ws_occupancy.json")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a Hopper GPU")
    from qerl import nvfp4
    from qerl.kernels import nvfp4_gemm as kern
    from qerl.kernels import nvfp4_gemm_ws as ws

    if not ws.available():
        p.error("needs a Hopper GPU and Triton's Gluon")
    dev = torch.cuda.current_device()
    q = nvfp4.quantize(torch.randn(512, 1024, device="cuda") * 0.02)
    rows = []
    for layout, cfgs, run, fn in (("rows", BWD, ws.ws_matmul_grad_input, ws._ws_bwd_kernel),
                                  ("words", FWD, ws.ws_matmul, ws._ws_fwd_kernel)):
        w = kern.prepare_weight(q.packed, q.scale, q.global_scale, layout=layout)
        for fields in cfgs:
            cfg = (ws.WsBwdConfig if run is ws.ws_matmul_grad_input else ws.WsConfig)(*fields)
            inp = torch.randn(cfg.bm, w.n if run is ws.ws_matmul_grad_input else w.k, device="cuda")
            run(inp.to(torch.bfloat16), w, cfg)
            torch.cuda.synchronize()
            row = {"kernel": fn.__name__, "config": cfg._asdict(), **occupancy(newest(fn, dev))}
            rows.append(row)
            print(f"{fn.__name__} {tuple(cfg)}: {row['ctas_per_sm']} CTAs per SM ({row['registers']} registers, "
                  f"{row['threads']} threads, {row['shared']} bytes of shared memory)", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__}
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

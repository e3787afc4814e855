"""Does a kernel time slower right after a BF16 GEMM of the same shape? The default forward dispatch
(``nvfp4_matmul``) and its warp-specialized kernel called directly (``ws_matmul``, same config) timed alternately,
then each right after cuBLAS BF16 (``F.linear``), with benchmarks/gemm_nvfp4.py's ``bench``.

    PYTHONPATH=. python benchmarks/order_effect.py --n 55296 --k 5120 --m 512     # Qwen2.5-32B gate_up
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_nvfp4 import bench, bf16_copies  # noqa: E402

from qerl import nvfp4  # noqa: E402
from qerl.kernels import nvfp4_gemm as kern  # noqa: E402
from qerl.kernels import nvfp4_gemm_ws as ws  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=55296)
    ap.add_argument("--k", type=int, default=5120)
    ap.add_argument("--m", type=int, default=512)
    args = ap.parse_args()
    n, k, m = args.n, args.k, args.m
    q = nvfp4.quantize(torch.randn(n, k, device="cuda") * 0.02)
    kw0 = kern.prepare_weight(q.packed, q.scale, q.global_scale)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    kws = [kw0] + [kern.KernelWeight(kw0.codes.clone(), kw0.scales.clone(), kw0.global_scale.clone(), n, k)
                   for _ in range(math.ceil(3 * l2 / kw0.nbytes()) - 1)]
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    cfg = ws.pick(x, n, k, kw0.k_pad)
    if cfg is None:
        sys.exit("no warp-specialized config for this shape and M on this device")
    w_bf16 = nvfp4.dequantize(q.packed, q.scale, q.global_scale, dtype=torch.bfloat16)
    wbs = bf16_copies(w_bf16, l2)

    def dispatch() -> float:
        return bench([lambda kw=kw: kern.nvfp4_matmul(x, kw) for kw in kws]) * 1e6

    def direct() -> float:
        return bench([lambda kw=kw: ws.ws_matmul(x, kw, cfg) for kw in kws]) * 1e6

    def bf16() -> float:
        return bench([lambda w=w: torch.nn.functional.linear(x, w) for w in wbs]) * 1e6

    print(f"N={n} K={k} M={m} config {tuple(cfg)}")
    for _ in range(3):
        print(f"dispatch {dispatch():.1f} us, direct {direct():.1f} us")
    for first, second in ((dispatch, direct), (direct, dispatch)):
        print(f"bf16 {bf16():.1f} us, then {first.__name__} {first():.1f} us, {second.__name__} {second():.1f} us")


if __name__ == "__main__":
    main()

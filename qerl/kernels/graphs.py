"""CUDA-graph capture for the decode paths' kernels (benchmarks/decode_nvfp4.py, the GPU tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def capture(fn: Callable[[], Any], warmups: int = 1) -> tuple[torch.cuda.CUDAGraph, Any]:
    """(a CUDA graph of ``fn()``, what ``fn`` returned while captured): ``warmups`` calls on a side stream first
    (they compile kernels, size cuBLAS workspaces and allocate what a capture cannot, e.g. the split tiles'
    counters of ``qerl.kernels.nvfp4_gemm``)."""
    graph, out, _ = warm_and_capture(fn, warmups)
    return graph, out


def warm_and_capture(fn: Callable[[], Any], warmups: int = 1, pool: Any = None) -> tuple[torch.cuda.CUDAGraph, Any, Any]:
    """As ``capture``, also returning what the last warm-up call returned: where ``fn`` changes state (e.g. appends
    to a KV cache), that call can be the real one, since capturing runs nothing. ``pool``: a memory pool shared with
    other graphs (``torch.cuda.graph_pool_handle()``), for graphs that never run at the same time and whose outputs
    their callers copy before another of them replays."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    warm = None
    with torch.cuda.stream(stream):
        for _ in range(warmups):
            warm = fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = fn()
    return graph, out, warm

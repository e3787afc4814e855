"""Launch configs for vLLM's LoRA shrink / expand Triton kernels on Qwen2.5 layer shapes, in vLLM's own tuned-config
format (the folder that ``VLLM_TUNED_CONFIG_FOLDER`` names; qerl's rollout backend picks a shipped folder for the GPU).

Why: with an active adapter every decoder layer runs a shrink (x @ A^T) and an expand (+= u @ B^T) per projection
group (qkv, o, gate_up, down); on the 14B shape that costs ~2.2 ms per decode step on either base, which is what keeps
NVFP4 rollouts with an adapter below 1.5x BF16 (benchmarks/RESULTS.md, runs 3-4). vLLM 0.26 ships no tuned table and
falls back to one config for all shapes (shrink: 32 x 16 x 256 tiles with 64 K-splits below 128 tokens).

For each (shape, projection group, tokens M) every candidate is checked against an fp32 reference, then timed as
CUDA-graph replays over rotating copies of the adapter (more bytes than L2, as in a decode step where the whole
model streams between two uses of one layer's adapter); the median replay is divided by the calls in it. vLLM's
default config is timed the same way in the same run. The kernels are reached through vLLM's registered ops
(``lora_shrink`` / ``lora_expand``) with the candidate injected as the config those ops look up.

    python3 benchmarks/tune_vllm_lora.py --shapes 14b --rank 32 --ms 1,8,16,64 --out DIR

Writes under DIR: ``{GPU}_SHRINK.json``, ``{GPU}_EXPAND_TRUE.json`` (and ``_FALSE``, the same picks, used by vLLM's
dual-stream mode), merged into files already there, plus ``lora_tune.json`` (every candidate's time) and
``lora_tune.md`` (default vs tuned per group and the per-decode-step sum).
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gemm_nvfp4 import bench  # noqa: E402
from rollout_vllm import SHAPES  # noqa: E402

from eval.runner import write_json_atomic  # noqa: E402
from qerl.rollout.vllm_lora_configs import gpu_file_stem  # noqa: E402


def projection_groups(shape: str) -> dict[str, tuple[int, tuple[int, ...]]]:
    """{group: (input features, output slices)} as vLLM's merged LoRA layers see one Qwen2 decoder layer."""
    s = SHAPES[shape]
    h, i = s["hidden_size"], s["intermediate_size"]
    kv = s["num_key_value_heads"] * h // s["num_attention_heads"]
    return {"qkv": (h, (h, kv, kv)), "o": (h, (h,)), "gate_up": (h, (i, i)), "down": (i, (h,))}


# ----------------------------------------------------------------------------------------------- candidates
# "near": the neighbourhood of every pick of the full search on an H200 (run 5 in RESULTS.md), for a quicker search
# on another GPU; "full": the whole grid.
SPACES = {
    "full": {"split_k": (4, 8, 16, 32, 64), "block_k": (32, 64, 128, 256), "exp_block_n": (32, 64, 128, 256),
             "exp_warps": (1, 2, 4, 8)},
    "near": {"split_k": (32, 64), "block_k": (64, 128, 256), "exp_block_n": (32, 64, 128), "exp_warps": (1, 2, 4)},
}


def shrink_candidates(m: int, space: str = "full") -> list[dict]:
    out = []
    sp = SPACES[space]
    block_ms = (16,) if m <= 16 else (16, 32, 64)
    for bm, bn, bk, split, warps in itertools.product(block_ms, (16, 32), sp["block_k"], sp["split_k"], (2, 4)):
        if m > 16 and (warps == 2 or bk == 256):
            continue
        out.append(dict(block_m=bm, block_n=bn, block_k=bk, split_k=split, num_warps=warps, num_ctas=1,
                        group_size_m=8, num_stages=2, max_nreg=None))
    return out


def expand_candidates(m: int, rank: int, space: str = "full") -> list[dict]:
    out = []
    sp = SPACES[space]
    block_ms = (16,) if m <= 16 else (16, 32, 64)
    block_ks = sorted({max(16, min(32, rank)), 16})
    for bm, bn, bk, warps, stages in itertools.product(block_ms, sp["exp_block_n"], block_ks, sp["exp_warps"], (1, 2)):
        if m > 16 and warps < 4:
            continue
        out.append(dict(block_m=bm, block_n=bn, block_k=bk, num_warps=warps, num_ctas=1, num_stages=stages,
                        max_nreg=None))
    return out


# ----------------------------------------------------------------------------------------------- vLLM's ops
class LoRAOps:
    """vLLM's ``lora_shrink`` / ``lora_expand`` with a chosen launch config (``None``: vLLM's own choice).

    The ops read their config through ``get_lora_op_configs`` in their modules; the benchmark substitutes that
    lookup (this script only; the training code never does), and says so plainly if vLLM has moved it."""

    def __init__(self) -> None:
        from vllm.lora.ops.triton_ops import (
            LoRAKernelMeta,
            lora_expand,
            lora_expand_op,
            lora_shrink,
            lora_shrink_op,
            utils,
        )

        for mod in (lora_shrink_op, lora_expand_op):
            if not hasattr(mod, "get_lora_op_configs"):
                raise SystemExit(f"{mod.__name__} no longer looks up get_lora_op_configs: update this benchmark "
                                 "for the installed vLLM")
        if os.environ.get("VLLM_TUNED_CONFIG_FOLDER"):
            raise SystemExit("unset VLLM_TUNED_CONFIG_FOLDER: the defaults timed here must be vLLM's own")
        self.meta_cls, self.shrink, self.expand = LoRAKernelMeta, lora_shrink, lora_expand
        self.modules = {"shrink": lora_shrink_op, "expand": lora_expand_op}
        self.vllm_lookup = utils.get_lora_op_configs
        self.current: dict[str, dict | None] = {"shrink": None, "expand": None}
        for op, mod in self.modules.items():
            mod.get_lora_op_configs = self._lookup(op)

    def _lookup(self, op: str):
        def lookup(*args, **kwargs):
            cfg = self.current[op]
            return dict(cfg) if cfg is not None else self.vllm_lookup(*args, **kwargs)

        return lookup

    def default(self, op: str, **kwargs) -> dict:
        return dict(self.vllm_lookup(op, **kwargs))


class GroupCase:
    """One projection group's adapter (several rotating copies), input, output and vLLM's token metadata."""

    def __init__(self, ops: LoRAOps, m: int, k: int, slices: tuple[int, ...], rank: int, max_loras: int,
                 copies: int, device: torch.device) -> None:
        g = torch.Generator(device="cpu").manual_seed(m * 7919 + k * 31 + len(slices))
        self.ops, self.m, self.k, self.slices, self.rank = ops, m, k, slices, rank
        self.scale = 0.5

        def rnd(*shape, std):
            return (torch.randn(*shape, generator=g) * std).to(device=device, dtype=torch.bfloat16)

        # vLLM's stacked layout: A (max_loras, 1, rank, in), B (max_loras, 1, out_slice, rank); slot 0 is in use.
        self.a = [tuple(rnd(max_loras, 1, rank, k, std=k ** -0.5) for _ in slices) for _ in range(copies)]
        self.b = [tuple(rnd(max_loras, 1, n, rank, std=rank ** -0.5) for n in slices) for _ in range(copies)]
        self.x = rnd(m, k, std=1.0)
        self.y0 = rnd(m, sum(slices), std=1.0)
        self.y = self.y0.clone()
        self.u = torch.empty(len(slices), m, rank, dtype=torch.float32, device=device)
        self.meta = ops.meta_cls.make(max_loras, m, device)
        self.meta.prepare_tensors(torch.zeros(m, dtype=torch.int32, device=device))
        self.meta_args = self.meta.meta_args(m, False)  # what a CUDA-graph-captured decode step passes

    def shrink(self, i: int = 0) -> None:
        self.ops.shrink(self.x, self.a[i], self.u, *self.meta_args, self.scale)

    def expand(self, i: int = 0) -> None:
        self.ops.expand(self.u, self.b[i], self.y, *self.meta_args, offset_start=0, add_inputs=True)

    def check(self, op: str) -> float:
        """Relative error of copy 0's op against fp32; the output is poisoned first."""
        x32 = self.x.float()
        u_ref = torch.stack([x32 @ a[0, 0].float().T * self.scale for a in self.a[0]])
        if op == "shrink":
            self.u.fill_(float("nan"))
            self.shrink(0)
            out, ref = self.u, u_ref
        else:
            self.u.copy_(u_ref)
            self.y.copy_(self.y0)
            self.expand(0)
            ref = self.y0.float() + torch.cat([u_ref[s] @ b[0, 0].float().T for s, b in enumerate(self.b[0])], dim=1)
            out = self.y
        if not torch.isfinite(out).all():
            return float("inf")
        return float((out.float() - ref).norm() / ref.norm())

    def time(self, op: str) -> float:
        fns = [(lambda i=i: self.shrink(i)) if op == "shrink" else (lambda i=i: self.expand(i))
               for i in range(len(self.a))]
        return bench(fns, min_ms=8.0, max_replays=60)


# ----------------------------------------------------------------------------------------------- search
def search(ops: LoRAOps, case: GroupCase, op: str, candidates: list[dict], tol: float, log) -> dict:
    kwargs = dict(max_loras=case.meta.active_lora_ids.numel(), batch=case.m,
                  hidden_size=case.k if op == "shrink" else max(case.slices), rank=case.rank,
                  num_slices=len(case.slices))
    if op == "expand":
        kwargs["add_inputs"] = True
    default = ops.default(op, **kwargs)
    results = []
    for cfg in [None] + candidates:
        ops.current[op] = cfg
        try:
            err = case.check(op)
            if not err < tol:
                results.append({"config": cfg, "error": err, "seconds": None})
                continue
            results.append({"config": cfg, "error": err, "seconds": case.time(op)})
        except Exception as exc:  # a config the kernel cannot compile (e.g. too much shared memory) is skipped
            results.append({"config": cfg, "error": None, "seconds": None, "failed": f"{type(exc).__name__}: {exc}"[:200]})
        finally:
            ops.current[op] = None
    base = results[0]
    if base["seconds"] is None:
        raise SystemExit(f"vLLM's default {op} config failed its check: {base}")
    timed = [r for r in results[1:] if r["seconds"] is not None]
    best = min(timed, key=lambda r: r["seconds"]) if timed else base
    if best["seconds"] >= base["seconds"]:
        best = {**base, "config": default}  # keep vLLM's default where nothing beat it
    log(f"  {op:6s} default {base['seconds'] * 1e6:7.2f} us  best {best['seconds'] * 1e6:7.2f} us  "
        f"({base['seconds'] / best['seconds']:.2f}x, {len(timed)}/{len(candidates)} candidates timed)")
    return {"default": {**base, "config": default}, "best": best, "candidates": results[1:]}


def nested_set(table: dict, keys: list[str], value: dict) -> None:
    for key in keys[:-1]:
        table = table.setdefault(key, {})
    table[keys[-1]] = value


def fill_slice_counts(table: dict, upto: int = 4) -> None:
    """vLLM indexes ``num_slices`` without a nearest-key fallback: give every count up to ``upto`` an entry (the
    nearest tuned one), so a layer with another slice count still finds launch parameters (valid for any shape)."""
    for per_loras in table.values():
        have = sorted(int(s) for s in per_loras)
        for s in range(1, upto + 1):
            if str(s) not in per_loras:
                near = min(have, key=lambda h: (abs(h - s), h))
                per_loras[str(s)] = copy.deepcopy(per_loras[str(near)])


def add_default_at(table: dict, op: str, m_key: int, default_for) -> None:
    """Give every tuned (slices, k, n) an entry at ``m_key`` tokens holding vLLM's own default for that size: vLLM
    picks the nearest tuned M, so without it a prefill of thousands of tokens would run a config searched for decode
    (measured 15-18% slower prefill on the 14B shape). ``default_for(op, batch, num_slices)`` gives the default."""
    for per_loras in table.values():
        for slices, per_m in per_loras.items():
            shapes = {(k, n) for per_k in per_m.values() for k, per_n in per_k.items() for n in per_n}
            for k, n in shapes:
                per_n = per_m.setdefault(str(m_key), {}).setdefault(k, {})
                if n not in per_n:  # an entry tuned at that M stays
                    per_n[n] = default_for(op, m_key, int(slices))


def summary(report: dict) -> str:
    """Markdown: default vs tuned time per group and M, and the sum over one decode step (every layer runs each
    group's shrink + expand once)."""
    meta = report["meta"]
    # Per decode step: every layer runs each group's shrink + expand once.
    lines = [f"# vLLM LoRA kernels, default vs tuned launch configs ({meta['device']}, {meta['date']}, "
             f"vLLM {meta['vllm']})", "", f"`{meta['command']}`", "",
             "| shape | group | M | shrink default us | shrink tuned us | expand default us | expand tuned us |",
             "|---|---|---|---|---|---|---|"]
    step: dict[tuple[str, int], list[float]] = {}
    for r in report["rows"]:
        sd, st = r["shrink"]["default"]["seconds"], r["shrink"]["best"]["seconds"]
        ed, et = r["expand"]["default"]["seconds"], r["expand"]["best"]["seconds"]
        lines.append(f"| {r['shape']} | {r['group']} | {r['m']} | {sd * 1e6:.2f} | {st * 1e6:.2f} | {ed * 1e6:.2f} | "
                     f"{et * 1e6:.2f} |")
        acc = step.setdefault((r["shape"], r["m"]), [0.0, 0.0])
        acc[0] += r["layers"] * (sd + ed)
        acc[1] += r["layers"] * (st + et)
    lines += ["", "Adapter kernels per decode step (all layers, groups measured above): default -> tuned", ""]
    for (shape, m), (d, t) in sorted(step.items()):
        lines.append(f"- {shape} M = {m}: {d * 1e3:.3f} ms -> {t * 1e3:.3f} ms ({d / t:.2f}x)")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="14b")
    p.add_argument("--rank", type=int, default=32)
    p.add_argument("--ms", default="1,8,16,64")
    p.add_argument("--groups", default="qkv,o,gate_up,down")
    p.add_argument("--max-loras", type=int, default=1, help="the engine's max_loras (qerl's backend uses 1)")
    p.add_argument("--default-from", type=int, default=128,
                   help="token count at which vLLM's own default configs are written (nearest-M lookup: larger "
                        "batches and prefills keep vLLM's defaults)")
    p.add_argument("--space", choices=sorted(SPACES), default="full",
                   help="candidate grid: full, or near (around the H200 picks; ~3x fewer candidates)")
    p.add_argument("--tol", type=float, default=2e-2, help="relative error allowed against fp32")
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("tune_vllm_lora.py times CUDA kernels: run it on the GPU that will serve the rollouts")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log_file = open(out / "lora_tune.log", "a")

    def log(msg: str) -> None:
        print(msg, flush=True)
        log_file.write(msg + "\n")
        log_file.flush()

    import vllm

    ops = LoRAOps()

    def default_for(op: str, batch: int, num_slices: int) -> dict:
        # vLLM's defaults depend on the op, the token count and the slice count only (not k / n / rank).
        return ops.default(op, max_loras=args.max_loras + 1, batch=batch, hidden_size=4096, rank=args.rank,
                           num_slices=num_slices, **({"add_inputs": True} if op == "expand" else {}))

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(0)
    gpu = gpu_file_stem(torch.cuda.get_device_name())  # vLLM's file-name form
    files = {"shrink": out / f"{gpu}_SHRINK.json", "expand": out / f"{gpu}_EXPAND_TRUE.json"}
    tables = {op: (json.loads(f.read_text()) if f.is_file() else {}) for op, f in files.items()}
    report = {"meta": {"device": props.name, "date": time.strftime("%Y-%m-%d"), "vllm": vllm.__version__,
                       "torch": torch.__version__, "command": " ".join(["python3"] + sys.argv)}, "rows": []}
    ms = [int(v) for v in args.ms.split(",")]
    loras_key = str(args.max_loras + 1)  # vLLM keys the table by len(lora_ids) = max_loras + 1
    # M outermost, in the order given: a run cut short still leaves complete tables for the first M values.
    for m, shape in itertools.product(ms, args.shapes.split(",")):
        groups = projection_groups(shape)
        layers = SHAPES[shape]["num_hidden_layers"]
        for name in args.groups.split(","):
            k, slices = groups[name]
            per_copy = args.rank * (k + sum(slices)) * 2
            copies = int(min(128, max(8, math.ceil(2 * props.L2_cache_size / per_copy))))
            log(f"{shape} {name} (in {k}, slices {slices}) rank {args.rank} M {m}: {copies} adapter copies")
            case = GroupCase(ops, m, k, slices, args.rank, args.max_loras, copies, dev)
            row = {"shape": shape, "group": name, "m": m, "k": k, "slices": list(slices), "rank": args.rank,
                   "layers": layers}
            for op in ("shrink", "expand"):
                cands = (shrink_candidates(m, args.space) if op == "shrink"
                         else expand_candidates(m, args.rank, args.space))
                res = search(ops, case, op, cands, args.tol, log)
                row[op] = res
                kk, nn = (k, args.rank) if op == "shrink" else (args.rank, max(slices))
                nested_set(tables[op], [loras_key, str(len(slices)), str(m), str(kk), str(nn)],
                           dict(res["best"]["config"]))
            report["rows"].append(row)
            del case
            torch.cuda.empty_cache()
            for op, f in files.items():
                add_default_at(tables[op], op, args.default_from, default_for)
                fill_slice_counts(tables[op])
                write_json_atomic(f, tables[op])
            write_json_atomic(files["expand"].with_name(f"{gpu}_EXPAND_FALSE.json"), tables["expand"])
            write_json_atomic(out / "lora_tune.json", report)
            (out / "lora_tune.md").write_text(summary(report))
    text = summary(report)
    (out / "lora_tune.md").write_text(text)
    log(text)


if __name__ == "__main__":
    main()

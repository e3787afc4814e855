"""Rebuild an llmcompressor NVFP4A16 checkpoint from its dense source with this project's codec, checked tensor by
tensor against a manifest of the original's hashes.

Why: a machine without llmcompressor (its env cannot share vLLM's) or without room to receive the quantized files
can still hold exactly llmcompressor's checkpoint. The codec reproduces llmcompressor's bytes (the quantize-env
tests check it on every layer of SmolLM2), and the manifest proves it again where the rebuild ran: a single
differing tensor aborts the rebuild and nothing is written.

  python scripts/nvfp4_rebuild.py manifest --checkpoint NVFP4_DIR --out MANIFEST_DIR
      (where llmcompressor ran: every tensor's dtype / shape / sha256, plus the checkpoint's small files)
  python scripts/nvfp4_rebuild.py rebuild --dense DENSE_DIR --manifest MANIFEST_DIR --out OUT_DIR
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qerl import nvfp4  # noqa: E402
from qerl.atomic import atomic_directory  # noqa: E402
from qerl.errors import UserError  # noqa: E402

MANIFEST = "tensors.json"
QUANT_SUFFIXES = (".weight_packed", ".weight_scale", ".weight_global_scale")
# llmcompressor gives the projections that read the same input one global scale (vLLM fuses them into one GEMM).
FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def tensor_sha256(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def _safetensors(path: Path) -> list[Path]:
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise UserError(f"{path} holds no .safetensors file: pass a Hugging Face checkpoint directory")
    return files


def write_manifest(checkpoint: Path, out: Path) -> Path:
    """Hash every tensor of `checkpoint` and copy its non-weight files (config, tokenizer, recipe) into `out`."""
    tensors, metadata = {}, {}
    for f in _safetensors(checkpoint):
        with safe_open(str(f), framework="pt") as fh:
            metadata.update(fh.metadata() or {})
            for name in fh.keys():
                t = fh.get_tensor(name)
                tensors[name] = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                                 "sha256": tensor_sha256(t)}
    out.mkdir(parents=True, exist_ok=True)
    for f in checkpoint.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and f.name != "model.safetensors.index.json":
            shutil.copy2(f, out / f.name)
    (out / MANIFEST).write_text(json.dumps({"metadata": metadata, "tensors": tensors}, indent=1, sort_keys=True))
    return out


def _dense_state(dense: Path) -> dict[str, torch.Tensor]:
    # quantize_nvfp4.py loads the source in bf16 before quantizing, so the codec sees the same bf16 weights.
    state = {}
    for f in _safetensors(dense):
        with safe_open(str(f), framework="pt") as fh:
            for name in fh.keys():
                state[name] = fh.get_tensor(name).to(torch.bfloat16)
    return state


def _group(module: str) -> list[str]:
    parent, _, leaf = module.rpartition(".")
    for names in FUSED:
        if leaf in names:
            return [f"{parent}.{n}" for n in names]
    return [module]


def rebuild(dense: Path, manifest_dir: Path, out: Path) -> Path:
    """Quantize `dense` with the codec into the manifest's tensors; write `out` only if every hash matches."""
    manifest_file = manifest_dir / MANIFEST
    if not manifest_file.is_file():
        raise UserError(f"{manifest_file} is missing: make it with `nvfp4_rebuild.py manifest` where the checkpoint is")
    manifest = json.loads(manifest_file.read_text())
    state = _dense_state(dense)
    built: dict[str, torch.Tensor] = {}
    global_scales: dict[str, torch.Tensor] = {}
    for name in sorted(manifest["tensors"]):
        module, suffix = name.rsplit(".", 1)
        if "." + suffix not in QUANT_SUFFIXES:
            if name not in state:
                raise UserError(f"{dense} has no tensor {name}: pass the dense source the checkpoint was made from")
            built[name] = state[name].to(getattr(torch, manifest["tensors"][name]["dtype"]))
            continue
        if name in built:
            continue
        group = _group(module)
        missing = [m for m in group if m + ".weight" not in state]
        if missing:
            raise UserError(f"{dense} has no weight {missing[0]}.weight: pass the dense source of this checkpoint")
        key = group[0]
        if key not in global_scales:
            global_scales[key] = nvfp4.global_scale_for([state[m + ".weight"] for m in group])
        q = nvfp4.quantize(state[module + ".weight"], global_scales[key])
        built[module + ".weight_packed"] = q.packed
        built[module + ".weight_scale"] = q.scale
        built[module + ".weight_global_scale"] = q.global_scale.clone()  # one tensor per name on disk
    extra = sorted(set(built) - set(manifest["tensors"]))
    if extra:
        raise UserError(f"the manifest lacks {extra[0]} (and {len(extra) - 1} more): remake it from the checkpoint")
    bad = [n for n, t in built.items() if tensor_sha256(t) != manifest["tensors"][n]["sha256"]]
    if bad:
        raise UserError(f"{len(bad)} of {len(built)} tensors differ from the manifest (first: {bad[0]}): {dense} is "
                        "not the checkpoint's source, or the codec no longer matches llmcompressor")
    with atomic_directory(out) as tmp:
        save_file(built, str(tmp / "model.safetensors"), metadata=manifest["metadata"] or None)
        for f in manifest_dir.iterdir():
            if f.is_file() and f.name != MANIFEST:
                shutil.copy2(f, tmp / f.name)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("manifest", help="hash an NVFP4 checkpoint's tensors and copy its small files")
    m.add_argument("--checkpoint", type=Path, required=True)
    m.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("rebuild", help="rebuild the checkpoint from its dense source, checked against a manifest")
    r.add_argument("--dense", type=Path, required=True)
    r.add_argument("--manifest", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    try:
        if args.cmd == "manifest":
            out = write_manifest(args.checkpoint, args.out)
            n = len(json.loads((out / MANIFEST).read_text())["tensors"])
            print(f"[nvfp4_rebuild] manifest of {n} tensors in {out}")
        else:
            out = rebuild(args.dense, args.manifest, args.out)
            print(f"[nvfp4_rebuild] every tensor matched the manifest; checkpoint in {out}")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

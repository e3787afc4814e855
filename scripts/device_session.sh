#!/usr/bin/env bash
# The GPU runs behind benchmarks/RESULTS.md and the vLLM checks, in phases (run from the repository root on a GPU
# machine without network access; vLLM 0.26 and its dependencies come as an archive in three parts under
# .device/vllm/c1..c3, unpacked to /tmp/site by the first three phases).
#   phase 1: GPU tests + Triton GEMM benchmark (no vLLM yet)     phase 2: vLLM bundle part 2 only
#   phase 3: vLLM: NVFP4/Marlin + LoRA + AQN check, GEMM with Marlin in the same run
#   phase 4: vLLM rollout throughput NVFP4 vs BF16 with LoRA
set -uo pipefail
phase=${1:?phase}
out=${OUT:-/tmp/qerl-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
case "$phase" in
  1)
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    python3 -m pip install -q --no-index --no-deps --target /tmp/pt .whl/*.whl
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    PYTHONPATH=/tmp/pt:. timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py \
      tests/test_kernels_gpu.py 2>&1 | tail -15 | tee "$out/gpu_tests.txt"
    timeout 200 python3 benchmarks/gemm_nvfp4.py --models 32b --ms 1,16,64,128,1024,4096 --no-marlin \
      --out "$out/gemm32" 2>&1 | tail -45
    ;;
  1q)  # part 1 of the bundle + the GPU tests only
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    python3 -m pip install -q --no-index --no-deps --target /tmp/pt .whl/*.whl
    PYTHONPATH=/tmp/pt:. timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py \
      tests/test_kernels_gpu.py 2>&1 | tail -15 | tee "$out/gpu_tests.txt"
    ;;
  2)
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    ;;
  3c)  # the vLLM NVFP4/Marlin + LoRA + AQN check only
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 150 python3 benchmarks/rollout_vllm.py checkpoint --shape 7b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -3
    timeout 300 python3 scripts/device_vllm_check.py --model /tmp/qb/qwen2.5-7b-nvfp4-random --load nvfp4 \
      --rank 16 --json "$out/vllm_check.json" 2>&1 | tail -40
    ;;
  3)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 150 python3 benchmarks/rollout_vllm.py checkpoint --shape 7b --format nvfp4 --workdir /tmp/qb 2>&1 | tail -3
    timeout 240 python3 scripts/device_vllm_check.py --model /tmp/qb/qwen2.5-7b-nvfp4-random --load nvfp4 \
      --rank 16 --json "$out/vllm_check.json" 2>&1 | tail -30
    timeout 150 python3 benchmarks/gemm_nvfp4.py --models 7b,32b --ms 1,16,64,128 --dirs fwd \
      --out "$out/gemm_marlin" 2>&1 | tail -40
    ;;
  4)
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    timeout 540 python3 benchmarks/rollout_vllm.py rollout --shape 7b --formats nvfp4,bf16 --ranks 16 \
      --batches 1,8,64 --workdir /tmp/qb --json "$out/rollout_7b.json" 2>&1 | tail -30
    ;;
esac

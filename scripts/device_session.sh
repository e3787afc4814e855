#!/usr/bin/env bash
# The GPU runs behind benchmarks/RESULTS.md and the vLLM checks, in phases (run from the repository root on a GPU
# machine without network access; vLLM 0.26 and its dependencies come as an archive in three parts under
# .device/vllm/c1..c3, unpacked to /tmp/site by the first three phases).
#   phase 1: GPU tests + Triton GEMM benchmark (no vLLM yet)     phase 2: vLLM bundle part 2 only
#   phase 3: vLLM: NVFP4/Marlin + LoRA + AQN check, GEMM with Marlin in the same run
#   phase 4: vLLM rollout throughput NVFP4 vs BF16 with LoRA
# Phases 5a-5h are one back-to-back chain (run 3): 5a-5c ferry the vLLM bundle (5a also the extra wheels in .whl:
# trl, datasets, math-verify; 5c-5e also the NVFP4 SmolLM2 checkpoint in three parts under .device/smol/a|b|c, and
# 5d the tokenizer files in .device/tok), then the checks and benchmarks below.
set -uo pipefail
phase=${1:?phase}
out=${OUT:-/tmp/qerl-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
vllm_env() {  # the environment vllm_unpack.sh sets, for calls after the bundle is unpacked (no part carried)
  [ -f /tmp/site/.vllm_done ] || echo "vllm bundle not unpacked on this machine"
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1
  export DO_NOT_TRACK=1 VLLM_USE_FLASHINFER_SAMPLER=0
}
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
  5a)  # bundle part 1, extra wheels, GPU tests, large-M GEMMs
    bash .device/vllm/c1/vllm_unpack.sh .device/vllm
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/extra .whl/*.whl
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
    python3 -m pip list 2>/dev/null | grep -i -E "^(pyarrow|pandas|huggingface.hub|fsspec|xxhash|peft|accelerate) " \
      | tee -a "$out/device.txt"
    PYTHONPATH=/tmp/extra:. timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_nvfp4.py \
      tests/test_kernels_gpu.py 2>&1 | tail -15 | tee "$out/gpu_tests.txt"
    PYTHONPATH=. timeout 240 python3 benchmarks/gemm_large_m.py --ms 512,1024,4096 --out "$out" 2>&1 | tail -60
    ;;
  5b)  # bundle part 2; the random NVFP4 checkpoints used by 5c-5h
    bash .device/vllm/c2/vllm_unpack.sh .device/vllm
    for shape in 7b 14b 32b; do
      timeout 150 python3 benchmarks/rollout_vllm.py checkpoint --shape $shape --format nvfp4 --workdir /tmp/qb 2>&1 | tail -2
    done
    df -h /tmp | tail -1
    ;;
  5c)  # bundle part 3; vLLM NVFP4/Marlin + LoRA + AQN + sleep-mode check on the 7B shape
    source .device/vllm/c3/vllm_unpack.sh .device/vllm
    mkdir -p /tmp/smolparts && cp .device/smol/a/* /tmp/smolparts/
    PYTHONPATH=/tmp/extra:$PYTHONPATH python3 -c "import trl, datasets, math_verify, vllm; print('trl', trl.__version__, \
      'datasets', datasets.__version__, 'vllm', vllm.__version__)" 2>&1 | tail -1
    timeout 400 python3 scripts/device_vllm_check.py --model /tmp/qb/qwen2.5-7b-nvfp4-random --load nvfp4 \
      --rank 16 --sleep-mode --json "$out/vllm_check.json" 2>&1 | grep -v "^ " | tail -25
    ;;
  5d)  # RL steps with trl + vLLM on the 7B shape (SmolLM2 tokenizer); 14B rollouts, NVFP4
    vllm_env
    cp .device/smol/b/* /tmp/smolparts/
    cp .device/tok/* /tmp/qb/qwen2.5-7b-nvfp4-random/
    PYTHONPATH=/tmp/extra:$PYTHONPATH timeout 270 python3 scripts/device_rl_e2e.py --config configs/smollm2_arith_nvfp4.yaml \
      --model /tmp/qb/qwen2.5-7b-nvfp4-random --steps 4 --json "$out/rl_e2e_7b.json" --output-dir /tmp/e2e7b \
      --max_completion_length 32 --gradient_checkpointing true --vllm_max_model_length 512 \
      --vllm_gpu_memory_utilization 0.35 --disable_tqdm true 2>&1 | grep "check\]\|Error\|error" | tail -12
    timeout 300 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4 --ranks 16 \
      --batches 1,8,64 --workdir /tmp/qb --json "$out/rollout_14b_nvfp4.json" 2>&1 | grep "\[bench\]" | tail -8
    ;;
  5e)  # RL steps with trl + vLLM on the real SmolLM2 (NVFP4), vLLM eval of its adapter; 14B rollouts, BF16
    vllm_env
    cp .device/smol/c/* /tmp/smolparts/
    if [ "$(cat /tmp/smolparts/part_0* | sha256sum | cut -c1-64)" = "$(cat /tmp/smolparts/smol.sha256)" ]; then
      cat /tmp/smolparts/part_0* | tar -x -C /tmp; else echo "smol checkpoint sha256 mismatch"; fi
    smol=/tmp/smollm2-135m-instruct-0963b49521-nvfp4
    PYTHONPATH=/tmp/extra:$PYTHONPATH timeout 200 python3 scripts/device_rl_e2e.py --config configs/smollm2_arith_nvfp4.yaml \
      --model $smol --steps 8 --json "$out/rl_e2e_smollm2.json" --output-dir /tmp/e2esmol \
      --vllm_max_model_length 512 --vllm_gpu_memory_utilization 0.3 --disable_tqdm true 2>&1 \
      | grep "check\]\|Error\|error" | tail -12
    for a in base trained; do
      extra=(); [ $a = trained ] && extra=(--adapter /tmp/e2esmol/final)
      PYTHONPATH=/tmp/extra:$PYTHONPATH timeout 120 python3 -m eval.arith --model $smol --load nvfp4 --backend vllm \
        --difficulty 0 --limit 64 --n-samples 2 --temperature 1.0 --top-p 1.0 --max-tokens 48 --enforce-eager \
        --gpu-memory-utilization 0.3 --max-model-len 1024 --output "$out/eval_smollm2_vllm_$a.json" --overwrite \
        --no-progress "${extra[@]}" 2>&1 | tail -2
    done
    timeout 300 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats bf16 --ranks 16 \
      --batches 1,8,64 --workdir /tmp/qb --json "$out/rollout_14b_bf16.json" 2>&1 | grep "\[bench\]" | tail -8
    ;;
  5f)  # 32B rollouts with a rank-32 adapter, NVFP4 and BF16
    vllm_env
    timeout 560 python3 benchmarks/rollout_vllm.py rollout --shape 32b --formats nvfp4,bf16 --ranks 32 \
      --batches 1,8,64 --gpu-memory-utilization 0.92 --workdir /tmp/qb --json "$out/rollout_32b.json" 2>&1 \
      | grep "\[bench\]\|failed\|Error" | tail -12
    ;;
  5g)  # one RL step on the 32B-shaped NVFP4 model: rank 32, 16 x 256 = 4096 completion tokens
    vllm_env
    timeout 560 python3 benchmarks/rollout_vllm.py rl-step --shape 32b --rank 32 --batch 16 --prompt-len 256 \
      --gen-len 256 --steps 2 --gpu-memory-utilization 0.35 --workdir /tmp/qb --json "$out/rl_step_32b.json" 2>&1 \
      | grep "\[bench\]\|Error\|error" | tail -12
    ;;
  5h)  # adapter cost: 14B without LoRA and with rank 64
    vllm_env
    timeout 560 python3 benchmarks/rollout_vllm.py rollout --shape 14b --formats nvfp4,bf16 --ranks 0,64 \
      --batches 1,8,64 --workdir /tmp/qb --json "$out/rollout_14b_ranks.json" 2>&1 | grep "\[bench\]\|failed" | tail -12
    ;;
esac

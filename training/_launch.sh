#!/usr/bin/env bash
# Shared launcher for the per-model scripts in this folder.
#   bash training/_launch.sh SIZE LOAD TASK [trainer args...]
#   SIZE: 3B | 7B | 14B | 32B (Qwen2.5-SIZE-Instruct)   LOAD: nvfp4 (QeRL) | bf16 (LoRA) | nf4 (QLoRA)
#   TASK: gsm8k_grpo | bigmath_dapo (configs/TASK.yaml)
# GPUS=N (default 1) runs data-parallel with accelerate on N GPUs, keeping 128 completions per optimizer step.
# BASE_MODEL=DIR overrides the source checkpoint (default: the hub id, or a local copy you point to).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
size=${1:?SIZE (3B|7B|14B|32B)}; load=${2:?LOAD (nvfp4|bf16|nf4)}; task=${3:?TASK (gsm8k_grpo|bigmath_dapo)}; shift 3
case "$size" in 3B|7B|14B|32B) ;; *) echo "unknown size $size: use 3B, 7B, 14B or 32B" >&2; exit 2 ;; esac
case "$load" in nvfp4|bf16|nf4) ;; *) echo "unknown load $load: use nvfp4, bf16 or nf4" >&2; exit 2 ;; esac
[ -f "configs/$task.yaml" ] || { echo "unknown task $task: use gsm8k_grpo or bigmath_dapo" >&2; exit 2; }

bash setup_env.sh
base=${BASE_MODEL:-Qwen/Qwen2.5-$size-Instruct}
model=$base
if [ "$load" = nvfp4 ]; then
  model=outputs/Qwen2.5-$size-Instruct-NVFP4
  if [ ! -f "$model/config.json" ]; then
    .venv-quantize/bin/python llm-compressor/quantize_nvfp4.py --model "$base" --output "$model"
  fi
fi
gpus=${GPUS:-1}
accum=$(( 8 / gpus )); [ "$accum" -ge 1 ] || accum=1
args=(--config "configs/$task.yaml" --model_name_or_path "$model" --load "$load"
      --output_dir "outputs/qwen2.5-${size,,}-$task-$load" --gradient_accumulation_steps "$accum")
if [ "$gpus" -gt 1 ]; then
  exec .venv/bin/accelerate launch --config_file configs/accelerate_multigpu.yaml --num_processes "$gpus" \
    -m qerl.train "${args[@]}" "$@"
fi
exec .venv/bin/python -m qerl.train "${args[@]}" "$@"

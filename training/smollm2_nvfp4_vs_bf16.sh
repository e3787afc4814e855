#!/usr/bin/env bash
# NVFP4 (with and without AQN) against BF16 LoRA on the offline SmolLM2-135M-Instruct, no download needed: GRPO on
# two-digit arithmetic (configs/smollm2_arith_gpu.yaml) from each base and seed, greedy accuracy of every base and
# adapter on held-out problems, then the table (benchmarks/accuracy_table.py). Made for one GPU (a run took about
# 5 minutes on an H200, benchmarks/RESULTS.md run 43); it runs on a CPU too, slowly. Resumable: finished runs and
# evaluations are kept, a killed run continues from its last checkpoint.
#
# Environment: SEEDS (default "0 1 2"), CONFIGS (default "nvfp4_aqn nvfp4 bf16"), OUT (default
# outputs/smollm2-nvfp4-vs-bf16), EVAL_LIMIT (default 500), DENSE / NVFP4 (the two checkpoints; default the
# offline SmolLM2 and its llmcompressor NVFP4 checkpoint, made on first use). Extra arguments go to every training
# run (e.g. --max_steps 50).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ "${QERL_SKIP_SETUP:-0}" = 1 ] || bash setup_env.sh
export QERL_CACHE=${QERL_CACHE:-$PWD/.cache} HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
py=.venv/bin/python
out=${OUT:-outputs/smollm2-nvfp4-vs-bf16}
seeds=${SEEDS:-0 1 2}
configs=${CONFIGS:-nvfp4_aqn nvfp4 bf16}
for c in $configs; do
  case $c in nvfp4_aqn | nvfp4 | bf16) ;; *) echo "unknown config $c in CONFIGS: use nvfp4_aqn, nvfp4, bf16" >&2; exit 2 ;; esac
done
dense=${DENSE:-$($py -c "from qerl.fixtures import smollm2_checkpoint as c; print(c())")}
nvfp4=${NVFP4:-outputs/smollm2-135m-instruct-nvfp4}
if [ ! -f "$nvfp4/config.json" ]; then
  .venv-quantize/bin/python llm-compressor/quantize_nvfp4.py --gguf-file smollm2 --output "$nvfp4"
fi
dtype=$($py -c "import torch; print('bfloat16' if torch.cuda.is_available() else 'float32')")
mkdir -p "$out/eval" "$out/logs"

evaluate() {  # NAME MODEL LOAD [ARGS]: greedy pass@1 on held-out two-digit +/- problems, once
  local name=$1 model=$2 load=$3; shift 3
  [ -f "$out/eval/$name.json" ] && return
  $py -m eval.arith --model "$model" --load "$load" --backend hf --difficulty 1 --limit "${EVAL_LIMIT:-500}" \
    --n-samples 1 --temperature 0 --max-tokens 64 --dtype "$dtype" --batch-size 250 --no-progress \
    --output "$out/eval/$name.json" "$@"
}

evaluate base_nvfp4 "$nvfp4" nvfp4
evaluate base_bf16 "$dense" bf16
for seed in $seeds; do
  for c in $configs; do
    name=$c; [ "$seed" = 0 ] || name=${c}_s$seed
    run=$out/runs/$name load=nvfp4 model=$nvfp4 aqn=()
    [ $c = nvfp4_aqn ] || aqn=(--aqn_mode off)
    [ $c = bf16 ] && load=bf16 model=$dense
    if [ ! -d "$run/final" ]; then
      echo "[compare] training $name"
      $py -m qerl.train --config configs/smollm2_arith_gpu.yaml --model_name_or_path "$model" --load "$load" \
        --output_dir "$run" --seed "$seed" --resume "${aqn[@]}" "$@" 2>&1 | tee -a "$out/logs/train_$name.log"
    fi
    cp "$run/final/trainer_state.json" "$out/logs/state_$name.json"
    evaluate "trained_$name" "$model" "$load" --adapter "$run/final"
  done
done
$py benchmarks/accuracy_table.py "$out" --out "$out/table.md"

#!/usr/bin/env bash
# The embedded default job (CPU-capable, minutes): SmolLM2-135M-Instruct from its offline GGUF -> NVFP4 with
# llmcompressor -> packed 4-bit load + LoRA -> GRPO with AQN on one-digit arithmetic -> evaluation of the base and
# of the trained adapter on held-out problems. Extra arguments go to the trainer (e.g. --max_steps 30).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash setup_env.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} QERL_CACHE=${QERL_CACHE:-$PWD/.cache} HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

model=outputs/smollm2-135m-instruct-nvfp4
run=outputs/smollm2-arith-grpo
if [ ! -f "$model/config.json" ]; then
  .venv-quantize/bin/python llm-compressor/quantize_nvfp4.py --gguf-file smollm2 --output "$model"
fi

evaluate() {  # evaluate OUTPUT [--adapter DIR]: all 14 held-out one-digit sums, 8 samples each
  local out=$1; shift
  .venv/bin/python -m eval.arith --model "$model" --load nvfp4 --backend hf --difficulty 0 \
    --n-samples 8 --temperature 1.0 --top-p 1.0 --max-tokens 48 --dtype float32 --batch-size 16 \
    --output "$out" --overwrite --no-progress "$@"
}

evaluate outputs/eval_arith_base.json
resume=()
if ls "$run"/checkpoint-* >/dev/null 2>&1 && [ ! -d "$run/final" ]; then resume=(--resume); fi  # killed run: continue
if [ -d "$run/final" ]; then resume=(--overwrite_output_dir); fi
.venv/bin/python -m qerl.train --config configs/smollm2_arith_nvfp4.yaml "${resume[@]}" "$@"
evaluate outputs/eval_arith_trained.json --adapter "$run/final"
echo "base:    $(python3 -c 'import json;d=json.load(open("outputs/eval_arith_base.json"));print(d.get("accuracy"))')"
echo "trained: $(python3 -c 'import json;d=json.load(open("outputs/eval_arith_trained.json"));print(d.get("accuracy"))')"
echo "TensorBoard: .venv/bin/tensorboard --logdir $run"

#!/usr/bin/env bash
# Qwen2.5-3B-Instruct, gsm8k_grpo, nvfp4 base. GPUS=N for N GPUs; extra args go to the trainer.
# Rollouts on this project's NVFP4 kernels (adapter's expand in their epilogue) on Hopper GPUs, Marlin elsewhere
# (--vllm_fp4_kernel auto): on the 3B shape with a rank-32 adapter 1.13-1.37x Marlin's decode tokens/s at batch 1-64
# (benchmarks/RESULTS.md, run 39); --vllm_fp4_kernel marlin for vLLM's.
exec bash "$(dirname "${BASH_SOURCE[0]}")/_launch.sh" 3B nvfp4 gsm8k_grpo --vllm_fp4_kernel auto "$@"

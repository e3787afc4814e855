#!/usr/bin/env bash
# Qwen2.5-14B-Instruct, bigmath_dapo, nvfp4 base. GPUS=N for N GPUs; extra args go to the trainer.
# Rollouts on this project's NVFP4 kernels with the adapter's expand in their epilogue: on the 14B shape with a
# rank-32 adapter the fastest engine measured (benchmarks/RESULTS.md, run 6); --vllm_fp4_kernel marlin for vLLM's.
exec bash "$(dirname "${BASH_SOURCE[0]}")/_launch.sh" 14B nvfp4 bigmath_dapo --vllm_fp4_kernel qerl "$@"

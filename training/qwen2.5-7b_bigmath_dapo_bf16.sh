#!/usr/bin/env bash
# Qwen2.5-7B-Instruct, bigmath_dapo, bf16 base. GPUS=N for N GPUs; extra args go to the trainer.
exec bash "$(dirname "${BASH_SOURCE[0]}")/_launch.sh" 7B bf16 bigmath_dapo "$@"

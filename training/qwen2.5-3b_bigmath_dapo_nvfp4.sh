#!/usr/bin/env bash
# Qwen2.5-3B-Instruct, bigmath_dapo, nvfp4 base. GPUS=N for N GPUs; extra args go to the trainer.
exec bash "$(dirname "${BASH_SOURCE[0]}")/_launch.sh" 3B nvfp4 bigmath_dapo "$@"

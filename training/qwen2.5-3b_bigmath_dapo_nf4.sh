#!/usr/bin/env bash
# Qwen2.5-3B-Instruct, bigmath_dapo, nf4 base. GPUS=N for N GPUs; extra args go to the trainer.
exec bash "$(dirname "${BASH_SOURCE[0]}")/_launch.sh" 3B nf4 bigmath_dapo "$@"

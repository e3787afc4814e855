#!/usr/bin/env bash
# Qwen2.5-14B-Instruct, bigmath_dapo, nf4 base. GPUS=N for N GPUs; extra args go to the trainer.
exec bash "$(dirname "${BASH_SOURCE[0]}")/_launch.sh" 14B nf4 bigmath_dapo "$@"

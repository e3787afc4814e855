"""Offline synthetic arithmetic: numeric final answers, no download needed.

Usage: python -m eval.arith --model PATH --load nvfp4|bf16|nf4 [--adapter DIR] [options]; see --help and eval.runner.
"""

from __future__ import annotations

from collections.abc import Sequence

from eval.runner import main as _main

TASK = "arith"


def main(argv: Sequence[str] | None = None) -> int:
    return _main(argv, task=TASK)


if __name__ == "__main__":
    raise SystemExit(main())

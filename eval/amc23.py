"""AMC 2023: answers compared with math-verify.

Usage: python -m eval.amc23 --model PATH --load nvfp4|bf16|nf4 [--adapter DIR] [options]; see --help and eval.runner.
"""

from __future__ import annotations

from collections.abc import Sequence

from eval.runner import main as _main

TASK = "amc23"


def main(argv: Sequence[str] | None = None) -> int:
    return _main(argv, task=TASK)


if __name__ == "__main__":
    raise SystemExit(main())

"""python -m eval --task NAME --model PATH --load MODE [options]: any task through one entry point."""

from __future__ import annotations

from eval.runner import main

if __name__ == "__main__":
    raise SystemExit(main())

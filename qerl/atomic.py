"""Directories written whole or not at all: a killed or failed write leaves the previous contents (or nothing)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_directory(output: str | Path) -> Iterator[Path]:
    """Yield a fresh staging folder beside ``output``; when the block succeeds, it replaces ``output``.

    The staging folder sits in the same parent, so the final rename stays on one file system."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=output.name + ".tmp-", dir=output.parent))
    try:
        yield tmp
        if output.exists():
            shutil.rmtree(output)
        os.replace(tmp, output)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)

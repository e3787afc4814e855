"""The suite's ``--shard I/N`` option (tests/conftest.py), which splits the GPU tests among processes on one device."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _collected(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/test_nvfp4.py", *args], cwd=ROOT, capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_shards_partition_the_collected_tests():
    everything = _collected()
    shards = [_collected("--shard", f"{i}/3") for i in range(3)]
    assert len(everything) >= 3
    assert all(shards)
    assert sorted(t for shard in shards for t in shard) == sorted(everything)  # each test in exactly one shard


def test_a_bad_shard_names_the_expected_form():
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/test_nvfp4.py", "--shard", "3/3"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0
    assert "expected I/N with 0 <= I < N" in out.stderr + out.stdout

"""qerl.atomic.atomic_directory: a directory is replaced whole when the write succeeds and left alone when it fails."""

from __future__ import annotations

import pytest

from qerl.atomic import atomic_directory


def test_success_replaces_the_directory(tmp_path):
    out = tmp_path / "deep" / "out"
    with atomic_directory(out) as tmp:
        (tmp / "a.txt").write_text("one")
    assert (out / "a.txt").read_text() == "one"
    with atomic_directory(out) as tmp:
        (tmp / "b.txt").write_text("two")
    assert sorted(p.name for p in out.iterdir()) == ["b.txt"]  # the old contents went with the old directory
    assert [p.name for p in out.parent.iterdir()] == ["out"]  # no staging folder left


def test_failure_keeps_the_previous_directory(tmp_path):
    out = tmp_path / "out"
    with atomic_directory(out) as tmp:
        (tmp / "a.txt").write_text("one")
    with pytest.raises(RuntimeError, match="killed"):
        with atomic_directory(out) as tmp:
            (tmp / "a.txt").write_text("half")
            raise RuntimeError("killed mid-write")
    assert (out / "a.txt").read_text() == "one"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]

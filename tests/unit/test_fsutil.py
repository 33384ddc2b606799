"""The filesystem primitives of issue 9: a rename that never overwrites, and flock-based locks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envkit import fsutil


@pytest.fixture(params=["renameat2", "mkdir-claim"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "mkdir-claim":
        monkeypatch.setattr(fsutil, "_RENAMEAT2", None)  # as on a kernel or filesystem without it
    elif fsutil._RENAMEAT2 is None:
        pytest.skip("this libc/kernel has no renameat2")
    return str(request.param)


def test_rename_noreplace_never_overwrites(tmp_path: Path, mode: str) -> None:
    src = tmp_path / "staging"
    (src / "conda-meta").mkdir(parents=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    full = tmp_path / "full"
    full.mkdir()
    (full / "thesis.tex").write_text("mine")
    afile = tmp_path / "afile"
    afile.write_text("x")
    for dst in (empty, full, afile):
        with pytest.raises(FileExistsError):
            fsutil.rename_noreplace(src, dst)
    assert (src / "conda-meta").is_dir() and (full / "thesis.tex").read_text() == "mine"
    assert empty.is_dir() and not any(empty.iterdir()) and afile.read_text() == "x"
    fsutil.rename_noreplace(src, tmp_path / "final")
    assert (tmp_path / "final" / "conda-meta").is_dir() and not src.exists()
    other = tmp_path / "f1"
    other.write_text("1")
    with pytest.raises(FileExistsError):
        fsutil.rename_noreplace(other, afile)
    fsutil.rename_noreplace(other, tmp_path / "f2")
    assert (tmp_path / "f2").read_text() == "1" and not other.exists()


def test_a_lock_is_exclusive_and_its_file_goes_with_it(tmp_path: Path) -> None:
    path = tmp_path / ".x.envkit-lock"
    with fsutil.flocked(path, content='{"a": 1}'):
        assert path.read_text() == '{"a": 1}'
        with pytest.raises(fsutil.Locked):
            with fsutil.flocked(path, blocking=False):
                pass
        assert fsutil.try_lock(path) is None
    assert not path.exists()
    path.write_text("left by a killed run")
    fd = fsutil.try_lock(path)
    assert fd is not None
    os.close(fd)


def test_a_file_is_hashed_once_per_process_while_it_is_unchanged(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import time

    from envkit import fsutil

    path = tmp_path / "pkg.conda"
    path.write_bytes(b"a" * 4096)
    first = fsutil.sha256_of(path)
    assert first == hashlib.sha256(b"a" * 4096).hexdigest()
    assert not [k for k in fsutil._DIGESTS if k[1] == path.stat().st_ino], "a racily new file must not be kept"
    # two seconds later (the clock moved on, not the file): remembered, and the second call reads nothing
    later = time.time_ns() + 3_000_000_000
    monkeypatch.setattr(fsutil.time, "time_ns", lambda: later)
    assert fsutil.sha256_of(path) == first
    monkeypatch.setattr(hashlib, "sha256", lambda: pytest.fail("hashed again"))
    assert fsutil.sha256_of(path) == first
    monkeypatch.undo()
    # the same size rewritten in place: ctime moves on, so it is hashed again
    time.sleep(0.02)
    with path.open("r+b") as handle:
        handle.write(b"b")
    assert fsutil.sha256_of(path) == hashlib.sha256(b"b" + b"a" * 4095).hexdigest()

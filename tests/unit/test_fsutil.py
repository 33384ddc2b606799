"""The filesystem primitives of issue 9 (a rename that never overwrites, flock-based locks) and of issue 20
(paths read from files confined to their root; copies that never follow a symlink out, never widen a mode)."""

from __future__ import annotations

import os
import stat
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


# -- issue 20: confined paths and copies that keep secrets secret ------------------------------------------------
def test_confined_refuses_what_leaves_the_root(tmp_path: Path) -> None:
    from envkit.fsutil import PathError, confined

    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.conda").write_text("x")
    (root / "inner").symlink_to("a")  # a symlink that stays inside is fine
    (root / "out").symlink_to(tmp_path)
    (root / "fifo").parent.mkdir(exist_ok=True)
    os.mkfifo(root / "fifo")
    assert confined(root, "a/f.conda") == (root / "a" / "f.conda").resolve()
    assert confined(root, "inner/f.conda") == (root / "a" / "f.conda").resolve()
    assert confined(root, "new/g", must_exist=False) == root.resolve() / "new" / "g"
    for bad, said in (("/etc/passwd", "only a path relative"), ("../x", "climbs out"), ("a/../../x", "climbs out"),
                      ("", "only a path relative"), ("out/x", "a symlink leads it out"), ("fifo", "a FIFO"),
                      ("a", "a directory"), ("a/none", "missing"), ("~/x", "only a path relative"),
                      ("a\x00b", "only a path relative")):
        with pytest.raises(PathError, match=said):
            confined(root, bad, what="manifest path")


def test_readable_by_follows_the_posix_classes() -> None:
    from envkit.fsutil import readable_by

    def st(mode: int, uid: int = 0, gid: int = 0) -> os.stat_result:
        return os.stat_result((stat.S_IFREG | mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))

    assert readable_by(st(0o600, uid=1000), 1000, [])
    assert not readable_by(st(0o600), 1000, [1000])  # root's, no group or other bits
    assert readable_by(st(0o640, gid=50), 1000, [50]) and not readable_by(st(0o604, gid=50), 1000, [50])
    assert readable_by(st(0o604), 1000, []) and not readable_by(st(0o060, uid=1000), 1000, [0])
    assert readable_by(st(0o000), 0, [])  # root reads anything


def test_copy_regular_never_widens_and_refuses_what_it_must(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import signal

    from envkit.fsutil import PathError, copy_regular, invoking_user

    secret = tmp_path / "secret"
    secret.write_bytes(b"root-only\n")
    secret.chmod(0o600)
    assert copy_regular(secret, tmp_path / "copy", limit=100) == hashlib.sha256(b"root-only\n").hexdigest()
    assert stat.S_IMODE((tmp_path / "copy").stat().st_mode) == 0o600  # not 0644
    wide = tmp_path / "wide"
    wide.write_bytes(b"x")
    wide.chmod(0o644)
    monkeypatch.setattr(os, "umask", lambda _m: 0o027)  # _umask reads it back the same way
    copy_regular(wide, tmp_path / "narrowed", limit=10)
    assert stat.S_IMODE((tmp_path / "narrowed").stat().st_mode) == 0o640
    monkeypatch.undo()
    with pytest.raises(PathError, match="does not let uid 65534 read it"):
        copy_regular(secret, tmp_path / "c2", limit=100, user=(65534, (65534,)))
    assert not (tmp_path / "c2").exists()
    monkeypatch.setenv("SUDO_UID", "65534")  # root acting for a user: that user's rights count
    monkeypatch.setenv("SUDO_GID", "65534")
    if os.getuid() == 0:
        assert invoking_user() == (65534, (65534,))
        with pytest.raises(PathError, match="does not let uid 65534"):
            copy_regular(secret, tmp_path / "c3", limit=100)
    with pytest.raises(PathError, match="more than the 3 allowed"):
        copy_regular(secret, tmp_path / "c4", limit=3, user=(0, ()))
    (tmp_path / "link").symlink_to(secret)
    with pytest.raises(PathError, match="it is a symlink"):
        copy_regular(tmp_path / "link", tmp_path / "c5", limit=100, user=(0, ()))
    os.mkfifo(tmp_path / "fifo")
    signal.alarm(20)  # a FIFO must be refused, not waited on
    try:
        with pytest.raises(PathError, match="a FIFO"):
            copy_regular(tmp_path / "fifo", tmp_path / "c6", limit=100, user=(0, ()))
        with pytest.raises(PathError, match="a character device"):
            copy_regular(Path("/dev/zero"), tmp_path / "c7", limit=100, user=(0, ()))
    finally:
        signal.alarm(0)
    with pytest.raises(PathError, match="cannot copy"):  # never through an existing name
        copy_regular(wide, tmp_path / "copy", limit=10, user=(0, ()))
    assert (tmp_path / "copy").read_bytes() == b"root-only\n"

"""Filesystem primitives envkit's safety rests on: output writes that never replace what they should
not, a rename that refuses to overwrite, and flock-based locks that survive PID namespaces.

Writes (`-o`, `--report`), decided per kind of what is already at the path:
- nothing there: a new file, written atomically (temp file + fsync + rename), mode from the umask;
- a regular file: replaced atomically, its mode (and, as root, its owner) kept;
- a symlink: written through to its target, atomically at the target's real path;
- /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: written to that open file descriptor;
- a character device (/dev/null, /dev/full, a tty) or a FIFO: written through, never replaced;
- a directory, socket or block device: refused with a clear error;
- anything inside an environment's conda-meta/: refused (that folder is conda's package database).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from envkit.errors import EnvkitError

_WRITE_HINT = "choose a writable location for -o, or fix the folder's permissions"
_FD_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd)/(\d+)$")
_STD_PATHS = {"/dev/stdout": 1, "/dev/stderr": 2, "/dev/stdin": 0}


def _error(path: Path | str, exc: OSError) -> EnvkitError:
    """The hint follows the errno (write(2)): a full disk or device (ENOSPC, EDQUOT: /dev/full) is not a
    permissions problem, and a read-only filesystem (EROFS) is neither."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = (f"the disk (or quota) holding {path} is full: free space there (df -h {Path(path).parent}), "
                "or write the file elsewhere with -o")
    elif exc.errno == errno.EROFS:
        hint = "that filesystem is read-only: choose a writable location for -o"
    else:
        hint = _WRITE_HINT
    return EnvkitError(f"cannot write {path}: {exc.strerror or exc}", hint)


def _inside_conda_meta(path: Path) -> Path | None:
    """The env whose conda-meta/ holds `path`, if any (checked on the path as given and resolved)."""
    for candidate in (path.absolute(), Path(os.path.realpath(path))):
        for parent in candidate.parents:
            if parent.name == "conda-meta" and parent.is_dir():
                return parent.parent
    return None


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write `text` to `path` by the rules in the module docstring (the one writer of -o/--report)."""
    path = Path(path)
    env = _inside_conda_meta(path)
    if env is not None:
        raise EnvkitError(f"refusing to write {path}: it is inside the conda-meta folder of the environment {env} "
                          "(conda's package records; a stray file there corrupts the env)",
                          "write the file somewhere else, e.g. -o ./" + path.name)
    fd_number = _STD_PATHS.get(str(path)) if str(path) in _STD_PATHS else None
    match = _FD_PATH.match(str(path))
    if match:
        fd_number = int(match.group(1))
    if fd_number is not None:
        _write_fd(fd_number, path, text)
        return
    try:
        st = os.stat(path)  # follows symlinks: what the data would really land on
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _error(path, exc) from exc
    if st is None:
        real = Path(os.path.realpath(path))  # a dangling symlink: create its target
        _atomic_replace(real, text, mode if mode is not None else _default_mode(), None)
        return
    kind = stat.S_IFMT(st.st_mode)
    if kind == stat.S_IFREG:
        real = Path(os.path.realpath(path))
        _atomic_replace(real, text, stat.S_IMODE(st.st_mode) if mode is None else mode, st)
    elif kind in (stat.S_IFCHR, stat.S_IFIFO):
        _write_through(path, text, fifo=kind == stat.S_IFIFO)
    elif kind == stat.S_IFDIR:
        raise EnvkitError(f"cannot write {path}: it is a directory", "give a file name, e.g. -o DIR/environment.yml")
    else:
        what = "a socket" if kind == stat.S_IFSOCK else "a block device" if kind == stat.S_IFBLK else "not a file"
        raise EnvkitError(f"refusing to write {path}: it is {what}; envkit writes only to files, terminals, "
                          "pipes and character devices such as /dev/null", "give a file name instead")


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _write_fd(fd: int, path: Path, text: str) -> None:
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    data = text.encode("utf-8")
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError as exc:
        raise _error(path, exc) from exc


def _write_through(path: Path, text: str, fifo: bool) -> None:
    """Devices and FIFOs: open the existing node for writing (no create, no truncate, no replace)."""
    flags = os.O_WRONLY | os.O_NOCTTY | (os.O_NONBLOCK if fifo else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise EnvkitError(f"cannot write {path}: it is a FIFO with no reader",
                              f"start the reader first (e.g. cat {path}), or give a file name") from exc
        raise _error(path, exc) from exc
    try:
        if fifo:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    except OSError as exc:
        raise _error(path, exc) from exc
    finally:
        os.close(fd)


def _atomic_replace(path: Path, text: str, mode: int, old: os.stat_result | None) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise _error(path, exc) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if old is not None and os.geteuid() == 0 and (old.st_uid, old.st_gid) != (0, 0):
                os.fchown(handle.fileno(), old.st_uid, old.st_gid)  # root keeps a user's file theirs
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise _error(path, exc) from exc
        raise


# -- a rename that never overwrites ---------------------------------------------------------------
AT_FDCWD = -100
RENAME_NOREPLACE = 1
_SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276, "ppc64le": 357, "s390x": 347}


def _renameat2() -> object | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    func = getattr(libc, "renameat2", None)  # glibc >= 2.28
    if func is not None:
        func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        func.restype = ctypes.c_int
        return func
    number = _SYS_RENAMEAT2.get(os.uname().machine)
    syscall = getattr(libc, "syscall", None)
    if number is None or syscall is None:
        return None
    return lambda a, b, c, d, e: syscall(ctypes.c_long(number), ctypes.c_int(a), ctypes.c_char_p(b),
                                         ctypes.c_int(c), ctypes.c_char_p(d), ctypes.c_uint(e))


_RENAMEAT2 = _renameat2()


def rename_noreplace(src: Path, dst: Path) -> None:
    """Rename `src` to `dst`, failing with FileExistsError if anything (even an empty folder) is at `dst`.

    Linux renameat2(RENAME_NOREPLACE) (rename(2) man page) decides atomically in the kernel. Where the
    call or the filesystem lacks it (ENOSYS, EINVAL: old kernels, some network filesystems), the name is
    claimed with mkdir (atomic, EEXIST when taken) and the folder renamed over that empty claim; a
    rename onto a folder that is no longer empty fails with ENOTEMPTY, so nothing is ever replaced.
    """
    if _RENAMEAT2 is not None:
        ctypes.set_errno(0)
        rc = _RENAMEAT2(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), RENAME_NOREPLACE)  # type: ignore[operator]
        if rc == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(err, os.strerror(err), str(dst) if err == errno.EEXIST else str(src))
    if not src.is_dir() or src.is_symlink():
        os.link(src, dst)  # files: link() refuses an existing name, then drop the old name
        os.unlink(src)
        return
    os.mkdir(dst)  # FileExistsError when taken
    try:
        os.rename(src, dst)
    except OSError as exc:
        try:
            os.rmdir(dst)  # only ever removes our own empty claim
        except OSError:
            pass
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst)) from exc
        raise


# -- locks ----------------------------------------------------------------------------------------
class Locked(Exception):
    """Another process holds the lock (non-blocking attempt)."""


@contextmanager
def flocked(path: Path, *, blocking: bool = True, content: str = "", unlink: bool = True) -> Iterator[int]:
    """An exclusive flock(2) on `path` (created if missing), held for the block; yields the fd.

    flock belongs to the open file, not to a PID, so it works across PID namespaces, for PID 1 and
    (through Linux's NFS emulation with POSIX locks) on shared homes. The lock file is removed while
    still locked; whoever waited on the removed file notices (inode check) and retries on the new one.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            raise Locked(str(path)) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the file was removed by its previous holder: lock the current one
    try:
        if content:
            os.ftruncate(fd, 0)
            os.pwrite(fd, content.encode("utf-8"), 0)
        yield fd
    finally:
        if unlink:
            try:
                os.unlink(path)
            except OSError:
                pass
        os.close(fd)


def try_lock(path: Path) -> int | None:
    """Take the flock on an existing lock file without blocking: its fd, or None while someone holds it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.stat(path).st_ino != os.fstat(fd).st_ino:
            raise BlockingIOError
    except (BlockingIOError, FileNotFoundError):
        os.close(fd)
        return None
    return fd


# (device, inode, size, mtime, ctime) -> sha256 of files hashed by this process. A bundle's archives are
# checked against its manifest and then again against the lock on their way into the engine; a 2.5 GB
# torch archive hashed twice costs seconds on every node. ctime changes on any write, truncate, chmod or
# rename and cannot be set back from user space, but the kernel stamps it from a coarse clock (one tick,
# 1-10 ms), so a change within the tick of the last one can keep it. As git does with "racily clean"
# index entries, only files whose ctime is already RACY_NS in the past are remembered: any later change
# then gets a later ctime, and a new file on a reused inode gets its own.
_DIGESTS: dict[tuple[int, int, int, int, int], str] = {}
RACY_NS = 2_000_000_000


def _file_key(info: os.stat_result) -> tuple[int, int, int, int, int]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def sha256_of(path: Path) -> str:
    """The file's sha256 (hex), read in 1 MiB blocks: what conda records and locks carry. Hashed once per
    process while the file stays unchanged (see _DIGESTS)."""
    import hashlib

    with Path(path).open("rb") as handle:
        before = _file_key(os.fstat(handle.fileno()))
        known = _DIGESTS.get(before)
        if known is not None:
            return known
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
        value = digest.hexdigest()
        if _file_key(os.fstat(handle.fileno())) == before and time.time_ns() - before[4] > RACY_NS:
            _DIGESTS[before] = value  # unchanged while it was read, and not racily new
    return value


# Folders envkit made for this run only (a bundle staged onto a node): removed on the way out, also when a
# command fails or is interrupted (envkit.cli runs remove_registered in its exit path; os._exit skips
# atexit, so atexit would not do).
_REMOVE_AT_EXIT: list[Path] = []


def remove_at_exit(path: Path) -> None:
    _REMOVE_AT_EXIT.append(path)


def remove_registered() -> None:
    import shutil

    while _REMOVE_AT_EXIT:
        shutil.rmtree(_REMOVE_AT_EXIT.pop(), ignore_errors=True)


# -- paths read from files, and copies that keep secrets secret -------------------------------------
class PathError(EnvkitError):
    """A path read from a file (a manifest, a lock, a kernel resource, a staged tar) leaves its root or
    names something other than a regular file."""


def confined(root: Path, relative: str, *, what: str = "path", hint: str = "", must_exist: bool = True,
             regular: bool = True) -> Path:
    """`relative` (a path read from a file) resolved inside `root`: the one check every such path passes.

    Refused: an empty or absolute path, a NUL byte, a `..` component, a path whose symlinks (any of its
    components, the last included) lead out of `root`, and, with `must_exist`, a missing path or (with
    `regular`) anything but a regular file (a FIFO would block a reader, /dev/zero never ends, a
    directory is not an archive). Returns the resolved path (a missing one resolved as far as it exists).
    """
    text = str(relative)
    hint = hint or "the file that named it is damaged or hostile: get it again from its source"
    pure = PurePosixPath(text)
    if not text or "\x00" in text or pure.is_absolute() or text.startswith("~"):
        raise PathError(f"refusing the {what} {text!r}: only a path relative to {root} is allowed", hint)
    if any(part == ".." for part in pure.parts) or "\\" in text:
        raise PathError(f"refusing the {what} {text!r}: it climbs out of {root} (..)", hint)
    base = Path(os.path.realpath(root))
    real = Path(os.path.realpath(base.joinpath(*pure.parts)))
    if real != base and base not in real.parents:
        raise PathError(f"refusing the {what} {text!r}: a symlink leads it out of {root} (to {real})", hint)
    if not must_exist:
        return real
    try:
        info = os.stat(real)
    except OSError as exc:
        raise PathError(f"the {what} {text!r} is missing from {root} ({exc.strerror or exc})", hint) from exc
    if regular and not stat.S_ISREG(info.st_mode):
        raise PathError(f"refusing the {what} {text!r} in {root}: it is {_kind_of(info.st_mode)}, "
                        "not a regular file", hint)
    return real


def _kind_of(mode: int) -> str:
    kinds = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
             stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symlink"}
    return kinds.get(stat.S_IFMT(mode), "not a regular file")


def readable_by(info: os.stat_result, uid: int, gids: Iterable[int]) -> bool:
    """Whether `uid` (in groups `gids`) may read a file with this owner and mode: the owner class if it
    owns it, else the group class if in its group, else other (POSIX.1-2017 XBD 4.5 "File Access
    Permissions"; root reads anything)."""
    if uid == 0:
        return True
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid == uid:
        return bool(mode & stat.S_IRUSR)
    if info.st_gid in set(gids):
        return bool(mode & stat.S_IRGRP)
    return bool(mode & stat.S_IROTH)


def invoking_user() -> tuple[int, tuple[int, ...]]:
    """The real uid and groups of whoever ran envkit (sudo's SUDO_UID/SUDO_GID when root runs on their
    behalf: a file they could not read must not become readable through a root envkit)."""
    uid, gids = os.getuid(), (os.getgid(), *os.getgroups())
    if uid == 0 and os.environ.get("SUDO_UID", "").isdigit():
        uid = int(os.environ["SUDO_UID"])
        gids = tuple(int(g) for g in (os.environ.get("SUDO_GID", ""),) if g.isdigit())
    return uid, gids


def copy_regular(source: Path, dest: Path, *, limit: int, what: str = "file", hint: str = "",
                 user: tuple[int, Iterable[int]] | None = None) -> str:
    """Copy one regular file to a new `dest` and return the sha256 of the bytes written (hashed while they
    are copied, so what was checked is what was written: no window in which the source can be swapped).

    The source is opened without following a symlink and without blocking (O_NOFOLLOW | O_NONBLOCK: a FIFO
    neither hangs nor is read), must be a regular file of at most `limit` bytes that the invoking user
    may read (readable_by); the copy is created exclusively (O_EXCL: never through an existing name)
    with the source's permission bits less the umask: never wider than the source.
    """
    import hashlib

    hint = hint or "give envkit a regular file it may read"
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        why = "it is a symlink" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise PathError(f"refusing to copy the {what} {source}: {why}", hint) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PathError(f"refusing to copy the {what} {source}: it is {_kind_of(info.st_mode)}, "
                            "not a regular file", hint)
        uid, gids = user if user is not None else invoking_user()
        if not readable_by(info, uid, gids):
            raise PathError(f"refusing to copy the {what} {source}: its mode {stat.S_IMODE(info.st_mode):04o} "
                            f"(owner uid {info.st_uid}) does not let uid {uid} read it; a copy would hand "
                            "it to whoever reads the destination", hint)
        if info.st_size > limit:
            raise PathError(f"refusing to copy the {what} {source}: {info.st_size} bytes, more than the "
                            f"{limit} allowed", hint)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        mode = stat.S_IMODE(info.st_mode) & 0o777 & ~_umask()
        try:
            out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        except OSError as exc:
            raise PathError(f"cannot copy the {what} to {dest}: {exc.strerror or exc}",
                            "check the destination folder") from exc
        digest = hashlib.sha256()
        copied = 0
        try:
            os.fchmod(out, mode)
            while True:
                block = os.read(fd, 1 << 20)
                if not block:
                    break
                copied += len(block)
                if copied > limit:
                    raise PathError(f"refusing to copy the {what} {source}: it grew past {limit} bytes while "
                                    "being copied", hint)
                digest.update(block)
                view = memoryview(block)
                while view:
                    view = view[os.write(out, view):]
        except BaseException:
            os.close(out)
            os.unlink(dest)
            raise
        os.close(out)
        return digest.hexdigest()
    except OSError as exc:
        raise PathError(f"cannot copy the {what} {source}: {exc.strerror or exc}", hint) from exc
    finally:
        os.close(fd)


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask

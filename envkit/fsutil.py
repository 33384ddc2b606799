"""Atomic file writes: a temp file in the same folder, fsync, rename; nothing half-written survives."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from envkit.errors import EnvkitError


def atomic_write_text(path: Path, text: str, mode: int = 0o644) -> None:
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise EnvkitError(f"cannot write {path}: {exc.strerror or exc}",
                          "choose a writable location for -o, or fix the folder's permissions") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise EnvkitError(f"cannot write {path}: {exc.strerror or exc}",
                              "choose a writable location for -o, or fix the folder's permissions") from exc
        raise

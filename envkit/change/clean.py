"""`envkit clean [--dry-run]`: the package cache, the repodata cache and leftover staging, with sizes.

What a running install holds is never touched, judged by its locks (as the sweep judges staging, never by a
PID): the package cache goes only while envkit holds rattler's `pkgs/.cache.lock` exclusively (every running
install holds it: engines/cache_sweep.py), and a leftover staging folder only while its own marker lock is free
(prefix/staging.py sweep, which also puts back an env a killed `--force` had set aside instead of deleting it).

Sizes are honest about hard links: an env's files are hard links into the package cache, so removing a cache
entry frees only the bytes no env still links (conda clean's docs make the same point about `--packages`).
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.config import cache_dir
from envkit.engines.cache_sweep import CACHE_LOCK
from envkit.fsutil import try_lock
from envkit.prefix.locations import registered_prefixes, search_dirs
from envkit.prefix.staging import leftovers_in, sweep

# the cache's parts envkit may empty: rattler's extracted packages and archives, its repodata cache, and envkit's
# own stamps of checked entries (engines/rattler_engine.py cache_entry_problem); the catalogue cache stays
CACHE_PARTS = {"pkgs": "packages", "repodata": "repodata", "envkit-verified": "package check stamps"}


@dataclass(frozen=True)
class Item:
    what: str  # packages | repodata | package check stamps | staging | set-aside env
    path: Path
    size: int  # bytes in it
    frees: int  # bytes removing it frees (files no env hard-links)
    action: str  # "remove" | "restore" | "kept: <why>"

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "path": str(self.path), "size": self.size, "frees": self.frees,
                "action": self.action}


@dataclass(frozen=True)
class CleanResult:
    items: tuple[Item, ...]
    dry_run: bool
    notes: tuple[str, ...] = field(default=())

    @property
    def frees(self) -> int:
        return sum(i.frees for i in self.items if i.action == "remove")

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "items": [i.to_json() for i in self.items], "frees": self.frees,
                "notes": list(self.notes)}


def usage(path: Path) -> tuple[int, int]:
    """(bytes in it, bytes only it holds): each inode counted once; files with other hard links free nothing."""
    total = alone = 0
    seen: set[tuple[int, int]] = set()
    for root, dirs, files in os.walk(path):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            try:
                info = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            total += info.st_size
            if info.st_nlink <= 1:
                alone += info.st_size
    return total, alone


def _cache_items(root: Path) -> list[Item]:
    items = []
    for part, what in CACHE_PARTS.items():
        folder = root / part
        if not folder.is_dir() or folder.is_symlink():
            continue
        for entry in sorted(folder.iterdir()):
            if entry.name == CACHE_LOCK:
                continue
            if entry.is_dir() and not entry.is_symlink():
                size, frees = usage(entry)
            else:
                try:
                    info = entry.lstat()
                except OSError:
                    continue
                size = info.st_size if stat.S_ISREG(info.st_mode) else 0
                frees = size if info.st_nlink <= 1 else 0
            items.append(Item(what, entry, size, frees, "remove"))
    return items


def _staging_parents() -> list[Path]:
    """Where staging folders live: beside every env folder envkit uses or made (--prefix envs' parents too)."""
    parents = [d for d in search_dirs() if d.is_dir()]
    for prefix in registered_prefixes():
        if prefix.parent not in parents:
            parents.append(prefix.parent)
    return parents


def clean(*, dry_run: bool = False) -> CleanResult:
    """List (dry run) or remove what is safe to remove now; what a running install holds is kept and said."""
    root = cache_dir()
    notes: list[str] = []
    items: list[Item] = []
    for parent in _staging_parents():
        for kind, folder in leftovers_in(parent):
            size, frees = usage(folder) if folder.exists() else (0, 0)
            items.append(Item("set-aside env" if kind == "old" else "staging", folder, size, frees,
                              "restore" if kind == "old" else "remove"))
    cache = _cache_items(root)
    lock_fd = try_lock(root / "pkgs" / CACHE_LOCK) if (root / "pkgs" / CACHE_LOCK).is_file() else -1
    if lock_fd is None:
        notes.append(f"an install is using the package cache (it holds {root / 'pkgs' / CACHE_LOCK}): the cache "
                     "was left alone; run envkit clean again when it has finished")
        cache = [Item(i.what, i.path, i.size, i.frees, "kept: in use by a running install") for i in cache]
    try:
        if not dry_run:
            for parent in _staging_parents():
                notes += sweep(parent)
            if lock_fd is not None:
                for item in cache:
                    _remove(item.path, notes)
    finally:
        if lock_fd is not None and lock_fd >= 0:
            os.close(lock_fd)
    return CleanResult(tuple(items + cache), dry_run, tuple(notes))


def _remove(path: Path, notes: list[str]) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        notes.append(f"could not remove {path} ({exc.strerror or exc}): remove it by hand when no envkit runs")

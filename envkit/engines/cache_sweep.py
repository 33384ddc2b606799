"""Sweep rattler's own extraction temp folders out of the package cache.

rattler extracts a package into a hidden temp folder beside its final entry and renames it into place;
a create killed mid-extract (SIGKILL, OOM, a lost node) leaves that folder behind for good
(rattler-notes.md, "failure modes": "an extraction temp dir `.<pkg>-XXXXXX` is left in the package
cache"). Seen in `$ENVKIT_CACHE_DIR/pkgs` after such a kill (py-rattler 0.28):

    .cache.lock                                     flock-held by every running install
    python-3.11.7-0_envkit_standin.lock             rattler's per-package lock file
    .python-3.11.7-0_envkit_standinvJ9dEz/          the leftover: "." + package stem + 6 random chars

Only such folders go, and only while no rattler uses the cache:
- the name is "." + STEM + 6 letters/digits, STEM has rattler's `STEM.lock` beside it, and STEM looks
  like a conda package stem (name-version-build);
- it is a real folder (not a symlink, not a file);
- envkit holds an exclusive flock on `.cache.lock` for the whole sweep, taken without blocking: a
  running install (this host or any other on a shared cache) holds that lock, so a sweep never races
  one; with no `.cache.lock` (a cache rattler never opened) nothing is swept.
Anything else in the cache is never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

CACHE_LOCK = ".cache.lock"
_TEMP = re.compile(r"^\.(?P<stem>[A-Za-z0-9_][A-Za-z0-9_.+!-]*-[^-/]+-[^-/]+)(?P<rand>[A-Za-z0-9]{6})$")


def leftover_temps(pkgs: Path) -> list[Path]:
    """The folders in `pkgs` that match rattler's temp pattern (whether in use or not)."""
    try:
        names = os.listdir(pkgs)
    except OSError:
        return []
    found = []
    for name in sorted(names):
        match = _TEMP.match(name)
        if not match or not (pkgs / f"{match.group('stem')}.lock").is_file():
            continue
        try:
            mode = os.lstat(pkgs / name).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode):
            found.append(pkgs / name)
    return found


def sweep_rattler_temps(pkgs: Path) -> list[str]:
    """Remove rattler's leftover temp folders while holding the cache lock; notes for the user."""
    from envkit.fsutil import try_lock

    temps = leftover_temps(pkgs)
    if not temps:
        return []
    fd = try_lock(pkgs / CACHE_LOCK)
    if fd is None:
        return []  # no lock file, or a rattler install is running against this cache: leave them
    removed, failed = 0, []
    try:
        for path in leftover_temps(pkgs):  # re-read under the lock
            try:
                shutil.rmtree(path)
                removed += 1
            except OSError as exc:
                failed.append(f"{path.name} ({exc.strerror or exc})")
    finally:
        os.close(fd)
    notes = []
    if removed:
        notes.append(f"removed {removed} unfinished package extraction(s) left in the cache by an interrupted run")
    if failed:
        notes.append(f"could not remove leftover cache temp folder(s): {', '.join(failed)}; "
                     f"remove them by hand when no envkit or conda runs: rm -rf {pkgs}/.<name>")
    return notes

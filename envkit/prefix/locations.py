"""Where environments live: --prefix wins; else a conda installation's first writable envs dir
(so `conda activate NAME` just works); else $ENVKIT_HOME/envs/NAME."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from envkit.config import envkit_home
from envkit.errors import EnvNotFoundError, UsageError
from envkit.prefix.condarc import envs_dirs
from envkit.prefix.records import has_conda_meta

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")


def check_name(name: str) -> str:
    """Env names become folder names: no separators, no '..', nothing conda would reject."""
    if not _NAME_RE.match(name) or ".." in name or name == "base":
        raise UsageError(f"invalid environment name {name!r}",
                         "use letters, digits, '.', '_' and '-' (no path separators, not 'base')")
    return name


def conda_root() -> Path | None:
    exe = os.environ.get("CONDA_EXE") or shutil.which("conda")
    if not exe:
        return None
    path = Path(exe).resolve()
    # <root>/bin/conda or <root>/condabin/conda
    return path.parent.parent


def conda_envs_dirs() -> list[Path]:
    """conda's envs_dirs in its own precedence: CONDA_ENVS_PATH, .condarc envs_dirs (every file conda
    reads, $CONDARC included: envkit.prefix.condarc), <root>/envs, ~/.conda/envs."""
    dirs: list[Path] = envs_dirs()
    root = conda_root()
    if root is not None:
        dirs.append(root / "envs")
        dirs.append(Path.home() / ".conda" / "envs")
    return list(dict.fromkeys(dirs))


def _writable(directory: Path) -> bool:
    probe = directory
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    return os.access(probe, os.W_OK)


def envkit_envs_dir() -> Path:
    return envkit_home() / "envs"


def default_prefix(name: str) -> Path:
    check_name(name)
    conda_dirs = conda_envs_dirs()
    if conda_dirs:
        for directory in conda_dirs:
            if _writable(directory):
                return directory / name
    return envkit_envs_dir() / name


def search_dirs() -> list[Path]:
    return [envkit_envs_dir(), *conda_envs_dirs()]


def find_prefix(name: str | None, prefix: str | None) -> Path:
    """An existing environment by --prefix or by name; an error that lists what exists otherwise."""
    if prefix:
        path = Path(prefix).expanduser().absolute()
        if not has_conda_meta(path):
            raise EnvNotFoundError(f"{path} is not an environment (no conda-meta folder)",
                                   "pass the prefix of an environment, or create one: envkit create NAME")
        return path
    if not name:
        raise UsageError("name an environment or pass --prefix PATH", "envkit list shows the environments")
    if os.sep in name:
        return find_prefix(None, name)
    check_name(name)
    for directory in search_dirs():
        if has_conda_meta(directory / name):
            return directory / name
    known = ", ".join(sorted(p.name for p in list_envs())) or "none yet"
    raise EnvNotFoundError(f"no environment named {name!r} (known: {known})",
                           f"create it: envkit create {name}, or pass --prefix PATH")


def list_envs() -> list[Path]:
    found: list[Path] = []
    for directory in search_dirs():
        if not directory.is_dir():
            continue
        for child in sorted(directory.iterdir()):
            if has_conda_meta(child) and not child.name.startswith(".") and child not in found:
                found.append(child)
    return found

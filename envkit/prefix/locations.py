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
    made_elsewhere = [p for p in registered_prefixes() if p.name == name]  # made with --prefix: by its folder name
    if len(made_elsewhere) == 1:
        return made_elsewhere[0]
    if made_elsewhere:
        raise UsageError(f"{len(made_elsewhere)} environments envkit made are named {name!r}: "
                         + ", ".join(str(p) for p in made_elsewhere), f"pass --prefix {made_elsewhere[0]}")
    known = ", ".join(sorted(p.name for p in list_envs())) or "none yet"
    raise EnvNotFoundError(f"no environment named {name!r} (known: {known})",
                           f"create it: envkit create {name}, or pass --prefix PATH")


def registry_dir() -> Path:
    """envkit's registry of the envs it made, one `<owner id>.json` naming each env's prefix (ownership.py)."""
    return envkit_home() / "owned"


REGISTRY_ENTRY_LIMIT = 1 << 20


def registered_prefixes() -> list[Path]:
    """Every prefix envkit's registry names that is still an env: the ones made with --prefix (fleet node envs
    included) live outside the envs folders, and `list` and `doctor --all` must show them too."""
    from envkit.errors import InputError
    from envkit.safeio import load_json

    found: list[Path] = []
    try:
        entries = sorted(registry_dir().glob("*.json"))
    except OSError:
        return found
    for entry in entries:
        try:
            data = load_json(entry, "registry entry", limit=REGISTRY_ENTRY_LIMIT)
        except InputError:
            continue
        where = data.get("prefix") if isinstance(data, dict) else None
        if isinstance(where, str) and where.startswith("/") and "\0" not in where:
            path = Path(where)
            if has_conda_meta(path) and path not in found:
                found.append(path)
    return found


def list_envs() -> list[Path]:
    """The envs in the envs folders, then the ones envkit made elsewhere (--prefix), each once."""
    found: list[Path] = []
    for directory in search_dirs():
        if not directory.is_dir():
            continue
        for child in sorted(directory.iterdir()):
            if has_conda_meta(child) and not child.name.startswith(".") and child not in found:
                found.append(child)
    seen = {os.path.realpath(p) for p in found}
    for path in registered_prefixes():
        if os.path.realpath(path) not in seen and not path.name.startswith("."):
            seen.add(os.path.realpath(path))
            found.append(path)
    return found

"""conda's own configuration and registry, read (and environments.txt written) the way conda does,
so an env envkit makes is a first-class conda env wherever it lives.

- Search path of .condarc files, lowest priority first (conda docs, "Using the .condarc conda
  configuration file" -> "Searching for .condarc"): /etc/conda, /var/lib/conda, $CONDA_ROOT,
  $XDG_CONFIG_HOME/conda, ~/.config/conda, ~/.conda, ~, $CONDA_PREFIX, then $CONDARC. Each place may
  hold `.condarc`, `condarc` and `condarc.d/*.yml|*.yaml`. Lists (envs_dirs, channels) merge with the
  higher-priority file first; a scalar (channel_alias) comes from the highest-priority file that sets it.
- `~/.conda/environments.txt` lists every env conda knows (conda/core/envs_manager.py
  `register_env`/`unregister_env`); `conda env list` and `conda doctor` read it. envkit appends a
  prefix it created and removes it when envkit removes the env; `register_envs: false` is honoured.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envkit.errors import InputError
from envkit.safeio import load_yaml

CACHE_TAG_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"  # bford.info/cachedir


def condarc_files() -> list[Path]:
    """Existing config files in conda's search order (lowest priority first)."""
    home = Path.home()
    places: list[Path] = [Path("/etc/conda"), Path("/var/lib/conda")]
    root = os.environ.get("CONDA_ROOT")
    if root:
        places.append(Path(root))
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        places.append(Path(xdg) / "conda")
    places += [home / ".config" / "conda", home / ".conda"]
    files: list[Path] = []
    for place in places:
        files += _in_place(place)
    files.append(home / ".condarc")
    prefix = os.environ.get("CONDA_PREFIX")
    if prefix:
        files += _in_place(Path(prefix))
    explicit = os.environ.get("CONDARC")
    if explicit:
        files.append(Path(explicit).expanduser())
    seen: list[Path] = []
    for path in files:
        if path.is_file() and path not in seen:
            seen.append(path)
    return seen


def _in_place(place: Path) -> list[Path]:
    out = [place / ".condarc", place / "condarc"]
    rcd = place / "condarc.d"
    if rcd.is_dir():
        out += sorted(p for p in rcd.iterdir() if p.suffix in (".yml", ".yaml"))
    return out


def _load(path: Path) -> dict[str, Any]:
    try:
        data = load_yaml(path, "conda config file", limit=1 << 20) or {}  # bounded: no bomb, FIFO or device
    except InputError:
        return {}
    return data if isinstance(data, dict) else {}


def setting(key: str) -> Any:
    """A scalar/mapping from the highest-priority file that sets it (None when unset)."""
    for path in reversed(condarc_files()):
        data = _load(path)
        if key in data:
            return data[key]
    return None


def list_setting(key: str) -> list[Any]:
    """A list setting merged across files, the highest-priority file's entries first."""
    out: list[Any] = []
    for path in reversed(condarc_files()):
        for item in _load(path).get(key) or []:
            if item not in out:
                out.append(item)
    return out


def envs_dirs() -> list[Path]:
    """CONDA_ENVS_PATH / CONDA_ENVS_DIRS first (conda's env-var form of envs_dirs), then the files'."""
    dirs: list[Path] = []
    env_path = os.environ.get("CONDA_ENVS_PATH") or os.environ.get("CONDA_ENVS_DIRS")
    if env_path:
        dirs += [Path(p).expanduser() for p in env_path.split(os.pathsep) if p]
    dirs += [Path(os.path.expandvars(str(item))).expanduser() for item in list_setting("envs_dirs")]
    return list(dict.fromkeys(dirs))


# -- environments.txt -----------------------------------------------------------------------------
def environments_txt() -> Path:
    return Path.home() / ".conda" / "environments.txt"


def _registering() -> bool:
    value = os.environ.get("CONDA_REGISTER_ENVS")
    if value is not None:
        return value.strip().lower() not in ("false", "0", "no", "off")
    flag = setting("register_envs")
    return flag is not False


def register_env(prefix: Path) -> bool:
    """Append the prefix to ~/.conda/environments.txt as conda does (once). False if not written."""
    if not _registering():
        return False
    path = environments_txt()
    location = os.path.normpath(str(prefix))
    try:
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        if location in (line.strip() for line in lines):
            return True
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(location + "\n")
        return True
    except OSError:
        return False  # a read-only home must not fail a finished create


def unregister_env(prefix: Path) -> None:
    """Remove the prefix's line(s), keeping every other line as it was."""
    path = environments_txt()
    location = os.path.normpath(str(prefix))
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    kept = [line for line in lines if line.strip() != location]
    if len(kept) != len(lines):
        tmp = path.with_name(f".{path.name}.envkit-{os.getpid()}")
        tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        os.replace(tmp, path)


def drop_cache_tag(prefix: Path) -> None:
    """rattler writes a CACHEDIR.TAG into the prefix it installs; backup tools that honour the tag would
    skip the whole env. Removed only when it is rattler's tag (the install just made it)."""
    tag = prefix / "CACHEDIR.TAG"
    try:
        if tag.is_file() and tag.read_text(encoding="utf-8", errors="replace").startswith(CACHE_TAG_SIGNATURE) \
                and "rattler" in tag.read_text(encoding="utf-8", errors="replace"):
            tag.unlink()
    except OSError:
        pass

"""Settings in one place: flag > ENVKIT_* environment variable > config file > default.

Read lazily (never at import) so that `envkit --help` stays instant.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.errors import EnvkitError, UsageError
from envkit.safeio import load_yaml
from envkit.secrets import learn

# Environment variables envkit reads; listed in `envkit --help` and the README.
ENV_VARS: dict[str, str] = {
    "ENVKIT_HOME": "where envkit keeps environments when no conda is installed (default: ~/.local/share/envkit)",
    "ENVKIT_CACHE_DIR": "package and repodata cache shared by all envs (default: ~/.cache/envkit)",
    "ENVKIT_CONFIG": "path of the config file (default: ~/.config/envkit/config.yaml)",
    "ENVKIT_CUDA": "default for --cuda (auto, cpu or X.Y)",
    "ENVKIT_FLAVOR": "default for --flavor (conda-forge, pytorch or pip)",
    "ENVKIT_MIRROR": "default for --mirror (a profile name or a URL)",
    "ENVKIT_ENGINE": "default for --engine (rattler, conda, mamba or micromamba)",
    "ENVKIT_PYTORCH_INDEX": "a mirror of https://download.pytorch.org/whl (the variant is appended)",
    "ENVKIT_OFFLINE": "1 = never read channel catalogues (as --offline): the cached one, else the static data",
    "ENVKIT_MIRROR_TOKEN": "bearer token sent to the mirror's host (never written to any file)",
    "ENVKIT_SPEC_PATH": "extra folders searched for environment specs, ':'-separated",
    "ENVKIT_DRIVER_VERSION": "default for --driver-version (simulate a driver; set per node in fleet tests)",
    "ENVKIT_COMPUTE_CAPABILITY": "default for --compute-capability (space-separated, one per simulated GPU)",
    "ENVKIT_FLEET_LAUNCHER": "default for fleet --launcher (slurm or local)",
    "ENVKIT_FLEET_ENVKIT": "how fleet nodes run envkit (a command line; default: this python -m envkit)",
    "CONDA_OVERRIDE_CUDA": "conda's standard override of the driver's CUDA version; empty = no CUDA",
    "CUDA_VISIBLE_DEVICES": "honoured by detect and verify (indices or UUIDs; empty or -1 hides all GPUs)",
}


def _xdg(var: str, default: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / default


def config_path() -> Path:
    value = os.environ.get("ENVKIT_CONFIG")
    return Path(value) if value else _xdg("XDG_CONFIG_HOME", ".config") / "envkit" / "config.yaml"


def user_spec_dir() -> Path:
    return config_path().parent / "envs"


def _folder(var: str, value: str | None, default: Path) -> Path:
    """A folder setting: a path that exists but is not a folder is a clear error, not a crash later."""
    if value is not None and ("\0" in value or "\n" in value):
        raise UsageError(f"{var} contains a newline or NUL byte", f"set {var} to a plain folder path, or unset it")
    path = Path(value) if value else default
    if path.exists() and not path.is_dir():
        where = f"{var}={path}" if value else f"{path} (the default for {var})"
        raise UsageError(f"{where} is a file, not a folder", f"point {var} at a folder (or move {path} away)")
    return path


def envkit_home() -> Path:
    value = os.environ.get("ENVKIT_HOME")
    return _folder("ENVKIT_HOME", value, _xdg("XDG_DATA_HOME", ".local/share") / "envkit")


def cache_dir() -> Path:
    value = os.environ.get("ENVKIT_CACHE_DIR")
    return _folder("ENVKIT_CACHE_DIR", value, _xdg("XDG_CACHE_HOME", ".cache") / "envkit")


@dataclass(frozen=True)
class FileConfig:
    """The parsed config file; missing file = empty config."""

    data: dict[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


# Known keys and the types they must have (other keys are left to whoever reads them).
_SCALARS = {"cuda": "a CUDA version like 12.4, auto or cpu", "torch": "a version like 2.5 or a range",
            "flavor": "conda-forge, pytorch or pip", "mirror": "a profile name or a URL",
            "engine": "rattler, conda, mamba or micromamba", "pytorch_index": "a URL"}
_FORMATS = {"cuda": r"auto|cpu|\d{1,2}\.\d{1,2}", "pytorch_index": r"(https?|file)://[A-Za-z0-9_.~\-/%:@+\[\]]+"}
_CHOICES = {"flavor": ("conda-forge", "pytorch", "pip"), "engine": ("rattler", "conda", "mamba", "micromamba")}


def check_pytorch_index(value: str | None, source: str = "ENVKIT_PYTORCH_INDEX") -> str | None:
    """A PyTorch wheel index base (ENVKIT_PYTORCH_INDEX or the config's pytorch_index) is a plain http(s) or
    file URL, checked where it is read: before a catalogue fetch or a pip line is built from it."""
    if not value:
        return None
    text = str(value).strip()
    if not re.fullmatch(_FORMATS["pytorch_index"], text, re.ASCII):
        raise UsageError(f"the PyTorch index {text[:80]!r} ({source}) is not a plain http(s) URL",
                         "set it to a mirror of https://download.pytorch.org/whl, e.g. https://mirror.example/whl, "
                         f"or unset {source}")
    return text


def _validate(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """Wrong types become one clear error naming the file and key (numbers are fine where text is meant)."""
    def bad(key: str, want: str) -> EnvkitError:
        return UsageError(f"config file {path}: {key}: must be {want}, not {type(data[key]).__name__} "
                           f"{str(data[key])[:60]!r}", f"fix '{key}:' in {path}")

    out = dict(data)
    for key, want in _SCALARS.items():
        if key not in data or data[key] is None:
            continue
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise bad(key, want)
        out[key] = str(value)
        if "\n" in out[key] or "\0" in out[key] or len(out[key]) > 2000:
            raise bad(key, want)
        if key in _CHOICES and out[key] not in _CHOICES[key]:
            raise bad(key, want)
        if key in _FORMATS and not re.fullmatch(_FORMATS[key], out[key], re.ASCII):
            raise bad(key, want)
    if "sharded_repodata" in data and not isinstance(data["sharded_repodata"], bool):
        raise bad("sharded_repodata", "true or false")
    mirrors = data.get("mirrors")
    if mirrors is not None:
        if not isinstance(mirrors, dict):
            raise bad("mirrors", "a mapping of profile name -> {conda: {channel: URL}, pypi: URL}")
        for name, row in mirrors.items():
            if not isinstance(name, str) or not isinstance(row, dict) or not isinstance(row.get("conda"), dict) \
                    or not all(isinstance(k, str) and isinstance(v, str) for k, v in row["conda"].items()) \
                    or not isinstance(row.get("pypi", ""), (str, type(None))) \
                    or not isinstance(row.get("title", ""), str) \
                    or not isinstance(row.get("missing") or [], list):
                raise EnvkitError(f"config file {path}: mirrors: {str(name)[:40]!r} must be a mapping with "
                                  "'conda: {channel: URL}' (and optional pypi: URL, title, missing: [...])",
                                  f"fix 'mirrors:' in {path} (README, 'Mirrors')")
    return out


def _learn_secrets(value: Any) -> None:
    """Credentials anywhere in the config file are redacted from every message from now on."""
    if isinstance(value, str):
        if "@" in value or "/t/" in value or "=" in value:
            learn(value)
    elif isinstance(value, dict):
        for item in value.values():
            _learn_secrets(item)
    elif isinstance(value, list):
        for item in value:
            _learn_secrets(item)


def load_file_config(path: Path | None = None) -> FileConfig:
    """Read the YAML config file (bounded, UTF-8, typed); a broken file is an error that names it."""
    path = path or config_path()
    if not path.exists() and not path.is_symlink():
        return FileConfig({})
    data = load_yaml(path, "config file", limit=1024 * 1024) or {}
    if not isinstance(data, dict):
        raise EnvkitError(f"config file {path} must hold a mapping at the top level", f"fix or remove {path}")
    _learn_secrets(data)
    return FileConfig(_validate(path, data))

"""Settings in one place: flag > ENVKIT_* environment variable > config file > default.

Read lazily (never at import) so that `envkit --help` stays instant.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def envkit_home() -> Path:
    value = os.environ.get("ENVKIT_HOME")
    return Path(value) if value else _xdg("XDG_DATA_HOME", ".local/share") / "envkit"


def cache_dir() -> Path:
    value = os.environ.get("ENVKIT_CACHE_DIR")
    return Path(value) if value else _xdg("XDG_CACHE_HOME", ".cache") / "envkit"


@dataclass(frozen=True)
class FileConfig:
    """The parsed config file; missing file = empty config."""

    data: dict[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


def load_file_config(path: Path | None = None) -> FileConfig:
    """Read the YAML config file; a broken file is an error that names it."""
    from envkit.errors import EnvkitError

    path = path or config_path()
    if not path.is_file():
        return FileConfig({})
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise EnvkitError(f"config file {path} is not valid YAML: {exc}", f"fix or remove {path}") from exc
    if not isinstance(data, dict):
        raise EnvkitError(f"config file {path} must hold a mapping at the top level", f"fix or remove {path}")
    return FileConfig(data)

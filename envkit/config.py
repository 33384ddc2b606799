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
from envkit.safeio import loads_yaml, read_text
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


# Every key the config file may hold, with what it means; any other key is an error naming its line (a typo
# like `mirrror:` is never silently ignored, as the spec files' unknown keys are not).
KEYS: dict[str, str] = {
    "cuda": "default for --cuda (auto, cpu or X.Y)",
    "torch": "default for --torch (a version like 2.5, or a range)",
    "flavor": "default for --flavor (conda-forge, pytorch or pip)",
    "mirror": "default for --mirror (a profile name or a URL)",
    "engine": "default for --engine (rattler, conda, mamba or micromamba)",
    "pytorch_index": "a mirror of https://download.pytorch.org/whl",
    "sharded_repodata": "read conda-forge's sharded repodata (CEP 16) where offered (true or false)",
    "mirrors": "mirror profiles: name -> {conda: {channel: URL}, pypi: URL, missing: [...]}",
}
# what each key is when nothing sets it (cli/options.py and the engines apply these; `envkit config show` says so)
DEFAULTS: dict[str, Any] = {"cuda": "auto", "torch": None, "flavor": "conda-forge", "mirror": None,
                            "engine": "rattler", "pytorch_index": "https://download.pytorch.org/whl",
                            "sharded_repodata": True, "mirrors": {}}
# the ENVKIT_* variable that comes before the file for a key (click's envvar= on the option, or read directly)
KEY_ENV = {"cuda": "ENVKIT_CUDA", "flavor": "ENVKIT_FLAVOR", "mirror": "ENVKIT_MIRROR", "engine": "ENVKIT_ENGINE",
           "pytorch_index": "ENVKIT_PYTORCH_INDEX"}

# Known keys and the types they must have.
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


def key_lines(text: str) -> dict[str, int]:
    """The line (1-based) of each top-level key of a YAML mapping, for errors that point at it."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): k.start_mark.line + 1 for k, _v in node.value if isinstance(k, yaml.ScalarNode)}


def _unknown_key(path: Path, key: str, line: int | None) -> UsageError:
    import difflib

    where = f"{path}:{line}" if line else str(path)
    near = difflib.get_close_matches(str(key), list(KEYS), n=1)
    return UsageError(f"config file {where}: unknown key {str(key)[:60]!r}" +
                      (f" (did you mean {near[0]!r}?)" if near else "") + f"; envkit reads {', '.join(KEYS)}",
                      (f"rename it to '{near[0]}:' in {path}" if near else f"remove it from {path}") +
                      " (envkit config show lists every setting)")


def _validate(path: Path, data: dict[str, Any], lines: dict[str, int] | None = None) -> dict[str, Any]:
    """Unknown keys and wrong types become one clear error naming the file, the line and the key (numbers are
    fine where text is meant)."""
    lines = lines or {}

    def bad(key: str, want: str) -> EnvkitError:
        where = f"{path}:{lines[key]}" if key in lines else str(path)
        return UsageError(f"config file {where}: {key}: must be {want}, not {type(data[key]).__name__} "
                           f"{str(data[key])[:60]!r}", f"fix '{key}:' in {path}")

    for key in data:
        if key not in KEYS:
            raise _unknown_key(path, key, lines.get(str(key)))
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


CONFIG_LIMIT = 1024 * 1024


def load_file_config(path: Path | None = None) -> FileConfig:
    """Read the YAML config file (bounded, UTF-8, typed); a broken file is an error that names it."""
    path = path or config_path()
    if not path.exists() and not path.is_symlink():
        return FileConfig({})
    text = read_text(path, "config file", CONFIG_LIMIT)
    data = loads_yaml(text, path, "config file") or {}
    if not isinstance(data, dict):
        raise EnvkitError(f"config file {path} must hold a mapping at the top level", f"fix or remove {path}")
    _learn_secrets(data)
    return FileConfig(_validate(path, data, key_lines(text)))


# -- envkit config show | get | set | path ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    """One effective setting and where it came from: flag, environment, config file (with its line) or default."""

    key: str
    value: Any
    origin: str  # "flag --cuda", "environment ENVKIT_CUDA", "config file PATH:LINE", "default"
    meaning: str
    settable: bool = True  # `envkit config set` may write it (paths come from the environment only)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "origin": self.origin, "meaning": self.meaning}


def _config_origin() -> str:
    return "environment ENVKIT_CONFIG" if os.environ.get("ENVKIT_CONFIG") else "default"


def effective_settings(flags: dict[str, Any] | None = None) -> list[Setting]:
    """flag > ENVKIT_* > config file > default, per key (the precedence every command applies)."""
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    path = config_path()
    config = load_file_config(path)
    lines: dict[str, int] = {}
    if config.data:
        lines = key_lines(read_text(path, "config file", CONFIG_LIMIT))
    out = []
    for key, meaning in KEYS.items():
        env = KEY_ENV.get(key)
        if key in flags:
            value, origin = flags[key], f"flag --{key.replace('_', '-')}"
        elif env and os.environ.get(env):
            value, origin = os.environ[env], f"environment {env}"
        elif config.data.get(key) is not None:
            value = config.data[key]
            origin = f"config file {path}" + (f":{lines[key]}" if key in lines else "")
        else:
            value, origin = DEFAULTS[key], "default"
        if key == "mirrors" and isinstance(value, dict):
            value = sorted(value)  # the profile names: their URLs may carry credentials
        out.append(Setting(key, value, origin, meaning, settable=key != "mirrors"))
    out += [Setting("config_file", str(path), _config_origin(), "this file (ENVKIT_CONFIG)", settable=False),
            Setting("home", str(envkit_home()), "environment ENVKIT_HOME" if os.environ.get("ENVKIT_HOME")
                    else "default", ENV_VARS["ENVKIT_HOME"], settable=False),
            Setting("cache_dir", str(cache_dir()), "environment ENVKIT_CACHE_DIR"
                    if os.environ.get("ENVKIT_CACHE_DIR") else "default", ENV_VARS["ENVKIT_CACHE_DIR"], settable=False)]
    return out


def get_setting(key: str, flags: dict[str, Any] | None = None) -> Setting:
    for setting in effective_settings(flags):
        if setting.key == key:
            return setting
    raise _unknown_key(config_path(), key, None)


def set_setting(key: str, value: str) -> Path:
    """Write `key: value` into the config file (that line replaced, or appended), checked as a load would check it
    before the file is replaced atomically; the file's other lines and comments stay as they are."""
    import yaml

    from envkit.fsutil import atomic_write_text

    path = config_path()
    if key not in KEYS:
        raise _unknown_key(path, key, None)
    if key == "mirrors":
        raise UsageError("mirrors: is a mapping of profiles, not one value", f"edit it in {path} (README, 'Mirrors')")
    typed: Any = value
    if key == "sharded_repodata":
        words = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
        if value.lower() not in words:
            raise UsageError(f"sharded_repodata: must be true or false, not {value!r}",
                             "envkit config set sharded_repodata false")
        typed = words[value.lower()]
    text = read_text(path, "config file", CONFIG_LIMIT) if path.exists() else ""
    line = yaml.safe_dump({key: typed}, default_flow_style=False, allow_unicode=True).rstrip("\n")
    rows = text.splitlines()
    at = key_lines(text).get(key)
    if at is not None:
        end = at
        while end < len(rows) and rows[end][:1] in (" ", "\t"):  # the old value's continuation lines go too
            end += 1
        rows[at - 1:end] = [line]
    else:
        rows.append(line)
    new = "\n".join(rows) + "\n"
    data = loads_yaml(new, path, "config file") or {}
    if not isinstance(data, dict):
        raise EnvkitError(f"config file {path} must hold a mapping at the top level", f"fix or remove {path}")
    _validate(path, data, key_lines(new))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, new)
    return path

"""The one reader and writer of an environment's metadata files, and every on-disk name of them.

conda's package database is `<prefix>/conda-meta/`: one `<name>-<version>-<build>.json` record per
installed package, `history` (its revision log: history.py writes it through the names here) and
`state` (`conda env config vars`: `{"env_vars": {...}}`); names as in conda `base/constants.py`
(PREFIX_STATE_FILE) and `core/prefix_data.py`. envkit keeps its own files in `<prefix>/.envkit/`:
create.json (what was asked, decided and detected), verify.json (the last verify report), owner.json
(the ownership marker, ownership.py), pip-provenance.json (where each wheel came from), the kept
environment.yml and requirements.txt. Nothing outside envkit/prefix/ spells these names or opens
these files (tests/unit/prefix/test_records.py scans the source for it), as pixi keeps every
on-disk name in pixi_consts.

Every read is bounded and safe (safeio): a record planted as a FIFO, a device, a huge or binary
file is an InputError naming it, or is skipped where a caller asked for the readable ones only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from envkit.errors import EnvkitError, InputError
from envkit.fsutil import atomic_write_text
from envkit.safeio import load_json, load_json_object, load_yaml, read_bytes

# -- conda's names (conda base/constants.py, core/prefix_data.py) -------------------------------------
CONDA_META = "conda-meta"  # the package database folder of every conda environment
RECORD_GLOB = "*.json"  # one PrefixRecord per installed package: <name>-<version>-<build>.json
HISTORY = "history"  # conda-meta/history: the revision log (prefix/history.py)
STATE = "state"  # conda-meta/state: {"env_vars": {...}} (conda PREFIX_STATE_FILE)
# -- envkit's names ------------------------------------------------------------------------------------
META_DIR = ".envkit"  # <prefix>/.envkit/: what envkit keeps about an env it made
CREATE_FILE = "create.json"  # the request, selection, machine and engine of the create
VERIFY_FILE = "verify.json"  # the last verify report
OWNER_FILE_NAME = "owner.json"  # the ownership marker (prefix/ownership.py)
PIP_PROVENANCE = "pip-provenance.json"  # name, version, artifact URL and sha256 of each pip install
KEPT_ENV_FILE = "environment.yml"  # the env file the env was made from, as rendered
PIP_REQUIREMENTS = "requirements.txt"  # the pip section as installed (credentials redacted)
OWNER_FILE = Path(META_DIR) / OWNER_FILE_NAME  # relative to a prefix

RECORD_WHAT = "conda-meta record"  # how error messages name a package record
META_WHAT = "metadata file"  # how error messages name a .envkit/*.json file
STATE_LIMIT = 1024 * 1024
META_LIMIT = 4 * 1024 * 1024
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")


# -- where --------------------------------------------------------------------------------------------
def conda_meta(prefix: Path) -> Path:
    return prefix / CONDA_META


def has_conda_meta(prefix: Path) -> bool:
    """A conda environment has a conda-meta folder (what conda itself checks, `is_conda_environment`)."""
    return conda_meta(prefix).is_dir()


def history_path(prefix: Path) -> Path:
    return prefix / CONDA_META / HISTORY


def state_path(prefix: Path) -> Path:
    return prefix / CONDA_META / STATE


def meta_dir(prefix: Path) -> Path:
    return prefix / META_DIR


def meta_path(prefix: Path, name: str) -> Path:
    """<prefix>/.envkit/<name>; `name` is one of the *_FILE constants above."""
    return prefix / META_DIR / name


def owner_path(prefix: Path) -> Path:
    return prefix / OWNER_FILE


def record_name(name: str, version: str, build: str) -> str:
    """conda's record file name: `<name>-<version>-<build>.json` (conda core/prefix_data.py)."""
    return f"{name}-{version}-{build}.json"


def record_paths(prefix: Path, pattern: str = RECORD_GLOB) -> list[Path]:
    """The record files of an env, sorted (the paths rattler's PrefixRecord.from_path reads)."""
    return sorted(conda_meta(prefix).glob(pattern))


def has_record(prefix: Path, package: str) -> bool:
    """A record of `package` is installed (its file name starts with `<package>-`)."""
    return any(conda_meta(prefix).glob(f"{package}-*.json"))


def has_records_or_history(prefix: Path) -> bool:
    """conda-meta holds a history file or a record: what makes a folder a conda env to delete (ownership)."""
    meta = conda_meta(prefix)
    if not meta.is_dir() or meta.is_symlink():
        return False
    try:
        return (meta / HISTORY).is_file() or any(p.suffix == ".json" for p in meta.iterdir())
    except OSError:
        return False


# -- conda-meta/*.json --------------------------------------------------------------------------------
def load_record(path: Path) -> Any:
    """One record as JSON, bounded; a FIFO, device, huge, binary or non-JSON file is an InputError naming it."""
    return load_json(path, RECORD_WHAT)


def read_record(prefix: Path, name: str, version: str, build: str) -> dict[str, Any]:
    """The record of one installed package; {} when it is missing or unreadable."""
    try:
        data = load_record(conda_meta(prefix) / record_name(name, version, build))
    except InputError:
        return {}
    return data if isinstance(data, dict) else {}


def conda_records(prefix: Path, pattern: str = RECORD_GLOB) -> list[tuple[Path, dict[str, Any]]]:
    """The readable records of an env (sorted), each read through the bounded loader; a record that is
    not a regular file, too big, not JSON or not an object is skipped (callers that must name a broken
    record, like export and doctor, use `load_record` / `scan_records` instead)."""
    out: list[tuple[Path, dict[str, Any]]] = []
    for path in record_paths(prefix, pattern):
        try:
            data = load_record(path)
        except InputError:
            continue
        if isinstance(data, dict):
            out.append((path, data))
    return out


def scan_records(prefix: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every record file with its data, {} for one that cannot be read (doctor names those)."""
    return [(path, read_json_quiet(path)) for path in record_paths(prefix)]


def write_record(path: Path, text: str) -> None:
    """Rewrite one record file of an env (a bundle install restores the original URLs in them)."""
    path.write_text(text, encoding="utf-8")


# -- conda-meta/state ---------------------------------------------------------------------------------
def read_state(prefix: Path, what: str = "conda variables file") -> Any:
    """conda-meta/state as JSON (None when there is none); an unreadable file is an InputError naming it."""
    path = state_path(prefix)
    if not path.exists() and not path.is_symlink():
        return None
    return load_json(path, what, limit=STATE_LIMIT)  # bounded: not a device, FIFO or bomb


def state_vars(prefix: Path) -> dict[str, str]:
    """`conda env config vars` of an env (conda-meta/state); a hostile or broken file is a clear error."""
    path = state_path(prefix)
    if not path.exists() and not path.is_symlink():
        return {}
    state = load_json_object(path, "conda state file", limit=STATE_LIMIT)
    raw = state.get("env_vars") or {}
    fix = f"fix or remove {path} (conda env config vars list -p {prefix} shows what conda reads)"
    if not isinstance(raw, dict):
        raise EnvkitError(f"{path}: env_vars must be a mapping of NAME: value", fix)
    out: dict[str, str] = {}
    for key, value in raw.items():
        if not _VAR_NAME.fullmatch(str(key)):
            raise EnvkitError(f"{path}: {str(key)[:40]!r} is not a valid environment variable name", fix)
        if isinstance(value, (dict, list)) or "\0" in str(value) or len(str(value)) > 65536:
            raise EnvkitError(f"{path}: the value of {key} is not a plain string", fix)
        out[str(key)] = str(value)
    return out


def state_vars_quiet(prefix: Path) -> dict[str, str]:
    """conda-meta/state's env_vars as strings, {} when absent or unreadable (doctor's view: never raises)."""
    table = read_json_quiet(state_path(prefix)).get("env_vars") or {}
    return {str(k): str(v) for k, v in table.items()} if isinstance(table, dict) else {}


def write_state(prefix: Path, variables: Iterable[tuple[str, str]]) -> None:
    """`variables:` go where conda keeps them (conda-meta/state), so `conda activate` exports them too."""
    state_path(prefix).write_text(json.dumps({"env_vars": dict(variables)}, indent=2) + "\n", encoding="utf-8")


# -- .envkit/*.json and the kept files ------------------------------------------------------------------
def read_meta(prefix: Path, name: str, what: str = META_WHAT) -> Any:
    """One .envkit/<name> JSON file, bounded; missing or unreadable is an InputError naming it."""
    return load_json(meta_path(prefix, name), what)


def read_meta_checked(prefix: Path, name: str) -> tuple[dict[str, Any], str | None]:
    """One .envkit/<name> file: ({}, None) when absent, ({}, why) when unreadable; never raises (envkit list)."""
    path = meta_path(prefix, name)
    if not path.exists() and not path.is_symlink():
        return {}, None
    try:
        return load_json_object(path, META_WHAT, limit=META_LIMIT), None
    except EnvkitError as exc:
        return {}, exc.message


def read_meta_quiet(prefix: Path, name: str) -> dict[str, Any]:
    """One .envkit/<name> JSON object, {} when absent or unreadable (doctor: never raises)."""
    return read_json_quiet(meta_path(prefix, name))


def made_by_envkit(prefix: Path) -> bool:
    """The env has envkit's create record (an envkit env, or one an older envkit made before owner.json)."""
    return meta_path(prefix, CREATE_FILE).is_file()


def has_create_record(prefix: Path) -> bool:
    """create.json exists (as a file or anything else: `envkit list` calls such an env "older envkit")."""
    return meta_path(prefix, CREATE_FILE).exists()


def _write_meta_text(prefix: Path, name: str, text: str) -> None:
    path = meta_path(prefix, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def write_create(prefix: Path, data: Mapping[str, Any]) -> None:
    _write_meta_text(prefix, CREATE_FILE, json.dumps(data, indent=2) + "\n")


def update_create(prefix: Path, **fields: Any) -> None:
    """Set fields of an existing create.json (the phase timings, known only after the swap); best effort."""
    path = meta_path(prefix, CREATE_FILE)
    try:
        data = json.loads(path.read_text())
        data.update(fields)
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    except (OSError, ValueError, AttributeError):
        pass


def write_verify(prefix: Path, text: str) -> None:
    """The last verify report (already redacted JSON text), replaced atomically."""
    atomic_write_text(meta_path(prefix, VERIFY_FILE), text)


def write_kept_env_file(prefix: Path, text: str) -> None:
    _write_meta_text(prefix, KEPT_ENV_FILE, text)


def read_kept_env_file(prefix: Path) -> Any:
    """The kept environment.yml as data (None when there is none); unreadable is an InputError."""
    path = meta_path(prefix, KEPT_ENV_FILE)
    if not path.is_file():
        return None
    return load_yaml(path, "kept environment file")


def write_pip_requirements(prefix: Path, text: str) -> None:
    _write_meta_text(prefix, PIP_REQUIREMENTS, text)


def write_pip_provenance(prefix: Path, rows: list[dict[str, Any]]) -> None:
    _write_meta_text(prefix, PIP_PROVENANCE, json.dumps(rows, indent=1) + "\n")


def read_pip_provenance(prefix: Path) -> Any:
    """pip-provenance.json as JSON; missing or unreadable is an InputError."""
    return read_meta(prefix, PIP_PROVENANCE, "pip provenance file")


def write_owner_marker(prefix: Path, text: str) -> None:
    _write_meta_text(prefix, OWNER_FILE_NAME, text)


def read_owner_marker(prefix: Path) -> Any:
    """owner.json as JSON, bounded (a marker planted as a FIFO or /dev/zero must not hang remove)."""
    return load_json(owner_path(prefix), "ownership marker", limit=1 << 20)


def has_owner_marker(prefix: Path) -> bool:
    marker = owner_path(prefix)
    return marker.exists() or marker.is_symlink()


# -- lenient reads (doctor: a broken file is a finding, never an exception) -----------------------------
def read_text_quiet(path: Path) -> str:
    """Bounded (safeio): a file in an env may be a FIFO, a device or huge; any of that reads as OSError."""
    try:
        return read_bytes(path, "file").decode("utf-8", "replace")
    except InputError as exc:
        raise OSError(exc.message) from None


def read_json_quiet(path: Path) -> dict[str, Any]:
    """A JSON object, {} when the file is absent, unreadable, not JSON or not an object."""
    try:
        data = json.loads(read_text_quiet(path))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


# -- typed reads (doctor: a field of the wrong type is a finding about that env, never a traceback) ------------
def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


class Typed:
    """A JSON object read field by field, each with the type conda or envkit writes there. A field of
    another type (`"files": 5`, `"depends": "python"`, `"machine": []`) reads as its empty value and is
    noted in `problems` ("<where>: files is the number 5, not a list of strings"), so the reader never
    raises and the caller reports the env's damage instead of crashing on it. Shared `problems` list:
    nested objects (`.mapping`, `.objects`) report into their parent's."""

    def __init__(self, data: Any, where: str, problems: list[str] | None = None) -> None:
        self.where = where
        self.problems: list[str] = [] if problems is None else problems
        if isinstance(data, dict):
            self.data: dict[str, Any] = data
        else:
            self.data = {}
            if data is not None:
                self.problems.append(f"{where} is {_kind(data)}, not a mapping")

    def __bool__(self) -> bool:
        return bool(self.data)

    def _wrong(self, key: str, value: Any, wanted: str) -> None:
        self.problems.append(f"{self.where}: {key} is {_kind(value)}, not {wanted}")

    def text(self, key: str, default: str = "") -> str:
        """A string field (a plain number is taken as its text, as conda's own loader does for versions)."""
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        self._wrong(key, value, "a string")
        return default

    def optional_text(self, key: str) -> str | None:
        return self.text(key) if self.data.get(key) is not None else None

    def integer(self, key: str) -> int | None:
        """A whole number (a boolean is not one); None when absent or of another type."""
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        self._wrong(key, value, "a whole number")
        return None

    def texts(self, key: str) -> tuple[str, ...]:
        """A list of strings (a lone string is not one: iterating it would give its characters)."""
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            self._wrong(key, value, "a list of strings")
            return ()
        bad = [item for item in value if not isinstance(item, str)]
        if bad:
            self._wrong(f"an item of {key}", bad[0], "a string")
        return tuple(item for item in value if isinstance(item, str))

    def mapping(self, key: str) -> Typed:
        value = self.data.get(key)
        if value is not None and not isinstance(value, dict):
            self._wrong(key, value, "a mapping")
            value = None
        return Typed(value, f"{self.where} {key}", self.problems)

    def objects(self, key: str) -> list[Typed]:
        """A list of mappings."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self._wrong(key, value, "a list of mappings")
            return []
        bad = [item for item in value if not isinstance(item, dict)]
        if bad:
            self._wrong(f"an item of {key}", bad[0], "a mapping")
        return [Typed(item, f"{self.where} {key}[{i}]", self.problems)
                for i, item in enumerate(value) if isinstance(item, dict)]


def read_typed_quiet(path: Path, where: str, problems: list[str]) -> Typed:
    """A JSON object file through the bounded reader, typed; absent is empty, unreadable is a problem."""
    if not path.exists() and not path.is_symlink():
        return Typed(None, where, problems)
    try:
        data = json.loads(read_text_quiet(path))
    except (OSError, ValueError, RecursionError) as exc:
        problems.append(f"{where} is unreadable ({str(exc)[:120] or type(exc).__name__})")
        return Typed(None, where, problems)
    return Typed(data, where, problems)

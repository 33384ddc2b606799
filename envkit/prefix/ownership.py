"""What envkit may delete or replace: only what it can prove it made, and never a place that is
not an environment. `remove`, `create --force` and the leftover sweep all ask this module first.

Proof of ownership: at creation envkit writes `<prefix>/.envkit/owner.json` (a random id and the
prefix it was made for) and records the same id in `$ENVKIT_HOME/owned/<id>.json`. An env is
envkit's when both exist, agree, and name this very path. A conda-made env, a copy of an envkit env
at another path, or an env from another ENVKIT_HOME is "not proven": it is removed or replaced only
with a separate confirmation (`--not-envkit`).

Never touched, confirmation or not: `/`, `$HOME`, the current directory or any folder above it, a
conda installation root (it has `envs/`, `condabin/` or `pkgs/`, conda's own layout: conda docs,
"Conda directory structure"), envkit's own home and cache, a symlink, and a folder that is not a
conda environment (no `conda-meta/` holding `history` or package records).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from envkit import __version__
from envkit.config import cache_dir, envkit_home
from envkit.errors import EnvkitError, InputError
from envkit.prefix.locations import conda_envs_dirs, conda_root, envkit_envs_dir, registry_dir
from envkit.prefix.records import (has_owner_marker, has_records_or_history, made_by_envkit, read_owner_marker,
                                   write_owner_marker)
from envkit.safeio import load_json

FOREIGN_FLAG = "--not-envkit"


class RefusedError(EnvkitError):
    """envkit will not delete or replace this folder."""


@dataclass(frozen=True)
class Ownership:
    """Whether envkit can prove it made the env at `prefix`, and why not when it cannot."""

    prefix: Path
    owned: bool
    reason: str  # "made by envkit" or why it is not proven


def new_owner_id() -> str:
    return secrets.token_hex(16)


def mark_owned(staging: Path, final: Path, owner_id: str) -> None:
    """Write the marker into a staging env (built for `final`) and the id into envkit's registry."""
    record = {"id": owner_id, "prefix": str(final), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "envkit_version": __version__, "uid": os.geteuid()}
    text = json.dumps(record, indent=2) + "\n"
    registry = registry_dir()
    registry.mkdir(parents=True, exist_ok=True)
    (registry / f"{owner_id}.json").write_text(text, encoding="utf-8")
    write_owner_marker(staging, text)


def forget(prefix: Path, made_for: Path | None = None) -> None:
    """Drop the registry entry of an env that was removed (`made_for`: the path it was made for, when it
    has been moved aside); only when the entry names that path."""
    owner_id = _marker_id(prefix)
    if not owner_id:
        return
    entry = registry_dir() / f"{owner_id}.json"
    try:
        registered = load_json(entry, "registry entry", limit=1 << 20)
    except InputError:
        return
    recorded = registered.get("prefix") if isinstance(registered, dict) else None
    # a copy carries the original's id: removing the copy must not orphan the original
    if isinstance(recorded, str) and os.path.realpath(recorded) == os.path.realpath(made_for or prefix):
        entry.unlink(missing_ok=True)


def _marker_id(prefix: Path) -> str | None:
    try:
        data = read_owner_marker(prefix)
    except InputError:
        return None
    owner_id = data.get("id") if isinstance(data, dict) else None
    return owner_id if isinstance(owner_id, str) and owner_id.isalnum() else None


def ownership(prefix: Path, expected_id: str | None = None) -> Ownership:
    """Marker in the env, the same id in the registry, both naming this path (`expected_id`: that id)."""
    if not has_owner_marker(prefix):
        made = "an older envkit" if made_by_envkit(prefix) else "conda or another tool"
        return Ownership(prefix, False, f"it has no envkit ownership marker (made by {made})")
    try:  # bounded (safeio): a marker planted as a FIFO or /dev/zero must not hang remove
        data = read_owner_marker(prefix)
    except InputError as exc:
        return Ownership(prefix, False, f"its ownership marker is unreadable ({exc.message})")
    owner_id = data.get("id") if isinstance(data, dict) else None
    if not isinstance(owner_id, str) or not owner_id.isalnum():
        return Ownership(prefix, False, "its ownership marker is malformed")
    if expected_id is not None and owner_id != expected_id:
        return Ownership(prefix, False, "its ownership marker belongs to another envkit run")
    if os.path.realpath(str(data.get("prefix", ""))) != os.path.realpath(prefix):
        return Ownership(prefix, False, f"its ownership marker was written for {data.get('prefix')} "
                                        "(a copy or a moved env)")
    try:
        registered = load_json(registry_dir() / f"{owner_id}.json", "registry entry", limit=1 << 20)
    except InputError:
        return Ownership(prefix, False, f"its id is not in this envkit's registry ({registry_dir()}): made "
                                        "under another ENVKIT_HOME or by another user, or the marker was copied")
    if not isinstance(registered, dict) or registered.get("id") != owner_id:
        return Ownership(prefix, False, "its registry entry does not match its marker")
    return Ownership(prefix, True, "made by envkit")


def is_conda_root(path: Path) -> bool:
    return any((path / sub).is_dir() for sub in ("envs", "condabin", "pkgs"))


def is_env(path: Path) -> bool:
    return has_records_or_history(path)


def _protected() -> list[tuple[Path, str]]:
    places = [(Path("/"), "the filesystem root"), (Path.home(), "your home folder ($HOME)"),
              (envkit_home(), "envkit's home (ENVKIT_HOME)"), (cache_dir(), "envkit's package cache")]
    places.append((envkit_envs_dir(), "envkit's envs folder"))
    root = conda_root()
    if root is not None:
        places.append((root, "the conda installation"))
    places += [(d, "a conda envs folder") for d in conda_envs_dirs()]
    return [(Path(os.path.realpath(p)), why) for p, why in places]


def check_deletable(prefix: Path, *, allow_foreign: bool, verb: str = "remove",
                    expected_id: str | None = None) -> Ownership:
    """Raise RefusedError unless `prefix` may be deleted/replaced; return what was proven."""
    shown = prefix
    if prefix.is_symlink():
        raise RefusedError(f"refusing to {verb} {shown}: it is a symlink (envkit never deletes through links)",
                           f"remove the link itself: rm {shown}")
    real = Path(os.path.realpath(prefix))
    for place, why in _protected():
        if real == place:
            raise RefusedError(f"refusing to {verb} {shown}: it is {why}", "name one environment: envkit list")
    cwd = Path(os.path.realpath(os.getcwd()))
    if real == cwd or real in cwd.parents:
        raise RefusedError(f"refusing to {verb} {shown}: it is the current directory or contains it",
                           "cd elsewhere and name the environment: envkit list")
    if is_conda_root(real):
        raise RefusedError(f"refusing to {verb} {shown}: it is a conda installation root (it has envs/, "
                           "condabin/ or pkgs/), holding every environment in it",
                           "remove single environments by name (envkit list); uninstall conda with its own tools")
    if not is_env(real):
        raise RefusedError(f"refusing to {verb} {shown}: it is not a conda environment (no conda-meta/ with "
                           "package records)", "check the path; envkit list shows the environments")
    owner = ownership(real, expected_id)
    if not owner.owned and not allow_foreign:
        fix = (f"if you are sure, envkit remove {shown} --yes {FOREIGN_FLAG}" if verb == "remove" else
               f"if you are sure, add {FOREIGN_FLAG} to --force; or remove it with conda: conda env remove -p {shown}")
        raise RefusedError(f"refusing to {verb} {shown}: envkit cannot prove it made this environment: "
                           f"{owner.reason}", fix)
    return owner

"""`envkit list` and `envkit remove`: the envs on this machine, where each came from, and deleting one
envkit can prove it made (ownership.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from envkit.errors import EnvkitError
from envkit.prefix.condarc import unregister_env
from envkit.prefix.locations import find_prefix, list_envs
from envkit.prefix.ownership import FOREIGN_FLAG, check_deletable, forget, ownership
from envkit.prefix.records import CREATE_FILE, VERIFY_FILE, has_create_record, has_owner_marker, read_meta_checked
from envkit.prefix.staging import target_lock, trash


def remove_env(prefix: Path, *, not_envkit: bool = False) -> Path:
    """Delete an env envkit can prove it made (envkit/prefix/ownership.py); others only with `not_envkit`.

    Under the target's lock, so it never races a create of the same name; the name is freed at once
    by a rename to a locked trash name, and an interrupted deletion is finished by the next sweep."""
    with target_lock(prefix):
        check_deletable(prefix, allow_foreign=not_envkit, verb="remove")
        real = Path(os.path.realpath(prefix))
        forget(real)
        for seen in {prefix, real}:
            unregister_env(seen)  # conda's environments.txt forgets it too (issue 12)
        problem = trash(real)
    if problem:
        raise EnvkitError(f"{prefix} was removed from its name, but {problem}", None)
    return real


def _text(value: Any) -> str | None:
    return None if value is None else str(value)[:200]


def _origin(prefix: Path) -> tuple[str, str, str]:
    """(origin, why, the remove command) by the same proof `remove` uses (envkit.prefix.ownership):
    "envkit" (proven), "copied" (an envkit marker that does not prove this path: a copy, a moved env,
    another ENVKIT_HOME), "older envkit" (create.json but no marker) or "not envkit"."""
    owner = ownership(prefix)
    ref = _shell_word(prefix.name if _resolves_to(prefix) else str(prefix))
    if owner.owned:
        return "envkit", owner.reason, f"envkit remove {ref}"
    remove = f"envkit remove {ref} --yes {FOREIGN_FLAG}"
    if has_owner_marker(prefix):
        return "copied", owner.reason, remove
    if has_create_record(prefix):
        return "older envkit", owner.reason, remove
    return "not envkit", owner.reason, remove


def _resolves_to(prefix: Path) -> bool:
    try:
        return find_prefix(prefix.name, None) == prefix
    except EnvkitError:
        return False


def _shell_word(text: str) -> str:
    return text if re.match(r"^[A-Za-z0-9._/+-]+$", text) else "'" + text.replace("'", "'\\''") + "'"


def list_envs_rows() -> list[dict[str, Any]]:
    """One row per env found (name, prefix, origin and how to remove it, torch/CUDA, last verify)."""
    envs = []
    for prefix in list_envs():
        created, problem = read_meta_checked(prefix, CREATE_FILE)
        verify, verify_problem = read_meta_checked(prefix, VERIFY_FILE)
        selection = created.get("selection")
        sel: dict[str, Any] = selection if isinstance(selection, dict) else {}
        origin, why, remove = _origin(prefix)
        row = {
            "name": prefix.name, "prefix": str(prefix), "by_envkit": origin == "envkit",
            "origin": origin, "ownership": why, "remove": remove,
            "torch": _text(sel.get("torch")), "cuda": _text(sel.get("cuda")), "flavor": _text(sel.get("flavor")),
            "created": _text(created.get("created")),
            "verify": _text(verify.get("outcome")), "verified": _text(verify.get("time")),
        }
        if problem or verify_problem:
            row["unreadable"] = problem or verify_problem
        envs.append(row)
    return envs

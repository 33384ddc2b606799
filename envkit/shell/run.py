"""`envkit run NAME -- CMD`: one command inside an env, with what `conda activate` would set."""

from __future__ import annotations

import os
from pathlib import Path

from envkit import proc
from envkit.errors import EnvkitError
from envkit.prefix.locations import find_prefix
from envkit.prefix.records import state_vars

ACTIVATE = ('for f in "$CONDA_PREFIX"/etc/conda/activate.d/*.sh; do [ -f "$f" ] && . "$f"; done; '
            'exec "$@"')


def activated_env(prefix: Path) -> dict[str, str]:
    """What `conda activate` sets that matters to a program: PATH, CONDA_PREFIX, env vars from conda-meta/state."""
    env = proc.child_env(isolate_python=True)
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["CONDA_PREFIX"] = str(prefix)
    env["CONDA_DEFAULT_ENV"] = prefix.name
    env.update(state_vars(prefix))
    return env


def run_in_env(name: str | None, command: list[str], prefix_path: str | None = None) -> int:
    """`envkit run NAME -- CMD` or `envkit run --prefix PATH -- CMD` (a NAME with a / is a path too)."""
    if prefix_path is None and name is not None and "/" in name:
        name, prefix_path = None, name
    prefix = find_prefix(name, prefix_path)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        where = name or f"--prefix {prefix_path}"
        raise EnvkitError("no command given", f"envkit run {where} -- python -c 'import torch'")
    try:
        code = proc.run_interactive(["bash", "-c", ACTIVATE, "envkit-run", *command], env=activated_env(prefix))
    except FileNotFoundError as exc:
        raise EnvkitError(f"cannot run {command[0]}: {exc}", "is bash installed?") from exc
    return 128 - code if code < 0 else code  # killed by signal N: 128+N, as a shell reports it

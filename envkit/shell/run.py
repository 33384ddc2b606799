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


def run_in_env(name: str, command: list[str]) -> int:
    prefix = find_prefix(name if "/" not in name else None, name if "/" in name else None)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise EnvkitError("no command given", f"envkit run {name} -- python -c 'import torch'")
    try:
        code = proc.run_interactive(["bash", "-c", ACTIVATE, "envkit-run", *command], env=activated_env(prefix))
    except FileNotFoundError as exc:
        raise EnvkitError(f"cannot run {command[0]}: {exc}", "is bash installed?") from exc
    return 128 - code if code < 0 else code  # killed by signal N: 128+N, as a shell reports it

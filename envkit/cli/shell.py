"""`envkit shell`, `activate`, `deactivate`, `kernel`: ways into an environment without conda (issue 14).

Registered by envkit/cli/__init__.py; only click is imported at import time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from envkit.cli.help import examples
from envkit.cli.options import complete_envs

if TYPE_CHECKING:
    from envkit.create import CreateResult

SHELL_CHOICE = click.Choice(["bash", "zsh", "sh", "fish"])


def _root_prefix() -> str | None:
    from envkit.prefix.locations import conda_root

    root = conda_root()
    return str(root) if root is not None else None


def _notes(notes: tuple[str, ...]) -> None:
    from envkit.cli import output

    for note in notes:  # a note names paths and variables from the env's files: made visible
        output.plain(output.sanitize(f"envkit: note: {note}"), err=True)


def with_kernel(result: CreateResult, name: str, *, skip: bool) -> CreateResult:
    """After `envkit create`: register the env as a Jupyter kernel when it has ipykernel; the outcome
    is one more note of the result (a kernel that cannot be written never fails the create)."""
    from dataclasses import replace

    from envkit.shell.kernel import after_create

    note = after_create(result.prefix, name, skip)
    return replace(result, notes=(*result.notes, note)) if note else result


def forget_kernels(prefix: Path) -> None:
    """`envkit remove`: the env's Jupyter kernelspecs go with it (only those envkit wrote)."""
    from envkit.cli import output
    from envkit.shell.kernel import unregister

    for folder in unregister(prefix):
        output.plain(f"removed its Jupyter kernel {folder.name} ({folder})")


@click.command("activate", epilog=examples(
    ("activate dl_train in this bash or zsh", 'eval "$(envkit activate dl_train)"'),
    ("the same in fish", "envkit activate dl_train | source"),
    ("keep the active environment's tools on PATH too", 'eval "$(envkit activate dl_train --stack)"')))
@click.argument("name", required=False, shell_complete=complete_envs)
@click.option("--prefix", default=None, help="Activate the environment at this path.")
@click.option("--shell", "shell", type=SHELL_CHOICE, default=None,
              help="Syntax of the code printed (default: from $SHELL, else bash).")
@click.option("--stack", is_flag=True, help="Keep the active env's bin on PATH too (conda activate --stack).")
def activate_cmd(name: str | None, prefix: str | None, shell: str | None, stack: bool) -> None:
    """Print shell code that activates NAME here: eval "$(envkit activate NAME)" (fish: | source)."""
    from envkit.shell.activate import activate_code, shell_of
    from envkit.prefix.locations import find_prefix

    path = find_prefix(name, prefix)
    code, notes = activate_code(path, os.environ, shell=shell or shell_of(os.environ), stack=stack,
                                root_prefix=_root_prefix())
    _notes(notes)
    sys.stdout.write(code)


@click.command("deactivate", epilog=examples(
    ("undo the last envkit activate in this bash or zsh", 'eval "$(envkit deactivate)"'),
    ("the same in fish", "envkit deactivate | source")))
@click.option("--shell", "shell", type=SHELL_CHOICE, default=None,
              help="Syntax of the code printed (default: from $SHELL, else bash).")
def deactivate_cmd(shell: str | None) -> None:
    """Print shell code that undoes the last activation: eval "$(envkit deactivate)"."""
    from envkit.shell.activate import deactivate_code, shell_of

    code, notes = deactivate_code(os.environ, shell=shell or shell_of(os.environ), root_prefix=_root_prefix())
    _notes(notes)
    sys.stdout.write(code)


@click.command("shell", epilog=examples(
    ("a subshell with dl_train active; exit returns here", "envkit shell dl_train"),
    ("an environment at a path, in zsh", "envkit shell --prefix /opt/envs/train --shell zsh")))
@click.argument("name", required=False, shell_complete=complete_envs)
@click.option("--prefix", default=None, help="The environment at this path.")
@click.option("--shell", "shell", type=SHELL_CHOICE, default=None, help="Start this shell instead of $SHELL.")
def shell_cmd(name: str | None, prefix: str | None, shell: str | None) -> None:
    """Open your shell with NAME activated (as conda activate would); `exit` returns here."""
    from envkit.prefix.locations import find_prefix
    from envkit.shell.subshell import open_shell

    path = find_prefix(name, prefix)
    if not sys.stdin.isatty():
        _notes(("stdin is not a terminal: the shell reads its commands from it",))
    raise SystemExit(open_shell(path, shell=shell, notes_to=lambda n: _notes((n,))))


@click.command("kernel", epilog=examples(
    ("make dl_train a Jupyter kernel (it needs ipykernel)", "envkit kernel dl_train"),
    ("take the kernel away again", "envkit kernel dl_train --remove")))
@click.argument("name", required=False, shell_complete=complete_envs)
@click.option("--prefix", default=None, help="The environment at this path.")
@click.option("--remove", is_flag=True, help="Unregister the env's kernel instead.")
def kernel_cmd(name: str | None, prefix: str | None, remove: bool) -> None:
    """Register NAME as a Jupyter kernel (user level), or --remove it."""
    from envkit.cli import output
    from envkit.errors import EnvkitError
    from envkit.shell.kernel import has_ipykernel, kernels_dir, register, unregister
    from envkit.prefix.locations import find_prefix

    if remove:
        from envkit.errors import EnvNotFoundError

        try:
            path = find_prefix(name, prefix)
        except EnvNotFoundError:  # the env is gone already: its kernel still goes, found by name
            if not name:
                raise
            removed = unregister(None, name)
        else:
            removed = unregister(path, name)
        if not removed:
            output.plain(f"no envkit kernel for {name or prefix} in {kernels_dir()}")
        for folder in removed:
            output.plain(f"removed Jupyter kernel {folder.name} ({folder})")
        return
    path = find_prefix(name, prefix)
    if not has_ipykernel(path):
        raise EnvkitError(f"{path} has no ipykernel, so Jupyter cannot start a kernel from it",
                          f"install it into the env (conda install -p {path} ipykernel, or "
                          f"envkit run {name or path} -- python -m pip install ipykernel), then envkit kernel "
                          f"{name or '--prefix ' + str(path)}")
    kernel = register(path, name or path.name)
    output.plain(output.sanitize(f"registered Jupyter kernel {kernel.name}: {kernel.display_name} ({kernel.path})"))
    for note in kernel.skipped:  # a logo that was a symlink out of the env, a device or a FIFO: said, not copied
        output.plain(output.sanitize(f"note: {note}"), err=True)

"""`envkit shell NAME`: the user's own shell, started as a child, with the env activated inside it.

The shell first reads the user's own startup files (so their prompt, aliases and a conda hook that
auto-activates base all apply), then evaluates `envkit activate` for the env, computed at that point
from the shell's real environment: the result is what typing `conda activate NAME` would give.
`exit` ends the child and returns to the shell the user came from, untouched.

Every value in the startup files (this envkit's path, the env's path, the folder of the files, the
user's $ENV) is one word made by shell/quoting.py for the shell that reads it; the prompt the child
shows is the activation's, escaped there too. The startup files live in a folder whose path has no
character any shell expands: POSIX sh expands $ENV before reading it (XCU 2.5.3 "ENV"; dash runs
command substitutions in it too), so a TMPDIR with `$(...)` in it must not end up there.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from envkit import proc
from envkit.errors import EnvkitError, UsageError
from envkit.shell.quoting import SHELLS, fish_quote, quote

_PLAIN = re.compile(r"[A-Za-z0-9_./-]+")  # a path no shell expands or splits


@dataclass(frozen=True)
class Launch:
    """How to start the shell: argv, its environment, and the startup files to write first."""

    argv: tuple[str, ...]
    env: dict[str, str]
    files: tuple[tuple[str, str], ...]  # (path, text)
    kind: str
    notes: tuple[str, ...] = ()


def envkit_command() -> list[str]:
    """This very envkit, runnable from inside the child shell whatever its PATH becomes."""
    return [sys.executable, "-m", "envkit"]


def pick_shell(environ: Mapping[str, str]) -> tuple[str, str, tuple[str, ...]]:
    """(path, kind, notes): $SHELL when envkit knows its syntax, else bash, else sh."""
    wanted = environ.get("SHELL") or ""
    base = os.path.basename(wanted)
    kind = "sh" if base in ("dash", "ash", "ksh", "mksh") else base
    if kind in SHELLS and (shutil.which(wanted) or os.access(wanted, os.X_OK)):
        return wanted, kind, ()
    for fallback in ("bash", "sh"):
        found = shutil.which(fallback)
        if found:
            why = f"$SHELL is {wanted!r}" if wanted else "$SHELL is not set"
            return found, fallback, (f"{why}: envkit knows {', '.join(SHELLS)}; starting {found} instead",)
    raise EnvkitError("no usable shell found (looked at $SHELL, bash, sh)", "install bash, or set SHELL=/bin/bash")


def plan_launch(prefix: Path, environ: Mapping[str, str], workdir: Path, *, shell: str | None = None,
                command: list[str] | None = None) -> Launch:
    """The argv, environment and startup files for an interactive shell in `prefix` (writes nothing)."""
    env = dict(environ)
    notes: tuple[str, ...] = ()
    if shell:
        path = shutil.which(shell) or shell
        kind = os.path.basename(path)
        kind = "sh" if kind in ("dash", "ash", "ksh", "mksh") else kind
        if kind not in SHELLS:
            raise UsageError(f"unsupported shell {shell!r}", f"use one of {', '.join(SHELLS)}")
    else:
        path, kind, notes = pick_shell(environ)
    cmd = command or envkit_command()
    activate = [*cmd, "activate", "--shell", kind, "--prefix", str(prefix)]
    if kind == "sh" and not _PLAIN.fullmatch(str(workdir)):
        raise EnvkitError(f"the folder for the shell's startup file, {workdir!r}, has characters sh would expand",
                          "set TMPDIR to a plain path (letters, digits, . _ - /), e.g. TMPDIR=/tmp")
    words = " ".join(quote(a, kind, "the activate command") for a in activate)
    posix_eval = (f"_envkit_code=\"$({words})\" || "
                  "{ echo 'envkit shell: activation failed (see above)' >&2; exit 1; }\n"
                  "eval \"$_envkit_code\"\nunset _envkit_code\n")
    rc = workdir / f"envkit-rc.{kind}"
    if kind == "bash":
        # --rcfile replaces ~/.bashrc, so read it first as an interactive bash would
        text = '[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"\n' + posix_eval
        return Launch((path, "--rcfile", str(rc), "-i"), env, ((str(rc), text),), kind, notes)
    if kind == "zsh":
        # zsh reads $ZDOTDIR/.zshenv and .zshrc: point ZDOTDIR here, read the user's own, then put it back
        user_dot = environ.get("ZDOTDIR") or environ.get("HOME") or ""
        env["ZDOTDIR"] = str(workdir)
        env["_ENVKIT_ZDOTDIR"] = user_dot
        zshenv = ('ZDOTDIR="$_ENVKIT_ZDOTDIR"\n[ -f "$ZDOTDIR/.zshenv" ] && . "$ZDOTDIR/.zshenv"\n'
                  f'_ENVKIT_ZDOTDIR="$ZDOTDIR"\nZDOTDIR={quote(str(workdir), "zsh")}\n')
        zshrc = ('ZDOTDIR="$_ENVKIT_ZDOTDIR"\nunset _ENVKIT_ZDOTDIR\n'
                 '[ -f "$ZDOTDIR/.zshrc" ] && . "$ZDOTDIR/.zshrc"\n' + posix_eval)
        return Launch((path, "-i"), env, ((str(workdir / ".zshenv"), zshenv), (str(workdir / ".zshrc"), zshrc)),
                      kind, notes)
    if kind == "fish":
        # --init-command runs after fish's own config files
        # `set` keeps the substitution's status (a pipe into `string collect` would report string's own)
        text = (f"set -l _envkit_code ({' '.join(fish_quote(a) for a in activate)}); "
                "or begin; echo 'envkit shell: activation failed (see above)' >&2; exit 1; end\n"
                "printf '%s\\n' $_envkit_code | source\n")
        return Launch((path, "-i", "--init-command", f"source {fish_quote(str(rc))}"), env, ((str(rc), text),),
                      kind, notes)
    # POSIX sh: an interactive sh reads the file named by $ENV
    old_env = environ.get("ENV")
    text = (f'[ -f {quote(old_env, "sh")} ] && . {quote(old_env, "sh")}\n' if old_env else "") + posix_eval
    env["ENV"] = str(rc)
    return Launch((path, "-i"), env, ((str(rc), text),), kind, notes)


def open_shell(prefix: Path, *, shell: str | None = None, notes_to: Callable[[str], None] | None = None) -> int:
    """Start the shell, wait for it, clean up its startup files; return its exit code."""
    base = tempfile.gettempdir()
    base = base if _PLAIN.fullmatch(base) or not os.path.isdir("/tmp") else "/tmp"
    with tempfile.TemporaryDirectory(prefix="envkit-shell-", dir=base) as tmp:
        launch = plan_launch(prefix, os.environ, Path(tmp), shell=shell)
        for path, text in launch.files:
            Path(path).write_text(text, encoding="utf-8")
        if notes_to is not None:
            for note in launch.notes:
                notes_to(note)
        try:
            return proc.run_interactive(launch.argv, env=launch.env)
        except OSError as exc:
            raise EnvkitError(f"cannot start {launch.argv[0]}: {exc.strerror or exc}",
                              f"install {launch.kind}, or pick another with --shell bash|zsh|fish|sh") from exc

"""External engines (--engine conda|mamba|micromamba): the same flow, solved and installed by the
user's own conda tool through the one subprocess wrapper.

conda 26.7 / mamba: `<exe> env create -f FILE -p PREFIX`; micromamba: `micromamba create -y -f FILE -p PREFIX`.
CONDA_OVERRIDE_CUDA carries the selection's CUDA level. A conda prefix is not relocatable, so the
env is built in place: a failure (or Ctrl-C) removes it and restores the old env of a --force.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envkit import proc
from envkit.errors import EngineError
from envkit.models import Machine, Selection
from envkit.render.envfile import EnvFile
from envkit.secrets import redact

# what conda prints -> the fix to suggest (conda-behaviour.md §7)
KNOWN_ERRORS = [
    (r"PackagesNotFound|ResolvePackageNotFound", "a package is missing from the channels",
     "check the channel list / mirror, or relax the pin"),
    (r"UnsatisfiableError|LibMambaUnsatisfiableError|could not solve|conflicting requirements",
     "the solver found no solution", "relax pins; for CUDA builds without a GPU set --cuda X.Y"),
    (r"NoChannelsConfiguredError", "no channels configured", "the environment file needs a channels: list"),
    (r"CondaHTTPError|HTTP 000|ConnectionError|Could not resolve host", "the channel could not be reached",
     "check the network or use --mirror"),
    (r"UnavailableInvalidChannel", "a channel does not exist (404)", "check the channel names and mirror URLs"),
    (r"Pip failed|Pip subprocess error", "the pip section failed", "check the pip packages and index URLs"),
]


def engine_argv(engine: str, exe: str, file: Path, prefix: Path) -> list[str]:
    if engine == "micromamba":
        return [exe, "create", "-y", "-f", str(file), "-p", str(prefix)]
    return [exe, "env", "create", "-f", str(file), "-p", str(prefix)]


def summarize(output: str) -> tuple[str, str]:
    for pattern, what, fix in KNOWN_ERRORS:
        if re.search(pattern, output):
            return what, fix
    return "the engine failed", "read the engine's output above"


def create_external(opts: Any, envfile: EnvFile, env_text: str, selection: Selection | None, machine: Machine,
                    prefix: Path, timer: Any, notes: list[str], on_line: Callable[[str], None] | None) -> Any:
    from envkit.engines.base import OLD, CreateResult, cuda_override_for, write_meta

    exe = shutil.which(opts.engine)
    if exe is None:
        raise EngineError(f"--engine {opts.engine}: `{opts.engine}` is not on PATH",
                          "install it, or use the embedded engine (the default: --engine rattler)")
    cuda = cuda_override_for(opts, machine, selection)
    extra = {"CONDA_OVERRIDE_CUDA": cuda} if cuda is not None else {}
    env = proc.child_env(extra, isolate_python=True)
    with tempfile.TemporaryDirectory(prefix="envkit-") as tmp:
        file = Path(tmp) / "environment.yml"
        file.write_text(envfile.render(), encoding="utf-8")  # credentials were never in it
        argv = engine_argv(opts.engine, exe, file, prefix)
        if opts.dry_run:
            argv.append("--dry-run")
        old = None
        if prefix.exists() and not opts.dry_run:
            old = prefix.parent / f"{OLD}.{prefix.name}.{os.getpid()}.0"
            prefix.rename(old)
        lines: list[str] = []

        def stream(line: str) -> None:
            lines.append(line)
            if on_line:
                on_line(redact(line))

        try:
            with timer.phase("solve+install"):
                done = proc.run(argv, timeout=3 * 3600, env=env, on_line=stream)
            if done.returncode != 0:
                what, fix = summarize(done.stdout)
                tail = redact("\n".join(lines[-15:]))
                raise EngineError(f"{opts.engine} failed (rc {done.returncode}): {what}\n{tail}", fix)
            if not opts.dry_run:
                write_meta(prefix, opts, env_text, selection, machine, (), timer, cuda)
        except BaseException:
            if not opts.dry_run and prefix.exists():
                shutil.rmtree(prefix, ignore_errors=True)
            if old is not None and old.exists():
                old.rename(prefix)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    report = None
    if not opts.no_verify and not opts.dry_run:
        from envkit.stages import verify_env

        with timer.phase("verify"):
            report = verify_env(prefix=str(prefix), timeout=opts.verify_timeout, quick=True)
    return CreateResult(prefix, (), selection, machine, timer.phases, opts.dry_run, env_text, report,
                        envfile.pip, engine=opts.engine, notes=tuple(notes))

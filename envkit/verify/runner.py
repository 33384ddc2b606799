"""Run the payload in a child process: the env's own python, a timeout, a cleaned environment."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envkit import proc
from envkit.errors import VerifyError
from envkit.verify.report import VerifyReport, build_report, failure_report

PAYLOAD = Path(__file__).with_name("payload") / "amp_check.py"
MARKER = "@@ENVKIT-VERIFY-JSON@@"
DEFAULT_TIMEOUT = 300.0


def python_of(prefix: Path) -> Path:
    for rel in ("bin/python", "bin/python3", "python.exe"):
        candidate = prefix / rel
        if candidate.exists():
            return candidate
    raise VerifyError(f"{prefix} has no python (looked for bin/python)",
                      f"create the environment first: envkit create {prefix.name}")


def resolve_python(python: str) -> str:
    found = shutil.which(python) if os.sep not in python else (python if Path(python).exists() else None)
    if not found:
        raise VerifyError(f"python executable {python!r} not found", "pass --python PATH to an existing interpreter")
    return found


def payload_env(prefix: Path | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """envkit's own PYTHONPATH/venv must not leak; CUDA_VISIBLE_DEVICES passes through untouched."""
    env = proc.child_env(isolate_python=True)
    if prefix is not None:
        env["CONDA_PREFIX"] = str(prefix)
        env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    if extra:
        env.update(extra)
    return env


def run_payload(python: str, options: dict[str, Any], machine: dict[str, Any] | None, *,
                prefix: Path | None = None, timeout: float = DEFAULT_TIMEOUT) -> VerifyReport:
    """Run the payload and turn whatever happens (report, hang, crash, garbage) into a VerifyReport."""
    args = dict(options, machine=machine)
    argv = [python, "-I", str(PAYLOAD), json.dumps(args)]
    pfx = str(prefix) if prefix else None
    try:
        done = proc.run(argv, timeout=timeout, env=payload_env(prefix))
    except (FileNotFoundError, PermissionError) as exc:
        raise VerifyError(f"cannot run {python}: {exc}", "check the environment's python, or pass --python") from exc
    if done.timed_out:
        return failure_report("timeout", f"timed out after {timeout:g} s (the payload and its children were killed)",
                              machine, python, pfx, {"stderr_tail": done.stderr_tail()})
    if MARKER in done.stdout:
        text = done.stdout.split(MARKER, 1)[1].strip()
        try:
            payload = json.loads(text.splitlines()[0])
        except (json.JSONDecodeError, IndexError):
            payload = None
        if isinstance(payload, dict):
            payload["stderr_tail"] = done.stderr_tail(10)
            return build_report(payload, machine, python, pfx)
    how = f"killed by signal {-done.returncode}" if done.returncode < 0 else f"exited with code {done.returncode}"
    return failure_report("crash", f"the payload {how} before reporting: {done.stderr_tail(5) or '(no stderr)'}",
                          machine, python, pfx, {"returncode": done.returncode, "stderr_tail": done.stderr_tail()})


def save_report(report: VerifyReport, path: Path) -> None:
    from envkit.fsutil import atomic_write_text

    atomic_write_text(path, json.dumps(report.to_json(), indent=2) + "\n")

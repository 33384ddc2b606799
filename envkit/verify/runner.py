"""Run the payload in a child process: the env's own python, a timeout, a cleaned environment."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from envkit import proc
from envkit.errors import UsageError, VerifyError
from envkit.fsutil import atomic_write_text
from envkit.secrets import redact
from envkit.verify.report import VerifyReport, build_report, failure_report

PAYLOAD = Path(__file__).with_name("payload") / "amp_check.py"
MODEL_PAYLOAD = Path(__file__).with_name("payload") / "model_check.py"
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


OUTPUT_CAP = 8 << 20  # bytes kept per stream; a payload that floods more has the excess discarded
MAX_TIMEOUT = 7 * 24 * 3600.0
_STATUSES = ("pass", "fail", "warn", "skip")


def check_timeout(value: float) -> float:
    """A positive, finite number of seconds (nan, inf and 1e308 would never fire or overflow the clock)."""
    import math

    if not math.isfinite(value) or not 1 <= value <= MAX_TIMEOUT:
        raise UsageError(f"--timeout {value!r} is not a number of seconds between 1 and {MAX_TIMEOUT:g}",
                         "pass e.g. --timeout 300")
    return value


def _malformed(payload: Any) -> str | None:
    """Why a payload report cannot be trusted, or None when it is well-formed."""
    if not isinstance(payload, dict):
        return f"the report is a JSON {type(payload).__name__}, not an object"
    checks = payload.get("checks")
    if not isinstance(checks, list) or not checks:
        return "the report has no list of checks"
    for i, check in enumerate(checks):
        if not isinstance(check, dict):
            return f"check #{i + 1} is not an object"
        if not isinstance(check.get("name"), str) or not isinstance(check.get("explanation"), str):
            return f"check #{i + 1} lacks a name or an explanation"
        if check.get("status") not in _STATUSES:
            return f"check {check['name'][:40]!r} has an unknown status {str(check.get('status'))[:20]!r}"
        duration = check.get("duration_s", 0.0)
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or duration != duration:
            return f"check {check['name'][:40]!r} has a non-numeric duration"
        if check.get("device") is not None and (isinstance(check["device"], bool) or
                                                not isinstance(check["device"], int)):
            return f"check {check['name'][:40]!r} has a non-integer device"
        if not isinstance(check.get("values", {}), dict):
            return f"check {check['name'][:40]!r} has values that are not an object"
    gpus = payload.get("gpus")
    if gpus is not None and not (isinstance(gpus, list) and all(isinstance(g, dict) for g in gpus)):
        return "the report's gpus are not a list of objects"
    return None


def _report_json(stdout: str) -> tuple[Any, str | None]:
    """The payload's report: the JSON line after the last marker, complete (newline-terminated)."""
    if MARKER not in stdout:
        return None, "no report"
    tail = stdout.rsplit(MARKER, 1)[1].lstrip("\r\n")
    line, newline, _rest = tail.partition("\n")
    if not newline:
        return None, "the report was cut off (no end of line)"
    try:
        return json.loads(line), None
    except (ValueError, RecursionError) as exc:
        return None, f"the report is not valid JSON ({str(exc)[:80]})"


def run_payload(python: str, options: dict[str, Any], machine: dict[str, Any] | None, *,
                prefix: Path | None = None, timeout: float = DEFAULT_TIMEOUT, payload_file: Path = PAYLOAD,
                build: Callable[..., VerifyReport] = build_report) -> VerifyReport:
    """Run the payload and turn whatever happens (report, hang, crash, garbage) into a VerifyReport.

    PASS needs both a zero exit status and a complete, well-formed report: a payload that prints a
    PASS report and then crashes, or prints half a report, is a FAIL.
    """
    check_timeout(timeout)
    args = dict(options, machine=machine)
    argv = [python, "-I", str(payload_file), json.dumps(args)]
    pfx = str(prefix) if prefix else None
    try:
        done = proc.run_bounded(argv, timeout=timeout, env=payload_env(prefix), cap=OUTPUT_CAP)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == 8:  # ENOEXEC
            why += " (not a program this machine can run: a script without a #! line, or another CPU architecture)"
        raise VerifyError(f"cannot run {python}: {why}", "check the environment's python, or pass --python") from None
    extra: dict[str, Any] = {"stderr_tail": done.stderr_tail()}
    if done.stdout_dropped or done.stderr_dropped:
        extra["output_discarded_bytes"] = done.stdout_dropped + done.stderr_dropped
        extra["note"] = (f"the payload wrote more than {OUTPUT_CAP >> 20} MiB; "
                         f"{done.stdout_dropped + done.stderr_dropped} bytes were discarded")
    if done.timed_out:
        return failure_report("timeout", f"timed out after {timeout:g} s (the payload and its children were killed)",
                              machine, python, pfx, extra)
    how = f"was killed by signal {-done.returncode}" if done.returncode < 0 else f"exited with code {done.returncode}"
    payload, problem = _report_json(done.stdout)
    if problem is None:
        problem = _malformed(payload)
    if problem is not None:
        if problem == "no report":
            return failure_report("crash", f"the payload {how} before reporting: "
                                  f"{done.stderr_tail(5) or '(no stderr)'}", machine, python, pfx,
                                  {"returncode": done.returncode, **extra})
        return failure_report("report", f"the payload's report cannot be trusted: {problem} (it {how})",
                              machine, python, pfx, {"returncode": done.returncode, **extra})
    assert isinstance(payload, dict)
    payload["stderr_tail"] = done.stderr_tail(10)
    if "note" in extra:
        payload["note"] = extra["note"]
    if done.returncode != 0:
        payload["checks"] = [*payload["checks"], {
            "name": "exit", "status": "fail", "duration_s": 0.0, "values": {"returncode": done.returncode},
            "explanation": f"the payload printed its report but then {how}: the run is not trusted"}]
    return build(payload, machine, python, pfx)


def report_text(report: VerifyReport) -> str:
    """The report as it is saved: indented JSON, credentials redacted."""
    return redact(json.dumps(report.to_json(), indent=2)) + "\n"


def save_report(report: VerifyReport, path: Path) -> None:
    atomic_write_text(path, report_text(report))

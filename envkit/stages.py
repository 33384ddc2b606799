"""Stage functions the CLI calls: each takes plain arguments with named defaults, returns a model.

They never print; cli.py renders what they return (architecture.md, habit 1).
"""

from __future__ import annotations

from pathlib import Path

from envkit.verify.report import VerifyReport

VERIFY_TIMEOUT = 300.0


def verify_env(*, name: str | None = None, prefix: str | None = None, python: str | None = None,
               quick: bool = False, device: int | None = None, all_gpus: bool = False,
               timeout: float = VERIFY_TIMEOUT, report_file: Path | None = None,
               save: bool = True) -> VerifyReport:
    """Run the AMP payload with the env's python; save the report in <prefix>/.envkit/verify.json."""
    from envkit import output
    from envkit.detect import detect
    from envkit.locations import META_DIR, find_prefix
    from envkit.verify.runner import python_of, resolve_python, run_payload, save_report

    env_prefix: Path | None = None
    if python:
        exe = resolve_python(python)
    else:
        env_prefix = find_prefix(name, prefix)
        exe = str(python_of(env_prefix))
    machine = output.machine_json(detect())
    options = {"quick": quick, "device": device, "all_gpus": all_gpus}
    report = run_payload(exe, options, machine, prefix=env_prefix, timeout=timeout)
    if env_prefix is not None and save:
        save_report(report, env_prefix / META_DIR / "verify.json")
    if report_file is not None:
        save_report(report, report_file)
    return report

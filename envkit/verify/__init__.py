"""verify: run the bundled AMP smoke test with a target environment's own python.

Owns: the payload runner (runner), the report model (report), the in-env payloads (payload/, which
alone import torch) and verify_env, the one entry point every verb and engine uses.
May import: detect/, prefix/ and the ground floor.
"""

from __future__ import annotations

from pathlib import Path

from envkit.detect import detect
from envkit.prefix.locations import find_prefix
from envkit.prefix.records import write_verify
from envkit.verify.report import VerifyReport
from envkit.verify.runner import python_of, report_text, resolve_python, run_payload, save_report

VERIFY_TIMEOUT = 300.0


def verify_env(*, name: str | None = None, prefix: str | None = None, python: str | None = None,
               quick: bool = False, device: int | None = None, all_gpus: bool = False,
               timeout: float = VERIFY_TIMEOUT, report_file: Path | None = None,
               save: bool = True) -> VerifyReport:
    """Run the AMP payload with the env's python; save the report in <prefix>/.envkit/verify.json."""
    env_prefix: Path | None = None
    if python:
        exe = resolve_python(python)
    else:
        env_prefix = find_prefix(name, prefix)
        exe = str(python_of(env_prefix))
    machine = detect().to_json()
    options = {"quick": quick, "device": device, "all_gpus": all_gpus}
    report = run_payload(exe, options, machine, prefix=env_prefix, timeout=timeout)
    if env_prefix is not None and save:
        write_verify(env_prefix, report_text(report))
    if report_file is not None:
        save_report(report, report_file)
    return report

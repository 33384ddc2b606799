"""verify: run the bundled AMP smoke test with a target environment's own python.

Owns: the payload runner (runner), the report model (report), the in-env payloads (payload/, which
alone import torch), verify_env, the one entry point every verb and engine uses, and verify_model
(`verify --model`: its rules in amp_compare, pure and tested without torch); the HTML report (html).
May import: detect/, prefix/ and the ground floor.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from envkit.detect import detect
from envkit.errors import ModelCodeError, UsageError
from envkit.prefix.locations import find_prefix
from envkit.prefix.records import write_verify
from envkit.verify.report import VerifyReport, build_model_report
from envkit.verify.runner import MODEL_PAYLOAD, python_of, report_text, resolve_python, run_payload, save_report

VERIFY_TIMEOUT = 300.0
MODEL_STEPS = 200  # about 30 s on a GPU for the examples' GPU sizes; the fp32 run also stops at the budget
MODEL_TIME_BUDGET_S = 10.0  # fp32's share; fp16 and bf16 then run the same number of steps
MAX_STEPS = 100_000
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _interpreter(name: str | None, prefix: str | None, python: str | None) -> tuple[str, Path | None]:
    """The python that runs a payload, and the env it belongs to (None for a bare --python)."""
    if python:
        return resolve_python(python), None
    env_prefix = find_prefix(name, prefix)
    return str(python_of(env_prefix)), env_prefix


def verify_env(*, name: str | None = None, prefix: str | None = None, python: str | None = None,
               quick: bool = False, device: int | None = None, all_gpus: bool = False,
               timeout: float = VERIFY_TIMEOUT, report_file: Path | None = None,
               save: bool = True) -> VerifyReport:
    """Run the AMP payload with the env's python; save the report in <prefix>/.envkit/verify.json."""
    exe, env_prefix = _interpreter(name, prefix, python)
    machine = detect().to_json()
    options = {"quick": quick, "device": device, "all_gpus": all_gpus}
    report = run_payload(exe, options, machine, prefix=env_prefix, timeout=timeout)
    if env_prefix is not None and save:
        write_verify(env_prefix, report_text(report))
    if report_file is not None:
        save_report(report, report_file)
    return report


def model_spec(spec: str, cwd: Path | None = None) -> str:
    """FILE.py:FUNC (the file made absolute; it must exist) or MODULE:FUNC (dotted names only)."""
    target, sep, func = spec.rpartition(":")
    example = "pass e.g. --model examples/lstm_lm.py:small or --model mypkg.models:make"
    if not sep or not target or not func.isidentifier():
        raise UsageError(f"--model {spec!r} is not FILE.py:FUNC or MODULE:FUNC", example)
    if target.endswith(".py"):
        path = Path(target) if os.path.isabs(target) else (cwd or Path.cwd()) / target
        if not path.is_file():
            raise UsageError(f"--model {spec!r}: {path} is not a file", example)
        return f"{path.resolve()}:{func}"
    if not _MODULE_RE.match(target):
        raise UsageError(f"--model {spec!r}: {target!r} is neither a .py file nor a dotted module name", example)
    return spec


def check_steps(steps: int) -> int:
    if not 4 <= steps <= MAX_STEPS:
        raise UsageError(f"--steps {steps} is not between 4 and {MAX_STEPS}", "pass e.g. --steps 200")
    return steps


def verify_model(model: str, *, name: str | None = None, prefix: str | None = None, python: str | None = None,
                 steps: int = MODEL_STEPS, device: int | None = None, timeout: float = VERIFY_TIMEOUT,
                 report_file: Path | None = None, time_budget_s: float = MODEL_TIME_BUDGET_S,
                 max_batch: bool = False) -> VerifyReport:
    """fp32 vs fp16 + GradScaler vs bf16 on the user's own model, run by the env's python (torch only there)."""
    spec = model_spec(model)
    check_steps(steps)
    exe, env_prefix = _interpreter(name, prefix, python)
    machine = detect().to_json()
    options = {"model": spec, "steps": steps, "device": device, "path": [str(Path.cwd())],
               "time_budget_s": time_budget_s, "max_batch": max_batch}
    report = run_payload(exe, options, machine, prefix=env_prefix, timeout=timeout, payload_file=MODEL_PAYLOAD,
                         build=build_model_report)
    error = report.data.get("user_error")
    if error:
        summary = f"your model code failed: {error['phase']} raised {error['type']}: {error['message']}"
        first = summary.splitlines()[0][:400]
        raise ModelCodeError(first, f"fix the error in your code (the traceback above is yours), then run "
                                    f"envkit verify --model {model} again",
                             details="\n".join(error.get("traceback", [])))
    if report_file is not None:
        save_report(report, report_file)
    return report

"""Pure verdict logic: payload JSON -> PASS / FAIL / SKIPPED, diagnosis and the saved report."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from envkit import __version__
from envkit.errors import ExitCode

PASS, FAIL, SKIPPED = "PASS", "FAIL", "SKIPPED"
GPU_CHECKS = {"architecture", "autocast", "grad_scaler", "training", "speed", "memory", "matmul_tflops",
              "multi_gpu", "fp8"}


@dataclass(frozen=True)
class VerifyReport:
    outcome: str
    checks: tuple[dict[str, Any], ...]
    summary: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> ExitCode:
        return {PASS: ExitCode.OK, FAIL: ExitCode.VERIFY_FAILED, SKIPPED: ExitCode.VERIFY_SKIPPED}[self.outcome]

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "exit_code": int(self.exit_code), "summary": self.summary,
                **{k: v for k, v in self.data.items() if k not in ("outcome", "summary")}}


def verdict(payload: dict[str, Any]) -> tuple[str, str]:
    """FAIL if any check failed; SKIPPED if no GPU check ran; PASS otherwise (warnings allowed)."""
    checks = payload.get("checks") or []
    failed = [c for c in checks if c.get("status") == "fail"]
    if failed:
        first = failed[0]
        more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        return FAIL, f"{first['name']}: {first['explanation']}{more}"
    ran_gpu = [c for c in checks if c.get("name") in GPU_CHECKS and c.get("status") in ("pass", "warn")]
    if not ran_gpu:
        driver = next((c for c in checks if c.get("name") == "driver"), None)
        why = str(driver["explanation"]) if driver else "no usable GPU"
        why = why.removesuffix(": no GPU check ran")  # the sentence after it says so once
        # the one place SKIPPED is explained (human output prints it once, -q and --json alike)
        return SKIPPED, (f"{why}. SKIPPED is not a PASS: no check ran on a GPU, so nothing proves the env trains "
                         "on one; run verify on a machine with a visible NVIDIA GPU")
    warned = [c for c in checks if c.get("status") == "warn"]
    gpus = ", ".join(g.get("name", "?") for g in payload.get("gpus") or [])
    tail = f"; {len(warned)} warning(s): " + "; ".join(c["name"] for c in warned) if warned else ""
    return PASS, f"AMP works on {gpus or 'the GPU'} with torch {payload.get('torch')}{tail}"


def build_report(payload: dict[str, Any], machine: dict[str, Any] | None, python: str,
                 prefix: str | None) -> VerifyReport:
    outcome, summary = verdict(payload)
    data = {
        "time": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "envkit_version": __version__,
        "python": python,
        "prefix": prefix,
        "machine": machine,
        **payload,
    }
    return VerifyReport(outcome, tuple(payload.get("checks") or ()), summary, data)


def failure_report(name: str, explanation: str, machine: dict[str, Any] | None, python: str,
                   prefix: str | None, values: dict[str, Any] | None = None) -> VerifyReport:
    """A report for a payload that could not report itself (timeout, crash, garbage output)."""
    payload = {"checks": [{"name": name, "status": "fail", "explanation": explanation,
                           "values": values or {}, "duration_s": 0.0}]}
    return build_report(payload, machine, python, prefix)


def build_model_report(payload: dict[str, Any], machine: dict[str, Any] | None, python: str,
                       prefix: str | None) -> VerifyReport:
    """`verify --model`: the payload's own checks, then the judgement of amp_compare (its outcome rule)."""
    from envkit.verify.amp_compare import analyse, checks_of

    base = build_report(payload, machine, python, prefix)
    failed = [c for c in base.checks if c.get("status") == "fail"]
    if failed or "precisions" not in payload:
        outcome, summary = verdict(payload) if failed else (FAIL, "the payload reported no training run")
        return VerifyReport(outcome if failed else FAIL, base.checks, summary, base.data)
    analysis = analyse(payload)
    checks = (*base.checks, *checks_of(analysis, payload["precisions"].get("fp32") or {}))
    data = dict(base.data, analysis=analysis, checks=list(checks))
    return VerifyReport(analysis["outcome"], checks, analysis["summary"], data)

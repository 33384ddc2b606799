"""verify's verdict logic on recorded payload outputs: PASS, FAIL and SKIPPED, warnings, the H200 bars."""

from __future__ import annotations

import copy
import json

from envkit.verify.report import FAIL, PASS, SKIPPED, verdict
from helpers import FIXTURES


REC = FIXTURES / "verify"


def load(name: str) -> dict:
    data = json.loads((REC / name).read_text())
    return data


def test_recorded_h200_pass() -> None:
    outcome, summary = verdict(load("pass-h200.json"))
    assert outcome == PASS and "NVIDIA H200" in summary


def test_recorded_cpu_build_on_a_gpu_machine_fails() -> None:
    outcome, summary = verdict(load("fail-cpu-build.json"))
    assert outcome == FAIL and "CPU build of PyTorch installed" in summary


def test_a_failed_gpu_check_fails_the_run() -> None:
    data = load("pass-h200.json")
    broken = copy.deepcopy(data)
    arch = next(c for c in broken["checks"] if c["name"] == "architecture")
    arch.update(status="fail", explanation="sm_90 is not in this build (sm_50 sm_60)")
    assert verdict(broken) == (FAIL, "architecture: sm_90 is not in this build (sm_50 sm_60)")


def test_warnings_do_not_fail_but_are_named() -> None:
    data = copy.deepcopy(load("pass-h200.json"))
    next(c for c in data["checks"] if c["name"] == "speed")["status"] = "warn"
    outcome, summary = verdict(data)
    assert outcome == PASS and "speed" in summary


def test_skipped_is_never_pass() -> None:
    data = {"checks": [{"name": "import", "status": "pass", "explanation": ""},
                       {"name": "driver", "status": "skip", "explanation": "no NVIDIA driver"}]}
    outcome, summary = verdict(data)
    assert outcome == SKIPPED and "not a PASS" in summary


def test_h200_evidence_meets_the_bars() -> None:
    """The committed H200 run: >= 2x AMP speed-up on the Tensor-Core workload, memory ratio <= 0.8."""
    checks = {c["name"]: c for c in load("pass-h200.json")["checks"]}
    assert checks["speed"]["values"]["speedup"] >= 2.0
    assert checks["memory"]["values"]["ratio"] <= 0.8
    assert sum(c["duration_s"] for c in checks.values()) <= 20

"""verify's runner: the payload run by real and stand-in pythons (timeouts, crashes, the environment it gets),
and `envkit verify` on a prefix or an unknown env."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from helpers import run_cli
from envkit.verify.report import FAIL
from envkit.verify.runner import run_payload


def test_real_payload_on_cpu_torch_is_skipped(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("torch")
    report = tmp_path / "r.json"
    code, out, _ = run_cli(capsys, "verify", "--python", sys.executable, "--report", str(report))
    assert code == 4
    outcome_lines = [line for line in out.splitlines() if line.startswith(("PASS", "FAIL", "SKIPPED"))]
    assert outcome_lines and outcome_lines[0].startswith("SKIPPED:")
    assert "SKIPPED is not a PASS" in out and out.count("SKIPPED") == 2  # the outcome line says it once
    data = json.loads(report.read_text())
    assert data["outcome"] == "SKIPPED" and data["exit_code"] == 4
    names = {c["name"]: c["status"] for c in data["checks"]}
    assert names["import"] == "pass" and names["cpu_autocast"] == "pass" and names["driver"] == "skip"
    assert data["envkit_version"] and data["time"]
    assert data["warnings"] == []  # the payload emits no deprecation warnings of its own


def test_cpu_torch_with_a_driver_present_fails(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    machine = {"driver": {"version": "580.159.04", "cuda": "13.0", "source": "nvml"}, "gpus": []}
    report = run_payload(sys.executable, {"quick": True}, machine, timeout=120)
    assert report.outcome == FAIL and "CPU build of PyTorch installed" in report.summary


def stand_in(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_a_hang_is_killed_at_the_timeout_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    exe = stand_in(tmp_path, "hang", f"sleep 300 & echo $! > {pidfile}; wait")
    report = run_payload(exe, {}, None, timeout=1.5)
    assert report.outcome == FAIL and "timed out after 1.5 s" in report.summary
    child = int(pidfile.read_text())
    import time

    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the payload's child survived the timeout")


def test_a_segfault_is_a_fail_with_the_stderr_tail(tmp_path: Path) -> None:
    exe = stand_in(tmp_path, "crash", "echo 'Fatal Python error: Segmentation fault' >&2; kill -SEGV $$")
    report = run_payload(exe, {}, None, timeout=30)
    assert report.outcome == FAIL
    assert "signal 11" in report.summary and "Segmentation fault" in report.summary


def test_an_env_without_torch(tmp_path: Path) -> None:
    # the same interpreter with site-packages switched off: no torch importable
    exe = stand_in(tmp_path, "python", f'exec "{sys.executable}" -S "$@"')
    report = run_payload(exe, {}, None, timeout=60)
    assert report.outcome == FAIL
    assert "torch is not installed in this environment" in report.summary and "envkit create" in report.summary


def test_payload_does_not_see_envkits_pythonpath(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise SystemExit('leaked PYTHONPATH')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    exe = stand_in(tmp_path, "python", f'exec "{sys.executable}" -S "$@"')
    report = run_payload(exe, {}, None, timeout=60)
    assert "torch is not installed" in report.summary


def test_verify_by_prefix_saves_the_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    (prefix / "bin" / "python").chmod(0o755)
    code, out, _ = run_cli(capsys, "verify", "--prefix", str(prefix), "--quick")
    assert code == 3 and "FAIL" in out
    saved = json.loads((prefix / ".envkit" / "verify.json").read_text())
    assert saved["outcome"] == "FAIL" and saved["prefix"] == str(prefix)


def test_verify_unknown_env_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "verify", "nope")
    assert code == 1 and "no environment named 'nope'" in err and "envkit create nope" in err

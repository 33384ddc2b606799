"""verify cannot be fooled: stand-in interpreters that detach, flood, lie, crash after a PASS, or are not programs."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest

from helpers import FIXTURES, run_cli
from envkit.errors import UsageError, VerifyError
from envkit.verify.runner import MARKER, OUTPUT_CAP, check_timeout, run_payload

PASS_REPORT = json.dumps(json.loads((FIXTURES / "verify" / "pass-h200.json").read_text()))


def stand_in(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def report_then(tmp_path: Path, after: str) -> str:
    data = tmp_path / "report.json"
    data.write_text(PASS_REPORT)
    return stand_in(tmp_path, "python", f"printf '\\n{MARKER}\\n'; cat '{data}'; echo; {after}")


def test_a_genuine_pass_report_with_exit_0_passes(tmp_path: Path) -> None:
    report = run_payload(report_then(tmp_path, "exit 0"), {}, None, timeout=30)
    assert report.outcome == "PASS"


@pytest.mark.parametrize(("after", "said"), [
    ("kill -SEGV $$", "killed by signal 11"),
    ("exit 1", "exited with code 1"),
    ("kill -KILL $$", "killed by signal 9"),
])
def test_a_pass_report_followed_by_a_crash_is_not_pass(tmp_path: Path, after: str, said: str) -> None:
    report = run_payload(report_then(tmp_path, after), {}, None, timeout=30)
    assert report.outcome == "FAIL" and said in report.summary and "not trusted" in report.summary


@pytest.mark.parametrize(("printed", "why"), [
    ("{not json", "not valid JSON"),
    ("[]", "not an object"),
    ('{"checks": "all good"}', "no list of checks"),
    ('{"checks": []}', "no list of checks"),
    ('{"checks": [{"status": "fail"}]}', "lacks a name"),
    ('{"checks": [{"name": "x", "status": "PASSED", "explanation": ""}]}', "unknown status"),
    ('{"checks": [{"name": "x", "status": "pass", "explanation": "", "duration_s": "fast"}]}', "non-numeric"),
    ('{"checks": [{"name": "autocast", "status": "pass", "explanation": "", "device": "0"}]}', "non-integer device"),
    ('{"checks": [{"name": "autocast", "status": "pass", "explanation": ""}], "gpus": [1]}', "gpus"),
    ("[" * 100000, "not valid JSON"),
])
def test_a_malformed_report_is_a_one_line_fail(tmp_path: Path, printed: str, why: str) -> None:
    (tmp_path / "out.txt").write_text(f"\n{MARKER}\n{printed}\n")
    exe = stand_in(tmp_path, "python", f"cat '{tmp_path / 'out.txt'}'")
    report = run_payload(exe, {}, None, timeout=30)
    assert report.outcome == "FAIL" and why in report.summary and "\n" not in report.summary


def test_a_report_cut_off_mid_line_is_not_pass(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text(f"\n{MARKER}\n{PASS_REPORT}")  # no final newline: the write was cut
    exe = stand_in(tmp_path, "python", f"cat '{tmp_path / 'out.txt'}'")
    report = run_payload(exe, {}, None, timeout=30)
    assert report.outcome == "FAIL" and "cut off" in report.summary


def _gone(pid: int) -> bool:
    for _ in range(100):
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().split(") ", 1)[1].startswith("Z"):
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


def test_a_detached_grandchild_holding_stdout_does_not_defeat_the_timeout(tmp_path: Path) -> None:
    # the grandchild leaves the payload's session (setsid) and keeps the stdout pipe open for 60 s
    pidfile = tmp_path / "pid"
    exe = stand_in(tmp_path, "python", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' & sleep 60")
    start = time.monotonic()
    report = run_payload(exe, {}, None, timeout=1.5)
    assert time.monotonic() - start < 8
    assert report.outcome == "FAIL" and "timed out after 1.5 s" in report.summary
    assert _gone(int(pidfile.read_text())), "the detached grandchild still runs"


def test_a_payload_that_exits_while_a_grandchild_keeps_the_pipe_returns_promptly(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    exe = report_then(tmp_path, f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' & sleep 0.2; exit 0")
    start = time.monotonic()
    report = run_payload(exe, {}, None, timeout=120)
    assert time.monotonic() - start < 8 and report.outcome == "PASS"
    assert _gone(int(pidfile.read_text())), "the detached grandchild still runs"


def test_a_flood_is_capped_and_drained(tmp_path: Path) -> None:
    # 64 MiB on stdout and stderr, then a real report: envkit keeps at most the cap of each
    exe = stand_in(tmp_path, "python",
                   f"head -c 67108864 /dev/zero; head -c 67108864 /dev/zero >&2; printf '\\n{MARKER}\\n'; "
                   f"cat '{tmp_path / 'r.json'}'; echo")
    (tmp_path / "r.json").write_text(PASS_REPORT)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = run_payload(exe, {}, None, timeout=60)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert report.outcome == "PASS"
    assert report.data["note"].startswith(f"the payload wrote more than {OUTPUT_CAP >> 20} MiB")
    assert grown_mib < 200, grown_mib


def test_an_exec_format_error_is_a_one_line_error(tmp_path: Path) -> None:
    exe = tmp_path / "python"
    exe.write_bytes(b"\x7fELF\x02\x01\x01garbage" + b"\0" * 64)
    exe.chmod(0o755)
    with pytest.raises(VerifyError) as info:
        run_payload(str(exe), {}, None, timeout=30)
    assert "Exec format error" in info.value.message and "\n" not in info.value.message


def test_exec_format_error_through_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    exe = tmp_path / "python"
    exe.write_text("not a script\n")
    exe.chmod(0o755)
    code, _out, err = run_cli(capsys, "verify", "--python", str(exe))
    assert code == 1 and "Exec format error" in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e308", "0", "-5", "0.5", "abc"])
def test_bad_timeouts_are_usage_errors(capsys: pytest.CaptureFixture[str], value: str) -> None:
    code, _out, err = run_cli(capsys, "verify", "--python", sys.executable, "--timeout", value)
    assert code == 2 and "--timeout" in err and "Traceback" not in err


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e308, 0.0])
def test_run_payload_refuses_a_timeout_that_would_never_fire(value: float) -> None:
    with pytest.raises(UsageError):
        check_timeout(value)


def test_payload_runs_in_its_own_session(tmp_path: Path) -> None:
    exe = stand_in(tmp_path, "python", f"ps -o sid= -p $$ > '{tmp_path / 'sid'}'; exit 3")
    run_payload(exe, {}, None, timeout=30)
    assert int((tmp_path / "sid").read_text()) != os.getsid(0)

"""cli/output.sanitize: the one function every file-, record-, node- or child-supplied value passes
through before it reaches a terminal (issue 20: doctor and fleet detect let raw escapes through)."""

from __future__ import annotations

import json

import pytest

from envkit.cli import output

HOSTILE = [
    ("\x1b]52;c;ZWNobyBQV04=\x07", "OSC 52 clipboard write"),
    ("\x1b[2J\x1b[H", "clear screen"),
    ("\x1b[8mhidden\x1b[0m", "hidden text"),
    ("\x1b]0;title\x07", "window title"),
    ("\x9b2J", "C1 CSI"),
    ("\r", "carriage return overwrite"),
    ("\x08\x08", "backspace"),
    ("\u202eevil", "bidi override"),
    ("\x00", "NUL"),
    ("\x7f", "DEL"),
]


@pytest.mark.parametrize("payload,what", HOSTILE, ids=[w for _, w in HOSTILE])
def test_sanitize_leaves_no_control_character(payload: str, what: str) -> None:
    out = output.sanitize(f"env-{payload}-x")
    assert not any((ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F or 0x202A <= ord(c) <= 0x202E
                   for c in out), (what, out)
    # the escape is shown, not silently dropped: the user sees that something was there
    assert "\\" in out


def test_sanitize_keeps_ordinary_text() -> None:
    text = "pytorch 2.5.1 (cuda 12.4)\tok\nnext line — ünïcode 中文"
    assert output.sanitize(text) == text


def test_error_prints_sanitized(capsys: pytest.CaptureFixture[str]) -> None:
    output.error("bad record \x1b]52;c;AAAA\x07 in env", "run envkit doctor \x1b[2J")
    err = capsys.readouterr().err
    assert "\x1b]52" not in err and "\x1b[2J" not in err
    assert "\\x1b]52" in err


def test_json_needs_no_sanitize() -> None:
    assert "\x1b" not in output.dump_json({"name": "a\x1b[2Jb"})
    assert json.loads(output.dump_json({"name": "a\x1b[2Jb"}))["name"] == "a\x1b[2Jb"


def test_plain_progress_prints_bytes_rate_and_time_left_for_a_download(capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setattr(output._PlainProgress, "PLAIN_EVERY_S", 0.0)
    with output._PlainProgress() as progress:
        progress.download_total(8 * 2**20)
        progress.download_kept(2 * 2**20)  # resumed from an earlier run: done, but no speed
        for _ in range(3):
            time.sleep(0.06)
            progress.download_bytes(2**20)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("download ")]
    assert lines and lines[-1].startswith("download 5.0 MiB / 8.0 MiB, ")
    assert "MiB/s, " in lines[-1] and lines[-1].endswith(" left")


def test_model_verify_output_sanitizes_the_users_names(capsys: pytest.CaptureFixture[str]) -> None:
    """verify --model prints names from the user's model (module paths, classes): escapes stay visible."""
    from helpers import FIXTURES

    from envkit.verify.report import build_model_report

    data = json.loads((FIXTURES / "verify" / "model-tiny-eps-norm-cpu.json").read_text())
    for probe in data["probe"]["fp16"]:
        if probe["path"] == "norm":
            probe["class"] = "Norm\x1b]52;c;ZWNobyBQV04=\x07[bold]"
    data["device"] = "cuda"
    data["gpus"] = [{"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0"}]
    for rec in data["precisions"].values():
        if "losses" in rec:
            rec["peak_mem_mib"] = 1234.0
    output.print_model_verify(build_model_report(data, None, "/opt/env/bin/python", None))
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b]52;c;ZWNobyBQV04=\\x07[bold]" in out
    assert "PASS:" in out and "1234" in out and "NVIDIA H200" in out

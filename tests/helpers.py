"""Small helpers shared by the tests."""

from __future__ import annotations

import json
from typing import Any

import pytest


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the real entry point (error boundary included) and return (exit code, stdout, stderr)."""
    from envkit.cli import _run

    capsys.readouterr()
    code = _run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code, out, _err = run_cli(capsys, *args)
    return code, json.loads(out)

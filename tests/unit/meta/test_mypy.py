"""The package type-checks (architecture.md habit 10): mypy over the installed envkit sources."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def test_mypy_is_clean() -> None:
    pytest.importorskip("mypy")
    config = Path(__file__).resolve().parents[3] / "pyproject.toml"
    # -p envkit, run from the checkout: the package sources (the same files scripts/test installs)
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config), "-p", "envkit"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]

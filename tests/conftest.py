"""Shared fixtures: a scrubbed environment, and fakes of the outside world at its seams only."""

from __future__ import annotations

import atexit
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# py-rattler 0.28 can crash at interpreter exit after async work (rattler-notes.md §4 and §9.1):
# a short sleep at exit lets its runtime threads settle (measured 0/50 crashes with it).
atexit.register(time.sleep, 0.1)

from helpers import FIXTURES, FakeNVML


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No ENVKIT_*, CONDA_*, CUDA_VISIBLE_DEVICES or real user dirs leak into a test."""
    import os

    for name in list(os.environ):
        if name.startswith(("ENVKIT_", "CONDA_", "MAMBA_", "PIXI_", "RATTLER_")) or name in (
                "CUDA_VISIBLE_DEVICES", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PYTHONPATH"):
            monkeypatch.delenv(name, raising=False)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    # selection reads no channel catalogue unless a test opts in (monkeypatch.delenv): golden files and
    # table-driven cases stay tied to the static data, and nothing waits on a network that is not there
    monkeypatch.setenv("ENVKIT_OFFLINE", "1")


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNVML]:
    """Replace the `pynvml` module nvidia-ml-py provides, and nothing else."""
    fake = FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", fake.module())
    yield fake  # the module's functions read `fake` at call time: tests may mutate it first



@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML library missing, as on a machine without an NVIDIA driver."""
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(init_error=12).module())


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Put a stand-in `nvidia-smi` on PATH that prints recorded real outputs."""

    def install(query_file: str | None, header_file: str | None, rc: int = 0) -> Path:
        bindir = tmp_path / "smi-bin"
        bindir.mkdir(exist_ok=True)
        script = bindir / "nvidia-smi"
        query = (FIXTURES / "nvidia" / query_file).read_text() if query_file else ""
        header = (FIXTURES / "nvidia" / header_file).read_text() if header_file else ""
        (bindir / "query.txt").write_text(query)
        (bindir / "header.txt").write_text(header)
        script.write_text(
            "#!/bin/sh\n"
            f"if [ $# -gt 0 ]; then cat '{bindir}/query.txt'; else cat '{bindir}/header.txt'; fi\n"
            f"exit {rc}\n")
        script.chmod(0o755)
        import os

        monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
        return script

    return install

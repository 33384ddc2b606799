"""The offline test bed: a real local conda channel, a loopback HTTP server, a local pip index."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.channel import TestBed, build_testbed, test_venv_site
from testbed.pipindex import build_pip_indexes
from testbed.server import ChannelServer


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> TestBed:
    root = tmp_path_factory.mktemp("testbed")
    bed = build_testbed(root, host_site=test_venv_site())
    build_pip_indexes(root)
    return bed


@pytest.fixture
def server(testbed: TestBed) -> Iterator[ChannelServer]:
    with ChannelServer(testbed.root) as srv:
        yield srv


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Envs, caches and pip config of this test only; pip never looks at the machine's config."""
    home = tmp_path / "envkit-home"
    monkeypatch.setenv("ENVKIT_HOME", str(home))
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("PATH", os.environ["PATH"])  # restored after tests that add stand-ins
    return home


def env_dir(home: Path, name: str) -> Path:
    return home / "envs" / name

"""A full disk is not a permissions problem and a read-only cache is not the network: the hint names
the real cause. Root-only (a private mount namespace with a read-only bind mount and a tiny tmpfs);
skipped with the reason elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.channel import PY, TestBed

needs_root_mounts = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mount") is None
    or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0,
    reason="needs root and unshare -m (a private mount namespace) for a read-only mount and a tiny tmpfs")


def envkit_in_namespace(setup: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = f'set -e; {setup}; exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-m", "envkit", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def base_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVKIT_", "CONDA_"))}
    env.update(HOME=str(tmp_path), ENVKIT_HOME=str(tmp_path / "home"))
    return env


@needs_root_mounts
def test_read_only_cache_says_so(testbed: TestBed, tmp_path: Path) -> None:
    cache = tmp_path / "ro-cache"
    cache.mkdir()
    env = dict(base_env(tmp_path), ENVKIT_CACHE_DIR=str(cache))
    done = envkit_in_namespace(f"mount -o bind,ro '{cache}' '{cache}'",
                               ["create", "ro", "--spec", "minimal", "--cuda", "13.0", "--python", PY, "--channel",
                                testbed.url("conda-forge"), "--no-verify", "-q"], env)
    assert done.returncode == 1, done.stderr
    assert "read-only" in done.stderr and "ENVKIT_CACHE_DIR" in done.stderr
    assert "check the network" not in done.stderr and "Traceback" not in done.stderr


@needs_root_mounts
def test_full_disk_says_free_space(testbed: TestBed, tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    env = dict(base_env(tmp_path), ENVKIT_CACHE_DIR=str(small))
    done = envkit_in_namespace(f"mount -t tmpfs -o size=12k tmpfs '{small}'",
                               ["create", "full", "--spec", "minimal", "--cuda", "13.0", "--python", PY, "--channel",
                                testbed.url("conda-forge"), "--no-verify", "-q"], env)
    assert done.returncode == 1, done.stderr
    assert "free space" in done.stderr and "permission" not in done.stderr.lower()
    assert "Traceback" not in done.stderr

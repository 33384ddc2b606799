"""`envkit clean`: the caches and leftover staging, with sizes; never what a running install holds."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import run_cli
from testbed.channel import PY
from testbed.server import ChannelServer

from envkit.prefix import staging


def test_clean_lists_then_empties_the_cache_and_the_envs_keep_working(capsys: pytest.CaptureFixture[str],
                                                                      server: ChannelServer, isolated: Path,
                                                                      tmp_path: Path) -> None:
    code, _out, err = run_cli(capsys, "create", "dl", "--spec", "minimal", "--cuda", "13.0", "--python", PY,
                              "--mirror", server.url, "--no-verify")
    assert code == 0, err
    pkgs = tmp_path / "cache" / "pkgs"
    entries = sorted(p.name for p in pkgs.iterdir())
    assert any(n.startswith("pytorch-2.13.0") for n in entries)
    code, out, err = run_cli(capsys, "clean", "--dry-run", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["dry_run"] and {i["what"] for i in data["items"]} >= {"packages", "repodata"}
    assert all(i["size"] >= i["frees"] >= 0 for i in data["items"])
    # the env's files are hard links into the cache: only the entry's own info/ files are freed while the env lives
    torch_entry = next(i for i in data["items"] if Path(i["path"]).name.startswith("pytorch-2.13.0")
                       and not i["path"].endswith(".lock"))
    assert 0 < torch_entry["frees"] < torch_entry["size"]
    assert sorted(p.name for p in pkgs.iterdir()) == entries  # a dry run touches nothing
    code, out, err = run_cli(capsys, "clean")
    assert code == 0 and "freed" in out, err
    assert [p.name for p in pkgs.iterdir()] == [".cache.lock"]
    prefix = isolated / "envs" / "dl"
    done = subprocess.run([str(prefix / "bin" / "python"), "-c", "import pytorch_standin"], capture_output=True)
    assert done.returncode == 0, done.stderr
    code, _out, err = run_cli(capsys, "install", "dl", "tqdm")  # the cache fills again on demand
    assert code == 0, err


def test_clean_leaves_what_a_running_install_holds(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                   isolated: Path, tmp_path: Path) -> None:
    code, _out, err = run_cli(capsys, "create", "dl", "--spec", "minimal", "--cuda", "13.0", "--python", PY,
                              "--mirror", server.url, "--no-verify")
    assert code == 0, err
    pkgs = tmp_path / "cache" / "pkgs"
    before = sorted(p.name for p in pkgs.iterdir())
    envs = isolated / "envs"
    running = staging.hold(staging.STAGING, envs / "other", mkdir=True)  # a live install's staging, lock held
    (running.folder / "file").write_text("being built")
    lock = os.open(pkgs / ".cache.lock", os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_SH)  # what rattler holds while it installs
    try:
        code, out, err = run_cli(capsys, "clean")
        assert code == 0, err
        assert "an install is using the package cache" in out and sorted(p.name for p in pkgs.iterdir()) == before
        assert running.folder.is_dir()
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    running.abandon()  # its owner is gone now: the marker stays, the lock is free
    code, out, err = run_cli(capsys, "clean")
    assert code == 0, err
    assert not running.folder.exists() and [p.name for p in pkgs.iterdir()] == [".cache.lock"]
    assert sorted(p.name for p in envs.iterdir()) == ["dl"]

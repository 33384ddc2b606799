"""`envkit create` over slow, dropping and lagging mirrors: a real channel (one 3 MiB archive of random
bytes and a small one) behind the loopback server of testbed/server.py, which drops connections after N
bytes, rate-limits, answers 404 and counts the bytes it serves. The archive resumes with Range instead of
starting over, a Ctrl-C at 60% leaves a part that the next run completes, a 404 for a listed package
names the mirror as out of sync, and the env's records keep the canonical channel."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import run_cli
from testbed.channel import Pkg, build, index
from testbed.server import ChannelServer, TokenBucket

BIG = "big-data-1.0-0.conda"
SIZE_FILE = 3 * 1024 * 1024


@pytest.fixture(scope="module")
def mirror_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mirror")
    channel = root / "conda-forge"
    build(Pkg("big-data", "1.0", "0", files={"share/big/blob.bin": os.urandom(SIZE_FILE)}), channel)
    build(Pkg("small-data", "1.0", "0", files={"share/small/a.txt": b"a\n" * 100}, fmt=".tar.bz2"), channel)
    index(channel)
    return root


@pytest.fixture
def mirror(mirror_root: Path) -> Iterator[ChannelServer]:
    with ChannelServer(mirror_root) as srv:
        yield srv


@pytest.fixture
def envfile(tmp_path: Path) -> str:
    path = tmp_path / "env.yml"
    path.write_text("name: x\nchannels:\n  - conda-forge\ndependencies:\n  - big-data\n  - small-data\n")
    return str(path)


def big_size(root: Path) -> int:
    return (root / "conda-forge" / "linux-64" / BIG).stat().st_size


def create_argv(envfile: str, name: str, mirror: ChannelServer) -> list[str]:
    return ["create", name, "--file", envfile, "--mirror", mirror.url, "--no-adapt", "--no-verify", "--cuda", "cpu"]


def test_a_connection_dropped_at_half_resumes_and_fetches_the_archive_once(
        capsys: pytest.CaptureFixture[str], mirror: ChannelServer, mirror_root: Path, envfile: str,
        isolated: Path) -> None:
    size = big_size(mirror_root)
    mirror.state.drop_after[BIG] = size // 2
    mirror.state.drop_budget[BIG] = 1
    code, out, err = run_cli(capsys, *create_argv(envfile, "dropped", mirror))
    assert code == 0, err
    assert mirror.state.range_asked == [(f"/conda-forge/linux-64/{BIG}", f"bytes={size // 2}-")]
    assert mirror.served_bytes(BIG) == size  # resumed, not restarted (target: <= 1.15x)
    env = isolated / "envs" / "dropped"
    assert (env / "share" / "big" / "blob.bin").stat().st_size == SIZE_FILE
    record = json.loads(next((env / "conda-meta").glob("big-data-*.json")).read_text())
    assert record["url"] == f"https://conda.anaconda.org/conda-forge/linux-64/{BIG}"  # the canonical channel
    downloads = isolated.parent / "cache" / "downloads"
    assert not [p for p in downloads.iterdir() if not p.name.endswith(".lock")]  # archive gone once unpacked
    code, _out, err = run_cli(capsys, *create_argv(envfile, "again", mirror))  # the cache serves it now
    assert code == 0, err and mirror.served_bytes(BIG) == size


def test_a_mirror_that_lags_its_own_index_is_named_out_of_sync(
        capsys: pytest.CaptureFixture[str], mirror: ChannelServer, envfile: str, isolated: Path) -> None:
    mirror.state.faults[BIG] = "404"
    code, _out, err = run_cli(capsys, *create_argv(envfile, "lagging", mirror))
    assert code == 1
    lines = [line for line in err.splitlines() if line.strip()]
    error = next(line for line in lines if line.startswith("error: "))
    fix = next(line for line in lines if line.startswith("fix: "))
    assert f"the mirror {mirror.url}/conda-forge is out of sync with https://conda.anaconda.org/conda-forge" in error
    assert BIG in error and "404" in error
    assert "again in a while" in fix and "another mirror" in fix
    assert not (isolated / "envs" / "lagging").exists()


def test_ctrl_c_at_60_percent_keeps_the_part_and_the_rerun_fetches_only_the_rest(
        capsys: pytest.CaptureFixture[str], mirror: ChannelServer, mirror_root: Path, envfile: str,
        isolated: Path) -> None:
    size = big_size(mirror_root)
    mirror.state.bucket = TokenBucket(1_500_000)  # ~2 s for the archive: time to interrupt it
    proc = subprocess.Popen([sys.executable, "-m", "envkit", *create_argv(envfile, "stopped", mirror)],
                            env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while mirror.served_bytes(BIG) < size * 6 // 10 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, err
    part = isolated.parent / "cache" / "downloads" / (BIG + ".part")
    assert part.is_file(), (err, sorted(p.name for p in part.parent.iterdir()))
    kept = part.stat().st_size
    assert kept >= size // 2, kept
    assert not (isolated / "envs" / "stopped").exists()
    mirror.state.bucket = None
    before = mirror.served_bytes(BIG)
    code, out, err = run_cli(capsys, *create_argv(envfile, "stopped", mirror))
    assert code == 0, err
    again = mirror.served_bytes(BIG) - before
    assert again == size - kept and again <= 0.6 * size  # the rest only
    assert "resumed 1 download(s)" in out + err
    assert not part.exists()

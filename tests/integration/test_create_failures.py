"""How a create fails and recovers: rattler's temp folders left in the package cache by a killed create
are swept by the next one, and an engine error is one line (its root cause) plus the fix, -v showing the
whole chain. Real local channel and loopback server throughout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import run_cli
from testbed.channel import PY, TestBed
from testbed.server import ChannelServer

GPU = ["--cuda", "13.0"]


def create(capsys: pytest.CaptureFixture[str], name: str, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "create", name, "--spec", "minimal", *GPU, "--python", PY, *args)


# -- rattler's extraction temp folders left by a kill are swept -------------------------------
def test_a_kill_mid_extract_leaves_nothing_after_the_next_create(capsys: pytest.CaptureFixture[str],
                                                                 testbed: TestBed, tmp_path: Path) -> None:
    from envkit.engines.cache_sweep import leftover_temps

    pkgs = tmp_path / "cache" / "pkgs"  # ENVKIT_CACHE_DIR of the `isolated` fixture
    # a file:// mirror: rattler extracts those archives itself (http(s) ones are unpacked by envkit's fetch,
    # whose leftovers tests/integration/test_downloads.py covers)
    mirror = testbed.root.as_uri()
    argv = [sys.executable, "-m", "envkit", "create", "victim", "--spec", "minimal", *GPU, "--python", PY,
            "--mirror", mirror, "--no-verify"]
    left: list[Path] = []
    tries = 12  # extraction takes a fraction of a second and a loaded machine can step over it: catch it mid-way
    for _attempt in range(tries):
        shutil.rmtree(pkgs, ignore_errors=True)
        proc = subprocess.Popen(argv, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and not leftover_temps(pkgs):
            time.sleep(0.002)
        proc.kill()
        proc.wait()
        left = leftover_temps(pkgs)
        if left:
            break
    assert left, f"no create was caught mid-extract in {tries} tries"
    (pkgs / "user-notes").mkdir()  # not rattler's: stays
    code, out, err = create(capsys, "next", "--mirror", mirror, "--no-verify")
    assert code == 0, err
    assert leftover_temps(pkgs) == [] and not any(p.exists() for p in left)
    assert "unfinished package extraction" in out + err, out + err and (pkgs / "user-notes").is_dir()
    assert (tmp_path / "envkit-home" / "envs" / "next" / "conda-meta" / "history").is_file()


# -- engine errors are one line (root cause) plus the fix; -v shows the whole chain -------------
def closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def env_file(tmp_path: Path, *deps: str) -> str:
    path = tmp_path / "env.yml"
    path.write_text("name: x\nchannels:\n  - conda-forge\ndependencies:\n" + "".join(f"  - {d}\n" for d in deps))
    return str(path)


def one_error_one_fix(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    fixes = [i for i, line in enumerate(lines) if line.startswith("fix: ")]
    assert len(errors) == 1 and len(fixes) == 1 and fixes[0] == errors[0] + 1, err
    assert lines[fixes[0]] == lines[-1], err  # nothing after the fix
    assert "Caused by" not in err and "└─" not in err and "Traceback" not in err, err
    return lines[errors[0]]


def test_missing_package_is_one_line(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                     tmp_path: Path) -> None:
    code, _out, err = run_cli(capsys, "create", "m", "--file", env_file(tmp_path, f"python={PY}", "no-such-pkg"),
                              "--mirror", server.url, "--no-verify", "--python", PY)
    assert code == 1
    assert "no-such-pkg" in one_error_one_fix(err)


def test_unsolvable_pin_is_one_line_with_its_root_cause(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                        tmp_path: Path) -> None:
    code, _out, err = run_cli(capsys, "create", "p", "--file",
                              env_file(tmp_path, f"python={PY}", "pytorch=2.13", "torchvision=0.20.1"),
                              "--mirror", server.url, "--no-verify", "--no-adapt", "--python", PY)
    assert code == 1
    line = one_error_one_fix(err)
    assert "torchvision 0.20.1" in line and "pytorch 2.5" in line, line  # the tree, flattened


def test_unreachable_channel_is_one_line_redacted_and_v_shows_the_chain(tmp_path: Path) -> None:
    mirror = f"http://envkit:S3cr3tPassw0rd@127.0.0.1:{closed_port()}/"
    argv = ["create", "u", "--spec", "minimal", *GPU, "--python", PY, "--mirror", mirror, "--no-verify"]
    done = subprocess.run([sys.executable, "-m", "envkit", *argv], env=dict(os.environ), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    line = one_error_one_fix(done.stderr)
    assert "Connection refused" in line and "S3cr3tPassw0rd" not in done.stdout + done.stderr, line
    fix = done.stderr.split("\nfix: ", 1)[1]  # any mirror URL, the three ways to set it, and the offline route
    assert "custom mirror http://127.0.0.1:" in fix and "--mirror https://your.mirror/conda" in fix, fix
    config = Path(os.environ["XDG_CONFIG_HOME"], "envkit", "config.yaml")
    assert "ENVKIT_MIRROR=URL" in fix and f"'mirror: URL' in {config}" in fix, fix
    assert "`envkit bundle NAME -o DIR`" in fix and "`envkit create NAME --bundle DIR`" in fix, fix
    verbose = subprocess.run([sys.executable, "-m", "envkit", "-v", *argv], env=dict(os.environ),
                             capture_output=True, text=True, timeout=120)
    assert verbose.returncode == 1
    assert "Caused by" in verbose.stderr and "tcp connect error" in verbose.stderr, verbose.stderr
    assert "S3cr3tPassw0rd" not in verbose.stdout + verbose.stderr
    assert len([x for x in verbose.stderr.splitlines() if x.startswith("error: ")]) == 1


# -- SIGINT, SIGTERM and SIGKILL during create, create --lock, create --bundle and bundle ------------
@pytest.mark.parametrize("verbs", ["create,create-lock", "create-bundle,bundle"])
def test_kills_during_every_staging_verb_leave_nothing_after_the_next_command(verbs: str) -> None:
    """scripts/torture.py's kills, one of each signal per verb (the full 30-per-signal run is the script's):
    SIGINT/SIGTERM remove their staging before printing and never claim a clean slate falsely; whatever a
    SIGKILL leaves, the next command of that kind sweeps."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "torture.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVKIT_", "CONDA_"))}
    done = subprocess.run([sys.executable, str(script), "--verbs", verbs, "--kills", "1", "--kills-only",
                           "--seed", "7"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for line in ("staging left after next cmd", "false 'nothing was left behind'",
                 "staging left unnamed by a handled signal", "envs lost", "tracebacks"):
        row = next(x for x in done.stdout.splitlines() if x.startswith(line))
        assert row.split()[len(line.split())] == "0", row
    for verb in verbs.split(","):
        assert f"{verb} SIGKILL" in done.stdout and f"{verb} SIGTERM" in done.stdout, done.stdout

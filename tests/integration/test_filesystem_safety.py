"""envkit deletes only what it made and never loses or clobbers an env; its writes keep what they replace.

Each test is one example from issue 9 ("Deletes what it did not make", "Loses or clobbers an env"),
run against the local channel and the loopback server. Root-only cases run in a private mount
namespace with a throwaway /dev and skip with the reason elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers import FIXTURES, run_cli
from testbed.channel import PY, TestBed
from testbed.server import ChannelServer

GPU = ["--cuda", "13.0"]
TORCH = "pytorch-2.13.0-cuda130_generic_py" + PY.replace(".", "") + "_h0_200.conda"


def create(capsys: pytest.CaptureFixture[str], name: str, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "create", name, "--spec", "minimal", *GPU, "--python", PY, *args)


def envkit(*args: str, cwd: Path | None = None, **popen: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "envkit", *args], env=dict(os.environ), cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)  # type: ignore[call-overload]


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def conda_made(root: Path, name: str) -> Path:
    """An env as conda makes it (records + history, no envkit marker)."""
    prefix = root / name
    shutil.copytree(FIXTURES / "conda_env", prefix)
    (prefix / "bin").mkdir(exist_ok=True)
    (prefix / "precious.txt").write_text("user data")
    return prefix


def miniconda_root(tmp_path: Path) -> Path:
    root = tmp_path / "miniconda3"
    conda_made(tmp_path, "miniconda3")
    for sub in ("envs", "pkgs", "condabin"):
        (root / sub).mkdir()
    (root / "bin" / "conda").write_text("#!/bin/sh\n")
    (root / "bin" / "conda").chmod(0o755)
    conda_made(root / "envs", "work")
    return root


# -- Deletes what it did not make --------------------------------------------------------------
def test_remove_refuses_a_conda_root_by_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = miniconda_root(tmp_path)
    for flags in ((), ("--not-envkit",)):
        code, _out, err = run_cli(capsys, "remove", str(root), "--yes", *flags)
        assert code == 1 and "conda installation root" in err and "fix:" in err
    assert (root / "envs" / "work" / "precious.txt").read_text() == "user data"


def test_remove_refuses_the_current_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    env = conda_made(tmp_path, "here")
    (env / "sub").mkdir()
    for cwd, arg in ((env, "./"), (env, str(env)), (env / "sub", "../")):
        monkeypatch.chdir(cwd)
        code, _out, err = run_cli(capsys, "remove", arg, "--yes", "--not-envkit")
        assert code == 1 and "current directory" in err
    assert (env / "precious.txt").exists()


def test_remove_refuses_home_and_non_envs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    shutil.copytree(FIXTURES / "conda_env" / "conda-meta", home / "conda-meta")
    code, _out, err = run_cli(capsys, "remove", str(home), "--yes", "--not-envkit")
    assert code == 1 and "home folder" in err and (home / "conda-meta").is_dir()
    plain = tmp_path / "plain"
    (plain / "conda-meta").mkdir(parents=True)  # an empty conda-meta is not an env
    (plain / "data.csv").write_text("1,2")
    code, _out, err = run_cli(capsys, "remove", str(plain), "--yes", "--not-envkit")
    assert code == 1 and "not a conda environment" in err and (plain / "data.csv").exists()


def test_a_conda_made_env_needs_a_separate_confirmation(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root = miniconda_root(tmp_path)
    monkeypatch.setenv("CONDA_EXE", str(root / "bin" / "conda"))
    code, out, _ = run_cli(capsys, "list", "--json")
    assert next(e for e in json.loads(out)["environments"] if e["name"] == "work")["by_envkit"] is False
    code, _out, err = run_cli(capsys, "remove", "work", "--yes")
    assert code == 1 and "cannot prove it made" in err and "--not-envkit" in err
    assert (root / "envs" / "work" / "precious.txt").exists()
    code, _out, err = run_cli(capsys, "remove", "work", "--yes", "--not-envkit")
    assert code == 0, err
    assert not (root / "envs" / "work").exists() and entries(root / "envs") == []
    assert (root / "precious.txt").exists()  # the root itself untouched


def test_force_does_not_replace_what_envkit_did_not_make(capsys: pytest.CaptureFixture[str],
                                                         server: ChannelServer, isolated: Path) -> None:
    envs = isolated / "envs"
    envs.mkdir(parents=True)
    foreign = conda_made(envs, "theirs")
    code, _out, err = create(capsys, "theirs", "--mirror", server.url, "--no-verify", "--force")
    assert code == 1 and "cannot prove it made" in err and (foreign / "precious.txt").exists()
    folder = envs / "notes"
    folder.mkdir()
    (folder / "thesis.tex").write_text("years of work")
    code, _out, err = create(capsys, "notes", "--mirror", server.url, "--no-verify", "--force", "--not-envkit")
    assert code == 1 and "not a conda environment" in err and (folder / "thesis.tex").exists()
    # a copy of an envkit env at another path is not proven either (its marker names the original)
    assert create(capsys, "orig", "--mirror", server.url, "--no-verify")[0] == 0
    shutil.copytree(envs / "orig", envs / "copy", symlinks=True)
    code, _out, err = run_cli(capsys, "remove", "copy", "--yes")
    assert code == 1 and "a copy or a moved env" in err
    code, _out, err = create(capsys, "theirs", "--mirror", server.url, "--no-verify", "--force", "--not-envkit")
    assert code == 0, err
    assert not (envs / "theirs" / "precious.txt").exists() and (envs / "theirs" / ".envkit" / "owner.json").is_file()
    assert entries(envs) == ["copy", "notes", "orig", "theirs"]


def test_list_and_remove_agree_on_who_made_an_env(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                  isolated: Path) -> None:
    envs = isolated / "envs"
    assert create(capsys, "orig", "--mirror", server.url, "--no-verify")[0] == 0
    shutil.copytree(envs / "orig", envs / "copy", symlinks=True)
    shutil.copytree(envs / "orig", envs / "old", symlinks=True)
    (envs / "old" / ".envkit" / "owner.json").unlink()  # as an envkit older than the marker left it
    code, out, err = run_cli(capsys, "list", "--json")
    assert code == 0, err
    rows = {e["name"]: e for e in json.loads(out)["environments"]}
    assert rows["orig"]["by_envkit"] is True and rows["orig"]["origin"] == "envkit"
    assert rows["orig"]["remove"] == "envkit remove orig"
    assert rows["copy"]["by_envkit"] is False and rows["copy"]["origin"] == "copied"
    assert "a copy or a moved env" in rows["copy"]["ownership"]
    assert rows["old"]["by_envkit"] is False and rows["old"]["origin"] == "older envkit"
    for name in ("copy", "old"):
        assert rows[name]["remove"] == f"envkit remove {name} --yes --not-envkit"
        code, _out, err = run_cli(capsys, "remove", name, "--yes")
        assert code == 1 and "--not-envkit" in err and (envs / name).is_dir()
    code, out, _err = run_cli(capsys, "list")
    flat = " ".join(out.split())
    assert "(copied)" in flat and "(older" in flat, out
    assert "copy: not proven envkit's" in flat and "remove it with: envkit remove copy --yes --not-envkit" in flat
    assert "old: not proven envkit's" in flat and "made by an older envkit" in flat
    assert "orig: not proven" not in flat
    code, _out, err = run_cli(capsys, *rows["copy"]["remove"].split()[1:])  # the printed command works
    assert code == 0, err
    assert not (envs / "copy").exists() and (envs / "orig" / "conda-meta").is_dir()
    code, _out, err = run_cli(capsys, "remove", "orig", "--yes")  # still proven after its copy went: no flag
    assert code == 0, err


# -- writes: -o / --report --------------------------------------------------------------------
@pytest.fixture
def made(capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path) -> Path:
    code, _out, err = create(capsys, "w", "--mirror", server.url, "--no-verify")
    assert code == 0, err
    return isolated / "envs" / "w"


def test_output_keeps_mode_and_writes_through_symlinks(capsys: pytest.CaptureFixture[str], made: Path,
                                                       tmp_path: Path) -> None:
    secret = tmp_path / "private.yml"
    secret.write_text("old")
    secret.chmod(0o600)
    assert run_cli(capsys, "export", "w", "-o", str(secret))[0] == 0
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and "dependencies" in secret.read_text()
    real = tmp_path / "real" / "env.yml"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "link.yml"
    link.symlink_to(real)
    assert run_cli(capsys, "export", "w", "-o", str(link))[0] == 0
    assert link.is_symlink() and os.readlink(link) == str(real) and "dependencies" in real.read_text()
    dangling = tmp_path / "dangling.yml"
    dangling.symlink_to(tmp_path / "real" / "new.yml")
    assert run_cli(capsys, "export", "w", "-o", str(dangling))[0] == 0
    assert dangling.is_symlink() and "dependencies" in (tmp_path / "real" / "new.yml").read_text()


def test_output_into_conda_meta_is_refused(capsys: pytest.CaptureFixture[str], made: Path) -> None:
    before = sorted(p.name for p in (made / "conda-meta").iterdir())
    code, _out, err = run_cli(capsys, "export", "w", "-o", str(made / "conda-meta" / "x.json"))
    assert code == 1 and "conda-meta" in err and "fix:" in err
    assert sorted(p.name for p in (made / "conda-meta").iterdir()) == before
    assert run_cli(capsys, "export", "w")[0] == 0  # the env still exports


def test_output_to_a_fifo_is_written_through(capsys: pytest.CaptureFixture[str], made: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, _out, err = run_cli(capsys, "export", "w", "-o", str(fifo))
    assert code == 1 and "no reader" in err and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    time.sleep(0.2)
    code, _out, err = run_cli(capsys, "export", "w", "-o", str(fifo))
    reader.join(10)
    assert code == 0, err
    assert b"dependencies" in got[0] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_output_to_a_socket_or_directory_is_refused(capsys: pytest.CaptureFixture[str], made: Path,
                                                    tmp_path: Path) -> None:
    path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    try:
        code, _out, err = run_cli(capsys, "export", "w", "-o", str(path))
        assert code == 1 and "socket" in err and stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        sock.close()
    from envkit.errors import EnvkitError
    from envkit.fsutil import atomic_write_text

    with pytest.raises(EnvkitError, match="is a directory"):
        atomic_write_text(tmp_path, "x")


def test_output_to_dev_stdout_prints(made: Path) -> None:
    proc = envkit("export", "w", "-o", "/dev/stdout")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "dependencies:" in out


DEVNS = r"""
set -e
mount -t tmpfs -o size=1m,mode=755 envkit-test-dev /dev
mknod -m 666 /dev/null c 1 3
mknod -m 666 /dev/full c 1 7
mknod -m 666 /dev/zero c 1 5
ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr
ln -s /proc/self/fd /dev/fd
set +e
"$PY" -m envkit export w -o /dev/full; echo "full rc=$?"
"$PY" -m envkit export w -o /dev/null; echo "null rc=$?"
"$PY" -m envkit render minimal --cuda 13.0 -o /dev/stdout | grep -c 'dependencies:' | sed 's/^/stdout lines=/'
"$PY" -m envkit verify --python /bin/false --report /dev/null >/dev/null 2>&1; echo "report rc=$?"
stat -c '%n %F %t,%T' /dev/full /dev/null
"""


def test_devices_are_written_through_never_replaced(made: Path, tmp_path: Path) -> None:
    """As root, in a private mount namespace with a throwaway /dev (the host's /dev is never at risk)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mknod") is None:
        pytest.skip("needs root, unshare and mknod (a private mount namespace with a throwaway /dev)")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a mount namespace here: {probe.stderr.decode().strip()}")
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", DEVNS],
                          env=dict(os.environ, PY=sys.executable), capture_output=True, text=True, timeout=120)
    out = done.stdout
    assert "full rc=1" in out, out + done.stderr
    assert "No space left on device" in done.stderr and "Traceback" not in done.stderr
    assert "null rc=0" in out and "stdout lines=1" in out
    assert "/dev/full character special file 1,7" in out and "/dev/null character special file 1,3" in out


# -- Loses or clobbers an env -------------------------------------------------------------------
def test_a_folder_appearing_at_the_target_during_create_is_never_touched(server: ChannelServer,
                                                                         isolated: Path) -> None:
    server.state.faults[TORCH] = "slow"
    server.state.slow_s = 2.0
    proc = envkit("create", "late", "--spec", "minimal", *GPU, "--mirror", server.url, "--no-verify", "--python", PY)
    deadline = time.time() + 30
    while time.time() < deadline and not server.arrived(TORCH):
        time.sleep(0.05)
    target = isolated / "envs" / "late"
    target.mkdir()
    (target / "mine.txt").write_text("user files")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "appeared while" in err and "--force" in err
    assert (target / "mine.txt").read_text() == "user files" and entries(target) == ["mine.txt"]
    assert entries(isolated / "envs") == ["late"]


def test_two_creates_of_one_name_serialize_and_the_second_is_refused(server: ChannelServer,
                                                                     isolated: Path) -> None:
    server.state.faults[TORCH] = "slow"
    server.state.slow_s = 1.5
    args = ("create", "twin", "--spec", "minimal", *GPU, "--mirror", server.url, "--no-verify", "--python", PY)
    first = envkit(*args)
    deadline = time.time() + 30
    while time.time() < deadline and not server.arrived(TORCH):
        time.sleep(0.05)
    second = envkit(*args)
    results = [first.communicate(timeout=90), second.communicate(timeout=90)]
    codes = sorted([first.returncode, second.returncode])
    assert codes == [0, 1], results
    loser = results[0] if first.returncode else results[1]
    assert "already exists" in loser[1] and "--force" in loser[1]
    owner = json.loads((isolated / "envs" / "twin" / ".envkit" / "owner.json").read_text())
    assert (isolated / "owned" / f"{owner['id']}.json").is_file()
    assert entries(isolated / "envs") == ["twin"]


def test_force_keeps_the_old_env_when_the_rebuild_fails_verify(capsys: pytest.CaptureFixture[str],
                                                              server: ChannelServer, isolated: Path,
                                                              fake_nvml: object) -> None:
    pytest.importorskip("torch")
    assert create(capsys, "prod", "--mirror", server.url, "--no-verify")[0] == 0
    old = isolated / "envs" / "prod"
    (old / "my-notes.txt").write_text("precious")
    old_id = json.loads((old / ".envkit" / "owner.json").read_text())["id"]
    # the fake NVML reports a driver: the env's CPU-only torch then FAILs verify
    code, out, err = create(capsys, "prod", "--mirror", server.url, "--force")
    assert code == 3, out + err
    assert (old / "my-notes.txt").read_text() == "precious"
    assert json.loads((old / ".envkit" / "owner.json").read_text())["id"] == old_id
    assert "old environment was restored" in out + err
    assert entries(isolated / "envs") == ["prod"]
    assert sorted(p.stem for p in (isolated / "owned").iterdir()) == [old_id]  # the rebuild's id is forgotten


def test_force_replaces_the_old_env_after_a_skipped_verify(capsys: pytest.CaptureFixture[str],
                                                           server: ChannelServer, isolated: Path) -> None:
    pytest.importorskip("torch")
    assert create(capsys, "prod", "--mirror", server.url, "--no-verify")[0] == 0
    (isolated / "envs" / "prod" / "my-notes.txt").write_text("old")
    code, out, err = create(capsys, "prod", "--mirror", server.url, "--force")
    assert code == 0 and "SKIPPED" in out, err
    assert not (isolated / "envs" / "prod" / "my-notes.txt").exists()
    assert entries(isolated / "envs") == ["prod"]


def _standin_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    stand_in = bindir / "micromamba"
    stand_in.write_text(
        "#!/bin/sh\n"
        # like a real engine: --version and --dry-run make nothing; without -p there is no prefix to make
        'case "$1" in --version) echo "micromamba 2.0.5"; exit 0;; esac\n'
        'p=; dry=; while [ $# -gt 0 ]; do case "$1" in -f) f="$2"; shift;; -p) p="$2"; shift;; '
        '--dry-run) dry=1;; esac; shift; done\n'
        'if [ -n "$dry" ] || [ -z "$p" ]; then echo "{}"; exit 0; fi\n'
        'mkdir -p "$p/conda-meta" "$p/bin"; : > "$p/conda-meta/history"; echo half > "$p/bin/half"\n'
        f'if [ -e "{tmp_path}/hang" ]; then echo building; sleep 60; fi\n'
        'echo "Transaction finished"\n')
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "hang"


def test_external_engine_killed_mid_force_keeps_the_old_env(capsys: pytest.CaptureFixture[str], isolated: Path,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hang = _standin_engine(tmp_path, monkeypatch)
    assert create(capsys, "ext", "--engine", "micromamba", "--no-verify")[0] == 0
    prefix = isolated / "envs" / "ext"
    (prefix / "old-data.txt").write_text("keep me")
    hang.write_text("")
    proc = envkit("create", "ext", "--spec", "minimal", *GPU, "--python", PY, "--engine", "micromamba",
                  "--no-verify", "--force", start_new_session=True)
    assert proc.stdout is not None
    deadline = time.time() + 30
    while time.time() < deadline and not any(n.startswith(".envkit-building") for n in entries(isolated / "envs")):
        time.sleep(0.05)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert not (prefix / "old-data.txt").exists()  # the half-made build holds the name until the next run
    hang.unlink()
    code, out, err = create(capsys, "other", "--engine", "micromamba", "--no-verify")
    assert code == 0, err
    assert "restored" in out and (prefix / "old-data.txt").read_text() == "keep me"
    assert entries(isolated / "envs") == ["ext", "other"]


def test_external_engine_failure_restores_the_old_env(capsys: pytest.CaptureFixture[str], isolated: Path,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _standin_engine(tmp_path, monkeypatch)
    assert create(capsys, "ext", "--engine", "micromamba", "--no-verify")[0] == 0
    prefix = isolated / "envs" / "ext"
    (prefix / "old-data.txt").write_text("keep me")
    monkeypatch.setenv("PATH", f"{tmp_path / 'nothing'}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "bin" / "micromamba").write_text(
        "#!/bin/sh\ncase \"$1\" in --version) echo 'micromamba 2.0.5'; exit 0;; esac\n"
        "p=; dry=; while [ $# -gt 0 ]; do case \"$1\" in -p) p=\"$2\"; shift;; --dry-run) dry=1;; esac; shift; done\n"
        'if [ -n "$dry" ]; then echo "{}"; exit 0; fi\n'  # the plan is fine; the build itself fails
        'mkdir -p "$p/conda-meta"; echo "PackagesNotFoundError: x" >&2; exit 1\n')
    code, _out, err = create(capsys, "ext", "--engine", "micromamba", "--no-verify", "--force")
    assert code == 1 and "old environment was restored" in err
    assert (prefix / "old-data.txt").read_text() == "keep me"
    assert entries(isolated / "envs") == ["ext"]


HOLDER = r"""
import fcntl, json, os, sys, time
lock, folder, target = sys.argv[1:4]
os.makedirs(folder)
fd = os.open(lock, os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, json.dumps({"envkit": ".envkit-staging", "target": target, "folder": folder, "pid": os.getpid()}).encode())
print("locked", os.getpid(), flush=True)
time.sleep(120)
"""


def test_sweep_goes_by_lock_not_pid(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                    isolated: Path) -> None:
    envs = isolated / "envs"
    envs.mkdir(parents=True)
    live = envs / ".envkit-staging.busy.0123456789ab"
    argv = [sys.executable, "-c", HOLDER, f"{live}.lock", str(live), str(envs / "busy")]
    if os.geteuid() == 0 and subprocess.run(["unshare", "-p", "-f", "true"], capture_output=True).returncode == 0:
        argv = ["unshare", "-p", "-f", "--kill-child", *argv]  # the owner runs in another PID namespace
    holder = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().startswith("locked")
        dead = envs / ".envkit-staging.gone.ba9876543210"  # an owner that was PID 1 in its container
        (dead / "conda-meta").mkdir(parents=True)
        Path(f"{dead}.lock").write_text(json.dumps({"envkit": ".envkit-staging", "target": str(envs / "gone"),
                                                    "folder": str(dead), "pid": 1}))
        unmarked = envs / ".envkit-staging.x.999999.deadbeef"  # no envkit marker: not provably ours
        (unmarked / "data").mkdir(parents=True)
        code, out, err = create(capsys, "fresh", "--mirror", server.url, "--no-verify")
        assert code == 0, err
        assert live.is_dir() and not dead.exists() and not Path(f"{dead}.lock").exists()
        assert "stale staging folder .envkit-staging.gone" in out and unmarked.is_dir()
    finally:
        holder.kill()
        holder.wait()
    code, out, _err = create(capsys, "fresh2", "--mirror", server.url, "--no-verify")
    assert code == 0 and not live.exists() and not Path(f"{live}.lock").exists()
    assert entries(envs) == [".envkit-staging.x.999999.deadbeef", "fresh", "fresh2"]


def test_interrupted_force_is_recovered_by_the_next_run(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                        isolated: Path) -> None:
    """An old env moved aside by a --force that died before verify ended comes back; the rebuild goes."""
    assert create(capsys, "prod", "--mirror", server.url, "--no-verify")[0] == 0
    envs = isolated / "envs"
    (envs / "prod" / "old.txt").write_text("old")
    aside = envs / ".envkit-old.prod.00112233aabb"
    os.rename(envs / "prod", aside)
    Path(f"{aside}.lock").write_text(json.dumps({"envkit": ".envkit-old", "target": str(envs / "prod"),
                                                 "folder": str(aside), "new_id": None}))
    code, out, err = create(capsys, "other", "--mirror", server.url, "--no-verify")
    assert code == 0, err
    assert "restored" in out and (envs / "prod" / "old.txt").read_text() == "old"
    assert entries(envs) == ["other", "prod"]


def test_a_damaged_cache_entry_is_fetched_again(capsys: pytest.CaptureFixture[str], testbed: TestBed,
                                                isolated: Path) -> None:
    channel = ("--channel", testbed.url("conda-forge"), "--no-verify")
    assert create(capsys, "a", *channel)[0] == 0
    entry = next((Path(os.environ["ENVKIT_CACHE_DIR"]) / "pkgs").glob("pytorch-2.13.0-cuda130*/"))
    rel = json.loads((entry / "info" / "paths.json").read_text())["paths"][0]["_path"]
    size = (entry / rel).stat().st_size
    for damage in ("truncate", "delete", "same-size"):
        cached = entry / rel
        data = cached.read_bytes() if cached.exists() else b"x" * size
        cached.unlink()  # break the hardlink to env "a" first: a real disk error would not be so kind
        if damage == "truncate":
            cached.write_bytes(b"")
        elif damage == "same-size":
            cached.write_bytes(bytes(len(data)))
        name = f"b-{damage}"
        code, out, err = create(capsys, name, *channel)
        assert code == 0, err
        assert "was damaged" in out
        linked = isolated / "envs" / name / rel
        assert linked.stat().st_size == size and linked.read_bytes() != bytes(size)
    assert (isolated / "envs" / "a" / rel).stat().st_size == size


@pytest.mark.slow
def test_torture_short_mode_finds_nothing_bad() -> None:
    """scripts/torture.py --short: kills (SIGKILL/SIGINT/SIGTERM), a full disk, a corrupted cache, races."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "torture.py"
    done = subprocess.run([sys.executable, str(script), "--short"], capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")})
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    rows = ("faults injected", "envs lost", "half-made envs under a name", "staging left after next cmd",
            "old envs lost on failed force", "damaged files linked", "tracebacks")
    table = {line[:32].strip(): line[32:].split()[0] for line in done.stdout.splitlines()
             if line[:32].strip() in rows}
    assert set(table) == set(rows), done.stdout
    assert int(table.pop("faults injected")) >= 10
    assert table and all(v == "0" for v in table.values()), done.stdout


def test_bad_targets_fail_before_any_install(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                             isolated: Path, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, _out, err = create(capsys, "p", "--mirror", server.url, "--no-verify", "--prefix", str(afile / "env"))
    assert code == 2 and "is a file" in err and afile.read_text() == "x"
    code, _out, err = create(capsys, "p", "--mirror", server.url, "--no-verify", "--prefix", str(afile), "--force")
    assert code == 1 and "not a conda environment" in err and afile.read_text() == "x"
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    code, _out, err = create(capsys, "p", "--mirror", server.url, "--no-verify", "--prefix", str(dangling))
    assert code == 1 and "dangling symlink" in err and dangling.is_symlink()
    assert not server.hits(".conda")  # refused before anything was downloaded


def test_force_killed_during_verify_gets_the_old_env_back(capsys: pytest.CaptureFixture[str],
                                                          server: ChannelServer, isolated: Path) -> None:
    """SIGKILL while the rebuild is being verified: the next run drops the unverified rebuild, restores the old."""
    pytest.importorskip("torch")
    assert create(capsys, "prod", "--mirror", server.url, "--no-verify")[0] == 0
    envs = isolated / "envs"
    (envs / "prod" / "old.txt").write_text("old")
    proc = envkit("create", "prod", "--spec", "minimal", *GPU, "--python", PY, "--mirror", server.url, "--force")
    deadline = time.time() + 60
    while time.time() < deadline and not (
            any(n.startswith(".envkit-old.prod.") and not n.endswith(".lock") for n in entries(envs))
            and (envs / "prod").exists()):
        time.sleep(0.02)
    proc.kill()
    proc.communicate(timeout=30)
    assert not (envs / "prod" / "old.txt").exists()  # killed with the unverified rebuild in place
    code, out, err = create(capsys, "other", "--mirror", server.url, "--no-verify")
    assert code == 0, err
    assert "dropped the unverified rebuild" in out and (envs / "prod" / "old.txt").read_text() == "old"
    assert entries(envs) == ["other", "prod"]

"""fleet create starts the nodes while it makes the bundle: the gate each node waits at, and its timeouts."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from envkit import proc
from envkit.fleet.create import GATE_CLOSED_RC, NO_BUNDLE, NO_BUNDLE_RC, _gated
from envkit.fleet.launcher import LocalLauncher, NodeRun


def test_the_timeout_counts_from_the_gate_not_from_the_start() -> None:
    gate = threading.Event()
    threading.Timer(0.6, gate.set).start()
    start = time.monotonic()
    done = proc.run(["sh", "-c", "sleep 0.9; echo finished"], timeout=0.5, timeout_from=gate)
    assert not done.timed_out and done.stdout.strip() == "finished", done
    assert time.monotonic() - start >= 0.9
    # and it still applies once the gate is open: a child that never ends is stopped 0.3 s after it
    gate = threading.Event()
    threading.Timer(0.2, gate.set).start()
    start = time.monotonic()
    done = proc.run(["sh", "-c", "sleep 30"], timeout=0.3, timeout_from=gate)
    assert done.timed_out and 0.45 <= time.monotonic() - start < 5


def test_a_pipe_as_stdin_reaches_the_child() -> None:
    read, write = os.pipe()
    threading.Timer(0.2, lambda: (os.write(write, b"go\n"), os.close(write))).start()
    done = proc.run(["sh", "-c", "read line; echo got:$line"], timeout=10, stdin_file=read)
    assert done.stdout.strip() == "got:go"
    with pytest.raises(OSError):  # handed over: proc.run closed our copy once the child had its own
        os.fstat(read)


def _node_script(marks: Path) -> list[str]:
    # a stand-in node: says it started (before the go), then prints what the gate gave it
    return ["sh", "-c", f'touch "{marks}/$ENVKIT_FLEET_NODE"; IFS= read -r line; echo "gate:$line"']


def test_nodes_start_before_the_bundle_is_made_and_get_the_go(tmp_path: Path) -> None:
    launcher = LocalLauncher(3)
    nodes = launcher.nodes()
    events: list[tuple[str, str]] = []

    def make() -> None:
        deadline = time.monotonic() + 20
        while len(list(tmp_path.iterdir())) < 3:  # every node is up while the bundle is still being made
            assert time.monotonic() < deadline, "the nodes did not start before the bundle was complete"
            time.sleep(0.02)

    phases: dict[str, float] = {}
    runs = _gated(launcher, nodes, lambda n: _node_script(tmp_path), make, timeout=30,
                  on_event=lambda node, what, run: events.append((node, what)), phases=phases)
    assert [r.stdout.strip() for r in runs] == ["gate:go"] * 3, runs
    assert "solve+bundle" in phases
    for node in ("local1", "local2", "local3"):
        mine = [what for n, what in events if n == node]
        assert mine == ["waiting", "running", "done"], events


def test_a_failed_bundle_closes_the_gates_and_is_raised_after_the_nodes_left(tmp_path: Path) -> None:
    launcher = LocalLauncher(2)
    ended: list[NodeRun | None] = []

    def make() -> None:
        while len(list(tmp_path.iterdir())) < 2:
            time.sleep(0.02)
        raise RuntimeError("no solution")

    def on_event(node: str, what: str, run: NodeRun | None) -> None:
        if what == "stopped":
            ended.append(run)

    with pytest.raises(RuntimeError, match="no solution"):
        _gated(launcher, launcher.nodes(), lambda n: _node_script(tmp_path), make, timeout=30, on_event=on_event,
               phases={})
    assert len(ended) == 2 and all(r is not None and r.stdout.strip() == "gate:" for r in ended), ended


def _gated_create(tmp_path: Path, stdin: bytes) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ENVKIT_HOME=str(tmp_path / "home"))
    return subprocess.run([sys.executable, "-m", "envkit", "create", "x", "--bundle", str(tmp_path / "bundle"),
                           "--prefix", str(tmp_path / "env"), "--bundle-gate", "--no-verify"],
                          input=stdin.decode(), capture_output=True, text=True, timeout=60, env=env)


def test_the_node_side_leaves_on_a_closed_gate_and_asks_for_a_missing_bundle(tmp_path: Path) -> None:
    closed = _gated_create(tmp_path, b"")
    assert closed.returncode == GATE_CLOSED_RC and "nothing was made on this node" in closed.stderr, closed
    assert not (tmp_path / "env").exists()
    # the go came, but this node cannot see the bundle folder: the marker asks fleet create to stage it
    missing = _gated_create(tmp_path, b"go\n")
    assert missing.returncode == NO_BUNDLE_RC and NO_BUNDLE in missing.stdout, missing
    assert not (tmp_path / "env").exists()


@pytest.mark.parametrize("early", [True, False])
def test_no_early_start_makes_the_bundle_before_any_node_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               early: bool) -> None:
    from envkit.fleet.create import install_everywhere

    marks = tmp_path / "marks"
    marks.mkdir()
    # a stand-in for envkit on the nodes: it only says that it started (and reads its stdin to the end)
    monkeypatch.setenv("ENVKIT_FLEET_ENVKIT", f"sh -c 'touch {marks}/$ENVKIT_FLEET_NODE; cat >/dev/null' node")
    launcher = LocalLauncher(2)
    seen: list[int] = []

    def make() -> None:
        deadline = time.monotonic() + (20 if early else 1.0)
        while time.monotonic() < deadline and len(list(marks.iterdir())) < 2:
            time.sleep(0.02)
        seen.append(len(list(marks.iterdir())))

    install_everywhere(launcher, launcher.nodes(), "x", tmp_path / "bundle", prefix_template=f"{tmp_path}/{{node}}",
                       timeout=30, stage="never", make=make, early=early)
    assert seen == [2 if early else 0]
    assert sorted(p.name for p in marks.iterdir()) == ["local1", "local2"]


def _tar_of(members: dict[str, bytes]) -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


@pytest.mark.parametrize("payload, why", [
    (_tar_of({"../escape.txt": b"x"}), "outside"),
    (b"this is not a tar stream" * 40, "not a tar"),
])
def test_a_staged_tar_is_unpacked_safely_and_its_folder_always_removed(tmp_path: Path, payload: bytes,
                                                                       why: str) -> None:
    stage = tmp_path / "stage"
    env = dict(os.environ, ENVKIT_HOME=str(tmp_path / "home"))
    done = subprocess.run([sys.executable, "-m", "envkit", "create", "x", "--bundle", str(tmp_path / "nowhere"),
                           "--prefix", str(tmp_path / "env"), "--bundle-gate", "--bundle-stage-dir", str(stage),
                           "--no-verify"], input=b"tar\n" + payload, capture_output=True, timeout=60, env=env)
    assert done.returncode == 1 and b"could not unpack the staged bundle" in done.stderr, (why, done)
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "env").exists()
    assert list(stage.iterdir()) == []  # the staged folder went with the failure


def test_a_staged_bundle_folder_is_removed_after_the_install_fails(tmp_path: Path) -> None:
    """A well-formed tar that is no bundle: unpacked, refused by load_bundle, and still removed."""
    stage = tmp_path / "stage"
    env = dict(os.environ, ENVKIT_HOME=str(tmp_path / "home"))
    done = subprocess.run([sys.executable, "-m", "envkit", "create", "x", "--bundle", str(tmp_path / "nowhere"),
                           "--prefix", str(tmp_path / "env"), "--bundle-gate", "--bundle-stage-dir", str(stage),
                           "--no-verify"], input=b"tar\n" + _tar_of({"readme.txt": b"hello"}),
                          capture_output=True, timeout=60, env=env)
    assert done.returncode == 1 and b"is not an envkit bundle" in done.stderr, done
    assert list(stage.iterdir()) == []


def test_sigterm_while_a_staged_bundle_arrives_removes_the_copy(tmp_path: Path) -> None:
    """srun stops a step with SIGTERM: the node leaves with 143 and takes its staged copy with it."""
    import signal

    stage = tmp_path / "stage"
    env = dict(os.environ, ENVKIT_HOME=str(tmp_path / "home"))
    child = subprocess.Popen([sys.executable, "-m", "envkit", "create", "x", "--bundle", str(tmp_path / "nowhere"),
                              "--prefix", str(tmp_path / "env"), "--bundle-gate", "--bundle-stage-dir", str(stage),
                              "--no-verify"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env)
    assert child.stdin is not None
    whole = _tar_of({"conda/a.conda": b"x" * 100_000})
    child.stdin.write(b"tar\n" + whole[: len(whole) // 2])  # half a tar: the node is unpacking, waiting for more
    child.stdin.flush()
    deadline = time.monotonic() + 30
    while not (stage.is_dir() and any(stage.iterdir())):
        assert time.monotonic() < deadline and child.poll() is None, child.communicate()
        time.sleep(0.02)
    time.sleep(0.2)
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 143, (out, err)
    assert list(stage.iterdir()) == []

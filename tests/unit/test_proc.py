"""proc.run_bounded: an untrusted child can neither flood envkit's memory, nor hang it through a grandchild that
detached with its pipes, nor outlive its deadline; stdin and a late-starting timeout work as proc.run's do."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from envkit import proc


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_stdout_keeps_its_head_and_stderr_its_tail_the_rest_is_counted() -> None:
    code = ("import sys; sys.stdout.write('MARK\\n' + 'x' * 20_000_000); "
            "sys.stderr.write('y' * 5_000_000 + 'LAST-ERROR')")
    done = proc.run_bounded([sys.executable, "-c", code], timeout=60, cap=1 << 20, stderr_cap=1000, keep_head=True)
    assert done.returncode == 0 and not done.timed_out
    assert done.stdout.startswith("MARK\n") and len(done.stdout) == 1 << 20
    assert done.stdout_dropped == 20_000_005 - (1 << 20)
    assert done.stderr.endswith("LAST-ERROR") and len(done.stderr) == 1000
    assert done.stderr_dropped == 5_000_010 - 1000


def test_a_detached_grandchild_holding_the_pipes_is_not_waited_for_and_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = f"(setsid sleep 600 & echo $! > {pidfile}); echo answered"
    start = time.monotonic()
    done = proc.run_bounded(["sh", "-c", script], timeout=30, grace=0.5)
    took = time.monotonic() - start
    assert done.stdout.strip() == "answered" and done.returncode == 0 and not done.timed_out
    assert took < 5, f"waited {took:.1f} s for a pipe a detached grandchild held"
    pid = int(pidfile.read_text())
    for _ in range(50):
        if not _alive(pid):
            break
        time.sleep(0.1)
    assert not _alive(pid), "the grandchild that kept the pipe open is still running"


def test_endless_output_stops_at_the_deadline_and_the_group_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    start = time.monotonic()
    done = proc.run_bounded(["sh", "-c", f"sleep 600 & echo $! > {pidfile}; exec yes"], timeout=2, cap=1 << 16)
    took = time.monotonic() - start
    assert done.timed_out and took < 8, took
    assert len(done.stdout) <= 1 << 16 and done.stdout_dropped > 0
    pid = int(pidfile.read_text())
    time.sleep(0.2)
    assert not _alive(pid)


def test_the_timeout_counts_from_the_event_and_output_is_drained_meanwhile() -> None:
    go = threading.Event()
    timer = threading.Timer(1.5, go.set)
    timer.start()
    start = time.monotonic()
    code = "import sys, time; sys.stdout.write('z' * 3_000_000); sys.stdout.flush(); time.sleep(600)"
    done = proc.run_bounded([sys.executable, "-c", code], timeout=1, timeout_from=go, cap=1000)
    took = time.monotonic() - start
    timer.cancel()
    assert done.timed_out and 2.3 < took < 8, took  # 1.5 s until the go, then the 1 s timeout
    assert done.stdout_dropped == 3_000_000 - 1000  # read while waiting: the child was never blocked


def test_stdin_from_a_file_or_a_handed_over_pipe(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("from a file\n")
    assert proc.run_bounded(["cat"], timeout=10, stdin=str(source)).stdout == "from a file\n"
    read, write = os.pipe()
    os.write(write, b"through a pipe\n")
    os.close(write)
    assert proc.run_bounded(["cat"], timeout=10, stdin=read).stdout == "through a pipe\n"
    try:
        os.fstat(read)
    except OSError:
        pass
    else:
        raise AssertionError("the read end handed to the child is still open in envkit")


def test_a_program_that_does_not_exist_raises_and_closes_the_handed_over_fd(tmp_path: Path) -> None:
    read, write = os.pipe()
    try:
        proc.run_bounded([str(tmp_path / "missing")], timeout=5, stdin=read)
    except FileNotFoundError:
        pass
    else:
        raise AssertionError("a missing program must raise FileNotFoundError")
    try:
        os.write(write, b"x")
    except BrokenPipeError:
        pass  # nobody holds the read end any more
    else:
        raise AssertionError("the read end of the pipe was not closed")
    finally:
        os.close(write)

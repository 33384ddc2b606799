"""The one wrapper every child process goes through: argv lists, never a shell; logged; timed out.

Modelled on pipx's `run_subprocess` / `_fix_subprocess_env` (architecture.md, habit 4).
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("envkit.proc")

# Variables of envkit's own interpreter that must not leak into a target environment's python.
_LEAKY_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONEXECUTABLE",
               "VIRTUAL_ENV", "__PYVENV_LAUNCHER__", "PYTHONNOUSERSITE")


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False

    def stderr_tail(self, lines: int = 20) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-lines:])


def child_env(extra: Mapping[str, str] | None = None, *, isolate_python: bool = False,
              drop: Sequence[str] = ()) -> dict[str, str]:
    """The environment for a child: ours, minus what would leak envkit's interpreter, plus `extra`."""
    env = dict(os.environ)
    if isolate_python:
        for name in _LEAKY_VARS:
            env.pop(name, None)
        env["PYTHONNOUSERSITE"] = "1"  # no ~/.local site-packages of the user leaking in either
    for name in drop:
        env.pop(name, None)
    if extra:
        env.update(extra)
    return env


def run(argv: Sequence[str], *, timeout: float | None = 60.0, env: Mapping[str, str] | None = None,
        cwd: str | None = None, input_text: str | None = None,
        on_line: Callable[[str], None] | None = None, stdin_file: str | int | None = None,
        timeout_from: threading.Event | None = None) -> Completed:
    """Run `argv`; on timeout kill the whole process group (children included) and say so.

    Raises FileNotFoundError when the program does not exist (callers turn that into an EnvkitError).
    With `on_line`, stdout+stderr are streamed line by line (external engines) and returned merged.
    `stdin_file`: a file's path, or the read end of a pipe (an fd) the caller writes to later; an fd is
    handed over: closed here once the child has its copy (or could not start), so the caller's writes fail
    with EPIPE instead of blocking once the child is gone.
    `timeout_from`: the timeout counts from the moment this event is set, not from the start (a child
    started early that waits on its stdin for the go, e.g. a fleet node while the bundle is made).
    """
    argv = tuple(str(a) for a in argv)
    log.debug("run: %s", shlex.join(argv))
    if isinstance(stdin_file, int):
        return _run(argv, timeout, env, cwd, None, on_line, stdin_file, timeout_from, close_stdin=True)
    if stdin_file is not None:  # a (large, binary) file as stdin: the child reads it straight from disk
        with open(stdin_file, "rb") as handle:
            return _run(argv, timeout, env, cwd, None, on_line, handle, timeout_from)
    return _run(argv, timeout, env, cwd, input_text, on_line, None, timeout_from)


def _communicate(proc: subprocess.Popen[str], input_text: str | None, timeout: float | None,
                 timeout_from: threading.Event | None) -> tuple[str, str]:
    """communicate(), with the timeout starting when `timeout_from` is set (output is drained meanwhile:
    retrying communicate after its TimeoutExpired loses nothing, per the subprocess docs)."""
    if timeout_from is None or timeout is None:
        return proc.communicate(input=input_text, timeout=timeout)
    while not timeout_from.is_set():
        try:
            return proc.communicate(input=input_text, timeout=0.2)
        except subprocess.TimeoutExpired:
            input_text = None  # already written by the first call
    return proc.communicate(input=input_text, timeout=timeout)


def _run(argv: tuple[str, ...], timeout: float | None, env: Mapping[str, str] | None, cwd: str | None,
         input_text: str | None, on_line: Callable[[str], None] | None, stdin: Any,
         timeout_from: threading.Event | None = None, close_stdin: bool = False) -> Completed:
    try:
        proc = subprocess.Popen(  # noqa: S603 - argv list, never a shell
            argv,
            stdin=stdin if stdin is not None else subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if on_line else subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group, so a timeout can kill grandchildren too
        )
    finally:
        if close_stdin:
            os.close(stdin)
    try:
        if on_line is not None:
            return _stream(proc, argv, timeout, on_line)
        out, err = _communicate(proc, input_text, timeout, timeout_from)
        return Completed(argv, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return Completed(argv, proc.returncode if proc.returncode is not None else -9, out or "",
                         err or "", timed_out=True)
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise


def _stream(proc: subprocess.Popen[str], argv: tuple[str, ...], timeout: float | None,
            on_line: Callable[[str], None]) -> Completed:
    import threading

    lines: list[str] = []
    timer = threading.Timer(timeout, _kill_group, args=(proc,)) if timeout else None
    if timer:
        timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            on_line(line.rstrip("\n"))
        proc.wait()
    finally:
        fired = bool(timer and not timer.is_alive() and proc.returncode not in (0, None) and proc.returncode < 0)
        if timer:
            timer.cancel()
    text = "".join(lines)
    return Completed(argv, proc.returncode, text, text, timed_out=fired)


def _kill_group(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def _kill_pipe_holders(fds: Sequence[int]) -> None:
    """SIGKILL every process that holds the other end of these pipes (Linux /proc): a payload's
    grandchild that detached into its own session is found by the pipe it inherited, and only by it."""
    try:
        inodes = {f"pipe:[{os.fstat(fd).st_ino}]" for fd in fds}
        pids = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    except OSError:
        return
    for pid in pids:
        try:
            links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        except OSError:
            continue
        if links & inodes:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def run_interactive(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> int:
    """Run with the terminal attached (envkit run); Ctrl-C goes to the child; return its exit code."""
    argv = tuple(str(a) for a in argv)
    log.debug("run (interactive): %s", shlex.join(argv))
    proc = subprocess.Popen(argv, env=dict(env) if env is not None else None)  # noqa: S603
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue  # the child got the SIGINT too; wait for it to finish


@dataclass(frozen=True)
class Bounded(Completed):
    """A run whose output was capped: how many bytes of each stream were discarded."""

    stdout_dropped: int = 0
    stderr_dropped: int = 0


def run_bounded(argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None,
                cap: int = 8 << 20, grace: float = 1.0, stdin: str | int | None = None,
                timeout_from: threading.Event | None = None, keep_head: bool = False,
                stderr_cap: int | None = None) -> Bounded:
    """Run an untrusted program (the verify payload, a fleet node) so that it cannot hang or flood envkit.

    Its own session and process group (killed as a whole at the deadline and after it exits);
    each stream drained continuously and capped at `cap` bytes (`stderr_cap` for stderr when given;
    the tail is kept, or with `keep_head` the first `cap` bytes of stdout, and the excess counted);
    after the deadline, or `grace` seconds after the program exited, envkit stops reading and closes
    the pipes even if a detached grandchild (setsid) still holds them open, and kills whoever holds
    them (found through /proc by the pipe, so nothing else is touched).
    `stdin`: a file's path, or a pipe's read end (an fd, handed over: closed here once the child has
    its copy, as proc.run does); None: /dev/null. `timeout_from`: the timeout counts from the moment
    this event is set (proc.run); output is drained meanwhile.
    Raises OSError when the program cannot be started (not found, not executable, exec format).
    """
    argv = tuple(str(a) for a in argv)
    log.debug("run (bounded): %s", shlex.join(argv))
    if isinstance(stdin, int):  # closed by _run_bounded, once the child has its copy or could not start
        return _run_bounded(argv, timeout, env, cap, grace, stdin, timeout_from, keep_head, stderr_cap, stdin)
    if stdin is not None:
        with open(stdin, "rb") as handle:
            return _run_bounded(argv, timeout, env, cap, grace, handle, timeout_from, keep_head, stderr_cap)
    return _run_bounded(argv, timeout, env, cap, grace, subprocess.DEVNULL, timeout_from, keep_head, stderr_cap)


def _run_bounded(argv: tuple[str, ...], timeout: float, env: Mapping[str, str] | None, cap: int, grace: float,
                 stdin: Any, timeout_from: threading.Event | None, keep_head: bool, stderr_cap: int | None,
                 close_fd: int | None = None) -> Bounded:
    import selectors
    import time

    try:
        proc = subprocess.Popen(  # noqa: S603 - argv list, never a shell
            argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None, start_new_session=True)
    finally:
        if close_fd is not None:  # the child has its copy (or none): ours goes, so a writer sees EPIPE
            os.close(close_fd)
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    streams = {out_fd: bytearray(), err_fd: bytearray()}
    caps = {out_fd: cap, err_fd: cap if stderr_cap is None else stderr_cap}
    dropped = {fd: 0 for fd in streams}
    selector = selectors.DefaultSelector()
    for fd in streams:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    deadline: float | None = None if timeout_from is not None else time.monotonic() + timeout
    exited_at: float | None = None
    timed_out = False
    try:
        while selector.get_map():
            now = time.monotonic()
            if deadline is None and timeout_from is not None and timeout_from.is_set():
                deadline = now + timeout
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > grace:
                break  # the program is gone; whoever still holds the pipe is not waited for
            if deadline is not None and now >= deadline:
                timed_out = exited_at is None
                break
            wait = 0.2 if deadline is None else min(0.2, deadline - now)
            for key, _events in selector.select(timeout=wait):
                fd = int(key.fd)
                try:
                    chunk = os.read(fd, 1 << 16)
                except (BlockingIOError, InterruptedError):
                    continue
                if not chunk:
                    selector.unregister(fd)
                    continue
                buf, limit = streams[fd], caps[fd]
                if keep_head and fd == out_fd:  # the first `limit` bytes stay; the rest is counted and dropped
                    room = max(0, limit - len(buf))
                    buf += chunk[:room]
                    dropped[fd] += len(chunk) - min(room, len(chunk))
                    continue
                buf += chunk
                if len(buf) > limit:
                    dropped[fd] += len(buf) - limit
                    del buf[: len(buf) - limit]
        while not timed_out and proc.poll() is None:  # both pipes closed early, the program still runs
            now = time.monotonic()
            if deadline is None and timeout_from is not None and timeout_from.is_set():
                deadline = now + timeout
            if deadline is not None and now >= deadline:
                timed_out = True
                break
            try:
                proc.wait(timeout=0.2 if deadline is None else min(0.2, max(0.0, deadline - now)))
            except subprocess.TimeoutExpired:
                pass
    finally:
        _kill_group(proc)  # the deadline passed, or leftovers of a finished program: the whole group goes
        if selector.get_map():  # a pipe is still open: someone left the group (setsid) and holds it
            _kill_pipe_holders([fd for fd in streams if fd in selector.get_map()])
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        selector.close()
        proc.stdout.close()
        proc.stderr.close()
    code = proc.returncode if proc.returncode is not None else -9
    return Bounded(argv, code, streams[out_fd].decode("utf-8", "replace"), streams[err_fd].decode("utf-8", "replace"),
                   timed_out=timed_out, stdout_dropped=dropped[out_fd], stderr_dropped=dropped[err_fd])

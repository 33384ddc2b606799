"""Building an env beside its final place and moving it in without ever losing or clobbering one.

Next to an env `<envs>/<name>` envkit keeps, while it works:
- `.<name>.envkit-lock`: the per-target lock; every create, --force and remove of that name holds it,
  so two creates of one name run one after the other and the second finds the first's env;
- `.envkit-staging.<name>.<id>/`: the env being built, with `.envkit-staging.<name>.<id>.lock` beside it
  (envkit's staging marker: JSON naming the folder; flock-ed by its builder for as long as it lives);
- `.envkit-old.<name>.<id>/`: the old env a --force moved aside, with its own flock-ed `.lock`, kept
  until the new env has passed verify;
- `.envkit-building.<name>.<id>.lock`: an external engine building in place (conda prefixes are not
  relocatable), naming the old env it set aside.

A leftover is judged by its lock, never by a PID (PIDs mean nothing across PID namespaces,
containers and hosts sharing a home, and PID 1 is always "alive"): the sweep takes the lock without
blocking, so it only touches leftovers whose owner is gone, and only those carrying the marker.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.errors import EnvExistsError, EnvkitError, UsageError
from envkit.fsutil import Locked, flocked, rename_noreplace, try_lock
from envkit.prefix.ownership import check_deletable, forget, ownership
from envkit.prefix.records import CONDA_META, META_DIR, has_conda_meta

STAGING = ".envkit-staging"
OLD = ".envkit-old"
BUILDING = ".envkit-building"
TRASH = ".envkit-trash"
_LEFTOVER = re.compile(rf"^({re.escape(STAGING)}|{re.escape(OLD)}|{re.escape(BUILDING)}|{re.escape(TRASH)})"
                       r"\.(.+)\.([0-9a-f]{8,32})\.lock$")


def lock_path(prefix: Path) -> Path:
    return prefix.parent / f".{prefix.name}.envkit-lock"


@contextmanager
def quiet_signals() -> Iterator[None]:
    """Defer SIGINT/SIGTERM while a rename pair or a cleanup runs, so it is never cut in half.

    A deferring Python-level handler, not a signal mask: with rattler's threads running, the kernel
    may deliver the signal to any thread, and Python runs its handler in the main thread regardless
    of that thread's mask. The deferred signal is raised again at the end of the block."""
    pending: list[int] = []

    def defer(signum: int, _frame: Any) -> None:
        pending.append(signum)

    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, defer)
    except ValueError:  # not the main thread: no handler of ours can run here anyway
        pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if pending:
            signal.raise_signal(pending[0])


@contextmanager
def interrupting() -> Iterator[None]:
    """Ctrl-C and SIGTERM (a `kill`, a CI timeout, Slurm's scancel) interrupt the work at once, as an
    exception, so every `finally` and `except BaseException` on the way out runs and removes what this run
    made before anything is printed (SIGTERM's default action would end the process with no cleanup at all).

    A handler of our own (not Python's default) also keeps asyncio.run from swallowing SIGINT while it
    waits on rattler's future: the wakeup fd breaks the wait and the handler raises."""
    def handler(_signum: int, _frame: Any) -> None:
        # quieted before the exception unwinds asyncio.run: its loop closes on the way out, and a runtime thread
        # may call back into it before any `except` here runs (scripts/torture.py, create --bundle SIGTERM)
        _quiet_closed_loop()
        raise KeyboardInterrupt

    previous: dict[signal.Signals, Any] = {}  # signal.signal's handlers: callables, SIG_DFL, SIG_IGN, None
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not in the main thread
        pass
    try:
        yield
    except KeyboardInterrupt:
        _quiet_closed_loop()
        raise
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)


_QUIETED = False


def _quiet_closed_loop() -> None:
    """After an interrupt, rattler's runtime threads may still call back into the event loop asyncio.run just
    closed; Python prints that RuntimeError('Event loop is closed') as a traceback of an ignored exception.
    It is expected on the way out, so it is dropped (any other one still prints)."""
    import sys
    import threading

    global _QUIETED
    if _QUIETED:
        return
    _QUIETED = True

    def closed(exc: BaseException | None) -> bool:
        if isinstance(exc, RuntimeError) and "Event loop is closed" in str(exc):
            return True
        # the interrupt landed inside loop.close(), after its self-pipe socket was dropped and before the loop was
        # marked closed; the loop's __del__ then closes it again and trips on the missing socket (asyncio
        # selector_events._close_self_pipe: "'NoneType' object has no attribute 'fileno'"; scripts/torture.py
        # seed 33, create SIGTERM #19). Expected on the way out, like the RuntimeError above.
        if isinstance(exc, AttributeError):
            tb = exc.__traceback__
            while tb is not None:
                if tb.tb_frame.f_code.co_name == "_close_self_pipe":
                    return True
                tb = tb.tb_next
        return False

    previous_unraisable = sys.unraisablehook
    previous_thread = threading.excepthook

    def unraisable(info: Any) -> None:
        if not closed(info.exc_value):
            previous_unraisable(info)

    def thread_hook(info: Any) -> None:
        if not closed(info.exc_value):
            previous_thread(info)

    previous_except = sys.excepthook

    def except_hook(kind: Any, value: BaseException, tb: Any) -> None:  # PyErr_Print from a runtime thread
        if not closed(value):
            previous_except(kind, value, tb)

    sys.unraisablehook = unraisable
    threading.excepthook = thread_hook
    sys.excepthook = except_hook


def check_parent(prefix: Path) -> None:
    """The folder an env goes into must be (or become) a folder: a file on the way is a usage error."""
    parent = prefix.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{parent} is a file, so {prefix} cannot be created", "choose another name or --prefix")


@contextmanager
def target_lock(prefix: Path, on_wait: Any = None) -> Iterator[None]:
    """Serialize every create/--force/remove of one target (waits for the other one to finish)."""
    check_parent(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    path = lock_path(prefix)
    try:
        with flocked(path, blocking=False):
            yield
        return
    except Locked:
        if on_wait is not None:
            on_wait(f"another envkit is creating or removing {prefix}; waiting for it to finish")
    with flocked(path, blocking=True):
        yield


def _record(kind: str, target: Path, folder: Path, **extra: Any) -> str:
    return json.dumps({"envkit": kind, "target": str(target), "folder": str(folder), "pid": os.getpid(),
                       "host": socket.gethostname(), **extra})


# Folders whose removal an interrupt could not finish before the message was printed (a runtime thread of
# rattler's may still be writing into one for a moment: dropping its future does not stop a link already
# under way). Each keeps its marker until it is gone; the CLI's exit path tries once more (settle_at_exit),
# and whatever is still there is named with the command that removes it.
_UNFINISHED: list[tuple[Path, Path]] = []
# every (folder, marker) this process made: the exit path's last look for a marker whose folder is gone (a run of
# scripts/torture.py, seed 31, "bundle SIGINT #13", left one such marker while saying nothing was left behind)
_MADE: list[tuple[Path, Path]] = []
SETTLE_S = 0.3  # a removed folder must stay gone this long (rattler's tasks stop within milliseconds)
REMOVE_LIMIT_S = 15.0  # and the whole removal gives up (naming the folder) after this


def _remove_settled(folder: Path, settle: float = SETTLE_S, limit: float = REMOVE_LIMIT_S) -> str | None:
    """rmtree `folder`, again if something writes into it meanwhile, until it stays gone for `settle`
    seconds; None when it is gone, else what is left and the command that removes it."""
    import time

    if not (folder.exists() or folder.is_symlink()):
        return None  # renamed into place, or never made: nothing to wait for
    deadline = time.monotonic() + limit
    gone_since: float | None = None
    failure = ""
    while True:
        now = time.monotonic()
        if folder.exists() or folder.is_symlink():
            gone_since = None
            try:
                if folder.is_symlink() or not folder.is_dir():
                    folder.unlink()
                else:
                    shutil.rmtree(folder)
            except FileNotFoundError:
                pass
            except OSError as exc:
                failure = f" ({exc.strerror or exc})"
        elif gone_since is None:
            gone_since = now
        elif now - gone_since >= settle:
            return None
        if now > deadline:
            return f"could not remove {folder}{failure}: remove it with rm -rf {folder}"
        time.sleep(0.01)


@dataclass
class Held:
    """A folder next to the target that this process owns while its lock is held."""

    folder: Path
    lock: Path
    fd: int
    _stack: Any = field(default=None, repr=False)

    def release(self, remove_folder: bool, settle: float = 0.0) -> str | None:
        """Drop the folder (if asked) and the lock; a cleanup failure is returned, never raised. The lock
        file goes last, and only once the folder is gone: a folder that stays keeps its marker, so the
        next sweep still knows it as envkit's (and its owner as gone). `settle`: after an interrupt, how
        long the removed folder must stay gone (a thread may still be writing into it)."""
        problem = None
        with quiet_signals():
            if remove_folder:
                problem = _remove_settled(self.folder, settle=settle)
            if self._stack is not None:
                if problem is None:
                    try:
                        os.unlink(self.lock)  # while still locked: waiters re-check the inode (fsutil.flocked)
                    except OSError:
                        pass
                else:
                    _UNFINISHED.append((self.folder, self.lock))
                self._stack.close()
                self._stack = None
        return problem

    def abandon(self) -> None:
        """Let go of the lock but keep the marker: the next sweep finds the folder (e.g. a kept old env)."""
        with quiet_signals():
            if self._stack is not None:
                self._stack.close()
                self._stack = None


def settle_at_exit() -> list[str]:
    """The exit path's last try at folders an interrupt left being written to: what is still there, each
    with the command that removes it (empty: nothing was left behind)."""
    left: list[str] = []
    while _UNFINISHED:
        folder, lock = _UNFINISHED.pop()
        problem = _remove_settled(folder, settle=0.05, limit=2.0)
        if problem is None:
            # the folder is gone: its marker is this run's own random name, so it goes too, held or not (a sweep of
            # another envkit holding it a moment finds no folder and drops it as well); a marker left here was the
            # torture's "bundle SIGTERM" leftover
            fd = try_lock(lock)
            try:
                os.unlink(lock)
            except OSError:
                pass
            if fd is not None:
                os.close(fd)
        else:
            left.append(problem)
    for folder, lock in _MADE:
        # a marker whose folder is gone marks nothing: this run's own random name, removed held or not (at this exit
        # every Held of this run is released; another envkit's sweep holding it a moment would drop it as well)
        if not (folder.exists() or folder.is_symlink()):
            try:
                os.unlink(lock)
            except OSError:
                pass
    return left


def left_behind() -> list[str]:
    """What an interrupted run could not remove (so far): never claim a clean slate while this is not empty."""
    return [f"{folder} (remove it with rm -rf {folder})" for folder, lock in _UNFINISHED
            if folder.exists() or folder.is_symlink() or lock.exists()]


def hold(kind: str, target: Path, *, mkdir: bool, **extra: Any) -> Held:
    """Lock a fresh `<kind>.<name>.<id>` name beside `target`; create the folder if asked.

    The marker comes first: the lock file is created (O_CREAT), flock-ed and filled before the folder
    exists, so there is never a moment when the folder exists without a marker a sweep can read; a kill
    between the two leaves only the lock, which the sweep drops (its folder does not exist)."""
    from contextlib import ExitStack

    tag = secrets.token_hex(6)
    folder = target.parent / f"{kind}.{target.name}.{tag}"
    lock = target.parent / f"{kind}.{target.name}.{tag}.lock"
    stack = ExitStack()
    with quiet_signals():  # a signal between the lock and the folder would leave the lock held by no Held
        try:
            fd = stack.enter_context(flocked(lock, blocking=False, content=_record(kind, target, folder, **extra),
                                             unlink=False))
        except BaseException:
            # the marker could not be written (ENOSPC on a full disk, EDQUOT): the name is this process's own
            # random one, so the empty file it may have left is removed (scripts/torture.py's disk-full fault)
            stack.close()
            try:
                os.unlink(lock)
            except OSError:
                pass
            raise
        _MADE.append((folder, lock))
        try:
            if mkdir:
                folder.mkdir(mode=0o755)
        except BaseException:
            os.unlink(lock)
            stack.close()
            raise
        return Held(folder, lock, fd, stack)


def update(held: Held, kind: str, target: Path, **extra: Any) -> None:
    data = _record(kind, target, held.folder, **extra).encode()
    os.ftruncate(held.fd, 0)
    os.pwrite(held.fd, data, 0)


@contextmanager
def staging_folder(target: Path) -> Iterator[Held]:
    """A locked, marked staging folder; removed (before any message is printed) unless moved in."""
    held: Held | None = None
    try:
        with quiet_signals():  # a signal deferred inside hold() is raised here, where `held` is already known
            held = hold(STAGING, target, mkdir=True)
        yield held
    except BaseException as exc:
        if held is None:
            raise
        problem = held.release(remove_folder=True, settle=SETTLE_S)
        if problem and isinstance(exc, EnvkitError):  # the message must not claim a clean slate
            exc.message = exc.message.replace("nothing was left behind; ", "") + f"; and {problem}"
            exc.hint = (exc.hint or "").replace("nothing was left behind; ", "") or None
        raise
    problem = held.release(remove_folder=True)
    if problem:
        raise EnvkitError(f"the environment is in place, but {problem}", None)


@contextmanager
def staging_beside(out: Path) -> Iterator[Held]:
    """A staging folder for something other than an env (a bundle's `-o DIR`), beside it: the sweep of
    that folder first (a killed run's staging goes), then staging_folder's lock-first, remove-on-every-exit."""
    check_parent(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    sweep(out.parent)
    with staging_folder(out) as held:
        yield held


def check_target(prefix: Path, force: bool, allow_foreign: bool, expected_id: str | None = None) -> bool:
    """May a create put an env at `prefix`? True when an existing env will be replaced (--force)."""
    check_parent(prefix)
    if not (prefix.exists() or prefix.is_symlink()):
        return False
    if prefix.is_symlink() and not prefix.exists():
        raise EnvExistsError(f"{prefix} is a dangling symlink; it was not touched",
                             f"remove the link (rm {prefix}) or choose another name or --prefix")
    is_env = has_conda_meta(prefix)
    if not force:
        what = "an environment" if is_env else "a file" if not prefix.is_dir() else "a folder"
        raise EnvExistsError(f"{prefix} already exists ({what}); it was not touched",
                             "pass --force to rebuild it (the old one stays until the new one has passed "
                             "verify), or choose another name")
    check_deletable(prefix, allow_foreign=allow_foreign, verb="replace", expected_id=expected_id)
    return True


@contextmanager
def building_in_place(prefix: Path) -> Iterator[Held]:
    """An external engine builds at the final name (conda prefixes are not relocatable): a locked
    journal beside it lets the next sweep remove a half-made env and put back the set-aside old one."""
    held = hold(BUILDING, prefix, mkdir=False, aside=None)
    try:
        yield held
    finally:
        held.release(remove_folder=False)


def set_aside(prefix: Path, new_id: str | None) -> Held:
    """--force: move the old env to a locked `.envkit-old.*` name (restored if this process dies)."""
    held = hold(OLD, prefix, mkdir=False, new_id=new_id)
    try:
        with quiet_signals():
            rename_noreplace(prefix, held.folder)
    except BaseException:
        if held.folder.exists() and not prefix.exists():  # interrupted after the move: put it back
            try:
                rename_noreplace(held.folder, prefix)
            except OSError:
                held.abandon()  # kept aside, marked: the sweep restores it
                raise
        held.release(remove_folder=False)
        raise
    return held


# what a clone copies instead of hard-linking: the files envkit and the engine rewrite in place (conda-meta/history
# is appended to, records are rewritten, .envkit/*.json updated); a hard link there would edit the live env too
COPIED = (CONDA_META, META_DIR)


def clone_into(prefix: Path, staging: Path) -> None:
    """Copy the env at `prefix` into the (empty) staging folder as hard links, as `cp -al` does, so a change
    can be made there and swapped in whole. Every file the change may rewrite in place is copied instead
    (COPIED); the engine unlinks before it writes a package file, so the live env's inodes are never edited.
    Where a hard link is refused (another filesystem, protected_hardlinks on a file of another user) the
    file is copied."""
    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst, follow_symlinks=False)
        except OSError:
            shutil.copy2(src, dst, follow_symlinks=False)

    for entry in sorted(prefix.iterdir()):
        target = staging / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True,
                            copy_function=shutil.copy2 if entry.name in COPIED else link_or_copy)
        else:
            link_or_copy(str(entry), str(target))
    shutil.copystat(prefix, staging)


def swap_in(staging: Path, prefix: Path) -> None:
    """The final, refusing rename: whatever appeared at `prefix` meanwhile is never replaced."""
    try:
        rename_noreplace(staging, prefix)
    except FileExistsError:
        raise EnvExistsError(f"{prefix} appeared while the environment was being built; it was not touched "
                             "and the new build was discarded",
                             "run again with --force to replace it, or choose another name") from None


def restore(old: Held, prefix: Path) -> str | None:
    """Put a set-aside env back under its name; if the name was taken meanwhile, keep it aside (marked
    for the sweep, never deleted) and say where it is."""
    try:
        with quiet_signals():
            rename_noreplace(old.folder, prefix)
    except OSError as exc:
        old.abandon()
        return (f"the old environment could not go back to {prefix} ({exc.strerror or exc}); it is kept at "
                f"{old.folder}: move it back by hand")
    old.release(remove_folder=False)
    return None


def discard(prefix: Path, owner_id: str) -> str | None:
    """Remove an env this very run made (checked by its owner id) through a locked trash name."""
    if not ownership(prefix, owner_id).owned:
        return f"{prefix} is not the env this run made; it was left alone"
    forget(prefix)
    return trash(prefix)


def trash(path: Path) -> str | None:
    """Free the name at once (rename to a locked trash name), then delete; a kill mid-way is swept."""
    trash = hold(TRASH, path, mkdir=False)
    try:
        with quiet_signals():
            rename_noreplace(path, trash.folder)
    except BaseException:
        trash.release(remove_folder=trash.folder.exists())  # moved already: finish what was asked
        raise
    return trash.release(remove_folder=True)


# -- the sweep ------------------------------------------------------------------------------------
def sweep(parent: Path, held_name: str | None = None) -> list[str]:
    """Remove leftovers whose owner is gone (their lock is free); put back a set-aside old env."""
    notes: list[str] = []
    try:
        entries = sorted(parent.iterdir()) if parent.is_dir() else []
    except OSError:
        return notes
    for lock in entries:
        match = _LEFTOVER.match(lock.name)
        if not match:
            if lock.name.endswith(".envkit-lock") and lock.name.startswith(".") and lock.name != (
                    f".{held_name}.envkit-lock"):
                _drop_target_lock(lock)
            continue
        fd = try_lock(lock)
        if fd is None:
            continue  # its owner is alive (whatever PID namespace or host it runs in)
        try:
            notes += _sweep_one(parent, lock, match.group(1), match.group(2), fd, held_name)
        finally:
            os.close(fd)
    return notes


def leftovers_in(parent: Path) -> list[tuple[str, Path]]:
    """What a sweep of `parent` would deal with now, touching nothing: ("old", folder) for a set-aside env it
    would put back, ("staging", folder) for a staging, trash or half-built folder it would remove. Only this
    user's markers whose lock is free (their owner is gone) count, as in the sweep itself."""
    found: list[tuple[str, Path]] = []
    try:
        entries = sorted(parent.iterdir()) if parent.is_dir() else []
    except OSError:
        return found
    for lock in entries:
        match = _LEFTOVER.match(lock.name)
        if not match:
            continue
        fd = try_lock(lock)
        if fd is None:
            continue
        try:
            if os.fstat(fd).st_uid != os.geteuid():
                continue
            try:
                data = json.loads(os.pread(fd, 1 << 16, 0).decode("utf-8") or "{}")
            except (OSError, ValueError, UnicodeDecodeError):
                data = {}
        finally:
            os.close(fd)
        folder = parent / lock.name[: -len(".lock")]
        if isinstance(data, dict) and data.get("envkit") == match.group(1) and (folder.exists() or folder.is_symlink()):
            found.append(("old" if match.group(1) == OLD and not data.get("replaced") else "staging", folder))
    return found


def _drop_target_lock(path: Path) -> None:
    """A per-target lock file left by a killed run: removed while locked (waiters re-check the inode)."""
    try:
        with flocked(path, blocking=False):
            pass
    except (Locked, OSError):
        pass


def _sweep_one(parent: Path, lock: Path, kind: str, name: str, fd: int, held_name: str | None) -> list[str]:
    if os.fstat(fd).st_uid != os.geteuid():
        return []  # another user's leftover (or a planted marker in a shared folder): theirs to sweep
    try:
        data = json.loads(os.pread(fd, 1 << 16, 0).decode("utf-8") or "{}")
    except (OSError, ValueError, UnicodeDecodeError):
        data = {}
    folder = parent / lock.name[: -len(".lock")]
    target = parent / name
    if not (isinstance(data, dict) and data.get("envkit") == kind and data.get("folder") == str(folder)):
        if not folder.exists():  # killed before the marker was written: only the empty lock is left
            lock.unlink(missing_ok=True)
        return []
    notes: list[str] = []
    if kind in (OLD, BUILDING):
        if name != held_name:
            try:
                with flocked(lock_path(target), blocking=False):
                    notes += _recover(kind, folder, target, data)
            except Locked:
                return []  # a live create of that name will finish its own recovery
        else:
            notes += _recover(kind, folder, target, data)
        if kind == OLD and folder.exists():
            return notes  # kept (the name is taken by something else): never deleted
    elif folder.exists() or folder.is_symlink():
        shutil.rmtree(folder, ignore_errors=True)
        if folder.exists():
            notes.append(f"could not remove the leftover staging folder {folder}: remove it with rm -rf {folder}")
            return notes
        notes.append(f"removed a stale staging folder {folder.name} (its envkit run had ended)")
    lock.unlink(missing_ok=True)
    return notes


def _recover(kind: str, folder: Path, target: Path, data: dict[str, Any]) -> list[str]:
    """An interrupted --force: take back the old env; an interrupted external build: drop the half-made one."""
    notes: list[str] = []
    if kind == BUILDING:
        aside = Path(str(data["aside"])) if data.get("aside") else None
        if aside is not None and (aside.parent != target.parent or not aside.name.startswith(f"{OLD}.{target.name}.")):
            return [f"ignored {folder.name}.lock: it names a folder that is not this env's set-aside copy"]
        if target.exists() and target.stat().st_uid != os.geteuid():
            return []
        if target.exists() and not target.is_symlink() and has_conda_meta(target) or _empty_dir(target):
            trash(target)
            notes.append(f"removed the half-made {target} (an external-engine create was interrupted)")
        if aside is not None and aside.exists() and not target.exists():
            with quiet_signals():
                rename_noreplace(aside, target)
            Path(f"{aside}.lock").unlink(missing_ok=True)
            notes.append(f"restored {target} (a previous --force rebuild was interrupted)")
        return notes
    # OLD: the old env of an interrupted --force
    if data.get("replaced") or not (folder.exists() or folder.is_symlink()):
        # the rebuild had passed verify and the old env was being deleted (or is gone): finish, never restore
        if folder.exists() or folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
            notes.append(f"finished removing the replaced old env {folder.name}")
        return notes
    if target.exists() and data.get("new_id") and ownership(target, str(data["new_id"])).owned:
        # the rebuild was swapped in but never passed verify: the old env wins
        trash(target)
        notes.append(f"dropped the unverified rebuild of {target}")
    if not target.exists():
        with quiet_signals():
            rename_noreplace(folder, target)
        notes.append(f"restored {target} (a previous --force rebuild was interrupted)")
    else:
        notes.append(f"kept the old env of an interrupted --force at {folder}: {target} is taken by something "
                     f"else now (move it back by hand: mv {folder} <new name>)")
    return notes


def _empty_dir(path: Path) -> bool:
    try:
        return path.is_dir() and not path.is_symlink() and not any(path.iterdir())
    except OSError:
        return False

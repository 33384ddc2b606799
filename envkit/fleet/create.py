"""`envkit fleet create`: select for the fleet -> solve once -> bundle -> install on every node in parallel.

Every node installs the same bundle with `envkit create NAME --bundle DIR` (no network needed on
the node; each install is atomic, so a node that fails keeps nothing half-made). Prefixes are either
node-local (a path holding `{node}`: one env per node, e.g. on local scratch disks) or one shared path
(created once, by the first node, then checked from every node). Afterwards every node reports the
package records it sees; they must be identical.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from envkit.errors import EnvkitError
from envkit.fleet import nodejson
from envkit.fleet.inventory import Inventory, inventory
from envkit.fleet.launcher import Launcher, NodeRun, NodeSlot, envkit_argv, run_all
from envkit.fleet.select import FleetSelection, select_fleet, select_per_partition
from envkit.fsutil import remove_at_exit
from envkit.lock.bundle import MANIFEST, load_bundle
from envkit.models import Request
from envkit.prefix.locations import default_prefix

if TYPE_CHECKING:
    from envkit.lock.bundle import Bundle

# fleet create's make_bundle: (the fleet's build, or None for a file taken as is; the folder) -> the bundle written
MakeBundle = Callable[[FleetSelection | None, Path], "Bundle"]

CREATE_TIMEOUT = 1800.0
DEFAULT_REQUEST = Request()  # newest torch, conda-forge, CUDA as detected on the nodes
CHECK_TIMEOUT = 120.0
# Runs with the env's own python on each node: which package records does this node see?
_CHECK = ("import json, os, sys; m = os.path.join(sys.prefix, 'conda-meta'); "
          "print(json.dumps({'prefix': sys.prefix, 'records': sorted(f for f in os.listdir(m) "
          "if f.endswith('.json'))}))")
_CREATE_THEN_CHECK = 'py="$1"; check="$2"; shift 2; "$@" || exit $?; exec "$py" -I -c "$check"'

# Nodes without the bundle's filesystem. `--stage-bundle auto` first asks each node to install from the
# bundle's own path and only nodes that cannot read its manifest there answer with this marker (no extra
# round trip where the folder is shared); those then get the bundle staged.
NO_BUNDLE = "@@ENVKIT-NO-BUNDLE@@"
NO_BUNDLE_RC = 86
# Staging: the login node tars the bundle once and each node's own srun carries it on stdin (srun forwards
# its stdin to the task: srun(1) "IO Redirection"), behind the gate (STAGE_TAR below); the node unpacks it
# into a fresh folder under its node-local DIR ($TMPDIR, else /tmp), installs from there (envkit create
# --bundle checks every sha256 of the manifest on the node before installing) and removes the staged copy
# whatever the outcome. Slurm's sbcast is not used: it works only inside a job allocation ("sbcast is used
# to transmit a file to all nodes allocated to the currently active Slurm job. This command should only be
# executed from within a Slurm batch job or within the shell spawned after a Slurm job's resource
# allocation", sbcast(1)), so outside one envkit would have to hold an allocation of its own; and it writes
# one DEST path on every node, which collides where several slurmd share one host (the local test
# cluster). The stdin pull works inside and outside an allocation, through the same one srun per node.
STAGE_MODES = ("auto", "always", "never")
# Nodes start while the login node still solves and downloads: `envkit create --bundle DIR --bundle-gate`
# loads everything it will need (the interpreter, envkit, py-rattler: ~0.25 s, far more from a cold
# NFS home) and, outside an allocation, srun waits for its nodes meanwhile; then it waits for one line on
# stdin. GO: the bundle is complete at DIR. STAGE_TAR: a tar of it follows on stdin (the node has no
# access to DIR): unpacked into a fresh folder under the node-local stage dir, installed from there and
# removed whatever the outcome. Anything else, or the end of stdin (fleet create failed or was stopped):
# the node leaves, having made nothing.
GO = "go"
STAGE_TAR = "tar"
GATE_CLOSED_RC = 87


def wait_for_go(bundle_dir: Path, stage_base: str | None = None) -> Path:
    """The node's side of the gate (see GO); returns the folder to install from (DIR, or the staged copy,
    which is removed when envkit exits). After a GO, the probe `--stage-bundle auto` relies on."""
    import importlib
    import os
    import sys

    for module in ("envkit.create", "envkit.lock.bundle", "envkit.engines.rattler_engine", "envkit.lock.file",
                   "envkit.detect.sources", "envkit.cli.output", "rattler", "rich.console", "pynvml", "tarfile"):
        try:
            importlib.import_module(module)
        except ImportError:  # reported where it is really needed, with its own fix
            pass
    line = bytearray()
    while not line.endswith(b"\n"):  # byte by byte: nothing after the line is taken from stdin
        chunk = os.read(0, 1)
        if not chunk:
            break
        line += chunk
    word = line.decode(errors="replace").strip()
    if word == STAGE_TAR:
        return receive_staged_bundle(stage_base)
    if word != GO:
        print("error: fleet create stopped before the bundle was complete; nothing was made on this node",
              file=sys.stderr)
        raise SystemExit(GATE_CLOSED_RC)
    if not os.access(bundle_dir / MANIFEST, os.R_OK):
        print(NO_BUNDLE, flush=True)
        raise SystemExit(NO_BUNDLE_RC)
    return bundle_dir


def receive_staged_bundle(stage_base: str | None) -> Path:
    """Unpack the tar on stdin into a fresh folder under `stage_base` ($TMPDIR, else /tmp); the folder is
    removed when envkit exits, also on SIGTERM/SIGHUP (srun's way of stopping a step)."""
    import os
    import signal
    import tarfile
    import tempfile

    def leave(signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # unwinds through envkit's exit path, which removes the folder

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, leave)
    base = Path(stage_base or os.environ.get("TMPDIR") or "/tmp")
    try:
        base.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="envkit-bundle.", dir=base))
    except OSError as exc:
        raise EnvkitError(f"cannot make a folder for the staged bundle under {base}: {exc.strerror or exc}",
                          "give --stage-dir a node-local folder this user can write") from exc
    remove_at_exit(folder)
    try:
        with os.fdopen(0, "rb", closefd=False) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            if hasattr(tarfile, "data_filter"):  # 3.12, 3.11.4+, 3.10.12+: no links out, no absolute names
                tar.extractall(folder, filter="data")
            else:
                for member in tar:
                    if member.name.startswith("/") or ".." in Path(member.name).parts or member.islnk() \
                            or member.issym() or not (member.isfile() or member.isdir()):
                        raise tarfile.TarError(f"refused member {member.name!r}")
                    tar.extract(member, folder)
    except (OSError, tarfile.TarError) as exc:
        raise EnvkitError(f"could not unpack the staged bundle into {folder}: {exc}",
                          "check the space in the node's stage dir (--stage-dir), then run fleet create again"
                          ) from exc
    return folder


@dataclass(frozen=True)
class NodeCreate:
    node: str
    ok: bool
    prefix: str | None
    packages: int | None = None
    digest: str | None = None  # sha256 over the sorted record file names the node sees
    seconds: float = 0.0
    error: str | None = None
    phase: str = "install"  # install | check | select
    staged: bool = False  # installed from a copy of the bundle staged on the node


@dataclass(frozen=True)
class FleetCreate:
    name: str
    nodes: tuple[NodeCreate, ...]
    bundle: str
    shared: bool
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)
    fleet: FleetSelection | None = None  # when this run selected (not when given a bundle)
    partition: str | None = None  # --per-partition: the partition this build is for

    @property
    def failed(self) -> tuple[NodeCreate, ...]:
        return tuple(n for n in self.nodes if not n.ok)

    @property
    def identical(self) -> bool:
        return len({n.digest for n in self.nodes if n.ok}) <= 1

    @property
    def ok(self) -> bool:
        return not self.failed and self.identical

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "identical": self.identical, "bundle": self.bundle,
                "shared_prefix": self.shared, "seconds": round(self.seconds, 3),
                "phases_s": {k: round(v, 3) for k, v in self.phases.items()},
                "fleet": self.fleet.to_json() if self.fleet is not None else None, "partition": self.partition,
                "staged": [n.node for n in self.nodes if n.staged],
                "nodes": [{"node": n.node, "ok": n.ok, "prefix": n.prefix, "packages": n.packages,
                           "digest": n.digest, "seconds": round(n.seconds, 3), "error": n.error, "phase": n.phase,
                           "staged": n.staged}
                          for n in self.nodes]}


def prefix_for(template: str | None, name: str, node: str) -> str | None:
    return template.replace("{node}", node) if template else None


def _error_of(run: NodeRun) -> str:
    """The envkit error line(s) a node printed, else the launch error."""
    if run.error:
        return run.error
    lines = [ln.strip() for ln in run.stderr.splitlines() if ln.strip()]
    picked = [ln for ln in lines if ln.startswith(("error:", "fix:"))]
    return " ".join(picked or lines[-3:]) or f"exited with code {run.returncode}"


def _check(run: NodeRun) -> tuple[str | None, int | None, str | None]:
    """(digest, record count, error) from the check command's output."""
    if not run.ok:
        return None, None, _error_of(run)
    lines = run.stdout.strip().splitlines()
    try:
        data = nodejson.parse_object(lines[-1] if lines else "", "the record list")
        if data.get("records") is None:
            raise nodejson.NodeDataError("field records is missing")
        records = nodejson.texts(data, "records")
    except nodejson.NodeDataError as exc:
        return None, None, f"the env's python printed no record list ({exc}): {run.stderr_tail(3)}"
    return hashlib.sha256("\n".join(records).encode()).hexdigest(), len(records), None


def tar_bundle(bundle_dir: Path, dest: Path) -> Path:
    """The bundle as one uncompressed tar (its archives are compressed already), made once for every node."""
    import tarfile

    out = dest / "bundle.tar"
    with tarfile.open(out, "w") as tar:
        for item in sorted(bundle_dir.iterdir()):
            tar.add(item, arcname=item.name)
    return out


def _needs_bundle(run: NodeRun) -> bool:
    return run.error is None and run.returncode == NO_BUNDLE_RC and NO_BUNDLE in run.stdout


def install_everywhere(launcher: Launcher, nodes: Sequence[NodeSlot], name: str, bundle_dir: Path, *,
                       prefix_template: str | None = None, force: bool = False, timeout: float = CREATE_TIMEOUT,
                       stage: str = "auto", stage_dir: str | None = None,
                       on_event: Callable[[str, str, NodeRun | None], None] | None = None,
                       make: Callable[[], None] | None = None, early: bool = True
                       ) -> tuple[list[NodeCreate], bool, dict[str, float]]:
    """`envkit create NAME --bundle DIR` on each node (or once, for a shared prefix), then a check everywhere.
    `stage`: auto (stage the bundle onto the nodes that cannot read it at its path), always, never.
    `make`: writes the bundle at `bundle_dir` while the nodes start (see GO); its error is raised after
    every node has left. None: the bundle is there already. `early=False`: make it first, then start the
    nodes (they are held only for the install)."""
    shared = prefix_template is None or "{node}" not in prefix_template
    rollout = _Rollout(launcher, name, bundle_dir, prefix_template, force, timeout, stage, stage_dir, on_event, make,
                       shared_prefix=prefix_template or str(default_prefix(name)),
                       bundle_path=str(bundle_dir.absolute()))
    if make is not None and not early:
        rollout.make_first()
    usable = [n for n in nodes if n.usable]
    made_before = rollout.phases.get("solve+bundle", 0.0)  # --no-early-start: made before the nodes started
    start = time.perf_counter()
    results: dict[str, NodeCreate] = {n.name: NodeCreate(n.name, False, None, error=n.reason, phase="select")
                                      for n in nodes if not n.usable}
    try:
        runs = rollout.install(usable[:1] if shared else usable)
    finally:
        rollout.drop_workdir()
    rollout.phases["install"] = (time.perf_counter() - start
                                 - (rollout.phases.get("solve+bundle", 0.0) - made_before))
    if shared and rollout.shared_failed(runs, usable, results):
        return [results[n.name] for n in nodes], shared, rollout.phases
    rollout.record(runs, results)
    rollout.check_the_rest([n for n in usable if n.name not in results], results)
    return [results[n.name] for n in nodes], shared, rollout.phases


@dataclass
class _Rollout:
    """One install_everywhere: what each node runs (create behind the gate, then the record check), how
    the bundle reaches it (its path, or staged through stdin), and what the run did so far."""

    launcher: Launcher
    name: str
    bundle_dir: Path
    prefix_template: str | None
    force: bool
    timeout: float
    stage: str  # auto | always | never (STAGE_MODES)
    stage_dir: str | None
    on_event: Callable[[str, str, NodeRun | None], None] | None
    make: Callable[[], None] | None  # writes the bundle; None once made (or when it was there already)
    shared_prefix: str
    bundle_path: str
    phases: dict[str, float] = field(default_factory=dict)
    staged: set[str] = field(default_factory=set)  # nodes the bundle was staged onto
    workdir: Path | None = None  # where the one tar for staged nodes lies

    # -- what each node runs ----------------------------------------------------------------------
    def python_on(self, node: NodeSlot) -> str:
        return str(Path(prefix_for(self.prefix_template, self.name, node.name) or self.shared_prefix) / "bin" / "python")

    def create_argv(self, node: NodeSlot) -> list[str]:
        """create behind the gate, then (same srun, no second round trip) the record check with the new
        env's python. The node probes for the bundle itself, after the go."""
        argv = [*envkit_argv(), "create", self.name, "--bundle", self.bundle_path, "--no-verify", "--quiet",
                "--bundle-gate"]
        prefix = prefix_for(self.prefix_template, self.name, node.name)
        if prefix:
            argv += ["--prefix", prefix]
        if self.force:
            argv.append("--force")
        base = (self.stage_dir or "").replace("{node}", node.name)
        if base:
            argv += ["--bundle-stage-dir", base]
        return ["sh", "-c", _CREATE_THEN_CHECK, "envkit-fleet-create", self.python_on(node), _CHECK, *argv]

    def check_argv(self, node: NodeSlot) -> list[str]:
        return [self.python_on(node), "-I", "-c", _CHECK]

    # -- the bundle: made, tarred once, sent to staged nodes ---------------------------------------
    def make_first(self) -> None:
        """--no-early-start: the bundle is made before any node starts."""
        assert self.make is not None
        t0 = time.perf_counter()
        self.make()
        self.phases["solve+bundle"] = time.perf_counter() - t0
        self.make = None

    def tar_once(self) -> None:
        if self.workdir is None:
            t0 = time.perf_counter()
            self.workdir = Path(tempfile.mkdtemp(prefix="envkit-stage-"))
            tar_bundle(self.bundle_dir, self.workdir)
            self.phases["tar"] = time.perf_counter() - t0

    def make_and_tar(self) -> None:
        if self.make is not None:
            t0 = time.perf_counter()
            self.make()
            self.phases["solve+bundle"] = time.perf_counter() - t0
        self.tar_once()

    def send_tar(self, fd: int) -> None:
        """The gate of a staged node: STAGE_TAR, then the tar itself (sendfile: no copy through Python)."""
        assert self.workdir is not None
        os.write(fd, f"{STAGE_TAR}\n".encode())
        with (self.workdir / "bundle.tar").open("rb") as tar:
            size, offset = os.fstat(tar.fileno()).st_size, 0
            while offset < size:
                sent = os.sendfile(fd, tar.fileno(), offset, size - offset)
                if sent == 0:
                    break
                offset += sent

    def drop_workdir(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- the install ------------------------------------------------------------------------------
    def quiet(self, node: str, what: str, run: NodeRun | None) -> None:
        """--stage-bundle auto: a node's first answer "no bundle here" is not shown (it is staged next)."""
        if self.on_event and not (self.stage == "auto" and run is not None and _needs_bundle(run)):
            self.on_event(node, what, run)

    def install(self, targets: Sequence[NodeSlot]) -> list[NodeRun]:
        """Every path goes through the gate: the nodes start at once and wait while the bundle is made
        (`make`), or just as long as the gate takes to open (a bundle that exists already)."""
        if self.stage == "always":
            self.staged.update(n.name for n in targets)
            return _gated(self.launcher, targets, self.create_argv, self.make_and_tar, timeout=self.timeout,
                          on_event=self.quiet, feed=self.send_tar)
        runs = _gated(self.launcher, targets, self.create_argv, self.make or (lambda: None), timeout=self.timeout,
                      on_event=self.quiet, phases=self.phases if self.make else None)
        missing = {r.node for r in runs if _needs_bundle(r)}
        if self.stage == "never":
            return [_unreadable(r, self.bundle_path) if r.node in missing else r for r in runs]
        if not missing:
            return runs
        self.staged.update(missing)
        again = _gated(self.launcher, [n for n in targets if n.name in missing], self.create_argv, self.tar_once,
                       timeout=self.timeout, on_event=self.on_event or (lambda *_: None), feed=self.send_tar)
        by_node = {r.node: r for r in again}
        return [by_node.get(r.node, r) for r in runs]

    # -- the rows ---------------------------------------------------------------------------------
    def shared_failed(self, runs: Sequence[NodeRun], usable: Sequence[NodeSlot],
                      results: dict[str, NodeCreate]) -> bool:
        """A shared prefix the first node could not create: its row, and every other node's "not checked"."""
        failed_first = [r for r in runs if not r.ok]
        for run in failed_first:
            results[run.node] = NodeCreate(run.node, False, self.prefix_template, seconds=run.seconds,
                                           error=_error_of(run), staged=run.node in self.staged)
        if not failed_first:
            return False
        for node in usable[1:]:
            results[node.name] = NodeCreate(node.name, False, self.prefix_template,
                                            error=f"not checked: the shared prefix was not created on "
                                                  f"{failed_first[0].node}", phase="check")
        return True

    def record(self, runs: Sequence[NodeRun], results: dict[str, NodeCreate]) -> None:
        """The rows of the nodes that installed: failed, or the record check their run ended with."""
        for run in runs:
            where = prefix_for(self.prefix_template, self.name, run.node) or self.shared_prefix
            if not run.ok:
                results[run.node] = NodeCreate(run.node, False, where, seconds=run.seconds, error=_error_of(run),
                                               staged=run.node in self.staged)
                continue
            digest, count, error = _check(run)
            results[run.node] = NodeCreate(run.node, error is None, where, count, digest, run.seconds, error,
                                           "check" if error else "done", run.node in self.staged)

    def check_the_rest(self, to_check: Sequence[NodeSlot], results: dict[str, NodeCreate]) -> None:
        """A shared prefix: the nodes that did not create it check the records they see there."""
        start = time.perf_counter()
        for run in run_all(self.launcher, to_check, self.check_argv, timeout=CHECK_TIMEOUT):
            digest, count, error = _check(run)
            results[run.node] = NodeCreate(run.node, error is None, self.shared_prefix, count, digest, run.seconds,
                                           error, "check" if error else "done")
        self.phases["check"] = time.perf_counter() - start


def _unreadable(run: NodeRun, bundle_path: str) -> NodeRun:
    """--stage-bundle never, and the node cannot read the bundle where the login node wrote it."""
    from dataclasses import replace

    return replace(run, stdout="", stderr=f"error: this node cannot read the bundle at {bundle_path} (not on a "
                   "filesystem it shares with the login node?)\nfix: give --bundle-dir a shared folder, or stage "
                   "it onto the nodes: --stage-bundle auto")


def _gated(launcher: Launcher, targets: Sequence[NodeSlot], argv_for: Callable[[NodeSlot], list[str]],
           make: Callable[[], None], *, timeout: float, on_event: Callable[[str, str, NodeRun | None], None],
           phases: dict[str, float] | None = None, feed: Callable[[int], None] | None = None) -> list[NodeRun]:
    """Start every node's install at once, each waiting on a pipe for the GO, then make the bundle and
    open the gates; a failed `make` closes them instead (the nodes leave, having made nothing) and is
    raised once every node has answered. Node timeouts count from the gates' opening. `feed(fd)` writes
    what opens one gate (default: the GO line), one thread per node (a staged tar can be large)."""
    import os
    import threading
    from concurrent.futures import ThreadPoolExecutor

    if not targets:  # nothing to install on, but the bundle (and its errors) still come
        t0 = time.perf_counter()
        make()
        if phases is not None:
            phases["solve+bundle"] = time.perf_counter() - t0
        return []
    gates = {n.name: os.pipe() for n in targets}
    unsent = {n.name: gates[n.name][0] for n in targets}  # read ends not yet handed to a node's stdin
    opened = threading.Event()
    aborted = False
    finished: set[str] = set()
    lock = threading.Lock()

    def hand_over(node: NodeSlot) -> int:
        with lock:
            return unsent.pop(node.name)  # proc.run closes it once the node's srun has its copy

    def relay(node: str, what: str, run: NodeRun | None) -> None:
        """Started nodes show as waiting until the go; after a failed `make` their ends are "stopped"."""
        with lock:
            if what == "running":
                on_event(node, "waiting", None)
                return
            finished.add(node)
            on_event(node, "stopped" if aborted else what, run)

    def go(fd: int) -> None:
        os.write(fd, f"{GO}\n".encode())

    def open_one(write: int, send: Callable[[int], None] | None) -> None:
        try:
            if send is not None:
                send(write)
        except OSError:  # that node is gone already (its srun closed the pipe): its own row says why
            pass
        finally:
            os.close(write)

    def open_gates(send: Callable[[int], None] | None) -> None:
        with ThreadPoolExecutor(max_workers=min(64, len(gates))) as writers:
            for _read, write in gates.values():
                writers.submit(open_one, write, send)
        opened.set()

    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            runs = pool.submit(run_all, launcher, targets, argv_for, timeout=timeout, on_event=relay,
                               stdin_for=hand_over, timeout_from=opened)
            t0 = time.perf_counter()
            try:
                make()
            except BaseException:
                with lock:
                    aborted = True
                open_gates(None)  # closed without a word: every node leaves
                runs.result()
                raise
            finally:
                if phases is not None:
                    phases["solve+bundle"] = time.perf_counter() - t0
            with lock:
                for node in targets:
                    if node.name not in finished:
                        on_event(node.name, "running", None)
            open_gates(feed or go)
            return runs.result()
    finally:
        if not opened.is_set():
            open_gates(None)
        for read in unsent.values():
            os.close(read)


def fleet_create(launcher: Launcher, name: str, *, bundle_dir: Path,
                 make_bundle: MakeBundle | None, request: Request = DEFAULT_REQUEST,
                 prefix_template: str | None = None, force: bool = False, timeout: float = CREATE_TIMEOUT,
                 select: bool = True, stage: str = "auto", stage_dir: str | None = None, early: bool = True,
                 on_step: Callable[[str], None] | None = None,
                 on_event: Callable[[str, str, NodeRun | None], None] | None = None) -> FleetCreate:
    """With `make_bundle` ((FleetSelection, folder) -> Bundle): inventory, select, then solve once and bundle
    while the nodes start (`select=False`: a file taken literally has nothing to select); else install the
    existing bundle at `bundle_dir`. Then install everywhere."""
    step = on_step or (lambda _t: None)
    start = time.perf_counter()
    phases: dict[str, float] = {}
    fleet = None
    slots = launcher.nodes()
    make = None
    if make_bundle is not None:
        if select:
            step(f"detecting {len(slots)} node(s)")
            t0 = time.perf_counter()
            inv = inventory(launcher, request)
            fleet = select_fleet(inv.nodes, request)
            phases["detect+select"] = time.perf_counter() - t0
            if fleet.selection is None:
                raise EnvkitError(fleet.error or "no build fits the fleet", fleet.hint)
            _say_build(step, fleet)
            slots = _mark_unreachable(slots, inv)
        else:
            step("the file is taken as is (--no-adapt): nothing to select, solving once")
        make = _maker(make_bundle, fleet, bundle_dir, step, sum(s.usable for s in slots))
    else:
        t0 = time.perf_counter()
        bundle = load_bundle(bundle_dir)
        phases["check bundle"] = time.perf_counter() - t0
        step(f"installing on {sum(s.usable for s in slots)} node(s) from {bundle.root}")
    rows, shared, install_phases = install_everywhere(launcher, slots, name, bundle_dir,
                                                      prefix_template=prefix_template, force=force, timeout=timeout,
                                                      stage=stage, stage_dir=stage_dir, on_event=on_event, make=make,
                                                      early=early)
    phases.update(install_phases)
    return FleetCreate(name, tuple(rows), str(bundle_dir), shared, time.perf_counter() - start, phases, fleet)


def _maker(make_bundle: MakeBundle, fleet: FleetSelection | None, bundle_dir: Path, step: Callable[[str], None],
           nodes: int) -> Callable[[], None]:
    """The bundle-making step handed to install_everywhere (it runs while the nodes start)."""
    def make() -> None:
        bundle = make_bundle(fleet, bundle_dir)
        step(f"installing on {nodes} node(s) from {bundle.root}")

    return make


def _say_build(step: Callable[[str], None], fleet: FleetSelection) -> None:
    sel = fleet.selection
    assert sel is not None  # said only for a fleet that has a build
    where = f"partition {fleet.partition}: " if fleet.partition else ""
    step(f"{where}fleet build: torch {sel.torch} " + (f"CUDA {sel.cuda}" if sel.cuda else "CPU") +
         f", python {sel.python} ({fleet.reasons[0] if fleet.reasons else ''})")


def _mark_unreachable(slots: Sequence[NodeSlot], inv: Inventory) -> list[NodeSlot]:
    """Nodes whose detect failed take no part: they become failed rows with detect's reason."""
    answered = {n.node for n in inv.nodes if n.ok}
    unreachable = {n.node: n.error for n in inv.nodes if not n.ok}
    return [s if s.name in answered else NodeSlot(s.name, s.partition, s.state,
                                                  f"detect failed: {unreachable.get(s.name) or s.reason}")
            for s in slots]


def _prefixed(step: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda text: step(prefix + text)


def fleet_create_per_partition(launcher: Launcher, name: str, *, bundle_dir: Path,
                               make_bundle: MakeBundle, request: Request = DEFAULT_REQUEST,
                               prefix_template: str | None = None, force: bool = False,
                               timeout: float = CREATE_TIMEOUT, stage: str = "auto", stage_dir: str | None = None,
                               early: bool = True, on_step: Callable[[str], None] | None = None,
                               on_event: Callable[[str, str, NodeRun | None], None] | None = None
                               ) -> list[FleetCreate]:
    """One build per partition (when one build cannot fit all): detect every node once, select per
    partition, solve and bundle once per partition (bundle_dir/<partition>), install each partition's
    nodes from its own bundle. A partition without a build is a result whose nodes all failed with its
    reason; the others still install."""
    step = on_step or (lambda _t: None)
    slots = launcher.nodes()
    step(f"detecting {len(slots)} node(s)")
    t0 = time.perf_counter()
    inv = inventory(launcher, request)
    fleets = select_per_partition(inv.nodes, request)
    detect_s = time.perf_counter() - t0
    slots = _mark_unreachable(slots, inv)
    results: list[FleetCreate] = []
    for fleet in fleets:
        start = time.perf_counter()
        partition = fleet.partition or "(none)"
        members = [s for s in slots if (s.partition or "(none)") == partition]
        phases = {"detect+select": detect_s}
        if fleet.selection is None:
            why = f"no build for partition {partition}: {fleet.error or '?'}"
            none = tuple(NodeCreate(s.name, False, None, error=why, phase="select") for s in members)
            results.append(FleetCreate(name, none, "", True, 0.0, phases, fleet, partition))
            continue
        _say_build(step, fleet)
        folder = bundle_dir / partition
        make = _maker(make_bundle, fleet, folder, _prefixed(step, f"partition {partition}: "),
                      sum(s.usable for s in members))
        template = prefix_template.replace("{partition}", partition) if prefix_template else None
        rows, shared, install_phases = install_everywhere(launcher, members, name, folder,
                                                          prefix_template=template, force=force,
                                                          timeout=timeout, stage=stage, stage_dir=stage_dir,
                                                          on_event=on_event, make=make, early=early)
        phases.update(install_phases)
        results.append(FleetCreate(name, tuple(rows), str(folder), shared,
                                   time.perf_counter() - start + detect_s, phases, fleet, partition))
    return results

"""Run one command on each node of a fleet: through Slurm's `srun`, or as local processes.

One `srun` per node, all in parallel: a dead or slow node then fails alone, within its timeout,
instead of holding a multi-node step hostage (an srun to a node whose slurmd died fails only after
about 11 s, and a step over several nodes waits for all of them: slurm-local.md). Nodes are named
by `SLURMD_NODENAME` as the task itself reports it, never by hostname (several nodes can share one,
srun(1) "OUTPUT ENVIRONMENT VARIABLES"). A launcher is anything with `nodes`, `run` and `address`,
so another engine (Ray, Kubernetes jobs) can follow behind the same interface.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import shlex
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from envkit import proc
from envkit.detect import detect
from envkit.errors import EnvkitError, UsageError

NODE_MARKER = "@@ENVKIT-NODE@@"
# The task says who it is before running the command: Slurm sets SLURMD_NODENAME on the node,
# the local launcher sets ENVKIT_FLEET_NODE. "$@" keeps the argv intact (no string is interpolated).
_WRAP = f'echo "{NODE_MARKER} ${{SLURMD_NODENAME:-$ENVKIT_FLEET_NODE}}"; exec "$@"'
DEFAULT_TIMEOUT = 120.0
MAX_PARALLEL = 64
# What envkit keeps of one node's run: the first OUTPUT_CAP bytes of stdout (the node marker comes first,
# and envkit's own reports are a few KiB: more is a node flooding, reported as a failed row) and the last
# STDERR_CAP bytes of stderr (errors come last); the rest is read and dropped, never held.
OUTPUT_CAP = 8 << 20
STDERR_CAP = 1 << 20
# The most nodes one fleet command takes (a --nodes count, a --nodelist or allocation expanded, sinfo's
# list), and the most pseudo nodes the local launcher starts on one machine.
MAX_NODES = 16384
MAX_LOCAL_NODES = 256
_ENVKIT_FIX = ("fix the quoting, e.g. export ENVKIT_FLEET_ENVKIT='/shared/envkit/bin/envkit', "
               "or unset it to run this interpreter (python -m envkit) on the nodes")


def envkit_argv() -> list[str]:
    """How a node runs envkit: ENVKIT_FLEET_ENVKIT (a command line, split as POSIX sh words, never run
    by a shell) or this very interpreter, which works wherever envkit sits on a filesystem the nodes
    share (the usual cluster home)."""
    custom = os.environ.get("ENVKIT_FLEET_ENVKIT")
    if not custom:
        return [sys.executable, "-m", "envkit"]
    try:
        argv = shlex.split(custom)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise UsageError(f"ENVKIT_FLEET_ENVKIT={custom!r} is not a command line: {exc}", _ENVKIT_FIX) from None
    if not argv:
        raise UsageError("ENVKIT_FLEET_ENVKIT is set but names no command", _ENVKIT_FIX)
    return argv


def hostlist_count(expression: str) -> int:
    """How many names a Slurm hostlist (n[1-4,7],gpu[01-02]r[1-2]) expands to, counted without expanding
    it: comma-separated items, each the product of its bracket groups' sizes, a group a comma list of
    numbers and lo-hi ranges (scontrol(1) "show hostnames"; slurm.conf(5) NodeName ranges)."""
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for char in expression:
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        depth += 1 if char == "[" else -1 if char == "]" and depth > 0 else 0
        current.append(char)
    items.append("".join(current))
    total = 0
    for item in (i.strip() for i in items):
        if not item:
            continue
        size = 1
        for group in re.findall(r"\[([^\[\]]*)\]", item):
            count = 0
            for part in group.split(","):
                bounds = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", part)
                count += abs(int(bounds[2]) - int(bounds[1])) + 1 if bounds else 1
            size *= max(count, 1)
        total += size
    return total


@dataclass(frozen=True)
class SrunOptions:
    """srun options passed through as given (srun(1))."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None
    gpus_per_node: int | None = None
    extra: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        out: list[str] = []
        if self.account:
            out.append(f"--account={self.account}")
        if self.time:
            out.append(f"--time={self.time}")
        if self.gpus_per_node is not None:
            out.append(f"--gpus-per-node={self.gpus_per_node}")
        for item in self.extra:
            try:
                out += shlex.split(item)
            except ValueError as exc:  # an unbalanced quote: "No closing quotation"
                raise UsageError(f"--srun-arg {item!r} is not a list of srun arguments: {exc}",
                                 "balance the quotes, or give each srun option as its own "
                                 "--srun-arg, e.g. --srun-arg=--comment=nightly") from None
        return out


@dataclass(frozen=True)
class NodeRequest:
    """Which nodes: a partition, a count, an explicit list, minus exclusions."""

    partition: str | None = None
    count: int | None = None
    nodelist: str | None = None
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeSlot:
    """A node the launcher knows of; `reason` says why it cannot be used (None: usable)."""

    name: str
    partition: str | None = None
    state: str | None = None
    reason: str | None = None

    @property
    def usable(self) -> bool:
        return self.reason is None


@dataclass(frozen=True)
class NodeRun:
    """One command on one node: what it printed, or why it never ran."""

    node: str
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    error: str | None = None  # the launch failed or timed out (not the command's own failure)
    dropped: int = 0  # bytes of output read and discarded (over OUTPUT_CAP / STDERR_CAP)

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0

    def stderr_tail(self, lines: int = 6) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-lines:])


class Launcher(Protocol):
    kind: str

    def nodes(self) -> list[NodeSlot]: ...

    def run(self, node: NodeSlot, argv: Sequence[str], *, timeout: float,
            env: Mapping[str, str] | None = None, stdin: str | int | None = None,
            timeout_from: threading.Event | None = None) -> NodeRun: ...

    def address(self, node: str) -> str: ...


def run_node(argv: Sequence[str], *, timeout: float, env: Mapping[str, str], stdin: str | int | None,
             timeout_from: threading.Event | None) -> proc.Bounded:
    """Every node process fleet starts goes through here: bounded output, a deadline, the whole process
    group (and whoever detached from it but holds its pipes) killed at the end (proc.run_bounded)."""
    return proc.run_bounded(argv, timeout=timeout, env=env, cap=OUTPUT_CAP, stderr_cap=STDERR_CAP, keep_head=True,
                            stdin=stdin, timeout_from=timeout_from)


def _timeout_note(done: proc.Bounded) -> str:
    """What a timed-out node had printed: a reply whose output was never closed is usually a process
    the command left behind (`setsid CMD &`), which holds the pipe open after the command itself ended."""
    _head, sep, body = done.stdout.partition(NODE_MARKER)
    said = body.partition("\n")[2] if sep else ""
    if done.stdout_dropped:
        return f"; it had printed more than {OUTPUT_CAP >> 20} MiB on stdout"
    if said.strip():
        return (f"; it had printed {len(said.encode())} bytes, but something it left running (e.g. a "
                "`setsid CMD &` in the background) kept its output open")
    return ""


def _parse(node: str, done: proc.Bounded, seconds: float, launch_error: str | None) -> NodeRun:
    """Split the marker line off; a task that never printed it never started on its node. Output over
    the caps is a note on stderr and, for stdout (where the reports are), the node's error."""
    stderr = done.stderr
    if done.stderr_dropped:
        stderr = f"[envkit: the first {done.stderr_dropped} bytes of stderr were discarded]\n{stderr}"
    dropped = done.stdout_dropped + done.stderr_dropped
    if done.stdout_dropped and not launch_error:
        launch_error = (f"printed more than {OUTPUT_CAP >> 20} MiB on stdout ({OUTPUT_CAP + done.stdout_dropped} "
                        f"bytes): envkit kept the first {OUTPUT_CAP >> 20} MiB and discarded the rest "
                        "(is something on the node flooding its output?)")
    head, sep, body = done.stdout.partition(NODE_MARKER)
    if not sep:
        why = launch_error or (f"the command did not start on {node} (rc {done.returncode}): "
                               f"{done.stderr_tail(4) or '(no output)'}")
        return NodeRun(node, done.returncode, done.stdout, stderr, seconds, why, dropped)
    first, _, rest = body.partition("\n")
    reported = first.strip()
    if reported and reported != node:
        return NodeRun(node, done.returncode, rest, stderr, seconds,
                       f"asked for {node} but the task ran on {reported}", dropped)
    if launch_error:
        return NodeRun(node, done.returncode, rest, stderr, seconds, launch_error, dropped)
    return NodeRun(node, done.returncode, head + rest, stderr, seconds, None, dropped)


class LocalLauncher:
    """N "nodes" on this machine (names local1..N, or `local` for one); with gpus_per_node, node i
    sees GPUs i*G .. i*G+G-1 through CUDA_VISIBLE_DEVICES, as srun --gpus-per-node would give it."""

    kind = "local"

    def __init__(self, count: int = 1, gpus_per_node: int | None = None, exclude: Sequence[str] = ()) -> None:
        if count < 1:
            raise UsageError("--nodes must be at least 1", "envkit fleet detect --launcher local --nodes 2")
        if count > MAX_LOCAL_NODES:
            raise UsageError(f"--launcher local --nodes {count}: the local launcher starts at most "
                             f"{MAX_LOCAL_NODES} pseudo nodes (each one an envkit process on this machine)",
                             f"use --nodes {MAX_LOCAL_NODES} or fewer, or --launcher slurm for real nodes")
        self.count = count
        self.gpus_per_node = gpus_per_node
        self.exclude = set(exclude)

    def nodes(self) -> list[NodeSlot]:
        names = ["local"] if self.count == 1 else [f"local{i + 1}" for i in range(self.count)]
        slots = [NodeSlot(n, "local", "idle") for n in names if n not in self.exclude]
        if not slots:
            raise UsageError(f"--exclude {','.join(sorted(self.exclude))} leaves no node to run on",
                             "exclude fewer nodes")
        return slots

    def _gpus(self, node: str) -> str | None:
        if self.gpus_per_node is None:
            return None
        index = 0 if node == "local" else int(node[len("local"):]) - 1
        first = index * self.gpus_per_node
        return ",".join(str(i) for i in range(first, first + self.gpus_per_node))

    def run(self, node: NodeSlot, argv: Sequence[str], *, timeout: float,
            env: Mapping[str, str] | None = None, stdin: str | int | None = None,
            timeout_from: threading.Event | None = None) -> NodeRun:
        extra = dict(env or {}, ENVKIT_FLEET_NODE=node.name)
        gpus = self._gpus(node.name)
        if gpus is not None:
            extra["CUDA_VISIBLE_DEVICES"] = gpus
        start = time.perf_counter()
        try:
            done = run_node(["sh", "-c", _WRAP, "envkit-node", *argv], timeout=timeout, env=proc.child_env(extra),
                            stdin=stdin, timeout_from=timeout_from)
        except FileNotFoundError as exc:
            raise EnvkitError(f"cannot run sh: {exc}", "install a POSIX shell") from exc
        seconds = time.perf_counter() - start
        error = f"no answer within {timeout:g} s (stopped){_timeout_note(done)}" if done.timed_out else None
        return _parse(node.name, done, seconds, error)

    def address(self, node: str) -> str:
        return "127.0.0.1"


class SlurmLauncher:
    """Nodes from the current allocation (salloc/sbatch), from --nodelist, or from sinfo."""

    kind = "slurm"

    def __init__(self, request: NodeRequest = NodeRequest(), srun: SrunOptions = SrunOptions(),
                 environ: Mapping[str, str] | None = None) -> None:
        self.request = request
        self.srun = srun
        self.environ = dict(os.environ if environ is None else environ)
        self.in_allocation = bool(self.environ.get("SLURM_JOB_ID") and self.environ.get("SLURM_JOB_NODELIST"))
        self._addresses: dict[str, str] = {}

    # -- talking to Slurm -----------------------------------------------------------------------
    def _tool(self, argv: Sequence[str], timeout: float = 30.0) -> proc.Completed:
        try:
            done = proc.run(argv, timeout=timeout, env=self.environ)
        except FileNotFoundError as exc:
            raise EnvkitError(f"{argv[0]} not found: Slurm's client tools are not installed here",
                              "run on a login node of the cluster, or use --launcher local on one machine") from exc
        if done.timed_out:
            raise EnvkitError(f"{shlex.join(argv)} did not answer within {timeout:g} s (is slurmctld up?)",
                              "check the controller: scontrol ping")
        if done.returncode != 0:
            raise EnvkitError(f"{shlex.join(argv)} failed: {done.stderr_tail(4) or done.stdout[-400:]}",
                              "check the Slurm configuration (scontrol ping, sinfo)")
        return done

    def hostnames(self, expression: str, what: str = "--nodelist") -> list[str]:
        """n[1-4],gpu7 -> [n1, n2, n3, n4, gpu7] (Slurm's own expansion), at most MAX_NODES names: a
        larger list is refused before Slurm expands it, one that names nothing is an error too."""
        count = hostlist_count(expression)
        if count > MAX_NODES:
            raise UsageError(f"{what} {expression} names {count:,} nodes; envkit fleet takes at most "
                             f"{MAX_NODES:,} nodes at a time", "name fewer nodes (e.g. --nodelist 'n[1-64]'), "
                             "or run the fleet in parts")
        out = list(dict.fromkeys(self._tool(["scontrol", "show", "hostnames", expression]).stdout.split()))
        if len(out) > MAX_NODES:
            raise UsageError(f"{what} {expression} expands to {len(out):,} nodes; envkit fleet takes at most "
                             f"{MAX_NODES:,} nodes at a time", "name fewer nodes, or run the fleet in parts")
        if not out:
            raise UsageError(f"{what} {expression} names no node (Slurm expands it to nothing)",
                             "check it: scontrol show hostnames 'n[1-4]'; sinfo -N lists the nodes")
        return out

    def _sinfo(self) -> list[NodeSlot]:
        argv = ["sinfo", "-h", "-N", "-o", "%N|%P|%T|%E"]
        if self.request.partition:
            argv += ["-p", self.request.partition]
        slots: dict[str, NodeSlot] = {}
        for line in self._tool(argv).stdout.splitlines():
            parts = line.split("|")
            if len(parts) < 4:
                continue
            # a node in several partitions is listed once per partition: keep the default one (marked *)
            if parts[0] in slots and not parts[1].endswith("*"):
                continue
            name, partition, state, why = parts[0], parts[1].rstrip("*"), parts[2], parts[3]
            bad = any(s in state for s in ("down", "drain", "fail", "maint", "unknown", "future", "*"))
            reason = None
            if bad:
                reason = f"Slurm reports the node {state}" + (f" ({why})" if why and why != "none" else "")
            slots[name] = NodeSlot(name, partition, state, reason)
        return list(slots.values())

    def nodes(self) -> list[NodeSlot]:
        excluded: set[str] = set()
        for item in self.request.exclude:
            excluded.update(self.hostnames(item, "--exclude"))
        if self.request.nodelist or self.in_allocation:
            expression = self.request.nodelist or self.environ["SLURM_JOB_NODELIST"]
            what = "--nodelist" if self.request.nodelist else "the allocation's SLURM_JOB_NODELIST"
            names = self.hostnames(expression, what)  # bounded before anything else asks Slurm
            known = {s.name: s for s in self._sinfo()} if not self.in_allocation else {}
            slots = [known.get(n, NodeSlot(n, self.request.partition)) for n in names]
            if self.request.nodelist and not self.in_allocation:
                unknown = [s.name for s in slots if s.name not in known]
                if unknown:
                    raise UsageError(f"{', '.join(unknown)}: not a node of "
                                     + (f"partition {self.request.partition}" if self.request.partition
                                        else "this cluster"), "sinfo -N lists the nodes")
        else:
            slots = self._sinfo()
            if not slots:
                raise UsageError("Slurm lists no nodes" + (f" in partition {self.request.partition}"
                                                           if self.request.partition else ""), "sinfo -N")
        slots = [s for s in slots if s.name not in excluded]
        if not slots:
            raise UsageError("--exclude leaves no node to run on", "exclude fewer nodes")
        if self.request.count is not None:
            usable = [s for s in slots if s.usable][: self.request.count]
            if len(usable) < self.request.count:
                usable += [s for s in slots if not s.usable][: self.request.count - len(usable)]
            slots = usable
        if len(slots) > MAX_NODES:
            raise UsageError(f"Slurm lists {len(slots):,} nodes; envkit fleet takes at most {MAX_NODES:,} at a time",
                             f"pick some: --partition NAME, --nodes {MAX_NODES} or --nodelist 'n[1-64]'")
        return slots

    def srun_argv(self, node: NodeSlot, job_name: str) -> list[str]:
        argv = ["srun", "--nodes=1", "--ntasks=1", "--ntasks-per-node=1", f"--nodelist={node.name}",
                f"--job-name={job_name}", "--kill-on-bad-exit=1"]
        if self.in_allocation:
            argv.append("--overlap")  # share the allocation with the step that runs envkit itself
        partition = self.srun.partition or self.request.partition or (None if self.in_allocation else node.partition)
        if partition:
            argv.append(f"--partition={partition}")
        return argv + self.srun.argv()

    def run(self, node: NodeSlot, argv: Sequence[str], *, timeout: float,
            env: Mapping[str, str] | None = None, stdin: str | int | None = None,
            timeout_from: threading.Event | None = None) -> NodeRun:
        """`stdin`: a file, or a pipe's read end, fed to the task's stdin (srun forwards its stdin to the
        tasks as it arrives: srun(1), "IO Redirection"). `timeout_from`: see proc.run."""
        job_name = f"envkit-fleet-{secrets.token_hex(4)}"
        full = [*self.srun_argv(node, job_name), "sh", "-c", _WRAP, "envkit-node", *argv]
        start = time.perf_counter()
        try:
            done = run_node(full, timeout=timeout, env=proc.child_env(env), stdin=stdin, timeout_from=timeout_from)
        except FileNotFoundError as exc:
            raise EnvkitError("srun not found: Slurm's client tools are not installed here",
                              "run on a login node of the cluster, or use --launcher local") from exc
        seconds = time.perf_counter() - start
        error = None
        if done.timed_out:
            what = self.cancel_step(job_name) if self.in_allocation else self.cancel_job(job_name)
            error = (f"no answer within {timeout:g} s (srun stopped{what})"
                     + (_timeout_note(done) or ": the node may be down or busy"))
        return _parse(node.name, done, seconds, error)

    def cancel_job(self, job_name: str) -> str:
        """srun was killed outside an allocation: cancel the job it asked for (the name is unique to the call)."""
        gone = proc.run(["scancel", f"--name={job_name}"], timeout=15, env=self.environ)
        return ", its job cancelled" if gone.returncode == 0 else ""

    def cancel_step(self, job_name: str) -> str:
        """Inside an allocation the srun is a step of the user's job: cancelling the job would end the user's
        allocation, and `scancel --name` matches jobs, not steps. Find the step by its unique name in
        `squeue --steps` (%i is JOBID.STEPID, %j the step's name: squeue(1) "-s, --steps") and cancel
        just it (`scancel JOBID.STEPID`: scancel(1))."""
        job = self.environ.get("SLURM_JOB_ID", "")
        listed = proc.run(["squeue", "-h", "-s", "-j", job, "-o", "%i %j"], timeout=15, env=self.environ)
        steps = [line.split()[0] for line in listed.stdout.splitlines()
                 if len(line.split()) == 2 and line.split()[1] == job_name]
        if listed.returncode != 0 or not steps:
            return ""
        gone = proc.run(["scancel", *steps], timeout=15, env=self.environ)
        return f", its step {', '.join(steps)} cancelled" if gone.returncode == 0 else ""

    def address(self, node: str) -> str:
        """The node's address for a rendezvous (NodeAddr in slurm.conf; the name itself if unset)."""
        if node not in self._addresses:
            text = self._tool(["scontrol", "show", "node", node]).stdout
            found = next((w.split("=", 1)[1] for w in text.split() if w.startswith("NodeAddr=")), node)
            self._addresses[node] = found
        return self._addresses[node]


def run_all(launcher: Launcher, nodes: Sequence[NodeSlot], argv_for: Callable[[NodeSlot], Sequence[str]], *,
            timeout: float = DEFAULT_TIMEOUT, env_for: Callable[[NodeSlot], Mapping[str, str]] | None = None,
            on_event: Callable[[str, str, NodeRun | None], None] | None = None,
            stdin: str | None = None, stdin_for: Callable[[NodeSlot], int] | None = None,
            timeout_from: threading.Event | None = None) -> list[NodeRun]:
    """Run on every usable node in parallel; unusable nodes come back as failed rows, not exceptions.
    `stdin`: a file every node's command reads on its stdin (a staged bundle); `stdin_for`: a pipe's
    read end per node instead; `timeout_from`: the timeouts count from when it is set (proc.run)."""
    if not math.isfinite(timeout) or timeout <= 0:  # nan would never expire, inf never stop a node
        raise UsageError(f"a node timeout of {timeout} s cannot be kept", "give --timeout a number of seconds, e.g. 120")
    def one(node: NodeSlot) -> NodeRun:
        if not node.usable:
            result = NodeRun(node.name, None, "", "", 0.0, node.reason)
        else:
            if on_event:
                on_event(node.name, "running", None)
            try:
                result = launcher.run(node, argv_for(node), timeout=timeout,
                                      env=env_for(node) if env_for else None,
                                      stdin=stdin_for(node) if stdin_for else stdin, timeout_from=timeout_from)
            except EnvkitError as exc:
                result = NodeRun(node.name, None, "", "", 0.0, exc.message)
        if on_event:
            on_event(node.name, "done", result)
        return result

    if not nodes:
        return []
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(nodes))) as pool:
        return list(pool.map(one, nodes))


def check_local_gpus(count: int, gpus_per_node: int | None, available: int | None) -> None:
    """The local launcher gives node i GPUs i*G .. i*G+G-1: refuse up front when this machine has fewer
    than N*G, instead of nodes failing later with "No CUDA GPUs are available" (`available` None: unknown)."""
    if not gpus_per_node or available is None or count * gpus_per_node <= available:
        return
    fits = available // gpus_per_node
    fixes = ["--gpus-per-node 0 (nodes without GPUs)"]
    if fits >= 1:
        fixes.insert(0, f"--nodes {fits} --gpus-per-node {gpus_per_node}")
    if available >= count:
        fixes.insert(0, f"--nodes {count} --gpus-per-node {available // count}")
    raise UsageError(f"--launcher local --nodes {count} --gpus-per-node {gpus_per_node} needs "
                     f"{count * gpus_per_node} GPUs, but this machine has {available}",
                     "use " + " or ".join(fixes))


def local_gpu_count() -> int | None:
    """GPUs this machine shows (CUDA_VISIBLE_DEVICES applied); 0 without a driver; None when unknown."""
    machine = detect()
    if machine.driver is None:
        return 0
    return len(machine.gpus) if machine.gpus_known else None


def make_launcher(kind: str, request: NodeRequest, srun: SrunOptions) -> Launcher:
    """The launcher, with everything a node's command line is built from checked before any node starts."""
    srun.argv()  # an unbalanced quote in --srun-arg is a usage error now, not one per node later
    envkit_argv()  # the same for ENVKIT_FLEET_ENVKIT
    if request.count is not None and request.count > MAX_NODES:
        raise UsageError(f"--nodes {request.count}: envkit fleet takes at most {MAX_NODES:,} nodes at a time",
                         f"use --nodes {MAX_NODES} or fewer")
    if kind == "local":
        count = request.count or 1
        if srun.gpus_per_node:
            check_local_gpus(count, srun.gpus_per_node, local_gpu_count())
        return LocalLauncher(count, srun.gpus_per_node, request.exclude)
    if kind == "slurm":
        return SlurmLauncher(request, srun)
    raise UsageError(f"unknown launcher {kind!r}", "use --launcher slurm or --launcher local")

"""`envkit fleet create`: select for the fleet -> solve once -> bundle -> install on every node in parallel.

Every node installs the same bundle with `envkit create NAME --bundle DIR` (no network needed on
the node; each install is atomic, so a node that fails keeps nothing half-made). Prefixes are either
node-local (a path holding `{node}`: one env per node, e.g. on local scratch disks) or one shared path
(created once, by the first node, then checked from every node). Afterwards every node reports the
package records it sees; they must be identical.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.errors import EnvkitError
from envkit.fleet.launcher import Launcher, NodeRun, NodeSlot, envkit_argv, run_all

CREATE_TIMEOUT = 1800.0
CHECK_TIMEOUT = 120.0
# Runs with the env's own python on each node: which package records does this node see?
_CHECK = ("import json, os, sys; m = os.path.join(sys.prefix, 'conda-meta'); "
          "print(json.dumps({'prefix': sys.prefix, 'records': sorted(f for f in os.listdir(m) "
          "if f.endswith('.json'))}))")
_CREATE_THEN_CHECK = 'py="$1"; check="$2"; shift 2; "$@" || exit $?; exec "$py" -I -c "$check"'


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


@dataclass(frozen=True)
class FleetCreate:
    name: str
    nodes: tuple[NodeCreate, ...]
    bundle: str
    shared: bool
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)
    fleet: Any = None  # FleetSelection when this run selected (not when given a bundle)

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
                "fleet": self.fleet.to_json() if self.fleet is not None else None,
                "nodes": [{"node": n.node, "ok": n.ok, "prefix": n.prefix, "packages": n.packages,
                           "digest": n.digest, "seconds": round(n.seconds, 3), "error": n.error, "phase": n.phase}
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
    try:
        data = json.loads(run.stdout.strip().splitlines()[-1])
        records = [str(r) for r in data["records"]]
    except (ValueError, IndexError, KeyError, TypeError):
        return None, None, f"the env's python printed no record list: {run.stderr_tail(3)}"
    return hashlib.sha256("\n".join(records).encode()).hexdigest(), len(records), None


def install_everywhere(launcher: Launcher, nodes: Sequence[NodeSlot], name: str, bundle_dir: Path, *,
                       prefix_template: str | None = None, force: bool = False, timeout: float = CREATE_TIMEOUT,
                       on_event: Callable[[str, str, NodeRun | None], None] | None = None
                       ) -> tuple[list[NodeCreate], bool, dict[str, float]]:
    """`envkit create NAME --bundle DIR` on each node (or once, for a shared prefix), then a check everywhere."""
    from envkit.locations import default_prefix

    shared = prefix_template is None or "{node}" not in prefix_template
    phases: dict[str, float] = {}

    shared_prefix = prefix_template or str(default_prefix(name))

    def python_on(node: NodeSlot) -> str:
        return str(Path(prefix_for(prefix_template, name, node.name) or shared_prefix) / "bin" / "python")

    def create_argv(node: NodeSlot) -> list[str]:
        """create, then (same srun, no second round trip) the record check with the new env's python."""
        argv = [*envkit_argv(), "create", name, "--bundle", str(bundle_dir.absolute()), "--no-verify", "--quiet"]
        prefix = prefix_for(prefix_template, name, node.name)
        if prefix:
            argv += ["--prefix", prefix]
        if force:
            argv.append("--force")
        return ["sh", "-c", _CREATE_THEN_CHECK, "envkit-fleet-create", python_on(node), _CHECK, *argv]

    usable = [n for n in nodes if n.usable]
    start = time.perf_counter()
    results: dict[str, NodeCreate] = {n.name: NodeCreate(n.name, False, None, error=n.reason, phase="select")
                                      for n in nodes if not n.usable}
    if shared:
        first = usable[:1]
        runs = run_all(launcher, first, create_argv, timeout=timeout, on_event=on_event)
        failed_first = [r for r in runs if not r.ok]
        for run in failed_first:
            results[run.node] = NodeCreate(run.node, False, prefix_template, seconds=run.seconds, error=_error_of(run))
        if failed_first:
            for node in usable[1:]:
                results[node.name] = NodeCreate(node.name, False, prefix_template,
                                                error=f"not checked: the shared prefix was not created on "
                                                      f"{failed_first[0].node}", phase="check")
            phases["install"] = time.perf_counter() - start
            return [results[n.name] for n in nodes], shared, phases
    else:
        runs = run_all(launcher, usable, create_argv, timeout=timeout, on_event=on_event)
    phases["install"] = time.perf_counter() - start
    for run in runs:
        where = prefix_for(prefix_template, name, run.node) or shared_prefix
        if not run.ok:
            results[run.node] = NodeCreate(run.node, False, where, seconds=run.seconds, error=_error_of(run))
            continue
        digest, count, error = _check(run)
        results[run.node] = NodeCreate(run.node, error is None, where, count, digest, run.seconds, error,
                                       "check" if error else "done")
    start = time.perf_counter()
    to_check = [n for n in usable if n.name not in results]  # a shared prefix: the nodes that did not create it

    def check_argv(node: NodeSlot) -> list[str]:
        return [python_on(node), "-I", "-c", _CHECK]

    for run in run_all(launcher, to_check, check_argv, timeout=CHECK_TIMEOUT):
        digest, count, error = _check(run)
        results[run.node] = NodeCreate(run.node, error is None, shared_prefix, count, digest, run.seconds, error,
                                       "check" if error else "done")
    phases["check"] = time.perf_counter() - start
    return [results[n.name] for n in nodes], shared, phases


def fleet_create(launcher: Launcher, name: str, *, bundle_dir: Path, make_bundle: Callable[[Any], Any] | None,
                 request: Any = None, prefix_template: str | None = None, force: bool = False,
                 timeout: float = CREATE_TIMEOUT, select: bool = True, on_step: Callable[[str], None] | None = None,
                 on_event: Callable[[str, str, NodeRun | None], None] | None = None) -> FleetCreate:
    """With `make_bundle` (FleetSelection -> Bundle): inventory, select, solve once, bundle (`select=False`: a
    file taken literally has nothing to select); else install the existing bundle at `bundle_dir`. Then
    install everywhere."""
    from envkit.bundle import load_bundle

    step = on_step or (lambda _t: None)
    start = time.perf_counter()
    phases: dict[str, float] = {}
    fleet = None
    slots = launcher.nodes()
    if make_bundle is not None and not select:
        step("the file is taken as is (--no-adapt): nothing to select, solving once")
        t0 = time.perf_counter()
        bundle = make_bundle(None)
        phases["solve+bundle"] = time.perf_counter() - t0
    elif make_bundle is not None:
        from envkit.fleet.inventory import inventory
        from envkit.fleet.select import select_fleet

        step(f"detecting {len(slots)} node(s)")
        t0 = time.perf_counter()
        inv = inventory(launcher, request)
        fleet = select_fleet(inv.nodes, request)
        phases["detect+select"] = time.perf_counter() - t0
        if fleet.selection is None:
            raise EnvkitError(fleet.error or "no build fits the fleet", fleet.hint)
        sel = fleet.selection
        step(f"fleet build: torch {sel.torch} " + (f"CUDA {sel.cuda}" if sel.cuda else "CPU") +
             f", python {sel.python} ({fleet.reasons[0] if fleet.reasons else ''})")
        answered = {n.node for n in inv.nodes if n.ok}
        unreachable = {n.node: n.error for n in inv.nodes if not n.ok}
        slots = [s if s.name in answered else NodeSlot(s.name, s.partition, s.state,
                                                       f"detect failed: {unreachable.get(s.name) or s.reason}")
                 for s in slots]
        t0 = time.perf_counter()
        bundle = make_bundle(fleet)
        phases["solve+bundle"] = time.perf_counter() - t0
    else:
        t0 = time.perf_counter()
        bundle = load_bundle(bundle_dir)
        phases["check bundle"] = time.perf_counter() - t0
    step(f"installing on {sum(s.usable for s in slots)} node(s) from {bundle.root}")
    rows, shared, install_phases = install_everywhere(launcher, slots, name, bundle.root,
                                                      prefix_template=prefix_template, force=force, timeout=timeout,
                                                      on_event=on_event)
    phases.update(install_phases)
    return FleetCreate(name, tuple(rows), str(bundle.root), shared, time.perf_counter() - start, phases, fleet)

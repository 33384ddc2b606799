"""`envkit fleet detect`: `envkit detect --json` once on every node, gathered into one inventory."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from envkit.fleet import nodejson as nj
from envkit.fleet.launcher import DEFAULT_TIMEOUT, Launcher, NodeRun, envkit_argv, run_all
from envkit.fleet.nodejson import NodeDataError
from envkit.models import Driver, Gpu, Machine, Request

DETECT_TIMEOUT = 60.0


@dataclass(frozen=True)
class NodeInfo:
    """One node: what `envkit detect` found there, or why nothing came back."""

    node: str
    partition: str | None
    machine: Machine | None
    selection: dict[str, Any] | None  # the node's own best build (detect --json "selection")
    selection_error: str | None
    error: str | None  # unreachable, timed out, or detect crashed
    seconds: float

    @property
    def ok(self) -> bool:
        return self.machine is not None


@dataclass(frozen=True)
class Inventory:
    nodes: tuple[NodeInfo, ...]
    launcher: str
    seconds: float

    @property
    def reachable(self) -> tuple[NodeInfo, ...]:
        return tuple(n for n in self.nodes if n.ok)


def machine_from_json(data: dict[str, Any]) -> Machine:
    """The inverse of Machine.to_json (what `envkit detect --json` prints on a node), every field read
    with its type and format checked: a wrong one is a NodeDataError naming it."""
    drv = nj.field(data, "driver", dict)
    driver = None
    if drv is not None:
        version = nj.text(drv, "version", "driver.", required=True, pattern=nj.DRIVER_VERSION)
        assert version is not None
        driver = Driver(version, nj.text(drv, "cuda", "driver.", pattern=nj.CUDA_LEVEL),
                        nj.text(drv, "source", "driver.") or "?")
    gpus = []
    for i, g in enumerate(nj.objects(data, "gpus")):
        where = f"gpus[{i}]."
        index = nj.field(g, "index", int, where)
        cc = nj.text(g, "compute_capability", where, required=True, pattern=nj.COMPUTE_CAPABILITY)
        assert cc is not None
        gpus.append(Gpu(i if index is None else index, nj.text(g, "name", where) or "?", cc,
                        nj.field(g, "memory_mib", int, where), nj.text(g, "uuid", where)))
    hidden = bool(nj.field(data, "gpus_hidden", bool))
    simulated = bool(nj.field(data, "simulated", bool))
    return Machine(driver=driver, gpus=tuple(gpus), gpus_hidden=hidden,
                   gpus_known=bool(gpus) or driver is None or hidden or simulated,
                   cuda_override=nj.text(data, "cuda_override"), simulated=simulated,
                   notes=tuple(nj.texts(data, "notes")))


_SELECTION_TEXT = ("flavor", "torch", "torchvision", "torchaudio", "cuda", "python", "variant", "pip_index_url")
_SELECTION_LISTS = ("specs", "channels", "pip_specs", "reasons")


def selection_from_json(data: dict[str, Any]) -> dict[str, Any] | None:
    """A node's own best build (detect --json "selection"), typed: the known fields only."""
    sel = nj.field(data, "selection", dict)
    if sel is None:
        return None
    out: dict[str, Any] = {key: nj.text(sel, key, "selection.") for key in _SELECTION_TEXT}
    for key in ("torch", "python", "variant"):
        if out[key] is None:
            raise NodeDataError(f"field selection.{key} is missing")
    out.update({key: nj.texts(sel, key, "selection.") for key in _SELECTION_LISTS})
    out["minor_version_compat"] = bool(nj.field(sel, "minor_version_compat", bool, "selection."))
    return out


def detect_argv(request: Request | None) -> list[str]:
    """`envkit detect --json` plus what the user asked for, so each node names its own best build."""
    # --offline: compute nodes often have no route to the channels, and the fleet's build is chosen on the
    # login node; a node's own row comes from the static data (or a catalogue cached there) in milliseconds
    # instead of a network attempt per node (issue 11's catalogue stays a login-node affair)
    argv = [*envkit_argv(), "detect", "--json", "--offline"]
    if request is not None:
        if request.cuda != "auto":
            argv += ["--cuda", request.cuda]
        if request.torch:
            argv += ["--torch", request.torch]
        if request.python:
            argv += ["--python", request.python]
        if request.flavor != "conda-forge":
            argv += ["--flavor", request.flavor]
    return argv


def parse_json_output(run: NodeRun) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object a node printed (parsed through the bounded loader, its shape bounded), or why
    there is none."""
    if run.error:
        return None, run.error
    text = run.stdout
    start = text.find("{")
    if start < 0:
        return None, (f"printed no JSON (rc {run.returncode}): "
                      f"{run.stderr_tail(4) or text.strip()[-300:] or '(no output)'}")
    try:
        return nj.parse_object(text[start:]), None
    except NodeDataError as exc:
        tail = run.stderr_tail(3)
        return None, f"{exc}" + (f": {tail}" if tail else "")


def inventory(launcher: Launcher, request: Request | None = None, *, timeout: float = DETECT_TIMEOUT,
              on_event: Callable[[str, str, NodeRun | None], None] | None = None) -> Inventory:
    start = time.perf_counter()
    slots = launcher.nodes()
    argv = detect_argv(request)
    runs = run_all(launcher, slots, lambda _node: argv, timeout=timeout or DEFAULT_TIMEOUT, on_event=on_event)
    infos = []
    for slot, run in zip(slots, runs):
        data, error = parse_json_output(run)
        if data is None:
            infos.append(NodeInfo(slot.name, slot.partition, None, None, None, error, run.seconds))
            continue
        try:
            machine = machine_from_json(data)
            selection, selection_error = selection_from_json(data), nj.text(data, "error")
        except NodeDataError as exc:
            infos.append(NodeInfo(slot.name, slot.partition, None, None, None,
                                  f"detect output not understood: {exc}", run.seconds))
            continue
        infos.append(NodeInfo(slot.name, slot.partition, machine, selection, selection_error, None, run.seconds))
    return Inventory(tuple(infos), launcher.kind, time.perf_counter() - start)


def inventory_json(inv: Inventory) -> dict[str, Any]:

    return {
        "launcher": inv.launcher, "seconds": round(inv.seconds, 3),
        "nodes": [{"node": n.node, "partition": n.partition, "ok": n.ok, "error": n.error,
                   "seconds": round(n.seconds, 3),
                   "machine": n.machine.to_json() if n.machine else None,
                   "selection": n.selection, "selection_error": n.selection_error} for n in inv.nodes],
    }


def exclude_nodes(infos: Sequence[NodeInfo], exclude: Sequence[str]) -> list[NodeInfo]:
    return [n for n in infos if n.node not in set(exclude)]

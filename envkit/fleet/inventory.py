"""`envkit fleet detect`: `envkit detect --json` once on every node, gathered into one inventory."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from envkit.fleet.launcher import DEFAULT_TIMEOUT, Launcher, NodeRun, envkit_argv, run_all
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
    """The inverse of Machine.to_json (what `envkit detect --json` prints on a node)."""
    drv = data.get("driver")
    driver = Driver(str(drv["version"]), drv.get("cuda"), str(drv.get("source") or "?")) if drv else None
    gpus = tuple(Gpu(int(g.get("index", i)), str(g.get("name") or "?"), str(g["compute_capability"]),
                     g.get("memory_mib"), g.get("uuid")) for i, g in enumerate(data.get("gpus") or []))
    hidden = bool(data.get("gpus_hidden"))
    return Machine(driver=driver, gpus=gpus, gpus_hidden=hidden,
                   gpus_known=bool(gpus) or driver is None or hidden or bool(data.get("simulated")),
                   cuda_override=data.get("cuda_override"), simulated=bool(data.get("simulated")),
                   notes=tuple(str(n) for n in data.get("notes") or ()))


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
    """The JSON object a node printed, or why there is none."""
    if run.error:
        return None, run.error
    text = run.stdout
    start = text.find("{")
    if start < 0:
        return None, (f"printed no JSON (rc {run.returncode}): "
                      f"{run.stderr_tail(4) or text.strip()[-300:] or '(no output)'}")
    try:
        data = json.loads(text[start:])
    except ValueError as exc:
        return None, f"printed malformed JSON ({exc}): {run.stderr_tail(3)}"
    if not isinstance(data, dict):
        return None, "printed JSON that is not an object"
    return data, None


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
        except (KeyError, TypeError, ValueError) as exc:
            infos.append(NodeInfo(slot.name, slot.partition, None, None, None,
                                  f"detect output not understood: {exc}", run.seconds))
            continue
        infos.append(NodeInfo(slot.name, slot.partition, machine, data.get("selection"), data.get("error"),
                              None, run.seconds))
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

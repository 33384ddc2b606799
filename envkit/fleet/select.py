"""Fleet selection (pure): one build that every selected node can run, with the node that binds it.

The fleet is planned as one machine: the lowest CUDA any node's driver reports (a CUDA build
needs `__cuda >= its CUDA` on every node: conda's virtual package, set from the driver; NVIDIA's
CUDA Toolkit release notes, Table 3), every compute capability present (the build's arch list
must cover each GPU: PyTorch's TORCH_CUDA_ARCH_LIST per release), and one python (one lock).
Each limit names the node(s) it comes from and what the fleet would get without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from packaging.version import Version

from envkit.compat import driver_version
from envkit.compat.select import select
from envkit.errors import SelectionError
from envkit.fleet.inventory import NodeInfo
from envkit.models import Driver, Gpu, Machine, Request, Selection


@dataclass(frozen=True)
class FleetSelection:
    """The fleet's build (or why there is none), the nodes it covers and the reasons."""

    nodes: tuple[str, ...]
    machine: Machine | None
    selection: Selection | None
    reasons: tuple[str, ...]
    error: str | None = None
    hint: str | None = None
    binding: tuple[str, ...] = ()
    partition: str | None = None

    @property
    def driver_version(self) -> str | None:
        return self.machine.driver.version if self.machine and self.machine.driver else None

    @property
    def compute_capabilities(self) -> tuple[str, ...]:
        return self.machine.compute_capabilities if self.machine else ()

    def to_json(self) -> dict[str, object]:
        return {"partition": self.partition, "nodes": list(self.nodes), "binding": list(self.binding),
                "driver_version": self.driver_version, "cuda": self.machine.driver.cuda
                if self.machine and self.machine.driver else None,
                "compute_capabilities": list(self.compute_capabilities),
                "selection": self.selection.to_json() if self.selection else None,
                "reasons": list(self.reasons), "error": self.error, "hint": self.hint}


def _names(nodes: Sequence[str]) -> str:
    return nodes[0] if len(nodes) == 1 else ", ".join(nodes[:-1]) + " and " + nodes[-1]


def _them(nodes: Sequence[str]) -> str:
    return "it" if len(nodes) == 1 else "them"


def _cuda_of(machine: Machine) -> Version | None:
    drv = machine.driver
    return Version(drv.cuda) if drv is not None and drv.cuda else None


def _no_cuda(machine: Machine) -> str:
    drv = machine.driver
    return "no NVIDIA driver" if drv is None else f"driver {drv.version} of unknown CUDA level"


def fleet_machine(nodes: Sequence[NodeInfo]) -> tuple[Machine, tuple[str, ...], list[str]]:
    """All nodes as one machine: (machine, nodes binding the CUDA level, reasons)."""
    machines = {n.node: n.machine for n in nodes if n.machine is not None}
    reasons: list[str] = []
    cpu_only = [name for name, m in machines.items() if _cuda_of(m) is None]
    gpus: dict[str, Gpu] = {}
    for name, machine in machines.items():
        for gpu in machine.gpus:
            gpus.setdefault(gpu.compute_capability,
                            Gpu(len(gpus), f"{name}: {gpu.name}", gpu.compute_capability, gpu.memory_mib))
    known = all(m.gpus_known or m.gpus for m in machines.values())
    if cpu_only:
        rest = [name for name in machines if name not in cpu_only]
        why = ", ".join(f"{n} has " + _no_cuda(machines[n]) for n in cpu_only)
        tail = ""
        if rest:
            low = min(_cuda_of(machines[n]) for n in rest)  # type: ignore[type-var]
            tail = f"; without {_them(cpu_only)}: CUDA {low}"
        reasons.append(f"{why}: only a CPU build runs on every node{tail}")
        return Machine(driver=None, gpus=tuple(gpus.values()), gpus_known=known), tuple(cpu_only), reasons
    cudas = {name: _cuda_of(m) for name, m in machines.items()}
    lowest = min(v for v in cudas.values() if v is not None)
    binding = tuple(n for n, v in cudas.items() if v == lowest)
    drivers = {n: machines[n].driver.version for n in binding}  # type: ignore[union-attr]
    low_driver = min(drivers.values(), key=driver_version)
    others = [v for n, v in cudas.items() if n not in binding and v is not None]
    if others:
        what = ", ".join(f"{n}'s driver {drivers[n]}" for n in binding)
        reasons.append(f"{what} caps the fleet at CUDA {lowest}; without {_them(binding)}: CUDA {min(others)} "
                       f"(--exclude {','.join(binding)})")
    elif len(machines) > 1:
        reasons.append(f"every node's driver supports CUDA {lowest} (lowest driver {low_driver})")
    driver = Driver(low_driver, str(lowest), "fleet")
    return Machine(driver=driver, gpus=tuple(gpus.values()), gpus_known=known), binding, reasons


def _try(nodes: Sequence[NodeInfo], request: Request) -> tuple[Machine, Selection | None, tuple[str, ...],
                                                                 list[str], SelectionError | None]:
    machine, binding, reasons = fleet_machine(nodes)
    try:
        return machine, select(machine, request), binding, reasons, None
    except SelectionError as exc:
        return machine, None, binding, reasons, exc


def _build(sel: Selection) -> str:
    cuda = f"CUDA {sel.cuda} ({sel.variant})" if sel.cuda else "CPU"
    return f"torch {sel.torch} {cuda}"


def _arch_reasons(nodes: Sequence[NodeInfo], request: Request, chosen: Selection) -> list[str]:
    """Does the oldest GPU architecture hold the fleet back? Say which node, and what it costs."""
    ccs = sorted({g.compute_capability for n in nodes if n.machine for g in n.machine.gpus},
                 key=lambda c: tuple(int(p) for p in c.split(".")))
    if len(ccs) < 2:
        return []
    oldest = ccs[0]
    holders = [n.node for n in nodes if n.machine and any(g.compute_capability == oldest for g in n.machine.gpus)]
    rest = [n for n in nodes if n.node not in holders]
    if not rest:
        return []
    _m, alt, _b, _r, _e = _try(rest, request)
    if alt is None or (alt.torch, alt.cuda) == (chosen.torch, chosen.cuda):
        return [f"every GPU architecture ({', '.join('sm_' + c.replace('.', '') for c in ccs)}) is in the build"]
    names = _names(holders)
    return [f"{names}'s sm_{oldest.replace('.', '')} GPUs hold the fleet at {_build(chosen)}; "
            f"without {_them(holders)}: {_build(alt)} (--exclude {','.join(holders)})"]


def select_fleet(nodes: Sequence[NodeInfo], request: Request, *, partition: str | None = None) -> FleetSelection:
    """The one build for `nodes` (those that answered); SelectionError details stay in the result."""
    answered = [n for n in nodes if n.machine is not None]
    names = tuple(n.node for n in answered)
    if not answered:
        return FleetSelection((), None, None, (), "no node answered", "check the nodes (envkit fleet detect)",
                              partition=partition)
    machine, sel, binding, reasons, error = _try(answered, request)
    if sel is not None:
        reasons += _arch_reasons(answered, request, sel)
        reasons.append(f"python {sel.python} on every node: one solve, one lock for the fleet")
        return FleetSelection(names, machine, sel, tuple(reasons) + sel.reasons, binding=binding,
                              partition=partition)
    assert error is not None
    # which single node (or the nodes sharing its GPU/driver) stops every build? name them
    hints: list[str] = []
    for node in answered:
        rest = [n for n in answered if n.node != node.node]
        if not rest:
            continue
        _m, alt, _b, _r, _e = _try(rest, request)
        if alt is not None:
            hints.append(f"without {node.node}: {_build(alt)} (--exclude {node.node})")
    hint = "; ".join(hints[:4]) if hints else (error.hint or "check envkit fleet detect")
    if hints:
        hint += "; or select per partition (--per-partition)"
    return FleetSelection(names, machine, None, tuple(reasons),
                          f"no build fits every node: {error.message}", hint, binding, partition)


def select_per_partition(nodes: Sequence[NodeInfo], request: Request) -> list[FleetSelection]:
    groups: dict[str, list[NodeInfo]] = {}
    for node in nodes:
        groups.setdefault(node.partition or "(none)", []).append(node)
    return [select_fleet(members, request, partition=name) for name, members in groups.items()]


def request_for_fleet(fleet: FleetSelection, request: Request) -> Request:
    """What a node-independent solve must plan for: the fleet's CUDA level, stated explicitly."""
    if fleet.selection is None or fleet.selection.cuda is None or request.cuda == "cpu":
        return replace(request, cuda="cpu" if fleet.selection is not None and fleet.selection.cuda is None
                       else request.cuda)
    drv = fleet.machine.driver if fleet.machine else None
    return replace(request, cuda=drv.cuda if drv and drv.cuda else request.cuda, no_driver_check=True,
                   python=fleet.selection.python)

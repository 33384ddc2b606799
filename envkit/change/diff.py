"""What a change does to an env, and the torch guard: pure functions over package rows.

The guard's rule (README "Day two"): an install, uninstall or update never replaces the env's CUDA
torch by a CPU build, changes its CUDA line or changes torch's version unless torch is named in the
command; named, the change is shown in the diff and asked for (`--yes` accepts). The practitioner
guides' warning behind it: a second torch over a conda torch is the classic CUDA mismatch (PyTorch
forums, "conda and pip torch mixed"; conda-forge's pytorch feedstock README pins `pytorch=*=cuda*`
for the same reason).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.compat.builds import CUDA_PINS, UNKNOWN, cuda_of_build
from envkit.engines.base import PlannedPackage

# conda's names of the torch stack whose change the guard watches (pytorch-cuda / cuda-version: the env's
# CUDA line, compat/builds.py CUDA_PINS; pytorch-mutex / cpuonly: the legacy channel's CPU switch)
TORCH = "pytorch"
TORCH_NAMES = frozenset({"pytorch", "torch", *CUDA_PINS, "pytorch-mutex", "cpuonly"})
TORCH_STACK = frozenset({"pytorch", "torchvision", "torchaudio", *CUDA_PINS, "pytorch-mutex", "cpuonly"})


@dataclass(frozen=True)
class Row:
    """One package as the diff shows it."""

    name: str
    version: str
    build: str
    size: int | None = None
    cached: bool = True

    def label(self) -> str:
        return f"{self.name} {self.version} {self.build}"


@dataclass(frozen=True)
class Diff:
    added: tuple[Row, ...] = ()
    changed: tuple[tuple[Row, Row], ...] = ()  # (installed, planned)
    removed: tuple[Row, ...] = ()
    reinstalled: tuple[Row, ...] = ()  # --force-reinstall: the same build linked again from a checked cache

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed or self.reinstalled)

    @property
    def linked(self) -> tuple[Row, ...]:
        """What the change links into the env: added, the new side of changed, reinstalled."""
        return (*self.added, *(new for _old, new in self.changed), *self.reinstalled)

    @property
    def download_bytes(self) -> int:
        return sum(r.size or 0 for r in self.linked if not r.cached)

    def touches(self, names: Iterable[str]) -> bool:
        wanted = set(names)
        return any(r.name in wanted for r in (*self.added, *self.removed, *self.reinstalled)) or any(
            old.name in wanted for old, _new in self.changed)

    def to_json(self) -> dict[str, Any]:
        def row(r: Row) -> dict[str, Any]:
            return {"name": r.name, "version": r.version, "build": r.build, "size": r.size, "cached": r.cached}

        return {"added": [row(r) for r in self.added],
                "changed": [{"name": old.name, "from": row(old), "to": row(new)} for old, new in self.changed],
                "removed": [row(r) for r in self.removed], "reinstalled": [row(r) for r in self.reinstalled],
                "download_bytes": self.download_bytes}


def installed_rows(records: Iterable[Mapping[str, Any]]) -> dict[str, Row]:
    """conda-meta records (prefix/records.py conda_records) -> name -> Row."""
    out: dict[str, Row] = {}
    for data in records:
        name = data.get("name")
        if isinstance(name, str):
            size = data.get("size")
            out[name] = Row(name, str(data.get("version", "")), str(data.get("build", "")),
                            size if isinstance(size, int) else None)
    return out


def planned_rows(packages: Iterable[PlannedPackage]) -> dict[str, Row]:
    return {p.name: Row(p.name, p.version, p.build, p.size, p.cached) for p in packages}


def diff(installed: Mapping[str, Row], planned: Mapping[str, Row], reinstall: Iterable[str] = ()) -> Diff:
    """Same name, version and build: unchanged (conda's own test for "already installed"), unless `reinstall`
    names it."""
    added = tuple(planned[n] for n in sorted(set(planned) - set(installed)))
    removed = tuple(installed[n] for n in sorted(set(installed) - set(planned)))
    changed = tuple((installed[n], planned[n]) for n in sorted(set(installed) & set(planned))
                    if (installed[n].version, installed[n].build) != (planned[n].version, planned[n].build))
    moved = {old.name for old, _new in changed}
    again = tuple(planned[n] for n in sorted(set(reinstall)) if n in planned and n in installed and n not in moved)
    return Diff(added, changed, removed, again)


def spec_name(spec: str) -> str:
    """`conda-forge::numpy>=2` -> numpy (conda's MatchSpec name: before the first operator or space)."""
    return re.split(r"[\s=<>!~\[]", spec.split("::")[-1].strip(), maxsplit=1)[0].lower()


def names_torch(specs: Iterable[str]) -> bool:
    return any(spec_name(s) in TORCH_NAMES for s in specs)


def _cuda(row: Row | None, pins: Mapping[str, Row]) -> str | None:
    """The CUDA line of a torch row: its build string's, else the env's cuda-version / pytorch-cuda."""
    if row is None:
        return None
    found = cuda_of_build(row.build)
    if found == UNKNOWN:
        pin = next((pins[n] for n in CUDA_PINS if n in pins), None)
        return ".".join(pin.version.split(".")[:2]) if pin else UNKNOWN
    return found


def _show_cuda(cuda: str | None) -> str:
    return "a CPU build" if cuda is None else "CUDA ?" if cuda == UNKNOWN else f"CUDA {cuda}"


@dataclass(frozen=True)
class TorchChange:
    """What a plan does to the env's torch, in words; empty when torch stays as it is."""

    reasons: tuple[str, ...] = field(default=())

    def __bool__(self) -> bool:
        return bool(self.reasons)


def torch_change(installed: Mapping[str, Row], planned: Mapping[str, Row]) -> TorchChange:
    """How the plan changes the env's torch: removed, CUDA -> CPU, another CUDA line, another version."""
    old = installed.get(TORCH)
    if old is None:
        return TorchChange()
    new = planned.get(TORCH)
    if new is None:
        return TorchChange((f"it removes pytorch {old.version} ({_show_cuda(_cuda(old, installed))})",))
    reasons = []
    old_cuda, new_cuda = _cuda(old, installed), _cuda(new, planned)
    if old_cuda is not None and new_cuda is None:
        reasons.append(f"it replaces the CUDA {old_cuda} build of pytorch ({old.build}) by a CPU build ({new.build})")
    elif old_cuda != new_cuda:
        reasons.append(f"it changes pytorch's {_show_cuda(old_cuda)} to {_show_cuda(new_cuda)} "
                       f"({old.build} -> {new.build})")
    if old.version != new.version:
        reasons.append(f"it changes pytorch {old.version} to {new.version}")
    return TorchChange(tuple(reasons))


def torch_pins(installed: Mapping[str, Row]) -> list[str]:
    """Specs that keep the env's torch and CUDA line exactly as installed (added to the solve, never to history)."""
    pins = []
    for name in (TORCH, *CUDA_PINS):
        row = installed.get(name)
        if row is not None:
            pins.append(f"{name} =={row.version} {row.build}" if name == TORCH else f"{name} =={row.version}")
    return pins


def blame(culprit: str, planned: Sequence[PlannedPackage], specs: Sequence[str]) -> list[str]:
    """The chain from a requested spec to `culprit` through the plan's dependencies (a -> b -> culprit)."""
    by_name = {p.name: p for p in planned}
    for spec in specs:
        start = spec_name(spec)
        todo: list[list[str]] = [[start]]
        seen: set[str] = set()
        while todo:
            path = todo.pop(0)
            name = path[-1]
            if name == culprit and len(path) > 1:
                return path
            if name in seen or name not in by_name:
                continue
            seen.add(name)
            todo += [[*path, spec_name(d)] for d in by_name[name].depends]
    return []


@dataclass(frozen=True)
class ChangePlan:
    """What the change does, before anything is downloaded."""

    action: str
    prefix: Path
    specs: tuple[str, ...]  # the command's
    requested: tuple[str, ...]  # every spec the env asks for after the change (what history will say)
    diff: Diff
    torch: TorchChange  # non-empty only when the command named torch: then it is asked for
    packages: tuple[PlannedPackage, ...]
    notes: tuple[str, ...] = ()
    pip: bool = False  # made by the env's pip (change/pip.py): the rows are wheels, not conda packages

    @property
    def asks(self) -> bool:
        """The change replaces torch (named in the command): shown and confirmed (--yes)."""
        return bool(self.torch)

    @property
    def torch_stack_changed(self) -> bool:
        return self.diff.touches(TORCH_STACK)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "pip": self.pip, "prefix": str(self.prefix), "specs": list(self.specs),
                "requested": list(self.requested), "diff": self.diff.to_json(),
                "torch_change": list(self.torch.reasons), "notes": list(self.notes)}

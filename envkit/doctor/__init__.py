"""`envkit doctor`: static checks of an existing environment (no GPU run, well under a second).

An environment made by envkit, by conda or by a colleague breaks in known ways after a driver
upgrade, a copy to another server or a `pip install` on top (issue 15, user-pains.md B1-B6). Each
check reads files only (conda-meta records, dist-info folders, torch/version.py, the kept
.envkit/*.json) and returns a Finding: a status, what it found, and the exact command that fixes it.
torch is never imported (architecture.md); the machine comes from `detect()` with the same
`--driver-version` / `--compute-capability` plumbing `envkit detect` uses.

Owns: reading an env into Facts (facts, through prefix/records.py), the checks, each Facts -> Finding
(checks), and here the entry points (doctor, diagnose), the list of checks and the DoctorReport.
May import: plan, detect/, compat/, render/, prefix/, engines/ and the ground floor.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.detect import detect
from envkit.doctor.checks import (OK, PROBLEM, SKIP, WARN, Finding, check_channels, check_cuda_levels,
                                  check_cudatoolkit, check_files, check_gpu_arch, check_ld_library_path,
                                  check_made_for, check_nvidia_libs, check_python, check_torch_build,
                                  check_torch_copies, check_torch_shadow, check_verify)
from envkit.doctor.facts import Facts, TorchCopy, gather, importable, torch_copies
from envkit.errors import EnvkitError, EnvNotFoundError, UsageError
from envkit.models import Machine
from envkit.prefix.locations import find_prefix, list_envs

__all__ = ["OK", "PROBLEM", "SKIP", "WARN", "DoctorReport", "Facts", "Finding", "TorchCopy", "diagnose", "doctor",
           "gather"]


@dataclass(frozen=True)
class DoctorReport:
    """Every finding for one environment; `healthy` means no finding is a problem (warnings allowed)."""

    prefix: str
    name: str
    by_envkit: bool
    machine: str
    findings: tuple[Finding, ...]
    seconds: float

    @property
    def problems(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == PROBLEM)

    @property
    def healthy(self) -> bool:
        return not self.problems

    def finding(self, check: str) -> Finding | None:
        return next((f for f in self.findings if f.check == check), None)

    def to_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "name": self.name, "by_envkit": self.by_envkit,
                "healthy": self.healthy, "problems": len(self.problems), "machine": self.machine,
                "seconds": round(self.seconds, 4), "findings": [f.to_json() for f in self.findings]}


# -- entry points ---------------------------------------------------------------------------------
# what a check may raise on metadata no typed reader foresaw: reported as that check's finding, never a traceback
_SHAPE_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError, RecursionError)


def diagnose(prefix: Path, machine: Machine, *, environ: Mapping[str, str] | None = None,
             now: float | None = None, deep: bool = False) -> DoctorReport:
    """Every check on one prefix, for one machine; never raises for what it finds."""
    start = time.perf_counter()
    env = os.environ if environ is None else environ
    facts = gather(prefix)
    copies = torch_copies(facts)
    imported, why = importable(facts, copies)
    loaded = imported or (copies[-1] if copies else None)  # no torch/__init__.py: judge the recorded build
    checks: list[tuple[str, Callable[[], Finding]]] = [
        ("python", lambda: check_python(facts)),
        ("torch-copies", lambda: check_torch_copies(facts, copies, imported, why)),
        ("torch-shadow", lambda: check_torch_shadow(facts, env)),
        ("torch-build", lambda: check_torch_build(facts, loaded, machine)),
        ("cuda-levels", lambda: check_cuda_levels(facts, loaded, machine, env)),
        ("gpu-arch", lambda: check_gpu_arch(facts, loaded, machine)),
        ("made-for", lambda: check_made_for(facts, machine)),
        ("nvidia-pip-libs", lambda: check_nvidia_libs(facts, loaded)),
        ("ld-library-path", lambda: check_ld_library_path(facts, loaded, env)),
        ("channels", lambda: check_channels(facts)),
        ("cudatoolkit", lambda: check_cudatoolkit(facts)),
        ("files", lambda: check_files(facts, copies, deep)),
        ("verify", lambda: check_verify(facts, machine, time.time() if now is None else now)),
    ]
    findings = [_guarded(name, run, prefix) for name, run in checks]
    return DoctorReport(str(prefix), prefix.name, bool(facts.created), machine.describe(), tuple(findings),
                        time.perf_counter() - start)


def _guarded(name: str, run: Callable[[], Finding], prefix: Path) -> Finding:
    """One check; metadata of a shape no reader foresaw is that check's PROBLEM, and the other checks still run."""
    try:
        return run()
    except _SHAPE_ERRORS as exc:
        return Finding(name, PROBLEM, f"could not be checked: the env's metadata has an unexpected shape "
                       f"({type(exc).__name__}: {str(exc)[:160]})",
                       f"rebuild the env (envkit create {prefix.name} --prefix {prefix} --force), or fix its "
                       "conda-meta/ and .envkit/ files")


def _unreadable(prefix: Path, machine: Machine, why: str) -> DoctorReport:
    """An env doctor could not read at all: one PROBLEM for it, so `--all` still reports every other env."""
    return DoctorReport(str(prefix), prefix.name, False, machine.describe(),
                        (Finding("read", PROBLEM, f"the environment could not be read: {why}",
                                 f"check it by hand: ls -la {prefix}/conda-meta"),), 0.0)


def _diagnose_one(prefix: Path, machine: Machine, deep: bool = False) -> DoctorReport:
    try:
        return diagnose(prefix, machine, deep=deep)
    except EnvkitError as exc:
        return _unreadable(prefix, machine, exc.message)
    except (OSError, *_SHAPE_ERRORS) as exc:
        return _unreadable(prefix, machine, f"{type(exc).__name__}: {str(exc)[:160]}")


DEFAULT_ALL = False


def doctor(*, name: str | None = None, prefix: str | None = None, all_envs: bool = DEFAULT_ALL,
           driver_version: str | None = None, compute_capabilities: tuple[str, ...] = (),
           deep: bool = False) -> list[DoctorReport]:
    """Resolve the env(s) (default: the active $CONDA_PREFIX), detect the machine once, diagnose each."""
    if all_envs and (name or prefix):
        raise UsageError("give NAME, --prefix or --all, not several", "envkit doctor --all")
    if all_envs:
        prefixes = list_envs()
        if not prefixes:
            raise EnvNotFoundError("no environments known to envkit or conda", "create one: envkit create dl_train")
    elif name or prefix:
        prefixes = [find_prefix(name, prefix)]
    else:
        active = os.environ.get("CONDA_PREFIX")
        if not active:
            raise UsageError("no environment given and none is active ($CONDA_PREFIX is unset)",
                             "envkit doctor NAME, envkit doctor --prefix PATH, or envkit doctor --all")
        prefixes = [find_prefix(None, active)]
    machine = detect(driver_version=driver_version, compute_capabilities=compute_capabilities)
    return [_diagnose_one(p, machine, deep) for p in prefixes]

"""What the orchestrator (create.py) and every engine share, below both: the options and result
types, the phase timer, the CUDA override rule, and the files written into a finished prefix
(conda-meta/history, conda-meta/state, .envkit/create.json). Engines import this, never create.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from envkit import __version__
from envkit.locations import META_DIR
from envkit.models import Machine, Request, Selection
from envkit.render.envfile import EnvFile
from envkit.secrets import redact
from envkit.verify.report import VerifyReport

STAGING = ".envkit-staging"
OLD = ".envkit-old"
ENGINES = ("rattler", "conda", "mamba", "micromamba")


@dataclass(frozen=True)
class CreateOptions:
    name: str
    spec: str | None = None
    file: Path | None = None
    lock: Path | None = None
    no_adapt: bool = False
    request: Request = field(default_factory=Request)
    flavor_given: bool = False
    mirror: str | None = None
    channels: tuple[str, ...] = ()
    prefix: Path | None = None
    engine: str = "rattler"
    dry_run: bool = False
    force: bool = False
    no_verify: bool = False
    require_gpu: bool = False
    driver_version: str | None = None
    compute_capabilities: tuple[str, ...] = ()
    argv: tuple[str, ...] = ("envkit", "create")
    verify_timeout: float = 300.0


@dataclass(frozen=True)
class CreateResult:
    prefix: Path
    packages: tuple[Any, ...]  # PlannedPackage
    selection: Selection | None
    machine: Machine
    phases: dict[str, float]
    dry_run: bool
    env_file: str
    verify: VerifyReport | None = None
    pip_lines: tuple[str, ...] = ()
    engine: str = "rattler"
    notes: tuple[str, ...] = ()
    changes: tuple[str, ...] = ()  # what --file adaptation changed
    virtual_packages: tuple[str, ...] = ()  # what the solve assumed (__cuda, __glibc, ...)

    @property
    def download_bytes(self) -> int:
        return sum(p.size or 0 for p in self.packages if not p.cached)

    def to_json(self) -> dict[str, Any]:
        return {
            "prefix": str(self.prefix), "dry_run": self.dry_run, "engine": self.engine,
            "selection": self.selection.to_json() if self.selection else None,
            "packages": [{k: v for k, v in asdict(p).items() if k in (
                "name", "version", "build", "channel", "subdir", "size", "cached")} for p in self.packages],
            "pip": list(self.pip_lines),
            "download_bytes": self.download_bytes,
            "phases_s": {k: round(v, 3) for k, v in self.phases.items()},
            "verify": self.verify.to_json() if self.verify else None,
            "notes": list(self.notes),
            "changes": list(self.changes),
            "virtual_packages": list(self.virtual_packages),
        }


class Timer:
    def __init__(self) -> None:
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start


def cuda_override_for(opts: CreateOptions, machine: Machine, selection: Selection | None) -> str | None:
    """The __cuda the solve assumes. Precedence (README "Precedence"): command-line flags > ENVKIT_* >
    CONDA_OVERRIDE_CUDA > detection. `--cuda X.Y` (or ENVKIT_CUDA, click's envvar for it) first; then a
    machine simulated by --driver-version (its CUDA); then CONDA_OVERRIDE_CUDA ("" removes __cuda, as in
    conda); None lets rattler detect the real driver."""
    cuda = opts.request.cuda
    if cuda not in ("auto", "cpu", "", None):
        return cuda
    if machine.simulated and machine.driver is not None:
        return machine.driver.cuda or ""
    if machine.cuda_override is not None:
        return machine.cuda_override
    return None


def write_meta(prefix: Path, opts: CreateOptions, env_text: str, selection: Selection | None, machine: Machine,
                packages: Sequence[Any], timer: Timer, cuda_override: str | None) -> None:
    from envkit.output import machine_json

    meta = prefix / META_DIR
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "environment.yml").write_text(env_text, encoding="utf-8")
    data = {
        "envkit_version": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "name": opts.name, "spec": opts.spec, "file": str(opts.file) if opts.file else None,
        "engine": opts.engine, "mirror": redact(opts.mirror) if opts.mirror else None,
        "cuda_override": cuda_override, "selection": selection.to_json() if selection else None,
        "machine": machine_json(machine), "packages": len(packages), "phases_s": {},
        "command": redact(" ".join(opts.argv)),
    }
    (meta / "create.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def write_state(prefix: Path, envfile: EnvFile) -> None:
    """`variables:` go where conda keeps them (conda-meta/state), so `conda activate` exports them too."""
    if envfile.variables:
        state = prefix / "conda-meta" / "state"
        state.write_text(json.dumps({"env_vars": dict(envfile.variables)}, indent=2) + "\n", encoding="utf-8")


def update_meta_phases(prefix: Path, timer: Timer) -> None:
    path = prefix / META_DIR / "create.json"
    try:
        data = json.loads(path.read_text())
        data["phases_s"] = {k: round(v, 3) for k, v in timer.phases.items()}
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    except (OSError, ValueError):
        pass


def write_history(prefix: Path, opts: CreateOptions, packages: Sequence[Any], specs: Sequence[str]) -> None:
    from envkit.history import Dist, append, revision_block

    dists = [Dist(p.channel, p.subdir, p.name, p.version, p.build) for p in packages]
    append(prefix, revision_block([redact(a) for a in opts.argv], dists, [], specs))

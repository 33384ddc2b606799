"""What the orchestrator (create.py) and every engine share, below both: the Engine contract, the
options and result types, the phase timer, the CUDA override rule, and the files written into a
finished prefix (conda-meta/history, conda-meta/state, .envkit/create.json). Engines import this,
never create.py.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from envkit import __version__
from envkit.compat.builds import is_cpu_build
from envkit.errors import PlanGuardError
from envkit.models import Machine, Request, Selection
from envkit.prefix import records
from envkit.prefix.history import Dist, append, revision_block
from envkit.render.envfile import EnvFile
from envkit.secrets import redact
from envkit.verify.report import VerifyReport

ENGINES = ("rattler", "conda", "mamba", "micromamba")


@dataclass(frozen=True)
class PlannedPackage:
    """One package of a plan or of an installed env, whichever engine produced it."""

    name: str
    version: str
    build: str
    build_number: int
    channel: str  # clean URL
    subdir: str
    file_name: str
    url: str  # clean URL
    size: int | None
    sha256: str | None
    depends: tuple[str, ...]
    cached: bool


@dataclass(frozen=True)
class Built:
    """What an engine's build() left in its target."""

    packages: tuple[PlannedPackage, ...]  # installed there, as create.json and the result list them
    notes: tuple[str, ...] = ()  # what the build noticed on the way (a repaired cache entry...)


class Engine(Protocol):
    """The contract create.py drives, one for every engine (pipx's backends/_base.py has this shape):
    RattlerEngine (embedded, py-rattler) and CondaCLIEngine (conda, mamba, micromamba).

    An engine plans and builds; it never settles. The target lock, the staging folder or in-place
    journal, the swap, ownership, verify and registration are create.install_and_settle's, the same
    for every engine, so a new engine cannot forget one of them."""

    # read-only members (a plain attribute or a class attribute implements each)
    @property
    def name(self) -> str:
        """As create.json and the result name it: "rattler", "conda", "mamba", "micromamba"."""
        ...

    @property
    def version(self) -> str | None:
        """The engine's own version for create.json (None: envkit's embedded py-rattler)."""
        ...

    @property
    def in_place(self) -> bool:
        """Builds at the final path (a conda prefix is not relocatable), not in a staging folder."""
        ...

    @property
    def whole_file(self) -> bool:
        """Installs the whole env file itself: its pip section, variables and conda-meta/history too."""
        ...

    @property
    def build_phase(self) -> str:
        """The timer's name for build()."""
        ...

    @property
    def notes(self) -> Sequence[str]:
        """What setting the engine up decided, for the output (channels passed as names, ...)."""
        ...

    def plan(self, specs: Sequence[str]) -> list[PlannedPackage]:
        """Solve without installing: what a dry run prints and what plan_guard checks."""
        ...

    def build(self, target: Path, final: Path) -> Built:
        """Install into `target` what plan() chose (or, for whole_file engines, the env file);
        `final` is where the env will live (the same path when in_place)."""
        ...

    def describe_virtual_packages(self) -> list[str]:
        """The virtual packages (__cuda, __glibc, ...) the solve assumed, for the dry-run plan."""
        ...


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
    catalogue: str = "auto"  # auto | offline | refresh: where selection learns what the channels publish
    not_envkit: bool = False  # --force may replace an env envkit cannot prove it made (trust-fs)


@dataclass(frozen=True)
class CreateResult:
    prefix: Path
    packages: tuple[PlannedPackage, ...]
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
    restored_old: bool = False  # --force whose rebuild FAILed verify: the old env is back (trust-fs)

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
            "restored_old": self.restored_old,
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
                packages: Sequence[PlannedPackage], timer: Timer, cuda_override: str | None,
                engine_version: str | None = None) -> None:
    records.write_kept_env_file(prefix, env_text)
    data = {
        "envkit_version": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "name": opts.name, "spec": opts.spec, "file": str(opts.file) if opts.file else None,
        "engine": opts.engine, "engine_version": engine_version or _engine_version(opts.engine), "mirror": redact(opts.mirror) if opts.mirror else None,
        "cuda_override": cuda_override, "selection": selection.to_json() if selection else None,
        "machine": machine.to_json(), "packages": len(packages), "phases_s": {},
        "command": redact(" ".join(opts.argv)),
    }
    records.write_create(prefix, data)


@functools.lru_cache(maxsize=None)
def _engine_version(engine: str) -> str | None:
    if engine != "rattler":
        return None
    import sys

    loaded = sys.modules.get("rattler")  # the engine has imported it: its __version__ is the wheel's, for free
    if loaded is not None and isinstance(getattr(loaded, "__version__", None), str):
        return f"py-rattler {loaded.__version__}"
    from importlib.metadata import PackageNotFoundError, version  # ~35 ms: only when rattler was not loaded

    try:
        return f"py-rattler {version('py-rattler')}"
    except PackageNotFoundError:
        return None


def write_state(prefix: Path, envfile: EnvFile) -> None:
    """`variables:` go where conda keeps them (conda-meta/state), so `conda activate` exports them too."""
    if envfile.variables:
        records.write_state(prefix, envfile.variables)


def update_meta_phases(prefix: Path, timer: Timer) -> None:
    records.update_create(prefix, phases_s={k: round(v, 3) for k, v in timer.phases.items()})


def write_history(prefix: Path, opts: CreateOptions, packages: Sequence[PlannedPackage], specs: Sequence[str]) -> None:
    dists = [Dist(p.channel, p.subdir, p.name, p.version, p.build) for p in packages]
    append(prefix, revision_block([redact(a) for a in opts.argv], dists, [], specs,
                                  engine=_engine_version(opts.engine)))


# -- the plan guard ------------------------------------------------------------------------------


def plan_guard(selection: Selection | None, packages: Sequence[PlannedPackage], specs: Sequence[str]) -> None:
    """A GPU build was selected but the solution holds a CPU torch: stop before any download."""
    if selection is None or not selection.is_gpu:
        return
    by_name = {p.name: p for p in packages}
    culprit = None
    torch = by_name.get("pytorch")
    mutex = by_name.get("pytorch-mutex")
    if "cpuonly" in by_name:
        culprit = "cpuonly"
    elif mutex is not None and mutex.build.startswith("cpu"):
        culprit = next((p.name for p in packages if any(d.startswith("pytorch-mutex") and "cpu" in d
                                                            for d in p.depends)), "pytorch-mutex")
    elif torch is not None and is_cpu_build(torch.build):
        culprit = "pytorch"
    if culprit is None:
        _variant_guard(selection, by_name)
        return
    detail = f" (pulled in through {_blame(culprit, by_name, specs)!r})"
    build = torch.build if torch else "?"
    raise PlanGuardError(
        f"the solved plan installs a CPU build of PyTorch (pytorch {build}) although a CUDA {selection.cuda} "
        f"build was selected; the cause is {culprit}{detail}. Nothing was downloaded",
        f"remove {culprit} from the environment file, or pin pytorch=*=cuda* (envkit render does), "
        "or ask for a CPU env with --cuda cpu")


def _variant_guard(selection: Selection, by_name: dict[str, PlannedPackage]) -> None:
    """The solved CUDA build must be the selected one: conda-forge `cuda130_*` with cuda-version 13.0,
    the pytorch channel's `*_cuda12.4_*` with pytorch-cuda 12.4 (issue 11). Stops before any download."""
    torch = by_name.get("pytorch")
    if torch is None or selection.cuda is None:
        return
    want = selection.cuda
    if selection.flavor == "conda-forge":
        build_ok = torch.build.startswith(f"cuda{want.replace('.', '')}")
        pin = by_name.get("cuda-version")
        pin_name = "cuda-version"
    elif selection.flavor == "pytorch":
        build_ok = f"cuda{want}" in torch.build
        pin = by_name.get("pytorch-cuda")
        pin_name = "pytorch-cuda"
    else:
        return
    pin_ok = pin is None or pin.version == want or pin.version.startswith(want + ".")
    if build_ok and pin_ok:
        return
    solved = f"pytorch {torch.version} {torch.build}" + (f" with {pin_name} {pin.version}" if pin else "")
    raise PlanGuardError(
        f"the solved plan installs {solved}, but the selection was torch {selection.torch} {selection.variant} "
        f"with {pin_name} {want}; installing it would give a different CUDA build than the one checked against "
        "this machine. Nothing was downloaded",
        (f"pin pytorch=*={selection.variant}* and cuda-version={want}" if selection.flavor == "conda-forge" else
         f"pin pytorch-cuda={want}") + " in the environment file, or re-render it "
        "(envkit render --refresh reads what the channel publishes now)")


def _spec_name(spec: str) -> str:
    return re.split(r"[\s=<>!~\[]", spec.split("::")[-1], maxsplit=1)[0]


def _blame(culprit: str, by_name: dict[str, PlannedPackage], specs: Sequence[str]) -> str:
    """The requested spec whose dependency tree reaches `culprit` (itself if it was asked for)."""
    for spec in specs:
        seen: set[str] = set()
        todo = [_spec_name(spec)]
        while todo:
            name = todo.pop()
            if name == culprit:
                return spec
            if name in seen or name not in by_name:
                continue
            seen.add(name)
            todo += [_spec_name(d) for d in by_name[name].depends]
    return culprit


def pip_guard(selection: Selection | None, requirements: Sequence[tuple[str, str]]) -> None:
    """The pip side of the guard: a +cpu torch wheel when a GPU build was selected."""
    if selection is None or not selection.is_gpu:
        return
    for name, version in requirements:
        if name.lower() in ("torch", "torchvision", "torchaudio") and version.endswith("+cpu"):
            raise PlanGuardError(
                f"pip would install {name}=={version}, a CPU wheel, although CUDA {selection.cuda} was selected",
                f"use the PyTorch index for the selection ({selection.pip_index_url}) and pin "
                f"{name}==<version>+{selection.variant}")

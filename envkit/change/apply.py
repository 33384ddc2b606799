"""`envkit install | uninstall | update`: plan the change, show it, apply it atomically.

The plan re-solves what the env was asked for (conda-meta/history, prefix/history.py requested_specs) plus or
minus the command's specs, from the channels and mirror the env was made with (.envkit/create.json and the kept
environment.yml), preferring what is installed (rattler's locked_packages), with the env's torch and CUDA line
pinned unless the command names torch (diff.py). Nothing is downloaded before the diff is shown.

Applying it: under the env's target lock (the one create and remove hold), the env is hard-linked into a
staging folder beside it (prefix/staging.py clone_into), the engine links the new packages there (paths
rewritten for the final prefix, as create does), conda-meta/history gets the revision, and the staging env
replaces the live one through create.install_and_settle: the old env is set aside under a lock and deleted only
once the new one is in (and, when the torch stack changed, has not FAILed `verify --quick`). A failure, Ctrl-C,
SIGTERM or SIGKILL anywhere before that rename leaves the env exactly as it was; the sweep removes the leftover
staging folder and puts back a set-aside env (the same recovery as `create --force`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from envkit.change.diff import (TORCH, ChangePlan, Row, TorchChange, blame, diff, installed_rows, names_torch,
                                planned_rows, spec_name, torch_change, torch_pins)
from envkit.config import cache_dir, load_file_config
from envkit.engines.base import CreateOptions, PlannedPackage, Timer
from envkit.errors import EngineError, EnvkitError, PlanGuardError, UsageError
from envkit.prefix import records
from envkit.prefix.condarc import register_env
from envkit.prefix.history import Dist, append, requested_specs, revision_block
from envkit.prefix.locations import find_prefix
from envkit.prefix.ownership import RefusedError, check_deletable
from envkit.prefix.staging import clone_into, interrupting, sweep, target_lock
from envkit.render import mirrors
from envkit.secrets import REDACTED, VAULT, bearer_from_env, redact
from envkit.verify.report import VerifyReport

if TYPE_CHECKING:
    from envkit.engines.rattler_engine import Progress, RattlerEngine

ACTIONS = ("install", "uninstall", "update")
HISTORY_ACTION = {"install": "update", "update": "update", "uninstall": "remove"}  # conda/history.py's words
VERIFY_TIMEOUT_S = 300.0
NO_SOLUTION = "the solver found no solution"  # engines/rattler_engine.py _solve_error's words for an unsat solve


@dataclass(frozen=True)
class ChangeOptions:
    action: str  # install | uninstall | update
    name: str | None
    specs: tuple[str, ...] = ()
    prefix: Path | None = None
    mirror: str | None = None
    channels: tuple[str, ...] = ()
    dry_run: bool = False
    no_verify: bool = False
    argv: tuple[str, ...] = ("envkit",)
    verify_timeout: float = VERIFY_TIMEOUT_S
    force_reinstall: bool = False  # install: link the named packages again (from a checked cache) although installed
    pip: bool = False  # the env's pip with the torch constraints (change/pip.py), not the conda solve
    index_url: str | None = None  # --pip only: the index (default: the env's mirror's PyPI, else pip's config)


@dataclass(frozen=True)
class ChangeResult:
    plan: ChangePlan
    applied: bool
    dry_run: bool = False
    verify: VerifyReport | None = None
    restored_old: bool = False  # verify FAILed after a torch change: the env as it was is back
    phases: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {**self.plan.to_json(), "applied": self.applied, "dry_run": self.dry_run,
                "verify": self.verify.to_json() if self.verify else None, "restored_old": self.restored_old,
                "phases_s": {k: round(v, 3) for k, v in self.phases.items()},
                "notes": [*self.plan.notes, *self.notes]}


def env_words(opts: ChangeOptions, prefix: Path) -> str:
    """How a fix command names the env: by name, or --prefix for an env outside the envs folders."""
    return f"--prefix {prefix}" if opts.prefix is not None or not opts.name else opts.name


def change_env(opts: ChangeOptions, confirm: Callable[[ChangePlan], bool] | None = None,
               progress: Progress | None = None, on_line: Callable[[str], None] | None = None) -> ChangeResult:
    """Plan, show (confirm is called with the plan before any download: False stops), apply atomically."""
    if opts.action not in ACTIONS:
        raise UsageError(f"unknown change {opts.action!r}", f"use one of {', '.join(ACTIONS)}")
    prefix = find_prefix(opts.name, str(opts.prefix) if opts.prefix else None)
    _check_changeable(prefix, opts)
    if opts.pip:
        return _change_with_pip(opts, prefix, confirm, on_line)
    if opts.index_url:
        raise UsageError("--index-url is pip's: it goes with --pip", "add --pip, or drop --index-url")
    if opts.force_reinstall and opts.action != "install":
        raise UsageError("--force-reinstall goes with envkit install", f"envkit install {env_words(opts, prefix)} "
                         f"--force-reinstall {' '.join(opts.specs) or 'PKG...'}")
    if opts.dry_run:
        plan = plan_change(opts, prefix, _engine(opts, prefix, progress))
        if confirm is not None:
            confirm(plan)
        return ChangeResult(plan, applied=False, dry_run=True)
    waited: list[str] = []

    def on_wait(message: str) -> None:
        waited.append(message)
        if on_line:
            on_line(message)

    with interrupting(), target_lock(prefix, on_wait=on_wait):  # the lock create --force and remove hold
        notes = [*waited, *sweep(prefix.parent, held_name=prefix.name)]
        engine = _engine(opts, prefix, progress)
        timer = Timer()
        with timer.phase("solve"):
            plan = plan_change(opts, prefix, engine)
        if plan.diff.empty:
            return ChangeResult(plan, applied=False, phases=timer.phases,
                                notes=(*notes, "nothing to change: the env already has what was asked"))
        if confirm is not None and not confirm(plan):
            return ChangeResult(plan, applied=False, phases=timer.phases, notes=(*notes, "not applied"))
        report, restored = _apply(opts, prefix, plan, engine, timer, notes)
    return ChangeResult(plan, applied=not restored, verify=report, restored_old=restored, phases=timer.phases,
                        notes=tuple(notes))


def _change_with_pip(opts: ChangeOptions, prefix: Path, confirm: Callable[[ChangePlan], bool] | None,
                     on_line: Callable[[str], None] | None) -> ChangeResult:
    from envkit.change.pip import change_with_pip

    if opts.action == "update":
        raise UsageError("envkit update has no --pip: pip upgrades one named package at a time",
                         f"envkit install {env_words(opts, prefix)} --pip 'NAME>=VERSION'")
    diff_, applied, phases, notes = change_with_pip(
        prefix, env_words(opts, prefix), opts.action, opts.specs, opts.index_url, opts.dry_run, confirm,
        opts.verify_timeout, opts.argv, on_wait=on_line)
    plan = ChangePlan(opts.action, prefix, opts.specs, (), diff_, TorchChange(), (), pip=True)
    return ChangeResult(plan, applied=applied, dry_run=opts.dry_run, phases=phases, notes=tuple(notes))


def _check_changeable(prefix: Path, opts: ChangeOptions) -> None:
    """The change replaces the env folder (atomically): only an env envkit can prove it made."""
    try:
        check_deletable(prefix, allow_foreign=False, verb="change")
    except RefusedError as exc:
        raise RefusedError(exc.message, f"change it with the tool that made it (conda {_conda_verb(opts.action)} -p "
                                        f"{prefix} ...), or make it again with envkit create") from None


def _conda_verb(action: str) -> str:
    return {"uninstall": "remove"}.get(action, action)


# -- the plan ---------------------------------------------------------------------------------------
def plan_change(opts: ChangeOptions, prefix: Path, engine: RattlerEngine) -> ChangePlan:
    """Re-solve the env's requested specs with the command's, torch pinned unless named; raise on a torch swap."""
    rows = installed_rows(data for _path, data in records.conda_records(prefix))
    wanted = requested_specs(prefix)
    if not wanted:  # no history (an env made before envkit wrote it): everything installed counts as asked
        wanted = {name: name for name in rows}
    names = [spec_name(s) for s in opts.specs]
    keep_locked = set(rows)
    if opts.action == "install":
        for spec, name in zip(opts.specs, names):
            if name == "torch":
                raise UsageError("conda calls torch `pytorch`", f"envkit install {env_words(opts, prefix)} "
                                 f"{spec.replace('torch', 'pytorch', 1)}")
            wanted[name] = spec
        keep_locked -= set(names)
    else:
        missing = [n for n in names if n not in rows]
        if missing:
            raise UsageError(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed in {prefix}",
                             f"name installed packages (envkit export {env_words(opts, prefix)} lists them)")
        if opts.action == "uninstall":
            for name in names:
                wanted.pop(name, None)
            keep_locked -= set(names)
        else:  # update: the named packages (all, when none is named) may move within the env's pins
            for name in names:
                wanted.setdefault(name, name)  # conda update X records X as asked for, too
            keep_locked = keep_locked - set(names) if names else set()
    specs = list(wanted.values())
    torch_named = names_torch(opts.specs)
    pins = [] if torch_named else torch_pins(rows)
    locked = _locked_records(prefix, keep_locked)
    try:
        packages = engine.solve([*specs, *pins], locked, requested=specs)
    except EngineError as exc:
        if exc.message.startswith("invalid package spec"):
            raise UsageError(f"envkit {opts.action} {' '.join(opts.specs)}: {exc.message}",
                             "write each spec as conda does: NAME, NAME=VERSION or 'NAME>=X,<Y'") from None
        if not pins or NO_SOLUTION not in exc.message:  # a network or cache error is said as it is
            raise
        _explain_torch_conflict(opts, prefix, engine, specs, locked, rows)
        if not re.search(r"pytorch|cuda|cpuonly", exc.message.split(NO_SOLUTION, 1)[1]):
            raise  # no candidate at all, or a conflict elsewhere: the solver's words are the reason
        raise _kept_torch_error(opts, prefix, rows, exc) from None
    planned = planned_rows(packages)
    change = torch_change(rows, planned)
    if change and not torch_named:  # the pins make this unreachable; kept as the guard's last line
        raise _guard_error(opts, prefix, change, packages, rows)
    if opts.action == "uninstall":
        kept = [n for n in names if n in planned]
        if kept:
            users = sorted({p.name for p in packages if any(spec_name(d) in kept for d in p.depends)})
            raise UsageError(f"{', '.join(kept)} cannot be removed: "
                             + (f"{', '.join(users)} depend{'s' if len(users) == 1 else ''} on it" if users else
                                "the env's other requested packages need it"),
                             f"uninstall those too: envkit uninstall {env_words(opts, prefix)} "
                             f"{' '.join([*names, *users])}")
    again = names if opts.force_reinstall else ()
    return ChangePlan(opts.action, prefix, opts.specs, tuple(specs), diff(rows, planned, again), change,
                      tuple(packages))


def _locked_records(prefix: Path, names: set[str]) -> list[Any]:
    """The installed records the solver should prefer to keep (rattler PrefixRecords are RepoDataRecords)."""
    if not names:
        return []
    from envkit.engines.rattler_engine import read_prefix_records

    try:
        return [r for r in read_prefix_records(prefix) if r.name.normalized in names]
    except Exception:  # a record rattler cannot parse: solve without preferences rather than fail
        return []


def _kept_torch_error(opts: ChangeOptions, prefix: Path, rows: dict[str, Row], exc: EngineError) -> EngineError:
    """No solution keeps the env's torch (and none that moves it fits the env's own pins either)."""
    old = rows[TORCH]
    where = env_words(opts, prefix)
    what = ", ".join(spec_name(s) for s in opts.specs) or "the update"
    return EngineError(
        f"envkit {opts.action} {' '.join(opts.specs)}: no solution keeps the env's torch (pytorch {old.version} "
        f"{old.build}, kept unless the command names it) together with the env's own pins: "
        f"{exc.message.rstrip('.')}. "
        f"Nothing was downloaded and {prefix} is unchanged",
        f"pick a version of {what} made for pytorch {old.version} (envkit install {where} 'NAME=VERSION'); one that "
        f"needs another torch or a CPU build belongs in another env (envkit create {prefix.name}-2 ...)")


def _explain_torch_conflict(opts: ChangeOptions, prefix: Path, engine: RattlerEngine, specs: list[str],
                            locked: list[Any], rows: dict[str, Row]) -> None:
    """The solve that keeps torch failed: if one that may move torch succeeds, the command wanted another
    torch; say which and why (raise the guard error). Otherwise the original error stands."""
    try:
        packages = engine.solve(specs, locked, requested=specs)
    except EngineError:
        return
    change = torch_change(rows, planned_rows(packages))
    if change:
        raise _guard_error(opts, prefix, change, packages, rows) from None


def _guard_error(opts: ChangeOptions, prefix: Path, change: TorchChange, packages: Sequence[PlannedPackage],
                 rows: dict[str, Row]) -> PlanGuardError:
    old = rows[TORCH]
    new = next((p for p in packages if p.name == TORCH), None)
    culprit = next((p.name for p in packages if p.name in ("cpuonly",)), None) or TORCH
    chain = blame(culprit, packages, opts.specs) if culprit != TORCH or new is not None else []
    through = f" (through {' -> '.join(chain)})" if chain else ""
    where = env_words(opts, prefix)
    asked = " ".join(opts.specs)
    cpu = new is None or any("CPU build" in r for r in change.reasons)
    torch_spec = f"pytorch={new.version}" if new is not None else "pytorch"
    keep = (f"keep the env's torch and pick a version of {', '.join(spec_name(s) for s in opts.specs)} made for "
            f"pytorch {old.version} {old.build} (envkit install {where} 'NAME=VERSION')")
    if cpu:
        fix = (f"{keep}; a package that needs the CPU build belongs in a CPU env: envkit create "
               f"{prefix.name}-cpu --cuda cpu, then envkit install {prefix.name}-cpu {asked}")
    else:
        fix = (f"{keep}; or change torch on purpose by naming it: envkit install {where} {asked} {torch_spec} "
               "(the diff shows the change and asks; --yes accepts)")
    return PlanGuardError(
        f"envkit {opts.action} {asked} would change the env's torch: {'; '.join(change.reasons)}{through}. "
        f"envkit keeps torch unless the command names it. Nothing was downloaded and {prefix} is unchanged", fix)


# -- the engine, as the env was made ---------------------------------------------------------------
def _engine(opts: ChangeOptions, prefix: Path, progress: Progress | None) -> RattlerEngine:
    """The embedded engine with the env's channels (kept environment.yml), mirror and __cuda (create.json);
    --mirror / --channel replace them. Channels are canonical and the mirror is applied per request, as at
    create (create._engine_settings)."""
    from envkit.engines.rattler_engine import EngineSettings, RattlerEngine

    meta = records.read_meta_quiet(prefix, records.CREATE_FILE)
    config = load_file_config().data
    recorded = meta.get("mirror") if isinstance(meta.get("mirror"), str) else None
    configured = config.get("mirror") if isinstance(config.get("mirror"), str) else None
    if recorded and REDACTED in recorded:  # the credentials were never kept: --mirror or the config has them
        if not (opts.mirror or configured):
            raise UsageError(f"{prefix} was made through a mirror with credentials ({recorded}), which envkit never "
                             "writes down", f"give the mirror again: envkit {opts.action} "
                             f"{env_words(opts, prefix)} ... --mirror URL (or ENVKIT_MIRROR, or a profile in "
                             "the config file)")
        recorded = None
    value = opts.mirror or recorded or configured
    mirror = mirrors.resolve(value, config)
    if mirror is not None:
        if value and "://" in value:
            VAULT.split(value)
        bearer_from_env(urlsplit(next(iter(mirror.conda.values()))).hostname or "")
    channels = opts.channels or _env_channels(prefix, tuple(mirrors.canonical_channel(c, config) if mirror else c
                                                            for c in _kept_channels(prefix)))
    if not channels:
        raise UsageError(f"envkit cannot tell which channels {prefix} was made from",
                         "name them: --channel conda-forge (once per channel)")
    cuda = meta.get("cuda_override")
    cuda = cuda if isinstance(cuda, str) else None
    if cuda is None:
        cuda = _cuda_without_a_driver(prefix)
    settings = EngineSettings(channels=tuple(channels), cache_dir=cache_dir(), mirror=mirror, cuda_override=cuda,
                              sharded=bool(config.get("sharded_repodata", True)))
    return RattlerEngine(settings, progress)


def _cuda_without_a_driver(prefix: Path) -> str | None:
    """On a machine with no NVIDIA driver (a login node, CI, a Docker build) and no CONDA_OVERRIDE_CUDA, a CUDA env's
    re-solve sees no __cuda and fails on its own torch; solve for the CUDA the env already holds instead (its
    cuda-version record, else its torch build's CUDA), as CONDA_OVERRIDE_CUDA=X.Y would (conda docs, "Managing
    virtual packages": the override stands in for the driver). None: a driver is there, or the env has no CUDA."""
    import os

    if "CONDA_OVERRIDE_CUDA" in os.environ:
        return None
    from envkit.compat.builds import cuda_of_build
    from envkit.detect import detect

    own: str | None = None
    for _path, data in records.conda_records(prefix):
        name, version, build = data.get("name"), data.get("version"), data.get("build")
        if name == "cuda-version" and isinstance(version, str):
            own = ".".join(version.split(".")[:2])
            break
        if name == "pytorch" and isinstance(build, str):
            own = own or cuda_of_build(build)
    if own is None or detect().driver is not None:
        return None
    return own


def _env_channels(prefix: Path, kept: tuple[str, ...]) -> tuple[str, ...]:
    """The kept file's channels, unless the packages came from elsewhere (a create with --channel URL keeps
    `conda-forge` in its file but installed from the URL): then the channels the records name, the kept file's
    order first. The records' channel is the ground truth conda itself uses (conda-meta/*.json `channel`)."""
    from envkit.engines.rattler_engine import channel_url

    used = tuple(dict.fromkeys(str(d.get("channel")).rstrip("/") for _p, d in records.conda_records(prefix)
                               if isinstance(d.get("channel"), str) and d.get("channel")))
    known = {channel_url(c): c for c in kept}
    others = tuple(u for u in used if u not in known)
    if not others:
        return kept or used
    return (*(c for u, c in known.items() if u in used), *others)


def _kept_channels(prefix: Path) -> list[str]:
    try:
        kept = records.read_kept_env_file(prefix)
    except EnvkitError:
        return []
    channels = kept.get("channels") if isinstance(kept, dict) else None
    return [str(c) for c in channels if isinstance(c, str)] if isinstance(channels, list) else []


# -- applying it --------------------------------------------------------------------------------------
def _apply(opts: ChangeOptions, prefix: Path, plan: ChangePlan, engine: RattlerEngine, timer: Timer,
           notes: list[str]) -> tuple[VerifyReport | None, bool]:
    from envkit.create import install_and_settle

    def build(staging: Path) -> None:
        with timer.phase("clone"):
            clone_into(prefix, staging)
        linked = {r.name for r in plan.diff.linked}
        changing = {p.file_name for p in plan.packages if p.name in linked}
        with timer.phase("download+link"):
            built = engine.build(staging, prefix, changing, reinstall=[r.name for r in plan.diff.reinstalled])
        notes.extend(built.notes)
        append(staging, _history_block(opts, plan))

    settle = CreateOptions(name=prefix.name, prefix=prefix, no_verify=opts.no_verify or not plan.torch_stack_changed,
                           verify_timeout=opts.verify_timeout, argv=opts.argv)
    report, restored = install_and_settle(settle, prefix, build, True, timer, notes)
    if not restored:
        register_env(prefix)
    return report, restored


def _history_block(opts: ChangeOptions, plan: ChangePlan) -> str:
    """conda's revision format: `-` the packages that went, `+` those that came, then the command's specs."""
    by_name = {p.name: p for p in plan.packages}
    gone = [*plan.diff.removed, *(old for old, _new in plan.diff.changed), *plan.diff.reinstalled]
    came = list(plan.diff.linked)
    old_records = {d.get("name"): d for _p, d in records.conda_records(plan.prefix)}

    def old_dist(row: Row) -> Dist:
        data = old_records.get(row.name, {})
        return Dist(redact(str(data.get("channel", ""))).rstrip("/"), str(data.get("subdir", "")), row.name,
                    row.version, row.build)

    def new_dist(row: Row) -> Dist:
        p = by_name[row.name]
        return Dist(p.channel, p.subdir, p.name, p.version, p.build)

    return revision_block([redact(a) for a in opts.argv], [new_dist(r) for r in came], [old_dist(r) for r in gone],
                          [spec_name(s) for s in opts.specs] if opts.action == "uninstall" else list(opts.specs), action=HISTORY_ACTION[opts.action], engine=_engine_version())


def _engine_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"py-rattler {version('py-rattler')}"
    except PackageNotFoundError:
        return None

"""`envkit create`: what plan.py decided (a spec or file for this machine, or a lock's exact package set)
-> solve -> plan guard -> install atomically -> settle -> verify. Nothing here decides what to install.

Atomicity (rattler has no rollback, rattler-notes §4): under the per-target lock the env is built in
a locked staging folder next to its final place with `alternative_target_prefix=final`, the pip
section runs inside the staging env, and only a complete env is renamed into place with a rename that
never overwrites (envkit/prefix/staging.py). With --force the old env is moved aside first and deleted only
after the new one has passed verify; a FAIL puts it back. What may be replaced: envkit/prefix/ownership.py.
"""

from __future__ import annotations

import errno
import json
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from envkit import proc
from envkit.config import cache_dir, load_file_config
from envkit.detect import detect
from envkit.engines.base import (ENGINES, Built, CreateOptions, Engine, CreateResult, PlannedPackage, Timer,  # noqa: F401 (API)
                                 cuda_override_for, pip_guard, plan_guard, update_meta_phases, write_history,
                                 write_meta, write_state)
from envkit.engines.pip import pip_index_env
from envkit.errors import EngineError, EnvExistsError, EnvkitError, UsageError
from envkit.lock.file import Lock, LockedPlatform, read_lock
from envkit.models import Machine, Selection
from envkit.plan import differences, prepare, recreate_envfile, recreate_source
from envkit.prefix import records
from envkit.prefix.condarc import register_env
from envkit.prefix.locations import check_name, default_prefix
from envkit.prefix.ownership import check_deletable, forget, mark_owned, new_owner_id
from envkit.prefix.staging import (BUILDING, OLD, Held, building_in_place, check_target, discard, interrupting,
                                   quiet_signals, restore,
                                   set_aside, staging_folder, swap_in, sweep, target_lock, trash, update)
from envkit.render import mirrors
from envkit.render.envfile import EnvFile
from envkit.render.mirrors import strip_credentials
from envkit.safeio import read_text
from envkit.secrets import VAULT, bearer_from_env, redact, redact_file
from envkit.verify import verify_env
from envkit.verify.report import VerifyReport

if TYPE_CHECKING:  # rattler_engine is imported where it runs: importing it registers rattler's exit pause
    from envkit.engines.rattler_engine import EngineSettings, Progress


# -- staging and sweeping: envkit/prefix/staging.py; what may be replaced: envkit/prefix/ownership.py --------------
def _fix_shebangs(prefix: Path, staging: Path, final: Path) -> None:
    """pip wrote `#!<staging>/bin/python` into entry points; point them at the final prefix."""
    old, new = str(staging).encode(), str(final).encode()
    bindir = prefix / "bin"
    if not bindir.is_dir():
        return
    for script in bindir.iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        with script.open("rb") as handle:
            head = handle.read(2)
        if head != b"#!":
            continue
        data = script.read_bytes()
        if old in data:
            script.write_bytes(data.replace(old, new))


def _fix_editables(staging: Path, final: Path) -> None:
    """`-e git+...` clones into <staging>/src and pip's .pth/finder files point there: re-point them
    at the final prefix, as _fix_shebangs does for entry points (issue 10)."""
    old, new = str(staging), str(final)
    for site in staging.glob("lib/python*/site-packages"):
        for path in [*site.glob("*.pth"), *site.glob("__editable__*.py"), *site.glob("*.egg-link"),
                     *site.glob("*.dist-info/direct_url.json")]:
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            if old in text:
                path.write_text(text.replace(old, new), encoding="utf-8", errors="surrogateescape")


# -- pip ----------------------------------------------------------------------------------------
def _run_pip(prefix: Path, lines: Sequence[str], selection: Selection | None,
             on_line: Callable[[str], None] | None) -> tuple[str, ...]:
    """The env keeps a redacted record of the pip section; pip reads the real one from a private
    folder (0700, outside the env, removed afterwards), so a credential never lands in the env."""
    file_lines, secret_env = pip_index_env(lines)
    records.write_pip_requirements(prefix, redact("\n".join(file_lines)) + "\n")
    private = Path(tempfile.mkdtemp(prefix="envkit-pip-"))
    try:
        (private / "requirements.txt").write_text("\n".join(file_lines) + "\n", encoding="utf-8")
        installed = _pip_install(prefix, private, secret_env, selection, on_line)
        for record in prefix.glob("lib/python*/site-packages/*.dist-info/direct_url.json"):
            redact_file(record)  # PEP 610 keeps the URL a wheel came from: /t/<token>/ paths included
        return installed
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _pip_install(prefix: Path, private: Path, secret_env: dict[str, str], selection: Selection | None,
                 on_line: Callable[[str], None] | None) -> tuple[str, ...]:
    python = prefix / "bin" / "python"
    env = proc.child_env(secret_env, isolate_python=True, drop=("PIP_REQUIRE_VIRTUALENV",))
    base = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "-r",
            str(private / "requirements.txt")]
    report = private / "pip-plan.json"
    dry = proc.run(base + ["--dry-run", "--quiet", "--report", str(report)], timeout=900, env=env)
    if dry.returncode != 0:
        said = redact(dry.stderr_tail(12) or dry.stdout[-2000:])
        if "DO NOT MATCH THE HASHES" in said:  # pip's hash-checking mode: a lock's --hash lines
            raise EngineError(f"a PyPI file is not the one the lock names (sha256 differs): {said}",
                              "the index or mirror serves another file than when the lock was made: if that "
                              "change is expected, lock again (envkit lock / envkit export --format lock); "
                              "otherwise find out why the file changed before installing it")
        raise EngineError(f"pip could not resolve the pip section: {said}",
                          "check the pip package names and the index URLs in the environment file")
    try:
        planned = json.loads(report.read_text())["install"]
        pairs = [(i["metadata"]["name"], i["metadata"]["version"]) for i in planned]
        _keep_pip_provenance(prefix, planned)
    except (OSError, ValueError, KeyError):
        pairs = []
    finally:
        report.unlink(missing_ok=True)
    pip_guard(selection, pairs)
    done = proc.run(base, timeout=3600, env=env, on_line=(lambda line: on_line(redact(line))) if on_line else None)
    if done.returncode != 0:
        raise EngineError(f"pip failed installing the pip section (rc {done.returncode}): "
                          f"{redact(done.stdout.strip()[-1500:])}",
                          "nothing was left behind; fix the pip section or the index, then run again")
    return tuple(f"{n}=={v}" for n, v in pairs)


def _keep_pip_provenance(prefix: Path, planned: Sequence[dict[str, Any]]) -> None:
    """Where each wheel came from (URL without credentials, sha256): `envkit export --format lock` writes
    real PyPI entries from it. pip's own report is not kept (its URLs may carry an index's credentials)."""
    rows = []
    for item in planned:
        info = item.get("download_info") or {}
        url = redact(strip_credentials(str(info.get("url") or ""))[0])
        digest = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
        rows.append({"name": item["metadata"]["name"], "version": item["metadata"]["version"], "url": url,
                     "sha256": digest})
    records.write_pip_provenance(prefix, rows)


# -- the whole flow -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """What create_env decided to install, and where: the one argument the engine run takes besides options."""

    envfile: EnvFile
    env_text: str  # the file (or lock / explicit list) as kept in the env, redacted
    selection: Selection | None
    machine: Machine
    changes: tuple[str, ...]
    recreate: tuple[Path, str] | None  # (source, "lock" | "explicit"): the exact package set, no solve
    prefix: Path
    locked: tuple[Lock, LockedPlatform] | None = None  # a lock's (Lock, platform entry), read once


@dataclass(frozen=True)
class Plan:
    """What create is about to install, known after the solve and before any download: the CLI shows it
    (the build and why, how many packages, how much to download, where it differs from what was asked)."""

    prefix: Path
    selection: Selection | None
    packages: tuple[PlannedPackage, ...]
    pip_lines: tuple[str, ...]
    differences: tuple[str, ...]
    dry_run: bool

    @property
    def download_bytes(self) -> int:
        return sum(p.size or 0 for p in self.packages if not p.cached)

    @property
    def cached(self) -> int:
        return sum(1 for p in self.packages if p.cached)


def create_env(opts: CreateOptions, progress: Progress | None = None,
               on_line: Callable[[str], None] | None = None,
               on_plan: Callable[[Plan], None] | None = None) -> CreateResult:
    check_name(opts.name)
    if opts.engine not in ENGINES:
        raise UsageError(f"unknown engine {opts.engine!r}", f"use one of {', '.join(ENGINES)}")
    timer = Timer()
    job = _plan_job(opts, timer)
    if opts.dry_run:
        return _engine_run(opts, job, timer=timer, notes=[], replacing=False, progress=progress, on_line=on_line,
                           on_plan=on_plan)
    waited: list[str] = []

    def on_wait(message: str) -> None:
        waited.append(message)
        if on_line:
            on_line(message)

    try:
        # from the target lock on, SIGTERM is an exception too: the lock, the staging folder and a set-aside
        # old env are all dealt with on the way out (SIGTERM's default action skips every finally)
        with interrupting(), target_lock(job.prefix, on_wait=on_wait):
            notes = [*waited, *sweep(job.prefix.parent, held_name=job.prefix.name)]
            replacing = check_target(job.prefix, opts.force, opts.not_envkit)
            return _engine_run(opts, job, timer=timer, notes=notes, replacing=replacing, progress=progress,
                               on_line=on_line, on_plan=on_plan)
    except OSError as exc:
        raise filesystem_error(exc, job.prefix) from exc


def _plan_job(opts: CreateOptions, timer: Timer) -> Job:
    """What to install (plan.py decides: a lock or explicit file as it is, else a spec or file for this
    machine), checked against --require-gpu, and the prefix it goes to."""
    recreate = recreate_source(opts)
    locked: tuple[Lock, LockedPlatform] | None = None
    if recreate is not None:
        if opts.engine != "rattler":
            raise UsageError(f"--{'lock' if recreate[1] == 'lock' else 'file'} of {recreate[0].name} is installed "
                             f"by the embedded engine, not --engine {opts.engine}",
                             external_recreate_fix(recreate[0], recreate[1], opts))
        with timer.phase("detect"):
            machine = detect(driver_version=opts.driver_version, compute_capabilities=opts.compute_capabilities,
                             cuda=opts.request.cuda)
        source, kind = recreate
        envfile, locked = recreate_envfile(opts.name, source, kind)
        selection = None
        changes: tuple[str, ...] = tuple(f"not in the lock, not installed: {u}" for u in locked[1].unlocked
                                         ) if locked is not None else ()  # said, never silently dropped
        env_text = redact(read_text(source, f"{kind} file"))
    else:
        # the file (kept in the env) carries mirror URLs so a plain `conda env create` works behind the
        # mirror; the embedded engine solves against canonical channels and applies the mirror per request
        envfile, selection, machine, changes = prepare(opts, timer)
        env_text = redact(envfile.render())
    if opts.require_gpu and (selection is None or not selection.is_gpu) and not opts.dry_run:
        # the reason that made it a CPU build (no driver, --cuda cpu, an empty CONDA_OVERRIDE_CUDA...), not the
        # first reason, which says where the catalogue came from
        why = "the file was taken as is" if selection is None else next(
            (r for r in selection.reasons if "CPU build" in r), selection.reasons[-1] if selection.reasons else "")
        raise EngineError("no GPU build was selected and --require-gpu was given: " + why,
                          "run on a GPU machine, or plan for one with --cuda X.Y")
    prefix = (opts.prefix.expanduser().absolute() if opts.prefix else default_prefix(opts.name))
    return Job(envfile, env_text, selection, machine, changes, recreate, prefix, locked)


# conda-lockfiles (the conda plugin that reads rattler-lock v6: conda_lockfiles/rattler_lock/v6.py, FORMAT
# "rattler-lock-v6") installs a lock's conda packages with `conda env create --file F --format NAME` (conda 26.7.1;
# its older `--env-spec NAME` is marked for removal in 27.3); plain conda reads a lock as an environment.yml and makes
# an empty env (rc 0). conda-lockfiles skips the PyPI entries and `variables:`. conda 26 has no implicit channel, so the plugin's install names conda-forge
# (NoChannelsConfiguredError otherwise). Checked with conda 26.7.1 built from source and conda-lockfiles 0.2.2,
# offline (docs/conda-behaviour.md).
LOCKFILES_SPEC = "rattler-lock-v6"


def external_recreate_fix(source: Path, kind: str, opts: CreateOptions) -> str:
    """The command that works as printed for a lock or explicit file refused under --engine: envkit's own
    (complete), and conda's (an explicit file is plain conda's format; a v6 lock needs conda-lockfiles)."""
    target = shlex.quote(str(opts.prefix.expanduser().absolute() if opts.prefix else default_prefix(opts.name)))
    file = shlex.quote(str(source))
    ours = f"drop --engine: envkit create {shlex.quote(opts.name)} --{'lock' if kind == 'lock' else 'file'} {file}"
    if kind != "lock":
        return (f"{ours} (pip sidecar and variables included); or with plain conda, the conda packages only: "
                f"conda create -p {target} --file {file}")
    if read_lock(source).version != 6:
        return f"{ours} (conda-lockfiles 0.2 reads rattler-lock v6 only; this lock is v7)"
    return (f"{ours} (PyPI entries and variables included); or with conda, the conda packages only: "
            f"conda install -n base -c conda-forge conda-lockfiles, then conda env create -p {target} --file {file} "
            f"--format {LOCKFILES_SPEC}")


def filesystem_error(exc: OSError, prefix: Path) -> EnvkitError:
    """An OS error while building next to `prefix`, after the staging folder was cleaned up."""
    where = exc.filename or prefix.parent
    what = f"cannot create {prefix}: {exc.strerror or exc} ({where})"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return EnvkitError(what, f"free space on that filesystem (df -h {prefix.parent}), or create it elsewhere "
                                 "with --prefix PATH")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return EnvkitError(what, f"create it where you can write (--prefix PATH), or fix the permissions of "
                                 f"{prefix.parent}")
    return EnvkitError(what, f"check {prefix.parent}, then run the same command again")


def _engine_run(opts: CreateOptions, job: Job, *, timer: Timer, notes: list[str], replacing: bool,
                progress: Progress | None, on_line: Callable[[str], None] | None,
                on_plan: Callable[[Plan], None] | None = None) -> CreateResult:
    """One flow for every engine (engines/base.py Engine): plan and guard, then build and settle under
    the target lock (a dry run stops after the plan)."""
    engine, envfile, cuda = _make_engine(opts, job, progress, on_line)
    notes.extend(engine.notes)  # what setting the engine up decided (which channels, which credentials)
    packages, specs = _plan(opts, engine, job, envfile, timer)
    if on_plan is not None:  # before any download
        on_plan(Plan(job.prefix, job.selection, packages, tuple(envfile.pip),
                     differences(opts.request, job.selection), opts.dry_run))
    if opts.dry_run:
        return CreateResult(job.prefix, packages, job.selection, job.machine, timer.phases, True, job.env_text,
                            pip_lines=envfile.pip, engine=engine.name, notes=tuple(notes), changes=job.changes,
                            virtual_packages=tuple(engine.describe_virtual_packages()))
    built: list[Built] = []
    pip_installed: list[str] = list(envfile.pip) if engine.whole_file else []

    def build(target: Path) -> None:
        with timer.phase(engine.build_phase):
            built.append(engine.build(target, job.prefix))
        notes.extend(built[-1].notes)
        installed = built[-1].packages
        if not engine.whole_file:
            if envfile.pip:
                if progress is not None:
                    progress.phase("pip")
                with timer.phase("pip"):
                    pip_installed[:] = _run_pip(target, envfile.pip, job.selection, on_line)
                _fix_shebangs(target, target, job.prefix)
                _fix_editables(target, job.prefix)
        write_meta(target, opts, job.env_text, job.selection, job.machine, installed, timer, cuda,
                   engine_version=engine.version)
        if not engine.whole_file:
            write_state(target, envfile)
            write_history(target, opts, installed, specs)

    with interrupting():
        report, restored = install_and_settle(opts, job.prefix, build, replacing, timer, notes,
                                              in_place=engine.in_place,
                                              on_phase=progress.phase if progress is not None else None)
    if not restored:
        register_env(job.prefix)  # ~/.conda/environments.txt, as conda does: `conda env list` shows it
        update_meta_phases(job.prefix, timer)
    installed = built[-1].packages if built else packages
    return CreateResult(job.prefix, installed, job.selection, job.machine, timer.phases, False, job.env_text, report,
                        tuple(pip_installed), engine=engine.name, notes=tuple(notes), changes=job.changes,
                        restored_old=restored)


def _make_engine(opts: CreateOptions, job: Job, progress: Progress | None,
                 on_line: Callable[[str], None] | None) -> tuple[Engine, EnvFile, str | None]:
    """The engine opts.engine names, the env file it installs and the __cuda level it solves for."""
    cuda = cuda_override_for(opts, job.machine, job.selection)
    if opts.engine != "rattler":
        from envkit.engines.conda_cli import CondaCLIEngine

        return CondaCLIEngine(opts, job.envfile, job.prefix, cuda, on_line), job.envfile, cuda
    from envkit.engines.rattler_engine import RattlerEngine  # lazy: it registers rattler's exit pause

    settings, envfile = _engine_settings(opts, job, cuda)
    return RattlerEngine(settings, progress), envfile, cuda


def _engine_settings(opts: CreateOptions, job: Job, cuda: str | None) -> tuple[EngineSettings, EnvFile]:
    """The embedded engine's channels (canonical, the mirror applied per request), mirror credentials and
    __cuda; behind a mirror with a PyPI index, the pip section gets that index too."""
    from envkit.engines.rattler_engine import EngineSettings

    envfile = job.envfile
    config = load_file_config().data
    mirror = mirrors.resolve(opts.mirror, config)
    if mirror is not None:
        if opts.mirror and "://" in opts.mirror:
            VAULT.split(opts.mirror)  # user:pass@ becomes a header, /t/<token>/ a request-time rewrite
        bearer_from_env(urlsplit(next(iter(mirror.conda.values()))).hostname or "")
    channels = opts.channels or tuple(mirrors.canonical_channel(c, config) if mirror else c
                                      for c in envfile.channels)
    if mirror is not None and mirror.pypi and envfile.pip and not any(
            line.startswith(("--index-url", "-i ")) for line in envfile.pip):
        envfile = replace(envfile, pip=(f"--index-url {mirror.pypi}", *envfile.pip))  # behind the mirror, pip too
    settings = EngineSettings(channels=channels, cache_dir=cache_dir(), mirror=mirror,
                              cuda_override=cuda,
                              sharded=bool(config.get("sharded_repodata", True)))
    return settings, envfile


def _plan(opts: CreateOptions, engine: Engine, job: Job, envfile: EnvFile,
          timer: Timer) -> tuple[tuple[PlannedPackage, ...], list[str]]:
    """The packages to install and the specs conda-meta/history records: a lock's or explicit list's as
    they are (the embedded engine), else solved and guarded. An in-place engine's plan is a second full
    solve by conda itself: it runs only when something needs it (a dry run, or a GPU build to guard)."""
    if job.recreate is not None and not engine.whole_file:
        from envkit.engines.rattler_engine import RattlerEngine

        assert isinstance(engine, RattlerEngine)
        source, _kind = job.recreate
        with timer.phase("solve"):
            packages = tuple(engine.load_locked(job.locked) if job.locked is not None else engine.load_explicit(source))
        return packages, [p.name for p in packages]
    specs = list(envfile.dependencies)
    if envfile.pip and not engine.whole_file and not any(re.match(r"^pip([=<>\s]|$)", s) for s in specs):
        specs.append("pip")
    if engine.whole_file and not (opts.dry_run or (job.selection is not None and job.selection.is_gpu)):
        return (), specs
    with timer.phase("solve"):
        packages = tuple(engine.plan(specs))
    plan_guard(job.selection, packages, specs)
    if envfile.pip and not engine.whole_file:
        pip_guard(job.selection, [(m.group(1), m.group(2)) for line in envfile.pip
                                  if (m := re.match(r"^(torch|torchvision|torchaudio)==(\S+)$", line))])
    return packages, specs


def install_and_settle(opts: CreateOptions, prefix: Path, build: Callable[[Path], None], replacing: bool, timer: Timer,
                       notes: list[str], in_place: bool = False,
                       on_phase: Callable[[str], None] | None = None) -> tuple[VerifyReport | None, bool]:
    """Build in a locked staging folder, mark it envkit's, move it in with a rename that never
    overwrites, then verify. With --force the old env is moved aside (locked) just before the move-in
    and deleted only once the new env did not FAIL verify; a FAIL, a broken verify, Ctrl-C or a failed
    move-in put it back. `in_place`: external engines build at the final name under a journal
    (staging.building_in_place). Returns the verify report and whether the old env was restored."""
    owner_id = new_owner_id()
    old = None
    swapped = False
    try:
        if in_place:
            with building_in_place(prefix) as journal:
                old = _set_aside_if(replacing, prefix, owner_id, opts.not_envkit, journal)
                if prefix.exists() or prefix.is_symlink():
                    raise EnvExistsError(f"{prefix} appeared while the environment was being prepared; it was not "
                                         "touched", "run again with --force to replace it, or choose another name")
                try:
                    build(prefix)
                    mark_owned(prefix, prefix, owner_id)
                except BaseException:
                    _drop_half_made(prefix)
                    raise
                swapped = True
        else:
            with staging_folder(prefix) as staging:
                build(staging.folder)
                mark_owned(staging.folder, prefix, owner_id)
                with quiet_signals():
                    old = _set_aside_if(replacing, prefix, owner_id, opts.not_envkit, None)
                    swap_in(staging.folder, prefix)
                    swapped = True
        timer.phases["download"] = timer.phases.pop("download+link", 0.0)
        report = None
        if not opts.no_verify:
            if on_phase is not None:
                on_phase("verify")
            with timer.phase("verify"):
                report = verify_env(prefix=str(prefix), timeout=opts.verify_timeout, quick=True)
    except BaseException as exc:
        if old is not None:
            kept = _put_back(old, prefix, owner_id if swapped else None)
            what = "verify did not complete on the rebuild" if swapped else "the rebuild failed"
            notes.append(f"{what}: {kept}")
            if isinstance(exc, EnvkitError):
                exc.message += f" ({kept})"
        raise
    if old is None:
        return report, False
    if report is not None and report.outcome == "FAIL":
        kept = _put_back(old, prefix, owner_id)
        notes.append(f"verify FAILED on the rebuild: {kept}; the rebuild was removed")
        return report, True
    forget(old.folder, prefix)  # its registry entry goes with it
    update(old, OLD, prefix, new_id=owner_id, replaced=True)  # a kill from here on: the sweep finishes the removal
    problem = old.release(remove_folder=True)
    if problem:
        notes.append(f"the old environment was replaced, but {problem}")
    return report, False


def _set_aside_if(replacing: bool, prefix: Path, owner_id: str, allow_foreign: bool,
                  journal: Held | None) -> Held | None:
    """--force: re-check what is at the target right now, then move it aside under a lock."""
    if not replacing or not (prefix.exists() or prefix.is_symlink()):
        return None
    check_deletable(prefix, allow_foreign=allow_foreign, verb="replace")
    old = set_aside(prefix, owner_id)
    if journal is not None:
        update(journal, BUILDING, prefix, aside=str(old.folder))
    return old


def _put_back(old: Held, prefix: Path, new_id: str | None) -> str:
    """Remove this run's new env (if it got in), then move the old env back; say what happened."""
    with quiet_signals():
        problem = discard(prefix, new_id) if new_id else None
        failed = restore(old, prefix)
    return failed or (f"the old environment was restored at {prefix}" + (f" ({problem})" if problem else ""))


def _drop_half_made(prefix: Path) -> None:
    """An external build failed: remove what the engine left at the name (its env, or an empty folder)."""
    if prefix.is_symlink() or not prefix.exists():
        return
    if records.has_conda_meta(prefix) or not any(prefix.iterdir()):
        with quiet_signals():
            trash(prefix)

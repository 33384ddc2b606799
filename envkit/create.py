"""`envkit create`: detect -> select -> render -> solve -> plan guard -> install atomically -> verify.

Atomicity (rattler has no rollback, rattler-notes §4): under the per-target lock the env is built in
a locked staging folder next to its final place with `alternative_target_prefix=final`, the pip
section runs inside the staging env, and only a complete env is renamed into place with a rename that
never overwrites (envkit/staging.py). With --force the old env is moved aside first and deleted only
after the new one has passed verify; a FAIL puts it back. What may be replaced: envkit/ownership.py.
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from envkit import __version__, proc
from envkit.errors import EngineError, EnvExistsError, EnvkitError, PlanGuardError, UsageError
from envkit.locations import META_DIR, check_name, default_prefix
from envkit.models import Machine, Request, Selection
from envkit.render.envfile import EnvFile
from envkit.secrets import redact
from envkit.verify.report import VerifyReport

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
    not_envkit: bool = False  # --force may replace an env envkit cannot prove it made
    require_gpu: bool = False
    driver_version: str | None = None
    compute_capabilities: tuple[str, ...] = ()
    argv: tuple[str, ...] = ("envkit", "create")
    verify_timeout: float = 300.0
    catalogue: str = "auto"  # auto | offline | refresh: where selection learns what the channels publish


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
    restored_old: bool = False  # --force whose rebuild FAILed verify: the old env is back

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


# -- what to install ----------------------------------------------------------------------------
def _prepare(opts: CreateOptions, timer: Timer) -> tuple[EnvFile, Selection | None, Machine, tuple[str, ...]]:
    from envkit.stages import render_env

    if opts.file is not None and opts.no_adapt:
        from envkit.detect import detect

        with timer.phase("detect"):
            machine = detect(driver_version=opts.driver_version, compute_capabilities=opts.compute_capabilities,
                             cuda=opts.request.cuda)
        with timer.phase("render"):
            envfile = envfile_as_is(opts.file, opts.name)
        return envfile, None, machine, ()
    with timer.phase("render"):
        rendered = render_env(spec=opts.spec if opts.file is None else None, from_file=opts.file, name=opts.name,
                              request=opts.request, flavor_given=opts.flavor_given,
                              mirror=opts.mirror, driver_version=opts.driver_version,
                              compute_capabilities=opts.compute_capabilities, catalogue_mode=opts.catalogue,
                              channels=opts.channels)
    return rendered.envfile, rendered.selection, rendered.machine, rendered.changes


def envfile_as_is(path: Path, name: str) -> EnvFile:
    """--file with --no-adapt: the user's file, validated, taken literally (prefix: ignored)."""
    from envkit.render.adapt import parse_file
    from envkit.render.envfile import check_channel, check_pip_line, parse_conda_spec

    parsed = parse_file(path)
    channels = tuple(check_channel(c, f"{path}: channels") for c in parsed.channels)
    if not channels:
        raise UsageError(f"{path} lists no channels (conda 26 has no implicit defaults)",
                         "add a channels: list, pass --channel URL, or drop --no-adapt")
    deps = tuple(parse_conda_spec(d, f"{path}: dependencies").render() for d in parsed.conda)
    pip = tuple(check_pip_line(p, f"{path}: pip") for p in parsed.pip)
    return EnvFile(name, channels, deps, pip, parsed.variables, (f"taken as is from {path.name} (--no-adapt)",))


def cuda_override_for(opts: CreateOptions, machine: Machine, selection: Selection | None) -> str | None:
    """The __cuda the solve assumes: --cuda X.Y, CONDA_OVERRIDE_CUDA, or a simulated driver's CUDA;
    None lets rattler detect the real driver ("" removes __cuda, as an empty CONDA_OVERRIDE_CUDA does)."""
    cuda = opts.request.cuda
    if cuda not in ("auto", "cpu", ""):
        return cuda
    if machine.cuda_override is not None:
        return machine.cuda_override
    if machine.simulated and machine.driver is not None:
        return machine.driver.cuda or ""
    return None


# -- the plan guard ------------------------------------------------------------------------------
_CPU_BUILD = re.compile(r"^cpu[_-]|(^|_)cpu(_|$)")


def plan_guard(selection: Selection | None, packages: Sequence[Any], specs: Sequence[str]) -> None:
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
    elif torch is not None and _CPU_BUILD.search(torch.build):
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


def _variant_guard(selection: Selection, by_name: dict[str, Any]) -> None:
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


def _blame(culprit: str, by_name: dict[str, Any], specs: Sequence[str]) -> str:
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


# -- staging and sweeping: envkit/staging.py; what may be replaced: envkit/ownership.py --------------
@contextmanager
def _term_as_interrupt() -> Iterator[None]:
    """Ctrl-C and SIGTERM (a `kill`, a CI timeout) interrupt the install at once and clean up.

    A handler of our own (not Python's default) also keeps asyncio.run from swallowing SIGINT
    while it waits on rattler's future: the wakeup fd breaks the wait and the handler raises.
    """
    def handler(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not in the main thread
        pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


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
def pip_index_env(lines: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Index lines whose server needs credentials move out of the file into pip's environment
    (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL): the secret never touches a file, argv or a log."""
    from envkit.secrets import VAULT

    kept: list[str] = []
    index: str | None = None
    extra: list[str] = []
    for line in lines:
        match = re.match(r"^(--index-url|-i|--extra-index-url)[ =](\S+)$", line.strip())
        if match:
            secret_url = VAULT.with_credentials(match.group(2))
            if secret_url != match.group(2):
                if match.group(1) == "--extra-index-url":
                    extra.append(secret_url)
                else:
                    index = secret_url
                continue
        kept.append(line)
    env: dict[str, str] = {}
    if index:
        env["PIP_INDEX_URL"] = index
    if extra:
        env["PIP_EXTRA_INDEX_URL"] = " ".join(extra)
    return kept, env


def _run_pip(prefix: Path, lines: Sequence[str], selection: Selection | None, on_line: Any) -> tuple[str, ...]:
    reqs = prefix / META_DIR / "requirements.txt"
    reqs.parent.mkdir(parents=True, exist_ok=True)
    file_lines, secret_env = pip_index_env(lines)
    reqs.write_text("\n".join(file_lines) + "\n", encoding="utf-8")
    python = prefix / "bin" / "python"
    env = proc.child_env(secret_env, isolate_python=True, drop=("PIP_REQUIRE_VIRTUALENV",))
    base = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "-r", str(reqs)]
    report = prefix / META_DIR / "pip-plan.json"
    dry = proc.run(base + ["--dry-run", "--quiet", "--report", str(report)], timeout=900, env=env)
    if dry.returncode != 0:
        raise EngineError(f"pip could not resolve the pip section: {redact(dry.stderr_tail(12) or dry.stdout[-2000:])}",
                          "check the pip package names and the index URLs in the environment file")
    try:
        planned = json.loads(report.read_text())["install"]
        pairs = [(i["metadata"]["name"], i["metadata"]["version"]) for i in planned]
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


# -- the whole flow -----------------------------------------------------------------------------
def is_explicit(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return any(line.strip() == "@EXPLICIT" for line in handle)
    except OSError:
        return False


def _recreate_source(opts: CreateOptions) -> tuple[Path, str] | None:
    """--lock FILE or --file EXPLICIT.txt: the exact package set, installed without solving."""
    if opts.lock is not None:
        return opts.lock, "lock"
    if opts.file is not None and is_explicit(opts.file):
        return opts.file, "explicit"
    return None


def _channels_of(path: Path, kind: str) -> tuple[str, ...]:
    """Channel base URLs named in an explicit list or a lock file (for mirrors and credentials)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    urls = re.findall(r"((?:https?|file)://\S+?)/(?:linux-64|noarch|linux-aarch64|osx-64|osx-arm64|win-64)/", text)
    return tuple(dict.fromkeys(urls))


def create_env(opts: CreateOptions, progress: Any = None, on_line: Any = None) -> CreateResult:
    check_name(opts.name)
    if opts.engine not in ENGINES:
        raise UsageError(f"unknown engine {opts.engine!r}", f"use one of {', '.join(ENGINES)}")
    timer = Timer()
    external = opts.engine != "rattler"
    recreate = _recreate_source(opts)
    if recreate is not None:
        from envkit.detect import detect

        if external:
            raise UsageError("--lock and explicit files are installed by the embedded engine",
                             "drop --engine, or give conda the file yourself: conda create -p PREFIX --file FILE")
        with timer.phase("detect"):
            machine = detect(driver_version=opts.driver_version, compute_capabilities=opts.compute_capabilities,
                             cuda=opts.request.cuda)
        source, kind = recreate
        envfile = EnvFile(opts.name, _channels_of(source, kind), (), (), (), ())
        selection = None
        changes: tuple[str, ...] = ()
        env_text = redact(source.read_text(encoding="utf-8", errors="replace"))
    else:
        # the file (kept in the env) carries mirror URLs so a plain `conda env create` works behind the
        # mirror; the embedded engine solves against canonical channels and applies the mirror per request
        envfile, selection, machine, changes = _prepare(opts, timer)
        env_text = redact(envfile.render())
    if opts.require_gpu and (selection is None or not selection.is_gpu) and not opts.dry_run:
        raise EngineError("no GPU build was selected and --require-gpu was given: " +
                          (selection.reasons[0] if selection else "the file was taken as is"),
                          "run on a GPU machine, or plan for one with --cuda X.Y")
    prefix = (opts.prefix.expanduser().absolute() if opts.prefix else default_prefix(opts.name))
    if opts.dry_run:
        return _engine_run(opts, envfile, env_text, selection, machine, changes, recreate, prefix, timer, [],
                           False, progress, on_line)
    from envkit.staging import check_target, sweep, target_lock

    waited: list[str] = []

    def on_wait(message: str) -> None:
        waited.append(message)
        if on_line:
            on_line(message)

    try:
        with target_lock(prefix, on_wait=on_wait):
            notes = [*waited, *sweep(prefix.parent, held_name=prefix.name)]
            replacing = check_target(prefix, opts.force, opts.not_envkit)
            return _engine_run(opts, envfile, env_text, selection, machine, changes, recreate, prefix, timer,
                               notes, replacing, progress, on_line)
    except OSError as exc:
        raise filesystem_error(exc, prefix) from exc


def filesystem_error(exc: OSError, prefix: Path) -> EnvkitError:
    """An OS error while building next to `prefix`, after the staging folder was cleaned up."""
    import errno

    where = exc.filename or prefix.parent
    what = f"cannot create {prefix}: {exc.strerror or exc} ({where})"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return EnvkitError(what, f"free space on that filesystem (df -h {prefix.parent}), or create it elsewhere "
                                 "with --prefix PATH")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return EnvkitError(what, f"create it where you can write (--prefix PATH), or fix the permissions of "
                                 f"{prefix.parent}")
    return EnvkitError(what, f"check {prefix.parent}, then run the same command again")


def _engine_run(opts: CreateOptions, envfile: EnvFile, env_text: str, selection: Selection | None,
                machine: Machine, changes: tuple[str, ...], recreate: tuple[Path, str] | None, prefix: Path,
                timer: Timer, notes: list[str], replacing: bool, progress: Any, on_line: Any) -> CreateResult:
    """Solve and install with the chosen engine; under the target lock unless this is a dry run."""
    from envkit.config import cache_dir, load_file_config
    from envkit.render import mirrors

    if opts.engine != "rattler":
        from envkit.engines.conda_cli import create_external

        def settle(target: Path, build: Any) -> tuple[VerifyReport | None, bool]:
            return install_and_settle(opts, target, build, replacing, timer, notes, in_place=True)

        result = create_external(opts, envfile, env_text, selection, machine, prefix, timer, notes, on_line,
                                 settle=settle)
        return replace(result, changes=changes)

    from envkit.engines.rattler_engine import EngineSettings, RattlerEngine

    config = load_file_config().data
    mirror = mirrors.resolve(opts.mirror, config)
    if mirror is not None:
        from urllib.parse import urlsplit

        from envkit.secrets import VAULT, bearer_from_env

        if opts.mirror and "://" in opts.mirror:
            VAULT.split(opts.mirror)  # user:pass@ becomes a header, /t/<token>/ a request-time rewrite
        bearer_from_env(urlsplit(next(iter(mirror.conda.values()))).hostname or "")
    channels = opts.channels or tuple(mirrors.canonical_channel(c, config) if mirror else c
                                      for c in envfile.channels)
    if mirror is not None and mirror.pypi and envfile.pip and not any(
            line.startswith(("--index-url", "-i ")) for line in envfile.pip):
        envfile = replace(envfile, pip=(f"--index-url {mirror.pypi}", *envfile.pip))  # behind the mirror, pip too
    settings = EngineSettings(channels=channels, cache_dir=cache_dir(), mirror=mirror,
                              cuda_override=cuda_override_for(opts, machine, selection),
                              sharded=bool(config.get("sharded_repodata", True)))
    engine = RattlerEngine(settings, progress)
    if recreate is not None:
        source, kind = recreate
        with timer.phase("solve"):
            packages = tuple(engine.load_lock(source) if kind == "lock" else engine.load_explicit(source))
        specs = [p.name for p in packages]
    else:
        specs = list(envfile.dependencies)
        if envfile.pip and not any(re.match(r"^pip([=<>\s]|$)", s) for s in specs):
            specs.append("pip")
        with timer.phase("solve"):
            packages = tuple(engine.solve(specs))
        plan_guard(selection, packages, specs)
        if envfile.pip:
            pip_guard(selection, [(m.group(1), m.group(2)) for line in envfile.pip
                                  if (m := re.match(r"^(torch|torchvision|torchaudio)==(\S+)$", line))])
    if opts.dry_run:
        return CreateResult(prefix, packages, selection, machine, timer.phases, True, env_text,
                            pip_lines=envfile.pip, notes=tuple(notes), changes=changes,
                            virtual_packages=tuple(engine.describe_virtual_packages()))
    pip_installed: tuple[str, ...] = ()

    def build(staging: Path) -> None:
        nonlocal pip_installed
        engine.check_file_hashes()
        notes.extend(engine.check_cache())
        with timer.phase("download+link"):
            engine.install(staging, prefix)
        engine.stamp_fresh()
        if envfile.pip:
            with timer.phase("pip"):
                pip_installed = _run_pip(staging, envfile.pip, selection, on_line)
            _fix_shebangs(staging, staging, prefix)
            _fix_editables(staging, prefix)
        _write_meta(staging, opts, env_text, selection, machine, packages, timer, settings.cuda_override)
        _write_state(staging, envfile)
        _write_history(staging, opts, packages, specs)

    with _term_as_interrupt():
        report, restored = install_and_settle(opts, prefix, build, replacing, timer, notes)
    if not restored:
        _update_meta_phases(prefix, timer)
    return CreateResult(prefix, packages, selection, machine, timer.phases, False, env_text, report,
                        pip_installed, notes=tuple(notes), changes=changes, restored_old=restored)


def install_and_settle(opts: Any, prefix: Path, build: Any, replacing: bool, timer: Timer,
                       notes: list[str], in_place: bool = False) -> tuple[VerifyReport | None, bool]:
    """Build in a locked staging folder, mark it envkit's, move it in with a rename that never
    overwrites, then verify. With --force the old env is moved aside (locked) just before the move-in
    and deleted only once the new env did not FAIL verify; a FAIL, a broken verify, Ctrl-C or a failed
    move-in put it back. `in_place`: external engines build at the final name under a journal
    (staging.building_in_place). Returns the verify report and whether the old env was restored."""
    from envkit.ownership import mark_owned, new_owner_id
    from envkit.staging import building_in_place, quiet_signals, staging_folder, swap_in

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
            from envkit.stages import verify_env

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
    from envkit.ownership import forget

    forget(old.folder)  # its registry entry goes with it
    problem = old.release(remove_folder=True)
    if problem:
        notes.append(f"the old environment was replaced, but {problem}")
    return report, False


def _set_aside_if(replacing: bool, prefix: Path, owner_id: str, allow_foreign: bool, journal: Any) -> Any:
    """--force: re-check what is at the target right now, then move it aside under a lock."""
    from envkit.ownership import check_deletable
    from envkit.staging import BUILDING, set_aside, update

    if not replacing or not (prefix.exists() or prefix.is_symlink()):
        return None
    check_deletable(prefix, allow_foreign=allow_foreign, verb="replace")
    old = set_aside(prefix, owner_id)
    if journal is not None:
        update(journal, BUILDING, prefix, aside=str(old.folder))
    return old


def _put_back(old: Any, prefix: Path, new_id: str | None) -> str:
    """Remove this run's new env (if it got in), then move the old env back; say what happened."""
    from envkit.staging import discard, quiet_signals, restore

    with quiet_signals():
        problem = discard(prefix, new_id) if new_id else None
        failed = restore(old, prefix)
    return failed or (f"the old environment was restored at {prefix}" + (f" ({problem})" if problem else ""))


def _drop_half_made(prefix: Path) -> None:
    """An external build failed: remove what the engine left at the name (its env, or an empty folder)."""
    from envkit.staging import quiet_signals, trash

    if prefix.is_symlink() or not prefix.exists():
        return
    if (prefix / "conda-meta").is_dir() or not any(prefix.iterdir()):
        with quiet_signals():
            trash(prefix)


def _write_meta(prefix: Path, opts: CreateOptions, env_text: str, selection: Selection | None, machine: Machine,
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


def _write_state(prefix: Path, envfile: EnvFile) -> None:
    """`variables:` go where conda keeps them (conda-meta/state), so `conda activate` exports them too."""
    if envfile.variables:
        state = prefix / "conda-meta" / "state"
        state.write_text(json.dumps({"env_vars": dict(envfile.variables)}, indent=2) + "\n", encoding="utf-8")


def _update_meta_phases(prefix: Path, timer: Timer) -> None:
    path = prefix / META_DIR / "create.json"
    try:
        data = json.loads(path.read_text())
        data["phases_s"] = {k: round(v, 3) for k, v in timer.phases.items()}
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    except (OSError, ValueError):
        pass


def _write_history(prefix: Path, opts: CreateOptions, packages: Sequence[Any], specs: Sequence[str]) -> None:
    from envkit.history import Dist, append, revision_block

    dists = [Dist(p.channel, p.subdir, p.name, p.version, p.build) for p in packages]
    append(prefix, revision_block([redact(a) for a in opts.argv], dists, [], specs))

"""`envkit create`: detect -> select -> render -> solve -> plan guard -> install atomically -> verify.

Atomicity (rattler has no rollback, rattler-notes §4): under the per-target lock the env is built in
a locked staging folder next to its final place with `alternative_target_prefix=final`, the pip
section runs inside the staging env, and only a complete env is renamed into place with a rename that
never overwrites (envkit/prefix/staging.py). With --force the old env is moved aside first and deleted only
after the new one has passed verify; a FAIL puts it back. What may be replaced: envkit/prefix/ownership.py.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from envkit import proc
from envkit.prefix.condarc import drop_cache_tag, register_env
from envkit.engines.base import (ENGINES, CreateOptions, CreateResult, Timer,  # noqa: F401 (API)
                                 cuda_override_for, pip_guard, plan_guard, update_meta_phases, write_history,
                                 write_meta, write_state)
from envkit.errors import EngineError, EnvExistsError, EnvkitError, UsageError
from envkit.prefix import records
from envkit.prefix.locations import check_name, default_prefix
from envkit.models import Machine, Selection
from envkit.render.envfile import EnvFile
from envkit.secrets import redact
from envkit.verify.report import VerifyReport


# -- what to install ----------------------------------------------------------------------------
def _prepare(opts: CreateOptions, timer: Timer) -> tuple[EnvFile, Selection | None, Machine, tuple[str, ...]]:
    from envkit.plan import render_env

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
    if opts.file is not None and rendered.selection is not None:
        _keep_pinned_gpu_build(opts, rendered.selection)
    return rendered.envfile, rendered.selection, rendered.machine, rendered.changes


def _keep_pinned_gpu_build(opts: CreateOptions, selection: Selection) -> None:
    """A file that pins a CUDA build (`pytorch=2.13.0=*cuda*`, as `envkit export` writes) must not turn
    into a CPU env because this machine has no GPU (CI, Docker, login node): that is the silent CPU
    build the selector exists to prevent (issue 12). Only an explicit --cuda cpu asks for that."""
    if selection.is_gpu or opts.request.cuda == "cpu" or opts.file is None:
        return
    from envkit.render.adapt import parse_file
    from envkit.render.envfile import parse_conda_spec

    pinned = [d for d in parse_file(opts.file).conda
              if "cuda" in parse_conda_spec(d).build.lower() and parse_conda_spec(d).name in (
                  "pytorch", "torchvision", "torchaudio", "pytorch-gpu")]
    if pinned:
        raise EngineError(
            f"{opts.file.name} pins a CUDA build ({', '.join(pinned)}), but this machine's selection is a CPU build "
            f"({selection.reasons[0] if selection.reasons else 'no usable GPU'}); nothing was installed",
            "plan for the target GPU with --cuda X.Y (or --driver-version/--compute-capability), take the file "
            "as is with --no-adapt (and CONDA_OVERRIDE_CUDA=X.Y on a GPU-less host), or pass --cuda cpu if a "
            "CPU build is really wanted")


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


# -- staging and sweeping: envkit/prefix/staging.py; what may be replaced: envkit/prefix/ownership.py --------------
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
            url = match.group(2)
            clean = VAULT.split(url) if ("@" in url or "/t/" in url) else url  # credentials in the file itself
            secret_url = VAULT.with_credentials(clean)
            if secret_url != clean:
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
    """The env keeps a redacted record of the pip section; pip reads the real one from a private
    folder (0700, outside the env, removed afterwards), so a credential never lands in the env."""
    import shutil
    import tempfile

    file_lines, secret_env = pip_index_env(lines)
    records.write_pip_requirements(prefix, redact("\n".join(file_lines)) + "\n")
    private = Path(tempfile.mkdtemp(prefix="envkit-pip-"))
    try:
        (private / "requirements.txt").write_text("\n".join(file_lines) + "\n", encoding="utf-8")
        installed = _pip_install(prefix, private, secret_env, selection, on_line)
        from envkit.secrets import redact_file

        for record in prefix.glob("lib/python*/site-packages/*.dist-info/direct_url.json"):
            redact_file(record)  # PEP 610 keeps the URL a wheel came from: /t/<token>/ paths included
        return installed
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _pip_install(prefix: Path, private: Path, secret_env: dict[str, str], selection: Selection | None,
                 on_line: Any) -> tuple[str, ...]:
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


def _keep_pip_provenance(prefix: Path, planned: Sequence[Any]) -> None:
    """Where each wheel came from (URL without credentials, sha256): `envkit export --format lock` writes
    real PyPI entries from it. pip's own report is not kept (its URLs may carry an index's credentials)."""
    from envkit.render.mirrors import strip_credentials

    rows = []
    for item in planned:
        info = item.get("download_info") or {}
        url = redact(strip_credentials(str(info.get("url") or ""))[0])
        digest = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
        rows.append({"name": item["metadata"]["name"], "version": item["metadata"]["version"], "url": url,
                     "sha256": digest})
    records.write_pip_provenance(prefix, rows)


# -- the whole flow -----------------------------------------------------------------------------
def is_explicit(path: Path) -> bool:
    from envkit.safeio import read_text

    return any(line.strip() == "@EXPLICIT" for line in read_text(path, "environment file").splitlines())


def _recreate_source(opts: CreateOptions) -> tuple[Path, str] | None:
    """--lock FILE or --file EXPLICIT.txt: the exact package set, installed without solving."""
    if opts.lock is not None:
        return opts.lock, "lock"
    if opts.file is not None and is_explicit(opts.file):
        return opts.file, "explicit"
    return None


def _channels_of(path: Path, kind: str) -> tuple[str, ...]:
    """Channel base URLs named in an explicit list or a lock file (for mirrors and credentials)."""
    from envkit.safeio import read_text

    text = read_text(path, f"{kind} file")
    urls = re.findall(r"((?:https?|file)://\S+?)/(?:linux-64|noarch|linux-aarch64|osx-64|osx-arm64|win-64)/", text)
    return tuple(dict.fromkeys(urls))


def _recreate_envfile(name: str, source: Path, kind: str) -> tuple[EnvFile, Any]:
    """What an explicit file (+ its sidecar) or a lock holds besides conda packages: pip, variables."""
    if kind == "lock":
        from envkit.lock.file import current_platform, pip_lines, read_lock

        from envkit.render.envfile import check_pip_line, check_variables

        lock = read_lock(source)
        entry = lock.platform(current_platform())
        channels = lock.channels or tuple(dict.fromkeys(c.channel_url for c in entry.conda))
        # a lock is input like any file: its PyPI entries and variables pass the same checks as a pip section
        pip = tuple(check_pip_line(line, f"{source}: pypi") for line in pip_lines(lock, entry))
        variables = check_variables(dict(lock.variables), f"{source}: variables")
        return EnvFile(name, channels, (), pip, variables, ()), (lock, entry)
    from envkit.export import read_sidecar

    pip, variables = read_sidecar(source)
    return EnvFile(name, _channels_of(source, kind), (), pip, variables, ()), None


def create_env(opts: CreateOptions, progress: Any = None, on_line: Any = None) -> CreateResult:
    check_name(opts.name)
    if opts.engine not in ENGINES:
        raise UsageError(f"unknown engine {opts.engine!r}", f"use one of {', '.join(ENGINES)}")
    timer = Timer()
    external = opts.engine != "rattler"
    recreate = _recreate_source(opts)
    locked: Any = None  # a lock's (Lock, platform entry), read once
    if recreate is not None:
        from envkit.detect import detect

        if external:
            raise UsageError("--lock and explicit files are installed by the embedded engine",
                             "drop --engine, or give conda the file yourself: conda create -p PREFIX --file FILE")
        with timer.phase("detect"):
            machine = detect(driver_version=opts.driver_version, compute_capabilities=opts.compute_capabilities,
                             cuda=opts.request.cuda)
        source, kind = recreate
        envfile, locked = _recreate_envfile(opts.name, source, kind)
        selection = None
        changes: tuple[str, ...] = tuple(f"not in the lock, not installed: {u}" for u in locked[1].unlocked
                                         ) if locked is not None else ()  # said, never silently dropped
        from envkit.safeio import read_text

        env_text = redact(read_text(source, f"{kind} file"))
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
                           False, progress, on_line, locked)
    from envkit.prefix.staging import check_target, sweep, target_lock

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
                               notes, replacing, progress, on_line, locked)
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
                timer: Timer, notes: list[str], replacing: bool, progress: Any, on_line: Any,
                locked: Any = None) -> CreateResult:
    """Solve and install with the chosen engine; under the target lock unless this is a dry run.
    `locked`: the (Lock, platform entry) create_env already read from a lock (None: an explicit file)."""
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
            packages = tuple(engine.load_locked(locked) if locked is not None else engine.load_explicit(source))
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
        drop_cache_tag(staging)
        if envfile.pip:
            with timer.phase("pip"):
                pip_installed = _run_pip(staging, envfile.pip, selection, on_line)
            _fix_shebangs(staging, staging, prefix)
            _fix_editables(staging, prefix)
        write_meta(staging, opts, env_text, selection, machine, packages, timer, settings.cuda_override)
        write_state(staging, envfile)
        write_history(staging, opts, packages, specs)

    with _term_as_interrupt():
        report, restored = install_and_settle(opts, prefix, build, replacing, timer, notes)
    if not restored:
        register_env(prefix)  # ~/.conda/environments.txt, as conda does: `conda env list` shows it
        update_meta_phases(prefix, timer)
    return CreateResult(prefix, packages, selection, machine, timer.phases, False, env_text, report,
                        pip_installed, notes=tuple(notes), changes=changes, restored_old=restored)


def install_and_settle(opts: Any, prefix: Path, build: Any, replacing: bool, timer: Timer,
                       notes: list[str], in_place: bool = False) -> tuple[VerifyReport | None, bool]:
    """Build in a locked staging folder, mark it envkit's, move it in with a rename that never
    overwrites, then verify. With --force the old env is moved aside (locked) just before the move-in
    and deleted only once the new env did not FAIL verify; a FAIL, a broken verify, Ctrl-C or a failed
    move-in put it back. `in_place`: external engines build at the final name under a journal
    (staging.building_in_place). Returns the verify report and whether the old env was restored."""
    from envkit.prefix.ownership import mark_owned, new_owner_id
    from envkit.prefix.staging import building_in_place, quiet_signals, staging_folder, swap_in

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
            from envkit.verify import verify_env

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
    from envkit.prefix.ownership import forget

    forget(old.folder, prefix)  # its registry entry goes with it
    problem = old.release(remove_folder=True)
    if problem:
        notes.append(f"the old environment was replaced, but {problem}")
    return report, False


def _set_aside_if(replacing: bool, prefix: Path, owner_id: str, allow_foreign: bool, journal: Any) -> Any:
    """--force: re-check what is at the target right now, then move it aside under a lock."""
    from envkit.prefix.ownership import check_deletable
    from envkit.prefix.staging import BUILDING, set_aside, update

    if not replacing or not (prefix.exists() or prefix.is_symlink()):
        return None
    check_deletable(prefix, allow_foreign=allow_foreign, verb="replace")
    old = set_aside(prefix, owner_id)
    if journal is not None:
        update(journal, BUILDING, prefix, aside=str(old.folder))
    return old


def _put_back(old: Any, prefix: Path, new_id: str | None) -> str:
    """Remove this run's new env (if it got in), then move the old env back; say what happened."""
    from envkit.prefix.staging import discard, quiet_signals, restore

    with quiet_signals():
        problem = discard(prefix, new_id) if new_id else None
        failed = restore(old, prefix)
    return failed or (f"the old environment was restored at {prefix}" + (f" ({problem})" if problem else ""))


def _drop_half_made(prefix: Path) -> None:
    """An external build failed: remove what the engine left at the name (its env, or an empty folder)."""
    from envkit.prefix.staging import quiet_signals, trash

    if prefix.is_symlink() or not prefix.exists():
        return
    if records.has_conda_meta(prefix) or not any(prefix.iterdir()):
        with quiet_signals():
            trash(prefix)

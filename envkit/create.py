"""`envkit create`: detect -> select -> render -> solve -> plan guard -> install atomically -> verify.

Atomicity (rattler has no rollback, rattler-notes §4): the env is built in a staging folder next
to its final place with `alternative_target_prefix=final`, the pip section runs inside the staging
env, and only a complete env is renamed into place. With --force the old env is moved aside first
and restored if the swap fails. Staging folders of dead processes are swept on the next run.
"""

from __future__ import annotations

import json
import os
import re
import secrets as _random
import shutil
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from envkit import proc
from envkit.engines.base import (ENGINES, OLD, STAGING, CreateOptions, CreateResult, Timer,  # noqa: F401 (API)
                                 cuda_override_for, update_meta_phases, write_history, write_meta, write_state)
from envkit.errors import EngineError, EnvExistsError, PlanGuardError, UsageError
from envkit.locations import META_DIR, check_name, default_prefix
from envkit.models import Machine, Selection
from envkit.render.envfile import EnvFile
from envkit.secrets import redact


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
                              compute_capabilities=opts.compute_capabilities)
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
        return
    detail = f" (pulled in through {_blame(culprit, by_name, specs)!r})"
    build = torch.build if torch else "?"
    raise PlanGuardError(
        f"the solved plan installs a CPU build of PyTorch (pytorch {build}) although a CUDA {selection.cuda} "
        f"build was selected; the cause is {culprit}{detail}. Nothing was downloaded",
        f"remove {culprit} from the environment file, or pin pytorch=*=cuda* (envkit render does), "
        "or ask for a CPU env with --cuda cpu")


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


# -- staging and sweeping ------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(parent: Path) -> list[str]:
    """Remove staging folders of dead envkit runs; put back an env a crashed --force moved aside."""
    notes: list[str] = []
    if not parent.is_dir():
        return notes
    for entry in parent.iterdir():
        match = re.match(rf"^({re.escape(STAGING)}|{re.escape(OLD)})\.(.+)\.(\d+)\.[0-9a-f]+$", entry.name)
        if not match or _alive(int(match.group(3))):
            continue
        kind, name = match.group(1), match.group(2)
        final = parent / name
        if kind == OLD and not final.exists():
            entry.rename(final)
            notes.append(f"restored {final} (a previous --force rebuild was interrupted)")
        else:
            shutil.rmtree(entry, ignore_errors=True)
            notes.append(f"removed a stale staging folder {entry.name}")
    return notes


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


def _check_target(prefix: Path, force: bool) -> None:
    if not prefix.exists():
        return
    is_env = (prefix / "conda-meta").is_dir()
    if not force:
        what = "an environment" if is_env else "a folder"
        raise EnvExistsError(f"{prefix} already exists ({what}); it was not touched",
                             f"pass --force to rebuild it (the old one stays until the new one is complete), "
                             f"or choose another name")
    if not is_env and any(prefix.iterdir()):
        raise EnvExistsError(f"{prefix} exists and is not a conda environment; envkit will not replace it",
                             "choose another name or --prefix")


def _swap_in(staging: Path, final: Path, tag: str) -> None:
    if final.exists():
        old = final.parent / f"{OLD}.{final.name}.{os.getpid()}.{tag}"
        final.rename(old)
        try:
            staging.rename(final)
        except BaseException:
            old.rename(final)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(final)


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
    from envkit.export import PIP_PROVENANCE
    from envkit.render.mirrors import strip_credentials

    rows = []
    for item in planned:
        info = item.get("download_info") or {}
        url = redact(strip_credentials(str(info.get("url") or ""))[0])
        digest = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
        rows.append({"name": item["metadata"]["name"], "version": item["metadata"]["version"], "url": url,
                     "sha256": digest})
    (prefix / META_DIR / PIP_PROVENANCE).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


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


def _recreate_envfile(name: str, source: Path, kind: str) -> tuple[EnvFile, Any]:
    """What an explicit file (+ its sidecar) or a lock holds besides conda packages: pip, variables."""
    if kind == "lock":
        from envkit.lockfile import current_platform, pip_lines, read_lock

        lock = read_lock(source)
        entry = lock.platform(current_platform())
        channels = lock.channels or tuple(dict.fromkeys(c.channel_url for c in entry.conda))
        return EnvFile(name, channels, (), pip_lines(lock, entry), lock.variables, ()), (lock, entry)
    from envkit.export import read_sidecar

    pip, variables = read_sidecar(source)
    return EnvFile(name, _channels_of(source, kind), (), pip, variables, ()), None


def create_env(opts: CreateOptions, progress: Any = None, on_line: Any = None) -> CreateResult:
    from envkit.config import cache_dir, load_file_config
    from envkit.render import mirrors

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
        envfile, locked = _recreate_envfile(opts.name, source, kind)
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
    notes = sweep(prefix.parent)
    if not opts.dry_run:
        _check_target(prefix, opts.force)
    if external:
        from envkit.engines.conda_cli import create_external

        result = create_external(opts, envfile, env_text, selection, machine, prefix, timer, notes, on_line)
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
    staging = prefix.parent / f"{STAGING}.{prefix.name}.{os.getpid()}.{_random.token_hex(4)}"
    pip_installed: tuple[str, ...] = ()
    with _term_as_interrupt():
        try:
            prefix.parent.mkdir(parents=True, exist_ok=True)
            engine.check_file_hashes()
            with timer.phase("download+link"):
                engine.install(staging, prefix)
            if envfile.pip:
                with timer.phase("pip"):
                    pip_installed = _run_pip(staging, envfile.pip, selection, on_line)
                _fix_shebangs(staging, staging, prefix)
            write_meta(staging, opts, env_text, selection, machine, packages, timer, settings.cuda_override)
            write_state(staging, envfile)
            write_history(staging, opts, packages, specs)
            _swap_in(staging, prefix, _random.token_hex(4))
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    timer.phases["download"] = timer.phases.pop("download+link", 0.0)
    report = None
    if not opts.no_verify:
        from envkit.stages import verify_env

        with timer.phase("verify"):
            report = verify_env(prefix=str(prefix), timeout=opts.verify_timeout, quick=True)
    update_meta_phases(prefix, timer)
    return CreateResult(prefix, packages, selection, machine, timer.phases, False, env_text, report,
                        pip_installed, notes=tuple(notes), changes=changes)

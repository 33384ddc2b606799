"""`envkit lock`: one lock file for the team's platforms, solved for each without installing anything.

rattler solves for another platform when it is given that platform's subdirs and virtual packages
(rattler-notes §10a; conda's "Managing virtual packages" page lists them). The virtual packages
assumed per platform are:
- linux-*: `__unix`, `__linux`, `__glibc` (2.28, the manylinux_2_28 floor conda-forge builds against),
  `__archspec`, and `__cuda` at the selection's CUDA level when a GPU build was selected;
- win-64: `__win`, `__archspec` and the same `__cuda`;
- osx-*: `__unix`, `__osx` (13.0), `__archspec`; never `__cuda`: macOS has no CUDA (PyTorch "Get
  started": macOS binaries are CPU/MPS only), so CUDA selectors (`*cuda*` builds, cuda-version,
  pytorch-cuda, ...) are dropped for it and the CPU/MPS build is locked; the result says so.
The pip section is resolved per platform without installing: pip's own resolver (`pip install --dry-run
--report`, pip >= 23; pip's "pip install" reference: --platform/--python-version/--implementation need
--only-binary=:all:) run by envkit's Python for the locked conda python's version and the platform's
wheel tags (PEP 600 manylinux_2_X up to the glibc assumed above, PEP 599 manylinux2014/2010/1 aliases;
macosx_X_0_<arch> up to the macOS assumed above, universal2; win_amd64), through the pip section's index
options. Each wheel becomes a PyPI entry (name, version, URL, sha256). A line that cannot be locked for a
platform (sdist only, no wheel for it, `-e`, a local path, `-r`/`-c`) is named in that platform's notes;
with --strict the command fails instead. Credentials of an index reach pip through its environment only
and are stripped from every URL the lock holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from envkit import proc
from envkit.config import cache_dir, load_file_config
from envkit.engines.base import CreateOptions, Timer, cuda_override_for, plan_guard
from envkit.engines.pip import pip_index_env
from envkit.errors import EngineError, InputError, UsageError
from envkit.export import export_yaml
from envkit.lock.file import PYPI_SIMPLE, Lock, LockedPlatform, LockedPypi
from envkit.models import Request, Selection
from envkit.plan import prepare
from envkit.prefix.records import CREATE_FILE, read_meta
from envkit.render import mirrors
from envkit.render.adapt import parse_file
from envkit.render.envfile import EnvFile, parse_conda_spec, parse_pip_line
from envkit.render.mirrors import Mirror, strip_credentials
from envkit.secrets import VAULT, redact

KNOWN_PLATFORMS = ("linux-64", "linux-aarch64", "linux-ppc64le", "osx-64", "osx-arm64", "win-64")
GLIBC = "2.28"
MACOS = "13.0"
_ARCH = {"64": "x86_64", "aarch64": "aarch64", "ppc64le": "ppc64le", "arm64": "arm64"}
# packages whose only job is a CUDA variant: meaningless on macOS
_CUDA_ONLY = re.compile(r"^(cuda-version|pytorch-cuda|cudatoolkit|cuda-[a-z0-9-]+|libcu[a-z0-9-]+|cudnn|nccl)$")


@dataclass(frozen=True)
class PlatformResult:
    platform: str
    packages: int
    torch: str | None  # "2.13.0 cuda130_..." of the locked pytorch, if any
    virtual_packages: tuple[str, ...]
    dropped: tuple[str, ...] = ()  # CUDA selectors removed for this platform
    pypi: int = 0  # wheels locked from the pip section
    unlocked: tuple[str, ...] = ()  # pip lines that could not be locked for this platform (with the reason)


@dataclass(frozen=True)
class LockResult:
    lock: Lock
    results: tuple[PlatformResult, ...]
    notes: tuple[str, ...]
    selection: Selection | None


def virtual_packages_for(platform: str, cuda: str | None) -> tuple[str, ...]:
    system, _, bits = platform.partition("-")
    arch = _ARCH.get(bits, bits)
    if system == "osx":
        return ("__unix=0=0", f"__osx={MACOS}=0", f"__archspec=1={arch}")
    cuda_vp = (f"__cuda={cuda}=0",) if cuda else ()
    if system == "win":
        return ("__win=0=0", f"__archspec=1={arch}", *cuda_vp)
    return ("__unix=0=0", "__linux=5.15=0", f"__glibc={GLIBC}=0", f"__archspec=1={arch}", *cuda_vp)


def specs_for(platform: str, specs: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The specs to solve on `platform`, and the CUDA selectors dropped (macOS only)."""
    if not platform.startswith("osx-"):
        return specs, ()
    kept: list[str] = []
    dropped: list[str] = []
    for text in specs:
        spec = parse_conda_spec(text)
        if _CUDA_ONLY.match(spec.name):
            dropped.append(text)
        elif "cuda" in spec.build.lower():
            dropped.append(text)
            kept.append(replace(spec, build="").render())
        else:
            kept.append(text)
    return tuple(kept), tuple(dropped)


def check_platforms(platforms: tuple[str, ...]) -> tuple[str, ...]:
    if not platforms:
        raise UsageError("no --platform given", "e.g. envkit lock dl_train --platform linux-64 --platform osx-arm64")
    for platform in platforms:
        if platform not in KNOWN_PLATFORMS:
            raise UsageError(f"unknown platform {platform!r}", f"use conda subdirs: {', '.join(KNOWN_PLATFORMS)}")
    return tuple(dict.fromkeys(platforms))


def lock_env(*, platforms: tuple[str, ...], spec: str | None = None, file: Path | None = None,
             no_adapt: bool = False, name: str = "envkit", request: Request = Request(), flavor_given: bool = False,
             mirror: str | None = None, channels: tuple[str, ...] = (), driver_version: str | None = None,
             compute_capabilities: tuple[str, ...] = (), catalogue: str = "auto", strict: bool = False) -> LockResult:
    """Render the env (as create would), then solve it once per platform; install nothing."""
    platforms = check_platforms(platforms)
    opts = CreateOptions(name=name, spec=spec, file=file, no_adapt=no_adapt, request=request,
                         flavor_given=flavor_given, mirror=mirror, channels=channels, driver_version=driver_version,
                         compute_capabilities=compute_capabilities, no_verify=True, catalogue=catalogue)
    envfile, selection, machine, _changes = prepare(opts, Timer())
    cuda = cuda_override_for(opts, machine, selection)
    if cuda is None and selection is not None and selection.is_gpu:
        cuda = machine.driver.cuda if machine.driver and machine.driver.cuda else selection.cuda
    if selection is not None and not selection.is_gpu:
        cuda = None
    return solve_platforms(envfile, platforms, cuda or None, selection, mirror, channels, strict)


def solve_platforms(envfile: EnvFile, platforms: tuple[str, ...], cuda: str | None, selection: Selection | None,
                    mirror: str | None, channels: tuple[str, ...], strict: bool = False) -> LockResult:
    from envkit.engines.rattler_engine import EngineSettings, RattlerEngine  # lazy: rattler's exit pause

    config = load_file_config().data
    profile = mirrors.resolve(mirror, config)
    if profile is not None and mirror and "://" in mirror:
        VAULT.split(mirror)
    sources = channels or tuple(mirrors.canonical_channel(c, config) if profile else c for c in envfile.channels)
    base = EngineSettings(channels=sources, cache_dir=cache_dir(), mirror=profile,
                          sharded=bool(config.get("sharded_repodata", True)))
    specs = tuple(envfile.dependencies)
    if envfile.pip and not any(re.match(r"^pip([=<>\s]|$)", s) for s in specs):
        specs += ("pip",)
    pip_plan = plan_pip(envfile.pip, profile)
    notes: list[str] = []
    results: list[PlatformResult] = []
    locked: list[LockedPlatform] = []
    indexes: tuple[str, ...] = ()
    for platform in platforms:
        wanted, dropped = specs_for(platform, specs)
        vps = virtual_packages_for(platform, cuda)
        engine = RattlerEngine(replace(base, platform=platform, virtual_packages=vps))
        try:
            packages = engine.solve(list(wanted))
        except EngineError as exc:
            raise EngineError(f"{platform}: {exc.message}", exc.hint) from None
        if any(v.startswith("__cuda") for v in vps):
            plan_guard(selection, packages, wanted)
        torch = next((f"{p.version} {p.build}" for p in packages if p.name == "pytorch"), None)
        if dropped:
            notes.append(f"{platform}: macOS has no CUDA: dropped {', '.join(dropped)}; locked the CPU/MPS build"
                         + (f" pytorch {torch}" if torch else ""))
        pypi: tuple[LockedPypi, ...] = ()
        unlocked: tuple[str, ...] = ()
        if pip_plan.lines:
            python = next((str(p.version) for p in packages if p.name == "python"), None)
            pypi, unlocked = lock_pip(pip_plan, platform, python)
            if strict and unlocked:
                raise EngineError(f"{platform}: {unlocked[0]}" + (f" (and {len(unlocked) - 1} more)"
                                                                  if len(unlocked) > 1 else ""),
                                  "make the line installable from wheels for every --platform (or drop that "
                                  "platform), or lock without --strict to keep a note instead")
            notes += [f"{platform}: {u}; `create --lock` will not install it" for u in unlocked]
            notes += [f"{platform}: {p.name} {p.version} is locked as a local file ({p.url}): `create --lock` "
                      "installs it only where that path exists" for p in pypi if p.url.startswith("file:")]
            indexes = pip_plan.indexes
        results.append(PlatformResult(platform, len(packages), torch, vps, dropped, len(pypi), unlocked))
        locked.append(LockedPlatform(platform, tuple(engine.locked_conda()), pypi, vps, unlocked))
    from envkit.engines.rattler_engine import channel_url

    lock = Lock(channels=tuple(channel_url(c) for c in sources), platforms=tuple(locked),
                indexes=indexes if any(p.pypi for p in locked) else (), variables=tuple(envfile.variables))
    return LockResult(lock, tuple(results), tuple(notes), selection)


# -- the pip section ------------------------------------------------------------------------------
_MANYLINUX_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}  # PEP 599 / PEP 571 / PEP 513
_LEGACY_ARCHES = {5: ("x86_64", "i686"), 12: ("x86_64", "i686")}  # manylinux1/2010 exist only for these


def wheel_platforms(platform: str) -> tuple[str, ...]:
    """The wheel platform tags a conda platform installs (most specific first), at the glibc/macOS
    level this module assumes for its virtual packages. PEP 600: manylinux_2_X installs on glibc >= 2.X."""
    system, _, bits = platform.partition("-")
    arch = _ARCH.get(bits, bits)
    if system == "linux":
        top = int(GLIBC.split(".")[1])
        tags = [f"manylinux_2_{minor}_{arch}" for minor in range(top, 4, -1)]
        tags += [f"{name}_{arch}" for minor, name in _MANYLINUX_LEGACY.items()
                 if minor <= top and arch in _LEGACY_ARCHES.get(minor, (arch,))]
        return tuple(tags)
    if system == "osx":  # packaging.tags.mac_platforms: every version up to the running one, plus fat formats
        top = int(MACOS.split(".")[0])
        versions = [(major, 0) for major in range(top, 10, -1)]
        if arch == "x86_64":
            versions += [(10, minor) for minor in range(16, 8, -1)]
        formats = (arch, "universal2") if arch == "arm64" else (arch, "intel", "universal2")
        return tuple(f"macosx_{a}_{b}_{fmt}" for a, b in versions for fmt in formats)
    if system == "win":
        return ("win_amd64",) if arch == "x86_64" else (f"win_{arch}",)
    return ()


@dataclass(frozen=True)
class PipPlan:
    """The pip section split for locking: option lines handed to pip, requirement lines to lock, lines
    that cannot be locked (with why), and the index URLs the lock names (credentials stripped)."""

    options: tuple[str, ...]
    lines: tuple[str, ...]
    unlockable: tuple[str, ...]
    indexes: tuple[str, ...]
    mirror_pypi: str  # a mirror's PyPI (clean URL; "" for none): its files are written as PyPI's


def plan_pip(lines: tuple[str, ...], mirror: Mirror | None) -> PipPlan:
    options: list[str] = []
    reqs: list[str] = []
    unlockable: list[str] = []
    for text in lines:
        line = parse_pip_line(text)
        if line.option in ("-e", "-r", "-c"):
            what = "an editable install" if line.option == "-e" else "a nested requirements file"
            unlockable.append(f"pip line {line.text!r} cannot be locked ({what}: install it after `create --lock`)")
        elif line.option:
            options.append(line.text)
        elif line.local_path:
            unlockable.append(f"pip line {line.text!r} cannot be locked (a local path: it is on this machine only)")
        else:
            reqs.append(line.text)
    mirror_pypi = strip_credentials(str(getattr(mirror, "pypi", None) or ""))[0].rstrip("/")
    if (reqs and mirror_pypi
            and not any(o.startswith("--index-url") or o.startswith("--no-index") for o in options)):
        options.insert(0, f"--index-url {mirror_pypi}")  # behind the mirror, pip too (as create does)
    indexes: list[str] = []
    primary = PYPI_SIMPLE
    for option in options:
        opt, _, arg = option.partition(" ")
        clean = strip_credentials(arg.strip())[0].rstrip("/")
        if mirror_pypi and clean == mirror_pypi:
            clean = PYPI_SIMPLE  # the mirror stands in for PyPI: the lock names PyPI (create applies --mirror)
        if opt == "--index-url":
            primary = clean
        elif opt == "--extra-index-url":
            indexes.append(clean)
    return PipPlan(tuple(options), tuple(reqs), tuple(unlockable), tuple(dict.fromkeys([primary, *indexes])),
                   mirror_pypi)


def lock_pip(plan: PipPlan, platform: str, python: str | None) -> tuple[tuple[LockedPypi, ...], tuple[str, ...]]:
    """The pip section's wheels for `platform` (pip resolves, nothing is installed) and the lines that
    could not be locked, each with the reason."""
    unlocked = list(plan.unlockable)
    if not plan.lines:
        return (), tuple(unlocked)
    tags = wheel_platforms(platform)
    if python is None or not tags:
        why = "no python among its conda packages" if python is None else "no wheel tags known for it"
        return (), tuple(unlocked + [f"pip line {line!r} cannot be locked ({why})" for line in plan.lines])
    version = ".".join(python.split(".")[:2])
    ok, items, error = _pip_resolve(plan, plan.lines, tags, version)
    if ok:
        return _entries(items, plan), tuple(unlocked)
    failed: list[str] = []
    good: list[str] = []
    for line in plan.lines:  # which lines? each alone, then the rest together
        alone_ok, _items, alone_error = _pip_resolve(plan, (line,), tags, version)
        if alone_ok:
            good.append(line)
        else:
            failed.append(f"pip line {line!r} cannot be locked: no wheel for {platform} (Python {version}, "
                          f"{tags[0]}) on the index: {alone_error}")
    if not failed:  # each line alone resolves, all together do not: a conflict between them
        failed = [f"pip lines {', '.join(map(repr, plan.lines))} cannot be locked together for {platform}: {error}"]
        good = []
    entries: tuple[LockedPypi, ...] = ()
    if good:
        ok, items, error = _pip_resolve(plan, tuple(good), tags, version)
        if ok:
            entries = _entries(items, plan)
        else:
            failed.append(f"pip lines {', '.join(map(repr, good))} cannot be locked together for {platform}: {error}")
    return entries, tuple(unlocked + failed)


def _pip_resolve(plan: PipPlan, lines: tuple[str, ...], tags: tuple[str, ...],
                 version: str) -> tuple[bool, list[dict[str, Any]], str]:
    """pip's resolver for another platform: --dry-run --report, wheels only, into a throwaway --target.
    The requirements file sits in a private folder (0700, removed after); credentials go to pip's
    environment (engines.pip.pip_index_env), never to argv, the file or a message."""
    import json
    import shutil
    import sys
    import tempfile

    file_lines, secret_env = pip_index_env([*plan.options, *lines])
    private = Path(tempfile.mkdtemp(prefix="envkit-piplock-"))
    try:
        (private / "requirements.txt").write_text("\n".join(file_lines) + "\n", encoding="utf-8")
        report = private / "report.json"
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--only-binary=:all:",
                "--python-version", version, "--implementation", "cp", "--target", str(private / "target"),
                "--no-input", "--disable-pip-version-check", "--quiet", "--report", str(report),
                "-r", str(private / "requirements.txt")]
        for tag in tags:
            argv += ["--platform", tag]
        env = proc.child_env(secret_env, isolate_python=True, drop=("PIP_REQUIRE_VIRTUALENV",))
        done = proc.run(argv, timeout=900, env=env)
        if done.returncode != 0:
            tail = (done.stderr_tail(12) or done.stdout[-2000:]).strip()
            reason = next((ln.strip() for ln in reversed(tail.splitlines()) if ln.strip().startswith("ERROR")),
                          tail.splitlines()[-1].strip() if tail else f"pip exited {done.returncode}")
            if "No module named pip" in tail:
                reason = f"{sys.executable} has no pip (pip >= 23 is needed to lock a pip section)"
            return False, [], redact(reason)
        try:
            return True, list(json.loads(report.read_text(encoding="utf-8"))["install"]), ""
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return False, [], f"pip wrote no usable report ({type(exc).__name__}): pip >= 23 is needed"
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _entries(items: list[dict[str, Any]], plan: PipPlan) -> tuple[LockedPypi, ...]:
    """pip's report rows -> PyPI entries: the wheel's URL (credentials stripped) and sha256. Behind a
    mirror the URL is PyPI's: the file's own when the mirror keeps PyPI's /packages/ layout, else the
    project's page (installed as name==version from the index, which a --mirror then serves)."""
    out: list[LockedPypi] = []
    for item in items:
        meta = item.get("metadata") or {}
        info = item.get("download_info") or {}
        name, version = str(meta["name"]), str(meta["version"])
        url = redact(strip_credentials(str(info.get("url") or ""))[0])
        archive = info.get("archive_info") or {}
        digest = (archive.get("hashes") or {}).get("sha256")
        if not digest and str(archive.get("hash", "")).startswith("sha256="):
            digest = str(archive["hash"]).split("=", 1)[1]
        if plan.mirror_pypi and url.startswith(plan.mirror_pypi.rsplit("/simple", 1)[0] + "/"):
            path = urlsplit(url).path
            url = (f"https://files.pythonhosted.org{path[path.index('/packages/'):]}" if "/packages/" in path
                   else f"{PYPI_SIMPLE}/{name.lower()}/")
        out.append(LockedPypi(name, version, url, digest, tuple(str(r) for r in meta.get("requires_dist") or ()),
                              meta.get("requires_python")))
    return tuple(out)


def lock_from_prefix(prefix: Path, platforms: tuple[str, ...], *, mirror: str | None = None,
                     channels: tuple[str, ...] = ()) -> LockResult:
    """`envkit export --format lock --platform ...`: the env's requested specs (its --from-history export,
    CUDA selectors included) solved for each platform at the CUDA level it was created for."""

    platforms = check_platforms(platforms)
    exported = export_yaml(prefix, from_history=True)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="envkit-") as tmp:
        path = Path(tmp) / "environment.yml"
        path.write_text(exported.text, encoding="utf-8")
        parsed = parse_file(path)
    envfile = EnvFile(parsed.name or prefix.name, parsed.channels, parsed.conda, parsed.pip, parsed.variables, ())
    cuda = None
    try:
        meta = read_meta(prefix, CREATE_FILE)
        cuda = meta.get("cuda_override") or (meta.get("selection") or {}).get("cuda")
        recorded = meta.get("mirror")
        if mirror is None and recorded and "*" not in recorded:  # a redacted one cannot be reused
            mirror = recorded
    except (InputError, AttributeError):
        pass
    if cuda is None and any("*cuda*" in d for d in parsed.conda):
        raise UsageError(f"{prefix} holds CUDA builds but does not say for which CUDA level it was made",
                         "use `envkit lock --file ENV.yml --cuda X.Y --platform ...` instead")
    return solve_platforms(envfile, platforms, cuda or None, None, mirror, channels)

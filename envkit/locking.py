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
The pip section is not solved here (that needs the target's Python): it is named in the notes, never
dropped silently; `envkit export --format lock` of a created env locks the installed wheels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from envkit.errors import EngineError, InputError, UsageError
from envkit.lockfile import Lock, LockedPlatform
from envkit.models import Request, Selection
from envkit.safeio import load_json

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
    from envkit.render.envfile import parse_conda_spec

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
             compute_capabilities: tuple[str, ...] = (), catalogue: str = "auto") -> LockResult:
    """Render the env (as create would), then solve it once per platform; install nothing."""
    from envkit.engines.base import CreateOptions, cuda_override_for

    platforms = check_platforms(platforms)
    opts = CreateOptions(name=name, spec=spec, file=file, no_adapt=no_adapt, request=request,
                         flavor_given=flavor_given, mirror=mirror, channels=channels, driver_version=driver_version,
                         compute_capabilities=compute_capabilities, no_verify=True, catalogue=catalogue)
    from envkit.create import _prepare, Timer

    envfile, selection, machine, _changes = _prepare(opts, Timer())
    cuda = cuda_override_for(opts, machine, selection)
    if cuda is None and selection is not None and selection.is_gpu:
        cuda = machine.driver.cuda if machine.driver and machine.driver.cuda else selection.cuda
    if selection is not None and not selection.is_gpu:
        cuda = None
    return solve_platforms(envfile, platforms, cuda or None, selection, mirror, channels)


def solve_platforms(envfile: Any, platforms: tuple[str, ...], cuda: str | None, selection: Selection | None,
                    mirror: str | None, channels: tuple[str, ...]) -> LockResult:
    from envkit.config import cache_dir, load_file_config
    from envkit.create import plan_guard
    from envkit.engines.rattler_engine import EngineSettings, RattlerEngine
    from envkit.render import mirrors

    config = load_file_config().data
    profile = mirrors.resolve(mirror, config)
    if profile is not None and mirror and "://" in mirror:
        from envkit.secrets import VAULT

        VAULT.split(mirror)
    sources = channels or tuple(mirrors.canonical_channel(c, config) if profile else c for c in envfile.channels)
    base = EngineSettings(channels=sources, cache_dir=cache_dir(), mirror=profile,
                          sharded=bool(config.get("sharded_repodata", True)))
    specs = tuple(envfile.dependencies)
    if envfile.pip and not any(re.match(r"^pip([=<>\s]|$)", s) for s in specs):
        specs += ("pip",)
    notes: list[str] = []
    results: list[PlatformResult] = []
    locked: list[LockedPlatform] = []
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
        results.append(PlatformResult(platform, len(packages), torch, vps, dropped))
        locked.append(LockedPlatform(platform, tuple(engine.locked_conda()), (), vps))
    reqs = [line for line in envfile.pip if not line.startswith("-")]
    if reqs:
        notes.append(f"the pip section ({', '.join(reqs)}) is not in the lock: `envkit lock` solves conda "
                     "packages only; create the env, then `envkit export NAME --format lock` locks the installed wheels")
    from envkit.engines.rattler_engine import channel_url

    lock = Lock(channels=tuple(channel_url(c) for c in sources), platforms=tuple(locked),
                variables=tuple(envfile.variables))
    return LockResult(lock, tuple(results), tuple(notes), selection)


def lock_from_prefix(prefix: Path, platforms: tuple[str, ...], *, mirror: str | None = None,
                     channels: tuple[str, ...] = ()) -> LockResult:
    """`envkit export --format lock --platform ...`: the env's requested specs (its --from-history export,
    CUDA selectors included) solved for each platform at the CUDA level it was created for."""
    import json

    from envkit.export import export_yaml
    from envkit.locations import META_DIR
    from envkit.render.adapt import parse_file
    from envkit.render.envfile import EnvFile

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
        meta = load_json(prefix / META_DIR / "create.json", "metadata file")
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

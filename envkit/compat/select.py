"""Pure build selection: Machine + Request + compatibility data -> Selection with reasons.

Rules (issue #2), each citing its source:
1. Driver: the highest CUDA variant <= the CUDA the driver reports; only when none exists, the closest
   variant of the same major family whose minor-version-compatibility floor the driver meets
   (NVIDIA minor version compatibility: https://docs.nvidia.com/deploy/cuda-compatibility/).
2. Architecture: every visible GPU is covered by the build's SASS (same major, minor >= a listed
   arch: NVIDIA binary compatibility) or by its PTX when the build's CUDA already knows the GPU.
3. Python: the torch release must support it (pytorch RELEASE.md / torchvision README).
4. Flavor: conda-forge pins `pytorch=V=cuda*` + `cuda-version=X.Y` (cuda-version-feedstock: the
   metapackage constrains __cuda >= X); the legacy pytorch channel ends with 2.5 (pytorch#138506);
   pip uses download.pytorch.org/whl/<variant>.
5. Newest torch that passes all rules unless pinned.
6. Existence (issue 11): with a catalogue (what the channel or index really publishes, read by
   envkit/engines/repodata.py), only (torch, CUDA variant, python) combinations that exist count;
   without one, the static data's releases stand in and the reasons say so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envkit.compat import CC, Build, CompatData, Release, driver_version, legacy, load, parse_cc, sm
from envkit.compat.catalogue import Catalogue, existing_versions, merge
from envkit.errors import SelectionError, UsageError
from envkit.models import FLAVORS, Machine, Request, Selection

DEFAULT_PYTHON = "3.12"
PYTORCH_INDEX = "https://download.pytorch.org/whl"
LEGACY_LAST = Version("2.5.99")
CHANNELS = {
    "conda-forge": ("conda-forge",),
    "pytorch": ("pytorch", "nvidia", "conda-forge"),
    "pip": ("conda-forge",),
}


@dataclass(frozen=True)
class _Pick:
    build: Build | None  # None = CPU
    reasons: tuple[str, ...]
    mvc: bool = False


def parse_torch_spec(text: str | None) -> SpecifierSet | None:
    """'2.5' -> ==2.5.*, '2.5.1' -> ==2.5.1, '>=2.4,<2.7' as is."""
    if text is None or not text.strip():
        return None
    if any(ch in text for ch in "\n\r\t\0"):
        raise UsageError(f"--torch {text!r} contains a control character",
                         "use a version like 2.5 or 2.5.1, or a range like '>=2.4,<2.7'")
    text = text.strip()
    try:
        if text[0].isdigit():
            if not re.fullmatch(r"\d{1,3}(\.\d{1,4}){0,2}", text):  # torch versions are X.Y[.Z]
                raise InvalidVersion(text)
            Version(text)
            return SpecifierSet(f"=={text}.*" if text.count(".") == 1 else f"=={text}")
        spec = SpecifierSet(text)
        if len(text) > 200 or any(not re.fullmatch(r"\d{1,3}(\.\d{1,4}){0,2}(\.\*)?", s.version) for s in spec):
            raise InvalidSpecifier(text)
        return spec
    except (InvalidSpecifier, InvalidVersion) as exc:
        raise UsageError(f"--torch {text!r} is not a version or a version range",
                         "use a version like 2.5 or 2.5.1, or a range like '>=2.4,<2.7'") from exc


def _matches(release: Release, spec: SpecifierSet | None, text: str | None) -> bool:
    if spec is None:
        return True
    if text and text[0].isdigit() and text.count(".") >= 2:
        # an exact patch pin selects its minor's row: the row only records the latest patch
        return release.minor == ".".join(text.split(".")[:2])
    return Version(release.version) in spec or any(
        Version(f"{release.minor}.{p}") in spec for p in range(0, 10))


def _exact_version(release: Release, text: str | None) -> str:
    if text and text[0].isdigit() and text.count(".") >= 2:
        return text
    return release.version


def pip_local(version: str, variant: str) -> str:
    """PyTorch index wheels carry the variant as a PEP 440 local version: 2.13.0+cu130."""
    return f"{version}+{variant}"


def covers(build: Build, cc: CC, data: CompatData) -> str | None:
    """Why `build` runs on a GPU of compute capability `cc`, or None when it does not."""
    if cc in build.archs.sass:
        return f"{sm(cc)} is in the {build.label} build"
    same_major = [a for a in build.archs.sass if a[0] == cc[0] and a[1] < cc[1]]
    if same_major:
        # NVIDIA binary compatibility: a cubin for X.y runs on any X.z with z >= y.
        return f"{sm(cc)} runs the build's {sm(max(same_major))} code (same major, binary compatible)"
    ptx = build.archs.ptx
    if ptx is not None and ptx < cc:
        first = data.arch_first_cuda.get(cc)
        if first is not None and build.cuda_version >= first:
            return f"{sm(cc)} runs through the build's compute_{ptx[0]}{ptx[1]} PTX (CUDA {build.cuda} knows {sm(cc)})"
    return None


def _python_for(release: Release, requested: str | None) -> tuple[str | None, str]:
    pythons = [p for p in release.python if not p.endswith("t")]
    if requested:
        if requested in release.python:
            return requested, f"python {requested} (requested)"
        return None, f"torch {release.minor} supports python {pythons[0]}-{pythons[-1]}, not {requested}"
    if DEFAULT_PYTHON in pythons:
        return DEFAULT_PYTHON, f"python {DEFAULT_PYTHON} (default; torch {release.minor} supports {pythons[0]}-{pythons[-1]})"
    chosen = max(pythons, key=Version)
    return chosen, f"python {chosen} (newest torch {release.minor} supports)"


def _pick_build(release: Release, flavor: str, machine: Machine, ceiling: str,
                data: CompatData, python: str | None = None) -> tuple[_Pick | None, str]:
    """Apply rules 1 and 2 to one release; return the pick or why there is none."""
    builds = release.builds.get(flavor, ())
    if not builds:
        return None, f"torch {release.minor} has no {flavor} CUDA build"
    if python is not None:
        # rule 6: the catalogue may publish a CUDA variant for fewer Pythons than the release has
        fit = tuple(b for b in builds if b.python is None or python in b.python)
        if not fit:
            have = "; ".join(f"{b.label}: {', '.join(b.python or ())}" for b in builds)
            return None, f"torch {release.minor} has no {flavor} CUDA build for python {python} ({have})"
        builds = fit
    reasons: list[str] = []
    covered = list(builds)
    if machine.gpus:
        for cc in machine.compute_capabilities:
            keep = [b for b in covered if covers(b, parse_cc(cc), data)]
            if not keep:
                lists = "; ".join(f"{b.label}: {b.archs.describe()}" for b in covered)
                return None, f"torch {release.minor} has no {flavor} build for {sm(parse_cc(cc))} ({lists})"
            covered = keep
    ceiling_v = Version(ceiling)
    below = [b for b in covered if b.cuda_version <= ceiling_v]
    mvc = False
    if below:
        build = below[-1]
        reasons.append(f"CUDA {build.cuda}: the highest {flavor} CUDA variant of torch {release.minor} "
                       f"that is <= CUDA {ceiling}")
    else:
        major = ceiling_v.major
        family = [b for b in covered if b.cuda_version.major == major]
        if not family:
            have = ", ".join(b.cuda for b in builds)
            return None, (f"torch {release.minor} has no {flavor} build for CUDA {major}.x "
                          f"(it has CUDA {have}); the driver reports CUDA {ceiling}")
        build = family[0]
        floor = data.minor_compat_floor.get(major)
        drv = machine.driver.version if machine.driver else None
        if floor is not None and drv is not None and driver_version(drv) < floor:
            return None, (f"torch {release.minor}'s CUDA {build.cuda} build needs driver >= {floor} "
                          f"for CUDA {major}.x minor version compatibility; driver is {drv}")
        mvc = True
        reasons.append(f"CUDA {build.cuda}: torch {release.minor} has no {flavor} build <= CUDA {ceiling}; "
                       f"CUDA {build.cuda} runs on this driver through NVIDIA minor version compatibility "
                       f"(CUDA {major}.x needs driver >= {floor}), with a reduced feature set")
    for gpu in machine.gpus:
        why = covers(build, parse_cc(gpu.compute_capability), data)
        reasons.append(f"GPU {gpu.index} {gpu.name} (compute capability {gpu.compute_capability}): {why}")
    if build.note:
        reasons.append(f"note: {build.note}")
    if not build.archs.verified:
        reasons.append(f"note: the arch list of {build.label} ({build.archs.describe()}) is unverified "
                       f"({data.sources.get(build.archs.src, build.archs.src)})")
    return _Pick(build, tuple(reasons), mvc), ""


def _specs(flavor: str, release: Release, version: str, python: str, build: Build | None
           ) -> tuple[tuple[str, ...], tuple[str, ...], str | None, str]:
    """(conda specs, pip specs, pip index url, variant label) for a choice."""
    if flavor == "conda-forge":
        if build is None:
            return (f"pytorch={version}=cpu*", f"python={python}"), (), None, "cpu"
        return (f"pytorch={version}=cuda*", f"cuda-version={build.cuda}", f"python={python}"), (), None, build.label
    if flavor == "pytorch":
        if build is None:
            return (f"pytorch={version}", "cpuonly", f"python={python}"), (), None, "cpu"  # no nvidia needed
        return (f"pytorch={version}", f"pytorch-cuda={build.cuda}", f"python={python}"), (), None, build.label
    variant = build.label if build else "cpu"
    pip = [f"torch=={pip_local(version, variant)}"]
    return (f"python={python}", "pip"), tuple(pip), f"{PYTORCH_INDEX}/{variant}", variant


def select(machine: Machine, request: Request, data: CompatData | None = None,
           catalogue: Catalogue | None = None, source_note: str | None = None) -> Selection:
    """The newest build that the driver, every visible GPU and the Python version all support,
    among those the catalogue says exist (the static data's releases when there is no catalogue).

    `source_note` is the first reason: which catalogue was used, or why the static data stands in."""
    return _select(machine, request, data or load(), explain=True, catalogue=catalogue, source_note=source_note)


@dataclass(frozen=True)
class _Candidates:
    releases: tuple[Release, ...]  # newest first
    missing: dict[str, str]  # minor -> why it is not there (catalogue)
    notes: dict[str, tuple[str, ...]]  # minor -> extra reasons


def _candidates(data: CompatData, flavor: str, catalogue: Catalogue | None, pin: str | None) -> _Candidates:
    """The releases selection walks for a flavor: the catalogue merged with the static rules, or the
    static rows alone. Extra static rows (e.g. older releases kept elsewhere) plug in here."""
    if catalogue is not None and catalogue.flavor == flavor:
        merged = merge(data, flavor, catalogue, pin)
        return _Candidates(merged.releases, merged.missing, merged.notes)
    return _Candidates(data.releases_for(flavor), {}, {})


def _where(flavor: str, catalogue: Catalogue | None) -> str:
    if catalogue is not None and catalogue.flavor == flavor:
        return catalogue.source
    return {"conda-forge": "conda-forge", "pytorch": "the pytorch channel", "pip": "the PyTorch index"}[flavor]


def _not_published(request: Request, spec: SpecifierSet | None, cands: _Candidates,
                   catalogue: Catalogue | None) -> SelectionError | None:
    """--torch names a version the flavor never published: say so and name the nearest that exist."""
    flavor = request.flavor
    pin = request.torch if request.torch and request.torch[0].isdigit() and request.torch.count(".") >= 2 else None
    if catalogue is not None and catalogue.flavor == flavor:
        versions = existing_versions(catalogue)
    else:
        versions = sorted({r.version for r in cands.releases if r.cpu or r.builds.get(flavor)}, key=Version)
    if not versions or spec is None:
        return None
    live = catalogue is not None and catalogue.flavor == flavor
    if pin is not None:
        # the static rows only record each minor's latest patch: there an existing minor is enough
        if pin in versions or (not live and any(_minor_of(v) == _minor_of(pin) for v in versions)):
            return None
        wanted = Version(pin)
        hits: list[str] = []
    else:
        hits = [v for v in versions if Version(v) in spec or _matches_minor(v, spec)]
        if hits:
            return None
        wanted = Version(request.torch) if request.torch and request.torch[0].isdigit() else None  # type: ignore[assignment]
    below = [v for v in versions if wanted is not None and Version(v) < wanted]
    above = [v for v in versions if wanted is not None and Version(v) > wanted]
    nearest = [x for x in (below[-1] if below else None, above[0] if above else None) if x]
    shown = " and ".join(nearest) if nearest else ", ".join(versions[-3:])
    what = request.torch
    where = _where(flavor, catalogue)
    return SelectionError(
        f"torch {what} does not exist on {where}; the nearest {'are' if len(nearest) > 1 else 'is'} {shown}",
        f"pick one that exists, e.g. --torch {nearest[-1] if nearest else versions[-1]}"
        + ("" if flavor == "pip" else ", or use --flavor pip (the PyTorch index has other releases)"))


def _minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _matches_minor(version: str, spec: SpecifierSet) -> bool:
    minor = ".".join(version.split(".")[:2])
    return any(Version(f"{minor}.{p}") in spec for p in range(0, 10))


def _select(machine: Machine, request: Request, data: CompatData, *, explain: bool,
            catalogue: Catalogue | None = None, source_note: str | None = None) -> Selection:
    if request.flavor not in FLAVORS:
        raise UsageError(f"unknown flavor {request.flavor!r}", f"use one of: {', '.join(FLAVORS)}")
    spec = parse_torch_spec(request.torch)
    flavor = request.flavor
    pin = request.torch.strip() if request.torch and request.torch.strip()[0].isdigit() \
        and request.torch.count(".") >= 2 else None
    cands = _candidates(data, flavor, catalogue, pin)
    releases = [r for r in cands.releases if _matches(r, spec, request.torch)]
    # -- torch older than this data (issue 10): the cudatoolkit-era rows and rules live in legacy.py --
    if not releases and legacy.handles(request.torch):
        return legacy.select(machine, request)
    if not releases and not (catalogue is not None and catalogue.flavor == flavor):
        known = ", ".join(r.minor for r in reversed(data.releases))
        raise SelectionError(f"no known torch release matches --torch {request.torch!r} (known: {known})",
                             "pick one of the known releases, e.g. --torch " + data.releases[0].minor)
    if flavor == "pytorch" and releases:
        newer = [r for r in releases if r.key > LEGACY_LAST]
        older = [r for r in releases if r.key <= LEGACY_LAST]
        if not older:
            raise SelectionError(
                f"the pytorch conda channel has no torch {newer[0].minor}: 2.5 was its last release "
                "(https://github.com/pytorch/pytorch/issues/138506)",
                f"use --flavor conda-forge or --flavor pip for torch {newer[0].minor}, or --torch 2.5")
        releases = older
    absent = _not_published(request, spec, cands, catalogue)
    if absent is not None:
        raise absent

    mode, ceiling, context = _cuda_mode(machine, request)
    base_reasons = ([source_note] if source_note else []) + list(context)
    failures: list[str] = []
    for release in releases:
        python, py_reason = _python_for(release, request.python)
        if python is None:
            failures.append(py_reason)
            continue
        version = _exact_version(release, request.torch)
        if mode == "cpu":
            if not release.cpu:
                failures.append(cands.missing.get(release.minor)
                                or f"torch {release.minor} is not published for the {flavor} flavor")
                continue
            if release.cpu_python is not None and python not in release.cpu_python:
                failures.append(f"torch {release.minor} has no {flavor} CPU build for python {python}")
                continue
            pick = _Pick(None, ())
        else:
            if not release.builds.get(flavor):
                failures.append(cands.missing.get(release.minor)
                                or f"torch {release.minor} is not published for the {flavor} flavor")
                continue
            assert ceiling is not None
            found, why = _pick_build(release, flavor, machine, ceiling, data, python)
            if found is None:
                failures.append(why)
                continue
            pick = found
        reasons = base_reasons + list(pick.reasons)
        if failures:
            reasons.append("newer releases skipped: " + "; ".join(failures))
        reasons.append(f"torch {version}: the newest {'matching ' if spec else ''}release that passes every rule"
                       + (f" and exists on {_where(flavor, catalogue)}" if catalogue is not None
                          and catalogue.flavor == flavor else ""))
        reasons.append(py_reason)
        reasons += list(cands.notes.get(release.minor, ()))
        specs, pip_specs, index, variant = _specs(flavor, release, version, python, pick.build)
        reasons.append(_flavor_reason(flavor, pick.build))
        tv = release.torchvision
        return Selection(
            flavor=flavor, torch=version, torchvision=tv, torchaudio=release.torchaudio,
            cuda=pick.build.cuda if pick.build else None, python=python, variant=variant,
            specs=specs, channels=_channels(flavor, pick.build), pip_specs=pip_specs, pip_index_url=index,
            reasons=tuple(reasons), minor_version_compat=pick.mvc,
        )
    if not explain:
        raise SelectionError("no build")
    raise _no_build_error(machine, request, failures, data, catalogue)


def _channels(flavor: str, build: Build | None) -> tuple[str, ...]:
    if flavor == "pytorch" and build is None:
        return ("pytorch", "conda-forge")  # cpuonly builds need no nvidia channel
    return CHANNELS[flavor]


def _cuda_mode(machine: Machine, request: Request) -> tuple[str, str | None, list[str]]:
    """('cpu' | 'gpu', CUDA ceiling, reasons) from --cuda, CONDA_OVERRIDE_CUDA and the driver."""
    reasons: list[str] = []
    cuda = request.cuda
    if cuda == "cpu":
        return "cpu", None, ["CPU build requested (--cuda cpu)"]
    if cuda not in ("auto", ""):
        drv = machine.driver
        if drv and drv.cuda and Version(cuda) > Version(drv.cuda) \
                and not request.no_driver_check:
            raise SelectionError(
                f"--cuda {cuda} is above CUDA {drv.cuda}, the highest this machine's driver {drv.version} supports",
                f"update the NVIDIA driver, pick --cuda {drv.cuda} or lower, or pass --no-driver-check "
                "to plan for another machine")
        reasons.append(f"CUDA {cuda} requested (--cuda {cuda}): treated as the driver's CUDA level")
        return "gpu", cuda, reasons
    if machine.cuda_override is not None:
        if machine.cuda_override == "":
            return "cpu", None, ["CONDA_OVERRIDE_CUDA is empty: no CUDA, CPU build"]
        reasons.append(f"CONDA_OVERRIDE_CUDA={machine.cuda_override}: planning for a driver that reports "
                       f"CUDA {machine.cuda_override}")
        return "gpu", machine.cuda_override, reasons
    drv = machine.driver
    if drv is None:
        return "cpu", None, ["no NVIDIA driver found: CPU build (plan for a GPU machine with --cuda X.Y)"]
    if not drv.cuda:
        return "cpu", None, [f"driver {drv.version} found but its CUDA level is unknown: CPU build "
                             "(set --cuda X.Y to choose a GPU build)"]
    reasons.append(f"driver {drv.version} reports CUDA {drv.cuda} (source: {drv.source})")
    if machine.gpus_hidden:
        reasons.append("GPUs are hidden by CUDA_VISIBLE_DEVICES: architecture check skipped")
    elif not machine.gpus_known:
        reasons.append("GPU list unknown (NVML and nvidia-smi unavailable): architecture check skipped")
    return "gpu", drv.cuda, reasons


def _no_build_error(machine: Machine, request: Request, failures: Sequence[str],
                    data: CompatData, catalogue: Catalogue | None = None) -> SelectionError:
    binding = failures[0] if failures else "no release qualifies"
    alternatives: list[str] = []
    probes: list[tuple[str, Request]] = []
    if request.torch:
        # nearest release to the pinned one first, so the hint is "torch 2.7", not "the newest"
        pinned = Version(next((r.version for r in data.releases if _matches(r, parse_torch_spec(request.torch),
                                                                             request.torch)), "0"))
        for release in sorted(data.releases, key=lambda r: (abs(r.key.minor - pinned.minor)
                                                             + 100 * abs(r.key.major - pinned.major), r.key)):
            probe = Request(request.cuda, release.minor, request.python, request.flavor, request.no_driver_check)
            try:
                _select(machine, probe, data, explain=False, catalogue=catalogue)
            except (SelectionError, UsageError):
                continue
            probes.append(("--torch {torch}", probe))
            break
    if request.python:
        probes.append(("--python {python}", Request(request.cuda, request.torch, None, request.flavor,
                                                    request.no_driver_check)))
    for other in FLAVORS:
        if other != request.flavor:
            probes.append((f"--flavor {other}" + (" --torch {torch}" if not request.torch else ""),
                           Request(request.cuda, request.torch, request.python, other, request.no_driver_check)))
    for template, probe in probes:
        try:
            alt = _select(machine, probe, data, explain=False, catalogue=catalogue)
        except (SelectionError, UsageError):
            continue
        what = f"torch {alt.torch} with CUDA {alt.cuda}" if alt.cuda else f"torch {alt.torch} (CPU)"
        alternatives.append(f"{what} has ({template.format(torch=alt.torch, python=alt.python)})")
    if not alternatives and machine.driver and machine.driver.cuda:
        hint = "update the NVIDIA driver, or use --cuda cpu for a CPU build"
    else:
        hint = "; ".join(alternatives) or "use --cuda cpu for a CPU build"
    message = f"no {request.flavor} PyTorch build fits this machine: {binding}"
    if len(failures) > 1:
        message += " (also: " + "; ".join(failures[1:4]) + (" ..." if len(failures) > 4 else "") + ")"
    return SelectionError(message, hint)


def _flavor_reason(flavor: str, build: Build | None) -> str:
    if flavor == "conda-forge":
        if build is None:
            return "conda-forge: pytorch pinned to a cpu* build"
        return (f"conda-forge: pytorch pinned to a cuda* build and cuda-version={build.cuda}, so a solver "
                "without a GPU fails loudly instead of installing the CPU build")
    if flavor == "pytorch":
        return ("legacy pytorch+nvidia channels (their last release is 2.5, pytorch#138506): "
                + (f"pytorch-cuda={build.cuda}" if build else "cpuonly"))
    return f"pip wheels from {PYTORCH_INDEX}/{build.label if build else 'cpu'} inside the conda env"


def _not_picked(build: Build, best: Build, minor: str, ceiling: str, mvc: bool) -> str:
    """Why a usable variant of a release is not the one envkit takes (`detect --catalogue`): it is not "the
    highest variant <= the driver's CUDA" when a higher one fits (cuda129 beside cuda130 on a 13.0 driver)."""
    if mvc:
        return (f"CUDA {build.cuda}: runs on this driver through NVIDIA minor version compatibility; envkit "
                f"picks {best.label} for torch {minor}")
    return (f"CUDA {build.cuda} <= CUDA {ceiling}: runs on this driver, but envkit picks {best.label}, the highest "
            f"variant of torch {minor} that fits (--cuda {build.cuda} takes this one)")


def offers(machine: Machine, request: Request, catalogue: Catalogue | None, data: CompatData | None = None
           ) -> list[dict[str, object]]:
    """Every (torch, CUDA variant) of a flavor with `usable` and why not: `envkit detect --catalogue`."""
    from dataclasses import replace

    data = data or load()
    flavor = request.flavor
    cands = _candidates(data, flavor, catalogue, None)
    try:
        mode, ceiling, _context = _cuda_mode(machine, Request(request.cuda, None, None, flavor,
                                                              request.no_driver_check))
    except SelectionError as exc:
        mode, ceiling = "error", None
        _context = [exc.message]
    rows: list[dict[str, object]] = []
    for release in cands.releases:
        if flavor == "pytorch" and release.key > LEGACY_LAST:
            continue
        if not release.cpu and not release.builds.get(flavor):
            if release.minor in cands.missing:
                rows.append({"torch": release.version, "variant": None, "cuda": None, "python": [],
                             "usable": False, "why": cands.missing[release.minor]})
            continue
        # the build select() would take from the whole release: only its row may say "the highest"
        best = _pick_build(release, flavor, machine, ceiling, data)[0] if mode == "gpu" and ceiling else None
        for build in release.builds.get(flavor, ()):
            python = list(build.python or release.python)
            if mode != "gpu" or ceiling is None:
                usable, why = False, (_context[0] if _context else "no CUDA on this machine")
            else:
                pick, why = _pick_build(replace(release, builds={flavor: (build,)}), flavor, machine, ceiling, data)
                usable = pick is not None
                if pick is not None:
                    why = pick.reasons[0] if pick.reasons else ""
                    if best is not None and best.build is not None and best.build != build:
                        why = _not_picked(build, best.build, release.minor, ceiling, pick.mvc)
            rows.append({"torch": release.version, "variant": build.label, "cuda": build.cuda, "python": python,
                         "usable": usable, "why": why})
        if release.cpu:
            rows.append({"torch": release.version, "variant": "cpu", "cuda": None,
                         "python": list(release.cpu_python or release.python), "usable": True,
                         "why": "CPU build (runs anywhere, no GPU)"})
    return rows

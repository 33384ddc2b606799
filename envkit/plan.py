"""What to install: detect -> select (live catalogue) -> the env file, for render, create, lock and bundle.

create.py installs what `prepare` (a spec or a file, adapted to this machine) or `recreate_source` +
`recreate_envfile` (a lock or an explicit file: the exact package set) say; it decides nothing about
what. Each function takes plain arguments with named defaults and returns a model; none prints
(cli/ renders what they return, architecture.md habit 1).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from envkit.compat import legacy, load
from envkit.compat.select import PYTORCH_INDEX, offers, select
from envkit.config import check_pytorch_index, load_file_config
from envkit.detect import detect
from envkit.engines.repodata import Obtained, obtain
from envkit.errors import EngineError, SelectionError, UsageError
from envkit.models import FLAVORS, Machine, Request, Selection
from envkit.prefix.locations import check_name
from envkit.render import mirrors
from envkit.render.envfile import EnvFile, check_channel, check_pip_line, check_variables, parse_conda_spec
from envkit.render.mirrors import strip_credentials
from envkit.safeio import read_text

if TYPE_CHECKING:
    from envkit.engines.base import CreateOptions, Timer
    from envkit.lock.file import Lock, LockedPlatform

# `envkit detect` imports this module for select_for: what only render, create, lock and bundle use
# (adapting a file, building from a spec, reading locks and sidecars) is imported where it is used,
# which keeps detect at its old cost (scripts/bench_cli.py)

DEFAULT_REQUEST = Request()

def differences(request: Request, selection: Selection | None) -> tuple[str, ...]:
    """Every place where what will be installed differs from what was asked, in the user's words, with the
    way to get the other thing: create says these before any download (issue: a CPU build or a CUDA 12.9
    build for --cuda 12.4 was only visible after the install)."""
    if selection is None:
        return ()
    found: list[str] = []
    if request.cuda not in ("auto", "cpu") and selection.cuda != request.cuda:
        if selection.cuda is None:
            found.append(f"--cuda {request.cuda} was asked, but this is a CPU build")
        else:
            how = ("it runs on a CUDA " + request.cuda + " driver through NVIDIA minor version compatibility"
                   if selection.minor_version_compat else "the newest build at or below " + request.cuda)
            found.append(f"--cuda {request.cuda} is the driver's CUDA level, not a CUDA line: CUDA "
                         f"{selection.cuda} builds ({selection.variant}) are installed ({how}); for an exact line "
                         f"pick a torch that has one: envkit detect --catalogue --cuda {request.cuda}")
    elif request.cuda == "auto" and selection.cuda is None:
        why = next((r for r in selection.reasons if "CPU build" in r), "no usable NVIDIA GPU was found")
        found.append(f"a CPU build is installed ({why.split(':')[0]}); to build for a GPU machine from here "
                     "pass --cuda X.Y (its driver's CUDA level) or --driver-version VER")
    if request.python and selection.python != request.python and not selection.python.startswith(
            request.python + "."):
        found.append(f"--python {request.python} was asked; python {selection.python} is installed")
    return tuple(found)


@dataclass(frozen=True)
class Rendered:
    """`envkit render`: the file text plus what produced it."""

    text: str
    envfile: EnvFile
    selection: Selection | None  # None: a --from file without torch (no torch stack chosen)
    machine: Machine
    changes: tuple[str, ...] = ()
    spec_name: str | None = None


@dataclass(frozen=True)
class CatalogueChoice:
    """Where selection learns what exists: the policy (auto | offline | refresh) and the sources."""

    mode: str = "auto"
    mirror: str | None = None  # --mirror value (profile name or URL)
    channels: tuple[str, ...] = ()  # --channel URLs replace the flavor's channels
    index_base: str | None = None  # ENVKIT_PYTORCH_INDEX / config pytorch_index


DEFAULT_CATALOGUE = CatalogueChoice()


def pytorch_index_base(config: dict[str, Any] | None = None) -> str | None:
    """ENVKIT_PYTORCH_INDEX, else the config file's `pytorch_index` (read here only)."""
    if config is None:
        config = load_file_config().data
    if os.environ.get("ENVKIT_PYTORCH_INDEX"):
        return check_pytorch_index(os.environ["ENVKIT_PYTORCH_INDEX"])  # garbage is a usage error, not a fetch
    value = config.get("pytorch_index")
    return str(value) if value else None


def obtain_catalogue(flavor: str, choice: CatalogueChoice) -> Obtained:
    """The live (or cached) catalogue for a flavor, or None with the reason the static data stands in."""
    config = load_file_config().data
    mirror = mirrors.resolve(choice.mirror, config)
    index_base = choice.index_base or pytorch_index_base(config)
    channels: tuple[str, ...] = ()
    if choice.channels and flavor != "pip":
        channels = tuple(mirrors.canonical_channel(c, config) if mirror else c for c in choice.channels)
    return obtain(flavor, mode=choice.mode, mirror=mirror, mirror_value=choice.mirror, channels=channels,
                  index_base=index_base)


def catalogue_table(machine: Machine, request: Request, choice: CatalogueChoice,
                    flavors: tuple[str, ...] | None = None) -> dict[str, Any]:
    """`envkit detect --catalogue`: per flavor, what its catalogue offers and whether it fits this machine."""
    result: dict[str, Any] = {"machine": machine.to_json(), "flavors": []}
    for flavor in flavors or FLAVORS:
        obtained = obtain_catalogue(flavor, choice)
        rows = offers(machine, replace(request, flavor=flavor), obtained.catalogue)
        result["flavors"].append({"flavor": flavor, "source": obtained.note, "offers": rows})
    return result


def select_for(machine: Machine, request: Request, choice: CatalogueChoice = DEFAULT_CATALOGUE) -> Selection:
    """`envkit detect`: select() against the flavor's catalogue, the PyTorch index mirror applied as render does."""
    obtained = obtain_catalogue(request.flavor, choice)
    selection = select(machine, request, catalogue=obtained.catalogue, source_note=obtained.note)
    return with_pytorch_index(selection, choice.index_base)


def detect_and_select(request: Request, *, driver_version: str | None = None,
                      compute_capabilities: tuple[str, ...] = (), python_candidates: list[str | None] | None = None,
                      catalogue: CatalogueChoice = DEFAULT_CATALOGUE) -> tuple[Machine, Selection]:
    """detect() then select() against what the flavor's channels publish; a spec's Python range is
    tried in order of preference."""
    machine = detect(driver_version=driver_version, compute_capabilities=compute_capabilities, cuda=request.cuda)
    obtained = obtain_catalogue(request.flavor, catalogue)
    candidates = python_candidates or [request.python]
    first_error: SelectionError | None = None
    for python in candidates:
        try:
            return machine, select(machine, replace(request, python=python), catalogue=obtained.catalogue,
                                   source_note=obtained.note)
        except SelectionError as exc:
            first_error = first_error or exc
    assert first_error is not None
    raise first_error


def with_pytorch_index(selection: Selection, base: str | None = None) -> Selection:
    """The selection's PyTorch index URL on the mirror `base` (default: ENVKIT_PYTORCH_INDEX / config
    `pytorch_index`), credentials stripped: what render writes, detect shows and doctor's fixes name."""
    base = base or pytorch_index_base()
    if not base or selection.pip_index_url is None:
        return selection
    if not re.fullmatch(r"(https?|file)://[A-Za-z0-9_.~\-/%:@+\[\]]+", str(base)):
        raise UsageError(f"the PyTorch index {str(base)[:80]!r} (ENVKIT_PYTORCH_INDEX or 'pytorch_index' in the "
                         "config file) is not a plain http(s) URL",
                         "set it to a mirror of https://download.pytorch.org/whl, e.g. https://mirror.example/whl")
    clean = strip_credentials(str(base).rstrip("/"))[0]
    # the reasons name the index too ("pip wheels from <index>/cu130 ..."): they must name the same one
    return replace(selection, pip_index_url=selection.pip_index_url.replace(PYTORCH_INDEX, clean),
                   reasons=tuple(r.replace(f"{PYTORCH_INDEX}/", f"{clean}/") for r in selection.reasons))


def _working_versions(req: Request, driver_version: str | None, compute_capabilities: tuple[str, ...],
                     catalogue: CatalogueChoice = DEFAULT_CATALOGUE, limit: int = 3) -> list[str]:
    """The torch releases nearest the wanted one that this machine runs, as `--torch X` options."""
    from packaging.version import InvalidVersion, Version


    try:
        wanted = Version((req.torch or "0").lstrip("=<>!~").split(",")[0])
    except InvalidVersion:
        wanted = Version("0")
    minors = {r.minor for r in load().releases} | {r.minor for r in legacy.load().releases}

    def distance(minor: str) -> tuple[int, int]:
        v = Version(minor)
        return abs((v.major * 100 + v.minor) - (wanted.major * 100 + wanted.minor)), -int(v > wanted)

    found: list[str] = []
    for minor in sorted(minors, key=distance):
        if len(found) >= limit:
            break
        for flavor, python in dict.fromkeys((f, p) for f in (req.flavor, "conda-forge", "pip", "pytorch")
                                            for p in (req.python, None)):
            try:
                _machine, sel = detect_and_select(replace(req, torch=minor, flavor=flavor, python=python),
                                                  driver_version=driver_version,
                                                  compute_capabilities=compute_capabilities, catalogue=catalogue)
            except (SelectionError, UsageError):
                continue
            where = f"CUDA {sel.cuda}" if sel.cuda else "CPU"
            flag = ("" if flavor == req.flavor else f" --flavor {flavor}") + (
                f" --python {sel.python}" if req.python and sel.python != req.python else "")
            found.append(f"--torch {minor}{flag} (torch {sel.torch}, {where})")
            break
    return found


def _in_range(version: str, spec: str) -> bool:
    """Can a torch built for CUDA `version` share an env with the CUDA runtime `spec` asks for? Inside the
    range, or the same major at or below a version the range admits: CUDA minor version compatibility (NVIDIA,
    CUDA Compatibility guide, "Minor Version Compatibility") and conda-forge's CUDA 12 builds' run_exports
    (`cuda-version >=12.0,<13`) let a 12.0 build of torch sit beside cuda-version=12.5."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        have, allowed = Version(version), SpecifierSet(spec)
    except (InvalidSpecifier, InvalidVersion):
        return True
    if have in allowed:
        return True
    return any(Version(f"{have.major}.{minor}") in allowed for minor in range(have.minor, 10))


def _unpublished(exc: Exception) -> bool:
    """A flavor that lacks the version altogether explains less than one whose build does not fit."""
    message = getattr(exc, "message", str(exc))
    return any(m in message for m in ("not published", "channel: ", "does not exist"))


def _legacy_for_unpinned(parsed: Any, req: Request, pythons: list[str | None], ceilings: list[str],
                         driver_version: str | None, compute_capabilities: tuple[str, ...],
                         choice: CatalogueChoice) -> tuple[Machine, Selection, str] | None:
    """For a file whose torch line has no pin: the newest torch of the cudatoolkit era (compat/legacy.yaml) that
    fits the file's python and CUDA range and runs here, or None. Only the release is chosen here; the
    file still says which channel (the pytorch channel first when it lists it)."""
    wanted = [p for p in pythons if p] or ([parsed.python] if parsed.python else [])
    for release in legacy.load().releases:
        if wanted and not any(p in release.python for p in wanted):
            continue
        for cuda in ceilings:
            for flavor in ("pytorch", "pip", "conda-forge") if parsed.uses_pytorch_channel else \
                    ("conda-forge", "pytorch", "pip"):
                try:
                    machine, sel = detect_and_select(
                        replace(req, torch=release.version, flavor=flavor, cuda=cuda),
                        driver_version=driver_version, compute_capabilities=compute_capabilities,
                        python_candidates=[p for p in wanted if p in release.python] or None, catalogue=choice)
                except (SelectionError, UsageError):
                    continue
                if parsed.cuda_range and (sel.cuda is None or not _in_range(sel.cuda, parsed.cuda_range)):
                    continue
                bound = " and ".join(b for b in (
                    f"python {sel.python}" if wanted else "",
                    f"CUDA {parsed.cuda_range} (its {', '.join(parsed.cuda_consumers)})" if parsed.cuda_range else "")
                    if b)
                return machine, sel, (f"torch {sel.torch}: the file's torch has no pin, and its {bound} only the "
                             f"cudatoolkit era's releases serve; the newest of them that runs here "
                             "(pass --torch to choose another)")
    return None


def render_env(*, spec: str | None = None, from_file: Path | None = None, name: str | None = None,
               request: Request = DEFAULT_REQUEST, flavor_given: bool = False, mirror: str | None = None,
               driver_version: str | None = None, compute_capabilities: tuple[str, ...] = (),
               catalogue_mode: str = "auto", channels: tuple[str, ...] = ()) -> Rendered:
    """A spec (or a colleague's file) + this machine -> environment.yml text."""
    from envkit.render import specs
    from envkit.render.adapt import (adapt, check_torch_text, cuda_ceilings, cuda_where, flavor_order, kept_pair,
                                     parse_file, python_choices, request_from)
    from envkit.render.build import build_envfile, python_candidates

    config = load_file_config().data
    profile = mirrors.resolve(mirror, config)
    index_base = pytorch_index_base(config)
    choice = CatalogueChoice(catalogue_mode, mirror, channels, index_base)
    if from_file is not None:
        parsed = parse_file(from_file)
        req = request_from(parsed, request, flavor_given)
        chosen: Selection | None = None
        notes: list[str] = []
        cpu_by_intent = parsed.torch_cpu and bool(parsed.cuda_consumers) and request.cuda == "auto"
        if cpu_by_intent:
            # a CPU torch beside jax/tensorflow/cupy on the GPU (young-geng/EasyLM gpu_environment.yml: pytorch-cpu
            # with jaxlib=*cuda* and cudatoolkit=11.3): the file splits the work, so torch stays on the CPU
            req = replace(req, cuda="cpu")
            request = replace(request, cuda="cpu")
            notes.append(f"torch stays a CPU build, as the file asks ({', '.join(n for n in ('pytorch-cpu', 'cpuonly') if n in {s.name for s in parsed.specs}) or 'a cpu build string'}): "
                         f"the GPU is for {', '.join(parsed.cuda_consumers)} and their CUDA line (pass --cuda X.Y for a "
                         "CUDA torch)")
        if parsed.has_torch or request.torch is not None:
            if request.torch is None:
                check_torch_text(parsed)
                if parsed.torch is None and parsed.coupled_torch:
                    notes.append(f"torch {parsed.coupled_torch}: the release the file's coupled pins (triton, "
                                 "+ptXY wheels, a PyG page, flash-attn's +cuXYtorchA.B wheels) were built for; the file's torch line has no pin")
            flavors = (req.flavor,) if flavor_given else flavor_order(parsed, req.torch)
            first: SelectionError | None = None
            from_file_error: SelectionError | None = None
            # the file's constraints bind the selection: its python range, and the CUDA its coupled wheels or
            # tensorflow/jax/cupy need (tried first; envkit/render/adapt.py cuda_ceilings)
            pythons = python_choices(parsed, request.python)
            probe = detect(driver_version=driver_version, compute_capabilities=compute_capabilities,
                           cuda=request.cuda)
            drv_cuda = probe.cuda_override or (probe.driver.cuda if probe.driver else None)
            known = tuple(c for c, _v, _s in load().driver_cuda) + tuple(c for c, _v in legacy.load().driver_cuda)
            ceilings = cuda_ceilings(parsed, req, drv_cuda, known)
            for cuda, flavor in ((c, f) for c in ceilings for f in flavors):
                try:
                    machine, chosen = detect_and_select(replace(req, flavor=flavor, cuda=cuda),
                                                        driver_version=driver_version,
                                                        compute_capabilities=compute_capabilities,
                                                        python_candidates=list(pythons), catalogue=choice)
                except SelectionError as exc:
                    if cuda != "auto" and cuda != request.cuda:
                        # a CUDA the file implied: its error names no flag; used when nothing else explains
                        if from_file_error is None or (not _unpublished(exc) and _unpublished(from_file_error)):
                            from_file_error = exc
                        continue
                    # the explanation that matters comes from a flavor that has the version at all
                    if first is None or (not _unpublished(exc) and _unpublished(first)):
                        first = exc
                    continue
                if cuda != "auto" and cuda != request.cuda and not parsed.cuda_range and chosen.cuda != cuda:
                    chosen = None  # the file's wheel CUDA has no build of this torch: nothing to keep, plan freely
                    continue
                if cuda != "auto" and cuda != request.cuda and profile is not None and any(
                        c in profile.missing or (profile.channel_url(c) is None and "://" not in c)
                        for c in chosen.channels):
                    chosen = None  # keeping the file's CUDA needs a channel the mirror does not carry: plan freely
                    continue
                if flavor != flavors[0] and cuda != "auto" and cuda != request.cuda:
                    notes.append(f"torch {chosen.torch} with CUDA {cuda} comes from the {flavor} flavor: the {flavors[0]} "
                                 f"flavor has no CUDA {cuda} build of it (the version and CUDA stay; --flavor and --cuda "
                                 "choose)")
                elif flavor != flavors[0]:
                    notes.append(f"torch {chosen.torch} comes from the {flavor} flavor: the {flavors[0]} flavor has no "
                                 "build of it for this machine (the version stays; --flavor chooses)")
                if cuda != "auto" and cuda != request.cuda:
                    # the ceiling came from the file, not from a --cuda the user did not pass
                    by_packages = (parsed.cuda_range and cuda != kept_pair(parsed)) or cuda == parsed.wheel_cuda
                    source = (f"its CUDA-built packages: {parsed.cuda_range or parsed.wheel_cuda}"
                              if by_packages else f"its torch's CUDA {cuda}")
                    chosen = replace(chosen, reasons=tuple(
                        r.replace(f"requested (--cuda {cuda})", f"from the file ({source})") for r in chosen.reasons))
                    notes.append(
                        f"CUDA {chosen.cuda}: what the file's CUDA-built packages were built for or need "
                        f"({parsed.cuda_range or parsed.wheel_cuda}) runs here, so they keep it"
                        if by_packages else
                        f"CUDA {chosen.cuda}: the CUDA the file's torch was built for runs here, so it stays")
                break
            if chosen is None and first is None:
                first = from_file_error
            if req.torch is None and (chosen is None or (parsed.cuda_range and (
                    chosen.cuda is None or not _in_range(chosen.cuda, parsed.cuda_range)))):
                # an unpinned torch whose python (3.6) or CUDA range (cudatoolkit 10.1 for tensorflow-gpu) only the
                # cudatoolkit era served: the newest legacy release inside both, on the channel the file used
                legacy_pick = _legacy_for_unpinned(parsed, req, pythons, ceilings, driver_version,
                                                   compute_capabilities, choice)
                if legacy_pick is not None:
                    machine, chosen, note = legacy_pick
                    notes.append(note)
            if parsed.cuda_range and not cpu_by_intent and (chosen is None or chosen.cuda is None
                                                            or not _in_range(chosen.cuda, parsed.cuda_range)) \
                    and not (chosen is not None and chosen.cuda and chosen.cuda == kept_pair(parsed)):
                built = "CPU only" if chosen is None or chosen.cuda is None else f"CUDA {chosen.cuda}"
                why = first.message if chosen is None and first is not None else f"the build that runs here is {built}"
                raise SelectionError(
                    f"{', '.join(parsed.cuda_consumers)} in the file need CUDA {parsed.cuda_range} (their "
                    f"cudatoolkit/cuda-version line, {cuda_where(parsed)}, binds torch's CUDA too): {why}",
                    "pass --torch X for a torch with a CUDA build inside that range, or widen the file's "
                    "cudatoolkit/cuda-version line (and the packages that need it)")
            if chosen is None and parsed.python_range and first is not None and "supports python" in first.message:
                # the error of the last python tried may only say that python is too new for this torch: ask each
                # python the range admits, one at a time, so the rule that really fails (driver, architecture) is named
                for py in pythons:
                    try:
                        detect_and_select(replace(req, flavor=flavors[0], cuda=ceilings[0], python=py),
                                          driver_version=driver_version, compute_capabilities=compute_capabilities,
                                          catalogue=choice)
                    except SelectionError as exc:
                        if "supports python" not in exc.message:
                            first = exc
                            break
                    else:
                        break
            if chosen is None and parsed.python_range and first is not None and "supports python" in first.message:
                raise SelectionError(f"python{parsed.python_range} ({parsed.where('python')}) binds the selection: "
                                     f"{first.message}", first.hint or "widen the file's python range or pass "
                                     "--python X.Y") from first
            if chosen is None:
                assert first is not None
                if req.torch is None:
                    raise first
                # a pinned torch is the user's decision: stop, say which rule fails, offer the nearest that work
                origin = "--torch" if request.torch is not None else f"pinned in {from_file.name}"
                options = _working_versions(req, driver_version, compute_capabilities, choice)
                raise SelectionError(
                    f"torch {req.torch} ({origin}) cannot be installed on this machine: {first.message}",
                    ("nearest versions that work here: " + "; ".join(options) + ". Pass one explicitly "
                     "(envkit never moves a pinned torch by itself)") if options else
                    (first.hint or "update the NVIDIA driver, or use --cuda cpu for a CPU build")) from first
            chosen = with_pytorch_index(chosen, index_base)
        else:
            machine = detect(driver_version=driver_version, compute_capabilities=compute_capabilities,
                             cuda=request.cuda)
        envfile, changes = adapt(parsed, chosen, machine, name=name, mirror=profile, source=str(from_file),
                                 extra_changes=notes, cuda_given=request.cuda != "auto")
        check_name(envfile.name)
        return Rendered(envfile.render(), envfile, chosen, machine, tuple(changes))
    env_spec = specs.load(spec or "dl_train")
    if env_spec.flavor and not flavor_given:
        request = replace(request, flavor=env_spec.flavor)
    machine, selection = detect_and_select(
        request, driver_version=driver_version, compute_capabilities=compute_capabilities,
        python_candidates=python_candidates(env_spec.python, request.python), catalogue=choice)
    selection = with_pytorch_index(selection, index_base)
    envfile = build_envfile(env_spec, selection, machine, name=check_name(name or env_spec.name), mirror=profile)
    return Rendered(envfile.render(), envfile, selection, machine, (), env_spec.name)


# -- create, lock and bundle: what to install ---------------------------------------------------
class Prepared(NamedTuple):
    """What `prepare` decided to install (a tuple, so `envfile, selection, machine, changes = ...` reads it)."""

    envfile: EnvFile
    selection: Selection | None  # None: a file taken as is (--no-adapt), or one without torch
    machine: Machine
    changes: tuple[str, ...]


def prepare(opts: CreateOptions, timer: Timer) -> Prepared:
    """A spec, or a file adapted to this machine (or taken as is with --no-adapt): the env file to install."""
    if opts.file is not None and opts.no_adapt:
        with timer.phase("detect"):
            machine = detect(driver_version=opts.driver_version, compute_capabilities=opts.compute_capabilities,
                             cuda=opts.request.cuda)
        with timer.phase("render"):
            envfile = envfile_as_is(opts.file, opts.name)
        return Prepared(envfile, None, machine, ())
    with timer.phase("render"):
        rendered = render_env(spec=opts.spec if opts.file is None else None, from_file=opts.file, name=opts.name,
                              request=opts.request, flavor_given=opts.flavor_given,
                              mirror=opts.mirror, driver_version=opts.driver_version,
                              compute_capabilities=opts.compute_capabilities, catalogue_mode=opts.catalogue,
                              channels=opts.channels)
    if opts.file is not None and rendered.selection is not None:
        _keep_pinned_gpu_build(opts, rendered.selection)
    return Prepared(rendered.envfile, rendered.selection, rendered.machine, rendered.changes)


def _keep_pinned_gpu_build(opts: CreateOptions, selection: Selection) -> None:
    """A file that pins a CUDA build (`pytorch=2.13.0=*cuda*`, as `envkit export` writes) must not turn
    into a CPU env because this machine has no GPU (CI, Docker, login node): that is the silent CPU
    build the selector exists to prevent (issue 12). Only an explicit --cuda cpu asks for that."""
    from envkit.render.adapt import parse_file

    if selection.is_gpu or opts.request.cuda == "cpu" or opts.file is None:
        return
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

    parsed = parse_file(path)
    channels = tuple(check_channel(c, f"{path}: channels") for c in parsed.channels)
    if not channels:
        raise UsageError(f"{path} lists no channels (conda 26 has no implicit defaults)",
                         "add a channels: list, pass --channel URL, or drop --no-adapt")
    deps = tuple(parse_conda_spec(d, f"{path}: dependencies").render() for d in parsed.conda)
    pip = tuple(check_pip_line(p, f"{path}: pip") for p in parsed.pip)
    return EnvFile(name, channels, deps, pip, parsed.variables, (f"taken as is from {path.name} (--no-adapt)",))


def is_explicit(path: Path) -> bool:
    """An @EXPLICIT list (conda list --explicit, envkit export --format explicit), not an environment.yml."""
    return any(line.strip() == "@EXPLICIT" for line in read_text(path, "environment file").splitlines())


def recreate_source(opts: CreateOptions) -> tuple[Path, str] | None:
    """--lock FILE or --file EXPLICIT.txt: the exact package set, installed without solving."""
    if opts.lock is not None:
        return opts.lock, "lock"
    if opts.file is not None and is_explicit(opts.file):
        return opts.file, "explicit"
    return None


def _channels_of(path: Path, kind: str) -> tuple[str, ...]:
    """Channel base URLs named in an explicit list or a lock file (for mirrors and credentials)."""
    text = read_text(path, f"{kind} file")
    urls = re.findall(r"((?:https?|file)://\S+?)/(?:linux-64|noarch|linux-aarch64|osx-64|osx-arm64|win-64)/", text)
    return tuple(dict.fromkeys(urls))


def recreate_envfile(name: str, source: Path, kind: str) -> tuple[EnvFile, tuple[Lock, LockedPlatform] | None]:
    """What an explicit file (+ its sidecar) or a lock holds besides conda packages: pip, variables.
    A lock comes back read, with this platform's entry (None for an explicit file)."""
    from envkit.export import read_sidecar
    from envkit.lock.file import current_platform, pip_lines, read_lock

    if kind == "lock":
        lock = read_lock(source)
        entry = lock.platform(current_platform())
        channels = lock.channels or tuple(dict.fromkeys(c.channel_url for c in entry.conda))
        # a lock is input like any file: its PyPI entries and variables pass the same checks as a pip section
        pip = tuple(check_pip_line(line, f"{source}: pypi") for line in pip_lines(lock, entry))
        variables = check_variables(dict(lock.variables), f"{source}: variables")
        return EnvFile(name, channels, (), pip, variables, ()), (lock, entry)
    pip, variables = read_sidecar(source)
    return EnvFile(name, _channels_of(source, kind), (), pip, variables, ()), None

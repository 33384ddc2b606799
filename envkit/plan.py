"""Stage functions the CLI calls: each takes plain arguments with named defaults, returns a model.

They never print; cli.py renders what they return (architecture.md, habit 1).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from envkit.models import Machine, Request, Selection
from envkit.render.envfile import EnvFile

DEFAULT_REQUEST = Request()

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
        from envkit.config import load_file_config

        config = load_file_config().data
    value = os.environ.get("ENVKIT_PYTORCH_INDEX") or config.get("pytorch_index")
    return str(value) if value else None


def obtain_catalogue(flavor: str, choice: CatalogueChoice) -> Any:
    """The live (or cached) catalogue for a flavor, or None with the reason the static data stands in."""
    from envkit.config import load_file_config
    from envkit.engines.repodata import obtain
    from envkit.render import mirrors

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
    from envkit.compat.select import offers
    from envkit.models import FLAVORS

    result: dict[str, Any] = {"machine": machine.to_json(), "flavors": []}
    for flavor in flavors or FLAVORS:
        obtained = obtain_catalogue(flavor, choice)
        rows = offers(machine, replace(request, flavor=flavor), obtained.catalogue)
        result["flavors"].append({"flavor": flavor, "source": obtained.note, "offers": rows})
    return result


def select_for(machine: Machine, request: Request, choice: CatalogueChoice = DEFAULT_CATALOGUE) -> Selection:
    """`envkit detect`: select() against the flavor's catalogue, the PyTorch index mirror applied as render does."""
    from envkit.compat.select import select

    obtained = obtain_catalogue(request.flavor, choice)
    selection = select(machine, request, catalogue=obtained.catalogue, source_note=obtained.note)
    return with_pytorch_index(selection, choice.index_base)


def detect_and_select(request: Request, *, driver_version: str | None = None,
                      compute_capabilities: tuple[str, ...] = (), python_candidates: list[str | None] | None = None,
                      catalogue: CatalogueChoice = DEFAULT_CATALOGUE) -> tuple[Machine, Selection]:
    """detect() then select() against what the flavor's channels publish; a spec's Python range is
    tried in order of preference."""
    from envkit.compat.select import select
    from envkit.detect import detect
    from envkit.errors import SelectionError

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
    import re

    from envkit.compat.select import PYTORCH_INDEX
    from envkit.errors import UsageError
    from envkit.render.mirrors import strip_credentials

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

    from envkit.compat import legacy, load
    from envkit.errors import SelectionError, UsageError

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


def _unpublished(exc: Exception) -> bool:
    """A flavor that lacks the version altogether explains less than one whose build does not fit."""
    message = getattr(exc, "message", str(exc))
    return any(m in message for m in ("not published", "channel: ", "does not exist"))


def render_env(*, spec: str | None = None, from_file: Path | None = None, name: str | None = None,
               request: Request = DEFAULT_REQUEST, flavor_given: bool = False, mirror: str | None = None,
               driver_version: str | None = None, compute_capabilities: tuple[str, ...] = (),
               catalogue_mode: str = "auto", channels: tuple[str, ...] = ()) -> Rendered:
    """A spec (or a colleague's file) + this machine -> environment.yml text."""
    from envkit.config import load_file_config
    from envkit.prefix.locations import check_name
    from envkit.render import mirrors
    from envkit.render.build import build_envfile, python_candidates

    config = load_file_config().data
    profile = mirrors.resolve(mirror, config)
    index_base = pytorch_index_base(config)
    choice = CatalogueChoice(catalogue_mode, mirror, channels, index_base)
    if from_file is not None:
        from envkit.render.adapt import adapt, flavor_order, parse_file, request_from

        from envkit.errors import SelectionError

        parsed = parse_file(from_file)
        req = request_from(parsed, request, flavor_given)
        chosen: Selection | None = None
        notes: list[str] = []
        if parsed.has_torch or request.torch is not None:
            flavors = (req.flavor,) if flavor_given else flavor_order(parsed, req.torch)
            first: SelectionError | None = None
            for flavor in flavors:
                try:
                    machine, chosen = detect_and_select(replace(req, flavor=flavor), driver_version=driver_version,
                                                        compute_capabilities=compute_capabilities, catalogue=choice)
                except SelectionError as exc:
                    # the explanation that matters comes from a flavor that has the version at all
                    if first is None or (not _unpublished(exc) and _unpublished(first)):
                        first = exc
                    continue
                if flavor != flavors[0]:
                    notes.append(f"torch {chosen.torch} comes from the {flavor} flavor: the {flavors[0]} flavor has no "
                                 "build of it for this machine (the version stays; --flavor chooses)")
                break
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
            from envkit.detect import detect

            machine = detect(driver_version=driver_version, compute_capabilities=compute_capabilities,
                             cuda=request.cuda)
        envfile, changes = adapt(parsed, chosen, machine, name=name, mirror=profile, source=str(from_file),
                                 extra_changes=notes)
        check_name(envfile.name)
        return Rendered(envfile.render(), envfile, chosen, machine, tuple(changes))
    from envkit.render import specs

    env_spec = specs.load(spec or "dl_train")
    if env_spec.flavor and not flavor_given:
        request = replace(request, flavor=env_spec.flavor)
    machine, selection = detect_and_select(
        request, driver_version=driver_version, compute_capabilities=compute_capabilities,
        python_candidates=python_candidates(env_spec.python, request.python), catalogue=choice)
    selection = with_pytorch_index(selection, index_base)
    envfile = build_envfile(env_spec, selection, machine, name=check_name(name or env_spec.name), mirror=profile)
    return Rendered(envfile.render(), envfile, selection, machine, (), env_spec.name)

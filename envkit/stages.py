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
from envkit.verify.report import VerifyReport

DEFAULT_REQUEST = Request()

VERIFY_TIMEOUT = 300.0


def verify_env(*, name: str | None = None, prefix: str | None = None, python: str | None = None,
               quick: bool = False, device: int | None = None, all_gpus: bool = False,
               timeout: float = VERIFY_TIMEOUT, report_file: Path | None = None,
               save: bool = True) -> VerifyReport:
    """Run the AMP payload with the env's python; save the report in <prefix>/.envkit/verify.json."""
    from envkit import output
    from envkit.detect import detect
    from envkit.prefix.locations import META_DIR, find_prefix
    from envkit.verify.runner import python_of, resolve_python, run_payload, save_report

    env_prefix: Path | None = None
    if python:
        exe = resolve_python(python)
    else:
        env_prefix = find_prefix(name, prefix)
        exe = str(python_of(env_prefix))
    machine = output.machine_json(detect())
    options = {"quick": quick, "device": device, "all_gpus": all_gpus}
    report = run_payload(exe, options, machine, prefix=env_prefix, timeout=timeout)
    if env_prefix is not None and save:
        save_report(report, env_prefix / META_DIR / "verify.json")
    if report_file is not None:
        save_report(report, report_file)
    return report


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
    from envkit import output
    from envkit.compat.select import offers
    from envkit.models import FLAVORS

    result: dict[str, Any] = {"machine": output.machine_json(machine), "flavors": []}
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


ACTIVATE = ('for f in "$CONDA_PREFIX"/etc/conda/activate.d/*.sh; do [ -f "$f" ] && . "$f"; done; '
            'exec "$@"')


def activated_env(prefix: Path) -> dict[str, str]:
    """What `conda activate` sets that matters to a program: PATH, CONDA_PREFIX, env vars from conda-meta/state."""
    import os

    from envkit import proc

    env = proc.child_env(isolate_python=True)
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["CONDA_PREFIX"] = str(prefix)
    env["CONDA_DEFAULT_ENV"] = prefix.name
    from envkit.safeio import conda_state_vars

    env.update(conda_state_vars(prefix))
    return env


def run_in_env(name: str, command: list[str]) -> int:
    from envkit import proc
    from envkit.errors import EnvkitError
    from envkit.prefix.locations import find_prefix

    prefix = find_prefix(name if "/" not in name else None, name if "/" in name else None)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise EnvkitError("no command given", f"envkit run {name} -- python -c 'import torch'")
    try:
        code = proc.run_interactive(["bash", "-c", ACTIVATE, "envkit-run", *command], env=activated_env(prefix))
    except FileNotFoundError as exc:
        raise EnvkitError(f"cannot run {command[0]}: {exc}", "is bash installed?") from exc
    return 128 - code if code < 0 else code  # killed by signal N: 128+N, as a shell reports it


def remove_env(prefix: Path, *, not_envkit: bool = False) -> Path:
    """Delete an env envkit can prove it made (envkit/prefix/ownership.py); others only with `not_envkit`.

    Under the target's lock, so it never races a create of the same name; the name is freed at once
    by a rename to a locked trash name, and an interrupted deletion is finished by the next sweep."""
    from envkit.errors import EnvkitError
    from envkit.prefix.ownership import check_deletable, forget
    from envkit.prefix.staging import target_lock, trash

    with target_lock(prefix):
        check_deletable(prefix, allow_foreign=not_envkit, verb="remove")
        real = Path(os.path.realpath(prefix))
        forget(real)
        from envkit.prefix.condarc import unregister_env

        for seen in {prefix, real}:
            unregister_env(seen)  # conda's environments.txt forgets it too (issue 12)
        problem = trash(real)
    if problem:
        raise EnvkitError(f"{prefix} was removed from its name, but {problem}", None)
    return real


def _meta_json(path: Path) -> tuple[dict[str, Any], str | None]:
    """One env's metadata file: ({}, None) when absent, ({}, why) when unreadable; never raises."""
    from envkit.errors import EnvkitError
    from envkit.safeio import load_json_object

    if not path.exists() and not path.is_symlink():
        return {}, None
    try:
        return load_json_object(path, "metadata file", limit=4 * 1024 * 1024), None
    except EnvkitError as exc:
        return {}, exc.message


def _text(value: Any) -> str | None:
    return None if value is None else str(value)[:200]


def _origin(prefix: Path, meta: Path) -> tuple[str, str, str]:
    """(origin, why, the remove command) by the same proof `remove` uses (envkit.prefix.ownership):
    "envkit" (proven), "copied" (an envkit marker that does not prove this path: a copy, a moved env,
    another ENVKIT_HOME), "older envkit" (create.json but no marker) or "not envkit"."""
    from envkit.prefix.ownership import FOREIGN_FLAG, OWNER_FILE, ownership

    owner = ownership(prefix)
    ref = _shell_word(prefix.name if _resolves_to(prefix) else str(prefix))
    if owner.owned:
        return "envkit", owner.reason, f"envkit remove {ref}"
    remove = f"envkit remove {ref} --yes {FOREIGN_FLAG}"
    if (prefix / OWNER_FILE).exists() or (prefix / OWNER_FILE).is_symlink():
        return "copied", owner.reason, remove
    if (meta / "create.json").exists():
        return "older envkit", owner.reason, remove
    return "not envkit", owner.reason, remove


def _resolves_to(prefix: Path) -> bool:
    from envkit.errors import EnvkitError
    from envkit.prefix.locations import find_prefix

    try:
        return find_prefix(prefix.name, None) == prefix
    except EnvkitError:
        return False


def _shell_word(text: str) -> str:
    import re

    return text if re.match(r"^[A-Za-z0-9._/+-]+$", text) else "'" + text.replace("'", "'\\''") + "'"


def list_all() -> dict[str, Any]:
    from envkit.prefix.locations import META_DIR, list_envs
    from envkit.render import specs

    envs = []
    for prefix in list_envs():
        meta = prefix / META_DIR
        created, problem = _meta_json(meta / "create.json")
        verify, verify_problem = _meta_json(meta / "verify.json")
        selection = created.get("selection")
        sel: dict[str, Any] = selection if isinstance(selection, dict) else {}
        origin, why, remove = _origin(prefix, meta)
        row = {
            "name": prefix.name, "prefix": str(prefix), "by_envkit": origin == "envkit",
            "origin": origin, "ownership": why, "remove": remove,
            "torch": _text(sel.get("torch")), "cuda": _text(sel.get("cuda")), "flavor": _text(sel.get("flavor")),
            "created": _text(created.get("created")),
            "verify": _text(verify.get("outcome")), "verified": _text(verify.get("time")),
        }
        if problem or verify_problem:
            row["unreadable"] = problem or verify_problem
        envs.append(row)
    spec_rows = []
    for name, path in sorted(specs.available().items()):
        try:
            description = specs.load(str(path)).description
        except Exception as exc:  # a broken user spec is listed, not fatal
            description = f"(invalid: {getattr(exc, 'message', exc)})"
        spec_rows.append({"name": name, "path": str(path), "description": description})
    return {"environments": envs, "specs": spec_rows}

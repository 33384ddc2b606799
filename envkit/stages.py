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
    from envkit.locations import META_DIR, find_prefix
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
    selection: Selection
    machine: Machine
    changes: tuple[str, ...] = ()
    spec_name: str | None = None


def detect_and_select(request: Request, *, driver_version: str | None = None,
                      compute_capabilities: tuple[str, ...] = (), python_candidates: list[str | None] | None = None
                      ) -> tuple[Machine, Selection]:
    """detect() then select(); a spec's Python range is tried in order of preference."""
    from envkit.compat.select import select
    from envkit.detect import detect
    from envkit.errors import SelectionError

    machine = detect(driver_version=driver_version, compute_capabilities=compute_capabilities, cuda=request.cuda)
    candidates = python_candidates or [request.python]
    first_error: SelectionError | None = None
    for python in candidates:
        try:
            return machine, select(machine, replace(request, python=python))
        except SelectionError as exc:
            first_error = first_error or exc
    assert first_error is not None
    raise first_error


def _with_index(selection: Selection, base: str | None) -> Selection:
    """ENVKIT_PYTORCH_INDEX / config `pytorch_index`: a mirror of download.pytorch.org/whl."""
    if not base or selection.pip_index_url is None:
        return selection
    from envkit.compat.select import PYTORCH_INDEX
    from envkit.render.mirrors import strip_credentials

    clean = strip_credentials(str(base).rstrip("/"))[0]
    return replace(selection, pip_index_url=selection.pip_index_url.replace(PYTORCH_INDEX, clean))


def _nearest_torch(req: Request, driver_version: str | None, compute_capabilities: tuple[str, ...],
                   error: Exception) -> tuple[Machine, Selection]:
    """Newer releases first (closest first), then older ones: stay as near the file's torch as possible."""
    from packaging.version import Version

    from envkit.compat import load
    from envkit.errors import SelectionError

    wanted = Version(req.torch or "0")
    minors = [r.minor for r in load().releases]
    newer = sorted((m for m in minors if Version(m) > wanted), key=Version)
    older = sorted((m for m in minors if Version(m) < wanted), key=Version, reverse=True)
    for minor in newer + older:
        try:
            return detect_and_select(replace(req, torch=minor), driver_version=driver_version,
                                     compute_capabilities=compute_capabilities)
        except SelectionError:
            continue
    raise error


def render_env(*, spec: str | None = None, from_file: Path | None = None, name: str | None = None,
               request: Request = DEFAULT_REQUEST, flavor_given: bool = False, mirror: str | None = None,
               driver_version: str | None = None, compute_capabilities: tuple[str, ...] = ()) -> Rendered:
    """A spec (or a colleague's file) + this machine -> environment.yml text."""
    from envkit.config import load_file_config
    from envkit.locations import check_name
    from envkit.render import mirrors
    from envkit.render.build import build_envfile, python_candidates

    config = load_file_config().data
    profile = mirrors.resolve(mirror, config)
    index_base = os.environ.get("ENVKIT_PYTORCH_INDEX") or config.get("pytorch_index")
    if from_file is not None:
        from envkit.render.adapt import adapt, parse_file, request_from

        from envkit.errors import SelectionError

        parsed = parse_file(from_file)
        req = request_from(parsed, request, flavor_given)
        fallback: list[str] = []
        try:
            machine, selection = detect_and_select(req, driver_version=driver_version,
                                                   compute_capabilities=compute_capabilities)
        except SelectionError as exc:
            if request.torch is not None or req.torch is None:
                raise
            # the colleague's torch does not fit this machine: take the nearest release that does, loudly
            machine, selection = _nearest_torch(req, driver_version, compute_capabilities, exc)
            fallback.append(f"torch {req.torch} (from the file) does not fit this machine ({exc.message}); "
                            f"using torch {selection.torch} instead (pin another with --torch)")
        selection = _with_index(selection, index_base)
        envfile, changes = adapt(parsed, selection, machine, name=name, mirror=profile, source=str(from_file),
                                 extra_changes=fallback)
        check_name(envfile.name)
        return Rendered(envfile.render(), envfile, selection, machine, tuple(changes))
    from envkit.render import specs

    env_spec = specs.load(spec or "dl_train")
    if env_spec.flavor and not flavor_given:
        request = replace(request, flavor=env_spec.flavor)
    machine, selection = detect_and_select(
        request, driver_version=driver_version, compute_capabilities=compute_capabilities,
        python_candidates=python_candidates(env_spec.python, request.python))
    selection = _with_index(selection, index_base)
    envfile = build_envfile(env_spec, selection, machine, name=check_name(name or env_spec.name), mirror=profile)
    return Rendered(envfile.render(), envfile, selection, machine, (), env_spec.name)


ACTIVATE = ('for f in "$CONDA_PREFIX"/etc/conda/activate.d/*.sh; do [ -f "$f" ] && . "$f"; done; '
            'exec "$@"')


def activated_env(prefix: Path) -> dict[str, str]:
    """What `conda activate` sets that matters to a program: PATH, CONDA_PREFIX, env vars from conda-meta/state."""
    import json
    import os

    from envkit import proc

    env = proc.child_env(isolate_python=True)
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["CONDA_PREFIX"] = str(prefix)
    env["CONDA_DEFAULT_ENV"] = prefix.name
    try:
        state = json.loads((prefix / "conda-meta" / "state").read_text())
        env.update({str(k): str(v) for k, v in (state.get("env_vars") or {}).items()})
    except (OSError, ValueError):
        pass
    return env


def run_in_env(name: str, command: list[str]) -> int:
    from envkit import proc
    from envkit.errors import EnvkitError
    from envkit.locations import find_prefix

    prefix = find_prefix(name if "/" not in name else None, name if "/" in name else None)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise EnvkitError("no command given", f"envkit run {name} -- python -c 'import torch'")
    try:
        return proc.run_interactive(["bash", "-c", ACTIVATE, "envkit-run", *command], env=activated_env(prefix))
    except FileNotFoundError as exc:
        raise EnvkitError(f"cannot run {command[0]}: {exc}", "is bash installed?") from exc


def remove_env(prefix: Path) -> None:
    import shutil

    from envkit.errors import EnvNotFoundError

    if not (prefix / "conda-meta").is_dir():
        raise EnvNotFoundError(f"{prefix} is not an environment", "envkit list shows the environments")
    import os
    import secrets

    # atomic: the name is free at once; a leftover (deletion interrupted) is swept like a dead staging folder
    trash = prefix.parent / f".envkit-staging.{prefix.name}.{os.getpid()}.{secrets.token_hex(4)}"
    prefix.rename(trash)
    from envkit.condarc import unregister_env

    unregister_env(prefix)  # conda's environments.txt forgets it too (issue 12)
    shutil.rmtree(trash, ignore_errors=True)


def list_all() -> dict[str, Any]:
    import json

    from envkit.locations import META_DIR, list_envs
    from envkit.render import specs

    envs = []
    for prefix in list_envs():
        meta = prefix / META_DIR
        created: dict[str, Any] = {}
        verify: dict[str, Any] = {}
        try:
            created = json.loads((meta / "create.json").read_text())
        except (OSError, ValueError):
            pass
        try:
            verify = json.loads((meta / "verify.json").read_text())
        except (OSError, ValueError):
            pass
        sel = created.get("selection") or {}
        envs.append({
            "name": prefix.name, "prefix": str(prefix), "by_envkit": bool(created),
            "torch": sel.get("torch"), "cuda": sel.get("cuda"), "flavor": sel.get("flavor"),
            "created": created.get("created"),
            "verify": verify.get("outcome"), "verified": verify.get("time"),
        })
    spec_rows = []
    for name, path in sorted(specs.available().items()):
        try:
            description = specs.load(str(path)).description
        except Exception as exc:  # a broken user spec is listed, not fatal
            description = f"(invalid: {getattr(exc, 'message', exc)})"
        spec_rows.append({"name": name, "path": str(path), "description": description})
    return {"environments": envs, "specs": spec_rows}

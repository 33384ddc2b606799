"""Named environment specs (envs/*.yaml): what a team wants, not how one machine gets it.

Search order: --spec PATH, then $ENVKIT_SPEC_PATH folders, the user config dir
(~/.config/envkit/envs), then the packaged envs/. Specs are validated on load; errors name the
file, the line and the key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.config import user_spec_dir
from envkit.errors import SpecError
from envkit.render.envfile import CondaSpec, RenderError, check_pip_line, check_variables, parse_conda_spec
from envkit.resources import data_dir
from envkit.safeio import MAX_YAML_BYTES, loads_yaml, read_text

KEYS = {"description", "python", "torch", "conda", "pip", "variables", "flavor"}
# Keys refused with their own reason: a spec saying more than envkit does must fail, never be ignored (issue 20)
REFUSED = {"template": "a spec cannot choose the template: every env file is rendered from envkit's own "
                       "templates/environment.yml.j2 (the selection's channels and pins depend on it)"}
TORCH_FAMILY = {"torchvision", "torchaudio"}
# Packages the selection owns: a spec naming them would fight the per-machine choice.
SELECTION_OWNED = {"pytorch", "torch", "pytorch-cuda", "cudatoolkit", "cuda-version", "cpuonly",
                   "pytorch-mutex", "pytorch-gpu", "pytorch-cpu", "python", "torchvision", "torchaudio"}
_PY_RE = re.compile(r"^(3\.\d{1,2}|[<>=!~]=?\s*3\.\d{1,2}(\s*,\s*[<>=!~]=?\s*3\.\d{1,2})*)\Z", re.ASCII)


@dataclass(frozen=True)
class EnvSpec:
    name: str
    path: Path
    description: str
    python: str | None  # "3.11" or a range ">=3.10,<3.13"
    torch_extras: tuple[str, ...]  # torchvision / torchaudio
    conda: tuple[CondaSpec, ...]
    pip: tuple[str, ...]
    variables: tuple[tuple[str, str], ...]
    flavor: str | None


def search_path(extra: Path | None = None) -> list[Path]:
    dirs: list[Path] = []
    env = os.environ.get("ENVKIT_SPEC_PATH")
    if env:
        dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs.append(user_spec_dir())
    dirs.append(data_dir("envs"))
    return dirs


def available() -> dict[str, Path]:
    """name -> file of every spec envkit can find, the first in search order winning."""
    found: dict[str, Path] = {}
    for directory in search_path():
        if directory.is_dir():
            for path in sorted(directory.glob("*.yaml")):
                found.setdefault(path.stem, path)
    return found


DEFAULT_SPEC = "dl_train"  # what `envkit create NAME` builds when NAME is no spec's name
# how alike a name must be to a spec's to be taken for a typo of it (difflib's ratio): minmal, dl-train and
# Minimal are typos (0.92, 0.88, 1.0 lowercased); train, myproj and gpt2 are names (0.77 at most)
TYPO_CUTOFF = 0.8


def close_spec(name: str, specs: dict[str, Path] | None = None) -> str | None:
    """The spec `name` is most likely a typo of, or None (difflib, as git's "did you mean")."""
    import difflib

    names = sorted(available() if specs is None else specs)
    lowered = {n.lower().replace("-", "_"): n for n in names}
    found = difflib.get_close_matches(name.lower().replace("-", "_"), list(lowered), n=1, cutoff=TYPO_CUTOFF)
    return lowered[found[0]] if found else None


@dataclass(frozen=True)
class SpecChoice:
    """The spec an environment NAME given without --spec/--file gets, and whether NAME named it."""

    spec: str
    named: bool  # NAME is a spec's name; False: a new name, built from DEFAULT_SPEC


def spec_for_env(name: str, verb: str = "create") -> SpecChoice:
    """NAME is a spec: that spec; one typo away from a spec: a usage error before any work (a typo must not
    silently build dl_train under the typo's name); else a new name built from DEFAULT_SPEC."""
    from envkit.errors import UsageError

    specs = available()
    if name in specs:
        return SpecChoice(name, True)
    close = close_spec(name, specs)
    if close is not None:
        raise UsageError(f"no spec is named {name!r}: did you mean {close}?",
                         f"envkit {verb} {close}   (to keep the name {name}: envkit {verb} {name} --spec {close})")
    return SpecChoice(DEFAULT_SPEC, False)


def find(name_or_path: str) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        if not candidate.exists():
            raise SpecError(f"spec file {name_or_path} does not exist", "check the path given to --spec")
        return candidate  # anything else that is not a regular text file is refused by safeio, by name
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", name_or_path) or ".." in name_or_path:
        raise SpecError(f"invalid spec name {name_or_path!r}", "spec names are letters, digits, '.', '_' and '-'")
    specs = available()
    if name_or_path not in specs:
        close = close_spec(name_or_path, specs)
        raise SpecError(f"unknown environment spec {name_or_path!r}" + (f": did you mean {close}?" if close else "")
                        + f"; available: {', '.join(sorted(specs))}",
                        "pick one of those, or pass --spec PATH to your own YAML spec")
    return specs[name_or_path]


def _lines(path: Path, text: str) -> dict[str, int]:
    """Top-level key -> line number (1-based), from the YAML node tree."""
    import yaml

    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return {}
    out: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, _value in node.value:
            out[str(key.value)] = key.start_mark.line + 1
    return out


def load(name_or_path: str) -> EnvSpec:
    path = find(name_or_path)
    text = read_text(path, "spec", MAX_YAML_BYTES)
    raw = loads_yaml(text, path, "spec")
    lines = _lines(path, text)

    def where(key: str) -> str:
        return f"{path}:{lines.get(key, 1)}: key '{key}'"

    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise SpecError(f"{path}:1: a spec must be a mapping of keys ({', '.join(sorted(KEYS))})",
                        "see envs/dl_train.yaml for the format")
    refused = sorted(set(map(str, raw)) & set(REFUSED))
    if refused:
        raise SpecError(f"{where(refused[0])}: not supported: {REFUSED[refused[0]]}",
                        f"remove '{refused[0]}:' from {path}; to change the env file itself, render it "
                        f"(envkit render --spec {path} -o environment.yml), edit it, and create from it "
                        "with --file environment.yml")
    unknown = sorted(set(map(str, raw)) - KEYS)
    if unknown:
        raise SpecError(f"{where(unknown[0])}: unknown key (allowed: {', '.join(sorted(KEYS))})",
                        f"remove or rename '{unknown[0]}' in {path}")
    try:
        return _build(path, raw, where)
    except RenderError as exc:
        raise SpecError(exc.message, exc.hint) from exc


def _list(raw: dict[str, Any], key: str, where: Callable[[str], str]) -> list[Any]:
    value = raw.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(f"{where(key)}: must be a list", f"write '{key}:' followed by '- item' lines")
    return value


def _build(path: Path, raw: dict[str, Any], where: Callable[[str], str]) -> EnvSpec:
    python = raw.get("python")
    if python is not None:
        python = str(python).strip()
        if not _PY_RE.match(python):
            raise SpecError(f"{where('python')}: {python!r} is not a Python version or range",
                            "use e.g. \"3.11\" or \">=3.10,<3.13\" (quoted)")
    extras = []
    for item in _list(raw, "torch", where):
        if not isinstance(item, str) or item not in TORCH_FAMILY:
            raise SpecError(f"{where('torch')}: {item!r} is not a torch-family package",
                            f"allowed: {', '.join(sorted(TORCH_FAMILY))} (torch itself is always included)")
        extras.append(item)
    conda: list[CondaSpec] = []
    seen: dict[str, CondaSpec] = {}
    for item in _list(raw, "conda", where):
        spec = parse_conda_spec(item, where("conda"))
        if spec.name in SELECTION_OWNED:
            raise SpecError(f"{where('conda')}: {spec.name} is chosen per machine by envkit, not by the spec",
                            "remove it; use the 'python' and 'torch' keys, or --torch/--python on the command line")
        if spec.build:
            raise SpecError(f"{where('conda')}: {item!r} pins a build string, which is machine-specific",
                            "pin a version only (name=version)")
        prior = seen.get(spec.name)
        if prior is not None and prior.version != spec.version:
            raise SpecError(f"{where('conda')}: conflicting pins for {spec.name}: "
                            f"{prior.render()} and {spec.render()}", "keep one pin per package")
        if prior is None:
            seen[spec.name] = spec
            conda.append(spec)
    pip: list[str] = []
    pip_names: dict[str, str] = {}
    for item in _list(raw, "pip", where):
        line = check_pip_line(item, where("pip"))
        if line.startswith("-"):
            raise SpecError(f"{where('pip')}: index options belong to mirror profiles, not specs",
                            "remove the line; use --mirror for PyPI mirrors")
        from packaging.requirements import Requirement

        req_name = Requirement(line).name.lower().replace("_", "-") if not line.startswith(("git+", "http")) else line
        if req_name in ("torch", "torchvision", "torchaudio"):
            raise SpecError(f"{where('pip')}: {req_name} is chosen per machine by envkit",
                            "remove it; use the 'torch' key or --flavor pip")
        if req_name in pip_names and pip_names[req_name] != line:
            raise SpecError(f"{where('pip')}: conflicting pins for {req_name}: {pip_names[req_name]} and {line}",
                            "keep one pin per package")
        if req_name not in pip_names:
            pip_names[req_name] = line
            pip.append(line)
    flavor = raw.get("flavor")
    if flavor is not None and flavor not in ("conda-forge", "pytorch", "pip"):
        raise SpecError(f"{where('flavor')}: unknown flavor {flavor!r}", "use conda-forge, pytorch or pip")
    description = raw.get("description") or ""
    if not isinstance(description, str):
        raise SpecError(f"{where('description')}: must be a string", "write one line of text")
    return EnvSpec(
        name=path.stem, path=path, description=description.strip(), python=python,
        torch_extras=tuple(extras), conda=tuple(conda), pip=tuple(pip),
        variables=check_variables(raw.get("variables"), where("variables")),
        flavor=flavor,
    )


def list_rows() -> list[dict[str, Any]]:
    """`envkit list`: every spec available (name, file, description); a broken user spec is listed, not fatal."""
    rows = []
    for name, path in sorted(available().items()):
        try:
            description = load(str(path)).description
        except Exception as exc:  # a broken user spec is listed, not fatal
            description = f"(invalid: {getattr(exc, 'message', exc)})"
        rows.append({"name": name, "path": str(path), "description": description})
    return rows

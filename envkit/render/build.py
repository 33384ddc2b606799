"""Spec + Selection (+ mirror) -> EnvFile: the per-machine environment.yml of a named spec."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envkit import __version__
from envkit.compat.select import pip_local
from envkit.models import Machine, Selection
from envkit.render.envfile import EnvFile
from envkit.render.mirrors import Mirror, apply_channels
from envkit.render.specs import EnvSpec

PYTHON_PREFERENCE = ("3.12", "3.11", "3.13", "3.10", "3.14", "3.9", "3.8")


def python_candidates(spec_python: str | None, cli_python: str | None) -> list[str | None]:
    """What to ask select() for: the CLI's python, the spec's exact one, or each in a spec's range."""
    if cli_python:
        return [cli_python]
    if not spec_python:
        return [None]
    if spec_python[0].isdigit():
        return [spec_python]
    allowed = SpecifierSet(spec_python.replace(" ", ""))
    return [p for p in PYTHON_PREFERENCE if Version(p) in allowed]


def torch_lines(spec: EnvSpec, sel: Selection) -> tuple[list[str], list[str], list[str]]:
    """(conda deps, pip lines, notes) for torch and the torch-family extras the spec wants."""
    notes: list[str] = []
    conda = [s for s in sel.specs if not s.startswith("python=")]
    pip: list[str] = list(sel.pip_specs)
    versions = {"torchvision": sel.torchvision, "torchaudio": sel.torchaudio}
    for extra in spec.torch_extras:
        version = versions[extra]
        if version is None:
            notes.append(f"{extra} skipped: torch {sel.torch} has no {extra} release (maintenance mode)")
            continue
        if sel.flavor == "pip":
            pip.append(f"{extra}=={pip_local(version, sel.variant)}")
        else:
            conda.append(f"{extra}={version}")
    return conda, pip, notes


def build_envfile(spec: EnvSpec, sel: Selection, machine: Machine, *, name: str,
                  mirror: Mirror | None = None) -> EnvFile:
    torch_conda, torch_pip, notes = torch_lines(spec, sel)
    deps = [f"python={sel.python}", *torch_conda]
    spec_conda = [c.render() for c in spec.conda]
    needs_pip = bool(spec.pip or torch_pip)
    if needs_pip and not any(c.name == "pip" for c in spec.conda) and "pip" not in deps:
        deps.append("pip")
    deps += [c for c in spec_conda if c not in deps]
    channels = sel.channels
    pip: list[str] = []
    if mirror is not None:
        channels = apply_channels(channels, mirror)
        if needs_pip and mirror.pypi:
            pip.append(f"--index-url {mirror.pypi}")
    if torch_pip and sel.pip_index_url:  # torch <= 1.10 wheels: a find-links page (torch_stable.html)
        pip.append(f"{'-f' if sel.pip_index_url.endswith('.html') else '--extra-index-url'} {sel.pip_index_url}")
    pip += torch_pip + list(spec.pip)
    header = [
        f"Rendered by envkit {__version__} from spec '{spec.name}'. Re-render on each machine;",
        "the torch lines are specific to the machine below.",
        f"machine: {machine.describe()}",
        f"selection: torch {sel.torch}, " + (f"CUDA {sel.cuda} ({sel.variant})" if sel.cuda else "CPU only")
        + f", python {sel.python}, flavor {sel.flavor}",
        "why:",
        *[f"  - {r}" for r in sel.reasons],
        *[f"  - {n}" for n in notes],
    ]
    if mirror is not None:
        header.append(f"mirror: {mirror.name} ({mirror.title})")
        if mirror.credentials_stripped:
            header.append("mirror credentials were not written here: configure them with `conda config` / pip config")
    return EnvFile(name=name, channels=tuple(channels), dependencies=tuple(deps), pip=tuple(pip),
                   variables=spec.variables, header=tuple(header))

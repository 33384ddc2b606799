"""`envkit render --from FILE`: adapt a colleague's environment.yml (or raw `conda env export`
output) to this machine. Everything CUDA-specific is replaced by this machine's selection; build
strings and `prefix:` are dropped; everything else is kept; every change is reported."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from envkit.errors import RenderError
from envkit.models import Machine, Request, Selection
from envkit.render.envfile import EnvFile, check_channel, check_pip_line, check_variables, load_yaml_file, parse_conda_spec
from envkit.render.mirrors import Mirror, apply_channels, canonical_channel

# Packages whose only job is to pick a CUDA (or CPU) variant of torch: replaced by the selection.
CUDA_SPECIFIC = {"pytorch-cuda", "cudatoolkit", "cuda-version", "cpuonly", "pytorch-mutex", "pytorch-gpu",
                 "pytorch-cpu", "cudatoolkit-dev"}
# CUDA runtime libraries that the selection brings in its own versions (NVIDIA's conda packages and
# their conda-forge twins). From an export (with build strings) they are transitive: removed. Asked
# for by hand (no build string): kept, unpinned, so the selection's cuda-version decides.
_CUDA_LIB_RE = re.compile(r"^(cuda-[a-z0-9-]+|libcu[a-z0-9-]+|libnpp[a-z0-9-]*|libnvjpeg[a-z0-9-]*|"
                          r"libnvjitlink[a-z0-9-]*|cudnn|libcudnn[a-z0-9-]*|nccl|libnccl[a-z0-9-]*|cutensor)$")
TORCH_CONDA = {"pytorch", "torchvision", "torchaudio"}
TORCH_PIP = {"torch", "torchvision", "torchaudio"}
CUDA_CHANNELS = {"pytorch", "nvidia"}  # they only served the CUDA torch stack
_PYTORCH_INDEX_RE = re.compile(r"download\.pytorch\.org")
_CU_LOCAL_RE = re.compile(r"\+(cu\d+|cpu|rocm[\d.]+)$")


@dataclass(frozen=True)
class Parsed:
    """What the old file asked for, before adaptation."""

    name: str | None
    channels: tuple[str, ...]
    conda: tuple[str, ...]  # raw dependency strings
    pip: tuple[str, ...]
    variables: tuple[tuple[str, str], ...]
    torch_version: str | None
    python: str | None
    torch_from_pip: bool
    had_prefix: str | None


def parse_file(path: Path) -> Parsed:
    raw = load_yaml_file(path)
    if not isinstance(raw, dict):
        raise RenderError(f"{path}: not an environment.yml (expected a mapping with name/channels/dependencies)",
                          "pass a conda environment file")
    deps = raw.get("dependencies") or []
    if not isinstance(deps, list):
        raise RenderError(f"{path}: 'dependencies' must be a list", "fix the file")
    conda: list[str] = []
    pip: list[str] = []
    for item in deps:
        if isinstance(item, dict) and "pip" in item:
            if not isinstance(item["pip"], list):
                raise RenderError(f"{path}: the pip section must be a list", "fix the file")
            pip += [str(p) for p in item["pip"]]
        elif isinstance(item, (str, int, float)):
            conda.append(str(item))
        else:
            raise RenderError(f"{path}: unsupported dependency entry {item!r}", "use strings and one pip: section")
    channels = raw.get("channels") or []
    if not isinstance(channels, list):
        raise RenderError(f"{path}: 'channels' must be a list", "fix the file")
    torch_version = python = None
    torch_from_pip = False
    for dep in conda:
        spec = parse_conda_spec(dep, f"{path}: dependencies")
        if spec.name == "pytorch" and spec.exact_version:
            torch_version = spec.exact_version
        if spec.name == "python" and spec.exact_version:
            python = ".".join(spec.exact_version.split(".")[:2])
    for line in pip:
        if line.strip().startswith("-"):
            continue
        match = re.match(r"^torch\s*==\s*([0-9][0-9.]*)", line.strip())
        if match:
            torch_from_pip = True
            torch_version = torch_version or match.group(1)
    prefix = raw.get("prefix")
    return Parsed(name=raw.get("name"), channels=tuple(str(c) for c in channels), conda=tuple(conda),
                  pip=tuple(pip), variables=check_variables(raw.get("variables"), f"{path}: variables"),
                  torch_version=torch_version, python=python, torch_from_pip=torch_from_pip,
                  had_prefix=str(prefix) if prefix else None)


def request_from(parsed: Parsed, request: Request, flavor_given: bool) -> Request:
    """The colleague's torch and python carry over unless the command line says otherwise."""
    torch = request.torch or (".".join(parsed.torch_version.split(".")[:3]) if parsed.torch_version else None)
    if torch and request.torch is None:
        torch = ".".join(torch.split(".")[:2])  # same minor release; the patch follows the data
    flavor = request.flavor if flavor_given else ("pip" if parsed.torch_from_pip else "conda-forge")
    return Request(cuda=request.cuda, torch=torch, python=request.python or parsed.python, flavor=flavor,
                   no_driver_check=request.no_driver_check)


def adapt(parsed: Parsed, sel: Selection, machine: Machine, *, name: str | None, mirror: Mirror | None,
          source: str, extra_changes: list[str] | None = None) -> tuple[EnvFile, list[str]]:
    changes: list[str] = list(extra_changes or [])
    if parsed.had_prefix:
        changes.append(f"dropped prefix: {parsed.had_prefix}")
    kept: list[str] = []
    torch_wanted: set[str] = set()
    for dep in parsed.conda:
        spec = parse_conda_spec(dep, f"{source}: dependencies")
        if spec.name in CUDA_SPECIFIC:
            changes.append(f"removed {dep} (CUDA-specific: replaced by this machine's selection)")
            continue
        if spec.name in TORCH_CONDA:
            torch_wanted.add(spec.name)
            changes.append(f"replaced {dep} (torch family: from the selection)")
            continue
        if spec.name == "python":
            if dep != f"python={sel.python}":
                changes.append(f"replaced {dep} with python={sel.python}")
            continue
        if spec.channel in CUDA_CHANNELS:
            changes.append(f"dropped the {spec.channel}:: prefix of {dep}")
            spec = type(spec)(spec.name, spec.version, spec.build, "")
        if _CUDA_LIB_RE.match(spec.name):
            if spec.build:
                changes.append(f"removed {dep} (CUDA runtime library of the old machine; the selection brings its own)")
                continue
            if spec.version:
                changes.append(f"unpinned {dep} -> {spec.name} (its CUDA version follows the selection)")
                spec = type(spec)(spec.name, "", "", spec.channel)
        if spec.build:
            changes.append(f"dropped the build string of {dep}")
        text = spec.render(with_build=False)
        if text not in kept:
            kept.append(text)
    pip_kept: list[str] = []
    for line in parsed.pip:
        stripped = line.strip()
        if stripped.startswith("-") and _PYTORCH_INDEX_RE.search(stripped):
            changes.append(f"removed pip line {stripped} (PyTorch index of the old machine)")
            continue
        if stripped.startswith(("--index-url", "-i ")) and mirror is not None:
            changes.append(f"replaced pip line {stripped} with the mirror's index")
            continue
        name_match = re.match(r"^([A-Za-z0-9_.\-]+)", stripped)
        pkg = name_match.group(1).lower() if name_match and not stripped.startswith("-") else ""
        if pkg in TORCH_PIP:
            torch_wanted.add("pytorch" if pkg == "torch" else pkg)
            changes.append(f"replaced pip {stripped} (torch family: from the selection)")
            continue
        if _CU_LOCAL_RE.search(stripped):
            changes.append(f"kept {stripped}: its +cu/+cpu local version may need the old index")
        pip_kept.append(check_pip_line(stripped, f"{source}: pip"))
    # channels: drop those that only served CUDA torch, map mirror URLs back, then the selection's
    channels: list[str] = []
    for ch in sel.channels:
        if ch not in channels:
            channels.append(ch)
    for ch in parsed.channels:
        canon = canonical_channel(ch)
        if canon in CUDA_CHANNELS and canon not in sel.channels:
            changes.append(f"removed channel {ch} (it only served the CUDA torch stack)")
            continue
        if canon != ch:
            changes.append(f"channel {ch} -> {canon}")
        if canon == "nodefaults":
            changes.append("removed channel nodefaults (conda 26.7 fetches it as a channel and fails)")
            continue
        if canon not in channels:
            channels.append(check_channel(canon, f"{source}: channels"))
    if mirror is not None:
        channels = list(apply_channels(tuple(channels), mirror))
        changes.append(f"channels written as {mirror.name} mirror URLs")
    from envkit.render.build import torch_lines
    from envkit.render.specs import EnvSpec

    extras = tuple(sorted(x for x in torch_wanted if x in ("torchvision", "torchaudio")))
    shim = EnvSpec("adapted", Path(source), "", None, extras, (), (), (), None, None)
    torch_conda, torch_pip, notes = torch_lines(shim, sel)
    deps = [f"python={sel.python}", *torch_conda, *[k for k in kept if k not in torch_conda]]
    pip: list[str] = []
    if (torch_pip or pip_kept) and mirror is not None and mirror.pypi:
        pip.append(f"--index-url {mirror.pypi}")
    if torch_pip and sel.pip_index_url:
        pip.append(f"--extra-index-url {sel.pip_index_url}")
    pip += torch_pip + [p for p in pip_kept if p not in pip]
    if pip and not any(d == "pip" or d.startswith(("pip=", "pip>", "pip<")) for d in deps):
        deps.append("pip")
    added = ", ".join(torch_conda + torch_pip)
    changes.append(f"added this machine's selection: {added}")
    changes += notes
    env_name = name or parsed.name or Path(source).stem
    if "/" in str(env_name):
        changes.append(f"name {env_name} was a path (conda env export -p); using {Path(env_name).name}")
        env_name = Path(env_name).name
    header = [
        f"Adapted by envkit from {Path(source).name} for: {machine.describe()}",
        f"selection: torch {sel.torch}, " + (f"CUDA {sel.cuda} ({sel.variant})" if sel.cuda else "CPU only")
        + f", python {sel.python}, flavor {sel.flavor}",
        "changes:",
        *[f"  - {c}" for c in changes],
    ]
    return EnvFile(env_name, tuple(channels), tuple(deps), tuple(pip), parsed.variables, tuple(header)), changes

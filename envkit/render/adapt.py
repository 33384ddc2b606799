"""`envkit render --from FILE`: adapt a colleague's environment.yml (or raw `conda env export`
output) to this machine.

What conda's environment.yml accepts, this accepts (every MatchSpec form, label and URL channels,
`variables:`, a pip section that is a full requirements file, bare local paths included). Only what
envkit/compat/owned.yaml owns changes (the torch stack, the old machine's CUDA runtime by exact name,
PyTorch index lines), and only when the file has torch: its torch, and the CUDA its wheels were built
for, are kept where they run here. Packages built against one torch or CUDA (owned.yaml `coupled`)
bind the plan: kept, moved by a sourced table (triton, PyG pages), or the adaptation stops naming
them. The file's python and CUDA ranges bind the selection. Everything else passes through by name,
version and channel; build strings go (they name the old machine) except that a CUDA build stays a
CUDA build (`*cuda*`). Every change is reported as `old -> new (why)`; relative pip paths are made
absolute against the file's folder, where conda runs pip (conda/env/installers/pip.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envkit.compat import legacy, owned
from envkit.compat.select import parse_torch_spec, pip_local
from envkit.errors import InputError, RenderError, UsageError
from envkit.models import Machine, Request, Selection
from envkit.prefix.locations import check_name
from envkit.render.envfile import (CondaSpec, EnvFile, PipLine, check_channel, check_variables, load_yaml_file,
                                   parse_conda_spec, parse_pip_line)
from envkit.render.mirrors import Mirror, apply_channels, canonical_channel
from envkit.safeio import read_bytes, read_text

# Packages whose only job is to pick a CUDA (or CPU) variant of torch: the selection writes its own.
CUDA_SPECIFIC = {"pytorch-cuda", "cudatoolkit", "cuda-version", "cpuonly", "pytorch-mutex"}
# What the pytorch channel's pytorch pulls in by itself (its triton build): the selection's pytorch brings its own.
TORCH_TRANSITIVE = {"torchtriton"}
# A build string that only says "a CUDA build" (conda-forge's cuda* / *cuda* / cuda120*): kept, not a machine's build.
_CUDA_SELECTOR_RE = re.compile(r"^\*?(cuda|gpu)[0-9]*\*$")
# conda-forge metapackages that stand for pytorch itself (pytorch-gpu = pytorch=*=cuda*)
TORCH_ALIASES = {"pytorch-gpu", "pytorch-cpu"}
TORCH_CONDA = {"pytorch", "torchvision", "torchaudio"}
TORCH_PIP = {"torch", "torchvision", "torchaudio"}
# CUDA runtime libraries (NVIDIA's conda packages and their conda-forge twins), by exact name from
# envkit/compat/owned.yaml (a pattern such as libcu* would catch libcups and libcurl): kept, unpinned,
# so the selection's CUDA line decides their version.
# Frameworks other than torch that use the file's CUDA runtime (owned.yaml `coupled`, kind cuda): a
# cudatoolkit/cuda-version line they need stays, and its range binds the selection's CUDA.
CUDA_CONSUMERS = {"tensorflow", "tensorflow-gpu", "jax", "jaxlib", "cupy", "cupy-cuda11x", "cupy-cuda12x",
                  "cupy-cuda13x"}
CUDA_CHANNELS = {"pytorch", "nvidia"}  # they only served the CUDA torch stack
# Packages that exist only for Windows or macOS (conda-forge/defaults feedstocks of these names build
# no linux-64 package): a `conda env export` from those systems lists them; Linux cannot install them.
PLATFORM_ONLY = re.compile(r"^(vc|vc14_runtime|vs2015_runtime|vs2017_runtime|ucrt|m2w64-.*|msys2-conda-epoch|"
                           r"wincertstore|pywin32|pywin32-ctypes|pywinpty|winpty|win_inet_pton|menuinst|"
                           r"appnope|pyobjc-.*|libcxxabi|cctools.*|ld64.*|clang_osx-64|gfortran_osx-64)$")
_PYTORCH_URL_RE = re.compile(r"download\.pytorch\.org")
_CU_TAG_RE = re.compile(r"(?<![A-Za-z0-9])cu(\d{2,3})(?![0-9])")
# +ptXYcuNNN: a wheel built for torch X.Y and CUDA NN.N (PyG, owned.yaml pyg_readme)
_PT_LOCAL_RE = re.compile(r"\+pt(\d)(\d{1,2})(cu\d{2,3}|cpu)\b")
# data.pyg.org/whl/torch-X.Y.Z+cuNNN.html (owned.yaml pyg_readme)
# Dao-AILab/flash-attention's release wheels name the CUDA and torch they were built for in the local version:
# flash_attn-2.4.1+cu118torch2.1cxx11abiFALSE-cp310-cp310-linux_x86_64.whl (github.com/Dao-AILab/flash-attention
# releases; setup.py get_wheel_url builds the name as +cu{major}{minor}torch{torch_major}.{torch_minor}cxx11abi{ABI})
_FA_LOCAL_RE = re.compile(r"\+cu(\d{2,3})torch(\d+)\.(\d+)cxx11abi(?:TRUE|FALSE)\b")
# a wheel's python and platform tags (PEP 427 file name: {dist}-{version}(-{build})?-{python}-{abi}-{platform}.whl)
_WHEEL_TAGS_RE = re.compile(r"-(cp3\d+)-(?:cp3\d+m?|abi3|none)-([A-Za-z0-9_.]+)\.whl$")
_PYG_PAGE_RE = re.compile(r"data\.pyg\.org/whl/torch-(\d+\.\d+)(?:\.\d+)?\+(cu\d{2,3}|cpu)\.html")
# a build string that marks a CUDA (or GPU) variant of a package that is not torch: mmcv, dgl, tensorflow
_CUDA_BUILD_RE = re.compile(r"cuda|(?<![a-z])gpu(?![a-z])")
_LOCAL_RE = re.compile(r"\+(cu\d+|cpu|rocm[\d.]+)$")


@dataclass(frozen=True)
class Parsed:
    """What the old file asked for, before adaptation."""

    name: Any  # as written (may be missing, 'base', a path, not a string)
    channels: tuple[str, ...]
    conda: tuple[str, ...]  # as written
    specs: tuple[CondaSpec, ...]  # the same, parsed
    pip: tuple[str, ...]  # normalised requirements-file lines
    pip_lines: tuple[PipLine, ...]  # the same, parsed
    variables: tuple[tuple[str, str], ...]
    torch: str | None  # the file's torch pin: '1.12.1', '1.12', '>=1.7,<2' (None: no pin or no torch)
    python: str | None
    torch_from_pip: bool
    has_torch: bool
    uses_pytorch_channel: bool
    had_prefix: str | None
    folder: Path
    ignored_keys: tuple[str, ...] = ()
    path: Path | None = None  # the file itself (errors name it and the line)
    python_range: str | None = None  # a python constraint that is not one version: '>=3.13', '>3.6,<3.9'
    cuda_consumers: tuple[str, ...] = ()  # tensorflow, jax, cupy...: other users of the file's CUDA runtime
    cuda_range: str | None = None  # what those consumers need of CUDA (a PEP 440 range), from cudatoolkit/cuda-version
    wheel_cuda: str | None = None  # the CUDA of the file's +cuNNN / +ptXYcuNNN wheels and pages ('11.8')
    coupled_torch: str | None = None  # the torch minor the file's coupled pins were built for ('2.2')
    torch_cpu: bool = False  # the file's torch is a CPU build on purpose (pytorch-cpu, cpuonly, a cpu build string)
    from_requirements: str = ""  # 'pip': a requirements file (python, pip, its lines); 'conda': conda list --export
    torch_cuda: str | None = None  # the CUDA of the file's conda torch (pytorch-cuda=11.6, a cuda11.6 build, cudatoolkit)

    def where(self, text: str) -> str:
        """'FILE line N' for the first line of the file holding `text` (as written)."""
        if self.path is None:
            return "the file"
        try:
            lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return str(self.path)
        needle = text.strip()
        for number, line in enumerate(lines, 1):
            if needle and needle in line:
                return f"{self.path.name} line {number}"
        return self.path.name


def _version_text(spec: CondaSpec) -> str | None:
    """A conda version constraint as a --torch value: '=1.12' -> '1.12', '>=1.7' as is, conda's
    wildcard '2.*' -> '==2.*' (every 2.x: conda's MatchSpec, "version" glob), '2.1.*' -> '2.1'."""
    v = spec.version.strip()
    if not v or v in ("*", "=*"):
        return None
    wild = re.fullmatch(r"=?=?([0-9]+)\.?\*", v)
    if wild:
        return f"=={wild.group(1)}.*"
    if v.startswith("==") or (v.startswith("=") and not v.startswith("==")):
        v = v.lstrip("=")
    v = v.rstrip("*").rstrip(".")
    if re.fullmatch(r"[0-9]+(\.[0-9]+)*", v):
        return v
    if re.fullmatch(r"[0-9]+(\.[0-9]+)*\.?(dev|a|b|rc|post)[0-9]+", v):
        return v  # a nightly (pytorch-nightly's 2.6.0.dev20241112): kept as written, so it is named, never replaced
    return v if re.fullmatch(r"[<>=!~0-9.,*]+", v) and "*" not in v else None


def _pip_version_text(line: PipLine) -> str | None:
    from packaging.requirements import Requirement

    try:
        req = Requirement(line.arg)
    except Exception:  # a URL requirement: no version to carry
        return None
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "==="):
        return _LOCAL_RE.sub("", specs[0].version).rstrip(".*")
    text = str(req.specifier)
    return text or None



def _requirements_as_env(path: Path) -> dict[str, Any]:
    """A pip requirements file as the environment conda would make of it in a pip section: pip, then the file's
    lines as pip reads them (pip/_internal/req/req_file.py: `#` comments, a trailing backslash joins lines)."""
    text = read_text(path, "requirements file")  # pip's auto_decode: a UTF-8 BOM (tabbyAPI's files) is not a line
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        if pending:
            raw = pending + " " + raw.lstrip()
            pending = ""
        if raw.rstrip().endswith("\\"):
            pending = raw.rstrip()[:-1].rstrip()
            continue
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        lines.append(line)
    if pending.strip():
        lines.append(pending.strip())
    conda_list = re.compile(r"^[A-Za-z0-9_.\-]+=[^=\s]+=[^=\s]+$")
    if "conda create --name <env> --file" in text or (lines and sum(map(bool, map(conda_list.match, lines)))
                                                      >= 0.8 * len(lines)):
        # `conda list --export` output (name=version=build, conda's own --file format), not pip's; its pypi_0
        # lines were installed by pip (conda/core/prefix_data.py marks them so) and no channel has them
        conda = [line for line in lines if not line.endswith("=pypi_0")]
        pip = [re.sub(r"^([^=]+)=([^=]+)=pypi_0$", r"\1==\2", line) for line in lines if line.endswith("=pypi_0")]
        return {"dependencies": conda + ([{"pip": pip}] if pip else []), "__conda_list__": True}
    return {"dependencies": ["pip", {"pip": lines}]}


def parse_file(path: Path) -> Parsed:
    try:
        raw = load_yaml_file(path)
    except InputError as exc:
        if path.suffix.lower() != ".txt" or "YAML" not in exc.message:
            raise
        raw = None  # a pip requirements file (`--index-url ...`, `pkg==1; marker`) is rarely valid YAML
    from_requirements = path.suffix.lower() == ".txt" and not isinstance(raw, dict)
    conda_list = False
    if from_requirements:
        raw = _requirements_as_env(path)
        conda_list = bool(raw.pop("__conda_list__", False))
    if not isinstance(raw, dict):
        raise RenderError(f"{path}: not an environment.yml (expected a mapping with name/channels/dependencies)",
                          "pass a conda environment file")
    deps = raw.get("dependencies") or []
    if not isinstance(deps, list):
        raise RenderError(f"{path}: 'dependencies' must be a list", "fix the file")
    conda: list[tuple[str, CondaSpec]] = []
    pip: list[PipLine] = []
    for item in deps:
        if item is None:
            continue
        if isinstance(item, dict) and "pip" in item and len(item) == 1:
            if item["pip"] is None:
                continue
            if not isinstance(item["pip"], list):
                raise RenderError(f"{path}: the pip section must be a list", "fix the file")
            pip += [parse_pip_line(p, f"{path}: pip") for p in item["pip"] if p is not None]
        elif isinstance(item, (str, int, float)) and not isinstance(item, bool):
            conda.append((str(item), parse_conda_spec(item, f"{path}: dependencies")))
        else:
            raise RenderError(f"{path}: unsupported dependency entry {item!r} (conda takes strings and one "
                              "`pip:` list)", "use strings and one pip: section")
    _check_repeated_pins(conda, path)
    channels = raw.get("channels") or []
    if not isinstance(channels, list):
        raise RenderError(f"{path}: 'channels' must be a list", "fix the file")
    torch = python = python_range = None
    from_pip = has_torch = False
    uses_pytorch = any(str(c).rstrip("/").endswith("pytorch") for c in channels)
    consumers: list[str] = []
    cuda_pins: list[CondaSpec] = []
    for _raw, spec in conda:
        if spec.name in ("pytorch", *TORCH_ALIASES):
            has_torch = True
            torch = torch or _version_text(spec)
        elif spec.name in TORCH_CONDA or spec.name in ("pytorch-cuda", "cpuonly"):
            has_torch = True
        if spec.name == "python" and spec.exact_version:
            python = ".".join(spec.exact_version.split(".")[:2])
        elif spec.name == "python" and spec.version.strip():
            python_range = spec.version.strip()
        if spec.channel.split("/")[0] == "pytorch":
            uses_pytorch = True
        if owned.normalise(spec.name) in CUDA_CONSUMERS and spec.name not in consumers:
            consumers.append(spec.name)
        if spec.name in ("cudatoolkit", "cuda-version") and spec.version.strip():
            cuda_pins.append(spec)
    for line in pip:
        if line.name.lower() in TORCH_PIP and not line.option:
            has_torch = True
            if line.name.lower() == "torch":
                from_pip = True
                torch = torch or _pip_version_text(line)
        if not line.option and owned.normalise(line.name) in CUDA_CONSUMERS and _wants_cuda(line) \
                and line.name not in consumers:
            consumers.append(line.name)
    if not has_torch:
        # `- -r requirements.txt` holding torch is a common shape: pip installs it, so it is the file's torch
        # (pinned or not: an unpinned torch from PyPI is a CUDA build this driver may not run)
        nested = _nested_pins(tuple(pip), path.resolve().parent)
        if "torch" in nested:
            has_torch = from_pip = True
            torch = nested["torch"] or None
    prefix = raw.get("prefix")
    name = raw.get("name")
    ignored = tuple(sorted(str(k) for k in raw if k not in ("name", "channels", "dependencies", "variables",
                                                              "prefix")))
    return Parsed(name=name, channels=tuple(str(c) for c in channels if c is not None),
                  conda=tuple(r for r, _ in conda), specs=tuple(s for _, s in conda),
                  pip=tuple(line.text for line in pip), pip_lines=tuple(pip),
                  variables=check_variables(raw.get("variables"), f"{path}: variables"), torch=torch,
                  python=python, torch_from_pip=from_pip, has_torch=has_torch, uses_pytorch_channel=uses_pytorch,
                  had_prefix=str(prefix) if prefix else None, folder=path.resolve().parent, ignored_keys=ignored,
                  path=path, python_range=python_range or (None if python else _wheel_pythons(pip)),
                  cuda_consumers=tuple(consumers),
                  cuda_range=_cuda_range(cuda_pins) if consumers else None,
                  wheel_cuda=_wheel_cuda(pip, path.resolve().parent), coupled_torch=_coupled_torch(pip),
                  torch_cuda=_torch_cuda([s for _, s in conda]) if has_torch and not from_pip else None,
                  from_requirements="conda" if conda_list else ("pip" if from_requirements else ""),
                  torch_cpu=_cpu_torch([s for _, s in conda]))


def _check_repeated_pins(conda: list[tuple[str, CondaSpec]], path: Path) -> None:
    """One package pinned twice to versions that exclude each other (python=3.9 in a hand-written head over a
    `conda env export` body that says python=3.8.20): conda merges the two MatchSpecs of one name and fails
    (conda/models/match_spec.py merge: "Incompatible component merge"), so no edit could honour the file."""
    seen: dict[str, tuple[str, str]] = {}
    for raw, spec in conda:
        version = spec.exact_version
        if version is None or spec.channel.split("/")[0] == "pytorch-nightly":
            continue
        if spec.name in seen:
            other_raw, other = seen[spec.name]
            a, b = other.split("."), version.split(".")
            n = min(len(a), len(b))
            if a[:n] != b[:n]:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
                def where(text: str) -> str:
                    exact = (i for i, line in enumerate(lines, 1) if line.strip().lstrip("-").strip() == text.strip())
                    loose = (i for i, line in enumerate(lines, 1)
                             if text.strip() in line and not line.lstrip().startswith("#"))
                    found = next(exact, None) or next(loose, None)
                    return f"line {found}" if found else "the file"
                raise RenderError(
                    f"{path}: {spec.name} is pinned twice, to versions that exclude each other: {other_raw.strip()} "
                    f"({where(other_raw)}) and {raw.strip()} ({where(raw)}); conda cannot satisfy both",
                    "keep the one line you mean and pass the file again (a hand-written list above a `conda env "
                    "export` is the usual cause)")
        else:
            seen[spec.name] = (raw, version)


def _cpu_torch(specs: list[CondaSpec]) -> bool:
    """The file asks for a CPU torch by name: conda-forge's pytorch-cpu, the pytorch channel's cpuonly, or a
    pytorch build string that says cpu (compat/builds.is_cpu_build)."""
    from envkit.compat.builds import is_cpu_build

    return any(s.name in ("pytorch-cpu", "cpuonly") or (s.name == "pytorch" and s.build and is_cpu_build(s.build))
               for s in specs)


def _torch_cuda(specs: list[CondaSpec]) -> str | None:
    """The CUDA the file's conda torch was built for, first found of: pytorch-cuda=X.Y, a CUDA build string of
    pytorch (py3.7_cuda11.6_cudnn8.3.2_0, cuda118py38h...: compat/builds.cuda_of_build), cudatoolkit=X.Y
    (the pytorch channel's torch of the cudatoolkit era used it), cuda-version=X.Y."""
    from envkit.compat.builds import UNKNOWN, cuda_of_build

    def major_minor(version: str | None) -> str | None:
        match = re.match(r"([0-9]+)\.([0-9]+)", version or "")
        return f"{match.group(1)}.{match.group(2)}" if match else None

    by_name = {s.name: s for s in specs}
    order = [major_minor(by_name["pytorch-cuda"].exact_version) if "pytorch-cuda" in by_name else None,
             cuda_of_build(by_name["pytorch"].build) if "pytorch" in by_name and by_name["pytorch"].build else None,
             *(major_minor(by_name[n].exact_version) for n in ("cudatoolkit", "cuda-version") if n in by_name)]
    return next((c for c in order if c and c != UNKNOWN), None)


def _wants_cuda(line: PipLine) -> bool:
    """A pip line of tensorflow/jax/cupy that uses a CUDA runtime: jax[cuda12], tensorflow[and-cuda],
    cupy-cuda11x; jax[cuda12] brings NVIDIA's wheels itself, but a `_local` extra and cupy use the env's."""
    name = owned.normalise(line.name)
    # tensorflow's pip wheels load the CUDA libraries they find (tensorflow.org/install/pip) unless [and-cuda]
    return name.startswith(("cupy", "tensorflow")) or "cuda" in line.arg.lower()


def _cuda_range(pins: list[CondaSpec]) -> str | None:
    """The file's cudatoolkit / cuda-version constraints as one PEP 440 range over CUDA versions.
    cudatoolkit exists for CUDA <= 11.8 only (conda-forge cudatoolkit-feedstock; CUDA 12 is split into
    cuda-* packages), so a cudatoolkit line also means < 12."""
    parts: list[str] = []
    for spec in pins:
        text = spec.version.strip()
        exact = spec.exact_version
        if exact:
            major_minor = ".".join(exact.split(".")[:2])
            parts.append(f"=={major_minor}.*")
        else:
            parts += [p for p in text.replace(" ", "").split(",") if re.fullmatch(r"(>=|<=|>|<|!=|==)[0-9.*]+", p)]
        if spec.name == "cudatoolkit":
            parts.append("<12")
    return ",".join(dict.fromkeys(parts)) or None


def _wheel_cuda(lines: list[PipLine], folder: Path) -> str | None:
    """The CUDA the file's CUDA-tagged pip lines were built for (+cu118 locals, +pt22cu118, pyg/mmcv/dgl pages)."""
    for line in lines:
        if _PYTORCH_URL_RE.search(line.text):
            continue
        match = _CU_TAG_RE.search(line.text)
        if match and owned.load().nvidia_major(line.name) is None:
            return _tag_cuda("cu" + match.group(1))
    for line, _path, text in _nested_files(tuple(lines), folder):
        for raw in text.splitlines():  # a -r file's torch==X+cuNNN: the CUDA the environment was built for
            match = _NESTED_PIN_RE.match(raw)
            if line.option == "-r" and match and match.group(4) and _CU_TAG_RE.search(match.group(4)):
                return _tag_cuda(match.group(4)[1:])
    return None


def _wheel_pythons(lines: list[PipLine]) -> str | None:
    """The pythons the file's Linux wheels by URL or path can install on, as a conda range ('3.10.*|3.11.*'):
    pip installs a cp310 wheel only on python 3.10 (PEP 425 tags), and a line whose marker names another python is
    skipped, so a python outside this set would leave those packages out (theroyallab/tabbyAPI: exllamav2 and
    flash-attn wheels for cp310/cp311 behind python_version markers)."""
    count: dict[str, int] = {}
    for line in lines:
        match = _WHEEL_TAGS_RE.search(line.arg) if not line.option and line.arg else None
        if match and ("linux" in match.group(2) or match.group(2) == "any"):
            digits = match.group(1)[2:]
            count[f"{digits[0]}.{digits[1:]}"] = count.get(f"{digits[0]}.{digits[1:]}", 0) + 1
    # the pythons the most of those wheels install on (tabbyAPI: exllamav2 for 3.10 and 3.11, flash-attn for 3.10
    # only, so 3.10 installs all of them)
    best = [p for p, n in count.items() if n == max(count.values(), default=0)]
    return "|".join(f"{p}.*" for p in sorted(best, key=lambda v: tuple(map(int, v.split("."))))) or None


def _tag_cuda(tag: str) -> str:
    """'cu118' -> '11.8', 'cu92' -> '9.2'."""
    digits = tag[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def _coupled_torch(lines: list[PipLine]) -> str | None:
    """The torch minor the file's coupled pins were built for: +ptXY locals, a pyg page, a triton pin."""
    table = owned.load()
    for line in lines:
        pt = _PT_LOCAL_RE.search(line.text)
        if pt:
            return f"{pt.group(1)}.{pt.group(2)}"
        fa = _FA_LOCAL_RE.search(line.arg or line.text)
        if fa:
            return f"{fa.group(2)}.{fa.group(3)}"
        page = _PYG_PAGE_RE.search(line.text)
        if page:
            return page.group(1)
        if owned.normalise(line.name) == "triton":
            version = _pip_version_text(line)
            found = [minor for minor, triton in table.triton.items() if triton == version]
            if len(found) == 1:
                return found[0]
    return None


def flavor_order(parsed: Parsed, torch: str | None) -> tuple[str, ...]:
    """Where to look for the file's torch, first choice first. pip for a pip torch; for a conda torch,
    conda-forge (maintained) then the legacy pytorch channel (ends with 2.5: pytorch#138506), except
    that a 1.x pin from a -c pytorch/cudatoolkit file looks on that channel first (cudatoolkit era).
    Only the channel changes between these; the torch version never does."""
    if parsed.torch_from_pip:
        return ("pip",)
    if legacy.handles(torch) and parsed.uses_pytorch_channel:
        return ("pytorch", "conda-forge")
    if parsed.uses_pytorch_channel and parsed.coupled_torch:
        # +ptXYcuNNN wheels and PyG pages are built against the pip / pytorch-channel torch (owned.yaml pyg_readme),
        # not conda-forge's: the file's own channel keeps them valid
        return ("pytorch", "conda-forge")
    return ("conda-forge", "pytorch")


def default_flavor(parsed: Parsed, torch: str | None) -> str:
    return flavor_order(parsed, torch)[0]


def request_from(parsed: Parsed, request: Request, flavor_given: bool) -> Request:
    """The file's torch (as pinned) and python carry over unless the command line says otherwise; an
    unpinned torch takes the release the file's coupled pins were built for (triton==2.2.0: torch 2.2)."""
    torch = request.torch or parsed.torch or parsed.coupled_torch
    flavor = request.flavor if flavor_given else default_flavor(parsed, torch)
    return Request(cuda=request.cuda, torch=torch, python=request.python or parsed.python, flavor=flavor,
                   no_driver_check=request.no_driver_check)


def choose_name(parsed: Parsed, cli_name: str | None, source: str) -> tuple[str, list[str]]:
    """--name, else the file's name when conda could use it, else the file's stem (said so)."""
    if cli_name:
        return check_name(cli_name), []
    stem = re.sub(r"[^A-Za-z0-9_.\-]", "-", Path(source).stem).strip(".-") or "env"
    name = parsed.name
    why = ""
    if name is None or (isinstance(name, str) and not name.strip()):
        why = "the file has no name"
    elif not isinstance(name, str):
        why = f"the file's name {name!r} is not a string"
    elif name == "base":
        why = "the file's name is 'base' (conda's root environment, never replaced)"
    else:
        candidate = Path(name).name if "/" in name else name
        try:
            chosen = check_name(candidate)
        except UsageError:
            why = f"the file's name {name!r} is not a valid environment name"
        else:
            return chosen, ([f"name {name} was a path (conda env export -p); using {chosen}"]
                            if candidate != name else [])
    try:
        check_name(stem)
    except UsageError:
        stem = "env"
    return stem, [f"name: {why}; using {stem!r} from the file name (pass --name to choose)"]


def cu_tag(sel: Selection) -> str:
    """The selection's CUDA as a wheel tag: cu116, cu130; cpu for a CPU build."""
    return "cu" + sel.cuda.replace(".", "") if sel.cuda else "cpu"


def _resolve(arg: str, folder: Path) -> str:
    """A relative pip path made absolute against the env file's folder (extras suffix kept)."""
    path, extras = (arg[: arg.index("[")], arg[arg.index("["):]) if arg.endswith("]") and "[" in arg else (arg, "")
    if path.startswith("file:") and not path.startswith("file:/"):
        path = path[len("file:"):]  # conda's documented `-r file:requirements.txt`
    if path.startswith(("file:", "/", "~", "$")):
        return arg
    return str((folder / path).resolve()) + extras


def _pairs(sel: Selection) -> dict[str, str | None]:
    return {"pytorch": sel.torch, "torch": sel.torch, "torchvision": sel.torchvision,
            "torchaudio": sel.torchaudio}


def kept_pairs(sel: Selection, file_versions: dict[str, str]) -> Selection:
    """The file's own torchvision/torchaudio pins stay when its exact torch is kept (they were its pair)."""
    torch = file_versions.get("pytorch")
    if torch != sel.torch:
        return sel
    tv = file_versions.get("torchvision")
    ta = file_versions.get("torchaudio")
    exact = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
    return replace(sel, torchvision=tv if tv and exact.fullmatch(tv) else sel.torchvision,
                   torchaudio=ta if ta and exact.fullmatch(ta) else sel.torchaudio)


def torch_lines(sel: Selection, wanted: set[str]) -> tuple[list[str], list[str], list[str]]:
    """(conda specs, pip lines, notes): the selection's torch plus the torch-family packages the file had."""
    notes: list[str] = []
    conda = [s for s in sel.specs if not s.startswith("python=")]
    pip = list(sel.pip_specs)
    for extra in ("torchvision", "torchaudio"):
        if extra not in wanted:
            continue
        version = _pairs(sel)[extra]
        if version is None:
            notes.append(f"{extra} left out: the {sel.flavor} flavor has no {extra} paired with torch {sel.torch}")
            continue
        if sel.flavor == "pip":
            pip.append(f"{extra}=={_pip_pin(sel, extra, version)}")
        else:
            conda.append(f"{extra}={version}")
    return conda, pip, notes


def _pip_pin(sel: Selection, extra: str, version: str) -> str:
    """The version pip is given for torchvision/torchaudio of a pip selection: the legacy table's own wheel name
    for a 1.x release (torchvision 0.10.0+cu111), else the version with the selection's local tag."""
    old = [r for r in legacy.matching(sel.torch) if r.torchvision == sel.torchvision]
    if old and sel.torch == old[0].version:
        return legacy.pip_version(old[0], extra, sel.variant)
    return pip_local(version, sel.variant)


def _index_lines(sel: Selection) -> list[str]:
    if not sel.pip_specs or not sel.pip_index_url:
        return []
    if sel.pip_index_url.endswith(".html"):
        return [f"-f {sel.pip_index_url}"]
    return [f"--extra-index-url {sel.pip_index_url}"]


@dataclass
class _Adapting:
    """What adapt() learns from the file as it goes: the changes said so far (in order, one line each) and
    the torch stack the file asks for (packages, versions as written, +cuXYZ/+cpu locals)."""

    changes: list[str]
    wanted: set[str] = field(default_factory=set)  # pytorch, torchvision, torchaudio named in the file
    file_versions: dict[str, str] = field(default_factory=dict)
    file_locals: dict[str, str] = field(default_factory=dict)  # pip pins with a +cuXYZ/+cpu local version, as written
    consumers: tuple[str, ...] = ()  # tensorflow/jax/cupy: other users of the file's CUDA runtime
    pair: str | None = None  # the file's torch CUDA kept beside the consumers' cudatoolkit (kept_pair)


def adapt(parsed: Parsed, sel: Selection | None, machine: Machine, *, name: str | None, mirror: Mirror | None,
          source: str, extra_changes: list[str] | None = None, cuda_given: bool = False
          ) -> tuple[EnvFile, list[str]]:
    """The adapted file and the list of changes (each one line, version changes as 'a -> b (why)')."""
    state = _Adapting(list(extra_changes or []), consumers=parsed.cuda_consumers, pair=kept_pair(parsed))
    env_name = _name_and_keys(parsed, name, source, state.changes)
    _nvidia_check(parsed, machine)
    kept = _conda_lines(parsed, sel, machine, state)
    pip_kept, resolved = _pip_lines(parsed, sel, mirror, state)
    if sel is not None:
        state.changes += _nested_torch_pins(parsed, sel)
        for pkg, version in _nested_pins(parsed.pip_lines, parsed.folder).items():
            key = "pytorch" if pkg == "torch" else pkg
            state.wanted.add(key)  # the -r file's torchvision must be this machine's build too
            if version:
                state.file_versions.setdefault(key, version)
    channels, channel_changes = _channels(parsed, sel, mirror, source)
    state.changes += channel_changes
    torch_conda: list[str] = []
    torch_pip: list[str] = []
    deps: list[str] = []
    if sel is not None:
        sel, torch_conda, torch_pip = _torch_stack(parsed, sel, state)
        pip_kept = _couplings(parsed, sel, cuda_given, state, pip_kept, kept)
        deps = [f"python={sel.python}", *torch_conda]
    deps += [k for k in kept if k not in deps]
    if "pip" in deps and any(parse_conda_spec(d).name == "pip" and d != "pip" for d in deps):
        deps.remove("pip")  # the file's own pip pin stands for the bare pip the selection brings
    pip = _pip_section(sel, mirror, torch_pip, pip_kept)
    if pip and not any(parse_conda_spec(d).name == "pip" for d in deps):
        deps.append("pip")
    if sel is not None:
        added = ", ".join(torch_conda + torch_pip)
        state.changes.append(f"this machine's torch stack: {added}")
    header = _header(parsed, sel, machine, source, resolved, state.changes)
    return EnvFile(env_name, tuple(channels), tuple(deps), tuple(pip), parsed.variables, tuple(header)), state.changes


def _name_and_keys(parsed: Parsed, name: str | None, source: str, changes: list[str]) -> str:
    """The env's name (--name, else the file's), and what of the file's top level conda would ignore."""
    env_name, name_notes = choose_name(parsed, name, source)
    if parsed.from_requirements == "pip":
        changes.append(f"read {Path(source).name} as a pip requirements file: an environment of python, pip and "
                       "its lines in the pip section (conda env create would read a .txt as conda specs)")
    elif parsed.from_requirements:
        changes.append(f"read {Path(source).name} as `conda list --export` output (name=version=build, what "
                       "`conda create --file` reads): its lines are the environment's conda dependencies")
        name_notes = [n for n in name_notes if not n.startswith("name: the file has no name")]
    changes += name_notes
    if parsed.had_prefix:
        changes.append(f"dropped prefix: {parsed.had_prefix} (conda ignores it when name: is set)")
    if parsed.ignored_keys:
        changes.append(f"left out top-level key(s) {', '.join(parsed.ignored_keys)} (conda ignores them)")
    return env_name


def _conda_lines(parsed: Parsed, sel: Selection | None, machine: Machine, state: _Adapting) -> list[str]:
    """The file's conda dependencies this machine keeps: the torch stack and the old CUDA stack leave
    (the selection brings its own), other packages lose their old machine's build strings."""
    kept: list[str] = []
    builds_dropped: list[str] = []
    platform_dropped: list[str] = []
    for raw, original in zip(parsed.conda, parsed.specs):
        if PLATFORM_ONLY.match(original.name):
            platform_dropped.append(original.name)
            continue
        spec = original
        if re.search(r"\[[^=\]]*\]\s*$", raw):
            state.changes.append(f"{raw.strip()} -> {original.render()} (conda ignores a [...] without key=value: "
                                 "conda/models/match_spec.py)")
        if sel is not None:
            adjusted = _against_selection(raw, original, sel, state)
            if adjusted is None:
                continue
            spec = adjusted
        elif original.name in ("cudatoolkit", "cuda-version", "pytorch-cuda") and original.exact_version:
            _driver_check(parsed, raw, original, machine)
        if spec.build and not _is_cuda_selector(spec) and _CUDA_BUILD_RE.search(spec.build) \
                and spec.name not in owned.load().conda_cuda_runtime:
            # a CUDA build of a package torch does not own (mmcv, dgl, tensorflow from an export): the hash
            # names the old machine, but "a CUDA build" is the file's intent; without it a solver may pick CPU
            marker = "*cuda*" if "cuda" in spec.build else "*gpu*"
            new_spec = replace(spec, build=marker)
            state.changes.append(f"{raw} -> {new_spec.render()} (a CUDA build in the export: any CUDA build of "
                                 "that version here, never a CPU one)")
            spec = new_spec
        elif spec.build and not _is_cuda_selector(spec):
            builds_dropped.append(spec.name)
            spec = replace(spec, build="")
        text = spec.render()
        if text not in kept:
            kept.append(text)
    if builds_dropped:
        state.changes.append(f"dropped the build strings of {len(builds_dropped)} package(s) (they name the old "
                             f"machine's builds): {', '.join(builds_dropped[:6])}"
                             f"{' ...' if len(builds_dropped) > 6 else ''}")
    if platform_dropped:
        state.changes.append(f"left out {', '.join(platform_dropped)} (Windows/macOS-only packages: no linux-64 "
                             "build)")
    return kept


def kept_pair_cuda(state: _Adapting) -> str | None:
    return state.pair


def _against_selection(raw: str, spec: CondaSpec, sel: Selection, state: _Adapting) -> CondaSpec | None:
    """One conda dependency of a file with torch, against the selection: None when the selection replaces
    it (torch stack, CUDA pins, python) or it belonged to the old CUDA stack; else the spec to keep."""
    if spec.name in TORCH_CONDA or spec.name in TORCH_ALIASES:
        key = "pytorch" if spec.name in TORCH_ALIASES else spec.name
        state.wanted.add(key)
        version = spec.exact_version or _version_text(spec)
        if version:
            state.file_versions[key] = version
        if spec.name in TORCH_ALIASES:
            state.changes.append(f"replaced {raw} with pytorch (the selection picks the "
                                 f"{'CUDA' if sel.cuda else 'CPU'} build)")
        return None
    if spec.name in CUDA_SPECIFIC:
        if spec.name in ("cudatoolkit", "cuda-version") and state.consumers and spec.version.strip() \
                and not any(parse_conda_spec(s).name == spec.name for s in sel.specs):
            # tensorflow/jax/cupy in the same file use this runtime: it stays (the selection was made inside it)
            beside = ("a CPU build" if sel.cuda is None else "inside it" if sel.cuda != kept_pair_cuda(state) else
                      "beside it through pytorch-cuda, as the file had them")
            state.changes.append(f"kept {raw} ({', '.join(state.consumers)} in the file use that CUDA runtime; "
                                 f"torch's CUDA {sel.cuda} is {beside})" if sel.cuda else
                                 f"kept {raw} ({', '.join(state.consumers)} in the file use that CUDA runtime; torch is "
                                 "a CPU build)")
            return spec
        _cuda_pin_change(raw, spec, sel, state.changes)
        return None
    if spec.name in TORCH_TRANSITIVE:
        state.changes.append(f"removed {raw} (comes with the pytorch channel's own pytorch builds)")
        return None
    if spec.name == "python":
        old = spec.exact_version or raw
        if spec.exact_version is None and spec.version.strip():
            # a range: the selection was made inside it (plan.render_env), so the file's line holds
            state.changes.append(f"python {spec.version.strip()} -> {sel.python} (inside the file's range; "
                                 f"{_python_why(sel)})")
        elif not old.startswith(sel.python):
            state.changes.append(f"python {old} -> {sel.python} ({_python_why(sel)})")
        return None
    if spec.channel and spec.channel.split("/")[0] in CUDA_CHANNELS and \
            spec.channel.split("/")[0] not in set(sel.channels):
        state.changes.append(f"dropped the {spec.channel}:: prefix of {raw} (the selection does not use "
                             f"that channel)")
        spec = replace(spec, channel="")
    if spec.name in owned.load().conda_cuda_runtime and sel.cuda is None and state.consumers:
        return spec  # a CPU torch: the file's CUDA packages serve its jax/tensorflow/cupy, pins and all
    if spec.name in owned.load().conda_cuda_runtime and spec.name.startswith("cuda") and sel.cuda \
            and re.match(re.escape(sel.cuda) + r"(\.|$)", spec.exact_version or ""):
        return spec  # NVIDIA's cuda-* packages carry the CUDA version: this one is the selection's CUDA, so it stays
    if spec.name in owned.load().conda_cuda_runtime and spec.build:
        # from `conda env export`: a transitive part of the old CUDA stack; the selection brings its own
        state.changes.append(f"removed {raw} (CUDA runtime library of the old machine; the selection brings "
                             "its own)")
        return None
    if spec.name in owned.load().conda_cuda_runtime and spec.version:
        state.changes.append(f"unpinned {raw} -> {spec.name} (its CUDA version follows the selection)")
        spec = replace(spec, version="")
    return spec


def _pip_lines(parsed: Parsed, sel: Selection | None, mirror: Mirror | None,
               state: _Adapting) -> tuple[list[str], bool]:
    """The pip lines kept (the old PyTorch index and torch wheels leave; CUDA-tagged wheels follow the
    selection; relative paths become absolute) and whether a path was resolved."""
    pip_kept: list[str] = []
    resolved = False
    for line in parsed.pip_lines:
        text = line.text
        if line.ignored:
            state.changes.append(f"pip line {line.text} {line.ignored} -> {line.text} (pip ignores {line.ignored} after "
                                 "a requirement: only --hash, --config-settings and --global-option apply to one "
                                 "line; pip/_internal/req/req_file.py)")
        if line.option in ("--index-url", "--extra-index-url", "-f") and _PYTORCH_URL_RE.search(line.arg):
            if sel is not None:
                if text not in _index_lines(sel):
                    state.changes.append(f"removed pip line {text} (PyTorch index of the old machine; the "
                                         "selection adds its own)")
                continue
        if line.option == "--index-url" and mirror is not None:
            state.changes.append(f"replaced pip line {text} with the mirror's index")
            continue
        if sel is not None and not line.option and line.name.lower() in TORCH_PIP:
            key = "pytorch" if line.name.lower() == "torch" else line.name.lower()
            state.wanted.add(key)
            version = _pip_version_text(line)
            if version:
                state.file_versions.setdefault(key, version)
            local = re.search(r"==\s*([0-9][^\s;]*\+[A-Za-z0-9.]+)", line.arg)
            if local:
                state.file_locals[key] = local.group(1)
            continue
        if line.local_path:
            new_arg = _resolve(line.arg, parsed.folder)
            if new_arg != line.arg:
                text = text.replace(line.arg, new_arg, 1)
                resolved = True
        # CUDA-tagged lines of other projects are never rewritten (a rewritten wheel page or name need not
        # exist): they bind the plan instead, checked in _couplings
        if text not in pip_kept:
            pip_kept.append(text)
    if resolved:
        state.changes.append(f"relative pip paths made absolute against {parsed.folder} (the file's folder: conda "
                             "runs pip from there)")
    return pip_kept, resolved


def _torch_stack(parsed: Parsed, sel: Selection,
                 state: _Adapting) -> tuple[Selection, list[str], list[str]]:
    """This machine's torch stack for what the file names (its versions kept where the selection allows):
    the selection with them, and its conda and pip lines; the version changes said."""
    sel = kept_pairs(sel, state.file_versions)
    torch_conda, torch_pip, notes = torch_lines(sel, state.wanted | {"pytorch"})
    state.changes += _version_changes(state.file_versions, sel)
    for key, old_local in state.file_locals.items():
        pkg = "torch" if key == "pytorch" else key
        new_line = next((p for p in torch_pip if p.startswith(f"{pkg}==")), None)
        if new_line and new_line.split("==", 1)[1] != old_local:
            state.changes.append(f"{pkg} {old_local} -> {new_line.split('==', 1)[1]} (this machine's build)")
    state.changes += notes
    if not any(spec.name == "python" for spec in parsed.specs):
        wheels = _wheel_pythons(list(parsed.pip_lines))
        why = (f"the python the most of the file's wheels by URL are built for: "
               f"{wheels.replace('.*', '').replace('|', ' or ')}"
               if wheels and parsed.python_range == wheels else _python_why(sel))
        state.changes.append(f"added python={sel.python} ({why})")
    return sel, torch_conda, torch_pip


def _pip_section(sel: Selection | None, mirror: Mirror | None, torch_pip: list[str],
                 pip_kept: list[str]) -> list[str]:
    """The mirror's PyPI index (when there is a pip section), the selection's PyTorch index, torch wheels,
    then the file's own lines."""
    pip: list[str] = []
    if (torch_pip or pip_kept) and mirror is not None and mirror.pypi:
        pip.append(f"--index-url {mirror.pypi}")
    if sel is not None:
        pip += [line for line in _index_lines(sel) if line not in pip]
    pip += torch_pip + [p for p in pip_kept if p not in pip]
    return pip


def _header(parsed: Parsed, sel: Selection | None, machine: Machine, source: str, resolved: bool,
            changes: list[str]) -> list[str]:
    """The comment block on top of the adapted file: from what, for which machine, and every change."""
    header = [f"Adapted by envkit from {Path(source).name} for: {machine.describe()}"]
    if sel is not None:
        header.append(f"selection: torch {sel.torch}, " + (f"CUDA {sel.cuda} ({sel.variant})" if sel.cuda
                                                           else "CPU only") + f", python {sel.python}, "
                      f"flavor {sel.flavor}")
    else:
        header.append("no torch in the file: no CUDA/torch changes (packages passed through, normalised)")
    if resolved:
        header.append(f"relative pip paths were resolved against {parsed.folder} (conda runs pip there)")
    header += ["changes:", *[f"  - {c}" for c in changes]]
    return header


_NESTED_PIN_RE = re.compile(r"^\s*(torch|torchvision|torchaudio)\s*(==|===)\s*([0-9][^\s;#+]*)(\+[A-Za-z0-9.]+)?")
_NESTED_NAME_RE = re.compile(r"^\s*(torch|torchvision|torchaudio)\s*(?:[<>!~=;#\[]|$)")


def _nested_files(lines: tuple[PipLine, ...], folder: Path) -> list[tuple[PipLine, Path, str]]:
    """(line, path, text) of the -r/-c files a pip section names, one level deep, when readable."""
    out = []
    for line in lines:
        if line.option not in ("-r", "-c"):
            continue
        path = Path(_resolve(line.arg, folder).removeprefix("file:"))
        try:  # bounded: a FIFO or device named by -r must not hang the render
            out.append((line, path, read_bytes(path, "requirements file", 1 << 20).decode("utf-8-sig", "replace")))
        except InputError:
            continue
    return out


def _nested_pins(lines: tuple[PipLine, ...], folder: Path) -> dict[str, str]:
    """torch-family == pins inside -r files (what pip will install from them)."""
    pins: dict[str, str] = {}
    for line, _path, text in _nested_files(lines, folder):
        if line.option == "-r":
            for raw in text.splitlines():
                match = _NESTED_PIN_RE.match(raw)
                if match:
                    pins.setdefault(match.group(1), match.group(3))
                elif _NESTED_NAME_RE.match(raw):  # named without an exact pin: '' (pip picks PyPI's newest)
                    pins.setdefault(_NESTED_NAME_RE.match(raw).group(1), "")  # type: ignore[union-attr]
    return pins


def _nested_torch_pins(parsed: Parsed, sel: Selection) -> list[str]:
    """A -r/-c file pinning another torch would fight the selection inside pip: say so before pip does."""
    notes = []
    for line, path, text in _nested_files(parsed.pip_lines, parsed.folder):
        for raw in text.splitlines():
            match = _NESTED_PIN_RE.match(raw)
            if not match:
                named = _NESTED_NAME_RE.match(raw)
                if named and _pairs(sel).get(named.group(1)) is not None:
                    notes.append(f"{path.name} (pip {line.option}) names {raw.strip()} without an exact pin: the "
                                 f"{named.group(1)}=={_pairs(sel)[named.group(1)]} line above (this machine's "
                                 "build) satisfies it, so pip takes no PyPI build of it")
                continue
            want = _pairs(sel).get(match.group(1))
            ours = next((p.split("==", 1)[1] for p in sel.pip_specs if p.startswith(f"{match.group(1)}==")), None)
            if ours is None and want is not None:
                ours = _pip_pin(sel, match.group(1), want) if sel.flavor == "pip" else want
            # PEP 440: '==1.12.1' admits 1.12.1+cu116, but '==1.12.1+cu113' admits only that local build
            local_clash = bool(match.group(4)) and ours is not None and f"{match.group(3)}{match.group(4)}" != ours
            if want is not None and (match.group(3) != want or local_clash):
                number = text.splitlines().index(raw) + 1
                raise RenderError(
                    f"{path.name} line {number} (pip {line.option} in {parsed.where(line.text)}) pins "
                    f"{match.group(0).strip()}, but what runs here is {match.group(1)}=={ours}: pip refuses two "
                    "different pins of one package, and envkit does not rewrite a file it did not write",
                    f"edit that line of {path.name} to {match.group(1)}=={match.group(3)}"
                    f"{' (no local version)' if match.group(4) else ''}, or pass --torch/--cuda for a build "
                    "that matches it")
            elif want is not None:
                notes.append(f"{path.name} (pip {line.option}) pins {match.group(0).strip()}: pip takes "
                             f"this machine's {match.group(1)}=={ours} build for it")
    return notes


def _is_cuda_selector(spec: CondaSpec) -> bool:
    return bool(_CUDA_SELECTOR_RE.match(spec.build))


def _python_why(sel: Selection) -> str:
    return next((r for r in sel.reasons if r.startswith("python")), f"python {sel.python} for torch {sel.torch}")


def _cuda_pin_change(raw: str, spec: CondaSpec, sel: Selection, changes: list[str]) -> None:
    """A file's cudatoolkit/pytorch-cuda/cuda-version pin against the selection's own."""
    ours = next((s for s in sel.specs if parse_conda_spec(s).name == spec.name), None)
    old = spec.exact_version or spec.version.strip() or "(any)"
    if ours is not None:
        new = parse_conda_spec(ours).exact_version or ours
        if new != old:
            changes.append(f"{spec.name} {old} -> {new} (the CUDA line of torch {sel.torch} for this machine)")
        return
    instead = ", ".join(s for s in sel.specs if not s.startswith(("python=", "pytorch"))) or "no CUDA pin"
    changes.append(f"removed {raw} (CUDA-specific; the selection uses {instead})")


def _driver_check(parsed: Parsed, raw: str, spec: CondaSpec, machine: Machine) -> None:
    """A torch-free file keeps its CUDA pin only where this driver runs it. Within a CUDA major a newer
    runtime runs on an older driver of the same major (NVIDIA minor version compatibility, data.yaml
    nv_mvc; conda-forge's cuda-version X.Y asks only __cuda >= X: cf_cuda_version); across majors it does
    not, and moving the major would change every CUDA package's ABI: stop and say so."""
    from packaging.version import InvalidVersion, Version

    drv = machine.driver
    if drv is None or not drv.cuda or not spec.exact_version or machine.cuda_override is not None:
        return
    try:
        want, have = Version(spec.exact_version), Version(drv.cuda)
    except InvalidVersion:
        return
    if want.major > have.major:
        raise RenderError(
            f"{raw} ({parsed.where(raw)}) cannot run here: CUDA {want.major}.x needs a driver for CUDA "
            f"{want.major} (NVIDIA's driver table, envkit/compat/data.yaml driver_cuda); driver {drv.version} "
            f"supports CUDA {drv.cuda}",
            f"change that line to {spec.name}={have.major}.{have.minor} (the newest this driver runs, if every "
            f"CUDA package in the file has a CUDA {have.major} build), or update the NVIDIA driver")


def _version_changes(file_versions: dict[str, str], sel: Selection) -> list[str]:
    out = []
    pairs = _pairs(sel)
    for key in ("pytorch", "torchvision", "torchaudio"):
        old = file_versions.get(key)
        new = pairs[key]
        if old is None or new is None or _same(old, new):
            continue
        label = "torch" if key == "pytorch" else key
        why = "--torch on the command line" if key == "pytorch" else f"pairs with torch {sel.torch}"
        out.append(f"{label} {old} -> {new} ({why})")
    return out


def _same(old: str, new: str) -> bool:
    """'1.12' admits 1.12.1; an exact pin must match exactly; a range must contain the new version."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if re.fullmatch(r"[0-9]+(\.[0-9]+)*", old):
        return new == old or (old.count(".") < 2 and new.startswith(old + "."))
    try:
        return Version(new) in SpecifierSet(old)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _channels(parsed: Parsed, sel: Selection | None, mirror: Mirror | None, source: str
              ) -> tuple[list[str], list[str]]:
    changes: list[str] = []
    channels: list[str] = list(sel.channels) if sel is not None else []
    for ch in parsed.channels:
        if ch.strip() == "nodefaults":
            changes.append("dropped channel nodefaults (conda 26.7 fetches it as a channel and fails; envkit "
                           "writes an explicit channel list, so defaults never creeps in)")
            continue
        canon = canonical_channel(ch)
        if canon != ch:
            changes.append(f"channel {ch} -> {canon}")
        base = canon.split("/")[0]
        if sel is not None and base == "nvidia" and sel.cuda is None and parsed.cuda_consumers:
            pass  # a CPU torch beside jax/tensorflow on the GPU: NVIDIA's channel serves their CUDA packages
        elif sel is not None and base in CUDA_CHANNELS and canon not in sel.channels:
            changes.append(f"removed channel {ch} (it only served the CUDA torch stack)")
            continue
        if canon not in channels:
            channels.append(check_channel(canon, f"{source}: channels"))
    if not channels:
        channels = ["conda-forge"]
        changes.append("the file lists no channels (conda 26 has no implicit defaults): wrote conda-forge")
    if mirror is not None:
        channels = list(apply_channels(tuple(channels), mirror))
        changes.append(f"channels written as {mirror.name} mirror URLs")
    return channels, changes


def _minor(version: str | None) -> str | None:
    match = re.match(r"^(\d+)\.(\d+)", version or "")
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _nvidia_check(parsed: Parsed, machine: Machine) -> None:
    """nvidia-<lib>-cuNN wheels (owned.yaml nvidia_pypi: NN is the CUDA major) run on a driver of CUDA
    NN or newer; they are never renamed (a name envkit writes must exist)."""
    from packaging.version import InvalidVersion, Version

    drv = machine.driver
    if drv is None or not drv.cuda or machine.cuda_override is not None:
        return
    try:
        have = Version(drv.cuda).major
    except InvalidVersion:
        return
    for line in parsed.pip_lines:
        major = owned.load().nvidia_major(line.name) if not line.option else None
        if major is not None and int(major) > have:
            raise RenderError(f"{line.text} ({parsed.where(line.text)}) is a CUDA {major} runtime wheel: driver "
                              f"{drv.version} supports CUDA {drv.cuda} (NVIDIA's driver table, "
                              "envkit/compat/data.yaml driver_cuda)",
                              f"remove that line (torch's wheels bring their own CUDA libraries), use its -cu{have} "
                              "build if the project publishes one, or update the NVIDIA driver")


def _couplings(parsed: Parsed, sel: Selection, cuda_given: bool, state: _Adapting, pip_kept: list[str],
               conda_kept: list[str]) -> list[str]:
    """Packages built against one torch or CUDA (owned.yaml `coupled`) against the torch stack chosen
    here: kept when they match, a triton pin moved to the one the new torch requires (owned.yaml
    triton), otherwise stop and name the coupling with the options that keep it valid. The pip lines kept."""
    table = owned.load()
    file_minor = _minor(parsed.torch) if parsed.torch and parsed.torch[:1].isdigit() else None
    file_minor = file_minor or parsed.coupled_torch
    here_minor = _minor(sel.torch)
    moved = file_minor is not None and file_minor != here_minor
    tag = cu_tag(sel)
    problems: list[str] = []
    options: list[str] = []
    out: list[str] = []

    pyg = {"torch-scatter", "torch-sparse", "torch-cluster", "torch-spline-conv", "pyg-lib"}
    pyg_pinned = any(owned.normalise(p.name) in pyg and re.search(r"===?\s*[0-9]", p.arg) for p in parsed.pip_lines)

    def option(text: str) -> None:
        if text not in options:
            options.append(text)

    for text in pip_kept:
        line = parse_pip_line(text)
        where = parsed.where(line.arg or text)
        if _PYTORCH_URL_RE.search(text) or table.nvidia_major(line.name) is not None:
            out.append(text)
            continue
        pt = _PT_LOCAL_RE.search(text)
        page = _PYG_PAGE_RE.search(text)
        fa = _FA_LOCAL_RE.search(line.arg or text)
        built_torch = f"{pt.group(1)}.{pt.group(2)}" if pt else (page.group(1) if page else None)
        built_tag = pt.group(3) if pt else (page.group(2) if page else None)
        if fa and built_torch is None:
            built_torch, built_tag = f"{fa.group(2)}.{fa.group(3)}", f"cu{fa.group(1)}"
        if built_torch is not None and sel.flavor == "conda-forge":
            kind = "a flash-attn wheel" if fa and not pt and not page else "a PyG wheel"
            problems.append(f"{text} ({where}) is {kind} for the pip/pytorch-channel torch {built_torch}; "
                            "here torch comes from conda-forge, built with another C++ ABI (owned.yaml pyg_readme)")
            option("--flavor pip")
        elif page and not pt and (built_torch == here_minor or not pyg_pinned) and (built_torch, built_tag) != \
                (here_minor, tag) and tag in table.pyg_pages.get(here_minor or "", ()):
            new = text.replace(page.group(0), f"data.pyg.org/whl/torch-{here_minor}.0+{tag}.html")
            state.changes.append(f"{text} -> {new} (PyG's page for torch {here_minor} {tag}: owned.yaml pyg_pages; "
                                 "the file's PyG packages are unpinned or the torch is the same)")
            out.append(new)
            continue
        elif built_torch is not None and (built_torch != here_minor or built_tag != tag):
            problems.append(f"{text} ({where}) was built for torch {built_torch} {built_tag}; here: torch "
                            f"{sel.torch} {tag}")
        # a path (-r/-c files, -e and local projects) names no build: a folder called requirements_cu128 is a name
        other = None if built_tag or line.option in ("-r", "-c", "-e") or line.local_path else _CU_TAG_RE.search(text)
        if other and len(other.group(1)) == 2 and tag.startswith("cu") and re.search(
                rf"-cu{other.group(1)}\b", line.name or text) and tag[2:-1] == other.group(1):
            other = None  # NVIDIA's and RAPIDS' -cu11/-cu12 wheels name the CUDA major (cuml-cu11: any CUDA 11)
        if other and "cu" + other.group(1) != tag:
            problems.append(f"{text} ({where}) was built for CUDA {_tag_cuda('cu' + other.group(1))}; here: "
                            f"{tag}")
        mm = re.search(r"/torch(\d+\.\d+)(?:\.\d+)?/", text)
        if mm and mm.group(1) != here_minor:
            problems.append(f"{text} ({where}) serves wheels for torch {mm.group(1)}; here: torch {sel.torch}")
        pinned = not line.option and re.search(r"(===?|~=)\s*[0-9]", line.arg) is not None
        if moved and pinned and table.coupling(line.name) == "torch" and not pt:
            new_triton = table.triton.get(here_minor or "")
            if table.coupling(line.name) == "torch" and owned.normalise(line.name) == "triton" and new_triton:
                new = f"{line.name}=={new_triton}"
                state.changes.append(f"{text} -> {new} (the triton torch {sel.torch} requires: owned.yaml "
                                     "triton, from pytorch's triton_version.txt)")
                out.append(new)
                continue
            problems.append(f"{text} ({where}) is built against torch {file_minor} "
                            f"(owned.yaml {table.coupled_src.get(owned.normalise(line.name), 'coupled')}); "
                            f"torch moves to {sel.torch} here")
        out.append(text)
    if moved:
        for text in conda_kept:
            spec = parse_conda_spec(text)
            if table.coupling(spec.name) == "torch" and spec.exact_version:
                problems.append(f"{text} ({parsed.where(text)}) is built against torch {file_minor}; torch moves "
                                f"to {sel.torch} here")
    if problems:
        if moved:
            option(f"--torch {file_minor} (the torch these pins were built for)")
        if parsed.wheel_cuda and parsed.wheel_cuda != sel.cuda and cuda_given:
            # only when --cuda chose another CUDA: under 'auto' the file's own CUDA was tried first and failed
            option(f"--cuda {parsed.wheel_cuda} (the CUDA these wheels were built for, if a build of this torch "
                   "for it runs here)")
        raise RenderError("the file's packages built for one torch/CUDA do not fit the torch stack chosen here "
                          f"(torch {sel.torch}, {tag}, {sel.flavor}): " + "; ".join(problems),
                          ("options that keep them valid: " + "; ".join(options) + "; or edit those lines")
                          if options else "edit those lines to builds for this torch and CUDA")
    return out


# Python minors envkit may pick, in order of preference (the spec builder's order, envkit/render/build.py).
_PYTHONS = ("3.12", "3.11", "3.13", "3.10", "3.14", "3.9", "3.8", "3.7", "3.6")


def conda_admits(constraint: str, version: str) -> bool:
    """Whether a conda version constraint admits `version` (conda's MatchSpec version syntax: '|' or,
    ',' and, '=X' and a bare 'X' fuzzy (X.*), '==X' exact, globs '3.8.*')."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        wanted = Version(version)
    except InvalidVersion:
        return False
    for group in constraint.replace(" ", "").split("|"):
        parts = []
        for part in group.split(","):
            if not part or part == "*":
                continue
            if re.fullmatch(r"=?[0-9][0-9.]*\*?", part):  # '=3.8', '3.8', '3.8*', '3.8.*': fuzzy
                part = "==" + part.lstrip("=").rstrip("*").rstrip(".") + ".*"
            parts.append(part)
        try:
            if wanted in SpecifierSet(",".join(parts)):
                return True
        except InvalidSpecifier:
            return False
    return False


def python_choices(parsed: Parsed, cli_python: str | None) -> list[str | None]:
    """The pythons the file's python constraint admits (a range binds the selection); [None] without one."""
    if cli_python or not parsed.python_range:
        return [cli_python or parsed.python]
    found = [p for p in _PYTHONS if any(conda_admits(parsed.python_range, f"{p}.{z}") for z in range(0, 30))]
    if not found:
        raise RenderError(f"python{parsed.python_range} ({parsed.where('python')}) admits no python that torch "
                          f"has builds for ({', '.join(sorted(_PYTHONS))})",
                          "widen the file's python constraint, or pass --python X.Y")
    return list(found)


def cuda_ceilings(parsed: Parsed, request: Request, driver_cuda: str | None,
                  known: tuple[str, ...]) -> list[str]:
    """CUDA levels to plan for, first choice first: the file's own (its CUDA-tagged wheels were built for
    it; tensorflow/jax/cupy need their cudatoolkit range), then whatever this driver runs ('auto')."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    if request.cuda != "auto" or not driver_cuda:
        return [request.cuda]
    tries: list[str] = []
    if parsed.cuda_range:
        try:
            allowed = SpecifierSet(parsed.cuda_range)
        except InvalidSpecifier:
            allowed = SpecifierSet()
        inside = [c for c in known if Version(c) in allowed and Version(c) <= Version(driver_cuda)]
        if not inside and any(Version(c) in allowed and Version(c).major == Version(driver_cuda).major for c in known):
            # the same CUDA major as the driver: the runtime runs here through minor version compatibility (NVIDIA
            # CUDA Compatibility guide; conda-forge's cuda-version X.Y needs only __cuda >= X), so the file's line
            # stays and torch takes the newest build this driver runs
            return ["auto"]
        if not inside:
            raise RenderError(
                f"{', '.join(parsed.cuda_consumers)} in the file need CUDA {parsed.cuda_range} (their cudatoolkit/"
                f"cuda-version line, {cuda_where(parsed)}); this driver supports CUDA {driver_cuda}",
                "update the NVIDIA driver, or change that line and the packages that need it")
        pair = kept_pair(parsed)
        if pair and Version(pair) <= Version(driver_cuda):
            return [pair, max(inside, key=Version)]
        return [max(inside, key=Version)]  # the selection must stay inside the range: no 'auto' fallback
    for cuda in (parsed.wheel_cuda, parsed.torch_cuda):
        # the CUDA the file's wheels or its conda torch were built for: kept where this driver runs it
        if cuda and cuda not in tries and Version(cuda) <= Version(driver_cuda):
            tries.append(cuda)
    return [*tries, "auto"]


def kept_pair(parsed: Parsed) -> str | None:
    """The file's own torch CUDA when it sits beside a cudatoolkit the other frameworks use and outside that
    toolkit's range (a conda export of pytorch-cuda=11.7 next to cudatoolkit=11.3 for tensorflow): the two are
    separate packages (pytorch-cuda brings cuda-* 11.7, cudatoolkit its own libraries), so where both run here the
    pair stays as the file had it."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if not (parsed.torch_cuda and parsed.cuda_range and any(s.name == "pytorch-cuda" for s in parsed.specs)):
        return None
    try:
        inside = Version(parsed.torch_cuda) in SpecifierSet(parsed.cuda_range)
    except (InvalidSpecifier, InvalidVersion):
        return None
    return None if inside else parsed.torch_cuda


def cuda_where(parsed: Parsed) -> str:
    line = next((r for r, s in zip(parsed.conda, parsed.specs) if s.name in ("cudatoolkit", "cuda-version")), "")
    return parsed.where(line) if line else "the file"


def check_torch_text(parsed: Parsed) -> None:
    """The file's torch pin as the ecosystem writes it; a nightly or pre-release cannot be selected (the
    catalogue holds releases): stop, naming the file and line, never a flag the user did not pass."""
    from packaging.version import InvalidVersion, Version

    text = parsed.torch
    if not text:
        return
    try:
        parse_torch_spec(text)
        return
    except UsageError:
        pass
    line = next((r for r in (*parsed.conda, *parsed.pip) if text in r), text)
    try:
        version = Version(text.lstrip("=<>!~"))
    except InvalidVersion:
        version = None
    if version is not None and (version.is_prerelease or version.is_devrelease):
        release = f"{version.major}.{version.minor}"
        # PyTorch's nightlies before the 2.0 release were numbered 1.14 (no 1.14 was ever released: pytorch.org
        # "PyTorch 2.0" announcement, 2022-12; the nightly index went from 1.14.0.dev to 2.0.0.dev)
        release = {"1.14": "2.0"}.get(release, release)
        raise RenderError(f"{line} ({parsed.where(line)}) is a nightly or pre-release torch: envkit selects among "
                          "released builds (the catalogue has no nightlies)",
                          f"pass --torch {release} for the {release} release line, or install that nightly by "
                          "hand after creating the environment")
    raise RenderError(f"{line} ({parsed.where(line)}): {text!r} is not a torch version or range envkit can select",
                      "pass --torch X.Y, or write the pin as X.Y, X.Y.Z, X.* or a range such as >=2.1,<3")

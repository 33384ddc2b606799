#!/usr/bin/env python3
"""Run `envkit render --from FILE` over the real-world corpus (tests/fixtures/corpus_real/) for three
machines and judge every result by rules written from the ecosystem's facts, not from envkit's code.

    python scripts/corpus_check.py                      # the development part (HELDOUT.txt excluded)
    python scripts/corpus_check.py --heldout            # only the held-back third (start and end of a round)
    python scripts/corpus_check.py --all --jobs 2 --tsv results.tsv
    python scripts/corpus_check.py --self-test          # the judge's own tests (no envkit run)

Each file x machine gets one verdict:
  clean    exit 0 and no rule below is broken (or the reviewed expectation says this output is right)
  refused  exit 1 with an `error:` and a `fix:` line, and the reviewed expectation (expected.yaml) agrees,
           or no expectation was written yet ("refused?": counted apart, to be reviewed)
  wrong    a rule is broken, or the result differs from the reviewed expectation
  crash    a traceback, an exit code other than 0/1, or output that is not YAML

The rules (each names its source):
  R1 keep      every dependency outside the owned set is still there, same name, same version text
               (issue 21: "never dropped and never renamed"); builds may go only with the platform or python
               they name, and a CUDA build (`*cuda*`) of a package envkit does not own must keep a CUDA marker.
  R2 invent    every name envkit writes that the file did not have is in the owned set; NVIDIA's CUDA wheels are
               `-cu11`/`-cu12`/`-cu13` (pypi.org/project/nvidia-cublas-cu12), PyTorch's wheel indexes are the
               variants PyTorch published (RELEASE.md / test-infra matrix), PyG's pages exist for those pairs only.
  R3 bound     the file's own python / torch constraints hold for what envkit writes.
  R4 runs      the CUDA the output asks for is within the driver's (NVIDIA CUDA compatibility, Table 3: a driver
               runs its CUDA major and everything older), and the GPU has code in it (CUDA 13 dropped sm_5x-7.2,
               PyTorch's cu128+ wheels from 2.8 have no sm_61; torch 1.x has no sm_90).
  R5 coupled   when torch moves, the pins built against the old torch (triton, xformers, flash-attn, the pyg
               family, ...) move with it or the result is a refusal; `+ptXXcuYYY` wheels never sit beside a
               conda-forge torch.
  R6 flags     an error never names a flag the user did not pass.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import io
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("ENVKIT_CORPUS_DIR") or ROOT / "tests" / "fixtures" / "corpus_real")

# The three machines of issue 21 (driver -> the CUDA it runs: NVIDIA CUDA Toolkit release notes, Table 3)
MACHINES: dict[str, tuple[str, str, tuple[int, int]]] = {
    "a10": ("550.54.15", "8.6", (12, 4)),
    "h200": ("580.159.04", "9.0", (13, 0)),
    "gtx1080ti": ("535.104.05", "6.1", (12, 2)),
}

# -- what envkit owns (issue 21 "What to build"): the torch stack and the old machine's CUDA runtime --------------
OWNED_CONDA = {"pytorch", "pytorch-gpu", "pytorch-cpu", "pytorch-cuda", "cudatoolkit", "cuda-version", "cpuonly",
               "pytorch-mutex", "torchvision", "torchaudio", "torchtriton", "cudnn", "cudatoolkit-dev", "nccl",
               "libtorch", "pytorch-lightning-never-owned-placeholder"} - {"pytorch-lightning-never-owned-placeholder"}
# NVIDIA's CUDA runtime packages by exact name (anaconda.org/nvidia, conda-forge cuda-feedstocks)
CUDA_RUNTIME = {"cuda-runtime", "cuda-cudart", "cuda-cudart-dev", "cuda-libraries", "cuda-libraries-dev", "cuda-nvrtc",
                "cuda-nvtx", "cuda-cupti", "cuda-toolkit", "cuda-nvcc", "cuda-cccl", "cuda-nvprof", "cuda-command-line-tools",
                "cuda-compiler", "cuda-cuobjdump", "cuda-cuxxfilt", "cuda-driver-dev", "cuda-gdb", "cuda-nsight",
                "cuda-nvdisasm", "cuda-nvml-dev", "cuda-nvprune", "cuda-nvvp", "cuda-sanitizer-api", "cuda-tools",
                "cuda-visual-tools", "cuda-demo-suite", "cuda-documentation", "cuda-nvrtc-dev", "cuda-profiler-api",
                "cuda-opencl", "cuda-opencl-dev", "cuda-crt", "cuda-crt-dev", "cuda-crt-tools", "cuda-nvvm",
                "cuda-nvvm-dev", "cuda-nvvm-tools", "cuda-nvvm-impl", "cuda-cudart-static", "cuda-cudart_linux-64",
                "cuda-cudart-dev_linux-64", "cuda-cudart-static_linux-64", "cuda-nvcc-impl", "cuda-nvcc-tools",
                "cuda-nvcc_linux-64", "cuda-nvcc-dev_linux-64", "cuda-python", "cuda-compat",
                "libcublas", "libcublas-dev", "libcufft", "libcufft-dev", "libcurand", "libcurand-dev", "libcusolver",
                "libcusolver-dev", "libcusparse", "libcusparse-dev", "libnpp", "libnpp-dev", "libnvjpeg", "libnvjpeg-dev",
                "libnvjitlink", "libnvjitlink-dev", "libcufile", "libcufile-dev", "libnvfatbin", "libnvfatbin-dev",
                "libcudnn", "libcudnn-dev", "libnccl", "cutensor", "libcutensor", "libcusparselt", "magma-cuda"}
OWNED_PIP = {"torch", "torchvision", "torchaudio", "pytorch-triton"}
NVIDIA_WHEEL_RE = re.compile(r"^nvidia-[a-z0-9-]+?-cu(\d+)$")
# Windows/macOS-only conda packages a Linux machine cannot install (their feedstocks build no linux-64 package)
PLATFORM_ONLY_RE = re.compile(
    r"^(vc|vc14_runtime|vs2015_runtime|vs2017_runtime|vs2019_runtime|ucrt|m2w64-.*|msys2-.*|wincertstore|pywin32|"
    r"pywin32-ctypes|pywinpty|winpty|win_inet_pton|menuinst|console_shortcut|powershell_shortcut|"
    r"appnope|pyobjc-.*|libcxxabi|cctools.*|ld64.*|.*_osx-64|.*_osx-arm64|.*_win-64|tapi|intel-openmp|"
    r"llvm-openmp|libcxx|mkl-service|mkl_fft|mkl_random|icc_rt|ninja-base|tbb|tbb4py|libuv|"
    r"pyreadline|pyreadline3|colorama-placeholder)$")
# Packages built against a particular torch (issue 21 list; their release notes / wheel indexes pin a torch minor)
COUPLED_PIP = {"triton", "xformers", "flash-attn", "flash_attn", "mamba-ssm", "causal-conv1d", "torch-scatter",
               "torch-sparse", "torch-cluster", "torch-spline-conv", "pyg-lib", "torch-geometric-never",
               "dgl", "pytorch3d", "detectron2", "mmcv", "mmcv-full", "apex", "torchtext", "torchdata",
               "torch-tensorrt", "deepspeed-never", "bitsandbytes-never"}
COUPLED_PIP = {n for n in COUPLED_PIP if not n.endswith("-never")}
# download.pytorch.org/whl/<variant> variants PyTorch published (RELEASE.md, test-infra generate_binary_build_matrix)
PYTORCH_VARIANTS = {"cpu", "cu92", "cu100", "cu101", "cu102", "cu110", "cu111", "cu113", "cu115", "cu116", "cu117",
                    "cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130", "cu132", "nightly", "test",
                    "rocm5.7", "torch_stable.html", "torch", "rocm6.0", "rocm6.1", "rocm6.2", "rocm6.3", "rocm6.4", "cpu-cxx11-abi", "xpu"}
# torch minor -> CUDA variants of its wheels (compat.yaml torch_pip_variants; older from pytorch.org/get-started/previous-versions)
TORCH_CU = {
    "1.7": {"cu92", "cu101", "cu102", "cu110"}, "1.8": {"cu101", "cu102", "cu111"}, "1.9": {"cu102", "cu111"},
    "1.10": {"cu102", "cu111", "cu113"}, "1.11": {"cu102", "cu113", "cu115"}, "1.12": {"cu102", "cu113", "cu116"},
    "1.13": {"cu116", "cu117"}, "2.0": {"cu117", "cu118"}, "2.1": {"cu118", "cu121"}, "2.2": {"cu118", "cu121"},
    "2.3": {"cu118", "cu121"}, "2.4": {"cu118", "cu121", "cu124"}, "2.5": {"cu118", "cu121", "cu124"},
    "2.6": {"cu118", "cu124", "cu126"}, "2.7": {"cu118", "cu126", "cu128"}, "2.8": {"cu126", "cu128", "cu129"},
    "2.9": {"cu126", "cu128", "cu130"}, "2.10": {"cu126", "cu128", "cu130"}, "2.11": {"cu126", "cu128", "cu130"},
    "2.12": {"cu126", "cu130", "cu132"}, "2.13": {"cu126", "cu130", "cu132"}, "2.14": {"cu126", "cu130", "cu132"},
}
FLAGS = ("--torch", "--python", "--cuda", "--flavor", "--name", "--mirror")

_NAME_RE = re.compile(r"^\s*(?:[A-Za-z0-9_./:-]+::)?([A-Za-z0-9_][A-Za-z0-9_.\-]*)")
_PIP_NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.\-]*)\s*(\[[^\]]*\])?\s*(.*)$")
_PTCU_RE = re.compile(r"\+pt(\d+)cu(\d+)")
_PYG_RE = re.compile(r"data\.pyg\.org/whl/torch-(\d+\.\d+)\.\d+\+(cu\d+|cpu)")
_WHL_RE = re.compile(r"download\.pytorch\.org/whl/(?:nightly/|test/)?([a-z0-9.\-]+)")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# -- reading a corpus entry -----------------------------------------------------------------------------------------
@dataclass
class Entry:
    id: str
    path: Path  # the environment file
    data: dict[str, Any]
    conda: list[str] = field(default_factory=list)
    pip: list[str] = field(default_factory=list)  # pip section lines plus the lines of every -r file it names


def _text(p: Path) -> str:
    """A corpus file as conda and pip read it: UTF-8 (a BOM allowed), or UTF-16 with its BOM (Windows PowerShell
    5.1's `conda env export > environment.yml`; pip/_internal/utils/encoding.py auto_decode reads it the same way)."""
    data = p.read_bytes()
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")


def env_file_of(folder: Path) -> Path | None:
    for p in sorted(folder.iterdir()):
        if p.suffix in (".yml", ".yaml") and p.is_file():
            try:
                d = yaml.safe_load(_text(p))
            except Exception:
                continue
            if isinstance(d, dict) and "dependencies" in d:
                return p
    return None


def _slug(p: Path) -> str:
    return re.sub(r"[^a-z0-9._-]", "_", p.stem.lower())


def read_requirements(path: Path, seen: set[Path]) -> list[str]:
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    out: list[str] = []
    for raw in _text(path).splitlines():
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^(-r|--requirement|-c|--constraint)\s*=?\s*(?:file:)?(\S+)", line)
        if m:
            out += read_requirements((path.parent / m.group(2)).resolve(), seen)
            continue
        out.append(line)
    return out


def load_entry(folder: Path) -> Entry | None:
    p = env_file_of(folder)
    if p is None:
        # a requirements-only entry (pip's own format, which conda reads in a pip section): the file the id names
        txts = sorted(folder.glob("*.txt"), key=lambda t: (not folder.name.endswith(_slug(t)), t.name))
        if not txts:
            return None
        e = Entry(folder.name, txts[0], {})
        lines = read_requirements(txts[0].resolve(), set())
        triple = re.compile(r"^[A-Za-z0-9_.\-]+=[^=\s]+=[^=\s]+$")
        head = _text(txts[0])
        if "conda create --name <env> --file" in head or (lines and sum(bool(triple.match(x)) for x in lines)
                                                           >= 0.8 * len(lines)):
            # `conda list --export` (what `conda create --file` reads): conda specs; pypi_0 builds were pip's
            e.conda = [x for x in lines if not x.endswith("=pypi_0")]
            e.pip = [re.sub(r"^([^=]+)=([^=]+)=pypi_0$", r"\1==\2", x) for x in lines if x.endswith("=pypi_0")]
        else:
            e.pip = lines
        return e
    data = yaml.safe_load(_text(p))
    e = Entry(folder.name, p, data)
    for dep in data.get("dependencies") or []:
        if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
            for line in dep["pip"]:
                text = str(line).strip()
                m = re.match(r"^(-r|--requirement)\s*=?\s*(?:file:)?(\S+)", text)
                if m:
                    e.pip += read_requirements((p.parent / m.group(2)).resolve(), set())
                elif text:
                    e.pip.append(text)
        elif dep is not None and not isinstance(dep, dict):
            e.conda.append(str(dep))
    return e


def conda_name(spec: str) -> str | None:
    m = _NAME_RE.match(spec)
    return m.group(1).lower() if m else None


def conda_parts(spec: str) -> tuple[str, str, str]:
    """(name, version text, build) of a conda spec as `conda env export` and people write it."""
    s = re.sub(r"^[A-Za-z0-9_./:-]+::", "", spec.strip())
    s = re.sub(r"\[.*\]$", "", s).strip()
    name = conda_name(s) or ""
    rest = s[len(name):].strip() if s.lower().startswith(name) else s
    if " " in rest and not re.search(r"[<>=!,|]\s", rest):
        bits = rest.split()
        return name, bits[0], bits[1] if len(bits) > 1 else ""
    if rest.startswith("=") and not rest.startswith("=="):
        bits = rest[1:].split("=")
        return name, bits[0], "=".join(bits[1:])
    return name, rest.replace(" ", ""), ""


# file-wide options written after a requirement: pip parses and ignores them there (pip/_internal/req/req_file.py,
# only --hash/--config-settings/--global-option reach one requirement; checked with pip 23.2 and 26.3)
_IGNORED_ON_LINE_RE = re.compile(r"\s+(?:-i|--index-url|--extra-index-url|-f|--find-links|--trusted-host|--no-index|"
                                 r"--pre|--prefer-binary|--only-binary|--no-binary)(?:[=\s]+(?!-)\S+)?(?=\s|$)")


# one option, two spellings (pip/_internal/cli/cmdoptions.py: "-e", "--editable"; "-r", "--requirement"; "-c",
# "--constraint"; "-f", "--find-links"; "-i", "--index-url"), and optparse takes `--opt=value` as `--opt value`
_OPTION_ALIASES = {"--editable": "-e", "--requirement": "-r", "--constraint": "-c", "--find-links": "-f",
                   "-i": "--index-url"}


def requirement_part(line: str) -> str:
    """A requirement line as pip acts on it: the file-wide options pip ignores there left out, an option line in
    one spelling of its option."""
    if line.startswith("-"):
        m = re.match(r"^(--?[A-Za-z-]+)(?:=|\s+)(.*)$", line)
        if m:
            return f"{_OPTION_ALIASES.get(m.group(1), m.group(1))} {m.group(2).strip()}"
        return line
    return _IGNORED_ON_LINE_RE.sub("", line).strip()


def pip_name(line: str) -> str | None:
    line = requirement_part(line)
    if line.startswith("-") or "://" in line.split(" @ ")[0] or line.startswith((".", "/", "~")) or "/" in line.split()[0]:
        m = re.search(r"#egg=([A-Za-z0-9_.\-]+)", line)
        return norm(m.group(1)) if m else None
    m = _PIP_NAME_RE.match(line)
    return norm(m.group(1)) if m else None


def pip_version(line: str) -> str:
    m = _PIP_NAME_RE.match(line)
    return re.sub(r"\s+", "", m.group(3).split(";")[0]) if m else ""


# -- running envkit --------------------------------------------------------------------------------------------------
@dataclass
class Run:
    code: int
    out: str
    err: str
    crashed: bool


def run_render(path: Path, machine: str, home: Path) -> Run:
    """envkit's own entry point (the error boundary included), in this process: 450 runs in under a minute."""
    import contextlib
    import traceback

    from envkit.cli import _run

    driver, cc, _ = MACHINES[machine]
    for var in ("CONDA_OVERRIDE_CUDA", "ENVKIT_MIRROR", "ENVKIT_PYTORCH_INDEX", "CUDA_VISIBLE_DEVICES", "ENVKIT_CUDA",
                "ENVKIT_FLAVOR", "ENVKIT_DRIVER_VERSION", "ENVKIT_COMPUTE_CAPABILITY", "ENVKIT_TORCH"):
        os.environ.pop(var, None)
    os.environ.update({"HOME": str(home), "ENVKIT_HOME": str(home / "envkit"), "ENVKIT_CACHE_DIR": str(home / "cache"),
                       "ENVKIT_CONFIG": str(home / "none.yaml"), "ENVKIT_OFFLINE": "1",
                       "XDG_CONFIG_HOME": str(home / "cfg"), "COLUMNS": "400"})
    out = home / f"out-{machine}.yml"
    if out.exists():
        out.unlink()
    so, se = io.StringIO(), io.StringIO()
    crashed, code = False, 0
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        try:
            code = _run(["render", "--from", str(path), "--driver-version", driver, "--compute-capability", cc,
                         "-o", str(out)])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - anything past envkit's boundary is a crash to report
            crashed, code = True, 99
            se.write(traceback.format_exc())
    text = out.read_text(encoding="utf-8") if out.exists() else ""
    return Run(code, text, se.getvalue(), crashed)


# -- judging ---------------------------------------------------------------------------------------------------------
def _torch_version(conda: list[str], pip: list[str]) -> tuple[str | None, str]:
    """The torch version text and where (conda/pip) of an env's dependency lists."""
    for spec in conda:
        n, v, _ = conda_parts(spec)
        if n in ("pytorch", "pytorch-gpu", "pytorch-cpu") and v:
            return v, "conda"
    for line in pip:
        if pip_name(line) == "torch":
            return pip_version(line), "pip"
    return None, ""


def _exact(vtext: str) -> str | None:
    m = re.match(r"^(?:==|=)?\s*v?(\d+(?:\.\d+){0,2}(?:\.?(?:dev|post|a|b|rc)\d+)?)(\+[A-Za-z0-9.]+)?(?:\.\*|\*)?$",
                 vtext.strip())
    return m.group(1) if m else None


def _minor(v: str | None) -> str | None:
    if not v:
        return None
    m = re.match(r"^(\d+)\.(\d+)", v)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _spec_ok(version: str, spec: str, conda: bool) -> bool | None:
    """Does `version` satisfy `spec` (conda or PEP 440 text)? None when it cannot tell."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    s = spec.strip().replace(" ", "")
    if not s or s == "*":
        return True
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    alts = s.split("|")
    for alt in alts:
        parts = []
        for p in alt.split(","):
            if conda and re.match(r"^=?\d", p) and not p.startswith("=="):
                base = p.lstrip("=")
                if base.endswith(".*") or base.endswith("*"):
                    base = base.rstrip("*").rstrip(".")
                parts.append(f"=={base}.*" if base.count(".") < 2 or p.startswith("=") else f"=={base}")
            elif p.endswith("*") and p.startswith("=="):
                parts.append(p if p.endswith(".*") else p[:-1].rstrip(".") + ".*")
            else:
                parts.append(p)
        try:
            if v in SpecifierSet(",".join(parts)):
                return True
        except InvalidSpecifier:
            return None
    return False


def judge(entry: Entry, machine: str, run: Run) -> list[str]:
    """The rules each result is held to; returns what is broken (empty: clean or a refusal)."""
    problems: list[str] = []
    if run.crashed or run.code not in (0, 1) or "Traceback" in run.err:
        return ["crash: " + (run.err.strip().splitlines() or ["exit %d" % run.code])[-1][:200]]
    if run.code == 1:
        for flag in FLAGS:
            if re.search(re.escape(flag) + r"\s+'", run.err.split("fix:")[0]) and "was given" not in run.err:
                problems.append(f"R6 the error names {flag}, which was not passed")
        if "error:" not in run.err or "fix:" not in run.err:
            problems.append("a refusal without an error: and a fix: line")
        return problems
    try:
        out = yaml.safe_load(run.out)
    except yaml.YAMLError as exc:
        return [f"crash: output is not YAML ({str(exc).splitlines()[0]})"]
    if not isinstance(out, dict) or not isinstance(out.get("dependencies"), list):
        return ["crash: output has no dependencies list"]
    oconda = [str(d) for d in out["dependencies"] if not isinstance(d, dict) and d is not None]
    opip: list[str] = []
    for d in out["dependencies"]:
        if isinstance(d, dict) and isinstance(d.get("pip"), list):
            for line in d["pip"]:
                text = str(line).strip()
                m = re.match(r"^(-r|--requirement)\s*=?\s*(?:file:)?(\S+)", text)
                if m:
                    opip += read_requirements(Path(m.group(2)).expanduser().resolve()
                                              if Path(m.group(2)).is_absolute() else
                                              (entry.path.parent / m.group(2)).resolve(), set())
                else:
                    opip.append(text)
    changes = run.err
    foreign = bool(re.search(r"^prefix:\s*([A-Za-z]:\\|/Users/)", _text(entry.path),
                             re.M)) or any(PLATFORM_ONLY_RE.match(conda_name(s) or "") and (conda_name(s) or "") in
                                           {"vc", "vs2015_runtime", "ucrt", "libcxx", "appnope"} for s in entry.conda)
    in_py = next((conda_parts(s)[1] for s in entry.conda if conda_name(s) == "python"), "")
    out_py = next((conda_parts(s)[1] for s in oconda if conda_name(s) == "python"), "")
    python_moved = bool(_exact(in_py)) and _minor(_exact(in_py)) != _minor(_exact(out_py) or _exact(out_py.lstrip("=")))

    # R1 keep (conda)
    out_by_name: dict[str, list[tuple[str, str, str]]] = {}
    for s in oconda:
        out_by_name.setdefault(conda_name(s) or "", []).append(conda_parts(s))
    for spec in entry.conda:
        n, v, b = conda_parts(spec)
        if not n or n in OWNED_CONDA or n in CUDA_RUNTIME or PLATFORM_ONLY_RE.match(n) or n == "python":
            continue
        got = out_by_name.get(n)
        if not got:
            problems.append(f"R1 dropped conda package {n!r} ({spec.strip()})")
            continue
        # the same name twice (a bare line beside the file's pin): judge the one closest to the file's
        on, ov, ob = next((g for g in got if g[1] == v), next((g for g in got if g[1]), got[0]))
        if v and norm(ov.lstrip("=")) != norm(v.lstrip("=")) and ov.replace(".*", "") != v.replace(".*", ""):
            problems.append(f"R1 changed the version of {n}: {spec.strip()} -> {on}{(' ' + ov) if ov else ''}")
        if b and "cuda" in b.lower() and "cuda" not in ob.lower():
            problems.append(f"R1 the CUDA build of {n} ({b}) lost its CUDA marker")
        elif b and not ob and not (foreign or python_moved) and n not in changes:
            pass  # a build dropped on the same platform is allowed when printed; reported as a note only
    # R1 keep (pip)
    out_pip_names = {pip_name(x): x for x in opip}
    out_pip_lines = {re.sub(r"\s+", "", requirement_part(x)) for x in opip}
    for line in entry.pip:
        n = pip_name(line)
        if n is None:
            if line.startswith(("-i", "--index-url", "--extra-index-url", "-f", "--find-links")):
                continue  # index lines: checked by R2
            if line.startswith(("-e", "--editable")) or line.startswith((".", "/")) or "://" in line:
                tail = re.sub(r"\[.*\]$", "", line.split()[-1].strip("'\"")).rstrip("/")
                # conda runs pip in the file's folder: a relative path may be written out absolute
                where = str((entry.path.parent / tail).resolve()) if "://" not in tail else tail
                if not any(tail.split("/")[-1] in x or where in x for x in opip):
                    problems.append(f"R1 dropped pip line {line!r}")
            continue
        if n in OWNED_PIP or NVIDIA_WHEEL_RE.match(n):
            continue
        if n not in out_pip_names:
            problems.append(f"R1 dropped pip requirement {line!r}")
        elif re.sub(r"\s+", "", requirement_part(line)) not in out_pip_lines and n not in COUPLED_PIP:
            problems.append(f"R1 changed pip requirement {line!r} -> {out_pip_names[n]!r}")
    # R2 invent
    in_names = {conda_name(s) for s in entry.conda} | {pip_name(x) for x in entry.pip}
    for s in oconda:
        n = conda_name(s) or ""
        if n not in in_names and n not in OWNED_CONDA and n not in CUDA_RUNTIME and n not in ("python", "pip"):
            problems.append(f"R2 wrote conda package {n!r}, which the file does not have and envkit does not own")
    for x in opip:
        n = pip_name(x)
        if n is None:
            for m in _WHL_RE.finditer(x):
                if m.group(1).split("/")[0] not in PYTORCH_VARIANTS:
                    problems.append(f"R2 wrote an index PyTorch never published: {x}")
            for m in _PYG_RE.finditer(x):
                tm, cu = m.group(1), m.group(2)
                if cu != "cpu" and tm in TORCH_CU and cu not in TORCH_CU[tm]:
                    problems.append(f"R2 wrote a PyG page for torch {tm} + {cu}, a pair PyTorch never built: {x}")
            continue
        mm = NVIDIA_WHEEL_RE.match(n)
        if mm and mm.group(1) not in ("11", "12", "13"):
            problems.append(f"R2 wrote {n}: NVIDIA's wheels are -cu11/-cu12/-cu13")
        if n not in in_names and n not in OWNED_PIP and not mm:
            problems.append(f"R2 wrote pip requirement {n!r}, which the file does not have and envkit does not own")
    # R3 bound: python and torch constraints of the file
    if in_py and out_py:
        ov = _exact(out_py)
        iv = _exact(in_py)
        if ov and iv and ov.count(".") == 1:  # envkit writes python=X.Y: the file's X.Y.Z pin is kept at its minor
            iv_minor = _minor(iv)
            if iv_minor != ov:
                problems.append(f"R3 python {ov} breaks the file's python {in_py}")
        elif ov and _spec_ok(ov, in_py, conda=True) is False:
            problems.append(f"R3 python {ov} breaks the file's python {in_py}")
    tin, where = _torch_version(entry.conda, entry.pip)
    tout, owhere = _torch_version(oconda, opip)
    tout_x = _exact(tout or "") if tout else None
    if tin and tout_x and _spec_ok(tout_x, re.sub(r"\+.*$", "", tin), conda=(where == "conda")) is False:
        problems.append(f"R3 torch {tout_x} breaks the file's torch {tin}")
    # R4 runs here
    _, cc, (dmaj, dmin) = MACHINES[machine]
    out_cuda: tuple[int, int] | None = None
    for s in oconda:
        n, v, b = conda_parts(s)
        if n in ("cuda-version", "pytorch-cuda", "cudatoolkit"):
            m = re.match(r"^[=<>~]*\s*(\d+)\.(\d+)", v)
            if m:
                out_cuda = (int(m.group(1)), int(m.group(2)))
    for x in opip:
        for m in _WHL_RE.finditer(x):
            cm = re.match(r"^cu(\d+)(\d)$", m.group(1))
            if cm:
                out_cuda = (int(cm.group(1)), int(cm.group(2)))
        lm = re.search(r"^torch\s*==\s*[\d.]+\+cu(\d+)(\d)\b", x)
        if lm:
            out_cuda = (int(lm.group(1)), int(lm.group(2)))
    if out_cuda and out_cuda[0] > dmaj:
        problems.append(f"R4 CUDA {out_cuda[0]}.{out_cuda[1]} needs a newer driver than {MACHINES[machine][0]} "
                        f"(CUDA {dmaj}.{dmin})")
    tmin = _minor(tout_x)
    # a CPU torch (the pytorch channel's cpuonly, conda-forge's pytorch-cpu, a +cpu wheel) has no sm_XX code to lack,
    # even when the file keeps a CUDA runtime for jax or tensorflow beside it
    torch_cpu = any(conda_parts(s)[0] in ("cpuonly", "pytorch-cpu") for s in oconda) or \
        any(re.match(r"^torch\s*==\s*[\d.]+\+cpu\b", x) for x in opip)
    if tout_x and cc == "9.0" and tmin and tmin.startswith("1.") and out_cuda is not None and not torch_cpu:
        problems.append(f"R4 torch {tout_x} has no sm_90 code (H200)")
    if cc == "6.1" and out_cuda and out_cuda[0] >= 13:
        problems.append("R4 CUDA 13 has no sm_61 code (GTX 1080 Ti)")
    if cc == "6.1" and owhere == "pip" and tmin and out_cuda and out_cuda >= (12, 8) and _vt(tmin) >= (2, 8):
        problems.append(f"R4 PyTorch's cu{out_cuda[0]}{out_cuda[1]} wheels of {tmin} have no sm_61 (GTX 1080 Ti)")
    # R5 coupled
    tin_x = _exact(tin or "")
    if tin_x and tout_x and _minor(tin_x) != _minor(tout_x):
        for line in entry.pip:
            n = pip_name(line)
            if n in COUPLED_PIP and pip_version(line) and re.sub(r"\s+", "", line) in out_pip_lines:
                problems.append(f"R5 torch moved {tin_x} -> {tout_x} but {line!r} (built for torch {_minor(tin_x)}) stays")
    # the legacy pytorch channel's builds share the pip wheels' ABI (PyG's own install docs paired them); conda-forge's
    # do not (cxx11 ABI, its own CUDA libraries): pyg's +ptXXcuYYY wheels beside a conda-forge torch fail to load
    out_channels = [str(c) for c in out.get("channels") or []]
    legacy_channel = any(c.rstrip("/").split("/")[-1] == "pytorch" for c in out_channels) or any(
        s.strip().startswith("pytorch::") for s in oconda)
    conda_torch = any(conda_name(s) in ("pytorch", "pytorch-gpu") for s in oconda) and not legacy_channel
    if conda_torch:
        for x in opip:
            if _PTCU_RE.search(x) or "data.pyg.org" in x:
                problems.append(f"R5 {x!r} (a PyTorch-wheel ABI build) beside a conda torch")
    return problems


def _vt(minor: str) -> tuple[int, int]:
    a, b = minor.split(".")[:2]
    return int(a), int(b)


# -- expectations and the tally --------------------------------------------------------------------------------------
def load_expected() -> dict[str, Any]:
    p = CORPUS / "expected.yaml"
    return (yaml.safe_load(p.read_text(encoding="utf-8")) or {}) if p.exists() else {}


def verdict(entry_id: str, machine: str, run: Run, problems: list[str], expected: dict[str, Any]) -> tuple[str, str]:
    exp = (expected.get(entry_id) or {}).get(machine)
    if problems and problems[0].startswith("crash"):
        return "crash", problems[0]
    if problems:
        return "wrong", "; ".join(problems)
    if run.code == 1:
        first = next((ln for ln in run.err.splitlines() if ln.startswith("error:")), run.err.strip()[:200])
        if isinstance(exp, dict) and "refuse" in exp:
            if str(exp["refuse"]).lower() in run.err.lower():
                return "refused", first
            return "wrong", f"refused, but not for the reviewed reason ({exp['refuse']!r}): {first}"
        if exp == "clean":
            return "wrong", f"refused, but the reviewed expectation is a clean output: {first}"
        return "refused?", first
    if isinstance(exp, dict) and "refuse" in exp:
        return "wrong", f"wrote a file, but the reviewed expectation is a refusal ({exp['refuse']!r})"
    return "clean", ""


def heldout() -> set[str]:
    p = CORPUS / "HELDOUT.txt"
    lines = p.read_text(encoding="utf-8").splitlines() if p.exists() else []
    return {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}


def entries(which: str) -> list[Entry]:
    held = heldout()
    out = []
    for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        if which == "dev" and folder.name in held or which == "heldout" and folder.name not in held:
            continue
        e = load_entry(folder)
        if e is not None:
            out.append(e)
    return out


def check_one(folder: str) -> list[tuple[str, str, str, str]]:
    entry = load_entry(CORPUS / folder)
    assert entry is not None
    expected = load_expected()
    rows = []
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        for machine in MACHINES:
            run = run_render(entry.path, machine, Path(tmp))
            v, why = verdict(entry.id, machine, run, judge(entry, machine, run), expected)
            rows.append((entry.id, machine, v, why))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--heldout", action="store_true", help="only the held-back third")
    g.add_argument("--all", action="store_true", help="the whole corpus")
    g.add_argument("--self-test", action="store_true", help="test the judge itself")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--tsv", help="write every verdict here (id, machine, verdict, why)")
    ap.add_argument("--only", help="only entries whose id contains this")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    which = "heldout" if a.heldout else "all" if a.all else "dev"
    es = [e for e in entries(which) if not a.only or a.only in e.id]
    rows: list[tuple[str, str, str, str]] = []
    if a.jobs > 1:
        with cf.ProcessPoolExecutor(a.jobs) as ex:
            for r in ex.map(check_one, [e.id for e in es]):
                rows += r
    else:
        for e in es:
            rows += check_one(e.id)
    tally: dict[str, int] = {}
    for _, _, v, _ in rows:
        tally[v] = tally.get(v, 0) + 1
    if a.tsv:
        Path(a.tsv).write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    if not a.quiet and which != "heldout":
        for r in rows:
            if r[2] not in ("clean",):
                print("\t".join(r))
    print(f"{which}: {len(es)} files x {len(MACHINES)} machines = {len(rows)}: "
          + ", ".join(f"{k} {tally.get(k, 0)}" for k in ("clean", "refused", "refused?", "wrong", "crash")))
    return 0


def self_test() -> int:
    """The judge on hand-made results: each rule must fire on its case and stay quiet on a clean one."""
    tmp = Path(tempfile.mkdtemp(prefix="judge-"))
    src = tmp / "environment.yml"
    src.write_text("name: t\nchannels: [pytorch, conda-forge]\ndependencies:\n  - python=3.8\n  - pytorch=2.2.1\n"
                   "  - libcurl\n  - mmcv=1.7=cuda112py38h1\n  - pip\n  - pip:\n    - nvidia-cublas-cu12==12.4.5.8\n"
                   "    - triton==2.2.0\n    - einops==0.7.0\n", encoding="utf-8")
    e = load_entry(tmp)
    assert e is not None
    good = ("name: t\nchannels: [conda-forge]\ndependencies:\n  - python=3.8\n  - pytorch=2.2.1\n  - cuda-version=12.0\n"
            "  - libcurl\n  - mmcv=1.7=*cuda*\n  - pip\n  - pip:\n    - nvidia-cublas-cu12==12.4.5.8\n"
            "    - triton==2.2.0\n    - einops==0.7.0\n")
    cases = {
        "clean": (good, []),
        "R1 drop": (good.replace("  - libcurl\n", ""), ["R1 dropped conda package 'libcurl'"]),
        "R1 cuda build": (good.replace("=*cuda*", ""), ["R1 the CUDA build of mmcv"]),
        "R2 cu120": (good.replace("cublas-cu12==", "cublas-cu120=="), ["R2 wrote nvidia-cublas-cu120"]),
        "R3 python": (good.replace("python=3.8", "python=3.12"), ["R3 python 3.12 breaks"]),
        "R4 cuda": (good.replace("cuda-version=12.0", "cuda-version=13.3"), ["R4 CUDA 13.3 needs"]),
        "R5 coupled": (good.replace("pytorch=2.2.1", "pytorch=2.8.0"), ["R5 torch moved", "R3 torch 2.8.0 breaks"]),
    }
    assert requirement_part("--editable=git+ssh://h/x.git#egg=x") == requirement_part("-e git+ssh://h/x.git#egg=x")
    assert requirement_part("-e ./a") != requirement_part("-e ./b")
    old_torch = good.replace("pytorch=2.2.1", "pytorch=1.13.0").replace("cuda-version=12.0", "cudatoolkit=11.3")
    h200_cases = {
        "R4 sm_90": (old_torch, ["R4 torch 1.13.0 has no sm_90"]),
        "R4 cpu torch": (old_torch.replace("  - cudatoolkit=11.3\n", "  - cudatoolkit=11.3\n  - cpuonly\n"), []),
    }
    failed = 0
    for name, (text, want) in cases.items():
        machine = "a10"
        got = judge(e, machine, Run(0, text, "", False))
        ok = (not want and not got) or (bool(want) and all(any(g.startswith(w) for g in got) for w in want))
        print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {got}"))
        failed += not ok
    for name, (text, want) in h200_cases.items():
        got = [g for g in judge(e, "h200", Run(0, text, "", False)) if g.startswith("R4")]
        ok = (not want and not got) or (bool(want) and all(any(g.startswith(w) for g in got) for w in want))
        print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {got}"))
        failed += not ok
    got = judge(e, "a10", Run(1, "", "error: --torch '2.11.0.dev1' is not a version\nfix: --torch '2.11' ...", False))
    ok = any(g.startswith("R6") for g in got)
    print(("ok   " if ok else "FAIL ") + "R6 flag")
    failed += not ok
    got = judge(e, "a10", Run(1, "", "Traceback (most recent call last):\n  boom", True))
    ok = bool(got) and got[0].startswith("crash")
    print(("ok   " if ok else "FAIL ") + "crash")
    failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

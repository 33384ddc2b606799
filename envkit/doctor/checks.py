"""doctor's checks: each one reads the Facts of an env (and the machine, the environment variables) and
returns one Finding: a status, what it found, and the exact command that fixes it.

Rules and their sources are in each check's docstring; no check reads a file the Facts do not name
(facts.py reads the env) beyond the CUDA toolkit next to nvcc, the user site and LD_LIBRARY_PATH folders.
"""

from __future__ import annotations

import calendar
import os
import re
import shutil
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from envkit.compat import driver_version, load, parse_cc
from envkit.compat.select import covers, select
from envkit.doctor.facts import Facts, TorchCopy, norm, nvidia_pins, version_py
from envkit.errors import EnvkitError
from envkit.fsutil import sha256_of
from envkit.models import Machine, Request
from envkit.plan import with_pytorch_index
from envkit.prefix.locations import search_dirs
from envkit.prefix.records import conda_meta, read_json_quiet, read_text_quiet

OK, WARN, PROBLEM, SKIP = "ok", "warn", "problem", "skip"
VERIFY_MAX_AGE_DAYS = 30  # a PASS older than this is reported as stale
# conda's "defaults" channels (conda docs, "default_channels": repo.anaconda.com/pkgs/main, /r, /msys2)
DEFAULTS_NAMES = ("main", "free", "r", "msys2", "pro")
# CUDA libraries whose soname major is the CUDA major (NVIDIA CUDA Toolkit release notes, "CUDA
# components"); cuDNN and NCCL carry their own majors and only count as "a CUDA library found".
_CUDA_SONAME = re.compile(r"^lib(cudart|cublas|cublasLt|cufft|curand|cusolver|cusparse|nvJitLink|nvrtc|cupti)"
                          r"\.so\.(\d+)")
_OTHER_SONAME = re.compile(r"^lib(cudnn|nccl)(_\w+)?\.so\.(\d+)")
# pip packages of CUDA components whose version major is the CUDA major (PyPI nvidia-* projects)
_NVIDIA_CUDA_VERSIONED = {"nvidia-cuda-runtime", "nvidia-cublas", "nvidia-cuda-nvrtc", "nvidia-cuda-cupti",
                          "nvidia-cufft", "nvidia-curand", "nvidia-cusolver", "nvidia-cusparse", "nvidia-nvjitlink",
                          "nvidia-nvtx", "nvidia-cuda-nvcc"}


@dataclass(frozen=True)
class Finding:
    """One check's verdict: status (ok/warn/problem/skip), what it found, the command that fixes it."""

    check: str
    status: str
    found: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status, "found": self.found, "fix": self.fix}


# -- what the fixes name ----------------------------------------------------------------------------
def _env_ref(facts: Facts) -> str:
    """How commands name this env: NAME when envkit finds it by name, else --prefix P."""
    if facts.prefix.parent in search_dirs():
        return facts.prefix.name
    return f"--prefix {facts.prefix}"


def _rebuild(facts: Facts) -> str:
    """Rebuild for this machine: envkit's own spec when envkit made it, else via an export."""
    ref = _env_ref(facts)
    name = facts.prefix.name
    target = name if not ref.startswith("--") else f"{name} --prefix {facts.prefix}"
    if facts.created:
        if facts.created.get("file"):
            return f"envkit create {target} --file {facts.created['file']} --force"
        spec = facts.created.get("spec") or "dl_train"
        return f"envkit create {target} --spec {spec} --force"
    return (f"envkit export {ref} --no-pip -o {name}.yml && "
            f"envkit create {target} --file {name}.yml --force")


def _py(facts: Facts) -> str:
    return str(facts.prefix / "bin" / "python")


def _driver_text(version: Version) -> str:
    """580.65.6 (a parsed Version) -> 580.65.06, as NVIDIA writes driver versions."""
    parts = [int(p) for p in str(version).split(".")]
    return ".".join([str(parts[0]), *(f"{p:02d}" for p in parts[1:])])


def _gpu_machine(machine: Machine) -> bool:
    drv = machine.driver
    return bool(drv and drv.cuda and not machine.gpus_hidden and (machine.gpus or not machine.gpus_known))


def _install_cmd(facts: Facts, copy: TorchCopy, machine: Machine) -> tuple[str | None, str | None]:
    """(exact command installing the build envkit selects here for this torch, or None; why not)."""
    minor = ".".join(copy.version.partition("+")[0].split(".")[:2])
    request = Request(cuda="auto", torch=minor, python=facts.python, flavor=copy.flavor)
    try:
        sel = select(machine, request)
    except EnvkitError as exc:
        try:
            sel = select(machine, Request(cuda="auto", python=facts.python, flavor=copy.flavor))
        except EnvkitError:
            return None, exc.message
    if copy.source == "pip":
        sel = with_pytorch_index(sel)  # ENVKIT_PYTORCH_INDEX: the mirror, as render and detect use it
        cmd = f"{_py(facts)} -m pip install --force-reinstall --no-deps " + " ".join(sel.pip_specs)
        if sel.pip_index_url:
            cmd += f" --index-url {sel.pip_index_url}"
        return cmd, None
    specs = " ".join(f"'{s}'" for s in sel.specs if not s.startswith("python="))
    channels = " ".join(f"-c {c}" for c in sel.channels)
    return f"conda install -p {facts.prefix} --override-channels {channels} {specs}", None


# -- the checks: each reads Facts (and the machine or environ), returns one Finding --------------------
def check_python(facts: Facts) -> Finding:
    py = facts.prefix / "bin" / "python"
    if not os.path.lexists(py):
        return Finding("python", PROBLEM, f"{py} is missing: nothing can run in this env", _rebuild(facts))
    if not py.exists():
        return Finding("python", PROBLEM, f"{py} is a broken link (to {os.readlink(py)}): the env was copied "
                       "or its base interpreter removed", _rebuild(facts))
    return Finding("python", OK, f"python {facts.python or '?'} at {py}")


def check_torch_copies(facts: Facts, copies: Sequence[TorchCopy], loaded: TorchCopy | None, why: str) -> Finding:
    if not copies:
        return Finding("torch-copies", SKIP, "no torch in this env (no conda pytorch record, no pip torch)")
    conda = [c for c in copies if c.source == "conda"]
    pip = [c for c in copies if c.source == "pip"]
    if conda and pip:
        which = f"; `import torch` loads the pip one ({why})" if loaded and loaded.source == "pip" else (
            f"; `import torch` loads the conda one ({why})" if loaded else "")
        fix = (f"{_py(facts)} -m pip uninstall -y torch && {_rebuild(facts)}"
               if loaded is None or loaded.source == "pip" else f"{_py(facts)} -m pip uninstall -y torch")
        return Finding("torch-copies", PROBLEM,
                       f"two copies of torch: conda pytorch {conda[0].version} ({conda[0].detail}) and pip torch "
                       f"{pip[0].version} ({pip[0].detail}){which}; `conda list` and `pip list` disagree about it",
                       fix)
    if len(copies) > 1:
        return Finding("torch-copies", PROBLEM, "several torch installs: "
                       + ", ".join(f"{c.source} {c.version}" for c in copies), _rebuild(facts))
    only = copies[0]
    return Finding("torch-copies", OK, f"one torch: {only.source} {only.version} ({only.detail})")


def _user_site_first(facts: Facts, environ: Mapping[str, str]) -> bool:
    """site.py adds the user site before the prefix's site-packages, except in a venv (pyvenv.cfg:
    after the venv's own, or not at all) and with PYTHONNOUSERSITE (Python docs, `site`)."""
    if environ.get("PYTHONNOUSERSITE"):
        return False
    return not (facts.prefix / "pyvenv.cfg").is_file()


def check_torch_shadow(facts: Facts, environ: Mapping[str, str]) -> Finding:
    """A torch on PYTHONPATH or in the user site comes before the env's site-packages (Python docs, site)."""
    shadows: list[str] = []
    fixes: list[str] = []
    entries = [e for e in environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    bad = [e for e in entries if os.path.isfile(os.path.join(e, "torch", "__init__.py"))]
    if bad:
        shadows.append("PYTHONPATH: " + ", ".join(f"{e}/torch" for e in bad))
        keep = os.pathsep.join(e for e in entries if e not in bad)
        fixes.append(f"export PYTHONPATH={keep}" if keep else "unset PYTHONPATH")
    if facts.python and _user_site_first(facts, environ):
        base = environ.get("PYTHONUSERBASE") or os.path.join(os.path.expanduser("~"), ".local")
        user = Path(base) / "lib" / f"python{facts.python}" / "site-packages"
        if (user / "torch" / "__init__.py").is_file():
            vp = version_py(user)
            shadows.append(f"the user site {user}/torch" + (f" ({vp[0]})" if vp and vp[0] else "")
                           + " (pip install --user)")
            fixes.append(f"export PYTHONNOUSERSITE=1  (or remove that copy: {_py(facts)} -m pip uninstall -y torch "
                         "takes the first torch on sys.path, the user-site one)")
    if not shadows:
        return Finding("torch-shadow", OK, "no torch on PYTHONPATH or in the user site ahead of the env's")
    return Finding("torch-shadow", PROBLEM, "`import torch` in this env loads a torch from outside it: "
                   + "; ".join(shadows), " && ".join(fixes))


def check_torch_build(facts: Facts, loaded: TorchCopy | None, machine: Machine) -> Finding:
    """CPU build on a GPU machine; build CUDA newer than the driver (NVIDIA CUDA compatibility guide)."""
    if loaded is None:
        return Finding("torch-build", SKIP, "no importable torch to check")
    what = f"torch {loaded.version} ({loaded.source}, " + (
        "CPU build" if loaded.cuda is None else f"CUDA {loaded.cuda}") + ")"
    drv = machine.driver
    if loaded.cuda == "?":
        return Finding("torch-build", WARN, f"{what}: its CUDA level could not be read statically",
                       f"envkit verify {_env_ref(facts)}")
    if loaded.cuda is None:
        if _gpu_machine(machine):
            cmd, why_not = _install_cmd(facts, loaded, machine)
            return Finding("torch-build", PROBLEM, f"{what} on a GPU machine ({machine.describe()}): the GPU "
                           "is never used", cmd or f"{_rebuild(facts)}  ({why_not})")
        return Finding("torch-build", OK, f"{what}; this machine has no usable GPU ({machine.describe()})")
    if drv is None:
        return Finding("torch-build", WARN, f"{what} but no NVIDIA driver here ({machine.describe()}): "
                       "the env was made for a GPU machine; torch runs on the CPU only",
                       "run it on a GPU machine, or rebuild for CPU: " + _rebuild(facts) + " --cuda cpu")
    if not drv.cuda:
        return Finding("torch-build", SKIP, f"{what}; driver {drv.version} reports no CUDA level")
    build, have = Version(loaded.cuda), Version(drv.cuda)
    if build <= have:
        return Finding("torch-build", OK, f"{what} <= CUDA {drv.cuda} that driver {drv.version} supports")
    data = load()
    needed = next((_driver_text(m) for c, m, _s in data.driver_cuda if Version(c) == Version(f"{build.major}.{build.minor}")),
                  None)
    floor = data.minor_compat_floor.get(build.major)
    cmd, why_not = _install_cmd(facts, loaded, machine)
    fix = cmd or _rebuild(facts)
    fix += f"  (or update the NVIDIA driver to >= {needed or 'one supporting CUDA ' + loaded.cuda})"
    if build.major == have.major and floor is not None and driver_version(drv.version) >= floor:
        return Finding("torch-build", WARN,
                       f"{what} is newer than CUDA {drv.cuda} of driver {drv.version}; it runs through NVIDIA "
                       f"minor version compatibility (CUDA {build.major}.x needs >= {_driver_text(floor)}) with a reduced "
                       "feature set (no PTX JIT)", fix)
    return Finding("torch-build", PROBLEM,
                   f"{what} needs a driver for CUDA {loaded.cuda}, but driver {drv.version} supports CUDA "
                   f"{drv.cuda}: torch.cuda.is_available() is False ('driver too old')"
                   + (f"; CUDA {loaded.cuda} wants driver >= {needed}" if needed else ""), fix)


def _toolkit_version(nvcc: str) -> str | None:
    """A CUDA toolkit's version from the files next to nvcc (version.json since 11.1, version.txt before)."""
    root = Path(nvcc).resolve().parent.parent
    data = read_json_quiet(root / "version.json")
    version = ((data.get("cuda") or {}).get("version")) if isinstance(data.get("cuda"), dict) else None
    if version:
        return str(version)
    try:
        match = re.search(r"CUDA Version\s+([\d.]+)", read_text_quiet(root / "version.txt"))
    except OSError:
        return None
    return match.group(1) if match else None


def check_cuda_levels(facts: Facts, loaded: TorchCopy | None, machine: Machine, environ: Mapping[str, str]) -> Finding:
    """The three CUDA numbers people confuse (user-pains B3), side by side, and which one matters."""
    drv = machine.driver
    parts = [f"driver: CUDA {drv.cuda or '?'} at most (nvidia-smi's 'CUDA Version')" if drv else "driver: none"]
    if loaded is not None:
        build = "CPU build" if loaded.cuda is None else f"CUDA {loaded.cuda}"
        parts.append(f"torch: {build} (torch.version.cuda; must be <= the driver's, this is the one that matters)")
    nvcc = str(facts.prefix / "bin" / "nvcc") if (facts.prefix / "bin" / "nvcc").exists() else \
        shutil.which("nvcc", path=environ.get("PATH"))
    if nvcc:
        parts.append(f"nvcc: CUDA {_toolkit_version(nvcc) or '?'} at {nvcc} (a compiler toolkit for building "
                     "extensions; torch does not use it at run time)")
    return Finding("cuda-levels", OK, "; ".join(parts))


def check_gpu_arch(facts: Facts, loaded: TorchCopy | None, machine: Machine) -> Finding:
    """Every visible GPU covered by the build's arch list (compat data; NVIDIA binary compatibility)."""
    if loaded is None or loaded.cuda in (None, "?") or not machine.gpus:
        return Finding("gpu-arch", SKIP, "no CUDA torch or no visible GPU to compare")
    data = load()
    minor = ".".join(loaded.version.partition("+")[0].split(".")[:2])
    release = data.release(minor)
    build = None
    if release is not None:
        build = next((b for b in release.builds.get(loaded.flavor, ()) if b.cuda == loaded.cuda), None)
    if build is None:
        return Finding("gpu-arch", SKIP, f"torch {minor} with CUDA {loaded.cuda} ({loaded.flavor}) is not in "
                       "envkit's compatibility data: arch list unknown", f"envkit verify {_env_ref(facts)}")
    missing = [g for g in machine.gpus if covers(build, parse_cc(g.compute_capability), data) is None]
    if missing:
        gpus = ", ".join(f"GPU {g.index} {g.name} (sm_{g.compute_capability.replace('.', '')})" for g in missing)
        cmd, why_not = _install_cmd(facts, loaded, machine)
        return Finding("gpu-arch", PROBLEM,
                       f"{gpus} not in the {build.label} build of torch {minor} (archs {build.archs.describe()}): "
                       "'no kernel image is available for execution on the device'",
                       cmd or f"{why_not}; {_rebuild(facts)}")
    return Finding("gpu-arch", OK, f"every visible GPU is covered by the {build.label} build "
                   f"({build.archs.describe()})")


def _machine_key(machine: Mapping[str, Any] | None) -> tuple[str | None, tuple[str, ...]]:
    drv = (machine or {}).get("driver") or {}
    ccs = tuple(sorted(str(g.get("compute_capability")) for g in (machine or {}).get("gpus") or []))
    return drv.get("cuda"), ccs


def _describe_json(machine: Mapping[str, Any] | None) -> str:
    drv = (machine or {}).get("driver")
    text = f"driver {drv.get('version')} (CUDA {drv.get('cuda')})" if drv else "no NVIDIA driver"
    gpus = (machine or {}).get("gpus") or []
    if gpus:
        text += "; GPUs " + ", ".join(f"sm_{str(g.get('compute_capability')).replace('.', '')}" for g in gpus)
    return text


def check_made_for(facts: Facts, machine: Machine) -> Finding:
    """.envkit/create.json's machine and selection vs what detect + select say here."""
    if not facts.created:
        return Finding("made-for", SKIP, "not made by envkit (no .envkit/create.json)")
    then = facts.created.get("machine") or {}
    sel = facts.created.get("selection") or {}
    now_json = machine.to_json()
    if not sel:
        return Finding("made-for", SKIP, "create.json records no selection (made from a file as is, or a lock)")
    try:
        here = select(machine, Request(cuda="auto", torch=sel.get("torch"), python=sel.get("python"),
                                       flavor=sel.get("flavor") or "conda-forge"))
        here_text = f"CUDA {here.cuda} ({here.variant})" if here.cuda else "the CPU build"
    except EnvkitError as exc:
        here, here_text = None, f"no build ({exc.message})"
    made = f"CUDA {sel.get('cuda')} ({sel.get('variant')})" if sel.get("cuda") else "the CPU build"
    if here is not None and here.cuda == sel.get("cuda"):
        return Finding("made-for", OK, f"made with {made}; envkit selects the same build on this machine")
    planned = facts.created.get("cuda_override")
    was = _describe_json(then) + (f", planned for CUDA {planned}" if planned else "")
    same_hw = _machine_key(then) == _machine_key(now_json) and not planned
    return Finding("made-for", WARN,
                   f"made for a different machine: created with {made} for {was}; on this machine "
                   f"({machine.describe()}) envkit selects {here_text}"
                   + (" (same hardware: the compatibility data changed)" if same_hw else ""),
                   _rebuild(facts))


def check_nvidia_libs(facts: Facts, loaded: TorchCopy | None) -> Finding:
    """pip nvidia-* CUDA libraries vs torch's CUDA and the pins in torch's own METADATA."""
    libs = [d for d in facts.pip if norm(d.name).startswith("nvidia-")]
    if not libs:
        return Finding("nvidia-pip-libs", SKIP, "no pip nvidia-* libraries")
    torch_dist = next((d for d in facts.pip if norm(d.name) == "torch"), None)
    pins = dict(nvidia_pins(torch_dist)) if torch_dist else {}
    wrong: list[str] = []
    reinstall: list[str] = []
    remove: list[str] = []
    torch_cuda = loaded.cuda if loaded and loaded.cuda not in (None, "?") else None
    major = torch_cuda.split(".")[0] if torch_cuda else None
    for lib in libs:
        name = norm(lib.name)
        pinned = pins.get(name)
        if pinned and pinned != lib.version:
            wrong.append(f"{lib.name} {lib.version} (torch {torch_dist.version if torch_dist else ''} pins {pinned})")
            reinstall.append(f"{name}=={pinned}")
            continue
        suffix = re.search(r"-cu(\d+)$", name)
        lib_major = suffix.group(1) if suffix else (
            lib.version.split(".")[0] if name in _NVIDIA_CUDA_VERSIONED else None)
        if major and lib_major and lib_major != major:
            wrong.append(f"{lib.name} {lib.version} (CUDA {lib_major}.x; torch is built for CUDA {torch_cuda})")
            remove.append(name)
    if not wrong:
        return Finding("nvidia-pip-libs", OK, f"{len(libs)} pip nvidia-* libraries match torch's CUDA")
    fixes = []
    if reinstall:
        fixes.append(f"{_py(facts)} -m pip install --force-reinstall --no-deps " + " ".join(reinstall))
    if remove:
        fixes.append(f"{_py(facts)} -m pip uninstall -y " + " ".join(remove))
    fix = " && ".join(fixes)
    return Finding("nvidia-pip-libs", PROBLEM, "pip CUDA libraries that do not match torch: " + "; ".join(wrong)
                   + " (undefined symbol / wrong library at import)", fix)


def _cuda_libs(directory: str) -> list[tuple[str, str | None]]:
    """(file, CUDA major or None) for the CUDA libraries in one directory."""
    out: list[tuple[str, str | None]] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for name in sorted(names):
        match = _CUDA_SONAME.match(name)
        if match:
            out.append((name, match.group(2) if match.group(1) in ("cudart", "cublas", "cublasLt") else None))
        elif _OTHER_SONAME.match(name):
            out.append((name, None))
    return out


def check_ld_library_path(facts: Facts, loaded: TorchCopy | None, environ: Mapping[str, str]) -> Finding:
    """LD_LIBRARY_PATH is searched before RUNPATH (ld.so(8)): a system CUDA there shadows the env's libraries."""
    sources = [("the shell", environ.get("LD_LIBRARY_PATH", ""))]
    if facts.state_vars.get("LD_LIBRARY_PATH"):
        sources.append(("conda-meta/state (conda env config vars)", facts.state_vars["LD_LIBRARY_PATH"]))
    prefix = str(facts.prefix)
    shadows: list[str] = []
    fixes: list[str] = []
    for origin, value in sources:
        dirs = [d for d in value.split(os.pathsep) if d]
        bad = []
        for d in dirs:
            if os.path.abspath(d).startswith(prefix + os.sep):
                continue
            libs = _cuda_libs(d)
            if libs:
                bad.append(d)
                majors = sorted({m for _n, m in libs if m})
                shadows.append(f"{d} ({', '.join(n for n, _m in libs[:4])}{' ...' if len(libs) > 4 else ''}"
                               + (f"; CUDA {'/'.join(majors)}.x" if majors else "") + f", from {origin})")
        if bad:
            keep = os.pathsep.join(d for d in dirs if d not in bad)
            if origin == "the shell":
                fixes.append(f"export LD_LIBRARY_PATH={keep}" if keep else "unset LD_LIBRARY_PATH")
            else:
                fixes.append(f"conda env config vars unset LD_LIBRARY_PATH -p {facts.prefix}")
    if not shadows:
        return Finding("ld-library-path", OK, "LD_LIBRARY_PATH holds no CUDA libraries outside the env")
    torch = f" torch is built for CUDA {loaded.cuda};" if loaded and loaded.cuda not in (None, "?") else ""
    return Finding("ld-library-path", PROBLEM,
                   "LD_LIBRARY_PATH puts CUDA libraries from outside the env ahead of the env's own:"
                   f"{torch} " + "; ".join(shadows), " && ".join(fixes))


def _is_defaults(channel: str) -> bool:
    return channel in DEFAULTS_NAMES or "repo.anaconda.com/pkgs/" in channel \
        or any(channel.endswith(f"/pkgs/{n}") for n in DEFAULTS_NAMES)


def check_channels(facts: Facts) -> Finding:
    """conda-forge and defaults in one env: ABI-incompatible builds (conda-forge docs, 'mixing channels')."""
    forge = [r for r in facts.records if r.channel == "conda-forge" or r.channel.endswith("/conda-forge")]
    defaults = [r for r in facts.records if _is_defaults(r.channel)]
    if forge and defaults:
        names = sorted(r.name for r in defaults)
        shown = ", ".join(names[:6]) + (f" (+{len(names) - 6} more)" if len(names) > 6 else "")
        return Finding("channels", PROBLEM,
                       f"{len(defaults)} package(s) from defaults ({shown}) next to {len(forge)} from conda-forge: "
                       "the two channels' builds are not ABI-compatible (libcublas/libstdc++ symbol errors)",
                       f"conda install -p {facts.prefix} --override-channels -c conda-forge " + " ".join(names))
    used = sorted({r.channel for r in facts.records if r.channel})
    return Finding("channels", OK, "channels: " + (", ".join(used) or "none recorded"))


def check_cudatoolkit(facts: Facts) -> Finding:
    """cudatoolkit (CUDA <= 11.8, one package) next to cuda-version >= 12 (split CUDA packages): two runtimes."""
    tk = next((r for r in facts.records if r.name == "cudatoolkit"), None)
    cv = next((r for r in facts.records if r.name == "cuda-version"), None)
    if tk is None or cv is None:
        return Finding("cudatoolkit", SKIP if tk is None and cv is None else OK,
                       "cudatoolkit: " + (tk.version if tk else "absent") + ", cuda-version: "
                       + (cv.version if cv else "absent"))
    tk_mm = ".".join(tk.version.split(".")[:2])
    cv_mm = ".".join(cv.version.split(".")[:2])
    if tk_mm == cv_mm:
        return Finding("cudatoolkit", OK, f"cudatoolkit {tk.version} matches cuda-version {cv.version}")
    return Finding("cudatoolkit", PROBLEM,
                   f"cudatoolkit {tk.version} next to cuda-version {cv.version}: two CUDA runtimes in one env "
                   "(cudatoolkit is the pre-12 single package; cuda-version >= 12 means the split cuda-* packages)",
                   f"conda remove -p {facts.prefix} cudatoolkit")


TEXT_HASH_LIMIT = 1 << 20  # prefix-rewritten text files are scripts and configs; a bigger one is left to --deep


def check_files(facts: Facts, copies: Sequence[TorchCopy], deep: bool = False) -> Finding:
    """Every file a conda-meta record lists exists, with the recorded size (hardlinked files); prefix-rewritten
    text files (whose size changed at link time) match their sha256_in_prefix; `deep`: every file's sha256, as
    `conda doctor` checks (conda/plugins/subcommands/doctor/health_checks.py, altered files)."""
    missing: dict[str, int] = {}
    changed: dict[str, int] = {}
    examples: list[str] = []
    prefix = str(facts.prefix)
    hashed = 0
    for r in facts.records:
        for rel, digest, rewritten in r.digests:
            if not (deep or rewritten) or "__pycache__" in rel:
                continue
            path = f"{prefix}/{rel}"
            try:
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode) or (not deep and st.st_size > TEXT_HASH_LIMIT):
                    continue
                hashed += 1
                if sha256_of(Path(path)) == digest:
                    continue
            except OSError:
                continue  # missing: counted by the existence check below
            changed[r.name] = changed.get(r.name, 0) + 1
            if len(examples) < 3:
                examples.append(f"{rel} (sha256 differs from the record's"
                                + (" sha256_in_prefix)" if rewritten else ")"))
    for r in facts.records:
        by_hash = {d[0] for d in r.digests} if deep else set()  # with --deep, the hash above judged these
        for rel, size, ptype in r.paths:
            if "__pycache__" in rel or ptype in ("directory", "pyc_file"):
                continue
            try:
                st = os.lstat(f"{prefix}/{rel}")
            except OSError:
                missing[r.name] = missing.get(r.name, 0) + 1
                if len(examples) < 3:
                    examples.append(f"{rel} (missing)")
                continue
            if size is not None and ptype in ("hardlink", "file") and st.st_size != size and rel not in by_hash:
                changed[r.name] = changed.get(r.name, 0) + 1
                if len(examples) < 3:
                    examples.append(f"{rel} ({st.st_size} bytes, record says {size})")
    if facts.errors:
        return Finding("files", PROBLEM, "; ".join(facts.errors), _rebuild(facts))
    if not missing and not changed:
        files = sum(len(r.paths) for r in facts.records)
        how = (f"every file's sha256 matches ({hashed} hashed)" if deep else
               f"{hashed} prefix-rewritten text files match their sha256_in_prefix" if hashed else "")
        return Finding("files", OK, f"{len(facts.records)} conda records, {files} files present with their sizes"
                       + (f"; {how}" if how else ""))
    broken = sorted(set(missing) | set(changed))
    parts = [f"{n}: {missing.get(n, 0)} missing, {changed.get(n, 0)} modified" for n in broken]
    why = ""
    if "pytorch" in broken and any(c.source == "pip" for c in copies):
        why = " (pip install torch replaced conda's files)"
    names = " ".join(broken)
    # an env envkit made is repaired by envkit itself (the damaged cache entries are evicted and fetched again)
    reinstall = (f"envkit install {_env_ref(facts)} --force-reinstall {names}" if facts.created else
                 f"conda install -p {facts.prefix} --force-reinstall {names}")
    return Finding("files", PROBLEM, f"files of {len(broken)} package(s) missing or modified{why}: "
                   + "; ".join(parts) + "; e.g. " + ", ".join(examples),
                   f"{reinstall}  (or: {_rebuild(facts)})")


def _newest_change(facts: Facts) -> float:
    """The last time the env's package set changed: conda-meta entries and dist-info folders."""
    newest = 0.0
    for directory in (conda_meta(facts.prefix), facts.site):
        if directory is None:
            continue
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    if directory == facts.site and not entry.name.endswith(".dist-info"):
                        continue
                    newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
        except OSError:
            continue
    return newest


def check_verify(facts: Facts, machine: Machine, now: float) -> Finding:
    """verify's last result (.envkit/verify.json), its age, and whether the env or machine changed since."""
    ref = _env_ref(facts)
    v = facts.verify
    if not v:
        return Finding("verify", WARN, "never verified: nothing proves this env trains on this GPU",
                       f"envkit verify {ref}")
    outcome = str(v.get("outcome"))
    try:
        at = float(calendar.timegm(time.strptime(str(v.get("time")), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return Finding("verify", WARN, f"verify.json has no readable time (outcome {outcome})", f"envkit verify {ref}")
    age_d = (now - at) / 86400
    age = f"{age_d:.0f} days ago" if age_d >= 1 else f"{(now - at) / 3600:.1f} h ago"
    head = f"last verify {outcome} {age} ({v.get('time')})"
    if outcome == "FAIL":
        return Finding("verify", PROBLEM, f"{head}: {v.get('summary', '')}", f"envkit verify {ref}  (after the fixes above)")
    stale: list[str] = []
    changed = _newest_change(facts)
    if changed > at + 1:
        stale.append("the env changed after it (" + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(changed)) + ")")
    if age_d > VERIFY_MAX_AGE_DAYS:
        stale.append(f"older than {VERIFY_MAX_AGE_DAYS} days")

    if v.get("machine") and _machine_key(v.get("machine")) != _machine_key(machine.to_json()):
        stale.append(f"it ran on another machine ({_describe_json(v.get('machine'))})")
    if outcome == "SKIPPED":
        return Finding("verify", WARN, f"{head}: no GPU check ran" + (f"; stale: {'; '.join(stale)}" if stale else ""),
                       f"envkit verify {ref}")
    if stale:
        return Finding("verify", WARN, f"{head}, stale: " + "; ".join(stale), f"envkit verify {ref}")
    return Finding("verify", OK, head)

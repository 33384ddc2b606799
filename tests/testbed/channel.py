"""A real local conda channel for tests and benchmarks: valid .conda and .tar.bz2 archives
(info/index.json, paths.json, files, has_prefix, link.json), indexed with rattler's own indexer.

The package universe mirrors the shapes envkit meets: a relocatable stand-in `python` (a venv-style
prefix whose bin/pythonX.Y is the test machine's interpreter), `pip` repacked from the running pip,
conda-forge-style `pytorch` cpu/cuda builds gated by `__cuda` + `cuda-version`, the legacy
`pytorch` channel's `pytorch-cuda` / `pytorch-mutex` / `cpuonly`, `torchvision`, noarch packages
with entry points, and a generator of ~100 packages with thousands of files for benchmarks.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import os
import sys
import sysconfig
import tarfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYTAG = f"py{sys.version_info.major}{sys.version_info.minor}"
TIMESTAMP = 1_760_000_000_000  # fixed: the same universe gives the same repodata


@dataclass
class Pkg:
    name: str
    version: str
    build: str
    build_number: int = 0
    subdir: str = "linux-64"
    depends: list[str] = field(default_factory=list)
    constrains: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)  # path -> content
    prefix_files: set[str] = field(default_factory=set)  # text files with PLACEHOLDER
    symlinks: dict[str, str] = field(default_factory=dict)  # path -> target
    noarch: str | None = None  # "python" | "generic"
    entry_points: list[str] = field(default_factory=list)
    fmt: str = ".conda"

    @property
    def stem(self) -> str:
        return f"{self.name}-{self.version}-{self.build}"


def _tar(entries: list[tuple[str, bytes | None, str | None]]) -> bytes:
    """(path, content, symlink target) -> an uncompressed tar, deterministic."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, content, target in sorted(entries, key=lambda e: e[0]):
            info = tarfile.TarInfo(path)
            info.mtime = TIMESTAMP // 1000
            if target is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = target
                tar.addfile(info)
            else:
                assert content is not None
                info.size = len(content)
                info.mode = 0o755 if path.startswith(("bin/", "python-scripts/")) else 0o644
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def _info_files(pkg: Pkg) -> dict[str, bytes]:
    index = {"name": pkg.name, "version": pkg.version, "build": pkg.build, "build_number": pkg.build_number,
             "depends": pkg.depends, "constrains": pkg.constrains, "license": "BSD-3-Clause",
             "timestamp": TIMESTAMP, "subdir": pkg.subdir}
    if pkg.noarch:
        index["noarch"] = pkg.noarch
    else:
        system, _, bits = pkg.subdir.partition("-")
        index.update(arch={"64": "x86_64"}.get(bits, bits), platform=system)
    paths = []
    for path in sorted(set(pkg.files) | set(pkg.symlinks)):
        if path in pkg.symlinks:
            paths.append({"_path": path, "path_type": "softlink", "size_in_bytes": 0,
                          "sha256": hashlib.sha256(pkg.symlinks[path].encode()).hexdigest()})
            continue
        entry = {"_path": path, "path_type": "hardlink", "sha256": hashlib.sha256(pkg.files[path]).hexdigest(),
                 "size_in_bytes": len(pkg.files[path])}
        if path in pkg.prefix_files:
            entry.update(prefix_placeholder=PLACEHOLDER, file_mode="text")
        paths.append(entry)
    info = {
        "info/index.json": json.dumps(index, indent=1, sort_keys=True).encode(),
        "info/paths.json": json.dumps({"paths": paths, "paths_version": 1}, indent=1).encode(),
        "info/files": ("\n".join(p["_path"] for p in paths) + "\n").encode(),
        "info/about.json": json.dumps({"summary": f"envkit test package {pkg.name}"}).encode(),
    }
    if pkg.prefix_files:
        info["info/has_prefix"] = "".join(f"{PLACEHOLDER} text {p}\n" for p in sorted(pkg.prefix_files)).encode()
    if pkg.noarch == "python":
        info["info/link.json"] = json.dumps({"noarch": {"type": "python", "entry_points": pkg.entry_points},
                                             "package_metadata_version": 1}).encode()
    return info


def build(pkg: Pkg, channel: Path) -> Path:
    subdir = channel / pkg.subdir
    subdir.mkdir(parents=True, exist_ok=True)
    payload = [(p, c, None) for p, c in pkg.files.items()] + [(p, None, t) for p, t in pkg.symlinks.items()]
    info = [(p, c, None) for p, c in _info_files(pkg).items()]
    out = subdir / (pkg.stem + pkg.fmt)
    if pkg.fmt == ".tar.bz2":
        out.write_bytes(bz2.compress(_tar(info + payload), 5))
        return out
    import zstandard

    cctx = zstandard.ZstdCompressor(level=3)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
        zf.writestr(f"pkg-{pkg.stem}.tar.zst", cctx.compress(_tar(payload)))
        zf.writestr(f"info-{pkg.stem}.tar.zst", cctx.compress(_tar(info)))
    return out


def index(channel: Path) -> None:
    """rattler's own indexer, without .zst and shards (rattler-notes §2 and §5: no 304/shard trouble)."""
    import asyncio

    from rattler.index import index_fs

    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))


# -- the universe ---------------------------------------------------------------------------------
def host_python() -> Path:
    """The real interpreter behind this one (a venv's python is a link to it)."""
    return Path(getattr(sys, "_base_executable", sys.executable)).resolve()


def python_pkg(*, host_site: list[str] | None = None, system_site: bool = False, version: str | None = None,
               interpreter: Path | None = None) -> Pkg:
    """A relocatable stand-in `python`: a venv-shaped prefix whose interpreter is the test machine's.

    Named `python` with the host's X.Y so rattler lays out noarch-python packages where this
    interpreter looks (rattler-notes §2). `host_site` paths are appended through a .pth file (the
    test venv's site-packages: real CPU torch inside the env); `system_site` exposes the host's own
    site-packages (the GPU machine's torch).
    """
    exe = interpreter or host_python()  # another X.Y-compatible interpreter: one a fresh account can run
    files = {
        "pyvenv.cfg": (f"home = {exe.parent}\ninclude-system-site-packages = {str(system_site).lower()}\n"
                       f"version = {sys.version.split()[0]}\n").encode(),
        f"lib/python{PY}/site-packages/_envkit_standin.py": b"STANDIN = True\n",
        "etc/envkit-standin/prefix.txt": f"prefix={PLACEHOLDER}\n".encode(),
    }
    if host_site:
        files[f"lib/python{PY}/site-packages/_envkit_host_site.pth"] = ("\n".join(host_site) + "\n").encode()
    return Pkg("python", version or sys.version.split()[0], "0_envkit_standin", files=files,
               prefix_files={"etc/envkit-standin/prefix.txt"},
               symlinks={f"bin/python{PY}": str(exe), "bin/python3": f"python{PY}", "bin/python": f"python{PY}"},
               fmt=".tar.bz2")


def pip_pkg() -> Pkg:
    """The running pip, repacked as a noarch-python conda package (INSTALLER says conda)."""
    import pip

    root = Path(pip.__file__).parent
    site = root.parent
    dist = next(site.glob(f"pip-{pip.__version__}.dist-info"))
    files: dict[str, bytes] = {}
    for base in (root, dist):
        for path in base.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                files[f"site-packages/{path.relative_to(site).as_posix()}"] = path.read_bytes()
    files[f"site-packages/{dist.name}/INSTALLER"] = b"conda\n"
    return Pkg("pip", pip.__version__, "pyh_envkit_0", subdir="noarch", noarch="python", depends=["python"],
               files=files, entry_points=["pip = pip._internal.cli.main:main"])


def _site_module(name: str, body: str) -> dict[str, bytes]:
    return {f"lib/python{PY}/site-packages/{name}/__init__.py": body.encode()}


def conda_forge_universe() -> list[Pkg]:
    pkgs: list[Pkg] = []
    py_dep = f"python >={PY},<{PY}.9999"
    for version in ("2.13.0", "2.5.1"):
        pkgs.append(Pkg("pytorch", version, f"cpu_generic_{PYTAG}_h0_0", depends=[py_dep],
                        files=_site_module("pytorch_standin", f"VERSION = '{version}'\nBUILD = 'cpu'\n")))
    for version, lines in (("2.13.0", ("12.9", "13.0")), ("2.5.1", ("12.6",))):
        for cuda in lines:
            major = cuda.split(".")[0]
            tag = cuda.replace(".", "")
            pkgs.append(Pkg("pytorch", version, f"cuda{tag}_generic_{PYTAG}_h0_200", build_number=200,
                            depends=[py_dep, "__cuda", f"cuda-version >={cuda},<{int(major) + 1}"],
                            files=_site_module("pytorch_standin", f"VERSION = '{version}'\nBUILD = 'cuda{tag}'\n")))
    for cuda in ("12.6", "12.9", "13.0"):
        major = cuda.split(".")[0]
        pkgs.append(Pkg("cuda-version", cuda, "h_envkit_3", subdir="noarch", noarch="generic",
                        constrains=[f"__cuda >={major}", f"cudatoolkit {cuda}|{cuda}.*"]))
    for tv, torch in (("0.28.0", "2.13"), ("0.20.1", "2.5")):
        pkgs.append(Pkg("torchvision", tv, f"{PYTAG}_h0_0", depends=[py_dep, f"pytorch {torch}.*"],
                        files=_site_module("torchvision_standin", f"VERSION = '{tv}'\n")))
    pkgs.append(Pkg("torchaudio", "2.5.1", f"{PYTAG}_h0_0", depends=[py_dep, "pytorch 2.5.*"]))
    # add-ons that want another torch than the env's: a CPU build, an older release (the day-two torch guard)
    pkgs.append(Pkg("needs-cpu-torch", "1.0", "pyh_envkit_0", subdir="noarch", noarch="python",
                    depends=["python", "pytorch * cpu_*"],
                    files={"site-packages/needs_cpu_torch/__init__.py": b"OK = True\n"}))
    pkgs.append(Pkg("needs-old-torch", "1.0", "pyh_envkit_0", subdir="noarch", noarch="python",
                    depends=["python", "pytorch 2.5.*"],
                    files={"site-packages/needs_old_torch/__init__.py": b"OK = True\n"}))
    pkgs += osx_arm64_universe(py_dep)
    for name in ("jupyter", "matplotlib", "pandas", "numpy", "scikit-learn", "tqdm"):
        pkgs.append(Pkg(name, "1.0.0", "pyh_envkit_0", subdir="noarch", noarch="python", depends=["python"],
                        files={f"site-packages/{name.replace('-', '_')}_standin/__init__.py": b"OK = True\n"}))
    pkgs.append(Pkg("envkit-demo-tool", "1.2.0", "pyh_envkit_0", subdir="noarch", noarch="python",
                    depends=["python"], entry_points=["demo-tool = demo_tool:main"],
                    files={"site-packages/demo_tool/__init__.py":
                           b"def main():\n    print('demo-tool works')\n    return 0\n"}))
    return pkgs


def osx_arm64_universe(py_dep: str) -> list[Pkg]:
    """conda-forge's osx-arm64 shape for `envkit lock --platform osx-arm64`: no CUDA builds at all, the
    CPU build is the one torch uses MPS from (solved and locked, never installed here)."""
    return [
        Pkg("python", sys.version.split()[0], "0_envkit_osx", subdir="osx-arm64",
            files={"bin/python-standin.txt": b"osx-arm64 stand-in\n"}),
        Pkg("pytorch", "2.13.0", f"cpu_generic_{PYTAG}_h0_0", subdir="osx-arm64", depends=[py_dep],
            files=_site_module("pytorch_standin", "VERSION = '2.13.0'\nBUILD = 'cpu'\n")),
        Pkg("torchvision", "0.28.0", f"{PYTAG}_h0_0", subdir="osx-arm64", depends=[py_dep, "pytorch 2.13.*"],
            files=_site_module("torchvision_standin", "VERSION = '0.28.0'\n")),
    ]


def pytorch_channel_universe() -> list[Pkg]:
    """The legacy pytorch channel: pytorch-cuda selects the variant through pytorch-mutex."""
    py_dep = f"python >={PY},<{PY}.9999"
    return [
        Pkg("pytorch-mutex", "1.0", "cuda", subdir="noarch", noarch="generic"),
        Pkg("pytorch-mutex", "1.0", "cpu", subdir="noarch", noarch="generic"),
        Pkg("cpuonly", "2.0", "0", subdir="noarch", noarch="generic", depends=["pytorch-mutex 1.0 cpu"]),
        Pkg("pytorch-cuda", "12.4", "hc786d27_7", depends=["cuda-runtime >=12.4,<12.5", "__cuda"]),
        Pkg("pytorch", "2.5.1", f"py{PY}_cuda12.4_cudnn9.1.0_0", depends=[py_dep, "pytorch-cuda >=12.4,<12.5",
                                                                           "pytorch-mutex 1.0 cuda"]),
        Pkg("pytorch", "2.5.1", f"py{PY}_cpu_0", depends=[py_dep, "pytorch-mutex 1.0 cpu"]),
        Pkg("torchvision", "0.20.1", f"py{PY}_cu124", depends=[py_dep, "pytorch 2.5.1", "pytorch-mutex 1.0 cuda"]),
        # an add-on that quietly forces the CPU variant: the real-world "CPU build installed" trap
        Pkg("legacy-cpu-addon", "1.0", "0", subdir="noarch", noarch="generic", depends=["cpuonly"]),
    ]


def nvidia_universe() -> list[Pkg]:
    return [Pkg("cuda-runtime", "12.4.1", "0", subdir="noarch", noarch="generic")]


def bench_universe(count: int = 100, files_each: int = 25) -> list[Pkg]:
    """~100 packages with thousands of files, one meta package depending on all of them."""
    pkgs = []
    for i in range(count):
        files = {f"share/bench-{i:03d}/f{j:03d}.txt": (f"package {i} file {j}\n" * 40).encode()
                 for j in range(files_each)}
        files[f"share/bench-{i:03d}/where.txt"] = f"installed in {PLACEHOLDER}\n".encode()
        pkgs.append(Pkg(f"bench-pkg-{i:03d}", "1.0.0", "h0_0", files=files,
                        prefix_files={f"share/bench-{i:03d}/where.txt"}, fmt=".conda" if i % 2 else ".tar.bz2"))
    pkgs.append(Pkg("bench-all", "1.0.0", "0", subdir="noarch", noarch="generic",
                    depends=[f"bench-pkg-{i:03d}" for i in range(count)]))
    return pkgs


@dataclass
class TestBed:
    __test__ = False  # not a pytest test class
    root: Path  # <root>/conda-forge, <root>/pytorch, <root>/nvidia: the mirror-shaped layout

    def channel(self, name: str) -> Path:
        return self.root / name

    def url(self, name: str) -> str:
        return (self.root / name).as_uri()


def build_testbed(root: Path, *, host_site: list[str] | None = None, system_site: bool = False,
                  bench: bool = False, interpreter: Path | None = None) -> TestBed:
    start = time.perf_counter()
    universes = {"conda-forge": [python_pkg(host_site=host_site, system_site=system_site, interpreter=interpreter),
                                 pip_pkg(),
                                 *conda_forge_universe()],
                 "pytorch": pytorch_channel_universe(), "nvidia": nvidia_universe()}
    if bench:
        universes["conda-forge"] += bench_universe()
    for name, pkgs in universes.items():
        for pkg in pkgs:
            build(pkg, root / name)
        index(root / name)
    if os.environ.get("ENVKIT_TESTBED_VERBOSE"):
        print(f"test bed built in {time.perf_counter() - start:.2f}s at {root}", file=sys.stderr)
    return TestBed(root)


def test_venv_site() -> list[str]:
    """The running interpreter's site-packages (where the test extra put CPU torch)."""
    return [sysconfig.get_paths()["purelib"]]

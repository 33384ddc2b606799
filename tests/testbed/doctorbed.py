"""A test bed for `envkit doctor`: torch packages laid out as the real ones are, so the broken shapes
users meet can be built for real (issue 15).

Unlike channel.py's stand-ins, this `pytorch` ships `site-packages/torch/` with `version.py`
(`__version__`, `cuda`, as torch writes it) and a `torch-X.dist-info` whose INSTALLER is `conda` and
whose RECORD lists the files: a `pip install torch` over it uninstalls conda's files exactly as it
does in a real env. The stand-in python sees no host site-packages, so `import torch` means this
env's torch. `pkgs/main` plays Anaconda's defaults channel; `whl/cu130` and `pypi/simple` are PEP 503
indexes built with pipindex.py.
"""

from __future__ import annotations

from pathlib import Path

from testbed.channel import PY, PYTAG, Pkg, build, index, pip_pkg, python_pkg
from testbed.pipindex import _record_hash, build_pip_indexes, build_wheel, write_simple_index


def torch_files(version: str, cuda: str | None) -> dict[str, bytes]:
    """site-packages/torch + a conda-installed dist-info, as conda-forge's pytorch lays them out."""
    site = f"lib/python{PY}/site-packages"
    cuda_text = repr(cuda) if cuda else "None"
    payload = {
        "torch/__init__.py": f"from torch.version import __version__\nSTANDIN = 'conda'\n".encode(),
        "torch/version.py": (f"from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda']\n"
                             f"__version__ = '{version}'\ndebug = False\ncuda: Optional[str] = {cuda_text}\n"
                             "git_version = 'envkit-test'\nhip: Optional[str] = None\n").encode(),
        "torch/lib/libtorch_stub.txt": (b"stand-in for libtorch_cuda.so\n" * 64),
    }
    dist = f"torch-{version}.dist-info"
    meta = {
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n".encode(),
        f"{dist}/INSTALLER": b"conda\n",
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp3-none-linux_x86_64\n",
    }
    record = "".join(f"{p},{_record_hash(c)},{len(c)}\n" for p, c in {**payload, **meta}.items())
    record += f"{dist}/RECORD,,\n"
    files = {f"{site}/{p}": c for p, c in {**payload, **meta}.items()}
    files[f"{site}/{dist}/RECORD"] = record.encode()
    return files


def pypi_torch_wheel(out_dir: Path, version: str, cuda: str, pins: dict[str, str]) -> Path:
    """A PyPI-style torch wheel (no +cuXYZ local version): torch/version.py and nvidia-* Requires-Dist pins."""
    import zipfile

    dist = f"torch-{version}.dist-info"
    requires = "".join(f'Requires-Dist: {name}=={pin}; platform_system == "Linux"\n' for name, pin in pins.items())
    files = {
        "torch/__init__.py": b"STANDIN = 'pypi'\n",
        "torch/version.py": f"__version__ = '{version}'\ncuda: Optional[str] = '{cuda}'\n".encode(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n{requires}".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: envkit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{p},{_record_hash(c)},{len(c)}\n" for p, c in files.items()) + f"{dist}/RECORD,,\n"
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, content in files.items():
            zf.writestr(path, content)
        zf.writestr(f"{dist}/RECORD", record)
    return wheel


def doctor_universe() -> dict[str, list[Pkg]]:
    py_dep = f"python >={PY},<{PY}.9999"
    forge = [python_pkg(), pip_pkg()]
    forge.append(Pkg("pytorch", "2.13.0", f"cpu_generic_{PYTAG}_h0_0", depends=[py_dep],
                     files=torch_files("2.13.0", None)))
    for cuda in ("12.6", "13.0"):
        tag = cuda.replace(".", "")
        major = cuda.split(".")[0]
        forge.append(Pkg("pytorch", "2.13.0", f"cuda{tag}_generic_{PYTAG}_h0_200", build_number=200,
                         depends=[py_dep, "__cuda", f"cuda-version >={cuda},<{int(major) + 1}"],
                         files=torch_files("2.13.0", cuda)))
        forge.append(Pkg("cuda-version", cuda, "h_envkit_3", subdir="noarch", noarch="generic",
                         constrains=[f"__cuda >={major}"]))
    forge.append(Pkg("cudatoolkit", "11.8.0", "h_envkit_0",
                     files={"lib/libcudart.so.11.0": b"stand-in cudart 11.8\n"}))
    forge.append(Pkg("tqdm", "4.67.0", "pyh_envkit_0", subdir="noarch", noarch="python", depends=["python"],
                     files={"site-packages/tqdm/__init__.py": b"OK = True\n"}))
    main = [Pkg("mkl", "2023.1.0", "h_defaults_0", files={"lib/libmkl_stub.so.2": b"stand-in mkl\n" * 32}),
            Pkg("openssl", "3.0.15", "h_defaults_0", files={"lib/libssl_stub.so.3": b"stand-in ssl\n"})]
    return {"conda-forge": forge, "pkgs/main": main}


def build_doctor_bed(root: Path) -> Path:
    """Channels under root/conda-forge and root/pkgs/main; wheel indexes under root/whl, root/pypi."""
    for channel, pkgs in doctor_universe().items():
        for pkg in pkgs:
            build(pkg, root / channel)
        index(root / channel)
    build_pip_indexes(root)  # whl/cu130: torch 2.14.0+cu130 and friends
    extra = root / "_wheels" / "extra"
    wheels = [build_wheel(extra, "nvidia-cuda-runtime-cu12", "12.4.127"),
              pypi_torch_wheel(extra, "2.13.0", "12.8", {"nvidia-cuda-runtime-cu12": "12.8.90",
                                                         "nvidia-cublas-cu12": "12.8.4.1"})]
    write_simple_index(root / "extra" / "simple", wheels)  # PyPI-shaped: the default torch wheel and its pins
    return root

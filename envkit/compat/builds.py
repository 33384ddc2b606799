"""The CUDA level a torch build says it was made for: the one parser of build strings and wheel versions.

Build-string conventions (what each channel's recipe writes):
- conda-forge, pytorch-cpu-feedstock recipe/meta.yaml: `cuda{{ cuda_compiler_version | replace('.', '') }}`
  first, then (>= 2.1) `_generic_` / `_mkl_`, `py312_h<hash>_<n>`: `cuda130_generic_py312_h6cf1b4a_200`,
  `cuda126_mkl_py312_h2dbd73f_300`, `cuda118_py310h0cdb5d5_302`; before 2.1 with no separator,
  `cuda112py38h4f2a933_200`. CPU builds start `cpu_`: `cpu_mkl_py312_h5d3b7d3_100`, `cpu_py38h...`.
- the pytorch channel, pytorch/builder conda/pytorch-nightly/meta.yaml: `py<X.Y>_cuda<X.Y>_cudnn<v>_<n>`
  (`py3.12_cuda12.4_cudnn9.1.0_0`; before 1.8 the full toolkit version: `py3.7_cuda10.0.130_cudnn7.4.1_1`),
  `py<X.Y>_cpu_<n>` for CPU. A bare `py3.8_0` (macOS, and builds from before the variant tag) names no
  CUDA at all: the variant lived in the pytorch-mutex / cudatoolkit dependency, so it is UNKNOWN here,
  and a caller decides from the env's cuda-version / pytorch-cuda record (`cuda_of_pins`).
- Anaconda's defaults: `cuda101py37h02f0884_0`, `cuda92py36h...`, `cpu_py38h60491be_0`, `gpu_cuda113py39h...`.
- PyTorch's wheel index, PEP 440 local versions: `2.5.1+cu124`, `1.10.0+cu92`, `2.5.1+cpu`; PyPI's own
  `2.5.1` says nothing (its CUDA is in the nvidia-* pins of its METADATA).

Pure: no I/O. Returns "X.Y", None for a CPU build, UNKNOWN when the string does not say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

UNKNOWN = "?"
# cuda + <X.Y> with the pytorch channel's optional toolkit patch (cuda10.0.130), after a `_` or at the start
_DOTTED = re.compile(r"(?:^|_)cuda(\d{1,2})\.(\d)(?=[._]|$)")
# cuda + 2-3 packed digits (the last one is the minor), then `_`, `py` or the end: conda-forge, defaults
_PACKED = re.compile(r"(?:^|_)cuda(\d{2,3})(?=_|py|$)")
_CPU = re.compile(r"(?:^|[_-])cpu(?:[_-]|py|$)")
_WHEEL_CUDA = re.compile(r"cu(\d{2,3})")
# a build string that marks a CUDA variant at all (pytorch-mutex's bare `cuda` included)
_MARKS_CUDA = re.compile(r"cuda", re.IGNORECASE)
CUDA_PINS = ("cuda-version", "pytorch-cuda")  # the packages whose version is an env's CUDA line


def cuda_of_tag(tag: str) -> str:
    """'130' -> '13.0', '118' -> '11.8', '92' -> '9.2' (packed build-string digits and wheel variants)."""
    return f"{tag[:-1]}.{tag[-1]}"


def cuda_of_build(build: str) -> str | None:
    """A conda build string's CUDA: 'X.Y', None for a CPU build, UNKNOWN when the string does not say."""
    dotted = _DOTTED.search(build)
    if dotted:
        return f"{dotted.group(1)}.{dotted.group(2)}"
    packed = _PACKED.search(build)
    if packed:
        return cuda_of_tag(packed.group(1))
    if _CPU.search(build):
        return None
    return UNKNOWN


def cuda_of_variant(label: str) -> str | None:
    """A PyTorch index variant (the wheel's local version, the index folder): cu130 -> '13.0', cpu -> None."""
    match = _WHEEL_CUDA.fullmatch(label)
    if match:
        return cuda_of_tag(match.group(1))
    if label == "cpu":
        return None
    return UNKNOWN


def cuda_of_wheel(version: str) -> str | None:
    """A torch wheel version's CUDA: 2.13.0+cu130 -> '13.0', +cpu -> None, no or another local part -> UNKNOWN."""
    return cuda_of_variant(version.partition("+")[2])


def is_cpu_build(build: str) -> bool:
    """The build string says CPU (a string that does not say is not a CPU build)."""
    return cuda_of_build(build) is None


def marks_cuda(build: str) -> bool:
    """The build string marks a CUDA variant of any kind (`cuda130_...`, `*_cuda12.4_*`, pytorch-mutex `cuda`)."""
    return bool(_MARKS_CUDA.search(build))


def cuda_of_pins(versions: Mapping[str, str]) -> str | None:
    """The CUDA line an env's pin packages say (name -> version: cuda-version first, then pytorch-cuda)."""
    for name in CUDA_PINS:
        if versions.get(name):
            return ".".join(versions[name].split(".")[:2])
    return None

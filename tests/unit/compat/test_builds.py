"""compat/builds.py is the one parser of a torch build's CUDA: real build strings of conda-forge, the
pytorch channel and Anaconda's defaults, and PyTorch index wheel versions, each with the answer every
caller (doctor, kernel display names, the catalogue, the plan guard, export) now shares."""

from __future__ import annotations

import pytest

from envkit.compat.builds import (UNKNOWN, cuda_of_build, cuda_of_pins, cuda_of_variant, cuda_of_wheel, is_cpu_build,
                                  marks_cuda)

BUILDS = [
    # conda-forge pytorch (anaconda.org/conda-forge/pytorch/files; pytorch-cpu-feedstock recipe/meta.yaml)
    ("cuda130_generic_py312_h6cf1b4a_200", "13.0"),
    ("cuda129_mkl_py313_h1e53aa0_301", "12.9"),
    ("cuda126_mkl_py312_h2dbd73f_300", "12.6"),
    ("cuda126_py312_h123_0", "12.6"),
    ("cuda118_py310h0cdb5d5_302", "11.8"),
    ("cuda120_py311h9f1e6e6_301", "12.0"),
    ("cuda118py310h1234567_200", "11.8"),  # before 2.1: no separator after the CUDA tag
    ("cuda112py38h4f2a933_200", "11.2"),
    ("cpu_mkl_py312_h5d3b7d3_100", None),
    ("cpu_generic_py311_h0_0", None),
    ("cpu_py38h36eccb8_1", None),
    # the pytorch channel (anaconda.org/pytorch/pytorch/files; pytorch/builder conda/pytorch-nightly)
    ("py3.12_cuda12.4_cudnn9.1.0_0", "12.4"),
    ("py3.10_cuda11.8_cudnn8.7.0_0", "11.8"),
    ("py3.9_cuda11.3_cudnn8.2.0_0", "11.3"),
    ("py3.7_cuda10.0.130_cudnn7.4.1_1", "10.0"),  # before 1.8: the toolkit's full version
    ("py3.6_cuda9.2.148_cudnn7.1.4_1", "9.2"),
    ("py3.11_cpu_0", None),
    ("py3.12_cpu_0", None),
    ("py3.8_0", UNKNOWN),  # macOS / pre-variant builds: the string names no CUDA (was "CPU" in kernel names)
    # Anaconda's defaults
    ("cuda101py37h02f0884_0", "10.1"),
    ("cuda92py36h0a2d0c1_1", "9.2"),  # two digits: was "CPU" in kernel names
    ("gpu_cuda113py39h19ae3d8_1", "11.3"),
    ("cpu_py38h60491be_0", None),
    # not a variant tag at all
    ("cuda", UNKNOWN),  # pytorch-mutex 1.0 cuda
    ("h1234567_0", UNKNOWN),
    ("", UNKNOWN),
]


@pytest.mark.parametrize(("build", "cuda"), BUILDS)
def test_conda_build_strings(build: str, cuda: str | None) -> None:
    assert cuda_of_build(build) == cuda
    assert is_cpu_build(build) == (cuda is None)


@pytest.mark.parametrize(("version", "cuda"), [
    ("2.13.0+cu130", "13.0"), ("2.5.1+cu124", "12.4"), ("1.13.1+cu117", "11.7"), ("1.10.0+cu92", "9.2"),
    ("2.5.1+cpu", None),
    ("2.5.1", UNKNOWN),  # PyPI's default wheel: its CUDA comes from the nvidia-* pins in METADATA
    ("2.5.1+rocm6.2", UNKNOWN),  # not CUDA, not CPU (was "CPU" in kernel names)
])
def test_wheel_local_versions(version: str, cuda: str | None) -> None:
    assert cuda_of_wheel(version) == cuda


def test_index_variants_and_pins() -> None:
    assert [cuda_of_variant(v) for v in ("cu130", "cu118", "cpu", "rocm6.2")] == ["13.0", "11.8", None, UNKNOWN]
    assert cuda_of_pins({"cuda-version": "12.6.3", "pytorch-cuda": "12.4"}) == "12.6"
    assert cuda_of_pins({"pytorch-cuda": "12.4"}) == "12.4"
    assert cuda_of_pins({"numpy": "2.1"}) is None


def test_a_cuda_marker_is_not_a_cuda_level() -> None:
    """export keeps `*cuda*` for every build that marks a CUDA variant, readable level or not."""
    assert marks_cuda("cuda") and marks_cuda("py3.12_cuda12.4_cudnn9.1.0_0") and marks_cuda("cuda130_generic_py312_h0_0")
    assert not marks_cuda("cpu_generic_py312_h0_0") and not marks_cuda("py3.8_0")


def test_every_caller_agrees() -> None:
    """doctor, the catalogue and kernel display names answer from the same parser."""
    from envkit.compat.catalogue import Record, cuda_of

    for build, cuda in BUILDS:
        expected = "cpu" if cuda is None else None if cuda == UNKNOWN else cuda
        assert cuda_of(Record("pytorch", "2.0.0", build, "linux-64")) == expected, build

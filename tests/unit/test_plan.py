"""plan.py decides what create, lock and bundle install: a spec or file for this machine (prepare), or the
exact package set of a lock / explicit file (recreate_source + recreate_envfile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.engines.base import CreateOptions, Timer
from envkit.errors import EngineError, UsageError
from envkit.models import Request, Selection
from envkit.plan import Prepared, envfile_as_is, is_explicit, prepare, recreate_envfile, recreate_source

SIMULATED_H200 = {"driver_version": "580.65.06", "compute_capabilities": ("9.0",)}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_taken_as_is_keeps_its_lines_and_selects_nothing(tmp_path: Path) -> None:
    env = _write(tmp_path, "env.yml", "name: x\nchannels: [conda-forge]\ndependencies:\n  - numpy=1.26=*_0\n"
                                      "  - pip\n  - pip:\n    - rich==13.7.0\n")
    opts = CreateOptions(name="y", file=env, no_adapt=True, **SIMULATED_H200)  # type: ignore[arg-type]
    prepared = prepare(opts, Timer())
    assert isinstance(prepared, Prepared) and prepared.selection is None and prepared.changes == ()
    assert prepared.envfile == envfile_as_is(env, "y")
    assert prepared.envfile.dependencies == ("numpy=1.26=*_0", "pip") and prepared.envfile.pip == ("rich==13.7.0",)
    assert prepared.machine.driver is not None and prepared.machine.driver.version == "580.65.06"


def test_a_file_without_channels_is_refused_as_is(tmp_path: Path) -> None:
    env = _write(tmp_path, "env.yml", "name: x\ndependencies: [numpy]\n")
    with pytest.raises(UsageError, match="lists no channels"):
        envfile_as_is(env, "x")


@pytest.mark.usefixtures("no_nvml")
def test_a_pinned_cuda_build_never_becomes_a_cpu_env(tmp_path: Path) -> None:
    env = _write(tmp_path, "env.yml", "name: x\nchannels: [conda-forge]\ndependencies:\n"
                                      "  - pytorch=2.7.1=*cuda*\n")
    opts = CreateOptions(name="x", file=env, request=Request(cuda="auto"), catalogue="offline",
                         driver_version=None, compute_capabilities=())
    with pytest.raises(EngineError, match="pins a CUDA build"):
        prepare(opts, Timer())


def test_recreate_source(tmp_path: Path) -> None:
    explicit = _write(tmp_path, "env.txt", "# platform: linux-64\n@EXPLICIT\n")
    plain = _write(tmp_path, "env.yml", "name: x\nchannels: [conda-forge]\ndependencies: [numpy]\n")
    lock = tmp_path / "envkit.lock"
    assert is_explicit(explicit) and not is_explicit(plain)
    assert recreate_source(CreateOptions(name="x", file=explicit)) == (explicit, "explicit")
    assert recreate_source(CreateOptions(name="x", file=plain)) is None
    assert recreate_source(CreateOptions(name="x", lock=lock, file=explicit)) == (lock, "lock")


def test_an_explicit_file_names_its_channels(tmp_path: Path) -> None:
    explicit = _write(tmp_path, "env.txt", "@EXPLICIT\n"
                      "https://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.4-py311_0.conda#abc\n"
                      "https://conda.anaconda.org/conda-forge/noarch/tzdata-2024a-h0_0.conda\n")
    envfile, locked = recreate_envfile("x", explicit, "explicit")
    assert locked is None and envfile.name == "x" and envfile.dependencies == ()
    assert envfile.channels == ("https://conda.anaconda.org/conda-forge",)


def _selection(cuda: str | None, variant: str, mvc: bool = False, python: str = "3.12",
               reasons: tuple[str, ...] = ()) -> Selection:
    return Selection("conda-forge", "2.13.0", None, None, cuda, python, variant, (), ("conda-forge",),
                     reasons=reasons, minor_version_compat=mvc)


def test_differences_name_each_place_the_install_differs_from_the_request() -> None:
    from envkit.plan import differences

    assert differences(Request(cuda="13.0"), _selection("13.0", "cuda130")) == ()
    assert differences(Request(cuda="cpu"), _selection(None, "cpu")) == ()  # asked for, not a difference
    (mvc,) = differences(Request(cuda="12.4"), _selection("12.9", "cuda129", mvc=True))
    assert mvc.startswith("--cuda 12.4 is the driver's CUDA level, not a CUDA line: CUDA 12.9 builds (cuda129)")
    assert "minor version compatibility" in mvc and "envkit detect --catalogue --cuda 12.4" in mvc
    (below,) = differences(Request(cuda="12.8"), _selection("12.6", "cu126"))
    assert "the newest build at or below 12.8" in below
    (cpu,) = differences(Request(), _selection(None, "cpu", reasons=(
        "static data (no catalogue available: offline)",
        "no NVIDIA driver found: CPU build (plan for a GPU machine with --cuda X.Y)")))
    assert cpu == ("a CPU build is installed (no NVIDIA driver found); to build for a GPU machine from here pass "
                   "--cuda X.Y (its driver's CUDA level) or --driver-version VER")
    assert differences(Request(python="3.11"), _selection("13.0", "cuda130", python="3.11")) == ()
    assert differences(Request(), None) == ()

"""Detection sources, with NVML faked only at its import seam and real sample outputs as fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import FIXTURES, FakeGpu, FakeNVML
from envkit.detect import apply_visible_devices, detect
from envkit.detect.sources import cuda_from_int, parse_proc_version, parse_smi_header, parse_smi_query
from envkit.models import Gpu

NV = FIXTURES / "nvidia"


def sysroot(tmp_path: Path, proc: str | None = None, sys_file: str | None = None) -> Path:
    root = tmp_path / "root"
    if proc:
        (root / "proc/driver/nvidia").mkdir(parents=True)
        shutil.copy(NV / proc, root / "proc/driver/nvidia/version")
    if sys_file:
        (root / "sys/module/nvidia").mkdir(parents=True)
        shutil.copy(NV / sys_file, root / "sys/module/nvidia/version")
    root.mkdir(exist_ok=True)
    return root


def test_cuda_int_encoding() -> None:
    assert cuda_from_int(13000) == "13.0"
    assert cuda_from_int(12040) == "12.4"
    assert cuda_from_int(11080) == "11.8"
    assert cuda_from_int(0) is None


@pytest.mark.parametrize(("name", "version"), [
    ("proc_version_open_580.txt", "580.159.04"),
    ("proc_version_470.txt", "470.82.01"),
])
def test_proc_parser_on_real_samples(name: str, version: str) -> None:
    assert parse_proc_version((NV / name).read_text()) == version


def test_smi_parsers_on_real_samples() -> None:
    driver, gpus = parse_smi_query((NV / "smi_query_h200.csv").read_text())
    assert driver == "580.159.04"
    assert gpus == [Gpu(0, "NVIDIA H200", "9.0", 143771, gpus[0].uuid)]
    assert parse_smi_header((NV / "smi_h200.txt").read_text()) == "13.0"
    driver, gpus = parse_smi_query((NV / "smi_query_mixed.csv").read_text())
    assert [g.compute_capability for g in gpus] == ["6.1", "8.9"]  # multi-GPU (uv#14647)
    driver, gpus = parse_smi_query((NV / "smi_query_2xh200.csv").read_text())  # real two-GPU capture
    assert driver == "580.159.04" and [(g.index, g.compute_capability) for g in gpus] == [(0, "9.0"), (1, "9.0")]


def test_nvml_is_the_first_source(fake_nvml: FakeNVML, tmp_path: Path) -> None:
    fake_nvml.gpus = [FakeGpu("NVIDIA H200", (9, 0), 150754820096, "GPU-abc")]
    machine = detect(root=sysroot(tmp_path), environ={})
    assert machine.driver is not None
    assert (machine.driver.version, machine.driver.cuda, machine.driver.source) == ("580.159.04", "13.0", "nvml")
    assert machine.gpus == (Gpu(0, "NVIDIA H200", "9.0", 143771, "GPU-abc"),)
    assert fake_nvml.calls == ["nvmlInit", "nvmlShutdown"]


def test_no_driver_is_a_normal_result(no_nvml: None, tmp_path: Path, fake_smi) -> None:  # noqa: ANN001
    machine = detect(root=sysroot(tmp_path), environ={"PATH": "/nonexistent"})
    assert machine.driver is None and machine.gpus == ()
    assert machine.notes == ()  # a missing libnvidia-ml is not worth a warning on a CPU box


def test_file_sources_give_the_driver_and_derive_cuda(no_nvml: None, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    machine = detect(root=sysroot(tmp_path, proc="proc_version_470.txt"), environ={})
    assert machine.driver is not None
    assert (machine.driver.version, machine.driver.cuda, machine.driver.source) == ("470.82.01", "11.4", "proc")
    assert not machine.gpus_known
    machine = detect(root=sysroot(tmp_path / "b", sys_file="sys_version_580.txt"), environ={})
    assert machine.driver is not None and machine.driver.source == "sys" and machine.driver.cuda == "13.0"


def test_nvidia_smi_fills_the_gpus_when_nvml_fails(fake_nvml: FakeNVML, fake_smi, tmp_path: Path) -> None:  # noqa: ANN001
    fake_nvml.init_error = 18  # driver/library version mismatch
    fake_smi("smi_query_mixed.csv", "smi_h200.txt")
    machine = detect(root=sysroot(tmp_path, proc="proc_version_open_580.txt"), environ={})
    assert machine.driver is not None and machine.driver.source == "proc"
    assert [g.compute_capability for g in machine.gpus] == ["6.1", "8.9"]
    assert any("version mismatch" in n and "580.159.04" in n and "reboot" in n for n in machine.notes)


@pytest.mark.parametrize(("code", "words"), [(4, "permission"), (9, "not loaded"), (999, "NVML failed")])
def test_nvml_errors_are_diagnosed_never_raised(fake_nvml: FakeNVML, tmp_path: Path, code: int, words: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    fake_nvml.init_error = code
    machine = detect(root=sysroot(tmp_path), environ={})
    assert machine.driver is None
    assert any(words in n for n in machine.notes)


def test_cuda_visible_devices(fake_nvml: FakeNVML, tmp_path: Path) -> None:
    fake_nvml.gpus = [FakeGpu("A", (8, 0), uuid="GPU-aaaa"), FakeGpu("B", (6, 1), uuid="GPU-bbbb")]
    root = sysroot(tmp_path)
    assert [g.name for g in detect(root=root, environ={"CUDA_VISIBLE_DEVICES": "1"}).gpus] == ["B"]
    assert [g.index for g in detect(root=root, environ={"CUDA_VISIBLE_DEVICES": "GPU-bbbb,0"}).gpus] == [1, 0]
    for hidden in ("", "-1"):
        machine = detect(root=root, environ={"CUDA_VISIBLE_DEVICES": hidden})
        assert machine.gpus == () and machine.gpus_hidden and machine.driver is not None


def test_visible_devices_stop_at_the_first_invalid_entry() -> None:
    gpus = [Gpu(0, "a", "8.0"), Gpu(1, "b", "8.0"), Gpu(2, "c", "8.0")]
    visible, hidden, _ = apply_visible_devices(gpus, "2,7,0")
    assert [g.index for g in visible] == [2] and not hidden


def test_conda_override_cuda(fake_nvml: FakeNVML, tmp_path: Path) -> None:
    root = sysroot(tmp_path)
    assert detect(root=root, environ={"CONDA_OVERRIDE_CUDA": "12.4"}).cuda_override == "12.4"
    assert detect(root=root, environ={"CONDA_OVERRIDE_CUDA": " "}).cuda_override == ""
    assert detect(root=root, environ={}).cuda_override is None


def test_simulation_replaces_the_hardware_query(fake_nvml: FakeNVML) -> None:
    machine = detect(driver_version="550.54.15", compute_capabilities=["8.6", "6.1"], environ={})
    assert fake_nvml.calls == []
    assert machine.simulated and machine.driver is not None and machine.driver.cuda == "12.4"
    assert [g.compute_capability for g in machine.gpus] == ["8.6", "6.1"]

"""Frozen dataclasses passed between the stages (detect -> select -> render -> create -> verify)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

FLAVORS: tuple[str, ...] = ("conda-forge", "pytorch", "pip")


@dataclass(frozen=True)
class Gpu:
    """One visible GPU as the driver reports it."""

    index: int
    name: str
    compute_capability: str  # "9.0"
    memory_mib: int | None = None
    uuid: str | None = None


@dataclass(frozen=True)
class Driver:
    """The NVIDIA driver and the highest CUDA version it supports (not an installed toolkit)."""

    version: str  # "580.159.04"
    cuda: str | None  # "13.0": what cuDriverGetVersion / NVML v2 / nvidia-smi report
    source: str  # nvml | proc | sys | nvidia-smi | simulated


@dataclass(frozen=True)
class Machine:
    """What detection found (or what the user simulated)."""

    driver: Driver | None
    gpus: tuple[Gpu, ...] = ()
    gpus_hidden: bool = False  # CUDA_VISIBLE_DEVICES hides every GPU (not the same as no driver)
    gpus_known: bool = True  # False when only a driver file was readable (no GPU list)
    cuda_override: str | None = None  # --cuda X.Y / CONDA_OVERRIDE_CUDA; "" means "no CUDA"
    simulated: bool = False
    notes: tuple[str, ...] = ()

    @property
    def compute_capabilities(self) -> tuple[str, ...]:
        return tuple(sorted({g.compute_capability for g in self.gpus}, key=_cc_key))

    def to_json(self) -> dict[str, Any]:
        """The JSON shape of `envkit detect --json` and create.json (here so engines need not import output)."""
        drv = self.driver
        return {
            "driver": None if drv is None else {"version": drv.version, "cuda": drv.cuda, "source": drv.source},
            "gpus": [
                {"index": g.index, "name": g.name, "compute_capability": g.compute_capability,
                 "memory_mib": g.memory_mib, "uuid": g.uuid}
                for g in self.gpus
            ],
            "gpus_hidden": self.gpus_hidden,
            "cuda_override": self.cuda_override,
            "simulated": self.simulated,
            "notes": list(self.notes),
        }

    def describe(self) -> str:
        """One line for headers and logs: driver, CUDA and GPUs."""
        if self.driver is None:
            base = "no NVIDIA driver"
        else:
            base = f"driver {self.driver.version} (CUDA {self.driver.cuda or '?'}, {self.driver.source})"
        if self.gpus:
            names = ", ".join(f"{g.name} sm_{g.compute_capability.replace('.', '')}" for g in self.gpus)
            base += f"; GPUs: {names}"
        elif self.gpus_hidden:
            base += "; GPUs hidden by CUDA_VISIBLE_DEVICES"
        if self.cuda_override is not None:
            base += f"; CUDA override {self.cuda_override or '(none)'}"
        if self.simulated:
            base += " [simulated]"
        return base


def _cc_key(cc: str) -> tuple[int, int]:
    major, _, minor = cc.partition(".")
    return int(major), int(minor or 0)


@dataclass(frozen=True)
class Request:
    """What the user asked for, kept apart from what was decided (uv's TorchMode vs TorchBackend)."""

    cuda: str = "auto"  # "auto" | "cpu" | "X.Y"
    torch: str | None = None  # a version or a PEP 440 specifier set; None = newest known
    python: str | None = None  # "3.12"
    flavor: str = "conda-forge"
    no_driver_check: bool = False


@dataclass(frozen=True)
class Selection:
    """The build chosen for a machine, with the concrete specs and the reasons behind them."""

    flavor: str
    torch: str
    torchvision: str | None
    torchaudio: str | None
    cuda: str | None  # CUDA line of the build, None for a CPU build
    python: str
    variant: str  # cu130 / cuda130 / pytorch-cuda 12.4 / cpu
    specs: tuple[str, ...]  # conda specs (python and the torch family)
    channels: tuple[str, ...]
    pip_specs: tuple[str, ...] = ()
    pip_index_url: str | None = None
    reasons: tuple[str, ...] = ()
    minor_version_compat: bool = False  # the build's CUDA is above what the driver reports

    @property
    def is_gpu(self) -> bool:
        return self.cuda is not None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("specs", "channels", "pip_specs", "reasons"):
            data[key] = list(data[key])
        return data


@dataclass(frozen=True)
class DetectResult:
    """`envkit detect`: the machine and, when one qualifies, the build it would pick."""

    machine: Machine
    selection: Selection | None
    error: str | None = None

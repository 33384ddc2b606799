"""The detection sources: a thin read each, with the parsing in pure functions tested on real samples."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from envkit.models import Driver, Gpu


@dataclass
class _Partial:
    """What one source found (lives here, below detect(), so the package has no import cycle)."""

    driver: Driver | None = None
    gpus: list[Gpu] | None = None
    notes: list[str] = field(default_factory=list)

# NVML return codes (nvml.h); nvidia-ml-py exposes them as NVMLError.value.
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18


def load_nvml() -> ModuleType:
    """The NVML seam: nvidia-ml-py installs the module `pynvml` (tests put a fake in sys.modules)."""
    import pynvml

    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def from_nvml(root: Path) -> _Partial:

    try:
        nv = load_nvml()
    except ImportError:
        return _Partial(notes=["nvidia-ml-py is not installed: NVML skipped (pip install nvidia-ml-py)"])
    try:
        nv.nvmlInit()
    except Exception as exc:  # NVMLError and anything the binding raises
        return _Partial(notes=diagnose_nvml_error(exc, root))
    try:
        version = _text(nv.nvmlSystemGetDriverVersion())
        cuda = None
        try:
            cuda = cuda_from_int(int(nv.nvmlSystemGetCudaDriverVersion_v2()))
        except Exception:
            cuda = cuda_from_int(int(nv.nvmlSystemGetCudaDriverVersion()))
        gpus = []
        for i in range(int(nv.nvmlDeviceGetCount())):
            handle = nv.nvmlDeviceGetHandleByIndex(i)
            major, minor = nv.nvmlDeviceGetCudaComputeCapability(handle)
            memory = nv.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(Gpu(
                index=i,
                name=_text(nv.nvmlDeviceGetName(handle)),
                compute_capability=f"{int(major)}.{int(minor)}",
                memory_mib=int(memory.total) // (1024 * 1024),
                uuid=_text(nv.nvmlDeviceGetUUID(handle)),
            ))
        return _Partial(driver=Driver(version, cuda, "nvml"), gpus=gpus)
    except Exception as exc:
        return _Partial(notes=diagnose_nvml_error(exc, root))
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def diagnose_nvml_error(exc: Exception, root: Path) -> list[str]:
    """Turn an NVML failure into what happened, why, and the fix (never a traceback)."""
    code = getattr(exc, "value", None)
    if code == NVML_ERROR_LIBRARY_NOT_FOUND or isinstance(exc, OSError):
        return []  # no libnvidia-ml: usually no NVIDIA driver at all; the file sources decide
    if code == NVML_ERROR_DRIVER_NOT_LOADED:
        return ["NVML: the NVIDIA kernel driver is not loaded (libnvidia-ml is present). "
                "fix: load it with `sudo modprobe nvidia`, or reinstall the driver"]
    if code == NVML_ERROR_NO_PERMISSION:
        return ["NVML: no permission to open /dev/nvidia*. fix: add your user to the group owning "
                "/dev/nvidia* (often `video`), or in a container run with `--gpus all`"]
    if code == NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        kernel = read_driver_files(root)
        seen = f" (kernel module {kernel})" if kernel else ""
        return [f"NVML: driver/library version mismatch{seen}: the loaded kernel module and libnvidia-ml "
                "come from different driver versions, usually after a driver update. fix: reboot, or "
                "reload the module: `sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia`"]
    return [f"NVML failed: {exc}. Falling back to /proc, /sys and nvidia-smi"]


def cuda_from_int(value: int) -> str | None:
    """NVML/cuDriverGetVersion encoding: major*1000 + minor*10 (12040 -> '12.4')."""
    if value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


_PROC_RE = re.compile(r"NVRM version:.*?\s(\d+\.\d+(?:\.\d+)?)\s", re.ASCII)  # ASCII: \d matches ١٢ too


def parse_proc_version(text: str) -> str | None:
    """`/proc/driver/nvidia/version`: 'NVRM version: NVIDIA UNIX ... Kernel Module for x86_64  580.159.04  Release Build ...'."""
    match = _PROC_RE.search(text + " ")
    return match.group(1) if match else None


def parse_sys_version(text: str) -> str | None:
    value = text.strip()
    return value if re.fullmatch(r"\d+\.\d+(\.\d+)?", value, re.ASCII) else None


def _driver_file(root: Path) -> tuple[str, str] | None:
    """(driver version, source) from /proc/driver/nvidia/version, else /sys/module/nvidia/version."""
    for rel, parser, source in (("proc/driver/nvidia/version", parse_proc_version, "proc"),
                                ("sys/module/nvidia/version", parse_sys_version, "sys")):
        try:
            version = parser((root / rel).read_text(errors="replace"))
        except OSError:
            continue
        if version:
            return version, source
    return None


def read_driver_files(root: Path) -> str | None:
    found = _driver_file(root)
    return found[0] if found else None


def from_driver_files(root: Path) -> _Partial:

    found = _driver_file(root)
    return _Partial(driver=Driver(found[0], None, found[1])) if found else _Partial()


SMI_QUERY = ("--query-gpu=index,name,uuid,compute_cap,memory.total,driver_version",
             "--format=csv,noheader,nounits")


def parse_smi_query(text: str) -> tuple[str | None, list[Gpu]]:
    """CSV from `nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,driver_version`."""
    gpus: list[Gpu] = []
    driver = None
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6 or not (parts[0].isascii() and parts[0].isdigit()):
            continue
        memory = int(float(parts[4])) if re.fullmatch(r"[0-9]+(\.[0-9]+)?", parts[4]) else None
        gpus.append(Gpu(int(parts[0]), parts[1], parts[3], memory, parts[2]))
        driver = driver or parts[5]
    return driver, gpus


_SMI_CUDA_RE = re.compile(r"CUDA Version:\s*(\d+\.\d+)", re.ASCII)


def parse_smi_header(text: str) -> str | None:
    """The 'CUDA Version: 13.0' field of plain `nvidia-smi` output (the driver's CUDA level)."""
    match = _SMI_CUDA_RE.search(text)
    return match.group(1) if match else None


def from_nvidia_smi(root: Path) -> _Partial:
    from envkit import proc  # here: a detect with NVML or an override never pays for subprocess

    try:
        query = proc.run(["nvidia-smi", *SMI_QUERY], timeout=20)
    except (FileNotFoundError, PermissionError):
        return _Partial()
    if query.returncode != 0 or query.timed_out:
        tail = query.stderr_tail(3) or query.stdout.strip()[-300:]
        return _Partial(notes=[f"nvidia-smi failed (rc {query.returncode}): {tail}"])
    driver_version, gpus = parse_smi_query(query.stdout)
    cuda = None
    header = proc.run(["nvidia-smi"], timeout=20)
    if header.returncode == 0:
        cuda = parse_smi_header(header.stdout)
    driver = Driver(driver_version, cuda, "nvidia-smi") if driver_version else None
    return _Partial(driver=driver, gpus=gpus)

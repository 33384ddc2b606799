"""Small helpers shared by the tests."""

from __future__ import annotations

import json
import shutil
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the real entry point (error boundary included) and return (exit code, stdout, stderr)."""
    from envkit.cli import _run

    capsys.readouterr()
    code = _run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code, out, _err = run_cli(capsys, *args)
    return code, json.loads(out)


@dataclass
class FakeGpu:
    name: str
    cc: tuple[int, int]
    memory: int = 80 * 1024**3
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class FakeNVML:
    """Stands in for the `pynvml` module of nvidia-ml-py: the NVML import seam."""

    driver: str = "580.159.04"
    cuda_int: int = 13000
    gpus: list[FakeGpu] = field(default_factory=list)
    init_error: int | None = None
    calls: list[str] = field(default_factory=list)

    def module(self) -> types.ModuleType:
        mod = types.ModuleType("pynvml")
        fake = self

        def init() -> None:
            fake.calls.append("nvmlInit")
            if fake.init_error is not None:
                raise NVMLError(fake.init_error)

        mod.NVMLError = NVMLError  # type: ignore[attr-defined]
        mod.nvmlInit = init  # type: ignore[attr-defined]
        mod.nvmlShutdown = lambda: fake.calls.append("nvmlShutdown")  # type: ignore[attr-defined]
        mod.nvmlSystemGetDriverVersion = lambda: fake.driver  # type: ignore[attr-defined]
        mod.nvmlSystemGetCudaDriverVersion_v2 = lambda: fake.cuda_int  # type: ignore[attr-defined]
        mod.nvmlSystemGetCudaDriverVersion = lambda: fake.cuda_int  # type: ignore[attr-defined]
        mod.nvmlDeviceGetCount = lambda: len(fake.gpus)  # type: ignore[attr-defined]
        mod.nvmlDeviceGetHandleByIndex = lambda i: fake.gpus[i]  # type: ignore[attr-defined]
        mod.nvmlDeviceGetName = lambda h: h.name  # type: ignore[attr-defined]
        mod.nvmlDeviceGetUUID = lambda h: h.uuid  # type: ignore[attr-defined]
        mod.nvmlDeviceGetCudaComputeCapability = lambda h: h.cc  # type: ignore[attr-defined]
        mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=h.memory)  # type: ignore[attr-defined]
        return mod


def conda_shaped_env(tmp_path: Path) -> Path:
    """An env laid out as conda 26 writes it: records, history, pip installs of every kind."""
    src = FIXTURES / "conda_env"
    prefix = tmp_path / "conda-made"
    shutil.copytree(src, prefix)
    site = prefix / "lib" / "python3.11" / "site-packages"
    for name, version, installer, direct in (
        ("requests", "2.32.3", "pip", None),
        ("mylib", "0.1.0", "pip", {"url": "https://github.com/org/mylib.git",
                                     "vcs_info": {"vcs": "git", "commit_id": "0123456789abcdef0123456789abcdef01234567"}}),
        ("localpkg", "1.0", "pip", {"url": "file:///srv/src/localpkg", "dir_info": {"editable": True}}),
        ("numpy", "1.26.4", "conda", None),
    ):
        dist = site / f"{name}-{version}.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (dist / "INSTALLER").write_text(installer + "\n")
        if direct:
            (dist / "direct_url.json").write_text(json.dumps(direct))
    return prefix

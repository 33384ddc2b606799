"""The static readers behind `envkit doctor`: torch/version.py (build strings and wheel local versions:
tests/unit/compat/test_builds.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from envkit.doctor.facts import version_py


def test_version_py_of_the_real_torch_in_the_test_venv() -> None:
    spec = importlib.util.find_spec("torch")  # locates the package without running it
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed in the test venv")
    site = Path(spec.origin).parent.parent
    found = version_py(site)
    assert found is not None
    version, cuda = found
    text = (site / "torch" / "version.py").read_text()
    assert version is not None and f"__version__ = '{version}'" in text
    assert cuda is None if "+cpu" in version else cuda is not None


def test_version_py_forms(tmp_path: Path) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.5.1+cu124'\ndebug = False\ncuda: Optional[str] = '12.4'\n")
    assert version_py(tmp_path) == ("2.5.1+cu124", "12.4")
    (tmp_path / "torch" / "version.py").write_text("__version__ = '2.5.1+cpu'\ncuda = None\n")
    assert version_py(tmp_path) == ("2.5.1+cpu", None)
    assert version_py(tmp_path / "nowhere") is None


def test_a_pip_torch_fix_installs_from_the_pytorch_index_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    """ENVKIT_PYTORCH_INDEX: doctor's reinstall command names the mirror, as render and detect do."""
    from envkit.doctor.checks import _install_cmd
    from envkit.doctor.facts import Facts, TorchCopy
    from envkit.models import Driver, Gpu, Machine

    machine = Machine(Driver("580.65.06", "13.0", "nvml"), (Gpu(0, "NVIDIA H200", "9.0"),))
    facts = Facts(prefix=Path("/envs/train"), python="3.12")
    cpu = TorchCopy("pip", "2.14.0+cpu", None, "torch-2.14.0+cpu.dist-info", "pip")
    cmd, why_not = _install_cmd(facts, cpu, machine)
    assert why_not is None and cmd is not None and cmd.endswith("--index-url https://download.pytorch.org/whl/cu130")
    monkeypatch.setenv("ENVKIT_PYTORCH_INDEX", "https://bob:s3cret@mirror.example/whl")
    cmd, _ = _install_cmd(facts, cpu, machine)
    assert cmd == ("/envs/train/bin/python -m pip install --force-reinstall --no-deps torch==2.14.0+cu130 "
                   "--index-url https://mirror.example/whl/cu130")

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


def _typed_env(tmp_path: Path, record: dict[str, object], created: object = None) -> Path:
    import json

    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "e-1.0-0.json").write_text(json.dumps(record))
    if created is not None:
        (prefix / ".envkit").mkdir()
        (prefix / ".envkit" / "create.json").write_text(json.dumps(created))
    return prefix


@pytest.mark.parametrize("record,created,named", [
    ({"name": "e", "files": 5}, None, "files is the number 5"),
    ({"name": "e", "depends": "python"}, None, "depends is a string"),
    ({"name": "e", "paths_data": {"paths": 5}}, None, "paths is the number 5"),
    ({"name": "e", "paths_data": {"paths": [5]}}, None, "an item of paths is the number 5"),
    ({"name": "e", "version": [], "build": {}}, None, "version is a list"),
    ({"name": "e"}, {"machine": []}, "machine is a list"),
    ({"name": "e"}, {"machine": {"gpus": 5}}, "gpus is the number 5"),
    ({"name": "e"}, {"machine": {"driver": "x"}}, "driver is a string"),
    ({"name": "e"}, {"selection": 5}, "selection is the number 5"),
    ({"name": "e"}, {"selection": {"torch": 5.5, "python": []}}, "python is a list"),
])
def test_wrongly_typed_metadata_is_a_finding_not_a_traceback(tmp_path: Path, record: dict[str, object],
                                                            created: object, named: str) -> None:
    from envkit.doctor import PROBLEM, diagnose
    from envkit.models import Driver, Gpu, Machine

    machine = Machine(Driver("580.65.06", "13.0", "nvml"), (Gpu(0, "NVIDIA H200", "9.0"),))
    report = diagnose(_typed_env(tmp_path, record, created), machine, environ={})
    files = report.finding("files")
    assert files is not None and files.status == PROBLEM and named in files.found, files
    assert len(report.findings) == 13


def test_doctor_all_reports_every_env_beside_a_broken_one_and_prints_no_escapes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from helpers import run_cli

    home = tmp_path / "home"
    monkeypatch.setenv("ENVKIT_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path))
    _typed_env(home / "envs", {"name": "e", "files": 5})  # envs/env: wrongly typed
    (home / "envs" / "good" / "conda-meta").mkdir(parents=True)
    hostile = home / "envs" / "hostile" / "conda-meta"
    hostile.mkdir(parents=True)
    (hostile / "x-1-0.json").write_text(json.dumps({"name": "pytorch", "version": "2.9.0",
                                                    "build": "cuda130\x1b]52;c;cm0gLXJm\x07\x1b[2J", "files": []}))
    drivers = ("--driver-version", "580.65.06", "--compute-capability", "9.0")
    code, out, err = run_cli(capsys, "doctor", "--all", *drivers)
    assert code == 5 and "Traceback" not in out + err
    assert all(f"/envs/{n}" in out for n in ("env", "good", "hostile")), out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]52" in out, out
    code, out, _err = run_cli(capsys, "doctor", "--all", "--json", *drivers)
    assert code == 5 and "\x1b" not in out and len(json.loads(out)) == 3

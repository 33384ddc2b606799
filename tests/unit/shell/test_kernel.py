"""A Jupyter kernelspec for an env: its display name says which torch and CUDA it has; where the spec goes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.shell.kernel import display_name, kernel_name, kernel_spec, kernels_dir, torch_of


def make_env(prefix: Path) -> Path:
    (prefix / "conda-meta").mkdir(parents=True)
    return prefix


def test_torch_and_cuda_in_the_display_name(tmp_path: Path) -> None:
    by_envkit = make_env(tmp_path / "a")
    (by_envkit / ".envkit").mkdir()
    (by_envkit / ".envkit" / "create.json").write_text(json.dumps({"selection": {"torch": "2.9.1", "cuda": "12.8"}}))
    assert display_name("a", by_envkit) == "Python (envkit: a, torch 2.9.1, CUDA 12.8)"
    legacy = make_env(tmp_path / "b")
    (legacy / "conda-meta" / "pytorch-2.5.1-py3.12_cuda12.4_cudnn9.1.0_0.json").write_text(
        json.dumps({"name": "pytorch", "version": "2.5.1", "build": "py3.12_cuda12.4_cudnn9.1.0_0"}))
    assert torch_of(legacy) == ("2.5.1", "CUDA 12.4")
    wheel = make_env(tmp_path / "c")
    (wheel / "lib" / "python3.12" / "site-packages" / "torch-2.7.1+cu126.dist-info").mkdir(parents=True)
    assert torch_of(wheel) == ("2.7.1", "CUDA 12.6")
    cpu = make_env(tmp_path / "d")
    (cpu / "conda-meta" / "pytorch-2.13.0-cpu_generic_py312_h0_0.json").write_text(
        json.dumps({"name": "pytorch", "version": "2.13.0", "build": "cpu_generic_py312_h0_0"}))
    assert display_name("d", cpu) == "Python (envkit: d, torch 2.13.0, CPU)"
    assert torch_of(make_env(tmp_path / "e")) == (None, None)


def test_kernel_spec_and_where_it_goes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = make_env(tmp_path / "envs" / "My.Env")
    (prefix / "conda-meta" / "state").write_text(json.dumps({"env_vars": {"A": "$x", "GONE": "***unset***"}}))
    spec = kernel_spec(prefix, "My.Env")
    assert spec["argv"] == [str(prefix / "bin/python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    assert spec["env"] == {"A": "$$x", "PATH": f"{prefix}/bin:${{PATH}}", "CONDA_PREFIX": str(prefix),
                           "CONDA_DEFAULT_ENV": "My.Env"}
    assert spec["metadata"]["envkit"]["prefix"] == str(prefix)
    assert kernel_name("My.Env") == "envkit-my.env"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jd"))
    assert kernels_dir() == tmp_path / "jd" / "kernels"
    monkeypatch.delenv("JUPYTER_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert kernels_dir() == tmp_path / "xdg" / "jupyter" / "kernels"


def test_a_kernel_name_clash_names_the_other_env_unless_it_is_gone(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from envkit.errors import EnvkitError
    from envkit.shell.kernel import register, unregister

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jd"))
    first, second = make_env(tmp_path / "A b"), make_env(tmp_path / "a-b")
    assert register(first, "A b").name == "envkit-a-b"
    assert register(first, "A b").name == "envkit-a-b"  # the same env again: a refresh, not a clash
    with pytest.raises(EnvkitError, match="already the env 'A b'"):
        register(second, "a-b")
    shutil.rmtree(first)  # the other env is gone: its stale spec is taken over
    kernel = register(second, "a-b")
    assert json.loads((kernel.path / "kernel.json").read_text())["metadata"]["envkit"]["prefix"] == str(second)
    assert unregister(second) == [kernel.path] and not kernel.path.exists()

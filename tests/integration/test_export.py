"""`envkit export`: portable yaml, --from-history, explicit and lock files; round trips on the test bed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from helpers import conda_shaped_env, run_cli
from testbed.channel import PY
from testbed.server import ChannelServer

GPU = ["--cuda", "13.0"]


def make(capsys: pytest.CaptureFixture[str], name: str, *args: str) -> None:
    code, _out, err = run_cli(capsys, "create", name, *args, "--python", PY, "--no-verify", "-q")
    assert code == 0, err


def export(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run_cli(capsys, "export", *args)
    assert code == 0, err
    return out


def installed(prefix: Path, with_build: bool = False) -> set[tuple[str, ...]]:
    rows = set()
    for path in (prefix / "conda-meta").glob("*.json"):
        data = json.loads(path.read_text())
        rows.add((data["name"], data["version"], data["build"]) if with_build else (data["name"], data["version"]))
    return rows


def conda_lock_specs(text: str, tmp_path: Path) -> dict[str, object]:
    from conda_lock.src_parser.environment_yaml import parse_environment_file

    data = yaml.safe_load(text)
    for dep in data["dependencies"]:
        if isinstance(dep, dict):
            dep["pip"] = [p for p in dep["pip"] if not p.startswith("-")]
    path = tmp_path / "parsed.yml"
    path.write_text(yaml.safe_dump(data))
    mapping = tmp_path / "mapping.json"
    mapping.write_text("{}")
    spec = parse_environment_file(path, ["linux-64"], f"file://{mapping}")
    return {d.name: d for d in spec.dependencies["linux-64"]}


def test_portable_yaml_from_a_mirrored_env(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                           isolated: Path, tmp_path: Path) -> None:
    make(capsys, "team", "--spec", "dl_train", *GPU, "--mirror", server.url)
    text = export(capsys, "team")
    assert text == export(capsys, "team")  # byte-identical
    data = yaml.safe_load(text)
    assert data["name"] == "team" and "prefix" not in data
    assert data["channels"] == ["conda-forge"]  # the mirror was undone
    assert server.url not in text and "127.0.0.1" not in text
    conda = [d for d in data["dependencies"] if isinstance(d, str)]
    # name=version, no build strings; the CUDA variant keeps only its portable *cuda* selector
    assert conda == sorted(conda) and all(d.count("=") == 1 for d in conda if not d.startswith("pytorch="))
    assert "pytorch=2.13.0=*cuda*" in conda and "cuda-version=13.0" in conda
    assert not any(d.startswith("__") for d in conda)
    pip = next(d["pip"] for d in data["dependencies"] if isinstance(d, dict))
    assert pip == ["datasets==3.99.0", "transformers==4.99.0"]
    specs = conda_lock_specs(text, tmp_path)
    assert specs["pytorch"].version.strip("=") in ("2.13.0", "2.13.0.*") and specs["transformers"].manager == "pip"
    assert specs["pytorch"].build == "*cuda*"  # conda-lock reads the selector as a build glob


def test_yaml_round_trip_gives_the_same_versions(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                 isolated: Path, tmp_path: Path) -> None:
    make(capsys, "one", "--spec", "dl_train", *GPU, "--mirror", server.url)
    out = tmp_path / "environment.yml"
    code, _o, err = run_cli(capsys, "export", "one", "-o", str(out))
    assert code == 0 and out.is_file()
    make(capsys, "two", "--file", str(out), *GPU, "--mirror", server.url)
    assert installed(isolated / "envs" / "one") == installed(isolated / "envs" / "two")
    export_two = export(capsys, "two", "--name", "one")
    assert yaml.safe_load(export_two)["dependencies"] == yaml.safe_load(out.read_text())["dependencies"]


@pytest.mark.parametrize("fmt", ["explicit", "lock"])
def test_explicit_and_lock_recreate_identical_builds(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                     isolated: Path, tmp_path: Path, fmt: str) -> None:
    make(capsys, "src", "--spec", "minimal", *GPU, "--mirror", server.url)
    out = tmp_path / f"env.{fmt}"
    code, _o, err = run_cli(capsys, "export", "src", "--format", fmt, "-o", str(out))
    assert code == 0, err
    text = out.read_text()
    assert "127.0.0.1" not in text  # canonical URLs only
    if fmt == "explicit":
        assert "@EXPLICIT" in text and "#sha256" not in text and "#sha256=" not in text
        from rattler.explicit_environment import ExplicitEnvironmentSpec

        assert len(ExplicitEnvironmentSpec.from_str(text).packages) == len(installed(isolated / "envs" / "src"))
        args = ["--file", str(out)]
    else:
        args = ["--lock", str(out)]
    requests_before = len(server.state.requests)
    code, _o, err = run_cli(capsys, "create", "copy", *args, "--mirror", server.url, "--no-verify", "-q")
    assert code == 0, err
    assert installed(isolated / "envs" / "copy", True) == installed(isolated / "envs" / "src", True)
    fetched_repodata = any("repodata" in p for _m, p, _s in server.state.requests[requests_before:])
    assert fetched_repodata == (fmt == "explicit")  # a lock needs no repodata; explicit looks each URL up


def test_a_cu_wheel_keeps_its_index_line(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                         isolated: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ENVKIT_PYTORCH_INDEX", f"{server.url}/whl")
    make(capsys, "wheels", "--spec", "minimal", "--flavor", "pip", *GPU, "--mirror", server.url)
    text = export(capsys, "wheels")
    pip = next(d["pip"] for d in yaml.safe_load(text)["dependencies"] if isinstance(d, dict))
    assert pip[0] == "--extra-index-url https://download.pytorch.org/whl/cu130"
    assert "torch==2.14.0+cu130" in pip
    assert conda_lock_specs(text, tmp_path)["torch"].manager == "pip"


@pytest.mark.parametrize("mode", ["basic", "token"])
def test_no_secret_in_any_export(capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path,
                                 mode: str) -> None:
    st = server.state
    st.auth = mode
    host = server.url.split("://")[1]
    mirror = f"http://{st.user}:{st.password}@{host}" if mode == "basic" else f"http://{host}/t/{st.token}"
    make(capsys, "secret", "--spec", "dl_train", *GPU, "--mirror", mirror)
    for fmt in ("yaml", "explicit", "lock"):
        text = export(capsys, "secret", "--format", fmt)
        assert st.password not in text and st.token not in text and st.user not in text


def test_from_history_keeps_versions_and_pip(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                             isolated: Path, tmp_path: Path) -> None:
    make(capsys, "hist", "--spec", "dl_train", *GPU, "--mirror", server.url)
    data = yaml.safe_load(export(capsys, "hist", "--from-history"))
    conda = [d for d in data["dependencies"] if isinstance(d, str)]
    assert "pytorch=2.13.0=*cuda*" in conda and "cuda-version=13.0" in conda and f"python={PY}" in " ".join(conda)
    assert not any(d.startswith(("bench", "_")) for d in conda)
    pip = next(d["pip"] for d in data["dependencies"] if isinstance(d, dict))
    assert "transformers==4.99.0" in pip  # conda's own --from-history drops these
    assert conda_lock_specs(export(capsys, "hist", "--from-history"), tmp_path)["pytorch"].manager == "conda"


def test_conda_made_env(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    prefix = conda_shaped_env(tmp_path)
    code, out, err = run_cli(capsys, "export", "--prefix", str(prefix))
    assert code == 0, err
    data = yaml.safe_load(out)
    assert data["channels"] == ["conda-forge", "pytorch"]  # mirror URL and token undone
    assert "tk-abc123" not in out and "alice:pw" not in out
    conda = [d for d in data["dependencies"] if isinstance(d, str)]
    assert "numpy=1.26.4" in conda and "pytorch=2.1.0=*cuda*" in conda  # py3.11_cuda11.8_cudnn8.7.0_0
    pip = next(d["pip"] for d in data["dependencies"] if isinstance(d, dict))
    assert pip == ["git+https://github.com/org/mylib.git@0123456789abcdef0123456789abcdef01234567",
                   "requests==2.32.3"]
    assert "left out: localpkg is an editable install" in err
    specs = conda_lock_specs(out, tmp_path)
    assert specs["numpy"].manager == "conda" and specs["requests"].manager == "pip"
    code, _out, err = run_cli(capsys, "export", "--prefix", str(prefix), "--strict")
    assert code == 1 and "editable" in err
    data = yaml.safe_load(export(capsys, "--prefix", str(prefix), "--from-history"))
    conda = [d for d in data["dependencies"] if isinstance(d, str)]
    assert conda == ["numpy=1.26.4", "python=3.11.9", "pytorch=2.1.0=*cuda*"]
    assert data["variables"] == {"OMP_NUM_THREADS": "8"}


def test_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path, server: ChannelServer,
                   isolated: Path) -> None:
    code, out, err = run_cli(capsys, "export", "nope")
    assert code == 1 and out == "" and "no environment named 'nope'" in err
    code, out, err = run_cli(capsys, "export", "--prefix", str(tmp_path))
    assert code == 1 and out == "" and "not an environment" in err
    prefix = conda_shaped_env(tmp_path)
    (prefix / "conda-meta" / "broken-1.0-0.json").write_text("{not json")
    code, out, err = run_cli(capsys, "export", "--prefix", str(prefix), "-o", str(tmp_path / "x.yml"))
    assert code == 1 and "broken-1.0-0.json" in err and not (tmp_path / "x.yml").exists()
    (prefix / "conda-meta" / "broken-1.0-0.json").unlink()
    blocker = tmp_path / "file"
    blocker.write_text("keep")
    code, _out, err = run_cli(capsys, "export", "--prefix", str(prefix), "-o", str(blocker / "env.yml"))
    assert code == 1 and "cannot write" in err and blocker.read_text() == "keep"


def test_pylock_is_what_uv_installs(capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path,
                                    tmp_path: Path) -> None:
    """`export --format pylock` writes PEP 751 pylock.toml of the env's pip packages (the files create
    installed, with sha256), which the real uv installs into a fresh venv from the loopback index."""
    import subprocess
    import sys
    import tomllib

    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        pytest.skip(f"no uv next to {sys.executable}: install the test extra (pip install '.[test]')")
    make(capsys, "src", "--spec", "dl_train", *GPU, "--mirror", server.url)
    out = tmp_path / "team" / "pylock.toml"
    out.parent.mkdir()
    code, _o, err = run_cli(capsys, "export", "src", "--format", "pylock", "-o", str(out))
    assert code == 0, err
    assert "pylock.toml names the wheels of datasets, transformers at the mirror" in err  # said, not hidden
    data = tomllib.loads(out.read_text())
    assert data["lock-version"] == "1.0" and data["created-by"] == "envkit"
    assert data["tool"]["envkit"]["conda-lock"] == "envkit.lock"
    pkgs = {p["name"]: p for p in data["packages"]}
    assert set(pkgs) == {"transformers", "datasets"} and pkgs["transformers"]["version"] == "4.99.0"
    wheel = pkgs["transformers"]["wheels"][0]
    assert wheel["url"].endswith("transformers-4.99.0-py3-none-any.whl") and len(wheel["hashes"]["sha256"]) == 64
    venv = tmp_path / "venv"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
           "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}
    made = subprocess.run([str(uv), "venv", "-q", "--python", sys.executable, str(venv)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    done = subprocess.run([str(uv), "pip", "install", "--python", str(venv / "bin" / "python"), "-r", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert {"transformers", "datasets"} <= {p.name.split("-")[0] for p in venv.glob("lib/python*/site-packages/*.dist-info")}
    code, _o, err = run_cli(capsys, "export", "src", "--format", "pylock", "-o", str(tmp_path / "team.toml"))
    assert code == 2 and "pylock.toml or pylock.NAME.toml" in err  # the name uv and pip recognise

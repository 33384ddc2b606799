"""External engines (--engine conda|micromamba) against the recording stand-in (tests/testbed/condastandin.py),
which answers in conda 26.7's and micromamba 2.x's real output formats."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from helpers import run_cli
from testbed.channel import PY
from testbed.condastandin import calls, install, record

GPU = ["--cuda", "13.0"]
CUDA_PLAN = [record("python", PY + ".0", "h0_cpython"), record("cuda-version", "13.0", "h0_3", "noarch"),
             record("pytorch", "2.13.0", "cuda130_generic_py311_h0_200")]
CPU_PLAN = [record("python", PY + ".0", "h0_cpython"), record("pytorch", "2.13.0", "cpu_generic_py311_h0_0")]


def create(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "create", *args, "--python", PY, "--no-verify")


@pytest.fixture
def nopath(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_conda_found_through_conda_exe(capsys: pytest.CaptureFixture[str], isolated: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, nopath: None) -> None:
    bindir = tmp_path / "miniforge" / "bin"
    exe = install(bindir, "conda", {"mode": "ok", "plan": CUDA_PLAN})
    monkeypatch.setenv("CONDA_EXE", str(exe))  # not on PATH: `conda activate` sets CONDA_EXE
    code, out, err = create(capsys, "ext", "--spec", "minimal", *GPU, "--engine", "conda", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [p["name"] for p in sorted(data["packages"], key=lambda p: p["name"])] == [
        "cuda-version", "python", "pytorch"]  # the real list, read from conda-meta
    log = calls(bindir)
    assert log[0]["argv"] == ["--version"]
    assert log[1]["argv"][:4] == ["create", "--dry-run", "--json", "-y"]  # GPU selection: guarded plan first
    assert log[2]["argv"][:3] == ["env", "create", "-f"] and log[2]["cuda"] == "13.0"
    prefix = tmp_path / "miniforge" / "envs" / "ext"  # conda's own envs dir, found through CONDA_EXE
    assert data["prefix"] == str(prefix)
    meta = json.loads((prefix / ".envkit" / "create.json").read_text())
    assert meta["engine"] == "conda" and meta["engine_version"] == "conda 26.7.1"
    history = (prefix / "conda-meta" / "history").read_text()
    assert history.count("==>") == 1 and "# conda version: 26.7.1" in history  # conda's own, real version


def test_channel_flag_and_dry_run_plan_table(capsys: pytest.CaptureFixture[str], isolated: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    install(bindir, "conda", {"mode": "ok", "plan": CUDA_PLAN})
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    code, out, err = create(capsys, "ext", "--spec", "minimal", *GPU, "--engine", "conda", "--dry-run",
                            "--channel", "https://team.example/conda/main")
    assert code == 0, err
    assert "pytorch" in out and "cuda130" in out and "3 packages" in out
    assert "Dry run: nothing was installed" in out and not (isolated / "envs" / "ext").exists()
    argv = calls(bindir)[-1]["argv"]
    assert argv[argv.index("--override-channels") + 1:argv.index("--override-channels") + 3] == [
        "-c", "https://team.example/conda/main"]
    code, _out, err = create(capsys, "ext", "--spec", "minimal", *GPU, "--engine", "conda",
                             "--channel", "https://team.example/conda/main")
    assert code == 0, err
    assert yaml.safe_load((bindir / "seen.yml").read_text())["channels"] == ["https://team.example/conda/main"]


def test_plan_guard_stops_a_cpu_plan_before_any_install(capsys: pytest.CaptureFixture[str], isolated: Path,
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    install(bindir, "micromamba", {"mode": "ok", "plan": CPU_PLAN})
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    for extra in (["--dry-run"], []):
        code, _out, err = create(capsys, "ext", "--spec", "minimal", *GPU, "--engine", "micromamba", *extra)
        assert code == 1 and "CPU build of PyTorch" in err and "Nothing was downloaded" in err
    assert not any("-f" in c["argv"] for c in calls(bindir))  # the create itself never ran
    assert not (isolated / "envs" / "ext").exists()


@pytest.mark.parametrize("engine", ["conda", "micromamba"])
def test_401_means_credentials_and_output_is_shown_once(capsys: pytest.CaptureFixture[str], isolated: Path,
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        engine: str) -> None:
    bindir = tmp_path / "bin"
    install(bindir, engine, {"mode": "401"})
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    code, out, err = create(capsys, "ext", "--spec", "minimal", "--cuda", "cpu", "--engine", engine)
    assert code == 1 and "HTTP 401" in err and "credentials" in err and "conda config" in err
    assert "check the network" not in err
    marker = "CondaHTTPError: HTTP 401" if engine == "conda" else "The requested URL returned error: 401"
    assert (out + err).count(marker) == 1  # streamed once, not repeated in the error
    assert not (isolated / "envs" / "ext").exists()
    code, out, err = create(capsys, "ext", "--spec", "minimal", "--cuda", "cpu", "--engine", engine, "--json")
    assert code == 1 and "HTTP 401" in err and err.count(marker) <= 1  # quiet: the tail is in the error


@pytest.mark.parametrize(("engine", "error_name"), [("conda", "PackagesNotFoundInChannelsError"),
                                                   ("conda", "PackagesNotFoundError"), ("micromamba", None)],
                         ids=["conda-26", "conda-24", "micromamba"])
def test_missing_specs_and_404_are_named(capsys: pytest.CaptureFixture[str], isolated: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, engine: str, error_name: str | None) -> None:
    """conda 26.7 names a missing package PackagesNotFoundInChannelsError, conda <= 24 PackagesNotFoundError:
    both name the specs, streamed (text) and under --json (conda's JSON error object)."""
    bindir = tmp_path / "bin"
    install(bindir, engine, {"mode": "missing", "missing": ["fail-me", "torchx=9"],
                             **({"error_name": error_name} if error_name else {})})
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    for extra in ([], ["--json"]):
        code, _out, err = create(capsys, "ext", "--spec", "minimal", "--cuda", "cpu", "--engine", engine, *extra)
        assert code == 1 and "not available from the channels: fail-me, torchx=9" in err, err
    install(bindir, engine, {"mode": "404"})
    code, _out, err = create(capsys, "ext", "--spec", "minimal", "--cuda", "cpu", "--engine", engine)
    assert code == 1 and "channel does not exist (HTTP 404)" in err and "--channel" in err


def test_an_error_envkit_has_no_rule_for_is_shown_in_condas_words(
        capsys: pytest.CaptureFixture[str], isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    install(bindir, "conda", {"mode": "other", "error_name": "CondaFutureSolverError",
                              "message": "the solver plugin 'rattler' needs conda-rattler-solver >= 0.3"})
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    said = "CondaFutureSolverError: the solver plugin 'rattler' needs conda-rattler-solver >= 0.3"
    for extra in ([], ["--json"]):  # streamed output, and the quiet JSON path
        code, _out, err = create(capsys, "ext", "--spec", "minimal", "--cuda", "cpu", "--engine", "conda", *extra)
        assert code == 1 and f"conda failed (rc 1): {said}" in err, err
        assert "read the engine's output" in err
    assert not (isolated / "envs" / "ext").exists()


def test_micromamba_argv_and_mamba_exe(capsys: pytest.CaptureFixture[str], isolated: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, nopath: None) -> None:
    """micromamba 2.x `create --help`: -y/--yes, -f/--file, -p/--prefix, --dry-run, --json, -c, --override-channels."""
    bindir = tmp_path / "mm" / "bin"
    exe = install(bindir, "micromamba", {"mode": "ok", "plan": CUDA_PLAN})
    monkeypatch.setenv("MAMBA_EXE", str(exe))  # micromamba's shell hook sets it
    code, _out, err = create(capsys, "ext", "--spec", "minimal", *GPU, "--engine", "micromamba")
    assert code == 0, err
    prefix = str(isolated / "envs" / "ext")
    argvs = [c["argv"] for c in calls(bindir)]
    assert argvs[1][:7] == ["create", "--dry-run", "--json", "-y", "-p", prefix, "--override-channels"]
    assert argvs[2][:3] == ["create", "-y", "-f"] and argvs[2][4:] == ["-p", prefix]


def test_credentials_never_reach_the_engines_file(capsys: pytest.CaptureFixture[str], isolated: Path,
                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    install(bindir, "conda", {"mode": "ok", "plan": CPU_PLAN})
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    code, out, err = create(capsys, "ext", "--spec", "minimal", "--cuda", "cpu", "--engine", "conda",
                            "--mirror", "https://alice:s3cret-pw@mirror.example/conda")
    assert code == 0, err
    seen = (bindir / "seen.yml").read_text()
    assert "s3cret-pw" not in seen and "alice" not in seen and "s3cret-pw" not in out + err
    assert yaml.safe_load(seen)["channels"] == ["conda-forge"]  # names, resolved under the alias
    assert calls(bindir)[-1]["alias_has_userinfo"] is True  # in the engine's environment only
    for path in (isolated / "envs" / "ext").rglob("*"):
        if path.is_file():
            assert "s3cret-pw" not in path.read_text(errors="replace")


def test_failed_force_rebuild_puts_the_old_env_back(capsys: pytest.CaptureFixture[str], isolated: Path,
                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    install(bindir, "conda", {"mode": "ok", "plan": CPU_PLAN})
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    code, out, err = create(capsys, "ext", "--spec", "minimal", "--cuda", "cpu", "--engine", "conda", "--json")
    assert code == 0, err
    prefix = Path(json.loads(out)["prefix"])  # conda's envs dir next to the stand-in's bin/
    (prefix / "keep.txt").write_text("old env")
    install(bindir, "conda", {"mode": "missing", "missing": ["fail-me"]})
    code, _out, err = create(capsys, "ext", "--spec", "minimal", "--cuda", "cpu", "--engine", "conda", "--force")
    assert code == 1 and "fail-me" in err
    assert (prefix / "keep.txt").read_text() == "old env"
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["ext"]  # nothing half-made left beside it


def test_conda_config_with_custom_channels_gets_channel_names(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """conda keeps mirror tokens in its own config (custom_channels/channel_alias): pass names, not URLs."""
    from envkit.create import CreateOptions
    from envkit.engines.conda_cli import engine_channels
    from envkit.render.envfile import EnvFile

    rc = tmp_path / "condarc"
    rc.write_text("custom_channels:\n  conda-forge: https://mirror.example/t/tk-123/conda\n")
    monkeypatch.setenv("CONDARC", str(rc))
    envfile = EnvFile("x", ("https://mirror.example/conda/conda-forge",), ("python",), (), (), ())
    opts = CreateOptions(name="x", mirror="https://mirror.example/conda", engine="conda")
    file_env, extra, notes = engine_channels(opts, envfile)
    assert file_env.channels == ("conda-forge",) and extra == {} and "conda's own config" in notes[0]
    monkeypatch.delenv("CONDARC")
    file_env, extra, notes = engine_channels(opts, envfile)
    assert file_env.channels == envfile.channels and not notes  # no conda config: the mirror URLs stay

"""`envkit bundle` + `envkit create --bundle`: made through the loopback mirror, installed after the mirror
is gone (no network at all), every checksum enforced."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import run_cli
from testbed.channel import PY, TestBed
from testbed.server import ChannelServer


def conda_meta(prefix: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    return {json.loads(p.read_text())["name"]: json.loads(p.read_text())
            for p in (prefix / "conda-meta").glob("*.json")}


@pytest.fixture
def made_bundle(capsys: pytest.CaptureFixture[str], testbed: TestBed, tmp_path: Path) -> tuple[Path, str]:
    out = tmp_path / "bundle"
    with ChannelServer(testbed.root) as srv:
        code, stdout, err = run_cli(capsys, "bundle", "dl", "--spec", "dl_train", "--cuda", "13.0", "--python", PY,
                                    "--mirror", srv.url, "-o", str(out))
        assert code == 0, err
        url = srv.url
    assert "install it without network: envkit create dl --bundle" in stdout
    return out, url  # the server is shut down here: from now on there is no mirror at all


def test_bundle_round_trip_without_network(capsys: pytest.CaptureFixture[str], made_bundle: tuple[Path, str],
                                           isolated: Path) -> None:
    bundle, mirror_url = made_bundle
    manifest = json.loads((bundle / "bundle.json").read_text())
    kinds = {f["kind"] for f in manifest["files"]}
    assert kinds == {"conda", "wheel"} and manifest["selection"]["cuda"] == "13.0"
    assert all((bundle / f["path"]).is_file() for f in manifest["files"])
    assert mirror_url not in (bundle / "source.lock").read_text()  # canonical URLs, mirror applied per request
    code, _out, err = run_cli(capsys, "create", "offline", "--bundle", str(bundle), "--no-verify")
    assert code == 0, err
    prefix = isolated / "envs" / "offline"
    meta = conda_meta(prefix)
    wanted = {f["path"].rsplit("/", 1)[-1] for f in manifest["files"] if f["kind"] == "conda"}
    assert {m["fn"] for m in meta.values()} == wanted
    assert meta["pytorch"]["build"].startswith("cuda130")
    # installed records name the canonical channel and URL, as a networked create would
    assert meta["pytorch"]["channel"].startswith("https://conda.anaconda.org/conda-forge")
    assert meta["pytorch"]["url"].startswith("https://conda.anaconda.org/conda-forge/")
    site = prefix / "lib" / f"python{PY}" / "site-packages"
    assert (site / "transformers-4.99.0.dist-info").is_dir() and (site / "datasets-3.99.0.dist-info").is_dir()


def test_corrupt_archive_is_refused_with_its_name(capsys: pytest.CaptureFixture[str], made_bundle: tuple[Path, str],
                                                  isolated: Path, tmp_path: Path) -> None:
    bundle, _url = made_bundle
    broken = tmp_path / "broken"
    shutil.copytree(bundle, broken)
    manifest = json.loads((broken / "bundle.json").read_text())
    victim = next(f["path"] for f in manifest["files"] if "pytorch-" in f["path"])
    data = bytearray((broken / victim).read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different content
    (broken / victim).write_bytes(bytes(data))
    code, _out, err = run_cli(capsys, "create", "bad", "--bundle", str(broken), "--no-verify")
    assert code == 1
    assert f"corrupt bundle file {victim}" in err and "nothing was installed" in err
    assert not (isolated / "envs" / "bad").exists()
    (broken / victim).unlink()
    code, _out, err = run_cli(capsys, "create", "bad", "--bundle", str(broken), "--no-verify")
    assert code == 1 and f"the bundle lacks {victim}" in err


def test_bundle_a_lock_through_a_mirror(capsys: pytest.CaptureFixture[str], made_bundle: tuple[Path, str],
                                        testbed: TestBed, tmp_path: Path) -> None:
    """source.lock (canonical URLs, as `envkit lock`/export write them) re-bundled through the mirror."""
    bundle, _url = made_bundle
    again = tmp_path / "again"
    with ChannelServer(testbed.root) as srv:
        code, _out, err = run_cli(capsys, "bundle", "--lock", str(bundle / "source.lock"), "--mirror", srv.url,
                                  "-o", str(again))
    assert code == 0, err
    first = json.loads((bundle / "bundle.json").read_text())
    second = json.loads((again / "bundle.json").read_text())
    conda = sorted((f["path"], f["sha256"]) for f in first["files"] if f["kind"] == "conda")
    assert sorted((f["path"], f["sha256"]) for f in second["files"] if f["kind"] == "conda") == conda
    code, _out, err = run_cli(capsys, "bundle", "--lock", str(bundle / "source.lock"), "-o", str(again))
    assert code == 1 and "exists and is not empty" in err


def test_fleet_create_stages_the_bundle_through_the_local_launcher(capsys: pytest.CaptureFixture[str],
                                                                   made_bundle: tuple[Path, str], isolated: Path,
                                                                   tmp_path: Path) -> None:
    """The staging path without Slurm (the local launcher carries the tar on each node's stdin too): every
    node unpacks into its own --stage-dir, checks and installs, and removes the staged copy."""
    bundle, _url = made_bundle
    code, out, err = run_cli(capsys, "fleet", "create", "dl", "--launcher", "local", "--nodes", "2",
                             "--bundle", str(bundle), "--stage-bundle", "always",
                             "--stage-dir", f"{tmp_path}/stage/{{node}}", "--prefix", f"{tmp_path}/{{node}}/dl",
                             "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["staged"] == ["local1", "local2"] and data["identical"], data
    assert sorted(p.name for p in (tmp_path / "stage").iterdir()) == ["local1", "local2"]
    assert not [p for p in (tmp_path / "stage").rglob("*") if p.is_file()]
    assert conda_meta(tmp_path / "local1" / "dl").keys() == conda_meta(tmp_path / "local2" / "dl").keys()


def test_bundle_a_file_without_a_name_and_an_env_or_lock_through_a_mirror(
        capsys: pytest.CaptureFixture[str], testbed: TestBed, isolated: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`bundle --file env.yml -o DIR` takes NAME from the file (DIR relative, as typed); `bundle NAME --mirror
    M` and `bundle --lock F --mirror M` fetch the conda and the pip parts through M: no request reaches PyPI
    or conda.anaconda.org (the namespace has no network: they could only fail)."""
    monkeypatch.chdir(tmp_path)
    env = tmp_path / "team-env.yml"
    with ChannelServer(testbed.root) as srv:
        env.write_text(f"name: teamname\nchannels: [{srv.url}/conda-forge]\n"
                       f"dependencies: [python={PY}, pip, {{pip: [--index-url {srv.url}/pypi/simple, transformers]}}]\n")
        code, out, err = run_cli(capsys, "bundle", "--file", str(env), "--no-adapt", "-o", "b1")
        assert code == 0, err
        assert "envkit create teamname --bundle" in out and (tmp_path / "b1" / "bundle.json").is_file()
        code, _o, err = run_cli(capsys, "create", "src", "--spec", "dl_train", "--cuda", "13.0", "--python", PY,
                                "--mirror", srv.url, "--no-verify", "-q")
        assert code == 0, err
        code, _o, err = run_cli(capsys, "bundle", "src", "--mirror", srv.url, "-o", str(tmp_path / "b2"))
        assert code == 0, err  # the env's canonical URLs (conda-forge, PyPI) fetched through the mirror
        lock = tmp_path / "b2" / "source.lock"
        assert "https://conda.anaconda.org/conda-forge/" in lock.read_text() and srv.url not in lock.read_text()
        code, _o, err = run_cli(capsys, "bundle", "--lock", str(lock), "--mirror", srv.url, "-o", str(tmp_path / "b3"))
        assert code == 0, err
    for folder in ("b2", "b3"):
        manifest = json.loads((tmp_path / folder / "bundle.json").read_text())
        kinds = {f["kind"] for f in manifest["files"]}
        assert kinds == {"conda", "wheel"}, folder
        assert {f["path"].rsplit("/", 1)[1].split("-")[0] for f in manifest["files"] if f["kind"] == "wheel"} == {
            "transformers", "datasets"}
    code, _o, err = run_cli(capsys, "create", "offline", "--bundle", str(tmp_path / "b3"), "--no-verify", "-q")
    assert code == 0, err


def test_bundle_and_fleet_create_check_a_name_as_create_does(capsys: pytest.CaptureFixture[str],
                                                             server: ChannelServer, tmp_path: Path) -> None:
    for argv, fix in ((("bundle", "minmal", "-o", str(tmp_path / "b")), "fix: envkit bundle minimal"),
                      (("fleet", "create", "minmal", "--launcher", "local"), "fix: envkit fleet create minimal")):
        code, _out, err = run_cli(capsys, *argv, "--cuda", "13.0")
        assert code == 2 and "no spec is named 'minmal': did you mean minimal?" in err, err
        assert fix in err, err
    assert not (tmp_path / "b").exists() and server.hits("") == []  # nothing written, nothing fetched
    code, _out, err = run_cli(capsys, "bundle", "myproj", "-o", str(tmp_path / "b"), "--cuda", "13.0", "--python", PY,
                              "--mirror", server.url)
    assert code == 0, err
    assert err.startswith("spec: dl_train (no spec is named myproj;"), err

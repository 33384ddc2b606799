"""Selection from what a channel (or wheel index) really publishes, read over a loopback mirror.

Each test builds a small conda-forge-shaped channel (real packages, indexed by rattler), serves it on
127.0.0.1 as `<mirror>/conda-forge`, and runs `envkit detect --json` through that mirror.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import cli_json, run_cli
from testbed.channel import Pkg, build, index
from testbed.pipindex import build_wheel, write_simple_index
from testbed.server import ChannelServer

H200 = ("--driver-version", "580.65.06", "--compute-capability", "9.0")


@pytest.fixture(autouse=True)
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENVKIT_OFFLINE", raising=False)  # these tests read catalogues


def torch_pkg(version: str, cuda: str | None, py: str = "3.12") -> Pkg:
    tag = py.replace(".", "")
    if cuda is None:
        return Pkg("pytorch", version, f"cpu_generic_py{tag}_h0_0", depends=[f"python >={py},<{py}.0a0"],
                   fmt=".tar.bz2")
    major = int(cuda.split(".")[0])
    return Pkg("pytorch", version, f"cuda{cuda.replace('.', '')}_generic_py{tag}_h0_200", build_number=200,
               depends=[f"python >={py},<{py}.0a0", "__cuda", f"cuda-version >={cuda},<{major + 1}"], fmt=".tar.bz2")


def cuda_versions(*lines: str) -> list[Pkg]:
    return [Pkg("cuda-version", c, "h_envkit_3", subdir="noarch", noarch="generic",
                constrains=[f"__cuda >={c.split('.')[0]}"], fmt=".tar.bz2") for c in lines]


def companion(name: str, version: str, torch_pin: str, py: str = "3.12") -> Pkg:
    return Pkg(name, version, f"py{py.replace('.', '')}_h0_0", depends=[f"python >={py},<{py}.0a0",
                                                                        f"pytorch {torch_pin}"], fmt=".tar.bz2")


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[Path, ChannelServer]]:
    root = tmp_path / "mirror"
    (root / "conda-forge").mkdir(parents=True)
    with ChannelServer(root) as srv:
        yield root, srv


def publish(root: Path, pkgs: list[Pkg]) -> None:
    channel = root / "conda-forge"
    for pkg in pkgs:
        build(pkg, channel)
    index(channel)


def detect(capsys: pytest.CaptureFixture[str], srv: ChannelServer, *args: str) -> dict:
    code, data = cli_json(capsys, "detect", "--json", *H200, "--mirror", srv.url, *args)
    assert code == 0, data
    return data["selection"]


def test_channel_missing_the_newest_release(capsys: pytest.CaptureFixture[str],
                                            mirror: tuple[Path, ChannelServer]) -> None:
    root, srv = mirror
    publish(root, [torch_pkg("2.12.1", "12.9"), torch_pkg("2.12.1", "13.0"), torch_pkg("2.12.1", None),
                   *cuda_versions("12.9", "13.0")])
    sel = detect(capsys, srv)
    assert (sel["torch"], sel["variant"]) == ("2.12.1", "cuda130")
    why = " | ".join(sel["reasons"])
    assert sel["reasons"][0].startswith(f"catalogue: conda-forge via custom mirror {srv.url}, read ")
    assert f"torch 2.13 skipped: conda-forge via custom mirror {srv.url} has no pytorch 2.13 for linux-64 yet" in why
    assert "exists on conda-forge via custom mirror" in why


def test_missing_cuda_variant_and_missing_python_build(capsys: pytest.CaptureFixture[str],
                                                       mirror: tuple[Path, ChannelServer]) -> None:
    root, srv = mirror
    # 2.13.0: cuda130 only for python 3.12; cuda129 for 3.12 and 3.13; no cuda-version 13.0 mismatch here
    publish(root, [torch_pkg("2.13.0", "13.0", "3.12"), torch_pkg("2.13.0", "12.9", "3.12"),
                   torch_pkg("2.13.0", "12.9", "3.13"), *cuda_versions("12.9", "13.0")])
    assert detect(capsys, srv)["variant"] == "cuda130"
    sel = detect(capsys, srv, "--python", "3.13")
    assert (sel["torch"], sel["variant"], sel["python"]) == ("2.13.0", "cuda129", "3.13")
    code, data = cli_json(capsys, "detect", "--json", *H200, "--mirror", srv.url, "--python", "3.11")
    assert code == 1 and "supports python 3.12-3.13, not 3.11" in data["error"]


def test_one_cuda_variant_missing(capsys: pytest.CaptureFixture[str], mirror: tuple[Path, ChannelServer]) -> None:
    root, srv = mirror
    publish(root, [torch_pkg("2.13.0", "12.9"), *cuda_versions("12.9", "13.0")])
    sel = detect(capsys, srv)
    assert (sel["torch"], sel["variant"], sel["cuda"]) == ("2.13.0", "cuda129", "12.9")


def test_torchvision_pinning_an_older_torch(capsys: pytest.CaptureFixture[str],
                                            mirror: tuple[Path, ChannelServer]) -> None:
    root, srv = mirror
    publish(root, [torch_pkg("2.13.0", "13.0"), torch_pkg("2.12.1", "13.0"), *cuda_versions("13.0"),
                   companion("torchvision", "0.27.1", "2.12.*"), companion("torchvision", "0.28.0", "2.12.*")])
    sel = detect(capsys, srv)
    assert sel["torch"] == "2.13.0" and sel["torchvision"] is None
    assert any("torchvision skipped" in r and "requires pytorch 2.12.*" in r for r in sel["reasons"])
    sel = detect(capsys, srv, "--torch", "2.12")
    assert (sel["torch"], sel["torchvision"]) == ("2.12.1", "0.28.0")


def test_lagging_mirror_lacks_what_the_static_data_lists(capsys: pytest.CaptureFixture[str],
                                                         mirror: tuple[Path, ChannelServer]) -> None:
    root, srv = mirror
    publish(root, [torch_pkg("2.5.1", "12.6"), torch_pkg("2.5.1", "11.8"), *cuda_versions("11.8", "12.6"),
                   companion("torchvision", "0.20.1", ">=2.5,<2.6")])
    sel = detect(capsys, srv)
    assert (sel["torch"], sel["variant"], sel["torchvision"]) == ("2.5.1", "cuda126", "0.20.1")
    skipped = next(r for r in sel["reasons"] if r.startswith("newer releases skipped"))
    assert "torch 2.13 skipped" in skipped and "torch 2.6 skipped" in skipped
    # --torch of a release the mirror lacks: it does not exist there, and the nearest are named
    code, data = cli_json(capsys, "detect", "--json", *H200, "--mirror", srv.url, "--torch", "2.5.0")
    assert code == 1 and data["error"].startswith(
        f"torch 2.5.0 does not exist on conda-forge via custom mirror {srv.url}; the nearest is 2.5.1")


def test_newer_release_than_the_static_data_knows(capsys: pytest.CaptureFixture[str],
                                                  mirror: tuple[Path, ChannelServer]) -> None:
    root, srv = mirror
    publish(root, [torch_pkg("2.15.0", "13.0"), torch_pkg("2.13.0", "13.0"), *cuda_versions("13.0")])
    sel = detect(capsys, srv)
    assert (sel["torch"], sel["variant"]) == ("2.15.0", "cuda130")
    why = " | ".join(sel["reasons"])
    assert "torch 2.15.0 is newer than the static data knows" in why
    assert "arch list of cuda130 is assumed from torch 2.13's" in why


def test_conda_forge_torch_2_2_does_not_exist_nearest_named(capsys: pytest.CaptureFixture[str],
                                                            mirror: tuple[Path, ChannelServer]) -> None:
    root, srv = mirror
    publish(root, [torch_pkg("2.1.2", "12.0"), torch_pkg("2.3.1", "12.0"), *cuda_versions("12.0")])
    code, _out, err = run_cli(capsys, "detect", *H200, "--mirror", srv.url, "--torch", "2.2")
    assert code == 1
    assert f"torch 2.2 does not exist on conda-forge via custom mirror {srv.url}; the nearest are 2.1.2 and 2.3.1" \
        in " ".join(err.split())


def test_network_gone_cached_catalogue_then_static(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = tmp_path / "mirror"
    publish(root, [torch_pkg("2.12.1", "13.0"), *cuda_versions("13.0")])
    with ChannelServer(root) as srv:
        url = srv.url
        assert detect(capsys, srv)["torch"] == "2.12.1"
        # a second run inside the freshness window reads nothing
        before = len(srv.state.requests)
        assert detect(capsys, srv)["reasons"][0].endswith("(cached, just now)")
        assert len(srv.state.requests) == before
    # the mirror is gone: --refresh fails, the cached catalogue stands in and the reasons say so
    code, data = cli_json(capsys, "detect", "--json", *H200, "--mirror", url, "--refresh")
    first = data["selection"]["reasons"][0]
    assert code == 0 and data["selection"]["torch"] == "2.12.1"
    assert first.startswith(f"catalogue: conda-forge via custom mirror {url}, read ") and "reading it again failed" in first
    code, data = cli_json(capsys, "detect", "--json", *H200, "--mirror", url, "--offline")
    assert "--offline" in data["selection"]["reasons"][0] and data["selection"]["torch"] == "2.12.1"
    # no cache at all: the static data, said plainly
    cache = Path(os.environ["ENVKIT_CACHE_DIR"]) / "catalogue"
    assert list(cache.glob("conda-forge-*.json"))
    for item in cache.glob("*"):
        item.unlink()
    code, data = cli_json(capsys, "detect", "--json", *H200, "--mirror", url, "--refresh")
    assert data["selection"]["reasons"][0].startswith("static data (no catalogue available: ")
    assert data["selection"]["torch"] == "2.13.0"
    code, data = cli_json(capsys, "detect", "--json", *H200, "--mirror", url, "--offline")
    assert data["selection"]["reasons"][0] == "static data (no catalogue available: offline)"


def test_detect_catalogue_table(capsys: pytest.CaptureFixture[str], mirror: tuple[Path, ChannelServer]) -> None:
    root, srv = mirror
    publish(root, [torch_pkg("2.13.0", "13.0"), torch_pkg("2.13.0", "12.9"), torch_pkg("2.13.0", None),
                   *cuda_versions("12.9", "13.0")])
    code, data = cli_json(capsys, "detect", "--catalogue", "--json", "--driver-version", "580.65.06",
                          "--compute-capability", "6.1", "--mirror", srv.url, "--flavor", "conda-forge")
    assert code == 0
    rows = {(r["torch"], r["variant"]): r for r in data["flavors"][0]["offers"]}
    assert rows[("2.13.0", "cuda129")]["usable"] and not rows[("2.13.0", "cuda130")]["usable"]
    assert "sm_61" in rows[("2.13.0", "cuda130")]["why"]
    assert rows[("2.13.0", "cpu")]["usable"]
    assert "torch 2.12 skipped" in rows[("2.12.1", None)]["why"]
    code, out, _err = run_cli(capsys, "detect", "--catalogue", "--driver-version", "580.65.06",
                              "--compute-capability", "6.1", "--mirror", srv.url, "--flavor", "conda-forge")
    assert code == 0 and "cuda130" in out and "usable" in out


# -- pip: the PyTorch index's project pages -------------------------------------------------------------
def test_pip_catalogue_from_a_loopback_index(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "index"
    work = tmp_path / "wheels"
    # cu130 lags behind (no 2.14.0 yet); cu126 has it; torchaudio stopped at 2.11.0
    for variant, torches in (("cu130", ("2.12.1",)), ("cu126", ("2.12.1", "2.14.0"))):
        wheels = [build_wheel(work / variant, "torch", f"{t}+{variant}") for t in torches]
        wheels += [build_wheel(work / variant, "torchvision", f"0.27.1+{variant}"),
                   build_wheel(work / variant, "torchaudio", f"2.11.0+{variant}")]
        write_simple_index(root / "whl" / variant, wheels)
    with ChannelServer(root) as srv:
        monkeypatch.setenv("ENVKIT_PYTORCH_INDEX", f"{srv.url}/whl")
        sel = detect(capsys, srv, "--flavor", "pip")
        assert (sel["torch"], sel["variant"]) == ("2.14.0", "cu126")
        assert sel["torchaudio"] == "2.11.0"
        sel = detect(capsys, srv, "--flavor", "pip", "--torch", "2.12")
        assert (sel["torch"], sel["variant"], sel["torchvision"], sel["torchaudio"]) == \
            ("2.12.1", "cu130", "0.27.1", "2.11.0")
        assert sel["reasons"][0].startswith("catalogue: 127.0.0.1:")
        assert srv.content_types("/whl/cu126/torch/")[0] == "application/vnd.pypi.simple.v1+json"  # PEP 691


# -- the plan check after the solve ---------------------------------------------------------------------
def test_plan_check_stops_a_solved_variant_that_differs_from_the_selection(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from testbed.channel import PY, PYTAG, python_pkg

    channel = tmp_path / "cf"
    # only a cuda129 build, whose cuda-version range also admits 13.0 (the real conda-forge shape)
    pkgs = [python_pkg(), Pkg("pytorch", "2.13.0", f"cuda129_generic_{PYTAG}_h0_200", build_number=200,
                              depends=[f"python >={PY},<{PY}.9999", "__cuda", "cuda-version >=12.9,<14"]),
            *cuda_versions("12.9", "13.0")]
    for pkg in pkgs:
        build(pkg, channel)
    index(channel)
    args = ("create", "plan", "--spec", "minimal", "--cuda", "13.0", "--python", PY, "--channel", channel.as_uri(),
            "--dry-run")
    # static data (offline): cuda130 + cuda-version 13.0 selected; the solver finds cuda129 + cuda-version 13.0
    code, _out, err = run_cli(capsys, *args, "--offline")
    text = " ".join(err.split())
    assert code == 1, err
    assert f"the solved plan installs pytorch 2.13.0 cuda129_generic_{PYTAG}_h0_200 with cuda-version 13.0" in text
    assert "but the selection was torch 2.13.0 cuda130 with cuda-version 13.0" in text and "Nothing was downloaded" in text
    # with the catalogue read from the same channel, selection already knows cuda130 does not exist
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    assert "cuda129" in out


def test_create_reads_the_catalogue_through_the_mirror_it_installs_from(
        capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path) -> None:
    import json

    from testbed.channel import PY

    code, _out, err = run_cli(capsys, "create", "cat", "--spec", "minimal", "--cuda", "13.0", "--python", PY,
                              "--mirror", server.url, "--no-verify")
    assert code == 0, err
    created = json.loads((isolated / "envs" / "cat" / ".envkit" / "create.json").read_text())
    reasons = created["selection"]["reasons"]
    assert reasons[0].startswith(f"catalogue: conda-forge via custom mirror {server.url}, read ")
    assert created["selection"]["variant"] == "cuda130"
    assert server.hits("/conda-forge/linux-64/repodata.json")  # read through the mirror, not conda.anaconda.org


@pytest.mark.parametrize("auth", ["basic", "token"])
def test_catalogue_behind_an_authenticated_mirror_keeps_secrets_out_of_the_cache(
        capsys: pytest.CaptureFixture[str], mirror: tuple[Path, ChannelServer], auth: str) -> None:
    root, srv = mirror
    publish(root, [torch_pkg("2.12.1", "13.0"), *cuda_versions("13.0")])
    st = srv.state
    st.auth = auth
    host = srv.url.split("://", 1)[1]
    url = f"http://{st.user}:{st.password}@{host}" if auth == "basic" else f"http://{host}/t/{st.token}"
    code, out, err = run_cli(capsys, "detect", "--json", *H200, "--mirror", url)
    assert code == 0, err
    sel = json.loads(out)["selection"]
    assert sel["torch"] == "2.12.1" and sel["reasons"][0].startswith("catalogue: conda-forge via custom mirror")
    cache = Path(os.environ["ENVKIT_CACHE_DIR"]) / "catalogue"
    text = "".join(p.read_text() for p in cache.glob("*.json"))
    assert text and st.password not in text and st.token not in text
    assert st.password not in out + err and st.token not in out + err


def test_legacy_pytorch_channel_catalogue(capsys: pytest.CaptureFixture[str], server: ChannelServer) -> None:
    code, data = cli_json(capsys, "detect", "--json", "--driver-version", "550.54.15", "--compute-capability", "8.9",
                          "--flavor", "pytorch", "--mirror", server.url)
    assert code == 0, data
    sel = data["selection"]
    assert (sel["torch"], sel["variant"], sel["torchvision"]) == ("2.5.1", "pytorch-cuda=12.4", "0.20.1")
    assert sel["reasons"][0].startswith(f"catalogue: pytorch via custom mirror {server.url}, read ")


def test_unreachable_mirror_falls_back_fast_and_is_not_retried_at_once(capsys: pytest.CaptureFixture[str],
                                                                       tmp_path: Path) -> None:
    import socket
    import time

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: every connection is refused
    start = time.perf_counter()
    code, data = cli_json(capsys, "detect", "--json", *H200, "--mirror", f"http://127.0.0.1:{port}")
    assert code == 0 and time.perf_counter() - start < 5
    first = data["selection"]["reasons"][0]
    assert first.startswith(f"static data (no catalogue available: cannot read http://127.0.0.1:{port}/conda-forge")
    code, data = cli_json(capsys, "detect", "--json", *H200, "--mirror", f"http://127.0.0.1:{port}")
    assert "the last read failed less than 10 min ago" in data["selection"]["reasons"][0]

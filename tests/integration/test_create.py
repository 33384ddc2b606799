"""`envkit create` against a real local conda channel over file:// and a real loopback HTTP server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import run_cli
from testbed.channel import PY, TestBed
from testbed.server import ChannelServer

GPU = ["--cuda", "13.0"]  # no GPU here: plan for a CUDA 13.0 machine, as a Docker build would


def create(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "create", *args, "--python", PY)


def conda_meta(prefix: Path) -> dict[str, dict]:
    return {json.loads(p.read_text())["name"]: json.loads(p.read_text())
            for p in (prefix / "conda-meta").glob("*.json")}


def leftovers(home: Path) -> list[str]:
    envs = home / "envs"
    return sorted(p.name for p in envs.iterdir()) if envs.exists() else []


def test_create_over_file_channel(capsys: pytest.CaptureFixture[str], testbed: TestBed, isolated: Path) -> None:
    code, out, err = create(capsys, "fileenv", "--spec", "minimal", *GPU, "--channel", testbed.url("conda-forge"),
                            "--no-verify")
    assert code == 0, err
    prefix = isolated / "envs" / "fileenv"
    meta = conda_meta(prefix)
    assert meta["pytorch"]["build"].startswith("cuda130") and meta["cuda-version"]["version"] == "13.0"
    assert "created" in out and "activate" in out
    assert (prefix / ".envkit" / "environment.yml").is_file()
    assert json.loads((prefix / ".envkit" / "create.json").read_text())["selection"]["cuda"] == "13.0"
    # the stand-in python runs, and the placeholder was rewritten to the final prefix
    done = subprocess.run([str(prefix / "bin" / "python"), "-c", "import sys; print(sys.prefix)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(prefix)
    assert str(prefix) in (prefix / "etc/envkit-standin/prefix.txt").read_text()
    assert leftovers(isolated) == ["fileenv"]


def test_create_through_the_mirror_url_with_pip_section(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                        isolated: Path) -> None:
    code, out, err = create(capsys, "dl", "--spec", "dl_train", *GPU, "--mirror", server.url, "--no-verify")
    assert code == 0, err
    prefix = isolated / "envs" / "dl"
    meta = conda_meta(prefix)
    assert {"python", "pytorch", "torchvision", "jupyter", "matplotlib", "pandas", "pip"} <= set(meta)
    # records keep canonical channel URLs: the mirror was applied per request (exports stay portable)
    assert meta["pytorch"]["channel"].startswith("https://conda.anaconda.org/conda-forge")
    assert server.url not in json.dumps(meta)
    assert server.hits("pytorch-2.13.0-cuda130_generic_py" + PY.replace(".", "") + "_h0_200.conda")
    # the pip section ran with the env's own pip against the mirror's PyPI index
    site = prefix / "lib" / f"python{PY}" / "site-packages"
    assert (site / "transformers-4.99.0.dist-info").is_dir() and (site / "datasets-3.99.0.dist-info").is_dir()
    assert server.hits("/pypi/simple/transformers/")
    kept = (prefix / ".envkit" / "environment.yml").read_text()
    assert f"{server.url}/conda-forge" in kept and f"--index-url {server.url}/pypi/simple" in kept


def test_create_with_a_config_mirror_profile(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                             isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"mirrors:\n  loopback:\n    conda:\n      conda-forge: {server.url}/conda-forge\n"
                      f"    pypi: {server.url}/pypi/simple\n    missing: [nvidia]\n")
    monkeypatch.setenv("ENVKIT_CONFIG", str(config))
    code, _out, err = create(capsys, "prof", "--spec", "minimal", *GPU, "--mirror", "loopback", "--no-verify")
    assert code == 0, err
    assert server.hits(".conda") or server.hits(".tar.bz2")
    code, _out, err = create(capsys, "prof2", "--spec", "minimal", "--flavor", "pytorch", "--torch", "2.5",
                             "--cuda", "12.4", "--mirror", "loopback", "--no-verify")
    assert code == 1 and "does not carry the channel(s) pytorch, nvidia" in err
    assert leftovers(isolated) == ["prof"]


def test_cpu_selection_without_a_gpu(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                     isolated: Path) -> None:
    code, out, err = create(capsys, "cpu", "--spec", "minimal", "--mirror", server.url, "--no-verify")
    assert code == 0, err
    assert conda_meta(isolated / "envs" / "cpu")["pytorch"]["build"].startswith("cpu")
    assert "CPU build" in out


def test_cuda_request_without_cuda_explains_the_virtual_package(capsys: pytest.CaptureFixture[str],
                                                               server: ChannelServer, isolated: Path,
                                                               tmp_path: Path) -> None:
    file = tmp_path / "cuda-only.yml"
    file.write_text(f"name: cuda-only\nchannels:\n  - {server.url}/conda-forge\ndependencies:\n"
                    f"  - python={PY}\n  - pytorch=2.13.0=cuda*\n")
    code, _out, err = run_cli(capsys, "create", "cuda-only", "--file", str(file), "--no-adapt", "--no-verify")
    assert code == 1
    assert "__cuda" in err and "no NVIDIA driver was detected" in err and "--cuda X.Y" in err
    assert leftovers(isolated) == []
    # the same file with a CUDA override solves (CONDA_OVERRIDE_CUDA, the conda-standard way)
    os.environ["CONDA_OVERRIDE_CUDA"] = "13.0"
    try:
        code, _out, err = run_cli(capsys, "create", "cuda-only", "--file", str(file), "--no-adapt", "--no-verify")
    finally:
        del os.environ["CONDA_OVERRIDE_CUDA"]
    assert code == 0, err


def test_plan_guard_stops_a_cpu_torch_before_any_download(capsys: pytest.CaptureFixture[str],
                                                          server: ChannelServer, isolated: Path,
                                                          tmp_path: Path) -> None:
    file = tmp_path / "legacy.yml"
    file.write_text(f"name: legacy\nchannels:\n  - pytorch\n  - nvidia\n  - conda-forge\ndependencies:\n"
                    f"  - python={PY}\n  - pytorch=2.5.1\n  - pytorch-cuda=12.4\n  - legacy-cpu-addon\n")
    code, _out, err = run_cli(capsys, "create", "legacy", "--file", str(file), "--flavor", "pytorch", "--cuda", "12.4",
                              "--mirror", server.url, "--no-verify", "--python", PY)
    assert code == 1
    assert "CPU build of PyTorch" in err and "cpuonly" in err and "legacy-cpu-addon" in err
    assert "Nothing was downloaded" in err
    assert not server.hits(".conda") and not server.hits(".tar.bz2")
    assert leftovers(isolated) == []


def test_dry_run_prints_the_plan_and_installs_nothing(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                      isolated: Path) -> None:
    code, out, err = create(capsys, "plan", "--spec", "dl_train", *GPU, "--mirror", server.url, "--dry-run")
    assert code == 0, err
    assert "pytorch" in out and "cuda130" in out and "to download" in out and "Dry run" in out
    assert "solved for:" in out and "__cuda=13.0" in out  # the assumption behind the plan is shown
    assert leftovers(isolated) == []
    code, out, _ = create(capsys, "plan", "--spec", "minimal", *GPU, "--mirror", server.url, "--dry-run", "--json")
    data = json.loads(out)
    assert data["dry_run"] and {p["name"] for p in data["packages"]} >= {"python", "pytorch", "cuda-version"}
    assert data["download_bytes"] > 0 and "solve" in data["phases_s"]
    assert any(v.startswith("__cuda=13.0") for v in data["virtual_packages"])


def test_a_typo_of_a_spec_name_builds_nothing_and_a_new_name_says_its_spec(
        capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path) -> None:
    code, out, err = create(capsys, "minmal", *GPU, "--mirror", server.url, "--no-verify")
    assert code == 2 and "no spec is named 'minmal': did you mean minimal?" in err, err
    assert "fix: envkit create minimal" in err and "envkit create minmal --spec minimal" in err
    assert leftovers(isolated) == [] and server.hits("") == []  # stopped before any request
    code, out, err = create(capsys, "myproj", *GPU, "--mirror", server.url, "--dry-run")
    assert code == 0, err
    assert "spec: dl_train (no spec is named myproj; --spec NAME picks another" in err
    code, out, err = create(capsys, "myproj", *GPU, "--mirror", server.url, "--dry-run", "-q")
    assert code == 0 and "spec:" not in err


def test_the_plan_and_list_wrap_at_80_columns_and_never_cut_a_path_or_channel(
        capsys: pytest.CaptureFixture[str], server: ChannelServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    home = tmp_path / ("a-rather-long-project-folder-name-" * 2) / "envkit-home"  # wider than list's column
    monkeypatch.setenv("ENVKIT_HOME", str(home))
    code, out, err = create(capsys, "wide", "--spec", "dl_train", *GPU, "--mirror", server.url, "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in out, out
    assert "  channel conda-forge: https://conda.anaconda.org/conda-forge" in lines  # the URL whole, once
    assert all(" conda-forge " in line for line in lines if line.startswith((" pytorch ", " python ")))
    code, out, err = create(capsys, "wide", "--spec", "minimal", *GPU, "--mirror", server.url, "--no-verify")
    assert code == 0, err
    code, out, _err = run_cli(capsys, "list")
    assert max(map(len, out.splitlines())) <= 80 and "…" not in out, out
    assert str(home / "envs" / "wide") in "".join(line.rsplit("│", 1)[-1].strip() for line in out.splitlines())


def test_create_shows_its_plan_before_any_download(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                  isolated: Path) -> None:
    code, _out, err = create(capsys, "p124", "--spec", "minimal", "--cuda", "12.4", "--mirror", server.url,
                             "--no-verify")
    assert code == 0, err
    plan = err.split("install...", 1)[0]  # the plain phase lines: everything before the install starts
    assert "plan: torch 2.13.0 · CUDA 12.9 (cuda129) · python" in plan
    assert "  - CUDA 12.9: torch 2.13 has no conda-forge build <= CUDA 12.4" in plan  # the reasons, one a line
    assert re.search(r"\n  \d+ conda packages, [0-9.]+ (B|KiB|MiB) to download", plan), plan
    assert "! differs from what was asked: --cuda 12.4 is the driver's CUDA level, not a CUDA line: CUDA 12.9" \
        in " ".join(plan.split())  # wrapped at the width (80 when not a terminal)
    code, _out, err = create(capsys, "pcpu", "--spec", "minimal", "--mirror", server.url, "--no-verify")
    assert code == 0, err
    assert "plan: torch 2.13.0 · CPU only" in err
    assert "differs from what was asked: a CPU build is installed (no NVIDIA driver found); to build for a GPU " \
           "machine from here pass --cuda X.Y" in " ".join(err.split())


def test_the_plan_is_known_before_a_single_archive_is_fetched(server: ChannelServer, isolated: Path) -> None:
    from envkit.create import Plan, create_env
    from envkit.engines.base import CreateOptions
    from envkit.models import Request

    seen: list[tuple[Plan, int]] = []
    opts = CreateOptions(name="early", spec="minimal", request=Request(cuda="13.0", python=PY), mirror=server.url,
                         no_verify=True)
    result = create_env(opts, on_plan=lambda plan: seen.append((plan, len(server.hits(".conda")))))
    (plan, fetched), = seen
    assert fetched == 0 and server.hits(".conda")  # nothing was downloaded when the plan was shown; then it was
    assert plan.download_bytes == result.download_bytes > 0 and plan.cached == 0
    assert {p.name for p in plan.packages} == {p.name for p in result.packages} and plan.differences == ()


def test_the_live_display_shows_each_phase_on_a_terminal(server: ChannelServer, isolated: Path) -> None:
    """Read through a pseudo-terminal of 80 columns: one row per phase, the pip row names what pip is doing,
    the verify row says what runs, and no row is the old spinning "download 0 / 0 B"."""
    import fcntl
    import pty
    import struct
    import termios

    pytest.importorskip("torch")
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 80, 0, 0))
    argv = [sys.executable, "-m", "envkit", "create", "live", "--spec", "dl_train", *GPU, "--python", PY,
            "--mirror", server.url]
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="80")
    child = subprocess.Popen(argv, stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    seen = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert child.wait(timeout=600) == 0, seen.decode(errors="replace")[-3000:]
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace"))
    assert "plan: torch 2.13.0 · CUDA 13.0 (cuda130)" in text  # the plan, above the live rows
    for row in ("solve", "download", "link", "pip", "verify"):
        assert re.search(rf"(?m)^. {row} +━", text) or re.search(rf"(?m)^  {row} +━", text), row
    assert re.search(r"download +━+ \d:\d\d:\d\d [0-9.]+ (B|KiB|MiB) / [0-9.]+ (B|KiB|MiB), [0-9.]+ \S+/s", text)
    assert re.search(r"link +━+ \d:\d\d:\d\d \d+/\d+ packages", text)
    pip_rows = set(re.findall(r"pip +━+ \d:\d\d:\d\d ([^\r\n]*)", text))
    assert "resolving the pip section" in text  # then what pip says it is doing (its last step stays shown)
    assert any(r.startswith(("Collecting", "Downloading", "Installing", "Successfully")) for r in pip_rows), pip_rows
    assert "the AMP smoke test, by the env's own python" in text
    assert "0 / 0 B" not in text and "SKIPPED: no NVIDIA driver on this machine." in text


@pytest.mark.parametrize("fault", ["404", "500", "corrupt", "truncate"])
def test_server_faults_leave_nothing_and_a_rerun_succeeds(capsys: pytest.CaptureFixture[str],
                                                          server: ChannelServer, isolated: Path, fault: str) -> None:
    target = "pytorch-2.13.0-cuda130_generic_py" + PY.replace(".", "") + "_h0_200.conda"
    server.state.faults[target] = fault
    code, _out, err = create(capsys, "faulty", "--spec", "minimal", *GPU, "--mirror", server.url, "--no-verify")
    assert code == 1
    assert target in err and "127.0.0.1" in err and "fix:" in err
    assert leftovers(isolated) == []
    server.state.faults.clear()
    code, _out, err = create(capsys, "faulty", "--spec", "minimal", *GPU, "--mirror", server.url, "--no-verify")
    assert code == 0, err


def test_transient_503_is_retried(capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path) -> None:
    target = "cuda-version-13.0-h_envkit_3.conda"
    server.state.faults[target] = "503"
    server.state.fault_budget[target] = 1
    code, _out, err = create(capsys, "retry", "--spec", "minimal", *GPU, "--mirror", server.url, "--no-verify")
    assert code == 0, err
    assert [s for _m, _p, s in server.hits(target)][:2] == [503, 200]


def test_existing_env_is_never_clobbered_without_force(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                      isolated: Path) -> None:
    args = ("--spec", "minimal", *GPU, "--mirror", server.url, "--no-verify")
    assert create(capsys, "keep", *args)[0] == 0
    marker = isolated / "envs" / "keep" / "my-notes.txt"
    marker.write_text("precious")
    code, _out, err = create(capsys, "keep", *args)
    assert code == 1 and "already exists" in err and "--force" in err
    assert marker.read_text() == "precious"
    # --force with a failing rebuild keeps the old env intact (empty the package cache: the download must fail)
    import shutil

    shutil.rmtree(Path(os.environ["ENVKIT_CACHE_DIR"]) / "pkgs")
    server.state.faults["pytorch-2.13.0-cuda130_generic_py" + PY.replace(".", "") + "_h0_200.conda"] = "500"
    code, _out, err = create(capsys, "keep", *args, "--force")
    assert code == 1 and marker.read_text() == "precious"
    assert leftovers(isolated) == ["keep"]
    server.state.faults.clear()
    code, _out, err = create(capsys, "keep", *args, "--force")
    assert code == 0 and not marker.exists()  # replaced only on success
    assert leftovers(isolated) == ["keep"]


def test_sha256_is_checked_for_file_channels(capsys: pytest.CaptureFixture[str], testbed: TestBed,
                                             isolated: Path, tmp_path: Path) -> None:
    import shutil

    channel = tmp_path / "tampered"
    shutil.copytree(testbed.channel("conda-forge"), channel)
    pkg = next((channel / "linux-64").glob("pytorch-2.13.0-cuda130*.conda"))
    other = next((channel / "linux-64").glob("pytorch-2.13.0-cpu*.conda"))
    pkg.write_bytes(other.read_bytes())  # a valid archive, but not the one repodata describes
    code, _out, err = create(capsys, "tampered", "--spec", "minimal", *GPU, "--channel", channel.as_uri(),
                             "--no-verify")
    assert code == 1 and "sha256 mismatch" in err and pkg.name in err
    assert leftovers(isolated) == []


def test_a_cached_package_is_linked_without_reading_its_archive_again(capsys: pytest.CaptureFixture[str],
                                                                      testbed: TestBed, isolated: Path,
                                                                      tmp_path: Path) -> None:
    """The sha256 of a file:// archive is checked when rattler will read it (the cache lacks the package),
    not on every create: a cached package is linked from its extracted folder, which is checked against
    its paths.json instead. Evict the entry and the archive is read, and checked, again."""
    import shutil

    channel = tmp_path / "local"
    shutil.copytree(testbed.channel("conda-forge"), channel)
    args = ("--spec", "minimal", *GPU, "--channel", channel.as_uri(), "--no-verify")
    assert create(capsys, "first", *args)[0] == 0
    pkg = next((channel / "linux-64").glob("pytorch-2.13.0-cuda130*.conda"))
    pkg.write_bytes(next((channel / "linux-64").glob("pytorch-2.13.0-cpu*.conda")).read_bytes())
    code, _out, err = create(capsys, "second", *args)
    assert code == 0, err  # the verified cached copy is linked; the changed archive is never opened
    assert (isolated / "envs" / "second" / "conda-meta").is_dir()
    shutil.rmtree(tmp_path / "cache" / "pkgs" / pkg.name.removesuffix(".conda"))
    code, _out, err = create(capsys, "third", *args)
    assert code == 1 and "sha256 mismatch" in err and pkg.name in err


@pytest.mark.parametrize("mode", ["basic", "token", "bearer"])
def test_secrets_never_reach_files_or_output(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                             isolated: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    st = server.state
    st.auth = mode
    host = server.url.split("://")[1]
    if mode == "basic":
        mirror = f"http://{st.user}:{st.password}@{host}"
    elif mode == "token":
        mirror = f"http://{host}/t/{st.token}"
    else:
        mirror = server.url
        monkeypatch.setenv("ENVKIT_MIRROR_TOKEN", st.token)
    # pip cannot send bearer tokens: that mode has no pip section (pip's keyring/netrc would carry it)
    spec = "minimal" if mode == "bearer" else "dl_train"
    code, out, err = create(capsys, f"sec-{mode}", "--spec", spec, *GPU, "--mirror", mirror, "--no-verify")
    assert code == 0, err
    if spec == "dl_train":
        assert server.hits("/pypi/simple/transformers/")[-1][2] == 200  # pip authenticated too
    secrets = [st.password, st.token]
    assert not any(s in out or s in err for s in secrets), out + err
    prefix = isolated / "envs" / f"sec-{mode}"
    if prefix.exists():
        for path in prefix.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                assert not any(s.encode() in data for s in secrets), path
    assert any(status == 200 for _m, p, status in st.requests if p.endswith(".conda"))


def test_secrets_in_install_errors_are_redacted(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                isolated: Path) -> None:
    st = server.state
    st.auth = "token"
    st.faults["pytorch-2.13.0-cuda130_generic_py" + PY.replace(".", "") + "_h0_200.conda"] = "404"
    host = server.url.split("://")[1]
    code, out, err = create(capsys, "sec-err", "--spec", "minimal", *GPU, "--mirror", f"http://{host}/t/{st.token}",
                            "--no-verify")
    assert code == 1 and "pytorch-2.13.0" in err
    assert st.token not in out + err
    assert leftovers(isolated) == []


def test_history_is_readable_by_conda(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                      isolated: Path) -> None:
    from conda_lock._vendor.conda.history import History

    assert create(capsys, "hist", "--spec", "minimal", *GPU, "--mirror", server.url, "--no-verify")[0] == 0
    prefix = isolated / "envs" / "hist"
    history = History(str(prefix))
    requested = history.get_requested_specs_map()
    assert set(requested) == {"python", "pytorch", "cuda-version"}
    assert str(requested["pytorch"]).startswith("pytorch")
    revisions = history.construct_states()
    assert len(revisions) == 1 and any(d.startswith("https://conda.anaconda.org/conda-forge")
                                       for d in revisions[0][1])
    from envkit.prefix.history import requested_specs

    assert requested_specs(prefix)["pytorch"] == "pytorch=2.13.0=cuda*"


def test_pip_flavor_uses_the_pytorch_index(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                           isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVKIT_PYTORCH_INDEX", f"{server.url}/whl")
    code, _out, err = create(capsys, "wheels", "--spec", "minimal", "--flavor", "pip", *GPU, "--mirror", server.url,
                             "--no-verify")
    assert code == 0, err
    site = isolated / "envs" / "wheels" / "lib" / f"python{PY}" / "site-packages"
    assert (site / "torch-2.14.0+cu130.dist-info").is_dir()
    assert server.hits("/whl/cu130/torch/")


def test_a_cpu_wheel_pin_is_replaced_by_the_gpu_selection(capsys: pytest.CaptureFixture[str],
                                                          server: ChannelServer, isolated: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVKIT_PYTORCH_INDEX", f"{server.url}/whl")
    file = tmp_path / "cpu-wheel.yml"
    file.write_text(f"name: w\nchannels:\n  - conda-forge\ndependencies:\n  - python={PY}\n  - pip\n  - pip:\n"
                    f"      - --extra-index-url https://download.pytorch.org/whl/cpu\n      - torch==2.14.0+cpu\n")
    code, _out, err = run_cli(capsys, "create", "w", "--file", str(file), *GPU, "--mirror", server.url,
                              "--no-verify", "--python", PY)
    assert code == 0, err
    assert "torch 2.14.0+cpu -> 2.14.0+cu130 (this machine's build)" in err and "removed pip line --extra-index-url" in err
    site = isolated / "envs" / "w" / "lib" / f"python{PY}" / "site-packages"
    assert (site / "torch-2.14.0+cu130.dist-info").is_dir() and not (site / "torch-2.14.0+cpu.dist-info").exists()


def test_pip_guard_refuses_a_cpu_wheel_for_a_gpu_selection() -> None:
    from envkit.create import pip_guard
    from envkit.errors import PlanGuardError
    from envkit.models import Selection

    sel = Selection("pip", "2.14.0", None, None, "13.0", PY, "cu130", (), ("conda-forge",), (), "x", ())
    with pytest.raises(PlanGuardError, match="CPU wheel"):
        pip_guard(sel, [("torch", "2.14.0+cpu")])
    pip_guard(sel, [("torch", "2.14.0+cu130")])  # the right wheel passes
    pip_guard(None, [("torch", "2.14.0+cpu")])  # no GPU selection: nothing to guard


def test_list_run_and_remove(capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path,
                             tmp_path: Path) -> None:
    file = tmp_path / "tool.yml"
    file.write_text(f"name: tool\nchannels:\n  - conda-forge\ndependencies:\n  - python={PY}\n"
                    "  - envkit-demo-tool\nvariables:\n  ENVKIT_DEMO: hello\n")
    code, _out, err = run_cli(capsys, "create", "tool", "--file", str(file), "--mirror", server.url, "--no-verify",
                              "--python", PY)
    assert code == 0, err
    prefix = isolated / "envs" / "tool"
    activate = prefix / "etc" / "conda" / "activate.d"
    activate.mkdir(parents=True)
    (activate / "x.sh").write_text("export FROM_ACTIVATE=yes\n")
    done = subprocess.run([sys.executable, "-m", "envkit", "run", "tool", "--", "sh", "-c",
                           'demo-tool && echo "$CONDA_PREFIX $FROM_ACTIVATE $ENVKIT_DEMO"; exit 7'],
                          capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 7
    assert "demo-tool works" in done.stdout and f"{prefix} yes hello" in done.stdout
    code, out, _ = run_cli(capsys, "list", "--json")
    data = json.loads(out)
    row = next(e for e in data["environments"] if e["name"] == "tool")
    assert row["by_envkit"] and row["verify"] is None
    assert {"dl_train", "minimal", "nlp"} <= {s["name"] for s in data["specs"]}
    code, _out, err = run_cli(capsys, "remove", "tool")
    assert code == 2 and "--yes" in err and prefix.exists()  # no tty: no silent removal
    code, _out, _err = run_cli(capsys, "remove", "tool", "--yes")
    assert code == 0 and not prefix.exists()


def test_create_then_verify_is_skipped_not_passed(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                  isolated: Path) -> None:
    pytest.importorskip("torch")
    code, out, err = create(capsys, "checked", "--spec", "minimal", *GPU, "--mirror", server.url)
    assert code == 0 and "SKIPPED: no NVIDIA driver on this machine. SKIPPED is not a PASS" in out
    assert (out + err).count("SKIPPED") == 2 and "!!!" not in out  # said once, in one sentence
    report = json.loads((isolated / "envs" / "checked" / ".envkit" / "verify.json").read_text())
    assert report["outcome"] == "SKIPPED"
    code, out, _ = run_cli(capsys, "list", "--json")
    assert next(e for e in json.loads(out)["environments"] if e["name"] == "checked")["verify"] == "SKIPPED"
    code, _out, err = create(capsys, "checked2", "--spec", "minimal", *GPU, "--mirror", server.url, "--require-gpu")
    assert code == 4
    # the reason verify gave, and the env it kept (the GPU build asked for) with the command that removes it
    assert "error: verify was SKIPPED and --require-gpu was given: no NVIDIA driver on this machine; the " \
           f"environment was kept at {isolated / 'envs' / 'checked2'}" in err, err
    assert "fix: run `envkit verify checked2` where a GPU is visible, or remove it: envkit remove checked2 --yes" in err
    assert (isolated / "envs" / "checked2" / "conda-meta").is_dir()
    code, out, err = run_cli(capsys, "remove", "checked2", "--yes")  # the fix, as printed, works
    assert code == 0 and not (isolated / "envs" / "checked2").exists()


def test_quiet_is_one_line_per_result(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                      isolated: Path) -> None:
    pytest.importorskip("torch")
    code, out, err = create(capsys, "q", "--spec", "minimal", *GPU, "--mirror", server.url, "-q")
    assert code == 0 and err == "", err
    assert out == (f"created {isolated / 'envs' / 'q'}: torch 2.13.0 CUDA 13.0 (cuda130), python {PY}: "
                   "verify SKIPPED: no NVIDIA driver on this machine (not a PASS)\n")
    code, out, err = run_cli(capsys, "verify", "q", "-q")
    assert code == 4 and out == "SKIPPED: no NVIDIA driver on this machine (not a PASS)\n" and err == ""
    code, out, err = create(capsys, "q2", "--spec", "minimal", *GPU, "--mirror", server.url, "-q", "--dry-run")
    assert code == 0 and err == "" and len(out.splitlines()) == 1
    assert out.startswith(f"plan for {isolated / 'envs' / 'q2'}: ") and "(dry run: nothing was installed)" in out
    code, out, err = create(capsys, "q3", "--spec", "minimal", "--mirror", server.url, "-q", "--require-gpu")
    assert code == 1 and out == ""  # the reason that made it a CPU build, not where the catalogue came from
    assert "error: no GPU build was selected and --require-gpu was given: no NVIDIA driver found: CPU build" in err


def test_sigint_during_install_leaves_nothing(server: ChannelServer, isolated: Path) -> None:
    target = "pytorch-2.13.0-cuda130_generic_py" + PY.replace(".", "") + "_h0_200.conda"
    server.state.faults[target] = "slow"
    proc = subprocess.Popen([sys.executable, "-m", "envkit", "create", "interrupted", "--spec", "minimal", *GPU,
                             "--mirror", server.url, "--no-verify", "--python", PY],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    deadline = time.time() + 30
    while time.time() < deadline and not server.arrived(target):
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "nothing half-made" in err
    assert leftovers(isolated) == []


def test_sigkill_leaves_only_a_staging_folder_that_the_next_run_sweeps(server: ChannelServer,
                                                                      isolated: Path) -> None:
    target = "pytorch-2.13.0-cuda130_generic_py" + PY.replace(".", "") + "_h0_200.conda"
    server.state.faults[target] = "slow"
    proc = subprocess.Popen([sys.executable, "-m", "envkit", "create", "killed", "--spec", "minimal", *GPU,
                             "--mirror", server.url, "--no-verify", "--python", PY],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    deadline = time.time() + 30
    while time.time() < deadline and not server.arrived(target):
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert "killed" not in leftovers(isolated)  # never a half-made env under the real name
    server.state.faults.clear()
    done = subprocess.run([sys.executable, "-m", "envkit", "create", "killed", "--spec", "minimal", *GPU,
                           "--mirror", server.url, "--no-verify", "--python", PY],
                          capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert leftovers(isolated) == ["killed"]


_BACKEND = '''"""In-tree PEP 517/660 backend: builds without downloading anything (the test bed is offline)."""
import base64, hashlib, os, zipfile

NAME, VERSION, MODULE = {name!r}, "1.0.0", {module!r}
DIST = NAME.replace("-", "_") + "-" + VERSION


def _wheel(directory, files):
    records = []
    path = os.path.join(directory, DIST + "-py3-none-any.whl")
    files[DIST + ".dist-info/METADATA"] = "Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n" % (NAME, VERSION)
    files[DIST + ".dist-info/WHEEL"] = "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    with zipfile.ZipFile(path, "w") as zf:
        for arc, text in files.items():
            data = text.encode()
            zf.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
        zf.writestr(DIST + ".dist-info/RECORD", "\\n".join(records + [DIST + ".dist-info/RECORD,,"]) + "\\n")
    return os.path.basename(path)


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open(os.path.join("src", MODULE + ".py")) as handle:
        return _wheel(wheel_directory, {{MODULE + ".py": handle.read()}})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {{"__editable__." + DIST + ".pth": os.path.abspath("src") + "\\n"}})
'''


def _project(root: Path, name: str, module: str) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / f"{module}.py").write_text(f"WHERE = {module!r}\n")
    (root / "backend.py").write_text(_BACKEND.format(name=name, module=module))
    (root / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                         'backend-path = ["."]\n')
    return root


def test_create_file_with_editable_local_and_git_installs(capsys: pytest.CaptureFixture[str],
                                                          server: ChannelServer, isolated: Path,
                                                          tmp_path: Path) -> None:
    """`-e .` (the env file's own project) and `-e git+file://...` (a local git repo) go to the env's pip."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed (apt: git)")
    project = _project(tmp_path / "paper-code", "paper-code", "paper_code")
    repo = _project(tmp_path / "dep-repo", "dep-lib", "dep_lib")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "dep"]):
        subprocess.run(git + args, check=True, capture_output=True)
    env_file = project / "environment.yml"
    env_file.write_text(f"name: paper\nchannels:\n  - conda-forge\ndependencies:\n  - python={PY}\n  - pip\n"
                        f"  - pip:\n      - -e .\n      - -e git+file://{repo}#egg=dep-lib\n")
    code, _out, err = run_cli(capsys, "create", "paper", "--file", str(env_file), "--mirror", server.url,
                              "--no-verify", "--python", PY)
    assert code == 0, err
    assert f"relative pip paths made absolute against {project}" in err
    prefix = isolated / "envs" / "paper"
    kept = (prefix / ".envkit" / "environment.yml").read_text()
    assert f"-e {project}" in kept and "pytorch" not in kept  # a torch-free file gets no torch
    done = subprocess.run([str(prefix / "bin" / "python"), "-c",
                           "import paper_code, dep_lib; print(paper_code.__file__); print(dep_lib.__file__)"],
                          capture_output=True, text=True, check=True)
    local, cloned = done.stdout.split()
    assert local == str(project / "src" / "paper_code.py")  # editable: the project folder itself
    assert cloned.startswith(str(prefix / "src")) and ".envkit-staging" not in cloned  # the clone, re-pointed
    assert leftovers(isolated) == ["paper"]

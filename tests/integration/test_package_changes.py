"""`envkit install / uninstall / update` on an env made on the test bed: the diff, the torch guard, conda-meta/history,
and atomicity (a failing download, SIGINT, SIGKILL leave the env exactly as it was)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import run_cli
from testbed.channel import PY, Pkg, TestBed, build, index
from testbed.pipindex import build_wheel, write_simple_index
from testbed.server import ChannelServer

from envkit.prefix.history import requested_specs

GPU = ["--cuda", "13.0"]


def make_env(capsys: pytest.CaptureFixture[str], server: ChannelServer, name: str = "dl") -> None:
    code, _out, err = run_cli(capsys, "create", name, "--spec", "minimal", *GPU, "--python", PY, "--mirror",
                              server.url, "--no-verify")
    assert code == 0, err


def make_unpinned_env(capsys: pytest.CaptureFixture[str], server: ChannelServer, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch, name: str = "cf") -> None:
    """An env whose own file does not pin torch's build (a colleague's `- pytorch`): only the guard keeps it."""
    file = tmp_path / f"{name}.yml"
    file.write_text(f"name: {name}\nchannels:\n  - {server.url}/conda-forge\ndependencies:\n"
                    f"  - python={PY}\n  - pytorch\n")
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "13.0")
    code, _out, err = run_cli(capsys, "create", name, "--file", str(file), "--no-adapt", "--no-verify")
    assert code == 0, err


def packages(prefix: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for path in (prefix / "conda-meta").glob("*.json"):
        data = json.loads(path.read_text())
        out[data["name"]] = (data["version"], data["build"])
    return out


def snapshot(prefix: Path) -> dict[str, tuple[object, ...]]:
    """Every path with its kind, inode, mode, mtime and content hash: "exactly as it was" means all of these."""
    out: dict[str, tuple[object, ...]] = {}
    for root, dirs, files in os.walk(prefix):
        for name in dirs + files:
            path = Path(root) / name
            info = path.lstat()
            if path.is_symlink():
                out[str(path.relative_to(prefix))] = ("link", os.readlink(path))
            elif path.is_dir():
                out[str(path.relative_to(prefix))] = ("dir", info.st_mode)
            else:
                out[str(path.relative_to(prefix))] = ("file", info.st_ino, info.st_mode, info.st_mtime_ns,
                                                     hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def leftovers(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "envs").iterdir())


def test_install_shows_the_diff_then_adds_the_package_and_records_it(capsys: pytest.CaptureFixture[str],
                                                                     server: ChannelServer, isolated: Path) -> None:
    make_env(capsys, server)
    prefix = isolated / "envs" / "dl"
    before = snapshot(prefix)
    code, out, err = run_cli(capsys, "install", "dl", "tqdm", "envkit-demo-tool", "--dry-run")
    assert code == 0, err
    assert "+ tqdm 1.0.0 pyh_envkit_0" in out and "+ envkit-demo-tool 1.2.0" in out
    assert "2 added, 0 changed, 0 removed" in out and "to download" in out and "Dry run" in out
    assert snapshot(prefix) == before and not server.hits("tqdm-1.0.0")  # nothing downloaded
    torch_before = packages(prefix)["pytorch"]

    code, out, err = run_cli(capsys, "install", "dl", "tqdm", "envkit-demo-tool", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["applied"] and [r["name"] for r in data["diff"]["added"]] == ["envkit-demo-tool", "tqdm"]
    assert data["diff"]["download_bytes"] > 0 and data["verify"] is None  # torch untouched: no verify
    have = packages(prefix)
    assert "tqdm" in have and have["pytorch"] == torch_before
    assert (prefix / "lib" / f"python{PY}" / "site-packages" / "tqdm_standin" / "__init__.py").is_file()
    # the new entry point works from the final prefix (paths were rewritten for it, not for the staging folder)
    tool = subprocess.run([str(prefix / "bin" / "demo-tool")], capture_output=True, text=True)
    assert tool.stdout.strip() == "demo-tool works", tool.stderr
    assert str(prefix) in (prefix / "etc/envkit-standin/prefix.txt").read_text()
    history = (prefix / "conda-meta" / "history").read_text()
    last = history.split("==> ")[-1]
    assert "# cmd: envkit install" in last and "::tqdm-1.0.0-pyh_envkit_0" in last
    assert "# update specs: ['tqdm', 'envkit-demo-tool']" in last
    specs = requested_specs(prefix)
    assert specs["tqdm"] == "tqdm" and specs["pytorch"] == "pytorch=2.13.0=cuda*"  # create's specs are kept
    assert leftovers(isolated) == ["dl"]
    # the same again: nothing to change, nothing swapped
    before = snapshot(prefix)
    code, out, err = run_cli(capsys, "install", "dl", "tqdm")
    assert code == 0 and "nothing to change" in out, err
    assert snapshot(prefix) == before


def test_a_solve_that_swaps_torch_is_refused_with_the_reason_and_the_right_command(
        capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    make_unpinned_env(capsys, server, tmp_path, monkeypatch)
    prefix = isolated / "envs" / "cf"
    assert packages(prefix)["pytorch"][1].startswith("cuda130")
    before = snapshot(prefix)
    code, _out, err = run_cli(capsys, "install", "cf", "needs-cpu-torch")
    assert code == 1
    assert "replaces the CUDA 13.0 build of pytorch" in err and "by a CPU build" in err
    assert "needs-cpu-torch -> pytorch" in err and "Nothing was downloaded" in err
    assert "fix:" in err and "envkit create cf-cpu --cuda cpu" in err
    code, _out, err = run_cli(capsys, "install", "cf", "needs-old-torch")
    assert code == 1
    assert "changes pytorch 2.13.0 to 2.5.1" in err and "CUDA 13.0 to CUDA 12.6" in err
    assert "envkit install cf needs-old-torch pytorch=2.5.1" in err  # the command that does it on purpose
    assert snapshot(prefix) == before and not server.hits("needs-old-torch-1.0")
    # named, the change is shown and asked for: without a terminal and without --yes it is not applied
    code, out, err = run_cli(capsys, "install", "cf", "needs-old-torch", "pytorch=2.5.1")
    assert code == 2 and "--yes" in err
    assert "~ pytorch 2.13.0" in out + err and "torch: it changes pytorch 2.13.0 to 2.5.1" in out + err
    assert snapshot(prefix) == before
    code, out, err = run_cli(capsys, "install", "cf", "needs-old-torch", "pytorch=2.5.1", "--yes", "--json")
    assert code == 0, err
    assert packages(prefix)["pytorch"][0] == "2.5.1" and "needs-old-torch" in packages(prefix)
    data = json.loads(out)
    assert data["torch_change"] and data["verify"]["outcome"] == "SKIPPED"  # the torch stack changed: verify --quick


def test_an_env_whose_own_pins_keep_torch_gets_the_solver_reason(capsys: pytest.CaptureFixture[str],
                                                                server: ChannelServer, isolated: Path) -> None:
    make_env(capsys, server)
    prefix = isolated / "envs" / "dl"
    before = snapshot(prefix)
    code, _out, err = run_cli(capsys, "install", "dl", "needs-cpu-torch")
    assert code == 1
    assert "no solution keeps the env's torch (pytorch 2.13.0 cuda130" in err and "needs-cpu-torch" in err
    assert "fix:" in err and "envkit install dl 'NAME=VERSION'" in err
    # a spec nothing satisfies is not torch's fault, and a malformed one is a usage error
    code, _out, err = run_cli(capsys, "install", "dl", "tqdm>=9")
    assert code == 1 and "No candidates were found for tqdm >=9" in err and "keeps the env's torch" not in err
    code, _out, err = run_cli(capsys, "install", "dl", "bad spec ;;")
    assert code == 2 and "invalid package spec" in err and "NAME=VERSION" in err
    assert snapshot(prefix) == before and leftovers(isolated) == ["dl"]


@pytest.mark.parametrize("fault", ["500", "corrupt"])
def test_a_failing_install_leaves_the_env_exactly_as_it_was(capsys: pytest.CaptureFixture[str],
                                                            server: ChannelServer, isolated: Path, fault: str) -> None:
    make_env(capsys, server)
    prefix = isolated / "envs" / "dl"
    before = snapshot(prefix)
    server.state.faults["tqdm-1.0.0-pyh_envkit_0.conda"] = fault
    code, _out, err = run_cli(capsys, "install", "dl", "envkit-demo-tool", "tqdm", "--yes")
    assert code == 1 and "tqdm" in err and "fix:" in err
    assert snapshot(prefix) == before
    assert leftovers(isolated) == ["dl"]  # the staging clone is gone
    server.state.faults.clear()
    code, _out, err = run_cli(capsys, "install", "dl", "envkit-demo-tool", "tqdm", "--yes")
    assert code == 0, err
    assert {"tqdm", "envkit-demo-tool"} <= set(packages(prefix))


def _start_install(server: ChannelServer, name: str) -> subprocess.Popen[str]:
    target = "tqdm-1.0.0-pyh_envkit_0.conda"
    server.state.faults[target] = "slow"
    proc = subprocess.Popen([sys.executable, "-m", "envkit", "install", name, "tqdm", "--yes"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    deadline = time.time() + 30
    while time.time() < deadline and not server.arrived(target):
        time.sleep(0.05)
    time.sleep(0.3)
    return proc


def test_sigint_during_an_install_leaves_the_env_as_it_was(capsys: pytest.CaptureFixture[str],
                                                           server: ChannelServer, isolated: Path) -> None:
    make_env(capsys, server)
    prefix = isolated / "envs" / "dl"
    before = snapshot(prefix)
    proc = _start_install(server, "dl")
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert snapshot(prefix) == before and leftovers(isolated) == ["dl"]


def test_sigkill_during_an_install_leaves_the_env_and_the_next_run_sweeps(capsys: pytest.CaptureFixture[str],
                                                                          server: ChannelServer,
                                                                          isolated: Path) -> None:
    make_env(capsys, server)
    prefix = isolated / "envs" / "dl"
    before = snapshot(prefix)
    proc = _start_install(server, "dl")
    proc.kill()
    proc.communicate(timeout=60)
    assert snapshot(prefix) == before
    server.state.faults.clear()
    code, out, err = run_cli(capsys, "install", "dl", "tqdm")
    assert code == 0, err
    assert "removed a stale staging folder" in out and "tqdm" in packages(prefix)
    assert leftovers(isolated) == ["dl"]


def test_uninstall_removes_a_requested_package_and_refuses_one_others_need(capsys: pytest.CaptureFixture[str],
                                                                           server: ChannelServer,
                                                                           isolated: Path) -> None:
    make_env(capsys, server)
    prefix = isolated / "envs" / "dl"
    code, _out, err = run_cli(capsys, "install", "dl", "tqdm")
    assert code == 0, err
    code, out, err = run_cli(capsys, "uninstall", "dl", "tqdm")
    assert code == 0, err
    assert "- tqdm 1.0.0" in out and "tqdm" not in packages(prefix)
    assert not (prefix / "lib" / f"python{PY}" / "site-packages" / "tqdm_standin").exists()
    assert "# remove specs: ['tqdm']" in (prefix / "conda-meta" / "history").read_text()
    assert "tqdm" not in requested_specs(prefix)
    # conda's own reader of the file (conda/history.py, vendored by conda-lock) follows both revisions
    from conda_lock._vendor.conda.history import History

    history = History(str(prefix))
    assert set(history.get_requested_specs_map()) == {"python", "pytorch", "cuda-version"}
    states = history.construct_states()
    assert len(states) == 3 and any("tqdm-1.0.0" in d for d in states[1][1]) and not any(
        "tqdm" in d for d in states[2][1])
    before = snapshot(prefix)
    code, _out, err = run_cli(capsys, "uninstall", "dl", "python")
    assert code == 2 and "pytorch depends on it" in err and "envkit uninstall dl python pytorch" in err
    code, _out, err = run_cli(capsys, "uninstall", "dl", "pandas")
    assert code == 2 and "pandas is not installed" in err
    assert snapshot(prefix) == before


def test_update_keeps_torch_and_says_when_nothing_changes(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                         isolated: Path) -> None:
    make_env(capsys, server)
    prefix = isolated / "envs" / "dl"
    before = snapshot(prefix)
    code, out, err = run_cli(capsys, "update", "dl")
    assert code == 0, err
    assert "nothing to change" in out and snapshot(prefix) == before


def test_an_env_made_with_prefix_is_changed_by_prefix(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                      isolated: Path, tmp_path: Path) -> None:
    where = tmp_path / "projects" / "env"
    code, _out, err = run_cli(capsys, "create", "proj", "--prefix", str(where), "--spec", "minimal", *GPU,
                              "--python", PY, "--mirror", server.url, "--no-verify")
    assert code == 0, err
    code, _out, err = run_cli(capsys, "install", "--prefix", str(where), "tqdm")
    assert code == 0, err
    assert "tqdm" in packages(where)
    assert sorted(p.name for p in where.parent.iterdir()) == ["env"]


def clashing_wheel(out: Path) -> Path:
    """A wheel pip resolves happily but cannot install: its file `pytorch_standin` is a folder in the env."""
    wheel = out / "clash-1.0-py3-none-any.whl"
    out.mkdir(parents=True, exist_ok=True)
    meta = "clash-1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pytorch_standin", "not a folder\n")
        zf.writestr(f"{meta}/METADATA", "Metadata-Version: 2.1\nName: clash\nVersion: 1.0\n")
        zf.writestr(f"{meta}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{meta}/RECORD", f"pytorch_standin,,\n{meta}/METADATA,,\n{meta}/WHEEL,,\n{meta}/RECORD,,\n")
    return wheel


@pytest.fixture
def pip_index(tmp_path: Path) -> Iterator[ChannelServer]:
    """A PyPI-style index on 127.0.0.1 with a plain package, one that wants another torch, and that torch."""
    root = tmp_path / "pypi-root"
    work = tmp_path / "wheels"
    write_simple_index(root / "simple", [build_wheel(work, "einops", "0.8.99"),
                                         build_wheel(work, "xformers", "0.0.99", requires=("torch==2.5.1",)),
                                         build_wheel(work, "torch", "2.5.1", "STANDIN = True\n"),
                                         clashing_wheel(work)])
    with ChannelServer(root) as srv:
        yield srv


def test_pip_installs_hold_the_env_torch_and_refuse_a_package_that_wants_another(
        capsys: pytest.CaptureFixture[str], server: ChannelServer, pip_index: ChannelServer, isolated: Path) -> None:
    make_env(capsys, server)
    prefix = isolated / "envs" / "dl"
    code, _out, err = run_cli(capsys, "install", "dl", "pip")  # the conda pip, through the same conda path
    assert code == 0, err
    index = ["--index-url", f"{pip_index.url}/simple/"]
    code, out, err = run_cli(capsys, "install", "dl", "--pip", "einops", *index)
    assert code == 0, err
    assert "+ einops 0.8.99 pip" in out
    site = prefix / "lib" / f"python{PY}" / "site-packages"
    assert (site / "einops-0.8.99.dist-info").is_dir() and leftovers(isolated) == ["dl"]
    before = snapshot(prefix)
    code, _out, err = run_cli(capsys, "install", "dl", "--pip", "xformers", *index)
    assert code == 1
    assert "wants another torch than the env's conda pytorch 2.13.0" in err and "torch==2.5.1" in err
    assert "fix:" in err and "envkit install dl pytorch=VERSION" in err
    assert not pip_index.hits("torch-2.5.1-py3-none-any.whl")  # the constraints kept pip from even fetching it
    assert snapshot(prefix) == before
    code, _out, err = run_cli(capsys, "install", "dl", "--pip", "torch", *index)
    assert code == 1 and "--pip torch in" in err and "is refused" in err and "envkit install dl pytorch" in err
    assert snapshot(prefix) == before
    # pip plans it, then fails writing it: the clone it ran in goes, the env is as it was
    code, _out, err = run_cli(capsys, "install", "dl", "--pip", "clash", *index)
    assert code == 1 and "pip install clash failed" in err and "is unchanged" in err
    assert snapshot(prefix) == before and leftovers(isolated) == ["dl"]
    code, out, err = run_cli(capsys, "uninstall", "dl", "--pip", "einops")
    assert code == 0, err
    assert not (site / "einops-0.8.99.dist-info").exists()


def test_an_env_made_from_a_channel_url_is_changed_from_that_url(capsys: pytest.CaptureFixture[str],
                                                                 testbed: TestBed, isolated: Path) -> None:
    """Its kept file says `conda-forge`; the records say where the packages really came from (no network here)."""
    code, _out, err = run_cli(capsys, "create", "local", "--spec", "minimal", *GPU, "--python", PY, "--channel",
                              testbed.url("conda-forge"), "--no-verify")
    assert code == 0, err
    code, _out, err = run_cli(capsys, "install", "local", "tqdm")
    assert code == 0, err
    assert "tqdm" in packages(isolated / "envs" / "local")
    assert json.loads((isolated / "envs" / "local" / "conda-meta" / "tqdm-1.0.0-pyh_envkit_0.json").read_text())[
        "channel"].startswith(testbed.url("conda-forge"))


def test_torture_kills_during_install_and_uninstall_never_leave_half_a_change() -> None:
    """scripts/torture.py --verbs install: SIGKILL, SIGINT and SIGTERM at random moments; the env stays the one
    before or the one after, and the next install leaves nothing behind."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "torture.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVKIT_", "CONDA_"))}
    done = subprocess.run([sys.executable, str(script), "--verbs", "install", "--kills", "1", "--kills-only",
                           "--seed", "7"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for line in ("half-applied changes", "envs lost", "staging left after next cmd", "tracebacks"):
        row = next(x for x in done.stdout.splitlines() if x.startswith(line))
        assert row.split()[len(line.split())] == "0", row
    assert "install SIGKILL" in done.stdout and "install SIGTERM" in done.stdout


def test_update_moves_a_package_to_its_new_release_and_keeps_torch(capsys: pytest.CaptureFixture[str],
                                                                  testbed: TestBed, isolated: Path,
                                                                  tmp_path: Path) -> None:
    """A channel of our own (the test bed's conda-forge copied) gains tqdm 1.1.0 after the env was made."""
    channel = tmp_path / "conda-forge"
    shutil.copytree(testbed.channel("conda-forge"), channel)
    code, _out, err = run_cli(capsys, "create", "upd", "--spec", "minimal", *GPU, "--python", PY, "--channel",
                              channel.as_uri(), "--no-verify")
    assert code == 0, err
    prefix = isolated / "envs" / "upd"
    code, _out, err = run_cli(capsys, "install", "upd", "tqdm")
    assert code == 0, err
    torch_before = packages(prefix)["pytorch"]
    build(Pkg("tqdm", "1.1.0", "pyh_envkit_0", subdir="noarch", noarch="python", depends=["python"],
              files={"site-packages/tqdm_standin/__init__.py": b"OK = 2\n"}), channel)
    index(channel)
    code, out, err = run_cli(capsys, "install", "upd", "envkit-demo-tool", "--dry-run")
    assert code == 0 and "~ tqdm" not in out, err  # an install prefers what is there: tqdm stays
    code, out, err = run_cli(capsys, "update", "upd", "--dry-run")
    assert code == 0 and "~ tqdm 1.0.0 pyh_envkit_0 -> 1.1.0 pyh_envkit_0" in out, err
    code, out, err = run_cli(capsys, "update", "upd", "tqdm")
    assert code == 0, err
    assert packages(prefix)["tqdm"][0] == "1.1.0" and packages(prefix)["pytorch"] == torch_before
    site = prefix / "lib" / f"python{PY}" / "site-packages"
    assert (site / "tqdm_standin" / "__init__.py").read_text() == "OK = 2\n"
    history = (prefix / "conda-meta" / "history").read_text().split("==> ")[-1]
    lines = history.splitlines()
    assert any(x.startswith("-") and x.endswith("::tqdm-1.0.0-pyh_envkit_0") for x in lines), history
    assert any(x.startswith("+") and x.endswith("::tqdm-1.1.0-pyh_envkit_0") for x in lines), history
    assert "# update specs: ['tqdm']" in history


def test_a_mirror_with_credentials_is_asked_for_again_and_never_written(capsys: pytest.CaptureFixture[str],
                                                                        server: ChannelServer,
                                                                        isolated: Path) -> None:
    st = server.state
    st.auth = "basic"
    mirror = f"http://{st.user}:{st.password}@{server.url.split('://')[1]}"
    code, _out, err = run_cli(capsys, "create", "sec", "--spec", "minimal", *GPU, "--python", PY, "--mirror", mirror,
                              "--no-verify")
    assert code == 0, err
    code, _out, err = run_cli(capsys, "install", "sec", "tqdm")
    assert code == 2 and "a mirror with credentials" in err and "--mirror URL" in err
    code, out, err = run_cli(capsys, "install", "sec", "tqdm", "--mirror", mirror)
    assert code == 0, err
    assert st.password not in out + err
    prefix = isolated / "envs" / "sec"
    assert "tqdm" in packages(prefix)
    for path in prefix.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert st.password.encode() not in path.read_bytes(), path


def test_force_reinstall_repairs_a_file_edited_in_place_and_its_cache_entry(capsys: pytest.CaptureFixture[str],
                                                                            server: ChannelServer,
                                                                            isolated: Path) -> None:
    """Writing into an env's file writes into its hard-linked cache entry too: both must come back."""
    make_env(capsys, server)
    code, _out, err = run_cli(capsys, "install", "dl", "tqdm")
    assert code == 0, err
    prefix = isolated / "envs" / "dl"
    target = prefix / "lib" / f"python{PY}" / "site-packages" / "tqdm_standin" / "__init__.py"
    good = target.read_bytes()
    with target.open("r+b") as handle:  # in place: the same inode as the cache's copy
        handle.write(b"XX")
    code, out, _err = run_cli(capsys, "doctor", "dl", "--deep", "--json")
    files = next(f for f in json.loads(out)["findings"] if f["check"] == "files")
    assert files["status"] == "problem" and files["fix"].startswith("envkit install dl --force-reinstall tqdm")
    code, out, err = run_cli(capsys, "install", "dl", "--force-reinstall", "tqdm")
    assert code == 0, err
    assert "= tqdm 1.0.0 pyh_envkit_0 (reinstalled)" in out
    assert target.read_bytes() == good
    code, out, _err = run_cli(capsys, "doctor", "dl", "--deep", "--json")
    assert next(f for f in json.loads(out)["findings"] if f["check"] == "files")["status"] == "ok"


def test_a_cuda_env_made_on_a_gpu_machine_takes_an_install_on_a_machine_without_a_driver(
        capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An env made where rattler saw the driver records no CUDA override; a later install on a login node, in CI or
    in a Docker build (no driver, no CONDA_OVERRIDE_CUDA) re-solves for the CUDA the env holds (its cuda-version),
    instead of failing on its own torch's __cuda (torture seed 33: "this solve had no __cuda")."""
    make_env(capsys, server)
    prefix = isolated / "envs" / "dl"
    record = prefix / ".envkit" / "create.json"
    data = json.loads(record.read_text())
    data.pop("cuda_override", None)  # what a create on a GPU machine writes: rattler detected __cuda itself
    record.write_text(json.dumps(data))
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA", raising=False)
    torch_before = packages(prefix)["pytorch"]
    code, out, err = run_cli(capsys, "install", "dl", "tqdm", "--yes")
    assert code == 0, err
    assert "tqdm" in packages(prefix) and packages(prefix)["pytorch"] == torch_before

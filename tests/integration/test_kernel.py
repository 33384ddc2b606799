"""Jupyter: create registers a kernelspec another Python's Jupyter sees and starts; remove takes it away."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import run_cli
from testbed.channel import PY, Pkg, TestBed, build, index

jupyter_client = pytest.importorskip("jupyter_client", reason="the test extra installs jupyter_client")
JUPYTER = Path(sys.executable).parent / "jupyter"
PAYLOAD = Path(__import__("envkit.verify.payload", fromlist=["x"]).__file__).parent


@pytest.fixture(scope="module")
def kernel_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A channel with a metadata-only `ipykernel`: the env's python imports the real one of the test venv
    (the test bed's python stand-in adds the test venv's site-packages through a .pth file)."""
    channel = tmp_path_factory.mktemp("kernel-channel")
    build(Pkg("ipykernel", "6.99.0", "pyh_envkit_0", subdir="noarch", noarch="python", depends=["python"],
              files={"share/envkit-standin/ipykernel.txt": b"the real ipykernel comes from the test venv\n"}),
          channel)
    index(channel)
    return channel


def env_file(tmp_path: Path, testbed: TestBed, channel: Path, *deps: str) -> Path:
    file = tmp_path / "k.yml"
    file.write_text(f"name: k\nchannels:\n  - {testbed.url('conda-forge')}\n  - {channel.as_uri()}\n"
                    f"dependencies:\n  - python={PY}\n" + "".join(f"  - {d}\n" for d in deps)
                    + "variables:\n  KVAR: kernel $value\n")
    return file


def kernelspecs() -> dict[str, dict]:
    done = subprocess.run([str(JUPYTER), "kernelspec", "list", "--json"], capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(done.stdout)["kernelspecs"]


def run_in_kernel(name: str, code: str) -> str:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name=name, startup_timeout=90)
    out: list[str] = []
    try:
        reply = kc.execute_interactive(code, timeout=60, output_hook=lambda msg: out.append(
            msg["content"].get("text", "")) if msg["msg_type"] == "stream" else None)
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return "".join(out)


def test_create_registers_a_kernel_jupyter_starts_and_remove_unregisters(
        capsys: pytest.CaptureFixture[str], testbed: TestBed, kernel_channel: Path, isolated: Path,
        tmp_path: Path) -> None:
    file = env_file(tmp_path, testbed, kernel_channel, "ipykernel", "pytorch=2.13.0")
    code, out, err = run_cli(capsys, "create", "k", "--file", str(file), "--no-adapt", "--no-verify", "--cuda", "13.0")
    assert code == 0, err
    prefix = isolated / "envs" / "k"
    assert "Jupyter kernel 'envkit-k' registered" in out
    specs = kernelspecs()  # what the Jupyter of another Python (the test venv's) sees
    assert "envkit-k" in specs
    spec = specs["envkit-k"]["spec"]
    assert spec["display_name"] == "Python (envkit: k, torch 2.13.0, CUDA 13.0)"
    assert spec["argv"][:3] == [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher"]
    assert spec["env"]["KVAR"] == "kernel $$value" and spec["env"]["CONDA_PREFIX"] == str(prefix)
    answer = run_in_kernel("envkit-k", "import os, sys; print(sys.prefix); print(os.environ['KVAR']); "
                                       "print(os.environ['PATH'].split(os.pathsep)[0])")
    assert answer.split("\n")[:3] == [str(prefix), "kernel $value", str(prefix / "bin")]
    # the summary's commands name the env itself
    assert "envkit shell k" in out and 'eval "$(envkit activate k)"' in out
    assert ("conda activate" in out) == (shutil.which("conda") is not None)  # offered only where conda exists
    code, out, err = run_cli(capsys, "remove", "k", "--yes")
    assert code == 0, err
    assert "removed its Jupyter kernel envkit-k" in out
    assert "envkit-k" not in kernelspecs()


def test_no_kernel_then_by_hand_and_foreign_specs_are_left_alone(
        capsys: pytest.CaptureFixture[str], testbed: TestBed, kernel_channel: Path, isolated: Path,
        tmp_path: Path) -> None:
    from envkit.shell.kernel import kernels_dir

    file = env_file(tmp_path, testbed, kernel_channel, "ipykernel")
    code, out, err = run_cli(capsys, "create", "k", "--file", str(file), "--no-adapt", "--no-verify", "--no-kernel")
    assert code == 0, err
    assert "Jupyter kernel" not in out and not (kernels_dir() / "envkit-k").exists()
    code, out, err = run_cli(capsys, "kernel", "k")
    assert code == 0, err
    assert json.loads((kernels_dir() / "envkit-k" / "kernel.json").read_text())["display_name"] == "Python (envkit: k)"
    code, out, _err = run_cli(capsys, "kernel", "k", "--remove")
    assert code == 0 and "removed Jupyter kernel envkit-k" in out and not (kernels_dir() / "envkit-k").exists()
    # a kernelspec envkit did not write, under the same name: never overwritten, never removed
    foreign = kernels_dir() / "envkit-k"
    foreign.mkdir(parents=True)
    (foreign / "kernel.json").write_text(json.dumps({"argv": ["python"], "display_name": "mine", "language": "python"}))
    code, _out, err = run_cli(capsys, "kernel", "k")
    assert code == 1 and "was not made by envkit" in err and "jupyter kernelspec remove envkit-k" in err
    code, _out, err = run_cli(capsys, "remove", "k", "--yes")
    assert code == 0, err
    assert json.loads((foreign / "kernel.json").read_text())["display_name"] == "mine"


def test_an_env_without_ipykernel_gets_no_kernel_and_a_clear_error(
        capsys: pytest.CaptureFixture[str], testbed: TestBed, kernel_channel: Path, isolated: Path,
        tmp_path: Path) -> None:
    file = env_file(tmp_path, testbed, kernel_channel)
    code, out, err = run_cli(capsys, "create", "k", "--file", str(file), "--no-adapt", "--no-verify")
    assert code == 0, err
    assert "Jupyter kernel" not in out
    code, _out, err = run_cli(capsys, "kernel", "k")
    assert code == 1 and "has no ipykernel" in err and "envkit install k ipykernel" in err
    # verify's hint names this env, not a placeholder
    prefix = isolated / "envs" / "k"
    done = subprocess.run([str(prefix / "bin" / "python"), "-c",
                           f"import sys; sys.path.insert(0, {str(PAYLOAD)!r}); import amp_check; "
                           "print(amp_check.recreate_command()); print(amp_check.recreate_command('--cuda 12.8'))"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["envkit create k --force", "envkit create k --cuda 12.8 --force"]


# -- issue 20: case clashes, symlinked specs and logos, nothing envkit did not make is touched ------------------
def fake_env(isolated: Path, name: str, logo: Path | None = None) -> Path:
    """An env as `envkit kernel` sees one (conda-meta with an ipykernel record), without installing it."""
    prefix = isolated / "envs" / name
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "ipykernel-6.99.0-pyh_0.json").write_text(json.dumps({"name": "ipykernel"}))
    if logo is not None:
        resources = prefix / "lib" / f"python{PY}" / "site-packages" / "ipykernel" / "resources"
        resources.mkdir(parents=True)
        (resources / "logo-64x64.png").symlink_to(logo)
    return prefix


def test_env_names_that_differ_in_case_do_not_share_a_kernel(capsys: pytest.CaptureFixture[str],
                                                             isolated: Path) -> None:
    from envkit.shell.kernel import kernels_dir

    upper, lower = fake_env(isolated, "Foo"), fake_env(isolated, "foo")
    code, _out, err = run_cli(capsys, "kernel", "Foo", "--prefix", str(upper))
    assert code == 0, err
    code, _out, err = run_cli(capsys, "kernel", "foo", "--prefix", str(lower))
    assert code == 1
    assert "already the env 'Foo'" in err and str(upper) in err and "envkit kernel Foo --remove" in err
    spec = json.loads((kernels_dir() / "envkit-foo" / "kernel.json").read_text())
    assert spec["metadata"]["envkit"]["prefix"] == str(upper)  # not taken over
    # a spec under another spelling of the name, made by someone else, is a clash too (Jupyter ignores case)
    code, _out, err = run_cli(capsys, "kernel", "Foo", "--remove", "--prefix", str(upper))
    assert code == 0, err
    other = kernels_dir() / "ENVKIT-FOO"
    other.mkdir()
    (other / "kernel.json").write_text(json.dumps({"argv": ["python"], "display_name": "theirs"}))
    code, _out, err = run_cli(capsys, "kernel", "foo", "--prefix", str(lower))
    assert code == 1 and "not made by envkit" in err and "ENVKIT-FOO" in err
    assert json.loads((other / "kernel.json").read_text())["display_name"] == "theirs"


def test_remove_over_a_symlinked_kernelspec_deletes_nothing(capsys: pytest.CaptureFixture[str], isolated: Path,
                                                            tmp_path: Path) -> None:
    from envkit.shell.kernel import kernels_dir

    prefix = fake_env(isolated, "k")
    code, _out, err = run_cli(capsys, "kernel", "k", "--prefix", str(prefix))
    assert code == 0, err
    elsewhere = tmp_path / "precious-spec"
    (kernels_dir() / "envkit-k").rename(elsewhere)  # a spec envkit made, moved away by the user
    (elsewhere / "notes.txt").write_text("mine")
    (kernels_dir() / "envkit-k").symlink_to(elsewhere, target_is_directory=True)
    code, out, err = run_cli(capsys, "kernel", "k", "--remove", "--prefix", str(prefix))
    assert code == 0 and "Traceback" not in err, err
    assert "no envkit kernel" in out
    assert (kernels_dir() / "envkit-k").is_symlink()  # neither the link nor its target is removed
    assert sorted(p.name for p in elsewhere.iterdir()) == ["kernel.json", "notes.txt"]
    code, _out, err = run_cli(capsys, "kernel", "k", "--prefix", str(prefix))
    assert code == 1 and "is a symlink envkit did not make" in err  # never written through either
    # an envkit spec with a file the user added: only envkit's files go, the folder and the user's file stay
    (kernels_dir() / "envkit-k").unlink()
    code, _out, err = run_cli(capsys, "kernel", "k", "--prefix", str(prefix))
    assert code == 0, err
    (kernels_dir() / "envkit-k" / "mine.txt").write_text("keep")
    code, out, _err = run_cli(capsys, "kernel", "k", "--remove", "--prefix", str(prefix))
    assert code == 0 and "removed Jupyter kernel envkit-k" in out
    assert [p.name for p in (kernels_dir() / "envkit-k").iterdir()] == ["mine.txt"]


@contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the block blocks: SIGALRM interrupts a blocking open/read."""
    def expired(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_logos_that_are_not_the_envs_own_regular_files_are_not_copied(capsys: pytest.CaptureFixture[str],
                                                                      isolated: Path, tmp_path: Path) -> None:
    import os

    from envkit.shell.kernel import kernels_dir

    secret = tmp_path / "root-only"
    secret.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    secret.chmod(0o600)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for name, logo in (("shadow", secret), ("zero", Path("/dev/zero")), ("fifo", fifo)):
        prefix = fake_env(isolated, name, logo)
        with within(30):  # a FIFO would block the copy, /dev/zero fill the disk
            code, out, err = run_cli(capsys, "kernel", name, "--prefix", str(prefix))
        assert code == 0 and "Traceback" not in err, err
        assert "logo-64x64.png not copied" in err, err  # said, not silently dropped
        assert not (kernels_dir() / f"envkit-{name}" / "logo-64x64.png").exists()
        assert (kernels_dir() / f"envkit-{name}" / "kernel.json").is_file()
    assert "secret-hash" not in "".join(p.read_text() for p in kernels_dir().rglob("*") if p.is_file())

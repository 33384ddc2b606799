"""The README's first command, run as written: on the machine's externally managed system python3
(PEP 668) with a temporary HOME, inside a virtualenv and a conda env, and with the real pipx and uv on
PATH (issue 15). Offline: pip, pipx and uv take envkit's dependencies from the wheelhouse scripts/test
builds while the network is up (INSTALL_TEST_WHEELHOUSE)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SYSTEM_PY = Path("/usr/bin/python3")
SYSTEM_PATH = "/usr/bin:/bin"  # no pyenv shims, no pipx, no uv: a stock Debian/Ubuntu user's PATH


def readme_quickstart() -> str:
    """The Quickstart's first command, verbatim: `./install.sh create dl_train --cuda auto`."""
    text = README.read_text(encoding="utf-8")
    quick = text.split("## Quickstart", 1)[1]
    first = re.search(r"```bash\n(.+?)\n```", quick, re.S)
    assert first is not None
    return first.group(1).strip()


def readme_install_command() -> str:
    """The Quickstart's install part: the script, without the envkit command it runs once installed."""
    line = readme_quickstart()
    install, sep, rest = line.partition(" create ")
    assert sep and rest.startswith("dl_train --cuda auto"), line
    return install


def _py_xy(python: str) -> str:
    done = subprocess.run([python, "-c", "import sys; print('%d%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def wheelhouse_for(python: str) -> Path:
    wheels = os.environ.get("INSTALL_TEST_WHEELHOUSE")
    if not wheels or not Path(wheels).is_dir():
        pytest.skip("INSTALL_TEST_WHEELHOUSE is unset: run through ./scripts/test, which builds it while online")
    xy = _py_xy(python)
    if not list(Path(wheels).glob(f"*-cp{xy}-*.whl")):
        pytest.skip(f"the wheelhouse has no cp{xy} wheels for {python}")
    return Path(wheels)


def user_env(home: Path, wheels: Path, path: str) -> dict[str, str]:
    """A fresh user's environment: temporary HOME, plain PATH, pip offline against the wheelhouse."""
    env = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8", "PIP_CONFIG_FILE": os.devnull,
           "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_NO_CACHE_DIR": "1"}
    return env


def run(command: str, env: dict[str, str], timeout: float = 300,
        user: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*user, "bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


def unprivileged(wheels: Path) -> tuple[tuple[str, ...], Path | None]:
    """As root, run as `nobody` (uid 65534) with a HOME of its own when it can read the checkout."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return (), None
    probe = subprocess.run([*NOBODY, "test", "-r", str(REPO / "install.sh"), "-a", "-r", str(wheels)],
                           capture_output=True)
    if probe.returncode != 0:
        return (), None
    home = Path(tempfile.mkdtemp(prefix="envkit-user-home-"))  # /tmp: reachable by nobody, unlike tmp_path
    os.chown(home, 65534, 65534)
    return NOBODY, home


def externally_managed() -> Path:
    if not SYSTEM_PY.exists():
        pytest.skip(f"{SYSTEM_PY} does not exist on this machine")
    done = subprocess.run([str(SYSTEM_PY), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                          capture_output=True, text=True, check=True)
    marker = Path(done.stdout.strip()) / "EXTERNALLY-MANAGED"
    if not marker.is_file():
        pytest.skip(f"{SYSTEM_PY} is not externally managed (no {marker})")
    return marker


@pytest.mark.parametrize("tool", ["pipx", "uv"])
def test_a_method_whose_tool_is_missing_says_so_and_installs_nothing(tmp_path: Path, tool: str) -> None:
    if shutil.which(tool, path=SYSTEM_PATH):
        pytest.skip(f"{tool} is on {SYSTEM_PATH} here")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}
    for extra in ("--dry-run", ""):
        done = run(f"./install.sh --method={tool} {extra}".strip(), env)
        assert done.returncode == 1 and "command not found" not in done.stderr, done.stderr
        assert f"envkit install: error: --method={tool}: {tool} is not on PATH (PATH={SYSTEM_PATH}). " \
               f"Install {tool} first, or run ./install.sh without --method" in done.stderr, done.stderr
    assert list(home.iterdir()) == []  # nothing was installed, nothing was half-made


def test_readme_first_command_is_the_install_script() -> None:
    assert readme_install_command() == "./install.sh"
    assert "--break-system-packages" not in (REPO / "install.sh").read_text()  # never, not even in a comment


@pytest.mark.slow
def test_readme_install_on_the_externally_managed_system_python(tmp_path: Path) -> None:
    externally_managed()
    wheels = wheelhouse_for(str(SYSTEM_PY))
    user, own_home = unprivileged(wheels)
    home = own_home or tmp_path / "home"
    home.mkdir(exist_ok=True)
    try:
        _install_as_a_new_user(tmp_path, wheels, home, user)
    finally:
        if own_home is not None:
            shutil.rmtree(own_home, ignore_errors=True)


def _install_as_a_new_user(tmp_path: Path, wheels: Path, home: Path, user: tuple[str, ...]) -> None:
    # Debian's ~/.profile puts ~/.local/bin on PATH; that is the PATH the README relies on
    env = user_env(home, wheels, f"{home}/.local/bin:{SYSTEM_PATH}")
    assert run("id -u", env, user=user).stdout.strip() == ("65534" if user else str(os.getuid()))  # root drops to nobody
    done = run(readme_install_command(), env, user=user)  # exactly as the README writes it
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"python {SYSTEM_PY} " in done.stdout and "externally managed" in done.stdout
    assert "# envkit launcher written by install.sh" in (home / ".local/bin/envkit").read_text()
    assert (home / ".local/share/envkit/venv/bin/envkit").exists()
    assert shutil.which("envkit", path=env["PATH"]) == str(home / ".local/bin/envkit")
    helped = run("envkit --help && envkit --version", env, timeout=60, user=user)
    assert helped.returncode == 0 and "Usage: envkit" in helped.stdout and "doctor" in helped.stdout
    # the system python was left alone
    probe = subprocess.run([str(SYSTEM_PY), "-c", "import envkit"], capture_output=True, text=True, env=env,
                           cwd=tmp_path)
    assert probe.returncode != 0
    # without ~/.local/bin on PATH: installed, and the one line to add is printed (exit 3)
    env["PATH"] = SYSTEM_PATH
    again = run(readme_install_command(), env, user=user)
    assert again.returncode == 3, again.stdout + again.stderr
    # the line to paste quotes the folder for the shell (a HOME with blanks or $ in it stays one literal word)
    assert f"export PATH='{home}/.local/bin':" + '"$PATH"' in again.stderr


@pytest.mark.slow
def test_readme_install_inside_a_virtualenv(tmp_path: Path) -> None:
    base = str(SYSTEM_PY) if SYSTEM_PY.exists() else getattr(sys, "_base_executable", sys.executable)
    wheels = wheelhouse_for(base)
    venv = tmp_path / "venv"
    subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True)
    home = tmp_path / "home"
    home.mkdir()
    env = user_env(home, wheels, f"{venv}/bin:{SYSTEM_PATH}")
    env["VIRTUAL_ENV"] = str(venv)  # what `source venv/bin/activate` sets
    done = run(readme_install_command(), env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"into the active env {venv}" in done.stdout
    assert (venv / "bin/envkit").exists() and not (home / ".local/bin/envkit").exists()
    helped = run("envkit --help", env, timeout=60)
    assert helped.returncode == 0 and "Usage: envkit" in helped.stdout


def _fake_python(directory: Path, name: str, version: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / name
    exe.write_text(f"#!/bin/sh\necho {version}\n")
    exe.chmod(0o755)
    return exe


def test_an_old_python_gets_the_ways_out_before_pip_runs(tmp_path: Path) -> None:
    old = _fake_python(tmp_path / "old", "python3", "3.8.10")  # Ubuntu 20.04's python3
    env = {"HOME": str(tmp_path), "PATH": SYSTEM_PATH, "ENVKIT_PYTHON": str(old)}
    done = run("./install.sh", env)
    assert done.returncode == 1
    assert f"envkit needs Python >= 3.10; ENVKIT_PYTHON={old} is 3.8.10" in done.stderr
    for way in ("uv python install 3.12", "conda create -n envkit-py python=3.12", "pyenv install 3.12"):
        assert way in done.stderr
    assert not (tmp_path / ".local").exists()
    # only an old python3 and no other python3.1x on PATH: the same message, naming what was found
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("bash", "dirname", "sed", "cat"):
        found = shutil.which(tool)
        assert found is not None
        (tools / tool).symlink_to(found)
    done = run("./install.sh", {"HOME": str(tmp_path), "PATH": f"{old.parent}:{tools}"})
    assert done.returncode == 1 and f"found python3 3.8.10 ({old})" in done.stderr


def test_a_newer_python3x_on_path_is_found(tmp_path: Path) -> None:
    old = _fake_python(tmp_path / "old", "python3", "3.8.10")
    xy = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (tmp_path / "old" / f"python{xy}").symlink_to(sys.executable)
    done = run("./install.sh --dry-run", {"HOME": str(tmp_path), "PATH": f"{old.parent}:{SYSTEM_PATH}"})
    assert done.returncode == 0, done.stderr
    assert f"skipped python3 3.8.10 ({old}): too old" in done.stdout
    assert "into a private venv" in done.stdout


def test_a_python_without_venv_says_what_to_install(tmp_path: Path) -> None:
    if not SYSTEM_PY.exists():
        pytest.skip(f"{SYSTEM_PY} does not exist on this machine")
    shadow = tmp_path / "no-ensurepip"
    shadow.mkdir()
    # what a Debian python3 without the python3-venv package looks like to `import ensurepip`
    (shadow / "ensurepip.py").write_text("raise ImportError('ensurepip is disabled in Debian/Ubuntu')\n")
    env = {"HOME": str(tmp_path), "PATH": SYSTEM_PATH, "ENVKIT_PYTHON": str(SYSTEM_PY), "PYTHONPATH": str(shadow)}
    done = run("./install.sh", env)
    assert done.returncode == 1
    assert "cannot create a virtual environment" in done.stderr and "sudo apt install python3-venv" in done.stderr
    assert "install pipx or uv" in done.stderr
    assert not (tmp_path / ".local/share/envkit").exists()


@pytest.mark.slow
def test_readme_install_inside_a_conda_env(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A conda env made from the test bed (python + pip), activated the way `conda activate` does."""
    from helpers import run_cli
    from testbed.channel import PY
    from testbed.doctorbed import build_doctor_bed

    bed = build_doctor_bed(tmp_path / "bed")
    file = tmp_path / "env.yml"
    file.write_text(f"name: tools\nchannels:\n  - {(bed / 'conda-forge').as_uri()}\ndependencies:\n"
                    f"  - python={PY}\n  - pip\n")
    code, _out, err = run_cli(capsys, "create", "tools", "--file", str(file), "--no-adapt", "--no-verify", "-q")
    assert code == 0, err
    from envkit.prefix.locations import find_prefix

    prefix = find_prefix("tools", None)
    wheels = wheelhouse_for(str(prefix / "bin" / "python"))
    home = tmp_path / "home"
    home.mkdir()
    env = user_env(home, wheels, f"{prefix}/bin:{SYSTEM_PATH}")
    env.update(CONDA_PREFIX=str(prefix), CONDA_DEFAULT_ENV="tools", CONDA_SHLVL="1")
    done = run(readme_install_command(), env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"into the active env {prefix}" in done.stdout
    assert (prefix / "bin/envkit").exists() and not (home / ".local").exists()
    assert run("envkit --help", env, timeout=60).returncode == 0
    # conda's base env is not a place to install into: a private venv is used instead
    env["CONDA_DEFAULT_ENV"] = "base"
    planned = run("./install.sh --dry-run", env)
    assert planned.returncode == 0 and "into a private venv" in planned.stdout


def real_tool(name: str, tools: Path) -> None:
    """Put the test venv's real pipx / uv (the test extra installs both) alone in `tools`, for PATH."""
    found = Path(sys.executable).with_name(name)
    if not found.exists():
        pytest.skip(f"no real {name} next to {sys.executable}: install the test extra (pip install '.[test]')")
    tools.mkdir(exist_ok=True)
    (tools / name).symlink_to(found)


def reported_envkit(stdout: str) -> Path:
    """The executable install.sh says it installed ("installed: envkit, version X at PATH")."""
    said = re.search(r"^envkit install: installed: envkit, version \S+ at (\S+)$", stdout, re.M)
    assert said is not None, stdout
    return Path(said.group(1))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["pip", "uv"])
def test_readme_install_with_a_real_pipx(tmp_path: Path, backend: str) -> None:
    """The README's command with the real pipx on PATH (pipx >= 1.8 drives uv when it finds it: both backends),
    offline: pip's variables reach pipx's pip and, through --pip-args, its uv."""
    if not SYSTEM_PY.exists():
        pytest.skip(f"{SYSTEM_PY} does not exist on this machine")
    wheels = wheelhouse_for(str(SYSTEM_PY))
    if backend == "pip" and not list(wheels.glob("pip-*.whl")):
        pytest.skip("the wheelhouse has no pip wheel (pipx upgrades pip in its shared venv): rerun ./scripts/test")
    real_tool("pipx", tmp_path / "tools")
    home, bindir = tmp_path / "home", tmp_path / "pipx-bin"
    home.mkdir()
    env = user_env(home, wheels, f"{tmp_path}/tools:{bindir}:{SYSTEM_PATH}")
    env.update(PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(bindir), PIPX_DEFAULT_BACKEND=backend)
    done = run(readme_install_command(), env)  # exactly as the README writes it
    assert done.returncode == 0, done.stdout + done.stderr
    assert "with pipx" in done.stdout and "installed package envkit 0.1.0" in done.stdout
    assert reported_envkit(done.stdout) == bindir / "envkit"
    assert shutil.which("envkit", path=env["PATH"]) == str(bindir / "envkit")
    helped = run("envkit --help", env, timeout=60)
    assert helped.returncode == 0 and "Usage: envkit" in helped.stdout and "doctor" in helped.stdout
    assert (tmp_path / "pipx/venvs/envkit").is_dir() and not (home / ".local/bin").exists()
    if backend == "uv":  # a uv venv has no pip: proof that uv, not pip, installed it
        assert not list((tmp_path / "pipx/venvs/envkit").glob("lib/python3*/site-packages/pip"))


@pytest.mark.slow
def test_readme_install_with_a_real_uv(tmp_path: Path) -> None:
    """The README's command with the real uv on PATH (no pipx), offline through the same PIP_* variables."""
    if not SYSTEM_PY.exists():
        pytest.skip(f"{SYSTEM_PY} does not exist on this machine")
    wheels = wheelhouse_for(str(SYSTEM_PY))
    real_tool("uv", tmp_path / "tools")
    home, bindir = tmp_path / "home", tmp_path / "uv-bin"
    home.mkdir()
    env = user_env(home, wheels, f"{tmp_path}/tools:{bindir}:{SYSTEM_PATH}")
    env.update(UV_TOOL_DIR=str(tmp_path / "uv-tools"), UV_TOOL_BIN_DIR=str(bindir), UV_PYTHON_DOWNLOADS="never")
    done = run(readme_install_command(), env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "with uv tool install" in done.stdout and "+ envkit==0.1.0" in done.stderr
    assert reported_envkit(done.stdout) == bindir / "envkit"
    assert shutil.which("envkit", path=env["PATH"]) == str(bindir / "envkit")
    helped = run("envkit --help", env, timeout=60)
    assert helped.returncode == 0 and "Usage: envkit" in helped.stdout and "doctor" in helped.stdout
    assert (tmp_path / "uv-tools/envkit/bin/python").exists() and not (home / ".local/bin").exists()


@pytest.mark.parametrize("tool", ["pipx", "uv"])
def test_pipx_and_uv_get_pips_index_settings_as_options(tmp_path: Path, tool: str) -> None:
    """A recording stand-in for pipx / uv: the exact argv, with PIP_* turned into options (uv reads no PIP_*)."""
    if not SYSTEM_PY.exists():
        pytest.skip(f"{SYSTEM_PY} does not exist on this machine")
    envkit = Path(sys.executable).with_name("envkit")
    home = tmp_path / "home"
    bindir = tmp_path / "bin"
    bindir.mkdir(parents=True)
    (bindir / tool).write_text(
        "#!/bin/sh\n"
        'if [ "$1 $2 $3" = "tool dir --bin" ]; then echo "$HOME/.local/bin"; exit 0; fi\n'
        'if [ "$1" = environment ]; then exit 2; fi\n'  # a pipx older than `environment --value`
        f'for a in "$@"; do echo "$a"; done > "$HOME/{tool}-argv"\n'
        f'mkdir -p "$HOME/.local/bin" && ln -sf {envkit} "$HOME/.local/bin/envkit"\n')
    (bindir / tool).chmod(0o755)
    home.mkdir()
    env = {"HOME": str(home), "PATH": f"{bindir}:{home}/.local/bin:{SYSTEM_PATH}", "ENVKIT_PYTHON": str(SYSTEM_PY),
           "PIP_NO_INDEX": "yes", "PIP_FIND_LINKS": "/w/one /w/two", "PIP_INDEX_URL": "https://mirror.example/simple",
           "PIP_EXTRA_INDEX_URL": "https://download.pytorch.org/whl/cu130"}
    done = run(readme_install_command(), env)
    assert done.returncode == 0, done.stdout + done.stderr
    argv = (home / f"{tool}-argv").read_text().splitlines()
    index = ["--no-index", "--index-url", "https://mirror.example/simple",
             "--extra-index-url", "https://download.pytorch.org/whl/cu130", "--find-links", "/w/one", "--find-links", "/w/two"]
    if tool == "pipx":
        assert argv[:4] == ["install", "--force", "--python", str(SYSTEM_PY)] and argv[4] == "--pip-args"
        assert shlex.split(argv[5]) == index and argv[6:] == [str(REPO)]
    else:
        assert argv == ["tool", "install", "--force", "--python", str(SYSTEM_PY), *index, str(REPO)]
    assert reported_envkit(done.stdout) == home / ".local/bin/envkit"
    # without PIP_* variables no index option is added
    for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        del env[name]
    assert run(readme_install_command(), env).returncode == 0
    argv = (home / f"{tool}-argv").read_text().splitlines()
    assert not any(a.startswith("--") and "index" in a or a in ("--find-links", "--pip-args") for a in argv), argv


def test_options_and_a_missing_env(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": SYSTEM_PATH}
    helped = run("./install.sh --help", env)
    assert helped.returncode == 0 and "--dry-run" in helped.stdout and "EXTERNALLY-MANAGED" in helped.stdout
    assert run("./install.sh --bogus", env).returncode == 2
    forced = run("./install.sh --method=env", env)
    assert forced.returncode == 1 and "needs an active virtualenv or conda env" in forced.stderr


# -- hostile HOMEs and an envkit that is not install.sh's (issue 20) -------------------------------------
HOSTILE_HOME = "h o$(touch PWN)'q\"`touch PWN2`;x"


def fake_venv(venv: Path, *, runs: bool = True) -> None:
    """A venv install.sh finds made already: its python is this test's python, and `-m pip` does nothing
    (the wheelhouse tests above run the real pip); with runs=False envkit cannot start (a broken launcher)."""
    (venv / "bin").mkdir(parents=True)
    broken = "" if runs else "if [ \"$1\" = -I ]; then echo 'broken python' >&2; exit 9; fi\n"
    (venv / "bin" / "python").write_text('#!/bin/sh\nif [ "$1 $2" = "-m pip" ]; then exit 0; fi\n' + broken
                                         + f'exec {shlex.quote(sys.executable)} "$@"\n')
    (venv / "bin" / "python").chmod(0o755)


def hostile_user(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / HOSTILE_HOME
    home.mkdir()
    fake_venv(home / ".local/share/envkit/venv")
    env = {"HOME": str(home), "PATH": f"{home}/.local/bin:{SYSTEM_PATH}", "LANG": "C.UTF-8",
           "ENVKIT_PYTHON": sys.executable}
    return home, env


def no_canary(*folders: Path) -> None:
    assert [p for f in folders for p in f.glob("PWN*")] == []


def test_a_hostile_home_gets_a_launcher_that_runs_nothing_from_it(tmp_path: Path) -> None:
    home, env = hostile_user(tmp_path)
    done = run("./install.sh --method=venv", env)
    assert done.returncode == 0, done.stdout + done.stderr
    launcher = home / ".local/bin/envkit"
    assert not launcher.is_symlink() and "# envkit launcher written by install.sh" in launcher.read_text()
    assert reported_envkit(done.stdout.replace(str(home), "HOME")) == Path("HOME/.local/bin/envkit")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    for _ in range(2):  # every call, not just the first
        used = subprocess.run([str(launcher), "--help"], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=60)
        assert used.returncode == 0 and "Usage: envkit" in used.stdout, used.stderr
    no_canary(tmp_path, home, cwd, REPO)
    # installing again replaces its own launcher (and an older install.sh's link) without a word
    launcher.unlink()
    launcher.symlink_to(home / ".local/share/envkit/venv/bin/envkit")
    again = run("./install.sh --method=venv", env)
    assert again.returncode == 0, again.stderr
    assert not launcher.is_symlink() and "# envkit launcher" in launcher.read_text()
    # off PATH: the line printed to paste is quoted; pasted into bash it adds exactly that folder, runs nothing
    env["PATH"] = SYSTEM_PATH
    off = run("./install.sh --method=venv", env)
    assert off.returncode == 3, off.stdout + off.stderr
    line = next(x.strip() for x in off.stderr.splitlines() if x.strip().startswith("export PATH="))
    pasted = subprocess.run(["bash", "-c", f'{line}\nprintf "%s" "$PATH"'], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=30)
    assert pasted.stdout == f"{home}/.local/bin:{SYSTEM_PATH}"
    no_canary(tmp_path, home, cwd, REPO)


def test_a_launcher_that_does_not_run_is_not_reported_installed(tmp_path: Path) -> None:
    home, env = hostile_user(tmp_path)
    venv = home / ".local/share/envkit/venv"
    shutil.rmtree(venv)
    fake_venv(venv, runs=False)
    done = run("./install.sh --method=venv", env)
    assert done.returncode == 1
    assert "envkit install: installed:" not in done.stdout, done.stdout
    assert "does not run" in done.stderr and "broken python" in done.stderr


def test_an_envkit_install_sh_did_not_write_is_never_replaced(tmp_path: Path) -> None:
    home, env = hostile_user(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    env["ENVKIT_BIN_DIR"] = str(bindir)
    mine = tmp_path / "my-envkit"
    mine.write_text("#!/bin/sh\necho mine\n")
    for kind in ("symlink", "file", "dangling symlink"):
        target = bindir / "envkit"
        if target.exists() or target.is_symlink():
            target.unlink()
        if kind == "file":
            target.write_text("#!/bin/sh\necho my own envkit\n")
        else:
            target.symlink_to(mine if kind == "symlink" else tmp_path / "gone")
        before = os.readlink(target) if target.is_symlink() else target.read_text()
        done = run("./install.sh --method=venv", env)
        assert done.returncode == 1, (kind, done.stdout + done.stderr)
        assert "was not written by install.sh" in done.stderr and "nothing was changed" in done.stderr, kind
        assert "--force" in done.stderr and "rm " in done.stderr and "ENVKIT_BIN_DIR=" in done.stderr
        assert (os.readlink(target) if target.is_symlink() else target.read_text()) == before, kind
        assert "installed:" not in done.stdout
    forced = run("./install.sh --method=venv --force", env)
    assert forced.returncode in (0, 3), forced.stdout + forced.stderr
    assert "--force: replacing" in forced.stdout and "# envkit launcher" in (bindir / "envkit").read_text()
    assert mine.read_text() == "#!/bin/sh\necho mine\n"  # a link is replaced, never what it points to
    no_canary(tmp_path, home, REPO)


def test_home_unset_is_a_clear_error(tmp_path: Path) -> None:
    env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "ENVKIT_PYTHON": sys.executable}
    done = run("./install.sh --method=venv", env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "unbound variable" not in done.stderr
    assert "HOME is not set" in done.stderr and "HOME=/home/" in done.stderr


FRESH = "envkit-qs"


@pytest.mark.slow
@pytest.mark.parametrize("account", ["user", "root"])
def test_the_quickstart_line_on_a_fresh_account_in_a_login_shell(tmp_path: Path, account: str) -> None:
    """Issue 24: a fresh account, a login shell, the README's first line verbatim in a fresh copy of the checkout,
    the local test channel as the mirror: envkit is installed, the environment is created in that same shell, and
    the next login finds `envkit` on PATH.
    user: a new `useradd -m` account, whose /etc/skel ~/.profile adds ~/.local/bin only if it exists at login.
    root: a fresh root home (a private mount namespace puts an empty folder with Debian's base-files dot.profile and
    dot.bashrc over /root), whose ~/.profile never adds ~/.local/bin: install.sh appends its one marked line."""
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("useradd", "userdel", "runuser", "unshare", "mount")):
        pytest.skip("needs root and useradd/userdel/runuser/unshare/mount to make a fresh account")
    if not SYSTEM_PY.exists():
        pytest.skip(f"{SYSTEM_PY} does not exist on this machine")
    skel = Path("/usr/share/base-files")
    if account == "root" and not (skel / "dot.profile").is_file():
        pytest.skip("no Debian base-files dot.profile here: a fresh root home cannot be made as Debian makes it")
    if account == "root" and subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("no private mount namespace here (unshare -m)")
    wheels = wheelhouse_for(str(SYSTEM_PY))
    if _py_xy(str(SYSTEM_PY)) != _py_xy(sys.executable):
        pytest.skip(f"{SYSTEM_PY} is not the X.Y of the test python: the test channel's packages would not fit it")
    from testbed.channel import build_testbed, test_venv_site
    from testbed.pipindex import build_pip_indexes
    from testbed.server import ChannelServer

    user = f"{FRESH}{os.getpid() % 100000}" if account == "user" else "root"
    stack = contextlib.ExitStack()
    if account == "user":
        subprocess.run(["userdel", "-r", user], capture_output=True)  # a leftover of a killed run
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", user], check=True, capture_output=True)
        home = Path(subprocess.run(["runuser", "-l", user, "-c", "echo $HOME"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    else:
        home = tmp_path / "root-home"
        home.mkdir(mode=0o700)
        shutil.copy(skel / "dot.profile", home / ".profile")
        if (skel / "dot.bashrc").is_file():
            shutil.copy(skel / "dot.bashrc", home / ".bashrc")

    def login(command: str, timeout: int) -> subprocess.CompletedProcess[str]:
        if account == "user":
            argv = ["runuser", "-l", user, "-c", command]
        else:  # a login shell of root whose /root is the fresh home, in a mount namespace of its own
            argv = ["unshare", "-m", "--", "sh", "-c", 'mount --bind "$1" /root && exec runuser -l root -c "$2"',
                    "sh", str(home), command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)

    try:
        assert not (home / ".local/bin").exists()
        clone, house = home / "envkit", home / "wheels"
        shutil.copytree(REPO, clone, ignore=shutil.ignore_patterns(".git", ".venv*", "__pycache__", "*.egg-info",
                                                                   ".mypy_cache", ".pytest_cache", "build", "dist"))
        shutil.copytree(wheels, house)
        site = test_venv_site()  # the env's torch (CPU) is the test venv's: the new account must be able to read it
        if account == "user":
            subprocess.run(["chown", "-R", f"{user}:{user}", str(clone), str(house)], check=True)
            if subprocess.run(["runuser", "-u", user, "--", "test", "-r", site[0]], capture_output=True).returncode:
                pytest.skip(f"{site[0]} is not readable by a new account here (its checkout sits in a private folder)")
        # the test channel, with a python stand-in the new account can run (the system python, same X.Y)
        bed = tmp_path / "bed"
        build_testbed(bed, host_site=site, interpreter=SYSTEM_PY.resolve())
        build_pip_indexes(bed)
        # offline: install.sh's pip finds envkit's dependencies in the wheelhouse; the mirror is the test channel
        server = stack.enter_context(ChannelServer(bed))
        setup = (f"export PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS={shlex.quote(str(Path('~') / house.relative_to(home)))} "
                 f"PIP_INDEX_URL={shlex.quote(server.url + '/pypi/simple')} PIP_DISABLE_PIP_VERSION_CHECK=1 "
                 f"ENVKIT_MIRROR={shlex.quote(server.url)}; cd ~/envkit && ").replace("'~/", "~/'")
        first = login(setup + readme_quickstart(), 600)
        said = first.stdout + first.stderr
        assert first.returncode == 0, said
        if account == "user":
            assert "your ~/.profile adds it at your next login" in first.stderr, said
            assert "envkit install.sh" not in (home / ".profile").read_text()  # the stock profile already does
        else:
            assert "added one line to ~/.profile so that your next login has it on PATH" in first.stderr, said
            assert (home / ".profile").read_text().count("# envkit install.sh:") == 1
        assert "running: envkit create dl_train --cuda auto" in first.stdout, said
        assert "CPU build" in first.stdout, said  # no GPU here: --cuda auto planned a CPU build, and said so
        assert (home / ".local/bin/envkit").is_file()
        # the next login: ~/.profile puts ~/.local/bin on PATH, envkit is found and lists the new env
        second = login("command -v envkit && envkit list --json", 120)
        assert second.returncode == 0, second.stdout + second.stderr
        assert second.stdout.splitlines()[0] == ("/root" if account == "root" else str(home)) + "/.local/bin/envkit"
        listed = json.loads(second.stdout.split("\n", 1)[1])
        assert "dl_train" in {e["name"] for e in listed["environments"]}
    finally:
        stack.close()
        if account == "user":
            subprocess.run(["pkill", "-u", user], capture_output=True)
            subprocess.run(["userdel", "-r", user], capture_output=True)

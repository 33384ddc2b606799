"""`envkit --version` and shell completion through click's own mechanism (issue 15)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_cli

ENVKIT = Path(sys.executable).with_name("envkit")  # the installed console script of the test venv


def _installed() -> str:
    if not ENVKIT.exists():
        pytest.skip(f"no installed envkit script next to {sys.executable}")
    return str(ENVKIT)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from envkit import __version__

    code, out, _err = run_cli(capsys, "--version")
    assert code == 0 and out.strip() == f"envkit, version {__version__}"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_what_click_generates(capsys: pytest.CaptureFixture[str], shell: str) -> None:
    code, out, _err = run_cli(capsys, "completion", shell)
    assert code == 0 and "_ENVKIT_COMPLETE" in out
    env = dict(os.environ, _ENVKIT_COMPLETE=f"{shell}_source")
    done = subprocess.run([_installed()], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert out == done.stdout


def test_bash_loads_the_script_and_completes_verbs_and_env_names(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    _code, script, _err = run_cli(capsys, "completion", "bash")
    done = subprocess.run([bash, "--norc", "-c", f'{script}\ncomplete -p envkit'], capture_output=True, text=True)
    assert done.returncode == 0 and "_envkit_completion" in done.stdout, done.stderr
    home = tmp_path / "envkit-home"
    (home / "envs" / "dl_train" / "conda-meta").mkdir(parents=True)
    env = dict(os.environ, ENVKIT_HOME=str(home), _ENVKIT_COMPLETE="bash_complete", COMP_WORDS="envkit doc",
               COMP_CWORD="1")
    verbs = subprocess.run([_installed()], env=env, capture_output=True, text=True, timeout=60)
    assert "plain,doctor" in verbs.stdout.splitlines()
    env.update(COMP_WORDS="envkit doctor dl", COMP_CWORD="2")
    names = subprocess.run([_installed()], env=env, capture_output=True, text=True, timeout=60)
    assert "plain,dl_train" in names.stdout.splitlines()


def completions(*words: str) -> list[tuple[str, str | None]]:
    """What click's completion offers after `envkit WORDS...` for the last, incomplete word (in-process)."""
    from click.shell_completion import ShellComplete

    from envkit.cli import cli

    *args, incomplete = words
    return [(item.value, item.help) for item in ShellComplete(cli, {}, "envkit", "_ENVKIT_COMPLETE")
            .get_completions(args, incomplete)]


def test_every_verb_that_takes_a_name_completes_envs_or_specs(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """Walks the live tree: every NAME or SPEC argument completes something, environments where the verb
    reads one, specs where it builds one, both for bundle."""
    import click

    from envkit.cli import cli

    home = tmp_path / "envkit-home"
    (home / "envs" / "mine" / "conda-meta").mkdir(parents=True)
    monkeypatch.setenv("ENVKIT_HOME", str(home))
    builds = {("create",), ("render",), ("lock",), ("fleet", "create")}

    def walk(command: click.Command, path: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                yield from walk(sub, (*path, name))
        else:
            yield path, command

    checked = 0
    for path, command in walk(cli):
        if not any(isinstance(p, click.Argument) and p.name in ("name", "spec") for p in command.params):
            continue
        offered = {value for value, _help in completions(*path, "")}
        if path == ("bundle",):
            assert {"mine", "minimal"} <= offered, offered
        elif path in builds:
            assert "minimal" in offered and "mine" not in offered, (path, offered)
        else:
            assert "mine" in offered and "minimal" not in offered, (path, offered)
        checked += 1
    assert checked >= 12
    assert completions("create", "mi") == [("minimal", "spec")] and completions("remove", "mi") == [
        ("mine", "environment")]

"""`envkit shell`: the launch plan per shell (rc file, ZDOTDIR, ENV, fish's init command), and a missing shell."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_subshell_launch_per_shell(tmp_path: Path) -> None:
    import shutil

    from envkit.shell.subshell import plan_launch

    prefix = tmp_path / "envs" / "e"
    cmd = ["/opt/py", "-m", "envkit"]
    env = {"HOME": "/h/u", "PATH": "/usr/bin:/bin", "SHELL": "/bin/bash", "ZDOTDIR": "/h/u/.zsh"}
    bash = plan_launch(prefix, env, tmp_path, shell="bash", command=cmd)
    assert bash.argv[1:] == ("--rcfile", str(tmp_path / "envkit-rc.bash"), "-i")
    text = dict(bash.files)[str(tmp_path / "envkit-rc.bash")]
    assert text.startswith('[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"')
    assert f"/opt/py -m envkit activate --shell bash --prefix {prefix}" in text
    zsh = plan_launch(prefix, env, tmp_path, shell="zsh", command=cmd)
    assert zsh.env["ZDOTDIR"] == str(tmp_path) and zsh.env["_ENVKIT_ZDOTDIR"] == "/h/u/.zsh"
    assert {Path(p).name for p, _ in zsh.files} == {".zshenv", ".zshrc"}
    sh = plan_launch(prefix, {**env, "ENV": "/h/u/.shrc"}, tmp_path, shell="sh", command=cmd)
    assert sh.env["ENV"] == str(tmp_path / "envkit-rc.sh") and "/h/u/.shrc" in sh.files[0][1]
    fish = plan_launch(prefix, env, tmp_path, shell="fish", command=cmd)
    assert fish.argv[1:3] == ("-i", "--init-command") and "--shell fish --prefix" in fish.files[0][1]
    if shutil.which("bash"):
        odd = plan_launch(prefix, {**env, "SHELL": "/bin/tcsh"}, tmp_path, command=cmd)
        assert odd.kind == "bash" and "'/bin/tcsh'" in odd.notes[0]


def test_a_missing_shell_is_an_envkit_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envkit.errors import EnvkitError
    from envkit.shell.subshell import open_shell

    monkeypatch.setenv("PATH", str(tmp_path))  # no zsh to be found
    with pytest.raises(EnvkitError, match="cannot start zsh") as caught:
        open_shell(tmp_path, shell="zsh")
    assert "--shell" in (caught.value.hint or "")


HOSTILE = "a b$(touch PWNED)`touch PWNED`;'\"%!\\{}\n-x\u00e9\x1b"


@pytest.mark.parametrize("kind", ["bash", "zsh", "sh", "fish"])
def test_the_startup_file_hands_a_hostile_prefix_over_as_one_argument(kind: str, tmp_path: Path) -> None:
    """The rc file, read by the real shell, runs the activate command with the prefix as exactly one
    argument (a stand-in for envkit records its argv), and nothing else."""
    import shutil
    import subprocess

    from envkit.shell.subshell import plan_launch

    exe = {"sh": "dash"}.get(kind, kind)
    if not shutil.which(exe):
        pytest.skip(f"{exe} is not installed")
    record = tmp_path / "argv"
    stand_in = tmp_path / "bin" / "fake envkit"
    stand_in.parent.mkdir()
    stand_in.write_text(f"#!/bin/sh\nprintf '%s\\0' \"$@\" > '{record}'\n")
    stand_in.chmod(0o755)
    work = tmp_path / "rc"
    work.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    prefix = tmp_path / "envs" / HOSTILE
    launch = plan_launch(prefix, {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}, work, shell=exe,
                         command=[str(stand_in)])
    for path, text in launch.files:
        Path(path).write_text(text, encoding="utf-8")
    rc = launch.files[-1][0]
    argv = {"bash": ["bash", "--norc", "-c", f". '{rc}'"], "zsh": ["zsh", "-f", "-c", f". '{rc}'"],
            "sh": ["dash", "-c", f". '{rc}'"], "fish": ["fish", "--no-config", "-c", f"source '{rc}'"]}[kind]
    env = {**launch.env, "HOME": str(tmp_path / "home")}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert record.read_text().split("\0")[:-1] == ["activate", "--shell", kind, "--prefix", str(prefix)]
    assert not list(cwd.iterdir())


def test_sh_refuses_a_startup_folder_that_sh_would_expand(tmp_path: Path) -> None:
    """POSIX sh expands $ENV before reading it (dash runs command substitutions in it)."""
    from envkit.errors import EnvkitError
    from envkit.shell.subshell import plan_launch

    odd = tmp_path / "t$(touch PWNED)"
    with pytest.raises(EnvkitError, match="sh would expand") as caught:
        plan_launch(tmp_path / "e", {"HOME": "/h", "PATH": "/usr/bin"}, odd, shell="sh", command=["/opt/py"])
    assert "TMPDIR" in (caught.value.hint or "")

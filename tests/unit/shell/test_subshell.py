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
    assert fish.argv[1:3] == ("-i", "--init-command") and "--shell' 'fish'" in fish.files[0][1]
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

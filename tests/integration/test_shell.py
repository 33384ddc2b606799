"""Ways into an env, in real shells: `envkit activate`/`deactivate` evaluated by bash, zsh, sh and fish,
`envkit shell` in a pseudo-terminal, compared variable by variable with what the env's files say."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any
from pathlib import Path

import pytest

from testbed.channel import PY, TestBed

ENVKIT = Path(sys.executable).parent / "envkit"
A_VARS = {"CLOBBER": "from-A", "SHARED": "A", "ONLY_A": "it's $HOME and `ticks` \\ \"q\""}
B_STATE = {"SHARED": "B", "UNSET_ME": "***unset***"}
B_PKG = {"PKG_VAR": "pkg", "SHARED": "pkg"}


@dataclass
class World:
    root: Path
    base: dict[str, str]  # the environment the shells start from
    a: Path  # made by envkit create
    b: Path  # laid out as conda makes one (found through CONDA_ENVS_PATH)
    log: Path


def _scripts(prefix: Path, tag: str, log: Path) -> None:
    """activate.d/deactivate.d as packages ship them: .sh and .fish, plus Windows ones that must be skipped."""
    act = prefix / "etc" / "conda" / "activate.d"
    deact = prefix / "etc" / "conda" / "deactivate.d"
    act.mkdir(parents=True, exist_ok=True)
    deact.mkdir(parents=True, exist_ok=True)
    (act / f"{tag}-1.sh").write_text(f'echo "{tag}-act" >> "{log}"\nexport {tag}_SCRIPT=yes\n')
    (act / f"{tag}-2.sh").write_text(f'export {tag}_ORDER="${{{tag}_SCRIPT:-missing}}-second"\n')
    (act / f"{tag}-1.fish").write_text(f'echo "{tag}-act" >> "{log}"\nset -gx {tag}_SCRIPT yes\n'
                                       f'set -gx {tag}_ORDER "$' + f'{tag}_SCRIPT-second"\n')
    (act / f"{tag}.bat").write_text("@set X=1\r\n")
    (act / f"{tag}.ps1").write_text("$Env:X = 1\n")
    (deact / f"{tag}-1.sh").write_text(f'echo "{tag}-deact" >> "{log}"\nunset {tag}_SCRIPT {tag}_ORDER\n')
    (deact / f"{tag}-1.fish").write_text(f'echo "{tag}-deact" >> "{log}"\nset -e {tag}_SCRIPT\nset -e {tag}_ORDER\n')


@pytest.fixture(scope="module")
def world(testbed: TestBed, tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("shellworld")
    home = root / "home"
    # a first interactive fish builds man-page completions in the background, holding the terminal open
    (home / ".local" / "share" / "fish" / "generated_completions").mkdir(parents=True)
    base = {"PATH": f"{ENVKIT.parent}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
            "ENVKIT_HOME": str(root / "envkit"), "ENVKIT_CACHE_DIR": str(root / "cache"),
            "CONDA_ENVS_PATH": str(root / "conda" / "envs"), "XDG_DATA_HOME": str(home / ".local/share"),
            "CLOBBER": "machine", "PIP_CONFIG_FILE": os.devnull, "TERM": "dumb"}
    spec = root / "a.yml"
    spec.write_text(f"name: A\nchannels:\n  - {testbed.url('conda-forge')}\ndependencies:\n  - python={PY}\n"
                    "variables:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in A_VARS.items()))
    no_conda = {k: v for k, v in base.items() if k != "CONDA_ENVS_PATH"}  # A goes to envkit's own folder
    done = subprocess.run([str(ENVKIT), "create", "A", "--file", str(spec), "--no-adapt", "--no-verify", "-q"],
                          env=no_conda, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    a = root / "envkit" / "envs" / "A"
    assert json.loads((a / "conda-meta" / "state").read_text())["env_vars"] == A_VARS
    b = root / "conda" / "envs" / "B"
    (b / "conda-meta").mkdir(parents=True)
    (b / "conda-meta" / "history").write_text("==> 2026-01-01 00:00:00 <==\n# cmd: conda create -n B\n")
    (b / "conda-meta" / "state").write_text(json.dumps({"env_vars": B_STATE}))  # `conda env config vars set`
    (b / "etc" / "conda" / "env_vars.d").mkdir(parents=True)
    (b / "etc" / "conda" / "env_vars.d" / "pkg.json").write_text(json.dumps(B_PKG))
    (b / "bin").mkdir()
    log = root / "scripts.log"
    _scripts(a, "A", log)
    _scripts(b, "B", log)
    return World(root, base, a, b, log)


def expected_a(world: World, before: dict[str, str]) -> dict[str, str]:
    """conda-meta/state and the activate.d scripts of A, applied to `before` by hand."""
    return {**before, **A_VARS, "PATH": f"{world.a}/bin:{before['PATH']}", "CONDA_PREFIX": str(world.a),
            "CONDA_SHLVL": "1", "CONDA_DEFAULT_ENV": "A", "CONDA_PROMPT_MODIFIER": "(A) ",
            "__CONDA_SHLVL_0_CLOBBER": before["CLOBBER"], "A_SCRIPT": "yes", "A_ORDER": "yes-second"}


def expected_b_over_a(world: World, level1: dict[str, str], before: dict[str, str]) -> dict[str, str]:
    out = {k: v for k, v in level1.items() if k not in ("ONLY_A", "A_SCRIPT", "A_ORDER")}
    out.update(B_PKG)
    out.update(SHARED="B", CLOBBER=before["CLOBBER"], PATH=f"{world.b}/bin:{before['PATH']}",
               CONDA_PREFIX=str(world.b), CONDA_SHLVL="2", CONDA_DEFAULT_ENV="B", CONDA_PROMPT_MODIFIER="(B) ",
               CONDA_PREFIX_1=str(world.a), __CONDA_SHLVL_1_SHARED="A", B_SCRIPT="yes", B_ORDER="yes-second")
    return out


POSIX = """
dump() {{ env > "{out}/$1.env"; printf '%s' "${{PS1-}}" > "{out}/$1.ps1"; }}
PS1='$ '
dump 0
eval "$(envkit activate A)"; dump 1
eval "$(envkit activate B)"; dump 2
eval "$(envkit deactivate)"; dump 3
eval "$(envkit deactivate)"; dump 4
"""
FISH = """
function dump; env > "{out}/$argv[1].env"; fish_prompt > "{out}/$argv[1].ps1"; end
function fish_prompt; printf '$ '; end
dump 0
envkit activate A | source; dump 1
envkit activate B | source; dump 2
envkit deactivate | source; dump 3
envkit deactivate | source; dump 4
"""
SHELL_ARGV = {"bash": ["bash", "--norc", "--noprofile", "-c"], "zsh": ["zsh", "-f", "-c"], "sh": ["sh", "-c"],
              "fish": ["fish", "--no-config", "-c"]}


def read_env_file(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if "=" in line:
            key, _, value = line.partition("=")
            out[key] = value
    for noise in ("_", "SHLVL", "PWD", "OLDPWD"):
        out.pop(noise, None)
    return out


@pytest.mark.parametrize("shell", ["bash", "zsh", "sh", "fish"])
def test_activate_and_deactivate_in_a_real_shell(world: World, shell: str, tmp_path: Path) -> None:
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed (apt-get install {shell}; .ci/apt-packages lists it)")
    world.log.write_text("")
    script = (FISH if shell == "fish" else POSIX).format(out=tmp_path)
    done = subprocess.run([*SHELL_ARGV[shell], script], env={**world.base, "SHELL": f"/bin/{shell}"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    snap = [read_env_file(tmp_path / f"{i}.env") for i in range(5)]
    before = snap[0]
    assert before["CLOBBER"] == "machine" and "CONDA_SHLVL" not in before
    level1 = expected_a(world, before)
    assert snap[1] == level1
    assert snap[2] == expected_b_over_a(world, level1, before)
    assert "UNSET_ME" not in snap[2]
    assert snap[3] == level1  # deactivate B: back to A exactly
    assert snap[4] == before  # deactivate A: nothing left behind
    # each activate.d script ran once per activation, deactivate.d once per deactivation, in conda's order
    assert world.log.read_text().split() == ["A-act", "A-deact", "B-act", "B-deact", "A-act", "A-deact"]
    prompts = [(tmp_path / f"{i}.ps1").read_text() for i in range(5)]
    assert prompts == ["$ ", "(A) $ ", "(B) $ ", "(A) $ ", "$ "]
    # scripts for other shells are listed and skipped, never run
    assert "A.bat" in done.stderr and "A.ps1" in done.stderr and "skipped" in done.stderr


def test_activate_errors_are_plain(world: World) -> None:
    done = subprocess.run([str(ENVKIT), "activate", "nope"], env=world.base, capture_output=True, text=True)
    assert done.returncode == 1 and "no environment named 'nope'" in done.stderr and done.stdout == ""


pexpect = pytest.importorskip("pexpect")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "sh"])
def test_envkit_shell_in_a_pseudo_terminal(world: World, shell: str) -> None:
    path = shutil.which(shell)
    if not path:
        pytest.skip(f"{shell} is not installed (apt-get install {shell}; .ci/apt-packages lists it)")
    env = {**world.base, "SHELL": path, "TERM": "dumb"}
    child = pexpect.spawn(str(ENVKIT), ["shell", "A"], env=env, encoding="utf-8", timeout=60,
                          dimensions=(40, 200))
    try:
        child.expect_exact("(A) ")  # the prompt marker
        child.sendline('echo "FIRST=$(command -v python)"' if shell != "fish"
                       else 'echo "FIRST="(command -v python)')
        child.expect(r"FIRST=(/\S+)")
        assert child.match.group(1) == f"{world.a}/bin/python"
        child.sendline('echo "P=$CONDA_PREFIX L=$CONDA_SHLVL V=$SHARED S=$A_SCRIPT"')
        child.expect(r"P=(/\S+) L=(\d) V=(\w+) S=(\w+)")
        assert child.match.groups() == (str(world.a), "1", "A", "yes")
        child.sendline("exit 3")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 3  # the shell's own exit code comes back: exit returns to the caller


def test_envkit_shell_for_an_env_conda_made(world: World) -> None:
    """Found by name in conda's envs folder; its package and state variables and .sh scripts apply."""
    env = {**world.base, "SHELL": shutil.which("bash") or "/bin/bash"}
    child = pexpect.spawn(str(ENVKIT), ["shell", "B"], env=env, encoding="utf-8", timeout=60, dimensions=(40, 200))
    try:
        child.expect_exact("(B) ")
        child.sendline('echo "P=$CONDA_PREFIX V=$SHARED K=$PKG_VAR S=$B_SCRIPT U=${UNSET_ME-none}"')
        child.expect(r"P=(/\S+) V=(\w+) K=(\w+) S=(\w+) U=(\w+)")
        assert child.match.groups() == (str(world.b), "B", "pkg", "yes", "none")
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


# -- hostile names and paths (issue 20): in the real interactive shells, nothing in a path is ever run ----
def hostile_prefix(root: Path) -> Path:
    """The issue's `/tmp/a$(touch /tmp/PWN)` under `root`, then a folder name with the rest of the generator's
    pieces (the unit tests, tests/unit/shell/test_quoting.py, run every piece alone against every shell)."""
    name = (f"e n`touch {root}/PWN2`;touch PWN3;'\"%F{{red}}%!!\\u\\[{{a,b}}$HOME${{HOME}}$((1+1))-x"
            "\u00e9\u2603\x01\x1b[31m\nz")
    prefix = root / f"a$(touch {root}/PWN)" / name
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "state").write_text(json.dumps({"env_vars": {"HOSTILE_VAR": prefix.name}}))
    (prefix / "bin").mkdir()
    return prefix


def hostile_env(world: World, root: Path, shell: str, prefix: Path) -> dict[str, str]:
    home = root / "home"
    (home / ".local" / "share" / "fish" / "generated_completions").mkdir(parents=True, exist_ok=True)
    return {**world.base, "HOME": str(home), "XDG_DATA_HOME": str(home / ".local/share"), "SHELL": shell,
            "TERM": "dumb", "EXPECTED": str(prefix), "EXPECTED_NAME": prefix.name}


def canaries(root: Path, cwd: Path) -> list[Path]:
    return [p for p in [*root.glob("PWN*"), *cwd.glob("PWN*")] if p.exists()]


def check_activated(child: Any, fish: bool) -> None:
    """The env's bin first on PATH, CONDA_PREFIX and the env's variable exact (compared by the shell itself;
    the quotes split the marker so the echoed command line cannot match)."""
    if fish:
        child.sendline('test "$CONDA_PREFIX" = "$EXPECTED"; and test "$PATH[1]" = "$EXPECTED/bin"; '
                       'and test "$HOSTILE_VAR" = "$EXPECTED_NAME"; and echo ACTIVATED_""OK')
    else:
        child.sendline('[ "$CONDA_PREFIX" = "$EXPECTED" ] && [ "${PATH%%:*}" = "$EXPECTED/bin" ] && '
                       '[ "$HOSTILE_VAR" = "$EXPECTED_NAME" ] && echo ACTIVATED_""OK')
    child.expect_exact("ACTIVATED_OK")


# (argv, lines typed first: the user's own prompt, and zsh's PROMPT_SUBST as oh-my-zsh sets it)
INTERACTIVE = {
    "bash": (["--norc", "--noprofile", "-i"], ["PS1='@P@ '"]),
    "zsh": (["-f", "-i"], ["setopt PROMPT_SUBST", "PS1='@P@ '"]),
    "dash": (["-i"], ["PS1='@P@ '"]),
    "fish": (["--no-config", "-i"], ["function fish_prompt; printf '@P@ '; end"]),
}


@pytest.mark.parametrize("shell", ["bash", "zsh", "dash", "fish"])
def test_eval_activate_of_a_hostile_path_in_an_interactive_shell(world: World, shell: str, tmp_path: Path) -> None:
    """`eval "$(envkit activate --prefix '/tmp/a$(touch /tmp/PWN)...')"` typed in a real terminal: the prompt shows
    the name as it is at every prompt after, and no canary appears."""
    path = shutil.which(shell)
    if not path:
        pytest.skip(f"{shell} is not installed (apt-get install {shell}; .ci/apt-packages lists it)")
    from envkit.shell.activate import prompt_modifier

    prefix = hostile_prefix(tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    argv, setup = INTERACTIVE[shell]
    child = pexpect.spawn(path, argv, env=hostile_env(world, tmp_path, path, prefix), cwd=str(cwd),
                          encoding="utf-8", timeout=20, dimensions=(40, 400))
    try:
        for line in setup:
            child.sendline(line)
        child.sendline('envkit activate --prefix "$EXPECTED" | source' if shell == "fish"
                       else 'eval "$(envkit activate --prefix "$EXPECTED")"')
        shown = prompt_modifier(prefix.name) + "@P@ "
        child.expect_exact(shown)
        check_activated(child, shell == "fish")
        child.expect_exact(shown)  # the prompt after: evaluated again, still only shown
        child.sendline("envkit deactivate | source" if shell == "fish" else 'eval "$(envkit deactivate)"')
        child.sendline("echo DEACTIVATED_\"\"${CONDA_PREFIX-none}" if shell != "fish"
                       else "set -q CONDA_PREFIX; or echo DEACTIVATED_\"\"none")
        child.expect_exact("DEACTIVATED_none")
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert canaries(tmp_path, cwd) == []


@pytest.mark.parametrize("shell", ["bash", "zsh", "sh", "fish"])
def test_envkit_shell_of_a_hostile_path(world: World, shell: str, tmp_path: Path) -> None:
    """`envkit shell --prefix HOSTILE` under bash, sh (dash), zsh with PROMPT_SUBST in ~/.zshrc, and fish."""
    path = shutil.which(shell)
    if not path:
        pytest.skip(f"{shell} is not installed (apt-get install {shell}; .ci/apt-packages lists it)")
    from envkit.shell.activate import prompt_modifier

    prefix = hostile_prefix(tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = hostile_env(world, tmp_path, path, prefix)
    home = Path(env["HOME"])
    (home / ".zshrc").write_text("setopt PROMPT_SUBST\nPS1='@P@ '\n")
    (home / ".bashrc").write_text("PS1='@P@ '\n")
    (home / ".shrc").write_text("PS1='@P@ '\n")
    env["ENV"] = str(home / ".shrc")
    (home / ".config" / "fish").mkdir(parents=True)
    (home / ".config" / "fish" / "config.fish").write_text("function fish_prompt; printf '@P@ '; end\n")
    child = pexpect.spawn(str(ENVKIT), ["shell", "--prefix", str(prefix)], env=env, cwd=str(cwd), encoding="utf-8",
                          timeout=20, dimensions=(40, 400))
    try:
        shown = prompt_modifier(prefix.name) + "@P@ "
        child.expect_exact(shown)
        check_activated(child, shell == "fish")
        child.expect_exact(shown)
        child.sendline("exit 4")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 4
    assert canaries(tmp_path, cwd) == []


def test_a_nul_byte_in_conda_meta_state_does_not_break_fish_activation(world: World, tmp_path: Path) -> None:
    """The issue's finding: fish aborted on the NUL. Now that one variable is left out with a warning."""
    if not shutil.which("fish"):
        pytest.skip("fish is not installed (apt-get install fish)")
    prefix = tmp_path / "envs" / "nul"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "state").write_text('{"env_vars": {"BAD": "a\\u0000b", "GOOD": "kept"}}')
    script = (f"envkit activate --prefix '{prefix}' | source; "
              'echo "P=$CONDA_PREFIX G=$GOOD B=" (set -q BAD; and echo set; or echo unset)')
    done = subprocess.run(["fish", "--no-config", "-c", script], env={**world.base, "SHELL": "/usr/bin/fish"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"P={prefix} G=kept B= unset"
    assert "BAD contains a NUL byte" in done.stderr and "was not set" in done.stderr

"""shell/quoting.py against the real shells, fast: every hostile value of a generator is evaluated by
bash, zsh, dash and fish non-interactively (`-c`), and every hostile env name's prompt is expanded the
way each shell expands its prompt (bash `${PS1@P}` under promptvars on/off and POSIX mode, zsh
`print -P` under each PROMPT_SUBST/PROMPT_BANG/PROMPT_PERCENT setting, dash really interactive on a
pipe, fish's fish_prompt); a canary file that a command substitution would create never appears."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from envkit.errors import InputError
from envkit.shell.activate import EnvInfo, plan_activate, plan_deactivate, prompt_modifier, read_env, render
from envkit.shell.quoting import (Unrepresentable, fish_quote, prompt_assignment, prompt_bash, quote,
                                  sh_quote, visible)

CANARY = "PWNED"
# the pieces a hostile tester puts into names, paths and values
FRAGMENTS = (
    " ", f"$(touch {CANARY})", f"`touch {CANARY}`", f";touch {CANARY};", "'", '"', "%", "%{", "%F{red}", "\\",
    "\\u", "\\[", "\\$", "!", "!!", "!$", "\n", "\r", "\t", "{}", "{a,b}", "-n", "--help", "é☃😀", "$HOME",
    "${HOME}", "~", "*", "?", "[a]", "$((1+1))", "\x01", "\x1b[31m", "\x7f", "\x85", "\u202e", "&", "|", "<>",
    "#", "=", "a=b", "\\'", "'\\''", "$'\\x41'",
)


def hostile_values() -> list[str]:
    values = list(FRAGMENTS)
    values += [f"x{a}y{b}z" for a, b in itertools.combinations(FRAGMENTS[:16], 2)][::3]
    values += ["".join(FRAGMENTS), "-" + "".join(reversed(FRAGMENTS)), f"$HOME/a b/$(touch {CANARY})"]
    return values


def hostile_names() -> list[str]:
    """Folder names (no '/', no NUL): each fragment alone, framed, and a few together."""
    names = [f.replace("/", "_") for f in FRAGMENTS] + [f"env{f}x" for f in FRAGMENTS[:20]]
    names += ["".join(FRAGMENTS[:12]), "-" + "".join(FRAGMENTS[12:30])]
    return names


SHELL_C = {"bash": ["bash", "--norc", "--noprofile", "-c"], "zsh": ["zsh", "-f", "-c"], "sh": ["dash", "-c"],
           "fish": ["fish", "--no-config", "-c"]}


def need(shell: str) -> None:
    if not shutil.which(SHELL_C[shell][0]):
        pytest.skip(f"{SHELL_C[shell][0]} is not installed (apt-get install {SHELL_C[shell][0]})")


def run_in(argv: list[str], cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    home = cwd.parent / "home"  # fish writes its config there: not in cwd, where only a canary could appear
    home.mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb"}
    return subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, timeout=120)


def fields(out: bytes) -> list[str]:
    return out.decode("utf-8", "surrogateescape").split("\0")[:-1]


@pytest.mark.parametrize("shell", ["bash", "zsh", "sh", "fish"])
def test_every_hostile_value_is_one_literal_word(shell: str, tmp_path: Path) -> None:
    need(shell)
    values = hostile_values()
    if shell != "sh":  # an undecodable byte of a path (os.fsdecode); sh code cannot hold one (see below)
        values.append("bad\udcffbyte")
    printer = "printf '%s\\0' $V" if shell == "fish" else "printf '%s\\0' \"$V\""
    setter = "set V {}" if shell == "fish" else "V={}"
    script = "\n".join(f"{setter.format(quote(v, shell))}; {printer}" for v in values)
    code = tmp_path / "code"
    code.write_text(script, encoding="utf-8")
    work = tmp_path / "cwd"
    work.mkdir()
    done = run_in([*SHELL_C[shell], f"source {code}" if shell == "fish" else f". {code}"], work)
    assert done.returncode == 0, done.stderr
    assert fields(done.stdout) == values
    assert not list(work.iterdir())  # nothing ran: no canary, nothing else


def test_control_characters_are_never_raw_in_bash_zsh_and_fish_code() -> None:
    for value in hostile_values():
        for shell in ("bash", "zsh", "fish"):
            assert not any(c in quote(value, shell) for c in "\x01\x1b\x7f\n\r\t"), (shell, value)
            quote(value, shell).encode("utf-8")  # plain text: nothing that needs surrogateescape to print
    assert sh_quote("plain/path-1.2") == "plain/path-1.2" and sh_quote("=ls") == "'=ls'" and sh_quote("") == "''"
    assert fish_quote("") == "''"


def test_a_nul_byte_cannot_be_quoted_for_any_shell() -> None:
    for shell in ("bash", "zsh", "sh", "fish"):
        with pytest.raises(Unrepresentable, match="NUL byte") as caught:
            quote("a\0b", shell, "the value of X")
        assert isinstance(caught.value, InputError) and "the value of X" in caught.value.message
    with pytest.raises(Unrepresentable, match="not UTF-8") as bad:
        quote("/p/\udcff", "sh", "the env's path")
    assert "--shell bash" in (bad.value.hint or "")
    assert quote("/p/\udcff", "bash") == "'/p/'$'\\xff'" and quote("/p/\udcff", "fish") == "'/p/'\\Xff"


def test_visible_spells_out_what_moves_the_cursor() -> None:
    assert visible("a\nb\x1b[2J\tc\u202ed\x85") == "a\\nb\\x1b[2J\\tc\\u202ed\\x85"
    assert visible("caf\u00e9 \u2603 $(x) %F") == "caf\u00e9 \u2603 $(x) %F"
    assert visible("\udcff") == "\\xff"


def test_bash_prompt_escapes_follow_the_manual() -> None:
    # bash(1) PROMPTING: `\$` alone would be the $/# escape; `\\\\$` decodes to `\$`, which expands to `$`
    assert prompt_bash("$") == "\\\\$" and prompt_bash("\\") == "\\\\\\\\" and prompt_bash("`") == "\\\\`"
    assert prompt_bash("$\\", promptvars=False) == "$\\\\" and prompt_bash("!", posix=True) == "!!"
    assert prompt_assignment(["P"], ["(plain-name) "]) == ["P='(plain-name) '"]  # nothing special: one line


HOSTILE_PS = "@S@"


def activation_pairs(shell: str) -> list[tuple[str, str, str, str]]:
    """(name, prefix, activation code, deactivation code) for every hostile name, each from a clean machine."""
    out = []
    base = {"PATH": "/usr/bin:/bin", "HOME": "/h"}
    for index, name in enumerate(hostile_names()):
        prefix = f"/e{index}/envs/{name}"
        info = EnvInfo(prefix, (("HOSTILE", name),))
        plan = plan_activate(info, base, read_env, shell=shell)
        after = dict(base)
        after["PATH"] = ":".join(plan.path or ())
        after.update(plan.export)
        undo = plan_deactivate(after, lambda p, i=info: i if p == prefix else EnvInfo(p), shell=shell)
        out.append((name, prefix, render(plan, shell), render(undo, shell)))
    return out


def _prompt_script(shell: str, pairs: list[tuple[str, str, str, str]], folder: Path, show: str) -> str:
    lines = []
    for index, (_name, _prefix, act, deact) in enumerate(pairs):
        (folder / f"a{index}").write_text(act, encoding="utf-8")
        (folder / f"d{index}").write_text(deact, encoding="utf-8")
        if shell == "fish":
            lines += [f"source {folder}/a{index}", f"{show}; printf '%s\\0' $CONDA_PREFIX $PATH[1] $HOSTILE",
                      f"source {folder}/d{index}", f"{show}; printf '%s\\0' (set -q CONDA_PREFIX; and echo set; "
                      "or echo unset)"]
        else:
            lines += [f"PS1='{HOSTILE_PS}'", f'eval "$(cat {folder}/a{index})"',
                      f"{show}; printf '%s\\0' \"$CONDA_PREFIX\" \"${{PATH%%:*}}\" \"$HOSTILE\"",
                      f'eval "$(cat {folder}/d{index})"', f"{show}; printf '%s\\0' \"${{CONDA_PREFIX-unset}}\""]
    return "\n".join(lines) + "\n"


def _check_rows(got: list[str], pairs: list[tuple[str, str, str, str]]) -> None:
    """Per name: the prompt after activation, CONDA_PREFIX, PATH's first entry, the env's variable, the prompt
    after deactivation, and CONDA_PREFIX gone."""
    assert len(got) == 6 * len(pairs), got[-12:]
    for index, (name, prefix, _a, _d) in enumerate(pairs):
        row = got[6 * index:6 * index + 6]
        assert row == [prompt_modifier(name) + HOSTILE_PS, prefix, f"{prefix}/bin", name, HOSTILE_PS, "unset"], name


BASH_MODES = {"promptvars on": "", "promptvars off": "shopt -u promptvars", "posix mode": "set -o posix"}
ZSH_MODES = {"default": "", "prompt_subst": "setopt prompt_subst", "subst+bang": "setopt prompt_subst prompt_bang",
             "bang": "setopt prompt_bang", "no percent": "unsetopt prompt_percent",
             "sh emulation": "emulate sh; setopt prompt_subst"}


@pytest.mark.parametrize(("shell", "mode"), [*(("bash", m) for m in BASH_MODES), *(("zsh", m) for m in ZSH_MODES)])
def test_hostile_names_in_the_prompt_show_as_they_are_and_run_nothing(shell: str, mode: str, tmp_path: Path) -> None:
    need(shell)
    pairs = activation_pairs(shell)
    work = tmp_path / "cwd"
    work.mkdir()
    if shell == "bash":
        show, setup = "printf '%s\\0' \"${PS1@P}\"", BASH_MODES[mode]
    else:
        show, setup = "print -rPn -- \"$PS1\"; printf '\\0'", ZSH_MODES[mode]
    script = setup + "\n" + _prompt_script(shell, pairs, tmp_path, show)
    done = run_in([*SHELL_C[shell], script], work)
    assert done.returncode == 0, done.stderr[-2000:]
    _check_rows(fields(done.stdout), pairs)
    assert not list(work.iterdir())


def test_hostile_names_in_an_interactive_dash_prompt(tmp_path: Path) -> None:
    """dash prints its prompt to stderr when interactive on a pipe: the real PS1 expansion, no terminal needed."""
    need("sh")
    pairs = activation_pairs("sh")
    work = tmp_path / "cwd"
    work.mkdir()
    script = _prompt_script("sh", pairs, tmp_path, ":")
    done = run_in(["dash", "-i"], work, stdin=script.encode())
    assert done.returncode == 0, done.stderr[-2000:]
    values = fields(done.stdout)
    assert len(values) == 4 * len(pairs)
    # a prompt before each line read, five lines per name (PS1=, eval a, show, eval d, show): split on the
    # prompt's end, piece 5i+1 is what the prompt showed after activation i, piece 5i+3 after deactivation
    prompts = done.stderr.decode("utf-8", "surrogateescape").split(HOSTILE_PS)
    assert len(prompts) == 5 * len(pairs) + 1, prompts[-5:]
    for index, (name, prefix, _a, _d) in enumerate(pairs):
        assert prompts[5 * index + 1] == prompt_modifier(name), (name, prompts[5 * index + 1])
        assert prompts[5 * index + 3] == "", (name, prompts[5 * index + 3])
        assert values[4 * index:4 * index + 4] == [prefix, f"{prefix}/bin", name, "unset"]
    assert not list(work.iterdir())


def test_hostile_names_in_fish(tmp_path: Path) -> None:
    need("fish")
    pairs = activation_pairs("fish")
    work = tmp_path / "cwd"
    work.mkdir()
    script = (f"function fish_prompt; printf '{HOSTILE_PS}'; end\n"
              + _prompt_script("fish", pairs, tmp_path, "fish_prompt; printf '\\0'"))
    done = run_in([*SHELL_C["fish"], script], work)
    assert done.returncode == 0, done.stderr[-2000:]
    _check_rows(fields(done.stdout), pairs)
    assert not list(work.iterdir())


def test_a_nul_in_conda_meta_state_is_left_out_with_a_note(tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "e"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "state").write_text('{"env_vars": {"BAD": "a\\u0000b", "GOOD": "ok"}}')
    info = read_env(prefix)
    assert dict(info.env_vars) == {"GOOD": "ok"}
    assert any("BAD" in n and "NUL byte" in n and "not set" in n for n in info.notes)
    for shell in ("bash", "fish"):
        assert "GOOD" in render(plan_activate(info, {"PATH": "/usr/bin"}, read_env, shell=shell), shell)


def test_a_value_sh_cannot_hold_is_left_out_with_a_note_not_an_error(tmp_path: Path) -> None:
    """A lone surrogate in conda-meta/state (JSON "\\udce9") is no text dash can read: sh code leaves that one
    variable out and says so; bash code writes it as the byte it stands for."""
    from envkit.shell.activate import Plan, activate_code, representable

    prefix = tmp_path / "envs" / "e"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "state").write_text('{"env_vars": {"ODD": "caf\\udce9", "GOOD": "ok"}}')
    code, notes = activate_code(prefix, {"PATH": "/usr/bin"}, shell="sh")
    assert "export GOOD=ok" in code and "ODD" not in code and f"export CONDA_PREFIX={prefix}" in code
    assert any("ODD was not set" in n and "not UTF-8" in n for n in notes)
    assert "export ODD='caf'$'\\xe9'" in activate_code(prefix, {"PATH": "/usr/bin"}, shell="bash")[0]
    assert representable(Plan(export=(("BAD", "x\udce9"),)), "fish").export == (("BAD", "x\udce9"),)

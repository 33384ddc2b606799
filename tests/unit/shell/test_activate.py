"""The activation planner against conda's rules (conda/activate.py), applied to plain dicts; and the commands
printed after create, which fit the machine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envkit.shell.activate import (EnvInfo, Plan, default_env, next_steps, plan_activate, plan_deactivate, read_env,
                                   render)

BASE = {"PATH": "/usr/bin:/bin", "HOME": "/h/u", "CLOBBER": "machine"}


def apply(plan: Plan, env: dict[str, str]) -> dict[str, str]:
    """What a shell does with the plan (scripts aside), in the rendered order."""
    out = dict(env)
    if plan.path is not None:
        out["PATH"] = ":".join(plan.path)
    for name in plan.unset:
        out.pop(name, None)
    out.update(plan.export)
    return out


def infos(**envs: EnvInfo) -> dict[str, EnvInfo]:
    return {info.prefix: info for info in envs.values()}


A = EnvInfo("/x/envs/A", (("CLOBBER", "from-A"), ("SHARED", "A"), ("ONLY_A", "a"), ("GONE", "***unset***")),
            ("/x/envs/A/etc/conda/activate.d/a.bat", "/x/envs/A/etc/conda/activate.d/a.sh"),
            ("/x/envs/A/etc/conda/deactivate.d/a.sh",))
B = EnvInfo("/y/B", (("SHARED", "B"), ("ONLY_B", "b")))
READ = infos(a=A, b=B)


def read(prefix: str) -> EnvInfo:
    return READ.get(prefix.rstrip("/"), EnvInfo(prefix))


def test_activate_from_nothing_sets_what_conda_sets() -> None:
    plan = plan_activate(A, BASE, read)
    env = apply(plan, BASE)
    assert env == {**BASE, "PATH": "/x/envs/A/bin:/usr/bin:/bin", "CONDA_PREFIX": "/x/envs/A", "CONDA_SHLVL": "1",
                   "CONDA_DEFAULT_ENV": "A", "CONDA_PROMPT_MODIFIER": "(A) ", "CLOBBER": "from-A", "SHARED": "A",
                   "ONLY_A": "a", "__CONDA_SHLVL_0_CLOBBER": "machine"}
    assert plan.activate_scripts == ("/x/envs/A/etc/conda/activate.d/a.sh",)
    assert any("a.bat" in note and "skipped" in note for note in plan.notes)
    assert plan.prompt == ("", "(A) ")
    fish = plan_activate(A, BASE, read, shell="fish")
    assert fish.activate_scripts == () and any("a.sh" in n for n in fish.notes)


def test_nested_activation_deactivates_back_exactly() -> None:
    level1 = apply(plan_activate(A, BASE, read), BASE)
    to_b = plan_activate(B, level1, read)
    level2 = apply(to_b, level1)
    assert to_b.deactivate_scripts == ("/x/envs/A/etc/conda/deactivate.d/a.sh",)
    assert level2["PATH"] == "/y/B/bin:/usr/bin:/bin"  # A's entry replaced in place, not stacked
    assert level2["CONDA_PREFIX_1"] == "/x/envs/A" and level2["CONDA_SHLVL"] == "2"
    assert level2["CONDA_DEFAULT_ENV"] == "/y/B"  # not inside an envs folder: the full prefix, as conda
    assert level2["SHARED"] == "B" and level2["__CONDA_SHLVL_1_SHARED"] == "A"
    # A's own variables do not leak into B: back to the machine's value, or gone
    assert level2["CLOBBER"] == "machine" and "ONLY_A" not in level2
    back_to_a = plan_deactivate(level2, read)
    assert apply(back_to_a, level2) == level1
    assert back_to_a.activate_scripts == ("/x/envs/A/etc/conda/activate.d/a.sh",)
    assert apply(plan_deactivate(level1, read), level1) == BASE


def test_stacked_and_reactivation_and_nothing_active() -> None:
    level1 = apply(plan_activate(A, BASE, read), BASE)
    stacked = apply(plan_activate(B, level1, read, stack=True), level1)
    assert stacked["PATH"] == "/y/B/bin:/x/envs/A/bin:/usr/bin:/bin" and stacked["CONDA_STACKED_2"] == "true"
    assert apply(plan_deactivate(stacked, read), stacked) == level1
    again = plan_activate(A, level1, read)
    assert apply(again, level1) == level1 and again.deactivate_scripts and again.activate_scripts
    assert plan_deactivate(BASE, read).notes == ("no environment is active; nothing to deactivate",)


def test_conda_hook_keeps_shlvl_zero() -> None:
    hooked = {**BASE, "CONDA_EXE": "/opt/conda/bin/conda", "CONDA_SHLVL": "0"}
    level1 = apply(plan_activate(B, hooked, read), hooked)
    assert apply(plan_deactivate(level1, read), level1) == hooked


@pytest.mark.parametrize(("prefix", "root", "expected"), [
    ("/opt/conda/envs/dl", None, "dl"),
    ("/opt/conda", "/opt/conda", "base"),
    ("/data/proj/env", None, "/data/proj/env"),
])
def test_default_env_is_condas(prefix: str, root: str | None, expected: str) -> None:
    assert default_env(prefix, root) == expected


def test_read_env_merges_package_vars_then_state(tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "e"
    (prefix / "conda-meta").mkdir(parents=True)
    pkg = prefix / "etc" / "conda" / "env_vars.d"
    pkg.mkdir(parents=True)
    (pkg / "b.json").write_text(json.dumps({"X": "from-b", "Y": "pkg"}))
    (pkg / "a.json").write_text(json.dumps({"X": "from-a"}))
    (prefix / "conda-meta" / "state").write_text(json.dumps({"env_vars": {"Y": "state", "PATH": "/evil",
                                                                          "bad name": "1"}}))
    for folder in ("activate.d", "deactivate.d"):
        (prefix / "etc" / "conda" / folder).mkdir()
        for name in ("2.sh", "1.sh", "3.fish"):
            (prefix / "etc" / "conda" / folder / name).write_text("")
    info = read_env(prefix)
    assert dict(info.env_vars) == {"X": "from-b", "Y": "state"}
    assert any("PATH is reserved" in n for n in info.notes) and any("bad name" in n for n in info.notes)
    assert [os.path.basename(p) for p in info.activate_scripts] == ["1.sh", "2.sh", "3.fish"]
    assert [os.path.basename(p) for p in info.deactivate_scripts] == ["3.fish", "2.sh", "1.sh"]


def test_rendering_quotes_every_value() -> None:
    tricky = EnvInfo("/x/envs/q", (("Q", "it's $HOME `x` \\ \"y\""),))
    plan = plan_activate(tricky, BASE, read)
    posix = render(plan, "bash")
    assert "export Q='it'\\''s $HOME `x` \\ \"y\"'" in posix
    fish = render(plan, "fish")
    assert "set -gx Q 'it\\'s $HOME `x` \\\\ \"y\"'" in fish
    with pytest.raises(Exception, match="unsupported shell"):
        render(plan, "tcsh")


def make_env(prefix: Path) -> Path:
    (prefix / "conda-meta").mkdir(parents=True)
    return prefix


def commands(prefix: Path) -> list[str]:
    return [command for command, _what in next_steps(prefix)]


def test_without_conda_only_envkit_commands_with_the_real_name(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("SHELL", "/bin/bash")
    prefix = make_env(tmp_path / "home" / "envs" / "dl_train")
    assert commands(prefix) == ["envkit shell dl_train", 'eval "$(envkit activate dl_train)"',
                                "envkit run dl_train -- python train.py"]
    monkeypatch.setenv("SHELL", "/usr/bin/fish")
    assert "envkit activate dl_train | source" in commands(prefix)
    # an env made with --prefix somewhere else is named by its path (every verb takes one)
    elsewhere = make_env(tmp_path / "proj" / "my env")
    assert f"envkit shell '{elsewhere}'" in commands(elsewhere)


def test_with_conda_installed_conda_activate_is_offered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "miniforge"
    (root / "bin").mkdir(parents=True)
    conda = root / "bin" / "conda"
    conda.write_text("#!/bin/sh\nexit 0\n")
    conda.chmod(0o755)
    monkeypatch.setenv("PATH", f"{root / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("ENVKIT_HOME", str(tmp_path / "home"))
    in_conda = make_env(root / "envs" / "dl")
    assert "conda activate dl" in commands(in_conda) and "envkit shell dl" in commands(in_conda)
    elsewhere = make_env(tmp_path / "p" / "x")
    assert f"conda activate {elsewhere}" in commands(elsewhere)

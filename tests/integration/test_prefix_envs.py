"""Envs made with --prefix are first-class: listed, checked by doctor --all, found by their folder name, and
taken by run, remove, install with --prefix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_cli
from testbed.channel import PY
from testbed.server import ChannelServer


def make(capsys: pytest.CaptureFixture[str], server: ChannelServer, where: Path) -> None:
    code, _out, err = run_cli(capsys, "create", "ignored", "--prefix", str(where), "--spec", "minimal", "--cuda",
                              "13.0", "--python", PY, "--mirror", server.url, "--no-verify")
    assert code == 0, err


def test_a_prefix_env_is_listed_checked_run_and_removed(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                        isolated: Path, tmp_path: Path) -> None:
    where = tmp_path / "project" / "venv-gpu"
    make(capsys, server, where)
    code, out, _err = run_cli(capsys, "list", "--json")
    rows = {r["prefix"]: r for r in json.loads(out)["environments"]}
    assert code == 0 and str(where) in rows
    assert rows[str(where)]["origin"] == "envkit" and rows[str(where)]["name"] == "venv-gpu"
    code, out, _err = run_cli(capsys, "doctor", "--all", "--json")
    assert str(where) in out
    # found by its folder name when that is unique, and by --prefix always
    code, out, err = run_cli(capsys, "export", "venv-gpu")
    assert code == 0 and "pytorch" in out, err
    done = subprocess.run([sys.executable, "-m", "envkit", "run", "--prefix", str(where), "python", "-c",
                           "import sys; print(sys.prefix)"], capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 0 and done.stdout.strip() == str(where), done.stderr
    code, _out, err = run_cli(capsys, "remove", "--prefix", str(where))
    assert code == 2 and f"envkit remove --prefix {where} --yes" in err  # no terminal: asks for --yes
    code, out, err = run_cli(capsys, "remove", "--prefix", str(where), "--yes")
    assert code == 0 and not where.exists(), err
    code, out, _err = run_cli(capsys, "list", "--json")
    assert str(where) not in out


def test_two_prefix_envs_with_one_folder_name_are_told_apart(capsys: pytest.CaptureFixture[str],
                                                             server: ChannelServer, isolated: Path,
                                                             tmp_path: Path) -> None:
    make(capsys, server, tmp_path / "a" / "env")
    make(capsys, server, tmp_path / "b" / "env")
    code, _out, err = run_cli(capsys, "export", "env")
    assert code == 2 and "2 environments envkit made are named 'env'" in err and "--prefix" in err
    code, _out, err = run_cli(capsys, "remove", "env", "--prefix", str(tmp_path / "a" / "env"))
    assert code == 2 and "not both" in err

"""examples/Dockerfile, the README's GPU-less image build: its envkit lines run verbatim (RUN, then CMD)
against the local test channel, with the Dockerfile's ARG and ENV values applied and / rooted at a
temporary folder, as `docker build --build-arg ENVKIT_MIRROR=...` then `docker run` would run them."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.server import ChannelServer

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "examples" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) of every line of the Dockerfile, comments and blank lines left out."""
    out = []
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)


def rooted(value: str, root: Path) -> str:
    """Every absolute path of an ENV value (PATH's parts included) moved under `root`."""
    return ":".join(str(root) + part if part.startswith("/") else part for part in value.split(":"))


def build_env(root: Path, build_args: dict[str, str]) -> dict[str, str]:
    env = {"HOME": str(root / "root"), "LANG": "C.UTF-8", "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1",
           "ENVKIT_OFFLINE": "1", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(REPO)}  # this checkout's envkit, as `COPY . /src/envkit` + ./install.sh gives it
    for word, rest in instructions():
        if word == "ARG":
            name, _, default = rest.partition("=")
            if name in build_args or default:
                env[name] = build_args.get(name, default)
        elif word == "ENV":
            for pair in shlex.split(rest):
                name, _, value = pair.partition("=")
                env[name] = expand(rooted(value, root), env)  # the literal paths move, $PATH stays
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # where ./install.sh's envkit would be
    return env


def test_the_install_line_is_the_quickstarts_and_apt_get_is_the_only_other_tool() -> None:
    runs = [rest for word, rest in instructions() if word == "RUN"]
    assert runs[0].startswith("apt-get update && apt-get install")
    assert runs[1] == "./install.sh"  # the Quickstart's install, run on fresh accounts by test_install.py
    assert all(r.startswith("envkit ") for r in runs[2:]) and len(runs) >= 3
    assert ("WORKDIR", "/src/envkit") in instructions() and ("COPY", ". /src/envkit") in instructions()


@pytest.mark.parametrize("cuda", [None, "12.4"], ids=["default", "build-arg-12.4"])
def test_the_dockerfile_builds_a_gpu_env_without_a_gpu_and_its_cmd_verifies(
        server: ChannelServer, tmp_path: Path, cuda: str | None) -> None:
    pytest.importorskip("torch")  # the test channel's python runs with this venv's site (torch CPU)
    args = {"ENVKIT_MIRROR": server.url, **({"CUDA": cuda} if cuda else {})}
    env = build_env(tmp_path, args)
    assert env["ENVKIT_HOME"] == str(tmp_path / "opt" / "envkit")
    assert Path(env["ENVKIT_CACHE_DIR"]).is_relative_to(tmp_path)  # the RUN line's rm -rf stays in tmp_path
    for word, rest in instructions():
        if word == "RUN" and rest.startswith("envkit "):
            done = subprocess.run(["sh", "-c", rest], cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=600)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "plan: torch 2.13.0 · CUDA " in done.stderr  # the plan before the work, no GPU here
    prefix = tmp_path / "opt" / "envkit" / "envs" / "train"
    meta = json.loads((prefix / ".envkit" / "create.json").read_text())
    want = "12.9" if cuda == "12.4" else "13.0"  # --cuda 12.4 is a driver level: the 12.9 build it runs
    assert meta["selection"]["cuda"] == want, meta["selection"]
    assert not Path(env["ENVKIT_CACHE_DIR"]).exists()  # the image keeps no package cache
    cmd = json.loads(next(rest for word, rest in instructions() if word == "CMD"))
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 4 and "SKIPPED: no NVIDIA driver" in done.stdout, done.stdout + done.stderr

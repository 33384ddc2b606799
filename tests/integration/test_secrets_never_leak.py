"""No secret reaches any output stream or any file envkit writes, through every verb.

The loopback server really requires the credential (basic auth, an anaconda.org-style /t/<token>/
path, or a bearer token), so the runs below prove the credential was used and still never shows:
not on stdout or stderr, not under the prefix, the package cache, ENVKIT_HOME, nor in -o and
--report targets. Malformed mirror URLs (typo'd scheme, ftp, a space, no scheme, a /t/<token>/
URL with a typo) are refused without echoing the secret, whether they come from --mirror,
ENVKIT_MIRROR or the config file.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from helpers import run_cli
from testbed.channel import PY, TestBed
from testbed.server import ChannelServer

GPU = ["--cuda", "13.0"]


def secrets_of(server: ChannelServer) -> list[str]:
    st = server.state
    basic = base64.b64encode(f"{st.user}:{st.password}".encode()).decode()
    return [st.password, st.token, basic]


def scan_files(roots: list[Path], secrets: list[str]) -> list[str]:
    leaks = []
    for root in roots:
        if not root.exists():
            continue
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
        for path in paths:
            data = path.read_bytes()
            leaks += [f"{path}: {s}" for s in secrets if s.encode() in data]
    return leaks


def mirror_for(mode: str, server: ChannelServer, monkeypatch: pytest.MonkeyPatch) -> str:
    st = server.state
    st.auth = mode
    host = server.url.split("://")[1]
    if mode == "basic":
        return f"http://{st.user}:{st.password}@{host}"
    if mode == "token":
        return f"http://{host}/t/{st.token}"
    monkeypatch.setenv("ENVKIT_MIRROR_TOKEN", st.token)
    return server.url


@pytest.mark.parametrize("mode", ["basic", "token", "bearer"])
def test_no_secret_through_any_verb(capsys: pytest.CaptureFixture[str], server: ChannelServer, testbed: TestBed,
                                    isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    mode: str) -> None:
    mirror = mirror_for(mode, server, monkeypatch)
    secrets = secrets_of(server)
    streams: list[str] = []

    def run(*args: str) -> int:
        code, out, err = run_cli(capsys, *args)
        streams.append(f"$ envkit {args[0]} ...\n{out}{err}")  # (the typed args hold the secret)
        return code

    env_file = tmp_path / "env.yml"
    pip = ""
    if mode != "bearer":  # pip has no bearer tokens: those modes carry the pip section
        wheel = f"{mirror}/pypi/simple/datasets/datasets-3.99.0-py3-none-any.whl"
        pip = (f"  - pip:\n      - --index-url {mirror}/pypi/simple\n      - transformers\n      - {wheel}\n")
    env_file.write_text(f"name: sec\nchannels:\n  - conda-forge\ndependencies:\n  - python={PY}\n  - pytorch\n"
                        f"  - pip\n{pip}")
    outputs = tmp_path / "out"
    outputs.mkdir()
    name = f"sec-{mode}"
    assert run("create", name, "--file", str(env_file), *GPU, "--python", PY, "--mirror", mirror,
               "--no-verify") == 0, streams[-1]
    prefix = isolated / "envs" / name
    if pip:
        assert server.hits("/pypi/simple/transformers/")[-1][2] == 200  # the credential was really used
        assert (prefix / ".envkit" / "requirements.txt").is_file()
    assert any(status == 200 for _m, p, status in server.state.requests if p.endswith(".conda"))
    run("render", "--from", str(env_file), *GPU, "--mirror", mirror)
    run("render", "--from", str(env_file), *GPU, "--mirror", mirror, "-o", str(outputs / "rendered.yml"))
    run("render", "minimal", *GPU, "--mirror", mirror, "-o", str(outputs / "minimal.yml"))
    monkeypatch.setenv("ENVKIT_MIRROR", mirror)
    run("detect", "--json", *GPU)
    run("render", "minimal", *GPU)
    monkeypatch.delenv("ENVKIT_MIRROR")
    run("list")
    run("list", "--json")
    run("verify", name, "--quick", "--json", "--report", str(outputs / "verify.json"))
    for fmt in ("yaml", "explicit", "lock"):
        run("export", name, "--format", fmt)
        run("export", name, "--format", fmt, "-o", str(outputs / f"export.{fmt}"))
    run("run", name, "--", "true")
    run("activate", name)
    run("doctor", name, "--json")
    run("doctor", name)
    run("create", f"{name}-dry", "--spec", "minimal", *GPU, "--python", PY, "--mirror", mirror, "--dry-run")
    run("-v", "create", f"{name}-2", "--spec", "minimal", *GPU, "--python", PY, "--mirror", mirror, "--no-verify",
        "--json")
    files_leaks = scan_files([isolated, Path(str(isolated).replace("envkit-home", "cache")), outputs], secrets)
    assert run("remove", name, "--yes") == 0
    text = "\n".join(streams)
    assert not [s for s in secrets if s in text], text
    assert not files_leaks, files_leaks


MALFORMED = [
    "htps://envuser:PW-SECRET-1@{host}",
    "ftp://envuser:PW-SECRET-1@{host}/conda",
    "http://envuser:PW SECRET-1@{host}",
    "envuser:PW-SECRET-1@{host}/conda",
    "htps://{host}/t/TK-SECRET-1/conda",
    "http//{host}/t/TK-SECRET-1",
    "http://envuser:PW-SECRET-1@{host} /conda",
]


@pytest.mark.parametrize("how", ["option", "env", "config"])
@pytest.mark.parametrize("template", MALFORMED)
def test_malformed_mirror_urls_never_echo_the_secret(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, template: str,
                                                     how: str) -> None:
    url = template.format(host="127.0.0.1:9")
    args: list[str] = []
    if how == "option":
        args = ["--mirror", url]
    elif how == "env":
        monkeypatch.setenv("ENVKIT_MIRROR", url)
    else:
        config = tmp_path / "config.yaml"
        config.write_text(f"mirror: {url!r}\n".replace("'", '"'))
        monkeypatch.setenv("ENVKIT_CONFIG", str(config))
    for verb in (["render", "minimal"], ["create", "x", "--dry-run"]):
        code, out, err = run_cli(capsys, *verb, "--cuda", "cpu", *args)
        assert code in (1, 2), out + err
        assert "PW-SECRET" not in out + err and "SECRET-1" not in out + err, out + err
        assert "Traceback" not in out + err and "fix:" in err
    assert not scan_files([tmp_path / "envkit-home", tmp_path / "cache"], ["SECRET-1"])

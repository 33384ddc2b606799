"""Team sharing in the formats conda, pixi and conda-lock read (issue 12): every export of a GPU env,
recreated on a GPU-less solver (CONDA_OVERRIDE_CUDA=''), gives the same GPU build back or fails
loudly; never a CPU build. Explicit files carry pip + variables in a sidecar; locks hold them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from helpers import conda_shaped_env, run_cli
from testbed.channel import PY
from testbed.server import ChannelServer

GPU = ["--cuda", "13.0"]


def builds(prefix: Path) -> set[tuple[str, str, str]]:
    rows = set()
    for path in (prefix / "conda-meta").glob("*.json"):
        data = json.loads(path.read_text())
        rows.add((data["name"], data["version"], data["build"]))
    return rows


def torch_build(prefix: Path) -> str:
    return next(b for n, _v, b in builds(prefix) if n == "pytorch")


def pip_names(prefix: Path) -> set[str]:
    return {p.name.split("-")[0].lower() for p in prefix.glob("lib/python*/site-packages/*.dist-info")}


@pytest.fixture
def gpu_env(capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path) -> Path:
    """dl_train for a CUDA 13.0 machine (conda + pip), with a variable in conda-meta/state."""
    code, _o, err = run_cli(capsys, "create", "src", "--spec", "dl_train", *GPU, "--python", PY, "--mirror",
                            server.url, "--no-verify", "-q")
    assert code == 0, err
    prefix = isolated / "envs" / "src"
    (prefix / "conda-meta" / "state").write_text(json.dumps({"env_vars": {"OMP_NUM_THREADS": "8"}}))
    assert torch_build(prefix).startswith("cuda130")
    return prefix


def gpu_less(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "")  # CI, Docker, a login node: the solver sees no __cuda


@pytest.mark.parametrize("history", [False, True], ids=["yaml", "from-history"])
def test_yaml_keeps_the_gpu_build_or_fails_loudly(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                  isolated: Path, gpu_env: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, history: bool) -> None:
    out = tmp_path / "environment.yml"
    code, _o, err = run_cli(capsys, "export", "src", "-o", str(out), *(["--from-history"] if history else []))
    assert code == 0, err
    deps = [d for d in yaml.safe_load(out.read_text())["dependencies"] if isinstance(d, str)]
    assert "pytorch=2.13.0=*cuda*" in deps and "cuda-version=13.0" in deps
    gpu_less(monkeypatch)
    code, _o, err = run_cli(capsys, "create", "copy", "--file", str(out), "--no-adapt", "--mirror", server.url,
                            "--no-verify", "-q")
    assert code == 1 and "__cuda" in err and "CONDA_OVERRIDE_CUDA" in err  # loud, and says how to fix it
    assert not (isolated / "envs" / "copy").exists()  # no CPU env left behind
    # the default (adapting) path refuses to turn the pinned GPU build into a CPU one, too
    code, _o, err = run_cli(capsys, "create", "copy", "--file", str(out), "--mirror", server.url, "--no-verify", "-q")
    assert code == 1 and "pins a CUDA build (pytorch=2.13.0=*cuda*)" in err and "--cuda cpu" in err
    assert not (isolated / "envs" / "copy").exists()
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "13.0")  # the build host told which GPU it builds for
    code, _o, err = run_cli(capsys, "create", "copy", "--file", str(out), "--no-adapt", "--mirror", server.url,
                            "--no-verify", "-q")
    assert code == 0, err
    copy = isolated / "envs" / "copy"
    assert torch_build(copy) == torch_build(gpu_env)
    if not history:
        assert builds(copy) == builds(gpu_env)
    assert {"transformers", "datasets"} <= pip_names(copy)
    assert json.loads((copy / "conda-meta" / "state").read_text())["env_vars"] == {"OMP_NUM_THREADS": "8"}


@pytest.mark.parametrize("fmt", ["explicit", "lock"])
def test_explicit_and_lock_bring_back_gpu_build_pip_and_variables(
        capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path, gpu_env: Path,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    out = tmp_path / f"team.{fmt}"
    code, _o, err = run_cli(capsys, "export", "src", "--format", fmt, "-o", str(out))
    assert code == 0, err
    text = out.read_text()
    # conda + conda-lockfiles installs a lock's conda part only: said when the lock holds more
    assert ("conda + conda-lockfiles installs only the conda packages" in err) == (fmt == "lock")
    if fmt == "explicit":
        side = tmp_path / "team.explicit.envkit.yml"
        assert f"# envkit-sidecar: {side.name}" in text and side.is_file()
        extra = yaml.safe_load(side.read_text())
        assert "transformers==4.99.0" in extra["pip"] and extra["variables"] == {"OMP_NUM_THREADS": "8"}
        args = ["--file", str(out)]
    else:
        assert text.startswith("version: 6\n")
        lock = yaml.safe_load(text)
        assert lock["environments"]["default"]["variables"] == {"OMP_NUM_THREADS": "8"}
        assert {p["name"] for p in lock["packages"] if "pypi" in p} >= {"transformers", "datasets"}
        pypi = next(p for p in lock["packages"] if p.get("name") == "transformers")
        # the mirror served the wheel: the lock names PyPI's page (the mirror is applied again at install)
        assert pypi["pypi"] == "https://pypi.org/simple/transformers/" and re.fullmatch(r"[0-9a-f]{64}", pypi["sha256"])
        assert server.url not in text
        args = ["--lock", str(out)]
    gpu_less(monkeypatch)
    code, _o, err = run_cli(capsys, "create", "copy", *args, "--mirror", server.url, "--no-verify", "-q")
    assert code == 0, err
    copy = isolated / "envs" / "copy"
    assert builds(copy) == builds(gpu_env)  # the identical GPU build, although the solver saw no __cuda
    assert {"transformers", "datasets"} <= pip_names(copy)
    assert json.loads((copy / "conda-meta" / "state").read_text())["env_vars"] == {"OMP_NUM_THREADS": "8"}


def test_a_lock_refuses_a_pypi_file_that_differs_from_the_one_locked(
        capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path, gpu_env: Path,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every PyPI entry has its sha256: pip runs in hash-checking mode, so a wheel that is not the locked
    one (a republished file, a mirror serving something else) fails the create, which leaves nothing."""
    out = tmp_path / "team.lock"
    assert run_cli(capsys, "export", "src", "--format", "lock", "-o", str(out))[0] == 0
    lock = yaml.safe_load(out.read_text())
    entry = next(p for p in lock["packages"] if p.get("name") == "transformers")
    entry["sha256"] = "0" * 64  # what the lock says no longer matches what the index serves
    out.write_text(yaml.safe_dump(lock, sort_keys=False))
    gpu_less(monkeypatch)
    code, _o, err = run_cli(capsys, "create", "copy", "--lock", str(out), "--mirror", server.url, "--no-verify", "-q")
    assert code == 1 and "error: a PyPI file is not the one the lock names (sha256 differs)" in err, err
    assert "transformers" in err and "lock again" in err
    assert not (isolated / "envs" / "copy").exists()


def test_explicit_to_stdout_never_drops_silently(capsys: pytest.CaptureFixture[str], gpu_env: Path,
                                                tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "export", "src", "--format", "explicit")
    assert code == 0 and "@EXPLICIT" in out and "not in the explicit file: the 2 pip package(s) and variables" in err
    code, out, err = run_cli(capsys, "export", "src", "--format", "explicit", "--strict")
    assert code == 1 and out == "" and "-o FILE" in err
    # a sidecar that did not travel with the file: said, not ignored
    target = tmp_path / "e.txt"
    assert run_cli(capsys, "export", "src", "--format", "explicit", "-o", str(target))[0] == 0
    (tmp_path / "e.txt.envkit.yml").unlink()
    code, _o, err = run_cli(capsys, "create", "copy", "--file", str(target), "--no-verify", "-q")
    assert code == 1 and "e.txt.envkit.yml" in err and "copy" in err


def test_explicit_file_is_what_conda_parses(gpu_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """conda's explicit URL pattern (conda/misc.py `url_pat`, conda >= 23): URL#<md5> | URL#[sha256:]<sha256>."""
    conda_url_pat = re.compile(r"(?:(?P<url_p>.+)(?:[/\\]))?(?P<fn>[^/\\#]+(?:\.tar\.bz2|\.conda))"
                               r"(?:#((?P<md5>[0-9a-f]{32})|((sha256:)?(?P<sha256>[0-9a-f]{64}))))?$")
    code, out, _err = run_cli(capsys, "export", "src", "--format", "explicit")
    lines = [ln for ln in out.splitlines() if ln and not ln.startswith(("#", "@"))]
    assert "@EXPLICIT" in out and re.search(r"^# platform: linux-64$", out, re.M)
    assert lines and all((m := conda_url_pat.match(ln)) and m.group("sha256") for ln in lines)
    code, out, _err = run_cli(capsys, "export", "src", "--format", "explicit", "--hash", "md5")
    lines = [ln for ln in out.splitlines() if ln and not ln.startswith(("#", "@"))]
    assert all((m := conda_url_pat.match(ln)) and m.group("md5") for ln in lines)
    vendored = vendored_conda_url_pat()  # conda-lock's vendored (older) conda parser takes the md5 form
    assert all((m := vendored.match(ln)) and m.group("md5") for ln in lines)


def vendored_conda_url_pat() -> re.Pattern[str]:
    """`url_pat` of conda-lock's vendored conda/misc.py, taken from its source (importing that module
    needs tqdm and more of conda's dependencies, which the test extra does not install)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("conda_lock")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("conda-lock is not installed")
    misc = Path(next(iter(spec.submodule_search_locations))) / "_vendor" / "conda" / "misc.py"
    if not misc.is_file():
        pytest.skip(f"conda-lock has no vendored conda at {misc}")
    for node in ast.parse(misc.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "url_pat" for t in node.targets):
            return eval(compile(ast.Expression(node.value), str(misc), "eval"), {"re": re})  # noqa: S307
    pytest.fail(f"no url_pat in {misc}")


def test_pixi_v6_lock_installs(capsys: pytest.CaptureFixture[str], server: ChannelServer, testbed,  # noqa: ANN001
                               isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock in the shape pixi 0.3x writes (rattler-lock v6: no subdir/channel, derived from the URL)."""
    channel = f"{server.url}/conda-forge"
    wanted = {"python": None, "pip": None, "cuda-version": "13.0", "pytorch": "cuda130"}
    entries = []
    for subdir in ("linux-64", "noarch"):
        repodata = json.loads((testbed.channel("conda-forge") / subdir / "repodata.json").read_text())
        for fn, rec in {**repodata.get("packages", {}), **repodata.get("packages.conda", {})}.items():
            want = wanted.get(rec["name"], "-")
            if want == "-" or (want and not (rec["version"] == want or rec["build"].startswith(want))):
                continue
            if rec["name"] == "pytorch" and rec["version"] != "2.13.0":
                continue
            entries.append((rec["name"], f"{channel}/{subdir}/{fn}", rec))
    assert sorted(n for n, _u, _r in entries) == ["cuda-version", "pip", "python", "pytorch"]
    refs = "".join(f"      - conda: {url}\n" for _n, url, _r in sorted(entries))
    pkgs = ""
    for _n, url, rec in sorted(entries):
        pkgs += f"- conda: {url}\n  sha256: {rec['sha256']}\n  md5: {rec['md5']}\n"
        if rec.get("depends"):
            pkgs += "  depends:\n" + "".join(f"  - {d}\n" for d in rec["depends"])
        pkgs += f"  license: {rec.get('license', 'BSD-3-Clause')}\n  size: {rec['size']}\n"
    lock = tmp_path / "pixi.lock"
    lock.write_text(f"version: 6\nenvironments:\n  default:\n    channels:\n    - url: {channel}/\n"
                    f"    packages:\n      linux-64:\n{refs}packages:\n{pkgs}")
    gpu_less(monkeypatch)
    code, _o, err = run_cli(capsys, "create", "pixi", "--lock", str(lock), "--no-verify", "-q")
    assert code == 0, err
    assert torch_build(isolated / "envs" / "pixi").startswith("cuda130")


def test_one_lock_for_linux_and_macos(capsys: pytest.CaptureFixture[str], server: ChannelServer, isolated: Path,
                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "envkit.lock"
    code, _o, err = run_cli(capsys, "lock", "dl_train", "--platform", "linux-64", "--platform", "osx-arm64", *GPU,
                            "--python", PY, "--mirror", server.url, "-o", str(out))
    assert code == 0, err
    assert "linux-64:" in err and "__cuda=13.0" in err
    assert "osx-arm64: macOS has no CUDA: dropped pytorch=2.13.0=cuda*, cuda-version=13.0" in err
    assert "linux-64:" in err and "2 wheels" in err and "cannot be locked" not in err
    assert not (isolated / "envs").exists()  # solved only, nothing installed
    from envkit.lock.file import read_lock

    lock = read_lock(out)
    assert lock.version == 6 and lock.names() == ("linux-64", "osx-arm64")
    linux, mac = lock.platform("linux-64"), lock.platform("osx-arm64")
    assert next(c.build for c in linux.conda if c.name == "pytorch").startswith("cuda130")
    assert next(c.build for c in mac.conda if c.name == "pytorch").startswith("cpu_generic")
    assert not any(c.name == "cuda-version" for c in mac.conda)
    for entry in (linux, mac):  # the pip section, resolved by pip for each platform without installing
        assert {(p.name, p.version) for p in entry.pypi} == {("transformers", "4.99.0"), ("datasets", "3.99.0")}
        assert all(p.sha256 and len(p.sha256) == 64 for p in entry.pypi)
        assert {p.url for p in entry.pypi} == {"https://pypi.org/simple/transformers/",
                                               "https://pypi.org/simple/datasets/"}  # PyPI, not the mirror
    assert "127.0.0.1" not in out.read_text()  # canonical channel URLs: the mirror is applied per request
    gpu_less(monkeypatch)
    code, _o, err = run_cli(capsys, "create", "team", "--lock", str(out), "--mirror", server.url, "--no-verify", "-q")
    assert code == 0, err
    prefix = isolated / "envs" / "team"
    assert torch_build(prefix).startswith("cuda130")
    assert {n for n, _v, _b in builds(prefix)} == {c.name for c in linux.conda}
    assert pip_names(prefix) >= {"transformers", "datasets"}  # the lock's PyPI entries, from the mirror's PyPI


def test_export_lock_for_platforms_and_bad_platform(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                    isolated: Path, gpu_env: Path, tmp_path: Path) -> None:
    out = tmp_path / "multi.lock"
    code, _o, err = run_cli(capsys, "export", "src", "--format", "lock", "--platform", "linux-64",
                            "--platform", "osx-arm64", "-o", str(out), "--lock-version", "7")
    # the env's channels are canonical (conda-forge): reach them through the mirror the env was made with
    if code != 0:
        pytest.fail(err)
    from envkit.lock.file import read_lock

    lock = read_lock(out)
    assert lock.version == 7 and lock.names() == ("linux-64", "osx-arm64")
    assert next(c.build for c in lock.platform("linux-64").conda if c.name == "pytorch") == torch_build(gpu_env)
    code, _o, err = run_cli(capsys, "lock", "dl_train", "--platform", "amiga-68k")
    assert code == 2 and "unknown platform 'amiga-68k'" in err and "osx-arm64" in err


def test_a_custom_prefix_is_a_first_class_conda_env(capsys: pytest.CaptureFixture[str], testbed,  # noqa: ANN001
                                                    tmp_path: Path) -> None:
    from envkit.prefix.condarc import environments_txt

    prefix = tmp_path / "projects" / "demo-env"
    code, _o, err = run_cli(capsys, "create", "demo", "--spec", "minimal", *GPU, "--python", PY, "--prefix",
                            str(prefix), "--channel", testbed.url("conda-forge"), "--no-verify", "-q")
    assert code == 0, err
    assert str(prefix) in environments_txt().read_text().splitlines()  # `conda env list`, `conda doctor`
    assert not (prefix / "CACHEDIR.TAG").exists()  # backup tools that honour the tag keep the env
    history = (prefix / "conda-meta" / "history").read_text()
    assert "# engine: py-rattler 0.28" in history and "# conda version" not in history  # no made-up conda
    code, _o, err = run_cli(capsys, "remove", str(prefix), "--yes")
    assert code == 0, err
    assert str(prefix) not in environments_txt().read_text().splitlines()


def test_lock_a_file_as_is_keeps_its_cuda_selector(capsys: pytest.CaptureFixture[str], testbed,  # noqa: ANN001
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tmp_path / "environment.yml"
    env.write_text(f"name: team\nchannels: [{testbed.url('conda-forge')}]\n"
                   f"dependencies: [python={PY}, pytorch=2.13.0=*cuda*, cuda-version=13.0]\n")
    out = tmp_path / "team.lock"
    gpu_less(monkeypatch)
    code, _o, err = run_cli(capsys, "lock", "--file", str(env), "--no-adapt", "--platform", "linux-64", "-o", str(out))
    assert code == 1 and "__cuda" in err and not out.exists()  # a GPU-less lock fails loudly, never CPU
    code, _o, err = run_cli(capsys, "lock", "--file", str(env), "--no-adapt", "--platform", "linux-64",
                            "--cuda", "13.0", "-o", str(out), "--lock-version", "7")
    assert code == 0, err
    from envkit.lock.file import read_lock

    lock = read_lock(out)
    assert lock.version == 7 and next(c.build for c in lock.platform("linux-64").conda
                                      if c.name == "pytorch").startswith("cuda130")


def test_mirror_installed_conda_env_exports_canonical_urls(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    """An env conda installed through mirrors (its records carry mirror URLs) exports the canonical ones."""
    prefix = conda_shaped_env(tmp_path)
    for fmt in ("explicit", "lock"):
        code, out, err = run_cli(capsys, "export", "--prefix", str(prefix), "--format", fmt)
        assert code == 0, err
        assert "tuna" not in out and "artifacts.corp.example" not in out and "tk-abc123" not in out
        assert "https://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.4-py311h64a7726_0.conda" in out
    pypi = {p["name"]: p for p in yaml.safe_load(out)["packages"] if "pypi" in p}  # the lock's PyPI entries
    assert pypi["requests"]["version"] == "2.32.3" and pypi["requests"]["pypi"] == "https://pypi.org/simple/requests/"
    assert pypi["mylib"]["pypi"].startswith("git+https://github.com/org/mylib.git@")
    assert "localpkg" not in pypi and "left out: localpkg is an editable install" in err


def test_a_hostile_lock_cannot_inject_pip_options(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from envkit.lock.file import current_platform

    lock = tmp_path / "evil.lock"
    lock.write_text(f"version: 6\nenvironments:\n  default:\n    channels: [{{url: conda-forge}}]\n"
                    f"    packages:\n      {current_platform()}:\n      - pypi: https://x.example/a-1.0-py3-none-any.whl\n"
                    "packages:\n- pypi: https://x.example/a-1.0-py3-none-any.whl\n"
                    "  name: \"a\\n--index-url http://evil.example/simple\"\n  version: '1.0'\n")
    code, _o, err = run_cli(capsys, "create", "evil", "--lock", str(lock), "--no-verify", "-q")
    assert code != 0 and "evil.lock: pypi" in err


def test_lock_pins_wheels_from_a_credentialed_index_and_names_what_it_cannot(
        capsys: pytest.CaptureFixture[str], testbed, tmp_path: Path) -> None:  # noqa: ANN001
    """`envkit lock` resolves the pip section per platform with pip (nothing installed): exact wheel URL
    + sha256 from the env file's own index, its credentials never in the lock; a line without a wheel for
    a platform (platform-specific wheel, sdist only, -e) is a note, or the error under --strict."""
    import base64
    import hashlib

    from testbed.pipindex import build_wheel, write_simple_index

    work = tmp_path / "wheels"
    manylinux = build_wheel(work, "linuxonly", "1.0")
    manylinux = manylinux.rename(work / "linuxonly-1.0-cp311-cp311-manylinux_2_17_x86_64.whl")
    sdist = work / "sdistonly-1.0.tar.gz"
    sdist.write_bytes(b"not a wheel")
    links = build_wheel(tmp_path / "links", "localwheel", "2.0")  # --find-links DIR: a file on this machine
    write_simple_index(tmp_path / "private" / "simple", [build_wheel(work, "transformers", "4.99.0"), manylinux, sdist])
    with ChannelServer(tmp_path / "private") as private:
        st = private.state
        st.auth = "basic"
        host = private.url.split("://")[1]
        index = f"http://{st.user}:{st.password}@{host}/simple"
        env = tmp_path / "environment.yml"
        pip = ["--index-url " + index, "transformers", "linuxonly"]
        env.write_text(yaml.safe_dump({"name": "team", "channels": [testbed.url("conda-forge")],
                                       "dependencies": [f"python={PY}", "pip",
                                                        {"pip": [*pip, "sdistonly", "-e ./mypkg", "localwheel",
                                                                 f"--find-links {links.parent}"]}]}))
        out = tmp_path / "team.lock"
        args = ["lock", "--file", str(env), "--no-adapt", "--platform", "linux-64", "--platform", "osx-arm64"]
        code, _o, err = run_cli(capsys, *args, "-o", str(out))
        assert code == 0, err
        assert "linux-64: pip line '-e ./mypkg' cannot be locked (an editable install" in err
        assert re.search(r"linux-64: pip line 'sdistonly' cannot be locked: no wheel for linux-64 .*sdistonly", err)
        assert re.search(r"osx-arm64: pip line 'linuxonly' cannot be locked: no wheel for osx-arm64", err)
        assert "linux-64: pip line 'linuxonly'" not in err
        assert "linux-64: localwheel 2.0 is locked as a local file (file://" in err
        text = out.read_text()
        secret_b64 = base64.b64encode(f"{st.user}:{st.password}".encode()).decode()
        assert st.password not in text and secret_b64 not in text and f"{st.user}:" not in text
        from envkit.lock.file import read_lock

        lock = read_lock(out)
        assert lock.indexes == (f"http://{host}/simple",)  # the index, without its credentials
        linux = {p.name: p for p in lock.platform("linux-64").pypi}
        assert set(linux) == {"transformers", "linuxonly", "localwheel"}
        served = tmp_path / "private" / "simple" / "linuxonly" / manylinux.name
        assert linux["linuxonly"].url == f"http://{host}/simple/linuxonly/{manylinux.name}"
        assert linux["linuxonly"].sha256 == hashlib.sha256(served.read_bytes()).hexdigest()
        assert {p.name for p in lock.platform("osx-arm64").pypi} == {"transformers", "localwheel"}
        assert any("'linuxonly' cannot be locked" in u for u in lock.platform("osx-arm64").unlocked)  # in the file
        assert len(lock.platform("linux-64").unlocked) == 2
        code, _o, err = run_cli(capsys, "create", "team", "--lock", str(out), "--dry-run")
        assert code == 0, err  # create --lock says what the lock could not pin, never drops it silently
        assert "not in the lock, not installed: pip line 'sdistonly' cannot be locked" in err
        env.write_text(yaml.safe_dump({"name": "team", "channels": [testbed.url("conda-forge")],
                                       "dependencies": [f"python={PY}", "pip", {"pip": pip}]}))
        strict = tmp_path / "strict.lock"
        code, _o, err = run_cli(capsys, *args, "--strict", "-o", str(strict))
        assert code == 1 and not strict.exists()
        assert "osx-arm64: pip line 'linuxonly' cannot be locked" in err and "without --strict" in err
        assert st.password not in err and secret_b64 not in err


def rattler_records(path: Path) -> list:  # type: ignore[type-arg]
    """The lock as rattler (the reader pixi uses) reads it: the reader of record for envkit's locks."""
    rattler = pytest.importorskip("rattler")
    env = rattler.LockFile.from_path(str(path)).default_environment()
    return [r for plat in env.platforms() for r in env.conda_repodata_records_for_platform(plat) or []]


def test_rattler_reads_every_v6_lock_of_a_file_channel(capsys: pytest.CaptureFixture[str], testbed,  # noqa: ANN001
                                                      isolated: Path, tmp_path: Path) -> None:
    """rattler derives channel and subdir from an http(s) URL only: a file:// channel's entries carry both
    (or rattler refuses the file: `missing field/fields 'subdir'`), in all three v6 locks envkit writes."""
    local = testbed.url("conda-forge")
    assert local.startswith("file://")
    code, _o, err = run_cli(capsys, "create", "loc", "--spec", "minimal", *GPU, "--python", PY, "--channel", local,
                            "--no-verify", "-q")
    assert code == 0, err
    exported = tmp_path / "export.lock"
    assert run_cli(capsys, "export", "loc", "--format", "lock", "-o", str(exported))[0] == 0
    env = tmp_path / "environment.yml"
    env.write_text(f"name: loc\nchannels: [{local}]\ndependencies: [python={PY}, pytorch=2.13.0=*cuda*, "
                   "cuda-version=13.0]\n")
    solved = tmp_path / "solved.lock"
    code, _o, err = run_cli(capsys, "lock", "--file", str(env), "--no-adapt", "--platform", "linux-64", *GPU,
                            "-o", str(solved))
    assert code == 0, err
    bundle = tmp_path / "bundle"
    code, _o, err = run_cli(capsys, "bundle", "--lock", str(exported), "-o", str(bundle))
    assert code == 0, err
    for lock in (exported, solved, bundle / "source.lock"):
        assert lock.read_text().startswith("version: 6\n"), lock
        records = rattler_records(lock)
        assert {r.name.normalized for r in records} >= {"python", "pytorch", "cuda-version"}, lock
        for record in records:
            assert record.channel == local.rstrip("/") + "/", (lock, record)
            assert record.subdir == record.url.rsplit("/", 2)[1] and record.subdir in ("linux-64", "noarch")
    code, _o, err = run_cli(capsys, "create", "again", "--lock", str(exported), "--no-verify", "-q")
    assert code == 0, err  # envkit reads what rattler reads
    assert torch_build(isolated / "envs" / "again") == torch_build(isolated / "envs" / "loc")


@pytest.mark.parametrize("fmt", ["lock", "explicit"])
def test_a_lock_refused_by_an_external_engine_prints_fixes_that_work(
        capsys: pytest.CaptureFixture[str], testbed, isolated: Path, tmp_path: Path,  # noqa: ANN001
        fmt: str) -> None:
    """`create --lock F --engine conda`: plain conda reads a lock as a spec list (an empty env), so the fix
    names envkit's own command (run here as printed) and, for conda, conda-lockfiles' env spec."""
    import shlex

    code, _o, err = run_cli(capsys, "create", "loc", "--spec", "minimal", *GPU, "--python", PY, "--channel",
                            testbed.url("conda-forge"), "--no-verify", "-q")
    assert code == 0, err
    shared = tmp_path / f"team.{fmt}"
    assert run_cli(capsys, "export", "loc", "--format", fmt, "-o", str(shared))[0] == 0
    flag = "--lock" if fmt == "lock" else "--file"
    code, _o, err = run_cli(capsys, "create", "copy", flag, str(shared), "--engine", "conda", "--no-verify")
    assert code == 2 and f"is installed by the embedded engine, not --engine conda" in err, err
    fix = " ".join(err.split())  # the fix may wrap
    prefix = isolated / "envs" / "copy"
    if fmt == "lock":
        assert (f"conda install -n base -c conda-forge conda-lockfiles, then conda env create -p {prefix} --file "
                f"{shared} --format rattler-lock-v6") in fix
    else:
        assert f"with plain conda, the conda packages only: conda create -p {prefix} --file {shared}" in fix
    ours = re.search(r"drop --engine: (envkit create \S+ --\w+ \S+)", fix)
    assert ours, fix
    code, _o, err = run_cli(capsys, *shlex.split(ours.group(1))[1:], "--no-verify", "-q")
    assert code == 0, err  # the envkit command works as printed
    assert torch_build(prefix) == torch_build(isolated / "envs" / "loc")


def test_a_lock_of_a_mirrored_env_installs_through_another_mirror(
        capsys: pytest.CaptureFixture[str], testbed, isolated: Path, tmp_path: Path,  # noqa: ANN001
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every URL in a lock or explicit file is canonical: with the mirror the env was made through stopped,
    a teammate behind another mirror installs both (conda and PyPI parts) with `--mirror OTHER`."""
    with ChannelServer(testbed.root) as first:
        code, _o, err = run_cli(capsys, "create", "src", "--spec", "dl_train", *GPU, "--python", PY, "--mirror",
                                first.url, "--no-verify", "-q")
        assert code == 0, err
        lock, explicit = tmp_path / "team.lock", tmp_path / "team.txt"
        assert run_cli(capsys, "export", "src", "--format", "lock", "-o", str(lock))[0] == 0
        assert run_cli(capsys, "export", "src", "--format", "explicit", "-o", str(explicit))[0] == 0
        gone = first.url
    for shared in (lock, explicit, tmp_path / "team.txt.envkit.yml"):
        assert gone.split("://")[1] not in shared.read_text(), shared  # no URL of the first mirror anywhere
    gpu_less(monkeypatch)
    with ChannelServer(testbed.root) as other:
        assert other.url != gone
        for name, args in (("bylock", ["--lock", str(lock)]), ("byfile", ["--file", str(explicit)])):
            code, _o, err = run_cli(capsys, "create", name, *args, "--mirror", other.url, "--no-verify", "-q")
            assert code == 0, err
            assert builds(isolated / "envs" / name) == builds(isolated / "envs" / "src")
            assert {"transformers", "datasets"} <= pip_names(isolated / "envs" / name)
        # for plain conda behind that mirror (it downloads explicit URLs as written; no .condarc setting remaps
        # them: docs/conda-behaviour.md), `export --format explicit --mirror M` writes the mirror's URLs; the mirror
        # only from the command line: ENVKIT_MIRROR alone keeps the canonical URLs a team shares
        mirrored = tmp_path / "behind.txt"
        monkeypatch.setenv("ENVKIT_MIRROR", other.url)
        code, out, err = run_cli(capsys, "export", "src", "--format", "explicit")
        assert code == 0 and other.url not in out and "https://conda.anaconda.org/conda-forge/" in out, err
        monkeypatch.delenv("ENVKIT_MIRROR")
        assert run_cli(capsys, "export", "src", "--format", "explicit", "--mirror", other.url, "-o",
                       str(mirrored))[0] == 0
        urls = [line for line in mirrored.read_text().splitlines() if "://" in line and not line.startswith("#")]
        assert urls and all(u.startswith(other.url + "/") for u in urls), urls[:3]
        code, _o, err = run_cli(capsys, "create", "asis", "--file", str(mirrored), "--no-verify", "-q")  # as written
        assert code == 0, err
        assert builds(isolated / "envs" / "asis") == builds(isolated / "envs" / "src")


def test_a_private_index_stays_the_index_in_every_export(capsys: pytest.CaptureFixture[str], testbed,  # noqa: ANN001
                                                        isolated: Path, tmp_path: Path) -> None:
    """An env whose pip section came from a private --index-url exports it as --index-url (an extra index
    would let a public package of the same name win), without its credentials and with a note."""
    from testbed.pipindex import build_wheel, write_simple_index

    write_simple_index(tmp_path / "private" / "simple", [build_wheel(tmp_path / "wheels", "corp-utils", "1.2.0")])
    with ChannelServer(tmp_path / "private") as private:
        st = private.state
        st.auth = "basic"
        host = private.url.split("://")[1]
        env = tmp_path / "environment.yml"
        env.write_text(yaml.safe_dump({"name": "corp", "channels": [testbed.url("conda-forge")], "dependencies": [
            f"python={PY}", "pip", {"pip": [f"--index-url http://{st.user}:{st.password}@{host}/simple",
                                            "corp-utils"]}]}))
        code, _o, err = run_cli(capsys, "create", "corp", "--file", str(env), "--no-adapt", "--no-verify", "-q")
        assert code == 0, err
        code, out, err = run_cli(capsys, "export", "corp")
        assert code == 0, err
        pip = next(d["pip"] for d in yaml.safe_load(out)["dependencies"] if isinstance(d, dict))
        assert pip == [f"--index-url http://{host}/simple", "corp-utils==1.2.0"]
        assert f"kept the env's pip index (--index-url http://{host}/simple), written without credentials" in err
        assert "PIP_INDEX_URL" in err
        assert f"private index only (--index-url http://{host}/simple" in out
        code, out, err = run_cli(capsys, "export", "corp", "--format", "lock")
        assert code == 0, err
        assert yaml.safe_load(out)["environments"]["default"]["indexes"] == [f"http://{host}/simple"]
        for text in (out, err):
            assert st.password not in text and f"{st.user}:" not in text
        from envkit.lock.file import current_platform, parse_lock, pip_lines

        locked = parse_lock(out)
        assert pip_lines(locked, locked.platform(current_platform()))[0] == f"--index-url http://{host}/simple"

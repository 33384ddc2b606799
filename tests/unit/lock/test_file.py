"""envkit.lock.file: rattler-lock v6 (pixi, conda-lockfiles) and v7 (py-rattler 0.28) written and read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.lock.file import (Lock, LockedConda, LockedPlatform, LockedPypi, LockError, build_number_of, parse_lock,
                             read_lock, render_lock, split_filename, write_lock)
from helpers import FIXTURES

CF = "https://conda.anaconda.org/conda-forge"
TORCH = LockedConda(f"{CF}/linux-64/pytorch-2.13.0-cuda130_generic_py311_h0_200.conda", sha256="a" * 64,
                    md5="b" * 32, size=1265, depends=("python >=3.11,<3.11.9999", "__cuda"), license="BSD-3-Clause",
                    timestamp=1760000000000)
CUDA_VERSION = LockedConda(f"{CF}/noarch/cuda-version-13.0-h_envkit_3.conda", sha256="c" * 64, md5="d" * 32,
                           constrains=("__cuda >=13",), build_number=0, size=870)
WHEEL = LockedPypi("certifi", "2024.8.30", "https://files.example/certifi-2024.8.30-py3-none-any.whl", "e" * 64,
                   requires_python=">=3.6")
LOCK = Lock(channels=(CF,), platforms=(
    LockedPlatform("linux-64", (TORCH, CUDA_VERSION), (WHEEL,)),
    LockedPlatform("osx-arm64", (CUDA_VERSION,)),
), indexes=("https://pypi.org/simple",), variables=(("OMP_NUM_THREADS", "4"),))


def test_filename_parts_and_v6_build_number_rule() -> None:
    assert split_filename("pytorch-2.13.0-cuda130_generic_py311_h0_200.conda") == (
        "pytorch", "2.13.0", "cuda130_generic_py311_h0_200")
    assert build_number_of("cuda130_generic_py311_h0_200") == 200
    assert build_number_of("h_envkit_3") == 3 and build_number_of("cpython") == 0
    assert build_number_of("7_cp313") == 313  # rattler's rule (trailing digits), not conda-lockfiles' 7
    with pytest.raises(LockError, match="not a conda package file name"):
        split_filename("readme.txt")


@pytest.mark.parametrize("version", [6, 7])
def test_round_trip(tmp_path: Path, version: int) -> None:
    path = write_lock(LOCK, tmp_path / "envkit.lock", version=version)
    text = path.read_text()
    assert text.startswith(f"version: {version}\n")
    back = read_lock(path)
    assert back.version == version
    assert back.channels == (CF + "/",) or back.channels == (CF,)
    assert back.variables == LOCK.variables and back.indexes == LOCK.indexes
    linux = back.platform("linux-64")
    assert [c.url for c in linux.conda] == [CUDA_VERSION.url, TORCH.url]  # sorted by name
    torch = next(c for c in linux.conda if c.name == "pytorch")
    assert (torch.sha256, torch.md5, torch.size, torch.depends, torch.number) == (
        TORCH.sha256, TORCH.md5, 1265, TORCH.depends, 200)
    cv = next(c for c in linux.conda if c.name == "cuda-version")
    assert cv.number == 0 and cv.platform_subdir == "noarch"  # the non-derivable build_number survives
    assert linux.pypi == (WHEEL,)
    assert back.platform("osx-arm64").conda[0].url == CUDA_VERSION.url
    assert text.count(CUDA_VERSION.url) == 3  # two platform references, one package entry
    if version == 6:
        assert "subdir:" not in text and "platforms:" not in text.split("environments:")[0]
    with pytest.raises(LockError, match="no packages for win-64"):
        back.platform("win-64")


@pytest.mark.parametrize("version", [6, 7])
def test_rattler_reads_what_envkit_writes(tmp_path: Path, version: int) -> None:
    rattler = pytest.importorskip("rattler")
    path = write_lock(LOCK, tmp_path / "envkit.lock", version=version)
    env = rattler.LockFile.from_path(path).default_environment()
    linux = next(p for p in env.platforms() if str(p) == "linux-64")
    records = {r.name.normalized: r for r in env.conda_repodata_records_for_platform(linux)}
    assert records["pytorch"].build_number == 200 and records["cuda-version"].build_number == 0
    assert str(records["cuda-version"].subdir) == "noarch"
    assert records["pytorch"].sha256.hex() == "a" * 64


def test_a_local_channel_v6_lock_names_channel_and_subdir(tmp_path: Path) -> None:
    """rattler derives nothing from a file:// location: v6 writes `subdir` and `channel` for such entries
    (as rattler's own writer does), and only for them, so the https entries stay in pixi's shape."""
    rattler = pytest.importorskip("rattler")
    base = (tmp_path / "channel").as_uri()
    local = LockedConda(f"{base}/linux-64/pytorch-2.13.0-cuda130_generic_py311_h0_200.conda", sha256="a" * 64)
    lock = Lock(channels=(base, CF), platforms=(LockedPlatform("linux-64", (local, CUDA_VERSION)),))
    path = write_lock(lock, tmp_path / "local.lock", version=6)
    import yaml

    entries = {e["conda"].rsplit("/", 1)[1]: e for e in yaml.safe_load(path.read_text())["packages"]}
    assert entries[local.filename]["subdir"] == "linux-64" and entries[local.filename]["channel"] == base + "/"
    assert "subdir" not in entries[CUDA_VERSION.filename] and "channel" not in entries[CUDA_VERSION.filename]
    env = rattler.LockFile.from_path(path).default_environment()
    records = {r.name.normalized: r for r in env.conda_repodata_records_for_platform(env.platforms()[0])}
    assert records["pytorch"].channel == base + "/" and records["pytorch"].subdir == "linux-64"
    back = read_lock(path).platform("linux-64")
    assert next(c for c in back.conda if c.name == "pytorch").channel_url == base


def test_conda_lockfiles_v6_model_accepts_it(tmp_path: Path) -> None:
    """conda-lockfiles 0.2 validates `version` <= 6 and requires a default env (its v6 pydantic model)."""
    import yaml

    data = yaml.safe_load(render_lock(LOCK, 6))
    assert data["version"] == 6 and "default" in data["environments"]
    for entry in data["packages"]:
        assert ("conda" in entry) != ("pypi" in entry)


def test_reads_pixi_v6_fixture() -> None:
    lock = read_lock(FIXTURES / "locks" / "pixi-v6.lock")
    assert lock.version == 6 and lock.names() == ("linux-64", "osx-arm64")
    linux = lock.platform("linux-64")
    assert [c.name for c in linux.conda] == ["python", "python_abi"]
    assert linux.conda[1].number == 313 and linux.conda[1].platform_subdir == "noarch"
    assert linux.pypi[0].name == "certifi" and linux.pypi[0].sha256 and linux.pypi[0].is_direct
    assert linux.pypi[0].requirement().startswith("certifi @ https://")
    rattler = pytest.importorskip("rattler")
    env = rattler.LockFile.from_path(FIXTURES / "locks" / "pixi-v6.lock").default_environment()
    plat = next(p for p in env.platforms() if str(p) == "linux-64")
    numbers = {r.name.normalized: r.build_number for r in env.conda_repodata_records_for_platform(plat)}
    assert numbers == {c.name: c.number for c in linux.conda}  # rattler derives the same numbers


def test_reads_rattler_v7_with_local_paths(tmp_path: Path) -> None:
    text = ("version: 7\nplatforms:\n- name: linux-64\nenvironments:\n  default:\n    channels:\n"
            "    - url: file:///srv/chan\n    packages:\n      linux-64:\n      - conda: /srv/chan/linux-64/a-1-0.conda\n"
            "packages:\n- conda: /srv/chan/linux-64/a-1-0.conda\n  subdir: linux-64\n  sha256: " + "f" * 64 + "\n")
    lock = parse_lock(text)
    assert lock.platform("linux-64").conda[0].url == "file:///srv/chan/linux-64/a-1-0.conda"


@pytest.mark.parametrize("text,match", [
    ("version: 5\nenvironments: {default: {}}\n", "version 5"),
    ("name: x\n", "not a rattler lock"),
    ("version: 6\n", "no environments"),
    ("[unclosed", "not YAML"),
])
def test_bad_locks_say_why(text: str, match: str) -> None:
    with pytest.raises(LockError, match=match):
        parse_lock(text, "x.lock")


def test_unlocked_lines_survive_the_lock_file() -> None:
    lock = Lock(channels=("https://conda.anaconda.org/conda-forge",),
                platforms=(LockedPlatform("linux-64"), LockedPlatform("osx-arm64", unlocked=("pip line 'x' no wheel",))))
    text = render_lock(lock)
    assert "pypi-unlocked" in text
    back = parse_lock(text)
    assert back.platform("osx-arm64").unlocked == ("pip line 'x' no wheel",) and back.platform("linux-64").unlocked == ()
    assert "pypi-unlocked" not in render_lock(Lock(channels=(), platforms=(LockedPlatform("linux-64"),)))


# -- issue 20: numbers, digests, subdirs and credentials of a hostile lock --------------------------------------
V7 = """version: 7
platforms:
- name: linux-64
environments:
  default:
    channels:
    - url: {channel}/
    packages:
      linux-64:
      - conda: {channel}/linux-64/zlib-1.3-h0_0.conda
packages:
- conda: {channel}/linux-64/zlib-1.3-h0_0.conda
  subdir: linux-64
  channel: {channel}/
{extra}"""


def hostile(extra: str, channel: str = CF) -> str:
    return V7.format(channel=channel, extra=extra)


@pytest.mark.parametrize("extra, said", [
    ("  size: .inf\n", "size is 'inf', not a whole number"),
    ("  size: 1e999\n", "size is '1e999', not a whole number"),
    ("  timestamp: .nan\n", "timestamp is 'nan'"),
    ("  timestamp: -5\n", "timestamp is -5, a negative number"),
    ("  build_number: 1.5\n", "build_number is '1.5'"),
    ("  size: true\n", "size is 'True'"),
    ("  sha256: 0000000000000000000000000000000000000000000000000000000000000000\n", "not a quoted hex digest"),
    ("  sha256: abc\n", "is not 64 hex digits"),
    ("  md5: [1]\n", "md5 '[1]' is not a quoted hex digest"),
])
def test_every_number_and_digest_is_validated(extra: str, said: str) -> None:
    with pytest.raises(LockError, match=said.replace("(", r"\(").replace("[", r"\[")):
        parse_lock(hostile(extra), "hostile.lock")


def test_integral_numbers_and_a_quoted_zero_digest_are_read() -> None:
    lock = parse_lock(hostile(f"  size: 12.0\n  timestamp: 1700000000000\n  sha256: '{'0' * 64}'\n"))
    pkg = lock.platforms[0].conda[0]
    assert (pkg.size, pkg.timestamp, pkg.sha256) == (12, 1700000000000, "0" * 64)  # the install refuses that hash
    with pytest.raises(LockError, match="is not a number"):
        parse_lock("version: .inf\nenvironments: {default: {}}\n")


@pytest.mark.parametrize("subdir", ["../../../../tmp/victim", "linux-64/../..", "/tmp", "linux 64", ".."])
def test_a_subdir_is_a_platform_name_never_a_path(subdir: str) -> None:
    with pytest.raises(LockError, match="is not a conda platform name"):
        parse_lock(hostile("").replace("  subdir: linux-64\n", f"  subdir: '{subdir}'\n"))
    with pytest.raises(LockError, match="is not a conda platform name"):  # the URL's folder, when no subdir is given
        parse_lock(hostile("").replace("  subdir: linux-64\n", "").replace("/linux-64/zlib", "/linux-64/../zlib"))


def test_credentials_never_survive_reading_or_writing() -> None:
    from envkit.secrets import VAULT

    lock = parse_lock(hostile("", channel="https://alice:pa55word-x@private.example/t/tk-0123456789abcdefghij/cf"))
    pkg = lock.platforms[0].conda[0]
    assert pkg.url == "https://private.example/cf/linux-64/zlib-1.3-h0_0.conda"
    assert lock.channels == ("https://private.example/cf/",) and pkg.channel == "https://private.example/cf/"
    assert VAULT.headers_for("private.example") == {"Authorization": "Basic " + __import__("base64").b64encode(
        b"alice:pa55word-x").decode()}  # sent at request time instead
    assert VAULT.with_token("https://private.example/cf") == "https://private.example/t/tk-0123456789abcdefghij/cf"
    dirty = Lock(channels=("https://bob:hunter2-pw@h.example/cf",), platforms=(LockedPlatform("linux-64", (
        LockedConda("https://bob:hunter2-pw@h.example/cf/linux-64/zlib-1.3-h0_0.conda", sha256="a" * 64),), (
        LockedPypi("x", "1", "https://bob:hunter2-pw@h.example/x-1-py3-none-any.whl", "b" * 64),)),),
        indexes=("https://bob:hunter2-pw@h.example/simple",))
    for version in (6, 7):
        text = render_lock(dirty, version)
        assert "hunter2" not in text and "bob" not in text and "https://h.example/cf/linux-64/zlib" in text
    kept = parse_lock(hostile("", channel="file:///srv/cf"))  # nothing to strip: unchanged
    assert kept.platforms[0].conda[0].url == "file:///srv/cf/linux-64/zlib-1.3-h0_0.conda"
    from envkit.lock.file import clean_url

    assert clean_url("git+ssh://git@github.com/o/r.git#egg=r") == "git+ssh://git@github.com/o/r.git#egg=r"
    assert clean_url("git+https://u:tok-secret@github.com/o/r.git#egg=r") == "git+https://github.com/o/r.git#egg=r"

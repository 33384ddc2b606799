"""What `envkit bundle`, `create --lock` and `create --bundle` refuse to write, read or install: a lock's subdir
that climbs out, credentials in a lock's URLs, a bundle whose lock and manifest disagree or whose hashes are
missing, an archive swapped after it was checked, root-only files, devices and FIFOs passed off as archives.

Small locks of two test-bed archives keep these fast (no solve, no pip); every run is the real CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from helpers import run_cli
from testbed.channel import TestBed
from testbed.server import ChannelServer

PKGS = ("noarch/cuda-version-13.0-h_envkit_3.conda", "linux-64/pytorch-2.13.0-cpu_generic_py311_h0_0.conda")


@contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail instead of hanging the suite: SIGALRM interrupts a blocking open() or read()."""
    def expired(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def lock_text(channel: str, files: tuple[str, ...] = PKGS, *, sha: dict[str, str | None] | None = None,
              subdir: dict[str, str] | None = None) -> str:
    """A rattler-lock v7 naming `files` (<subdir>/<archive>) of `channel`, with their sha256 unless told."""
    sha = sha or {}
    refs, packages = [], []
    for rel in files:
        url = f"{channel}/{rel}"
        refs.append({"conda": url})
        entry: dict[str, object] = {"conda": url, "subdir": (subdir or {}).get(rel, rel.split("/")[0]),
                                    "channel": channel + "/"}
        if sha.get(rel):
            entry["sha256"] = sha[rel]
        packages.append(entry)
    data = {"version": 7, "platforms": [{"name": "linux-64"}],
            "environments": {"default": {"channels": [{"url": channel + "/"}], "packages": {"linux-64": refs}}},
            "packages": packages}
    return yaml.safe_dump(data, sort_keys=False)


def digests(testbed: TestBed) -> dict[str, str | None]:
    return {rel: hashlib.sha256((testbed.channel("conda-forge") / rel).read_bytes()).hexdigest() for rel in PKGS}


@pytest.fixture
def small_bundle(capsys: pytest.CaptureFixture[str], testbed: TestBed, isolated: Path, tmp_path: Path) -> Path:
    lock = tmp_path / "small.lock"
    lock.write_text(lock_text(testbed.url("conda-forge"), sha=digests(testbed)))
    out = tmp_path / "bundle"
    code, _out, err = run_cli(capsys, "bundle", "--lock", str(lock), "-o", str(out))
    assert code == 0, err
    return out


def installed(prefix: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    return {json.loads(p.read_text())["name"]: json.loads(p.read_text())
            for p in (prefix / "conda-meta").glob("*.json")}


def test_a_lock_subdir_that_climbs_out_writes_nothing(capsys: pytest.CaptureFixture[str], testbed: TestBed,
                                                      isolated: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim" / "pytorch-2.13.0-cpu_generic_py311_h0_0.conda"
    victim.parent.mkdir()
    victim.write_bytes(b"precious")
    lock = tmp_path / "evil.lock"
    # from <out>.parent/.envkit-bundle.<out>.<pid>/conda/<subdir>/: ../../victim is tmp_path/victim
    lock.write_text(lock_text(testbed.url("conda-forge"), subdir={PKGS[1]: "../../victim"}))
    code, _out, err = run_cli(capsys, "bundle", "--lock", str(lock), "-o", str(tmp_path / "b"))
    assert code == 1 and "subdir '../../victim' is not a conda platform name" in err, err
    assert victim.read_bytes() == b"precious" and not (tmp_path / "b").exists()
    lock.write_text(lock_text(testbed.url("conda-forge"), subdir={PKGS[1]: "/tmp/victim"}))
    code, _out, err = run_cli(capsys, "bundle", "--lock", str(lock), "-o", str(tmp_path / "b"))
    assert code == 1 and "is not a conda platform name" in err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".envkit-bundle")]  # its staging went too


def test_root_only_files_devices_and_fifos_never_enter_a_bundle(capsys: pytest.CaptureFixture[str], testbed: TestBed,
                                                               isolated: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    channel = tmp_path / "chan"
    (channel / "linux-64").mkdir(parents=True)
    secret = tmp_path / "root-only"
    secret.write_text("root:$6$secret-hash:19000\n")
    secret.chmod(0o600)
    (channel / "linux-64" / "secret-1.0-0.conda").symlink_to(secret)
    (channel / "linux-64" / "zero-1.0-0.conda").symlink_to("/dev/zero")
    os.mkfifo(channel / "linux-64" / "fifo-1.0-0.conda")
    for name, said in (("secret", "a symlink leads it out"), ("zero", "a symlink leads it out"),
                       ("fifo", "it is a FIFO, not a regular file")):
        lock = tmp_path / f"{name}.lock"
        lock.write_text(lock_text(channel.as_uri(), (f"linux-64/{name}-1.0-0.conda",)))  # no sha256 to check
        with within(30):
            code, _out, err = run_cli(capsys, "bundle", "--lock", str(lock), "-o", str(tmp_path / f"b-{name}"))
        assert code == 1 and said in err and "Traceback" not in err, err
        assert not (tmp_path / f"b-{name}").exists()
    # a root-only archive inside the channel is copied, but never wider than it was (0600 stays 0600)
    mine = channel / "linux-64" / "pytorch-2.13.0-cpu_generic_py311_h0_0.conda"
    shutil.copyfile(testbed.channel("conda-forge") / PKGS[1], mine)
    mine.chmod(0o600)
    lock = tmp_path / "mine.lock"
    lock.write_text(lock_text(channel.as_uri(), (PKGS[1],)))
    code, _out, err = run_cli(capsys, "bundle", "--lock", str(lock), "-o", str(tmp_path / "b-mine"))
    assert code == 0, err
    copied = tmp_path / "b-mine" / "conda" / PKGS[1]
    assert stat.S_IMODE(copied.stat().st_mode) == 0o600
    if os.getuid() == 0:  # root acting for a user who cannot read it: refused, not handed over
        monkeypatch.setenv("SUDO_UID", "65534")
        monkeypatch.setenv("SUDO_GID", "65534")
        code, _out, err = run_cli(capsys, "bundle", "--lock", str(lock), "-o", str(tmp_path / "b-sudo"))
        assert code == 1 and "does not let uid 65534 read it" in err and not (tmp_path / "b-sudo").exists()


def test_credentials_in_lock_urls_reach_no_file(capsys: pytest.CaptureFixture[str], testbed: TestBed,
                                               isolated: Path, tmp_path: Path) -> None:
    """The lock names the server with user:password@: create --lock, bundle --lock and create --bundle all
    authenticate (the server refuses anonymous requests) and write the password nowhere."""
    with ChannelServer(testbed.root) as srv:
        srv.state.auth = "basic"
        host = srv.url.split("://", 1)[1]
        channel = f"http://{srv.state.user}:{srv.state.password}@{host}/conda-forge"
        lock = tmp_path / "private.lock"
        lock.write_text(lock_text(channel, sha=digests(testbed)))
        code, _out, err = run_cli(capsys, "create", "direct", "--lock", str(lock), "--no-verify")
        assert code == 0, err
        assert srv.hits(".conda") and all(status == 200 for _m, _p, status in srv.hits(".conda"))
        code, _out, err = run_cli(capsys, "bundle", "--lock", str(lock), "-o", str(tmp_path / "bundle"))
        assert code == 0, err
    code, _out, err = run_cli(capsys, "create", "offline", "--bundle", str(tmp_path / "bundle"), "--no-verify")
    assert code == 0, err
    assert installed(isolated / "envs" / "direct")["pytorch"]["url"] == f"http://{host}/conda-forge/{PKGS[1]}"
    assert installed(isolated / "envs" / "offline")["pytorch"]["url"] == f"http://{host}/conda-forge/{PKGS[1]}"
    token = base64.b64encode(f"{srv.state.user}:{srv.state.password}".encode())
    leaks = [p for root in (isolated, tmp_path / "bundle") for p in root.rglob("*")
             if p.is_file() and not p.is_symlink() and (srv.state.password.encode() in p.read_bytes()
                                                        or token in p.read_bytes())]
    assert not leaks, leaks
    assert sorted(p.name for p in (tmp_path / "bundle").iterdir()) == [
        "bundle.json", "conda", "envkit.lock", "source.lock"]  # every file of the bundle was searched
    assert len(list((isolated / "envs" / "offline" / "conda-meta").glob("*.json"))) == 2


def _edit_lock(bundle: Path, edit: object) -> None:
    data = yaml.safe_load((bundle / "envkit.lock").read_text())
    edit(data)  # type: ignore[operator]
    (bundle / "envkit.lock").write_text(yaml.safe_dump(data, sort_keys=False))


def _edit_manifest(bundle: Path, edit: object) -> None:
    data = json.loads((bundle / "bundle.json").read_text())
    edit(data)  # type: ignore[operator]
    (bundle / "bundle.json").write_text(json.dumps(data))


def _symlink_out(bundle: Path, target: object) -> None:
    archive = bundle / "conda" / PKGS[1]
    archive.unlink()
    archive.symlink_to(target)  # type: ignore[arg-type]


def test_a_bundle_installs_only_what_its_manifest_lists(capsys: pytest.CaptureFixture[str], small_bundle: Path,
                                                        isolated: Path, tmp_path: Path) -> None:
    torch = "conda/" + PKGS[1]
    outside = tmp_path / "outside" / PKGS[1].split("/")[1]
    outside.parent.mkdir()
    shutil.copyfile(small_bundle / torch, outside)

    def point_outside(data: dict) -> None:  # type: ignore[type-arg]
        for ref in data["environments"]["default"]["packages"]["linux-64"]:
            if ref["conda"] == torch:
                ref["conda"] = str(outside)
        for entry in data["packages"]:
            if entry["conda"] == torch:
                entry["conda"] = str(outside)
                del entry["sha256"]

    def drop_one(data: dict) -> None:  # type: ignore[type-arg]
        data["environments"]["default"]["packages"]["linux-64"] = [
            r for r in data["environments"]["default"]["packages"]["linux-64"] if r["conda"] != torch]
        data["packages"] = [p for p in data["packages"] if p["conda"] != torch]

    def manifest_entry(key: str, value: object) -> object:
        def edit(data: dict) -> None:  # type: ignore[type-arg]
            item = next(f for f in data["files"] if f["path"] == torch)
            if value is None:
                del item[key]
            else:
                item[key] = value
        return edit

    cases = [
        (_edit_lock, point_outside, "which is not a file bundle.json lists inside the bundle"),
        (_edit_lock, drop_one, "which envkit.lock does not install"),
        (_edit_manifest, manifest_entry("sha256", "0" * 64), "sha256 is all zeros"),
        (_edit_manifest, manifest_entry("sha256", None), "has no sha256"),
        (_edit_manifest, manifest_entry("size", float("inf")), "size is 'inf', not a whole number"),
        (_edit_manifest, manifest_entry("path", "../outside/" + outside.name), "climbs out of"),
        (_edit_manifest, manifest_entry("path", str(outside)), "only a path relative to"),
        (_symlink_out, outside, "a symlink leads it out of"),  # the same bytes, but read from outside
    ]
    for number, (where, edit, said) in enumerate(cases):
        broken = tmp_path / f"broken{number}"
        shutil.copytree(small_bundle, broken)
        where(broken, edit)
        code, _out, err = run_cli(capsys, "create", f"bad{number}", "--bundle", str(broken), "--no-verify")
        assert code == 1 and said in err and "Traceback" not in err, (said, err)
        assert not (isolated / "envs" / f"bad{number}").exists()
    # an unquoted all-zero sha256 in envkit.lock is YAML's 0: refused, not read as "no hash"
    broken = tmp_path / "unquoted"
    shutil.copytree(small_bundle, broken)
    text = (broken / "envkit.lock").read_text()
    real = json.loads((broken / "bundle.json").read_text())["files"][1]["sha256"]
    (broken / "envkit.lock").write_text(text.replace(real, "0" * 64))
    code, _out, err = run_cli(capsys, "create", "bad", "--bundle", str(broken), "--no-verify")
    assert code == 1 and "is not a quoted hex digest" in err, err
    # 1e999 in the manifest (JSON reads it as infinity): a message, no traceback
    text = (small_bundle / "bundle.json").read_text()
    (broken / "bundle.json").write_text(text.replace('"format": 1', '"format": 1e999'))
    code, _out, err = run_cli(capsys, "create", "bad", "--bundle", str(broken), "--no-verify")
    assert code == 1 and "Traceback" not in err and "format" in err, err
    # and the bundle itself installs
    code, _out, err = run_cli(capsys, "create", "good", "--bundle", str(small_bundle), "--no-verify")
    assert code == 0, err
    assert set(installed(isolated / "envs" / "good")) == {"pytorch", "cuda-version"}
    assert not list((isolated.parent / "cache").glob(".envkit-bundle-copy.*"))  # the private copy was removed


def test_an_archive_swapped_after_the_check_is_not_installed(capsys: pytest.CaptureFixture[str], small_bundle: Path,
                                                             isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The swap lands at the worst moment, deterministically: right after envkit copied and hashed the archive.
    The install reads envkit's private copy, so the substitute (another package's archive) never gets in.
    Swapped just before the copy, the hash of what was copied differs: refused."""
    from envkit.lock import bundle as bundle_mod

    torch = small_bundle / "conda" / PKGS[1]
    original = torch.read_bytes()
    substitute = (small_bundle / "conda" / PKGS[0]).read_bytes()
    real_copy = bundle_mod.copy_regular

    def swap_after(source: Path, dest: Path, **kwargs: object) -> str:
        found = real_copy(source, dest, **kwargs)  # type: ignore[arg-type]
        if source.name == torch.name:
            torch.write_bytes(substitute)
        return found

    monkeypatch.setattr(bundle_mod, "copy_regular", swap_after)
    code, _out, err = run_cli(capsys, "create", "swapped", "--bundle", str(small_bundle), "--no-verify")
    assert code == 0, err
    assert torch.read_bytes() == substitute  # the swap did happen
    meta = installed(isolated / "envs" / "swapped")
    assert set(meta) == {"pytorch", "cuda-version"} and meta["pytorch"]["build"] == "cpu_generic_py311_h0_0"
    cache = isolated.parent / "cache" / "pkgs"
    unpacked = next(cache.glob("pytorch-2.13.0-cpu_generic_py311_h0_0*/info/index.json"))
    assert json.loads(unpacked.read_text())["name"] == "pytorch"

    def swap_before(source: Path, dest: Path, **kwargs: object) -> str:
        if source.name == torch.name:
            torch.write_bytes(substitute + b"\0" * (len(original) - len(substitute)))  # same size, other bytes
        return real_copy(source, dest, **kwargs)  # type: ignore[arg-type]

    torch.write_bytes(original)
    monkeypatch.setattr(bundle_mod, "copy_regular", swap_before)
    code, _out, err = run_cli(capsys, "create", "swapped2", "--bundle", str(small_bundle), "--no-verify")
    assert code == 1 and f"corrupt bundle file conda/{PKGS[1]}" in err, err
    assert not (isolated / "envs" / "swapped2").exists()


def test_infinite_numbers_in_a_lock_are_refused_by_create(capsys: pytest.CaptureFixture[str], testbed: TestBed,
                                                          isolated: Path, tmp_path: Path) -> None:
    lock = tmp_path / "inf.lock"
    for bad, said in (("size: .inf", "size is 'inf'"), ("timestamp: 1e999", "timestamp is '1e999'"),
                      ("build_number: -1", "build_number is -1")):
        lock.write_text(lock_text(testbed.url("conda-forge")).replace("  subdir: noarch", f"  {bad}\n  subdir: noarch"))
        code, _out, err = run_cli(capsys, "create", "inf", "--lock", str(lock), "--no-verify")
        assert code == 1 and said in err and "Traceback" not in err, err
        code, _out, err = run_cli(capsys, "bundle", "--lock", str(lock), "-o", str(tmp_path / "b"))
        assert code == 1 and said in err and "Traceback" not in err, err
    assert not (isolated / "envs" / "inf").exists() and not (tmp_path / "b").exists()

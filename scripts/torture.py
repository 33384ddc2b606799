#!/usr/bin/env python3
"""Fault injection for `envkit create` (issue 9): kill it at random points (SIGKILL, SIGINT, SIGTERM),
fill the disk (a small tmpfs in a private mount namespace, as root), corrupt the package cache, and
race two creates of one name; then check what the next command leaves behind.

Prints a table and exits 1 if any bad count is not 0:
  envs lost                      an env that existed (or was completed) is gone or incomplete
  half-made envs under a name    a folder at an env's real name that is not a complete envkit env
  staging left after next cmd    .envkit-* leftovers or lock files once the next command has run
  old envs lost on failed force  a --force that failed took the old env with it
  damaged files linked           a corrupted cache file was linked into a new env
  tracebacks                     a fault ended in a traceback (a signal during interpreter start-up,
                                 before envkit's code runs, is counted as a fault, not here)

  false 'nothing was left behind'  an interrupted command said so while its staging folder was still there
  staging left unnamed by a ...   SIGINT/SIGTERM left a staging folder its message did not name

Kills (SIGKILL, SIGINT, SIGTERM, --kills of each) land during every verb that stages: create, create --lock,
create --bundle, bundle and install (install / uninstall of one package into an existing env; --verbs picks
some); half of them wait until the staging folder exists. After each, the next command of the same kind must
leave no .envkit-* name at all (a SIGKILL's staging is swept); after an install kill the env must be exactly the
one before or the one after (half-applied changes).

Usage: python scripts/torture.py [--short] [--kills N] [--verbs V,...] [--kills-only] [--seed S] [--json F]
(needs the test extra: zstandard). The full run of issue 20 (30 of each signal x 4 verbs = 360 kills,
about 25 minutes on 2 loaded cores):
    python scripts/torture.py --kills 30 --kills-only --json torture.json
--short (a few faults of each kind, well under a minute on 2 cores) is what the test suite runs;
tests/integration/test_create_failures.py runs one kill of each signal per verb.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


@dataclass
class Tally:
    faults: dict[str, int] = field(default_factory=dict)
    bad: dict[str, list[str]] = field(default_factory=lambda: {
        "envs lost": [], "half-made envs under a name": [], "staging left after next cmd": [],
        "old envs lost on failed force": [], "damaged files linked": [], "tracebacks": [],
        "false 'nothing was left behind'": [], "staging left unnamed by a handled signal": [],
        "half-applied changes": []})
    counts: dict[str, list[int]] = field(default_factory=dict)  # what: [times it happened, times checked]

    def count(self, what: str, happened: bool) -> None:
        seen = self.counts.setdefault(what, [0, 0])
        seen[0] += int(happened)
        seen[1] += 1

    def fault(self, kind: str) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1

    def flag(self, what: str, detail: str) -> None:
        self.bad[what].append(detail)


class Bed:
    """One scratch envkit home + cache over the file:// test channel."""

    def __init__(self, work: Path, channel: str, home: Path | None = None) -> None:
        from testbed.channel import PY

        self.py = PY
        self.home = home or work / "home"
        self.envs = self.home / "envs"
        self.cache = work / "cache"
        self.channel = channel
        self.bundles = self.home / "bundles"  # where `envkit bundle -o` writes (its staging goes beside)
        self.lock_file = work / "victim.lock"  # create --lock installs this
        self.bundle_dir = work / "victim-bundle"  # create --bundle installs this
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVKIT_", "CONDA_", "MAMBA_"))}
        self.env.update(ENVKIT_HOME=str(self.home), ENVKIT_CACHE_DIR=str(self.cache), HOME=str(work),
                        PIP_CONFIG_FILE=os.devnull)

    def argv(self, name: str, *extra: str) -> list[str]:
        return [sys.executable, "-m", "envkit", "create", name, "--spec", "minimal", "--cuda", "13.0", "--python",
                self.py, "--channel", self.channel, "--no-verify", "-q", *extra]

    def verb_argv(self, verb: str, name: str, *extra: str) -> list[str]:
        quiet = [sys.executable, "-m", "envkit"]
        if verb == "create":
            return self.argv(name, *extra)
        if verb == "create-lock":
            return [*quiet, "create", name, "--lock", str(self.lock_file), "--no-verify", "-q", *extra]
        if verb == "create-bundle":
            return [*quiet, "create", name, "--bundle", str(self.bundle_dir), "--no-verify", "-q", *extra]
        assert verb == "bundle", verb
        return [*quiet, "bundle", name, "--spec", "minimal", "--cuda", "13.0", "--python", self.py, "--channel",
                self.channel, "-o", str(self.bundles / name), *extra]

    def envkit(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "envkit", *args], env=self.env, capture_output=True, text=True,
                              timeout=300)

    def verb(self, verb: str, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.verb_argv(verb, name, *extra), env=self.env, capture_output=True, text=True,
                              timeout=300)

    def start_verb(self, verb: str, name: str, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.verb_argv(verb, name, *extra), env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)

    def run(self, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(name, *extra), env=self.env, capture_output=True, text=True, timeout=300)

    def start(self, name: str, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(name, *extra), env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)


def complete(prefix: Path) -> bool:
    return ((prefix / ".envkit" / "owner.json").is_file() and (prefix / ".envkit" / "create.json").is_file()
            and (prefix / "conda-meta" / "history").is_file()
            and (prefix / "conda-meta" / "history").stat().st_size > 0 and (prefix / "bin" / "python").exists())


def audit(bed: Bed, tally: Tally, label: str, must_exist: list[str]) -> None:
    """After a completed command: every name is a complete env; no leftovers; nothing expected is gone."""
    names = sorted(p.name for p in bed.envs.iterdir()) if bed.envs.exists() else []
    for name in names:
        if name.startswith("."):
            tally.flag("staging left after next cmd", f"{label}: {name}")
        elif not complete(bed.envs / name):
            tally.flag("half-made envs under a name", f"{label}: {name}")
    from envkit.engines.cache_sweep import leftover_temps

    for temp in leftover_temps(bed.cache / "pkgs"):  # rattler's own, from a kill mid-extract
        tally.flag("staging left after next cmd", f"{label}: cache {temp.name}")
    for name in must_exist:
        if not complete(bed.envs / name):
            tally.flag("envs lost", f"{label}: {name}")


def next_command(bed: Bed, tally: Tally, label: str, counter: list[int]) -> None:
    counter[0] += 1
    done = bed.run(f"probe{counter[0]}")
    if done.returncode != 0:
        tally.flag("envs lost", f"{label}: the next create failed: {done.stderr.strip()[-300:]}")


VERBS = ("create", "create-lock", "create-bundle", "bundle", "install")
INTERRUPTED = "nothing half-made was left behind"
STAGING_NAMES = (".envkit-staging", ".envkit-bundle")  # the second: the name bundle staging had before issue 20


def prepare_sources(bed: Bed) -> None:
    """What create --lock and create --bundle install from: a lock of the victim env and a bundle of it."""
    bed.envs.mkdir(parents=True, exist_ok=True)
    done = bed.envkit("export", "victim", "--format", "lock", "-o", str(bed.lock_file))
    assert done.returncode == 0, done.stderr
    done = bed.envkit("bundle", "victim", "-o", str(bed.bundle_dir))
    assert done.returncode == 0, done.stderr


def leftovers(folder: Path) -> list[str]:
    """envkit's own names (staging folders, their locks, target locks) in `folder`."""
    try:
        return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))
    except FileNotFoundError:
        return []


def kills(bed: Bed, tally: Tally, rng: random.Random, per_signal: int, verbs: tuple[str, ...] = ("create",)) -> None:
    """SIGKILL, SIGINT and SIGTERM at a random moment of each verb; SIGINT/SIGTERM must leave nothing (or say
    what stays), and after the next command of the same kind nothing at all may be left."""
    if not (bed.envs / "victim").exists():
        assert bed.run("victim").returncode == 0
    if any(v in ("create-lock", "create-bundle") for v in verbs):
        prepare_sources(bed)
    counter = [0]
    for verb in verbs:
        start = time.perf_counter()
        first = bed.verb(verb, f"timing-{verb}")
        assert first.returncode == 0, first.stderr
        span = time.perf_counter() - start
        where = bed.bundles if verb == "bundle" else bed.envs
        for sig in (signal.SIGKILL, signal.SIGINT, signal.SIGTERM):
            for i in range(per_signal):
                force = verb != "bundle" and i % 2 == 0
                name = "victim" if force else f"new-{verb}-{sig.name}-{i}"
                label = f"{verb} {sig.name} #{i}"
                if not complete(bed.envs / "victim"):  # flagged by the audit before: make it again
                    shutil.rmtree(bed.envs / "victim", ignore_errors=True)
                    assert bed.run("victim").returncode == 0
                (bed.envs / "victim" / "keep.txt").write_text("old")
                proc = bed.start_verb(verb, name, *(["--force"] if force else []))
                if i % 2:  # half of the kills land while the staging folder exists: wait for it, then a bit more
                    deadline = time.perf_counter() + span * 2
                    while proc.poll() is None and time.perf_counter() < deadline and not any(
                            n.startswith(STAGING_NAMES) for n in leftovers(where)):
                        time.sleep(0.001)
                    time.sleep(rng.uniform(0, 0.01 if verb == "bundle" else span * 0.2))  # bundle's is brief
                else:
                    time.sleep(rng.uniform(0.05, span * 1.1))
                err = kill_and_read(proc, sig, verb, label, tally, where)
                left = [n for n in leftovers(where) if n.startswith(STAGING_NAMES)]
                if left and INTERRUPTED in err:
                    tally.flag("false 'nothing was left behind'", f"{label}: {left}")
                if left and sig != signal.SIGKILL and not all(n.split(".lock")[0] in err for n in left):
                    tally.flag("staging left unnamed by a handled signal", f"{label}: {left}: {err.strip()[-200:]}")
                tally.count(f"{verb} {sig.name} left staging right after", bool(left))
                counter[0] += 1
                if verb == "bundle":
                    done = bed.verb("bundle", f"probe{counter[0]}")
                    if done.returncode != 0:
                        tally.flag("envs lost", f"{label}: the next bundle failed: {done.stderr.strip()[-300:]}")
                    audit_bundles(bed, tally, label)
                else:
                    next_command(bed, tally, label, counter)
                audit(bed, tally, label, ["victim"])


CHANGED = "tqdm"  # the package install / uninstall kills add and take away (a noarch one of the test bed)


def applied(prefix: Path) -> bool | None:
    """True / False: the change is all there / not at all; None: half of it (a record without its files or the
    reverse): an env that is neither the one before nor the one after."""
    record = any(prefix.glob(f"conda-meta/{CHANGED}-*.json"))
    files = any(prefix.glob(f"lib/python*/site-packages/{CHANGED}_standin/__init__.py"))
    return record if record == files else None


def kill_and_read(proc: subprocess.Popen[str], sig: signal.Signals, verb: str, label: str, tally: Tally,
                  where: Path) -> str:
    """Send `sig`, wait for the process (killed after 60 s) and count what it did; its stderr. A traceback is a
    finding, unless the signal came before envkit ran: an import, or runpy still finding `python -m envkit`'s
    package (seed 31, create SIGINT #4: only <frozen runpy> frames, no envkit one), which is Python's own."""
    staged = any(n.startswith(STAGING_NAMES) for n in leftovers(where))
    proc.send_signal(sig)
    tally.count(f"{verb} {sig.name} while staging existed", staged)
    try:
        _out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        tally.flag("staging left after next cmd", f"{label}: it did not stop within 60 s")
    tally.fault(f"{verb} {sig.name}")
    err = err or ""
    if os.environ.get("ENVKIT_TORTURE_VERBOSE"):
        print(f"{label}: rc {proc.returncode}: {err.strip()[-300:]}", file=sys.stderr)
    if "Traceback" in err:
        if "in <module>" in err or "importlib._bootstrap" in err or (
                "<frozen runpy>" in err and "/envkit/" not in err):
            tally.fault(f"{sig.name} during interpreter start-up")
        else:
            tally.flag("tracebacks", f"{label}: {err[-300:]}")
    return err


def install_kills(bed: Bed, tally: Tally, rng: random.Random, per_signal: int) -> None:
    """SIGKILL, SIGINT and SIGTERM at a random moment of `envkit install victim tqdm` or `uninstall` (whichever
    applies): the env must stay complete and be exactly the one before or the one after, never half of each;
    the user's own file in it survives; the next install leaves no .envkit-* name."""
    if not (bed.envs / "victim").exists():
        assert bed.run("victim").returncode == 0

    def change(verb: str) -> list[str]:
        return [sys.executable, "-m", "envkit", verb, "victim", CHANGED, "--yes", "--json"]

    start = time.perf_counter()
    for verb in ("install", "uninstall"):
        done = subprocess.run(change(verb), env=bed.env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    span = (time.perf_counter() - start) / 2
    for sig in (signal.SIGKILL, signal.SIGINT, signal.SIGTERM):
        for i in range(per_signal):
            victim = bed.envs / "victim"
            verb = "uninstall" if applied(victim) else "install"
            label = f"install {sig.name} #{i} ({verb})"
            (victim / "keep.txt").write_text("mine")
            proc = subprocess.Popen(change(verb), env=bed.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True)
            if i % 2:  # half of the kills land while the staging clone exists
                deadline = time.perf_counter() + span * 2
                while proc.poll() is None and time.perf_counter() < deadline and not any(
                        n.startswith(STAGING_NAMES) for n in leftovers(bed.envs)):
                    time.sleep(0.001)
                time.sleep(rng.uniform(0, span * 0.2))
            else:
                time.sleep(rng.uniform(0.05, span * 1.1))
            err = kill_and_read(proc, sig, "install", label, tally, bed.envs)
            if not complete(victim) or not (victim / "keep.txt").is_file():
                tally.flag("envs lost", f"{label}: the env is incomplete or lost the user's file")
            elif applied(victim) is None:
                tally.flag("half-applied changes", f"{label}: {CHANGED} half there")
            left = [n for n in leftovers(bed.envs) if n.startswith(STAGING_NAMES)]
            if left and INTERRUPTED in err:
                tally.flag("false 'nothing was left behind'", f"{label}: {left}")
            if left and sig != signal.SIGKILL and not all(n.split(".lock")[0] in err for n in left):
                tally.flag("staging left unnamed by a handled signal", f"{label}: {left}: {err.strip()[-200:]}")
            tally.count(f"install {sig.name} left staging right after", bool(left))
            done = subprocess.run(change("install"), env=bed.env, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                tally.flag("envs lost", f"{label}: the next install failed: {done.stderr.strip()[-300:]}")
            audit(bed, tally, label, ["victim"])


def audit_bundles(bed: Bed, tally: Tally, label: str) -> None:
    """Every bundle folder is complete (its manifest written last, by a rename); no staging is left."""
    for name in leftovers(bed.bundles):
        tally.flag("staging left after next cmd", f"{label}: bundles/{name}")
    for folder in bed.bundles.iterdir() if bed.bundles.exists() else []:
        if not folder.name.startswith(".") and not (folder / "bundle.json").is_file():
            tally.flag("half-made envs under a name", f"{label}: bundles/{folder.name} has no manifest")


def corrupt_cache(bed: Bed, tally: Tally, rng: random.Random, rounds: int) -> None:
    pkgs = bed.cache / "pkgs"
    for i in range(rounds):
        files = [(entry, item) for entry in sorted(pkgs.iterdir()) if entry.is_dir() and not entry.name.startswith(".")
                 for item in json.loads((entry / "info" / "paths.json").read_text())["paths"]
                 if item.get("path_type", "hardlink") == "hardlink" and item.get("size_in_bytes")
                 and "prefix_placeholder" not in item]  # those are rewritten while linking
        entry, item = rng.choice(files)
        cached = entry / item["_path"]
        mode = rng.choice(["truncate", "delete", "flip"])
        data = cached.read_bytes()
        cached.unlink()  # never edit through a hardlink into the envs
        if mode == "truncate":
            cached.write_bytes(data[: len(data) // 2])
        elif mode == "flip" and data:
            cached.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])
        tally.fault("cache corrupted")
        name = f"cache{i}"
        done = bed.run(name)
        if done.returncode != 0:
            tally.flag("envs lost", f"cache {mode}: create failed: {done.stderr.strip()[-300:]}")
            continue
        linked = bed.envs / name / item["_path"]
        if linked.exists() and linked.read_bytes() != data:
            tally.flag("damaged files linked", f"cache {mode}: {item['_path']} in {name}")
        audit(bed, tally, f"cache {mode}", ["victim"])


def races(bed: Bed, tally: Tally, rounds: int) -> None:
    counter = [100]
    for i in range(rounds):
        name = f"race{i}"
        procs = [bed.start(name), bed.start(name)]
        results = [p.communicate(timeout=300) for p in procs]
        tally.fault("race of two creates")
        codes = sorted(p.returncode for p in procs)
        loser = next((err for p, (_o, err) in zip(procs, results) if p.returncode == 1), "")
        if codes != [0, 1] or "already exists" not in loser:
            tally.flag("envs lost", f"race {i}: exit codes {codes}: {loser.strip()[-200:]}")
        procs = [bed.start("victim", "--force"), bed.start("victim", "--force")]
        results = [p.communicate(timeout=300) for p in procs]
        tally.fault("race of two --force")
        if any(p.returncode != 0 for p in procs):
            tally.flag("envs lost", f"force race {i}: " + " | ".join(e.strip()[-200:] for _o, e in results))
        next_command(bed, tally, f"race {i}", counter)
        audit(bed, tally, f"race {i}", ["victim", name])


def disk_full_child(work: Path, channel: str, rounds: int, seed: int) -> int:
    """Runs inside `unshare -m`, with a small tmpfs mounted at <work>/home: writes a JSON tally."""
    rng = random.Random(seed)
    tally = Tally()
    bed = Bed(work, channel)
    filler = bed.home / "filler"
    assert bed.run("victim").returncode == 0, "victim"
    counter = [200]
    for i in range(rounds):
        (bed.envs / "victim" / "keep.txt").write_text("old")
        free = rng.choice([0, 4, 8, 16, 32, 64]) * 1024
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)  # fill the disk, then give `free` back
        try:
            while os.write(fd, b"\0" * 65536):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        size = filler.stat().st_size
        os.truncate(filler, max(0, size - free))
        force = i % 2 == 0
        done = bed.run("victim" if force else f"full{i}", *(["--force"] if force else []))
        if os.environ.get("ENVKIT_TORTURE_VERBOSE"):
            print(f"disk full #{i} free={free} rc={done.returncode}: {done.stderr.strip()[-400:]}", file=sys.stderr)
        tally.fault("disk full" if done.returncode else "disk full (create still fit)")
        if "Traceback" in done.stderr:
            tally.flag("tracebacks", f"disk full #{i}: {done.stderr[-300:]}")
        leftovers = [p.name for p in bed.envs.iterdir() if p.name.startswith(".")]
        if leftovers:  # a failure (not a kill) removes its own staging folder before it prints
            tally.flag("staging left after next cmd", f"disk full #{i}: the failed create left {leftovers}"
                       + (" while saying nothing was left behind" if "nothing was left behind" in done.stderr else ""))
        if force and done.returncode != 0 and not (bed.envs / "victim" / "keep.txt").is_file():
            tally.flag("old envs lost on failed force", f"disk full #{i} (free {free}): {done.stderr[-200:]}")
        filler.unlink()
        next_command(bed, tally, f"disk full #{i}", counter)
        audit(bed, tally, f"disk full #{i}", ["victim"])
    (work / "tally.json").write_text(json.dumps({"faults": tally.faults, "bad": tally.bad}))
    return 0


def disk_full(work: Path, channel: str, tally: Tally, rounds: int, seed: int) -> str | None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "disk full: skipped (needs root and unshare for a private tmpfs)"
    (work / "home").mkdir(parents=True)
    script = ('mount -t tmpfs -o size=2m envkit-torture "$1/home" && exec "$2" "$3" --disk-full-child "$1" '
              '--channel "$4" --rounds "$5" --seed "$6"')
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(work),
                           sys.executable, __file__, channel, str(rounds), str(seed)],
                          capture_output=True, text=True, timeout=600)
    if os.environ.get("ENVKIT_TORTURE_VERBOSE"):
        print(done.stderr, file=sys.stderr)
    result = work / "tally.json"
    if done.returncode != 0 or not result.exists():
        return f"disk full: skipped (private tmpfs not available: {done.stderr.strip()[-300:]})"
    data = json.loads(result.read_text())
    for kind, count in data["faults"].items():
        tally.faults[kind] = tally.faults.get(kind, 0) + count
    for what, items in data["bad"].items():
        tally.bad[what] += items
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="a few faults of each kind (the CI mode)")
    parser.add_argument("--kills", type=int, default=None, help="kills per signal (default 30; --short 2)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--verbs", default=None, help=f"comma-separated verbs to kill ({','.join(VERBS)}; "
                        "default: all, --short: create)")
    parser.add_argument("--kills-only", action="store_true", help="only the kills (no cache, race, disk-full)")
    parser.add_argument("--json", type=Path, default=None, help="also write the tally as JSON to this file")
    parser.add_argument("--disk-full-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--channel", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    if args.disk_full_child:
        return disk_full_child(args.disk_full_child, args.channel, args.rounds, seed)
    from testbed.channel import build_testbed, test_venv_site

    per_signal = args.kills if args.kills is not None else (2 if args.short else 30)
    rounds = 2 if args.short else 10
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="envkit-torture-"))
    started = time.perf_counter()
    try:
        bed_root = build_testbed(work / "bed", host_site=test_venv_site())
        channel = bed_root.url("conda-forge")
        tally = Tally()
        bed = Bed(work / "main", channel)
        verbs = tuple(args.verbs.split(",")) if args.verbs else (("create",) if args.short else VERBS)
        unknown = [v for v in verbs if v not in VERBS]
        if unknown:
            parser.error(f"unknown verb {unknown[0]!r}: use {', '.join(VERBS)}")
        kills(bed, tally, rng, per_signal, tuple(v for v in verbs if v != "install"))
        if "install" in verbs:
            install_kills(bed, tally, rng, per_signal)
        skipped = None
        if not args.kills_only:
            corrupt_cache(bed, tally, rng, rounds)
            races(bed, tally, 1 if args.short else 5)
            skipped = disk_full(work / "disk", channel, tally, rounds, seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"envkit torture (seed {seed}, {time.perf_counter() - started:.0f} s)")
    injected = sum(v for k, v in tally.faults.items() if "start-up" not in k and "still fit" not in k)
    print(f"{'faults injected':32s} {injected:5d}   "
          + ", ".join(f"{k} {v}" for k, v in tally.faults.items()))
    for what, items in tally.bad.items():
        print(f"{what:48s} {len(items):5d}   (must be 0)")
    for what, (happened, checked) in tally.counts.items():
        print(f"{what:48s} {happened:5d}   of {checked}")
    if args.json:
        args.json.write_text(json.dumps({"seed": seed, "faults": tally.faults, "bad": tally.bad,
                                         "counts": tally.counts}, indent=1))
    if skipped:
        print(skipped)
    failed = [item for items in tally.bad.values() for item in items]
    for item in failed[:20]:
        print(f"  bad: {item}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Bad-input generator: every verb, option, environment variable and input-file kind, fed garbage.

Each generated case asserts what issue 9 promises: no traceback (and no "internal error", which
would mean a root cause was papered over by the crash boundary), exit 1 or 2, one error line
followed by a fix, in under 5 s and 500 MB. Most cases run in-process through the real entry
point (`cli._run`: fast); the hostile file kinds (FIFO, /dev/urandom, /dev/zero, YAML bombs,
oversized files) also run as real subprocesses, where wall time and peak RSS are measured by the
kernel (wait4), and an address-space limit stops a regression from taking the machine down.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import run_cli
from testbed.channel import PY
from testbed.server import ChannelServer

LIMIT_S = 5.0
LIMIT_MB = 500

BOMB = (b'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + b"".join(f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n".encode()
                   for p, c in zip("abcdefgh", "bcdefghi")))

# file kind -> content (bytes), or a marker for something that is not a regular file
KINDS: dict[str, bytes | str] = {
    "bomb": BOMB,
    "deep": b"a: " + b"[" * 200 + b"]" * 200 + b"\n",
    "deeper": b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "deep-map": b"".join(b"  " * i + b"k:\n" for i in range(300)) + b"  " * 300 + b"x\n",
    "latin1": b"name: caf\xe9\ndependencies: [numpy]\n",
    "utf16": "name: x\ndependencies: [numpy]\n".encode("utf-16"),
    "utf16-nobom": "name: x\ndependencies: [numpy]\n".encode("utf-16-le"),
    "binary": bytes(range(256)) * 16,
    "empty": b"",
    "list-top": b"- a\n- b\n",
    "scalar-top": b"42\n",
    "bad-yaml": b"name: [unclosed\n",
    "tabs": b"name:\n\t- x\n",
    "python-tag": b"!!python/object/apply:os.system ['echo pwned']\n",
    "name-int": b"name: 5\ndependencies: [numpy]\n",
    "name-list": b"name: [a, b]\ndependencies: [numpy]\n",
    "name-date": b"name: 2024-01-01\ndependencies: [numpy]\n",
    "bigint": b"name: " + b"9" * 5000 + b"\n",
    "deps-map": b"dependencies: {a: 1}\n",
    "dep-nested": b"dependencies: [[1, 2]]\n",
    "channels-int": b"channels: 5\ndependencies: [numpy]\n",
    "channel-map": b"channels: [{a: 1}]\ndependencies: [numpy]\n",
    "pip-int": b"dependencies: [python, {pip: 5}]\n",
    "pip-template": b"dependencies: [python, {pip: ['{{ evil }}']}]\n",
    "variables-list": b"variables: [1]\ndependencies: [numpy]\n",
    "unhashable-key": b"? [a, b]\n: 1\n",
    "explicit-garbage": b"@EXPLICIT\ngarbage line here\n",
    "explicit-no-subdir": b"@EXPLICIT\nhttps://example.invalid/x.conda\n",
    "huge": "huge",  # a 20 MiB sparse file
    "zero": "/dev/zero",
    "urandom": "/dev/urandom",
    "fifo": "fifo",
    "folder": "folder",
    "dangling": "dangling",
    "missing": "missing",
}
# issue 20: metadata of valid JSON whose fields have the wrong type; doctor reads it as a finding about that env
TYPED: dict[str, dict[str, object]] = {
    "files-int": {"name": "e", "files": 5},
    "depends-int": {"name": "e", "depends": 5},
    "depends-str": {"name": "e", "depends": "python >=3"},
    "paths-int": {"name": "e", "paths_data": {"paths": 5}},
    "paths-items": {"name": "e", "paths_data": {"paths": [5, "x", None]}},
    "name-list": {"name": [1], "version": {}, "build": []},
    "machine-list": {"name": "e", "machine": [], "selection": {"torch": 5}},
    "gpus-int": {"name": "e", "machine": {"gpus": 5, "driver": 5}},
    "selection-int": {"name": "e", "selection": 5, "cuda_override": [1]},
    "fields-mixed": {"name": "e", "selection": {"torch": [], "python": {}, "cuda": 5, "variant": True},
                     "outcome": [], "time": 5, "cuda": "x"},
}
HOSTILE = {"bomb", "deeper", "huge", "zero", "urandom", "fifo"}
NEEDS_SUBPROCESS = {"urandom", "fifo"}  # would hang an in-process run if the bound ever regressed
SUBPROCESS_SLOTS = {"render-from", "create-lock", "config-detect", "specpath-list", "state-run", "record-doctor",
                    "owner-remove"}
# a name that is not a string: adapt falls back to the file's name (a torch-free file passes through)
NAME_LENIENT = {"name-int", "name-list", "name-date"}
# text envkit reads as conda and pip do: UTF-16 with its BOM (Windows PowerShell's `conda env export > file`)
READABLE = {"utf16"}
# what a config file may legitimately be: empty or absent; an environment file's keys (name:, channels:, ...) are
# unknown config keys, each an error naming its line (envkit/config.py KEYS)
CONFIG_LENIENT = {"empty", "missing"}


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    ok: bool = False  # exit 0 is a correct answer too (a lenient slot: e.g. list shows a broken env)
    expect: str = ""  # text that must appear in the output
    sub: bool = False  # also run as a real subprocess
    codes: tuple[int, ...] = ()  # other exit codes that are a verdict, not a failure (doctor: 5 = problems found)

    def __str__(self) -> str:
        return self.id


def write_kind(path: Path, kind: str) -> Path:
    content = KINDS[kind]
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "huge":
        with path.open("wb") as handle:
            handle.truncate(20 * 1024 * 1024)
    elif content.startswith("/dev/"):
        path.symlink_to(content)
    elif content == "fifo":
        os.mkfifo(path)
    elif content == "folder":
        path.mkdir()
    elif content == "dangling":
        path.symlink_to(path.parent / "no-such-target")
    return path


def file_cases() -> list[Case]:
    cases: list[Case] = []
    for kind in KINDS:
        sub = kind in HOSTILE
        only_sub = kind in NEEDS_SUBPROCESS
        spec_ok = kind in ("empty",)
        slots: list[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...], bool, str]] = [
            ("render-from", ("render", "--from", "{W}/files/" + kind + ".yml"), (),
             kind in NAME_LENIENT or kind in READABLE, ""),
            ("create-file", ("create", "n1", "--file", "{W}/files/" + kind + ".yml", "--dry-run"), (), False, ""),
            ("create-noadapt", ("create", "n1", "--file", "{W}/files/" + kind + ".yml", "--no-adapt", "--dry-run"),
             (), False, ""),
            ("render-spec", ("render", "--spec", "{W}/files/" + kind + ".yaml"), (), spec_ok, ""),
            ("lock-file", ("lock", "--file", "{W}/files/" + kind + ".yml", "--platform", "linux-64", "-o",
                           "{W}/out-never.lock"), (), False, ""),
            ("bundle-create", ("create", "n1", "--bundle", "{W}/bundles/" + kind, "--dry-run"), (), False, ""),
            ("create-spec", ("create", "n1", "--spec", "{W}/files/" + kind + ".yaml", "--dry-run"), (), spec_ok, ""),
            ("create-lock", ("create", "n1", "--lock", "{W}/files/" + kind + ".lock", "--dry-run"), (), False, ""),
            ("config-detect", ("detect", "--cuda", "cpu"), (("ENVKIT_CONFIG", "{W}/files/" + kind + ".cfg"),),
             kind in CONFIG_LENIENT, ""),
            ("config-render", ("render", "minimal", "--cuda", "cpu"), (("ENVKIT_CONFIG", "{W}/files/" + kind + ".cfg"),),
             kind in CONFIG_LENIENT, ""),
            ("specpath-render", ("render", "x", "--cuda", "cpu"), (("ENVKIT_SPEC_PATH", "{W}/specdirs/" + kind),),
             spec_ok, ""),
            ("specpath-list", ("list",), (("ENVKIT_SPEC_PATH", "{W}/specdirs/" + kind),), True,
             "" if kind in ("empty", "missing") else "invalid"),
            ("createjson-list", ("list",), (("ENVKIT_HOME", "{W}/homes/createjson-" + kind),), True,
             "" if kind == "missing" else "unreadable"),
            ("verifyjson-list", ("list",), (("ENVKIT_HOME", "{W}/homes/verifyjson-" + kind),), True,
             "" if kind == "missing" else "unreadable"),
            ("state-run", ("run", "e1", "--", "true"), (("ENVKIT_HOME", "{W}/homes/state-" + kind),),
             kind == "missing", ""),
            ("state-export", ("export", "e1"), (("ENVKIT_HOME", "{W}/homes/state-" + kind),), kind == "missing", ""),
            ("state-activate", ("activate", "e1"), (("ENVKIT_HOME", "{W}/homes/state-" + kind),), True, ""),
            ("createjson-kernel", ("kernel", "e1"), (("ENVKIT_HOME", "{W}/homes/createjson-" + kind),), True, ""),
            ("createjson-doctor", ("doctor", "e1"), (("ENVKIT_HOME", "{W}/homes/createjson-" + kind),), True, ""),
            ("owner-remove", ("remove", "e1", "--yes"), (("ENVKIT_HOME", "{W}/homes/owner-" + kind),), False, ""),
            ("state-doctor", ("doctor", "e1"), (("ENVKIT_HOME", "{W}/homes/state-" + kind),), True, ""),
            ("record-doctor", ("doctor", "e1", "--json"), (("ENVKIT_HOME", "{W}/homes/record-" + kind),), True, ""),
            ("record-export", ("export", "e1"), (("ENVKIT_HOME", "{W}/homes/record-" + kind),), kind == "missing", ""),
            ("record-export-lock", ("export", "e1", "--format", "lock"), (("ENVKIT_HOME", "{W}/homes/record-" + kind),),
             kind == "missing", ""),
            ("history-export", ("export", "e1", "--from-history"), (("ENVKIT_HOME", "{W}/homes/history-" + kind),),
             kind not in HOSTILE and kind not in ("folder", "dangling"), ""),
        ]
        for slot, argv, env, ok, expect in slots:
            use_sub = sub and slot in SUBPROCESS_SLOTS
            if (only_sub and not use_sub) or (ok and slot == "create-spec") or (
                    kind in NAME_LENIENT and slot in ("create-file", "lock-file")) or (
                    kind in READABLE and slot in ("create-file", "create-noadapt", "lock-file")):
                continue  # (a valid spec or file would go on to solve against the real channels)
            codes = (5,) if argv[0] == "doctor" else ()
            cases.append(Case(f"file-{slot}-{kind}", argv, env, ok, expect, use_sub, codes))
    return cases


NAMES = ["../x", "a/b", "base", "x\n", "-rf", "a" * 300, ".hidden", "a b", "é", "a\0b"]
MIRRORS = ["htps://user:PW-SECRET@host", "ftp://user:PW-SECRET@host/x", "http://user:PW SECRET@host",
           "user:PW-SECRET@host/x", "htps://host/t/TK-SECRET/x", "nope", "http://", "http://a b",
           "https://host/{{x}}", "file:", "javascript:alert(1)", " ", "tuna\n"]
CUDA = ["abc", "13", "13.0.1", "13.0\n", "1e5", "-1", "12.x", " 13.0", "cpu\n", "130", "\u0661\u0662.\u0664"]
TORCH = ["2.5.1.2.3.4", "abc", ">=x", "2.5\n", "==", ">=2.4,<", "1" * 400, "2.5; rm -rf /", "99.0", " ", "",
         "\u0662.\u0665", ">=\u0662"]
PYTHON = ["2.7", "3", "abc", "3.11\n", "3.11.1.1", "4.0"]
DRIVER = ["abc", "1.2", "550.54.15\n", "99999.1", "550", "\u0665\u0665\u0660.54.15"]
CC = ["abc", "99.0", "8.6.1", "2.0", "8.6\n", "-8.6", "\u0668.\u0666"]
TIMEOUT = ["nan", "inf", "-inf", "1e308", "0", "-5", "abc", "0.1"]
OVERRIDE = ["abc", "1e5", "-1", "12.x", "1" * 50, "12.4.1.1", "12 4", "\u0661\u0662.\u0664"]  # conda strips it, so "12.4\n" is valid
INDEX = ["not a url", "http://x\nfoo", "ftp://x", "http://x/{{y}}", "http://x'y", "file:", "garbage", "http://x y"]
CONFIG_VALUES = {
    "cuda": ["[1]", "{a: 1}", "true", "abc", "'13.0\\n'"],
    "torch": ["[1]", "{a: 1}", "true", "2.5.1.2.3.4"],
    "flavor": ["[1]", "7", "nope", "true"],
    "mirror": ["[1]", "{a: 1}", "htps://u:PW-SECRET@h", "true"],
    "engine": ["[1]", "nope", "5"],
    "pytorch_index": ["[1]", "'not a url'", "{a: 1}"],
    "sharded_repodata": ["'yes'", "[1]", "5"],
    "mirrors": ["5", "[1]", "{x: 5}", "{x: {conda: 5}}", "{x: {conda: {a: [1]}}}", "{x: {conda: {}, pypi: [1]}}"],
}


def option_cases() -> list[Case]:
    cases: list[Case] = []
    sel_verbs = {"detect": ("detect",), "render": ("render", "minimal"), "create": ("create", "n1", "--dry-run")}
    for verb, base in sel_verbs.items():
        for i, v in enumerate(CUDA):
            cases.append(Case(f"opt-{verb}-cuda-{i}", (*base, "--cuda", v)))
        for i, v in enumerate(TORCH):
            cases.append(Case(f"opt-{verb}-torch-{i}", (*base, "--cuda", "cpu", "--torch", v)))
        for i, v in enumerate(PYTHON):
            cases.append(Case(f"opt-{verb}-python-{i}", (*base, "--cuda", "cpu", "--python", v)))
        for i, v in enumerate(DRIVER):
            cases.append(Case(f"opt-{verb}-driver-{i}", (*base, "--driver-version", v)))
        for i, v in enumerate(CC):
            cases.append(Case(f"opt-{verb}-cc-{i}", (*base, "--compute-capability", v)))
        cases.append(Case(f"opt-{verb}-flavor", (*base, "--flavor", "nope")))
        for i, v in enumerate(OVERRIDE):
            cases.append(Case(f"env-{verb}-override-{i}", base, (("CONDA_OVERRIDE_CUDA", v),)))
        for var, values in (("ENVKIT_CUDA", CUDA[:5]), ("ENVKIT_FLAVOR", ["nope", ""]),
                            ("ENVKIT_HOME", ["{W}/files/empty.yml"]),
                            ("ENVKIT_CONFIG", ["{W}/files/bomb.yml", "{W}/folder-config"])):
            for i, v in enumerate(values):
                if v == "":
                    continue
                cases.append(Case(f"env-{verb}-{var}-{i}", (*base, "--cuda", "cpu") if var != "ENVKIT_CUDA" else base,
                                  ((var, v),), ok=var == "ENVKIT_HOME" and verb != "create"))
        for key, values in CONFIG_VALUES.items():
            for i, v in enumerate(values):
                cases.append(Case(f"config-{verb}-{key}-{i}", (*base, "--cuda", "cpu"),
                                  (("ENVKIT_CONFIG", "{W}/configs/" + f"{key}-{i}.yaml"),),
                                  ok=verb == "detect" and key not in ("cuda", "torch", "flavor")))
    for verb, base in (("render", ("render", "minimal", "--cuda", "cpu")),
                       ("create", ("create", "n1", "--cuda", "cpu", "--dry-run"))):
        for i, v in enumerate(MIRRORS):
            cases.append(Case(f"opt-{verb}-mirror-{i}", (*base, "--mirror", v)))
            cases.append(Case(f"env-{verb}-ENVKIT_MIRROR-{i}", base, (("ENVKIT_MIRROR", v),)))
        for i, v in enumerate(INDEX):
            cases.append(Case(f"env-{verb}-index-{i}", (*base, "--flavor", "pip"), (("ENVKIT_PYTORCH_INDEX", v),)))
            cases.append(Case(f"env-{verb}-index-cpu-{i}", base, (("ENVKIT_PYTORCH_INDEX", v),)))
        named = ("render", "x", "--cuda", "cpu") if verb == "render" else ("create", "n1", "--spec", "x", "--dry-run")
        cases.append(Case(f"env-{verb}-specpath-zero", named, (("ENVKIT_SPEC_PATH", "/dev/zero"),)))
    for i, v in enumerate(NAMES):
        cases.append(Case(f"name-create-{i}", ("create", v, "--cuda", "cpu", "--dry-run")))
        cases.append(Case(f"name-render-{i}", ("render", "minimal", "--cuda", "cpu", "--name", v)))
        for verb in ("verify", "export", "run", "remove", "activate", "kernel", "shell", "doctor"):
            extra = ("--", "true") if verb == "run" else ("--yes",) if verb == "remove" else ()
            cases.append(Case(f"name-{verb}-{i}", (verb, v, *extra)))
    create = ("create", "n1", "--cuda", "cpu", "--dry-run")
    cases += [
        Case("create-engine", (*create, "--engine", "nope")),
        Case("create-env-engine", create, (("ENVKIT_ENGINE", "nope"),)),
        Case("create-channel-template", (*create, "--channel", "{{x}}")),
        Case("create-channel-space", (*create, "--channel", "a b")),
        Case("create-channel-ftp", (*create, "--channel", "ftp://user:PW-SECRET@h/x")),
        Case("create-prefix-file", ("create", "n1", "--cuda", "cpu", "--prefix", "{W}/files/empty.yml", "--force")),
        Case("create-prefix-file-noforce", ("create", "n1", "--cuda", "cpu", "--prefix", "{W}/files/empty.yml")),
        Case("create-prefix-dangling", ("create", "n1", "--cuda", "cpu", "--prefix", "{W}/dangling-prefix")),
        Case("create-prefix-under-file", ("create", "n1", "--cuda", "cpu", "--prefix", "{W}/files/empty.yml/env")),
        Case("create-cache-file", ("create", "n1", "--cuda", "cpu"), (("ENVKIT_CACHE_DIR", "{W}/files/empty.yml"),)),
        Case("create-home-file", ("create", "n1", "--cuda", "cpu"), (("ENVKIT_HOME", "{W}/files/empty.yml"),)),
        Case("create-lock-and-engine", ("create", "n1", "--lock", "{W}/files/empty.yml", "--engine", "conda")),
        Case("create-file-missing", ("create", "n1", "--file", "{W}/nope.yml")),
        Case("render-from-r-fifo", ("render", "--from", "{W}/r-fifo.yml", "--cuda", "cpu"), ok=True, sub=True),
        Case("render-both", ("render", "minimal", "--from", "{W}/files/empty.yml")),
        Case("render-unknown-spec", ("render", "nope")),
        Case("render-spec-traversal", ("render", "../../etc/passwd")),
        Case("render-from-missing", ("render", "--from", "{W}/nope.yml")),
        Case("export-format", ("export", "e1", "--format", "nope")),
        Case("export-history-explicit", ("export", "e1", "--format", "explicit", "--from-history")),
        Case("export-not-env", ("export", "--prefix", "{W}/files")),
        Case("export-no-name", ("export",)),
        Case("verify-no-name", ("verify",)),
        Case("verify-not-env", ("verify", "--prefix", "{W}/files")),
        Case("verify-python-missing", ("verify", "--python", "{W}/nope-python")),
        Case("verify-python-text", ("verify", "--python", "{W}/files/empty.yml")),
        Case("verify-python-exec-format", ("verify", "--python", "{W}/exec-format")),
        Case("verify-python-folder", ("verify", "--python", "{W}/files")),
        Case("verify-device", ("verify", "--python", sys.executable, "--device", "-1")),
        Case("run-no-command", ("run", "e1")),
        Case("run-unknown", ("run", "nope", "--", "true")),
        Case("remove-no-yes", ("remove", "nope")),
        Case("unknown-verb", ("frobnicate",)),
        Case("unknown-option", ("list", "--frob")),
    ]
    cases += verb_cases()
    for i, v in enumerate(TIMEOUT):
        cases.append(Case(f"opt-verify-timeout-{i}", ("verify", "--python", sys.executable, "--timeout", v)))
    return cases


def verb_cases() -> list[Case]:
    """bundle, lock, doctor, create --lock and create --bundle (issue 20): every selection option fed garbage,
    their own options and targets, and doctor on wrongly typed metadata (alone, and beside a good env with --all)."""
    cases: list[Case] = []
    bases = {"bundle": ("bundle", "n1", "--spec", "minimal", "-o", "{W}/bundle-never"),
             "lock": ("lock", "minimal", "--platform", "linux-64", "-o", "{W}/never.lock"),
             "createlock": ("create", "n1", "--lock", "{W}/files/empty.lock", "--dry-run"),
             "createbundle": ("create", "n1", "--bundle", "{W}/bundles/empty", "--dry-run")}
    for verb, base in bases.items():
        for i, v in enumerate(CUDA):
            cases.append(Case(f"verb-{verb}-cuda-{i}", (*base, "--cuda", v)))
        for i, v in enumerate(TORCH):
            cases.append(Case(f"verb-{verb}-torch-{i}", (*base, "--cuda", "cpu", "--torch", v)))
        for i, v in enumerate(PYTHON):
            cases.append(Case(f"verb-{verb}-python-{i}", (*base, "--cuda", "cpu", "--python", v)))
        for i, v in enumerate(OVERRIDE):
            cases.append(Case(f"verb-{verb}-override-{i}", base, (("CONDA_OVERRIDE_CUDA", v),)))
        for i, v in enumerate(INDEX):
            cases.append(Case(f"verb-{verb}-index-{i}", (*base, "--cuda", "cpu"), (("ENVKIT_PYTORCH_INDEX", v),)))
        if verb in ("bundle", "createlock", "createbundle"):
            for i, v in enumerate(DRIVER):
                cases.append(Case(f"verb-{verb}-driver-{i}", (*base, "--driver-version", v)))
            for i, v in enumerate(CC):
                cases.append(Case(f"verb-{verb}-cc-{i}", (*base, "--compute-capability", v)))
    for i, v in enumerate(DRIVER):
        cases.append(Case(f"verb-doctor-driver-{i}", ("doctor", "--all", "--driver-version", v)))
    for i, v in enumerate(CC):
        cases.append(Case(f"verb-doctor-cc-{i}", ("doctor", "--all", "--compute-capability", v)))
    cases += [
        Case("verb-bundle-out-file", ("bundle", "n1", "--spec", "minimal", "--cuda", "cpu", "-o", "{W}/files/empty.yml")),
        Case("verb-bundle-out-nonempty", ("bundle", "n1", "--spec", "minimal", "--cuda", "cpu", "-o", "{W}/files")),
        Case("verb-bundle-out-under-file", ("bundle", "n1", "--spec", "minimal", "--cuda", "cpu", "-o",
                                            "{W}/files/empty.yml/b")),
        Case("verb-bundle-no-name", ("bundle", "-o", "{W}/bundle-never")),
        # a name close to a spec's stops with "did you mean" (a plain new name builds dl_train under it, as create does)
        Case("verb-bundle-unknown-spec-name", ("bundle", "minmal", "-o", "{W}/bundle-never"),
             expect="did you mean minimal"),
        Case("verb-lock-platform", ("lock", "minimal", "--platform", "nope", "-o", "{W}/never.lock")),
        Case("verb-lock-platform-blank", ("lock", "minimal", "--platform", " ", "-o", "{W}/never.lock")),
        Case("verb-lock-version", ("lock", "minimal", "--platform", "linux-64", "--lock-version", "9")),
        Case("verb-lock-out-folder", ("lock", "minimal", "--platform", "linux-64", "--cuda", "cpu", "-o", "{W}/files")),
        Case("verb-render-out-dev-full", ("render", "minimal", "--cuda", "cpu", "-o", "/dev/full"),
             expect="is full: free space"),  # ENOSPC hints at disk space, not at permissions
        Case("verb-render-spec-template", ("render", "--spec", "{W}/spec-template.yaml", "--cuda", "cpu"),
             expect="key 'template': not supported"),  # refused by name, never silently ignored
        Case("verb-create-spec-template", ("create", "n1", "--spec", "{W}/spec-template.yaml", "--cuda", "cpu",
                                           "--dry-run"), expect="key 'template': not supported"),
        Case("verb-doctor-both", ("doctor", "e1", "--all")),
        Case("verb-doctor-prefix-file", ("doctor", "--prefix", "{W}/files/empty.yml")),
        Case("verb-doctor-prefix-missing", ("doctor", "--prefix", "{W}/nope")),
        Case("verb-doctor-no-env", ("doctor",), (("CONDA_PREFIX", ""),)),
        Case("verb-doctor-active-missing", ("doctor",), (("CONDA_PREFIX", "{W}/nope"),)),
    ]
    drivers = ("--driver-version", "580.65.06", "--compute-capability", "9.0")
    for kind in TYPED:
        for slot in ("record", "createjson", "verifyjson"):
            home = (("ENVKIT_HOME", "{W}/homes/typed-" + slot + "-" + kind),)
            cases.append(Case(f"typed-{slot}-doctor-{kind}", ("doctor", "e1", *drivers), home, ok=True, codes=(5,)))
            cases.append(Case(f"typed-{slot}-doctor-all-{kind}", ("doctor", "--all", "--json", *drivers), home,
                              ok=True, codes=(5,), expect="/envs/e2"))  # the good env beside it is still reported
    return cases


ALL = file_cases() + option_cases()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every bad file, in every place envkit reads one from (built once, read-only for the cases)."""
    w = tmp_path_factory.mktemp("bad-inputs")
    for kind in KINDS:
        if kind == "missing":
            continue
        for suffix in (".yml", ".yaml", ".lock", ".cfg"):
            write_kind(w / "files" / (kind + suffix), kind)
        write_kind(w / "specdirs" / kind / "x.yaml", kind)
        write_kind(w / "bundles" / kind / "bundle.json", kind)
        for slot, rel in (("createjson", ".envkit/create.json"), ("verifyjson", ".envkit/verify.json"),
                          ("state", "conda-meta/state"), ("record", "conda-meta/numpy-1.0-0.json"),
                          ("history", "conda-meta/history"), ("owner", ".envkit/owner.json")):
            env = w / "homes" / f"{slot}-{kind}" / "envs" / "e1"
            (env / "conda-meta").mkdir(parents=True, exist_ok=True)
            write_kind(env / rel, kind)
            good = w / "homes" / f"{slot}-{kind}" / "envs" / "e2" / "conda-meta"
            good.mkdir(parents=True, exist_ok=True)
    for kind, data in TYPED.items():
        for slot, rel in (("record", "conda-meta/e-1.0-0.json"), ("createjson", ".envkit/create.json"),
                          ("verifyjson", ".envkit/verify.json")):
            home = w / "homes" / f"typed-{slot}-{kind}" / "envs"
            (home / "e1" / "conda-meta").mkdir(parents=True, exist_ok=True)
            (home / "e1" / ".envkit").mkdir(exist_ok=True)
            (home / "e1" / rel).write_text(json.dumps(data))
            (home / "e2" / "conda-meta").mkdir(parents=True, exist_ok=True)
    (w / "spec-template.yaml").write_text("description: x\ntorch: []\ntemplate: environment.yml.j2\n")
    (w / "specdirs" / "missing").mkdir(parents=True)
    (w / "bundles" / "missing").mkdir(parents=True)
    for slot in ("createjson", "verifyjson", "state", "record", "history", "owner"):
        (w / "homes" / f"{slot}-missing" / "envs" / "e1" / "conda-meta").mkdir(parents=True)
    for key, values in CONFIG_VALUES.items():
        for i, v in enumerate(values):
            (w / "configs").mkdir(exist_ok=True)
            (w / "configs" / f"{key}-{i}.yaml").write_text(f"{key}: {v}\n")
    (w / "folder-config").mkdir()
    os.mkfifo(w / "requirements-fifo.txt")
    (w / "r-fifo.yml").write_text(f"name: r\ndependencies:\n  - python\n  - pip:\n    - -r {w}/requirements-fifo.txt\n")
    (w / "dangling-prefix").symlink_to(w / "no-such-target")
    (w / "exec-format").write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 64)
    (w / "exec-format").chmod(0o755)
    return w


def expand(text: str, w: Path) -> str:
    return text.replace("{W}", str(w))


def check(case: Case, code: int, out: str, err: str, seconds: float, peak_mb: float) -> None:
    text = out + err
    assert "Traceback" not in text, text[-3000:]
    assert "internal error" not in text, text[-3000:]  # the crash boundary caught an unfixed root cause
    assert seconds < LIMIT_S, f"{seconds:.1f} s"
    assert peak_mb < LIMIT_MB, f"{peak_mb:.0f} MB"
    for secret in ("PW-SECRET", "PW SECRET", "TK-SECRET"):
        assert secret not in text, text
    if case.expect:
        assert case.expect in text, text
    if code == 0 or code in case.codes:
        assert case.ok, f"accepted: {text[-2000:]}"
        return
    assert code in (1, 2), (code, text[-2000:])
    lines = [line for line in err.splitlines() if line.strip()]
    if any(line.startswith("Error: ") for line in lines):  # click's own usage errors
        assert code == 2 and "Try 'envkit" in err and len([x for x in lines if x.startswith("Error: ")]) == 1, err
        return
    starts = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert len(starts) == 1, err
    assert starts[0] + 1 < len(lines) and lines[starts[0] + 1].startswith("fix: "), f"not one line + fix:\n{err}"


def test_the_generator_covers_the_ground() -> None:
    """Several hundred cases; every verb; every file kind; the subprocess set is not empty."""
    assert len(ALL) >= 600, len(ALL)
    verbs = {c.argv[0] for c in ALL}
    assert {"detect", "render", "create", "verify", "export", "list", "run", "remove", "activate", "kernel",
            "shell", "doctor"} <= verbs
    assert {k for k in KINDS if any(c.id.endswith("-" + k) for c in ALL)} == set(KINDS)
    assert sum(c.sub for c in ALL) >= 30


@pytest.mark.parametrize("case", [c for c in ALL if not (c.sub and c.id.split("-")[-1] in NEEDS_SUBPROCESS)], ids=str)
def test_bad_input_in_process(case: Case, work: Path, capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in case.env:
        monkeypatch.setenv(key, expand(value, work))
    monkeypatch.chdir(work)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    code, out, err = run_cli(capsys, *(expand(a, work) for a in case.argv))
    seconds = time.perf_counter() - start
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    check(case, code, out, err, seconds, grown_mb)


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a runaway bomb dies here, not the machine


def _wait4_run(case: Case, work: Path, base_env: dict[str, str]) -> tuple[Case, int, str, str, float, float]:
    """One real `envkit` process; wall time and its own peak RSS from wait4."""
    import tempfile

    env = dict(base_env)
    env.update((k, expand(v, work)) for k, v in case.env)
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "envkit", *(expand(a, work) for a in case.argv)],
                                stdin=subprocess.DEVNULL, stdout=out_f, stderr=err_f, env=env, cwd=work,
                                preexec_fn=_limit)
        deadline = start + LIMIT_S * 4
        status = None
        rusage = None
        while status is None:
            pid, status_, rusage_ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status, rusage = status_, rusage_
                break
            if time.perf_counter() > deadline:
                proc.kill()
            time.sleep(0.01)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        out_f.seek(0)
        err_f.seek(0)
        assert rusage is not None
        return (case, proc.returncode, out_f.read().decode(errors="replace"), err_f.read().decode(errors="replace"),
                seconds, rusage.ru_maxrss / 1024)


def test_hostile_files_in_real_processes(work: Path, tmp_path: Path) -> None:
    """FIFOs, devices, bombs and huge files through the real binary: time and memory measured by the kernel."""
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVKIT_", "CONDA_"))}
    base_env.update(HOME=str(tmp_path), ENVKIT_HOME=str(tmp_path / "home"), ENVKIT_CACHE_DIR=str(tmp_path / "cache"),
                    XDG_CONFIG_HOME=str(tmp_path / "config"))
    cases = [c for c in ALL if c.sub]
    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        for case, code, out, err, seconds, peak_mb in pool.map(lambda c: _wait4_run(c, work, base_env), cases):
            try:
                check(case, code, out, err, seconds, peak_mb)
            except AssertionError as exc:
                failures.append(f"{case.id}: {exc}")
    assert not failures, "\n".join(failures[:20])


def test_the_crash_boundary_prints_one_line_and_saves_a_redacted_report(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An exception no stage anticipated: one line, a report path, exit 1, the secret in neither."""
    import envkit.prefix.inventory

    def boom() -> list[dict[str, object]]:
        raise RuntimeError("unexpected at https://user:PW-SECRET@host/t/TK-SECRET/x")

    monkeypatch.setattr(envkit.prefix.inventory, "list_envs_rows", boom)
    code, out, err = run_cli(capsys, "list")
    assert code == 1 and "Traceback" not in out + err
    assert "PW-SECRET" not in err and "TK-SECRET" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: internal error (RuntimeError") and lines[1].startswith("fix: ")
    report = Path(lines[1].split("the details are in ", 1)[1].split(";", 1)[0])
    text = report.read_text()
    assert "Traceback" in text and "boom" in text
    assert "PW-SECRET" not in text and "TK-SECRET" not in text
    assert oct(report.stat().st_mode & 0o777) == "0o600"


def test_envkit_run_reports_a_signal_as_128_plus_n(capsys: pytest.CaptureFixture[str], isolated: Path) -> None:
    env = isolated / "envs" / "e1"
    (env / "conda-meta").mkdir(parents=True)
    code, _out, _err = run_cli(capsys, "run", "e1", "--", "sh", "-c", "kill -KILL $$")
    assert code == 137
    code, _out, _err = run_cli(capsys, "run", "e1", "--", "sh", "-c", "kill -TERM $$")
    assert code == 143
    code, _out, _err = run_cli(capsys, "run", "e1", "--", "sh", "-c", "exit 7")
    assert code == 7


def test_one_broken_env_does_not_hide_the_others(capsys: pytest.CaptureFixture[str], isolated: Path) -> None:
    for name in ("good", "broken"):
        (isolated / "envs" / name / "conda-meta").mkdir(parents=True)
        (isolated / "envs" / name / ".envkit").mkdir()
    (isolated / "envs" / "good" / ".envkit" / "create.json").write_text(json.dumps(
        {"selection": {"torch": "2.13.0", "cuda": "13.0", "flavor": "conda-forge"}}))
    (isolated / "envs" / "broken" / ".envkit" / "create.json").write_text('{"selection": [1, 2')
    code, out, _err = run_cli(capsys, "list", "--json")
    assert code == 0
    rows = {e["name"]: e for e in json.loads(out)["environments"]}
    assert rows["good"]["torch"] == "2.13.0" and "unreadable" not in rows["good"]
    assert "not valid JSON" in rows["broken"]["unreadable"]



@pytest.mark.parametrize("target", ["dangling", "file"])
def test_a_bad_target_fails_before_anything_is_downloaded(capsys: pytest.CaptureFixture[str], server: ChannelServer,
                                                         tmp_path: Path, target: str) -> None:
    prefix = tmp_path / "target"
    if target == "dangling":
        prefix.symlink_to(tmp_path / "nowhere")
    else:
        prefix.write_text("user data\n")
    code, out, err = run_cli(capsys, "create", "x", "--prefix", str(prefix), "--spec", "minimal", "--cuda", "13.0",
                             "--python", PY, "--mirror", server.url, "--force", "--no-verify")
    assert code == 1 and "Traceback" not in out + err and "fix:" in err
    assert not server.hits(".conda"), "the install started before the target was checked"
    assert prefix.is_symlink() if target == "dangling" else prefix.read_text() == "user data\n"

"""`envkit install NAME --pip PKG...` / `envkit uninstall NAME --pip PKG...`: the env's own pip, with torch held.

The practitioner guides' rule (PyTorch forums and conda-forge's docs on mixing pip and conda: "never pip install
torch over a conda torch"): a pip package that wants another torch replaces conda's torch with a wheel of another
build or CUDA, the classic CUDA mismatch. So pip runs with a constraints file (`pip install -c`, pip's
"Constraints Files" user guide) pinning every torch-family and NVIDIA CUDA wheel the env has to its installed
version, first as `--dry-run --report` (pip >= 22.2): a resolver conflict on torch, or a plan that still installs
one of them, stops with envkit's explanation before anything is changed. The install itself runs in a hard-linked
clone of the env that is swapped in whole (apply.py), so a failed pip leaves the env as it was.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envkit import proc
from envkit.change.diff import ChangePlan, Diff, Row, TorchChange, spec_name
from envkit.engines.base import CreateOptions, Timer
from envkit.errors import EngineError, PlanGuardError, UsageError
from envkit.prefix import records
from envkit.prefix.condarc import register_env
from envkit.prefix.staging import clone_into, interrupting, sweep, target_lock
from envkit.render import mirrors
from envkit.config import load_file_config
from envkit.secrets import REDACTED, redact

# the wheels that make up an env's torch: torch's own family and NVIDIA's CUDA runtime wheels (nvidia-cublas-cu12,
# nvidia-cudnn-cu13, ...: the Requires-Dist of every CUDA torch wheel on download.pytorch.org and PyPI)
TORCH_WHEELS = frozenset({"torch", "torchvision", "torchaudio", "triton", "pytorch-triton"})
PIP_TIMEOUT_S = 3600.0


def _canonical(name: str) -> str:
    """PEP 503 normalized name."""
    return re.sub(r"[-_.]+", "-", name).lower()


NOT_CUDA = frozenset({"nvidia-ml-py", "nvidia-ml-py3"})  # NVML's Python bindings: no CUDA library inside


def is_torch_wheel(name: str) -> bool:
    name = _canonical(name)
    return name in TORCH_WHEELS or (name.startswith("nvidia-") and name not in NOT_CUDA)


def _pip_env() -> dict[str, str]:
    return proc.child_env(isolate_python=True, drop=("PIP_REQUIRE_VIRTUALENV",))


def pip_list(prefix: Path) -> dict[str, str]:
    """What the env's pip sees installed (conda's dist-info included): normalized name -> version."""
    python = prefix / "bin" / "python"
    try:
        done = proc.run([str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
                        timeout=120, env=_pip_env())
    except FileNotFoundError:
        done = None
    if done is None or done.returncode != 0:
        raise EngineError(f"the env's pip does not run ({python} -m pip list failed)",
                          f"install pip into it first: envkit install {prefix.name} pip")
    try:
        return {_canonical(d["name"]): str(d["version"]) for d in json.loads(done.stdout)}
    except (ValueError, KeyError, TypeError) as exc:
        raise EngineError(f"pip list printed something envkit cannot read: {exc}", "run it by hand to see why: "
                          f"envkit run {prefix.name} -- python -m pip list") from exc


def constraints(prefix: Path, seen: dict[str, str]) -> list[str]:
    """`name==version` for every torch-family and CUDA wheel the env has; a conda torch pip cannot see is pinned
    to its conda version."""
    pins = {n: v for n, v in seen.items() if is_torch_wheel(n)}
    conda = {d.get("name"): d for _p, d in records.conda_records(prefix)}
    torch = conda.get("pytorch")
    if torch is not None and "torch" not in pins:
        pins["torch"] = str(torch.get("version"))
    return [f"{n}=={v}" for n, v in sorted(pins.items())]


def _torch_words(prefix: Path, seen: dict[str, str]) -> str:
    conda = {d.get("name"): d for _p, d in records.conda_records(prefix)}
    torch = conda.get("pytorch")
    if torch is not None:
        return f"the env's conda pytorch {torch.get('version')} ({torch.get('build')})"
    return f"the env's torch {seen['torch']}" if "torch" in seen else "the env's torch"


def refuse_torch_specs(prefix: Path, where: str, specs: Sequence[str], verb: str) -> None:
    """`--pip torch` (or torchvision, nvidia-*): refused before pip runs, with the conda way."""
    named = [s for s in specs if is_torch_wheel(spec_name(s))]
    if not named:
        return
    conda_names = " ".join("pytorch" if spec_name(s) == "torch" else spec_name(s) for s in named)
    why = ("pip would put its own torch or CUDA wheels over the torch stack of the env, and a pip torch over a "
           "conda torch is the classic CUDA mismatch (two builds of torch and of the CUDA libraries in one env)"
           if verb == "install" else
           "pip would delete files of the env's torch stack from under the records of the tool that installed it")
    raise PlanGuardError(f"envkit {verb} --pip {' '.join(named)} in {prefix} is refused: {why}",
                         f"change torch through conda, where the diff shows it and asks: envkit {verb} {where} "
                         f"{conda_names}")


def _index_args(prefix: Path, index_url: str | None) -> list[str]:
    """--index-url: the command's, else the env's mirror's PyPI index (create.json), else pip's own config."""
    if index_url:
        return ["--index-url", index_url]
    meta = records.read_meta_quiet(prefix, records.CREATE_FILE)
    recorded = meta.get("mirror") if isinstance(meta.get("mirror"), str) else None
    if recorded and REDACTED not in recorded:
        mirror = mirrors.resolve(recorded, load_file_config().data)
        if mirror is not None and mirror.pypi:
            return ["--index-url", mirror.pypi]
    return []


def _pip_reason(stdout: str, stderr: str) -> str:
    """pip's "The conflict is caused by:" block when it printed one (its resolver's own words), else its error tail."""
    text = f"{stdout}\n{stderr}"
    block = re.search(r"The conflict is caused by:\n((?:[ \t]+\S.*\n?)+)", text)
    if block:
        return redact("; ".join(line.strip() for line in block.group(1).splitlines() if line.strip()))
    errors = [line for line in text.splitlines() if line.startswith("ERROR:")]
    return redact(" ".join(errors[-3:]) if errors else text.strip()[-1500:])


def plan_pip(prefix: Path, where: str, specs: Sequence[str], index_url: str | None,
             action: str) -> tuple[Diff, list[str], list[str]]:
    """pip's own dry run with the torch constraints: (the diff, the constraints, the index arguments)."""
    refuse_torch_specs(prefix, where, specs, action)
    seen = pip_list(prefix)
    pins = constraints(prefix, seen)
    if action == "uninstall":
        missing = [s for s in specs if _canonical(spec_name(s)) not in seen]
        if missing:
            raise UsageError(f"pip sees no {', '.join(missing)} in {prefix}", f"envkit run {where} -- python -m pip list")
        return Diff(removed=tuple(Row(_canonical(spec_name(s)), seen[_canonical(spec_name(s))], "pip")
                                  for s in specs)), pins, []
    index = _index_args(prefix, index_url)
    private = Path(tempfile.mkdtemp(prefix="envkit-pip-"))
    try:
        (private / "constraints.txt").write_text("\n".join(pins) + "\n", encoding="utf-8")
        report = private / "plan.json"
        done = proc.run([str(prefix / "bin" / "python"), "-m", "pip", "install", "--no-input",
                         "--disable-pip-version-check", "--dry-run", "--report", str(report), "-c",
                         str(private / "constraints.txt"), *index, *specs], timeout=PIP_TIMEOUT_S, env=_pip_env())
        if done.returncode != 0:
            said = _pip_reason(done.stdout, done.stderr)
            if re.search(r"\b(torch|torchvision|torchaudio|nvidia-[\w-]+)\b", said):
                raise PlanGuardError(
                    f"pip install {' '.join(specs)} wants another torch than {_torch_words(prefix, seen)}, which "
                    f"envkit holds ({', '.join(pins)}): a pip torch over it would mix two torch and CUDA builds. "
                    f"Nothing was installed. pip said: {said}",
                    f"pick a version of {', '.join(spec_name(s) for s in specs)} made for torch {seen.get('torch', '')}"
                    f" (envkit install {where} --pip 'NAME==VERSION'), or, to change torch itself, do it through "
                    f"conda first: envkit install {where} pytorch=VERSION")
            raise EngineError(f"pip could not resolve {' '.join(specs)}: {said}",
                              "check the package names and the index (--index-url URL)")
        planned = json.loads(report.read_text(encoding="utf-8")).get("install", [])
    except (OSError, ValueError) as exc:
        raise EngineError(f"pip's plan could not be read: {exc}", "run the same command again") from exc
    finally:
        shutil.rmtree(private, ignore_errors=True)
    pairs = [(_canonical(i["metadata"]["name"]), str(i["metadata"]["version"])) for i in planned]
    bad = [f"{n}=={v}" for n, v in pairs if is_torch_wheel(n)]
    if bad:
        raise PlanGuardError(
            f"pip install {' '.join(specs)} would install {', '.join(bad)} over {_torch_words(prefix, seen)}: two "
            "torch or CUDA builds in one env. Nothing was installed",
            f"install the package without its torch dependency only if it really supports torch {seen.get('torch')}"
            f" (envkit run {where} -- python -m pip install --no-deps ...), or change torch through conda first: "
            f"envkit install {where} pytorch=VERSION")
    # pip's report names each file, not its size: the diff's download size counts conda packages only
    added = tuple(Row(n, v, "pip", None, False) for n, v in pairs if n not in seen)
    changed = tuple((Row(n, seen[n], "pip"), Row(n, v, "pip", None, False)) for n, v in pairs
                    if n in seen and seen[n] != v)
    return Diff(added, changed, ()), pins, index


def apply_pip(prefix: Path, action: str, specs: Sequence[str], pins: Sequence[str], index: Sequence[str],
              timer: Timer, notes: list[str], verify_timeout: float, argv: Sequence[str]) -> None:
    """Run pip in a hard-linked clone of the env and swap it in (create.install_and_settle, as a conda change)."""
    from envkit.create import _fix_shebangs, install_and_settle

    def build(staging: Path) -> None:
        with timer.phase("clone"):
            clone_into(prefix, staging)
        private = Path(tempfile.mkdtemp(prefix="envkit-pip-"))
        try:
            (private / "constraints.txt").write_text("\n".join(pins) + "\n", encoding="utf-8")
            python = str(staging / "bin" / "python")
            argv_pip = ([python, "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "-c",
                         str(private / "constraints.txt"), *index, *specs] if action == "install" else
                        [python, "-m", "pip", "uninstall", "--yes", *specs])
            with timer.phase("pip"):
                done = proc.run(argv_pip, timeout=PIP_TIMEOUT_S, env=_pip_env())
            if done.returncode != 0:
                raise EngineError(f"pip {action} {' '.join(specs)} failed (rc {done.returncode}): "
                                  f"{redact((done.stderr_tail(12) or done.stdout)[-1500:])}",
                                  f"{prefix} is unchanged; fix what pip names and run the same command again")
        finally:
            shutil.rmtree(private, ignore_errors=True)
        _fix_shebangs(staging, staging, prefix)

    settle = CreateOptions(name=prefix.name, prefix=prefix, no_verify=True, verify_timeout=verify_timeout,
                           argv=tuple(argv))
    install_and_settle(settle, prefix, build, True, timer, notes)
    register_env(prefix)


def change_with_pip(prefix: Path, where: str, action: str, specs: Sequence[str], index_url: str | None,
                    dry_run: bool, confirm: Any, verify_timeout: float, argv: Sequence[str],
                    on_wait: Any = None) -> tuple[Diff, bool, dict[str, float], list[str]]:
    """Plan with pip's dry run, show it (confirm), apply under the env's lock. Returns (diff, applied, phases, notes)."""
    def plan_of(diff: Diff) -> ChangePlan:
        return ChangePlan(action, prefix, tuple(specs), (), diff, TorchChange(), (), pip=True)

    timer = Timer()
    if dry_run:
        diff, _pins, _index = plan_pip(prefix, where, specs, index_url, action)
        if confirm is not None:
            confirm(plan_of(diff))
        return diff, False, timer.phases, []
    with interrupting(), target_lock(prefix, on_wait=on_wait):
        notes = sweep(prefix.parent, held_name=prefix.name)
        with timer.phase("solve"):
            diff, pins, index = plan_pip(prefix, where, specs, index_url, action)
        if diff.empty:
            return diff, False, timer.phases, [*notes, "nothing to change: pip has what was asked"]
        if confirm is not None and not confirm(plan_of(diff)):
            return diff, False, timer.phases, [*notes, "not applied"]
        apply_pip(prefix, action, specs, pins, index, timer, notes, verify_timeout, argv)
    return diff, True, timer.phases, notes

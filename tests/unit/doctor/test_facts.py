"""doctor/ in three parts: facts.py reads an env (through prefix/records.py) into Facts, checks.py turns
Facts into Findings, __init__.py runs the list of checks; the public names stay where callers import them."""

from __future__ import annotations

import json
import os
from pathlib import Path

from envkit.models import Driver, Gpu, Machine
from envkit.prefix import records

CHECKS = ["python", "torch-copies", "torch-shadow", "torch-build", "cuda-levels", "gpu-arch", "made-for",
          "nvidia-pip-libs", "ld-library-path", "channels", "cudatoolkit", "files", "verify"]
H200 = Machine(Driver("580.65.06", "13.0", "nvml"), (Gpu(0, "NVIDIA H200", "9.0"),))


def _env(tmp_path: Path) -> Path:
    prefix = tmp_path / "env"
    records.conda_meta(prefix).mkdir(parents=True)
    for name, version, build in (("python", "3.12.7", "h0_cpython"), ("pytorch", "2.9.0", "cpu_generic_py312_h0_0")):
        (records.conda_meta(prefix) / records.record_name(name, version, build)).write_text(json.dumps(
            {"name": name, "version": version, "build": build, "channel": "https://conda.anaconda.org/conda-forge",
             "subdir": "linux-64", "files": []}))
    return prefix


def test_the_public_names_stay_importable() -> None:
    from envkit.doctor import OK, PROBLEM, SKIP, WARN, DoctorReport, Facts, Finding, diagnose, doctor, gather
    from envkit.doctor.checks import Finding as CheckFinding
    from envkit.doctor.facts import Facts as FactsFacts

    assert Finding is CheckFinding and Facts is FactsFacts
    assert (OK, WARN, PROBLEM, SKIP) == ("ok", "warn", "problem", "skip")
    assert callable(doctor) and callable(diagnose) and callable(gather) and DoctorReport.__name__ == "DoctorReport"


def test_facts_come_from_the_records_reader(tmp_path: Path) -> None:
    from envkit.doctor.facts import gather, torch_copies

    prefix = _env(tmp_path)
    os.mkfifo(records.conda_meta(prefix) / "evil-1-0.json")  # a hostile record is a finding, not a hang
    records.write_create(prefix, {"spec": "dl_train", "selection": {"torch": "2.9", "cuda": None}})
    records.write_verify(prefix, json.dumps({"outcome": "PASS", "time": "2026-01-01T00:00:00Z"}))
    records.write_state(prefix, (("HF_HOME", "/data/hf"),))
    facts = gather(prefix)
    assert sorted(r.name for r in facts.records) == ["python", "pytorch"]
    assert facts.errors == ["conda-meta/evil-1-0.json is not a readable record"]
    assert facts.python == "3.12" and facts.created["spec"] == "dl_train" and facts.verify["outcome"] == "PASS"
    assert facts.state_vars == {"HF_HOME": "/data/hf"}
    assert [r.channel for r in facts.records] == ["conda-forge", "conda-forge"]
    assert [(c.source, c.cuda) for c in torch_copies(facts)] == [("conda", None)]  # compat/builds.py: a CPU build


def test_a_broken_state_file_is_no_variables(tmp_path: Path) -> None:
    from envkit.doctor.facts import gather

    prefix = _env(tmp_path)
    records.state_path(prefix).write_text(json.dumps({"env_vars": ["A=1"]}))
    assert gather(prefix).state_vars == {}


def test_diagnose_runs_every_check_in_order(tmp_path: Path) -> None:
    from envkit.doctor import diagnose

    report = diagnose(_env(tmp_path), H200, environ={}, now=0.0)
    assert [f.check for f in report.findings] == CHECKS
    files = report.finding("files")
    assert files is not None and files.status == "ok" and files.found.startswith("2 conda records")
    assert report.problems[0].check == "python"  # no bin/python in this stand-in
    assert not report.by_envkit

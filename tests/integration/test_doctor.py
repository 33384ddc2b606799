"""`envkit doctor` on environments built for real from the doctor test bed, each broken the way users
break them (issue 15): pip torch over conda torch, a CPU build on a GPU machine, a build newer than
the driver, an arch gap, mixed channels, cudatoolkit next to cuda-version, deleted and modified files,
pip nvidia-* libraries of another CUDA, a system CUDA on LD_LIBRARY_PATH, a stale verify."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import FIXTURES, FakeGpu, FakeNVML, run_cli
from testbed.channel import PY
from testbed.doctorbed import build_doctor_bed
from testbed.server import ChannelServer

H200 = ("--driver-version", "580.65.06", "--compute-capability", "9.0")  # CUDA 13.0 driver, sm_90
SITE = f"lib/python{PY}/site-packages"
PIP_KEEP = ("PIP_CONFIG_FILE", "PIP_NO_CACHE_DIR")  # the machine's PIP_FIND_LINKS etc. must not add wheels


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_doctor_bed(tmp_path_factory.mktemp("doctorbed"))


@pytest.fixture(scope="module")
def srv(bed: Path) -> Iterator[ChannelServer]:
    with ChannelServer(bed) as server:
        yield server


def make_env(capsys: pytest.CaptureFixture[str], bed: Path, name: str, *args: str) -> Path:
    """envkit create from the doctor bed (python, torch, pip), planned for CUDA 13.0 by default."""
    cuda = () if "--cuda" in args or "--driver-version" in args else ("--cuda", "13.0")
    file = bed / "env.yml"
    if not file.exists():
        file.write_text(f"name: doctor\nchannels:\n  - conda-forge\ndependencies:\n  - python={PY}\n"
                        "  - pytorch\n  - pip\n")
    code, _out, err = run_cli(capsys, "create", name, "--file", str(file), "--channel", (bed / "conda-forge").as_uri(),
                              "--python", PY, "--no-verify", "-q", *cuda, *args)
    assert code == 0, err
    from envkit.prefix.locations import find_prefix

    return find_prefix(name, None)


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code, out, err = run_cli(capsys, "doctor", *args, "--json")
    assert code in (0, 5), err
    return code, json.loads(out)


def finding(report: dict, check: str) -> dict:
    return next(f for f in report["findings"] if f["check"] == check)


def pip(prefix: Path, *args: str) -> None:
    done = subprocess.run([str(prefix / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--no-deps", *args], check=False, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in PIP_KEEP})
    assert done.returncode == 0, done.stderr


def save_verify(prefix: Path, fixture: str, *, age_s: float = 0.0) -> None:
    """verify.json written by envkit's own report code from a recorded payload, `age_s` in the past."""
    from envkit.detect import detect
    from envkit.cli.output import machine_json
    from envkit.verify.report import build_report
    from envkit.verify.runner import save_report

    recorded = json.loads((FIXTURES / "verify" / fixture).read_text())
    payload = {k: recorded[k] for k in ("checks", "gpus", "torch") if k in recorded}
    machine = machine_json(detect(driver_version="580.65.06", compute_capabilities=("9.0",)))
    report = build_report(payload, machine, str(prefix / "bin" / "python"), str(prefix))
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - age_s))
    save_report(dataclasses.replace(report, data={**report.data, "time": when}), prefix / ".envkit" / "verify.json")


def test_a_healthy_env_reports_healthy(capsys: pytest.CaptureFixture[str], bed: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = make_env(capsys, bed, "good")
    save_verify(prefix, "pass-h200.json")
    toolkit = tmp_path / "cuda-12.4"  # a system CUDA toolkit on PATH, laid out as NVIDIA's installer does
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (toolkit / "bin" / "nvcc").chmod(0o755)
    (toolkit / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}')
    monkeypatch.setenv("PATH", f"{toolkit / 'bin'}:{os.environ['PATH']}")
    code, report = doctor(capsys, "good", *H200)
    assert code == 0 and report["healthy"] is True and report["problems"] == 0
    statuses = {f["check"]: f["status"] for f in report["findings"]}
    assert {k: v for k, v in statuses.items() if v not in ("ok", "skip")} == {}, report
    assert statuses["torch-build"] == statuses["gpu-arch"] == statuses["files"] == statuses["verify"] == "ok"
    assert "cuda130" in finding(report, "gpu-arch")["found"]
    levels = finding(report, "cuda-levels")["found"]
    assert "driver: CUDA 13.0 at most" in levels and "torch: CUDA 13.0 (torch.version.cuda" in levels
    assert f"nvcc: CUDA 12.4.1 at {toolkit / 'bin' / 'nvcc'}" in levels and "does not use it" in levels
    assert report["seconds"] < 1.0
    # the human form says the same, and --prefix finds the same env
    code, out, _err = run_cli(capsys, "doctor", "--prefix", str(prefix), *H200)
    assert code == 0 and "healthy" in out and "PROBLEM" not in out


def test_pip_torch_over_conda_torch_and_mismatched_nvidia_libs(capsys: pytest.CaptureFixture[str], bed: Path,
                                                               srv: ChannelServer) -> None:
    prefix = make_env(capsys, bed, "twice")
    # what users do: pip install torch (from the PyTorch index) into a conda env that has pytorch
    pip(prefix, "--index-url", f"{srv.url}/whl/cu130", "torch==2.14.0+cu130")
    assert srv.hits("cu130-py3-none-any.whl")  # the wheel came from the test index
    pip(prefix, "--index-url", f"{srv.url}/extra/simple", "nvidia-cuda-runtime-cu12==12.4.127")
    code, report = doctor(capsys, "twice", *H200)
    assert code == 5 and report["healthy"] is False
    copies = finding(report, "torch-copies")
    assert copies["status"] == "problem"
    assert "conda pytorch 2.13.0" in copies["found"] and "pip torch 2.14.0+cu130" in copies["found"]
    assert "loads the pip one" in copies["found"]
    loaded = subprocess.run([str(prefix / "bin" / "python"), "-c", "import torch; print(torch.STANDIN)"],
                            capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "True"  # pip's wheel; conda's copy says 'conda': doctor told the truth
    assert copies["fix"].startswith(f"{prefix}/bin/python -m pip uninstall -y torch && envkit create twice")
    files = finding(report, "files")
    assert files["status"] == "problem" and "pytorch:" in files["found"] and "pip install torch replaced" in files["found"]
    assert "--force-reinstall pytorch" in files["fix"]
    libs = finding(report, "nvidia-pip-libs")
    assert libs["status"] == "problem" and "nvidia-cuda-runtime-cu12 12.4.127 (CUDA 12.x" in libs["found"]
    assert libs["fix"] == f"{prefix}/bin/python -m pip uninstall -y nvidia-cuda-runtime-cu12"


def test_torch_from_the_user_site_or_pythonpath_shadows_the_envs(capsys: pytest.CaptureFixture[str], bed: Path,
                                                                 srv: ChannelServer, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = make_env(capsys, bed, "shadow")
    python = str(prefix / "bin" / "python")
    user_site = Path.home() / ".local" / "lib" / f"python{PY}" / "site-packages"
    pip(prefix, "--target", str(user_site), "--index-url", f"{srv.url}/whl/cu130", "torch==2.14.0+cu130")
    # the venv-shaped stand-in puts the user site after its own site-packages: no shadow, and doctor agrees
    cfg = prefix / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace("include-system-site-packages = false", "include-system-site-packages = true"))
    loaded = subprocess.run([python, "-c", "import torch; print(torch.__file__)"], capture_output=True, text=True,
                            check=True)
    assert loaded.stdout.strip() == str(prefix / SITE / "torch" / "__init__.py")
    assert finding(doctor(capsys, "shadow", *H200)[1], "torch-shadow")["status"] == "ok"
    # a conda env has no pyvenv.cfg, and its python puts ~/.local/lib/pythonX.Y/site-packages first
    cfg.unlink()
    code, report = doctor(capsys, "shadow", *H200)
    assert code == 5
    shadow = finding(report, "torch-shadow")
    assert shadow["status"] == "problem" and f"the user site {user_site}/torch" in shadow["found"]
    assert shadow["fix"].startswith("export PYTHONNOUSERSITE=1")
    monkeypatch.setenv("PYTHONNOUSERSITE", "1")
    assert finding(doctor(capsys, "shadow", *H200)[1], "torch-shadow")["status"] == "ok"
    # PYTHONPATH comes before everything: proven with the env's python, then found by doctor
    cfg.write_text(f"home = {Path(python).resolve().parent}\ninclude-system-site-packages = false\n")
    elsewhere = tmp_path / "src"
    (elsewhere / "torch").mkdir(parents=True)
    (elsewhere / "torch" / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{elsewhere}")
    loaded = subprocess.run([python, "-c", "import torch; print(torch.__file__)"], capture_output=True, text=True,
                            check=True)
    assert loaded.stdout.strip() == str(elsewhere / "torch" / "__init__.py")
    shadow = finding(doctor(capsys, "shadow", *H200)[1], "torch-shadow")
    assert shadow["status"] == "problem" and f"PYTHONPATH: {elsewhere}/torch" in shadow["found"]
    assert shadow["fix"] == f"export PYTHONPATH={tmp_path}"


def test_nvidia_libs_that_are_not_the_versions_torch_pins(capsys: pytest.CaptureFixture[str], bed: Path,
                                                         srv: ChannelServer, tmp_path: Path) -> None:
    file = tmp_path / "pip-only.yml"
    file.write_text(f"name: piponly\nchannels:\n  - {(bed / 'conda-forge').as_uri()}\ndependencies:\n"
                    f"  - python={PY}\n  - pip\n")
    code, _out, err = run_cli(capsys, "create", "piponly", "--file", str(file), "--no-adapt", "--no-verify", "-q")
    assert code == 0, err
    from envkit.prefix.locations import find_prefix

    prefix = find_prefix("piponly", None)
    # PyPI's default torch (no +cuXYZ) pins its CUDA libraries; an older runtime came in through another package
    pip(prefix, "--index-url", f"{srv.url}/extra/simple", "torch==2.13.0", "nvidia-cuda-runtime-cu12==12.4.127")
    code, report = doctor(capsys, "piponly", *H200)
    assert code == 5
    assert "torch 2.13.0 (pip, CUDA 12.8)" in finding(report, "torch-build")["found"]  # from torch/version.py
    libs = finding(report, "nvidia-pip-libs")
    assert libs["status"] == "problem"
    assert "nvidia-cuda-runtime-cu12 12.4.127 (torch 2.13.0 pins 12.8.90)" in libs["found"]
    assert libs["fix"] == f"{prefix}/bin/python -m pip install --force-reinstall --no-deps nvidia-cuda-runtime-cu12==12.8.90"


def test_cpu_build_on_a_gpu_machine(capsys: pytest.CaptureFixture[str], bed: Path) -> None:
    prefix = make_env(capsys, bed, "cpu", "--cuda", "cpu")
    code, report = doctor(capsys, "cpu", *H200)
    assert code == 5
    build = finding(report, "torch-build")
    assert build["status"] == "problem" and "CPU build) on a GPU machine" in build["found"]
    assert build["fix"] == (f"conda install -p {prefix} --override-channels -c conda-forge "
                            "'pytorch=2.13.0=cuda*' 'cuda-version=13.0'")
    # without a GPU the same env is right
    code, report = doctor(capsys, "cpu", "--compute-capability", "9.0")  # GPU list but no driver: not usable
    assert finding(report, "torch-build")["status"] == "ok"


def test_build_newer_than_the_driver_made_for_another_machine(capsys: pytest.CaptureFixture[str], bed: Path) -> None:
    make_env(capsys, bed, "copied", *H200)  # made on (simulated) H200 with a CUDA 13.0 driver
    code, report = doctor(capsys, "copied", *H200)
    assert code == 0 and finding(report, "made-for")["status"] == "ok"
    # copied to a server whose driver 550 supports CUDA 12.4, with an A100
    code, report = doctor(capsys, "copied", "--driver-version", "550.54.15", "--compute-capability", "8.0")
    assert code == 5
    build = finding(report, "torch-build")
    assert build["status"] == "problem" and "driver 550.54.15 supports CUDA 12.4" in build["found"]
    assert "'cuda-version=12.9'" in build["fix"] and "update the NVIDIA driver to >= 580.65.06)" in build["fix"]
    made = finding(report, "made-for")
    assert made["status"] == "warn" and "made for a different machine" in made["found"]
    assert "driver 580.65.06" in made["found"] and "envkit selects CUDA 12.9" in made["found"]
    assert made["fix"] == f"envkit create copied --file {bed / 'env.yml'} --force"


def test_minor_version_compatibility_is_a_warning(capsys: pytest.CaptureFixture[str], bed: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "cu126.yml"
    file.write_text(f"name: cu126\nchannels:\n  - {(bed / 'conda-forge').as_uri()}\ndependencies:\n"
                    f"  - python={PY}\n  - pytorch=2.13.0=cuda126*\n  - cuda-version=12.6\n")
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.6")
    code, _out, err = run_cli(capsys, "create", "cu126", "--file", str(file), "--no-adapt", "--no-verify", "-q")
    assert code == 0, err
    monkeypatch.delenv("CONDA_OVERRIDE_CUDA")
    # driver 525.60.13 reports CUDA 12.0 and meets the 12.x minor-version-compatibility floor
    code, report = doctor(capsys, "cu126", "--driver-version", "525.60.13", "--compute-capability", "9.0")
    build = finding(report, "torch-build")
    assert build["status"] == "warn" and "minor version compatibility (CUDA 12.x needs >= 525.60.13)" in build["found"]
    assert "update the NVIDIA driver to >= " in build["fix"]
    # below the floor it is a problem
    code, report = doctor(capsys, "cu126", "--driver-version", "520.61.05", "--compute-capability", "9.0")
    assert code == 5 and finding(report, "torch-build")["status"] == "problem"


def test_the_real_machine_comes_from_detect(capsys: pytest.CaptureFixture[str], bed: Path,
                                            fake_nvml: FakeNVML) -> None:
    """No simulation flags: NVML (faked at its import seam) reports an RTX 5090 on a CUDA 12.8 driver."""
    make_env(capsys, bed, "nvml")  # made where the (fake) NVML reports driver 580.159.04, CUDA 13.0
    fake_nvml.driver, fake_nvml.cuda_int = "570.86.10", 12080
    fake_nvml.gpus = [FakeGpu("NVIDIA GeForce RTX 5090", (12, 0))]
    code, report = doctor(capsys, "nvml")
    assert code == 5 and "driver 570.86.10 (CUDA 12.8, nvml)" in report["machine"]
    build = finding(report, "torch-build")
    assert build["status"] == "problem" and "driver 570.86.10 supports CUDA 12.8" in build["found"]
    assert "'cuda-version=12.9'" in build["fix"]  # CUDA 12.9 carries sm_120 and runs on 570 (minor version compat)


def test_gpu_arch_missing_from_the_build(capsys: pytest.CaptureFixture[str], bed: Path) -> None:
    make_env(capsys, bed, "arch")
    code, report = doctor(capsys, "arch", "--driver-version", "580.65.06", "--compute-capability", "6.1")
    assert code == 5
    arch = finding(report, "gpu-arch")
    assert arch["status"] == "problem" and "sm_61" in arch["found"] and "cuda130" in arch["found"]
    assert "'cuda-version=12.9'" in arch["fix"]  # the cuda129 build carries sm_60 code, which runs on sm_61


def test_mixed_channels_and_cudatoolkit_next_to_cuda_version(capsys: pytest.CaptureFixture[str],
                                                             srv: ChannelServer, tmp_path: Path) -> None:
    file = tmp_path / "mixed.yml"
    file.write_text(f"name: mixed\nchannels:\n  - {srv.url}/conda-forge\n  - {srv.url}/pkgs/main\n"
                    f"dependencies:\n  - python={PY}\n  - pytorch=2.13.0=cuda130*\n  - cuda-version=13.0\n"
                    "  - cudatoolkit=11.8\n  - mkl\n")
    code, _out, err = run_cli(capsys, "create", "mixed", "--file", str(file), "--no-adapt", "--no-verify", "-q",
                              "--cuda", "13.0")
    assert code == 0, err
    from envkit.prefix.locations import find_prefix

    prefix = find_prefix("mixed", None)
    code, report = doctor(capsys, "mixed", *H200)
    assert code == 5
    channels = finding(report, "channels")
    assert channels["status"] == "problem" and "from defaults (mkl)" in channels["found"]
    assert channels["fix"] == f"conda install -p {prefix} --override-channels -c conda-forge mkl"
    toolkit = finding(report, "cudatoolkit")
    assert toolkit["status"] == "problem" and "cudatoolkit 11.8.0 next to cuda-version 13.0" in toolkit["found"]
    assert toolkit["fix"] == f"conda remove -p {prefix} cudatoolkit"


def test_deleted_and_modified_files(capsys: pytest.CaptureFixture[str], bed: Path) -> None:
    prefix = make_env(capsys, bed, "damaged")
    (prefix / SITE / "torch" / "lib" / "libtorch_stub.txt").unlink()
    target = prefix / SITE / "pip" / "__init__.py"
    head = target.read_bytes()[:20]
    target.unlink()  # a new inode: the package cache's hard-linked copy stays intact
    target.write_bytes(head)
    code, report = doctor(capsys, "damaged", *H200)
    assert code == 5
    files = finding(report, "files")
    assert files["status"] == "problem"
    assert "pip: 0 missing, 1 modified" in files["found"] and "pytorch: 1 missing, 0 modified" in files["found"]
    assert "torch/lib/libtorch_stub.txt (missing)" in files["found"] and "record says" in files["found"]
    assert files["fix"].startswith("envkit install damaged --force-reinstall pip pytorch")  # no conda needed
    # the fix, as printed (--no-verify: the doctor bed's torch is a stand-in that verify's AMP step cannot import)
    code, _out, err = run_cli(capsys, *files["fix"].split("  (or:")[0].split()[1:], "--yes", "--no-verify")
    assert code == 0, err
    code, report = doctor(capsys, "damaged", *H200)
    assert finding(report, "files")["status"] == "ok"


def test_system_cuda_on_ld_library_path(capsys: pytest.CaptureFixture[str], bed: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    make_env(capsys, bed, "ldpath")
    system = tmp_path / "usr-local-cuda-12.4" / "lib64"
    system.mkdir(parents=True)
    for lib in ("libcudart.so.12", "libcublas.so.12", "libcudnn.so.9"):
        (system / lib).write_bytes(b"\x7fELF stand-in")
    other = tmp_path / "mylibs"
    other.mkdir()
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{system}:{other}")
    code, report = doctor(capsys, "ldpath", *H200)
    assert code == 5
    ld = finding(report, "ld-library-path")
    assert ld["status"] == "problem" and str(system) in ld["found"] and "CUDA 12.x" in ld["found"]
    assert "torch is built for CUDA 13.0" in ld["found"]
    assert ld["fix"] == f"export LD_LIBRARY_PATH={other}"


def test_verify_results_fail_stale_and_old(capsys: pytest.CaptureFixture[str], bed: Path,
                                           srv: ChannelServer) -> None:
    prefix = make_env(capsys, bed, "stale")
    code, report = doctor(capsys, "stale", *H200)
    assert finding(report, "verify")["status"] == "warn" and "never verified" in finding(report, "verify")["found"]
    assert finding(report, "verify")["fix"] == "envkit verify stale"
    two_hours_ago = time.time() - 7200  # the env was made two hours ago, verified one hour ago
    for entry in [*(prefix / "conda-meta").iterdir(), *(prefix / SITE).glob("*.dist-info")]:
        os.utime(entry, (two_hours_ago, two_hours_ago))
    save_verify(prefix, "pass-h200.json", age_s=3600)
    assert finding(doctor(capsys, "stale", *H200)[1], "verify")["status"] == "ok"
    pip(prefix, "--index-url", f"{srv.url}/pypi/simple", "transformers")  # the env changes after the PASS
    v = finding(doctor(capsys, "stale", *H200)[1], "verify")
    assert v["status"] == "warn" and "PASS 1.0 h ago" in v["found"] and "the env changed after it" in v["found"]
    save_verify(prefix, "pass-h200.json", age_s=40 * 86400)
    v = finding(doctor(capsys, "stale", *H200)[1], "verify")
    assert "40 days ago" in v["found"] and "older than 30 days" in v["found"]
    v = finding(doctor(capsys, "stale", "--driver-version", "550.54.15", "--compute-capability", "8.0")[1], "verify")
    assert "it ran on another machine (driver 580.65.06 (CUDA 13.0); GPUs sm_90)" in v["found"]
    save_verify(prefix, "fail-cpu-build.json")
    code, report = doctor(capsys, "stale", *H200)
    assert code == 5 and finding(report, "verify")["status"] == "problem"


def test_all_default_and_errors(capsys: pytest.CaptureFixture[str], bed: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    good = make_env(capsys, bed, "one")
    save_verify(good, "pass-h200.json")
    make_env(capsys, bed, "two", "--cuda", "cpu")
    code, reports = doctor(capsys, "--all", *H200)
    assert code == 5 and [r["name"] for r in reports] == ["one", "two"]
    assert [r["healthy"] for r in reports] == [True, False]
    # default: the active env
    monkeypatch.setenv("CONDA_PREFIX", str(good))
    code, report = doctor(capsys, *H200)
    assert code == 0 and report["prefix"] == str(good)
    monkeypatch.delenv("CONDA_PREFIX")
    code, _out, err = run_cli(capsys, "doctor")
    assert code == 2 and "none is active" in err and "envkit doctor --all" in err
    code, _out, err = run_cli(capsys, "doctor", "nope")
    assert code == 1 and "no environment named 'nope'" in err
    code, _out, err = run_cli(capsys, "doctor", "one", "--all")
    assert code == 2


def test_a_truncated_prefix_rewritten_file_and_with_deep_a_same_size_edit(capsys: pytest.CaptureFixture[str],
                                                                        bed: Path) -> None:
    """A text file whose prefix was rewritten at link time has another size than the package's: its
    sha256_in_prefix is what tells a truncated one; a same-size edit of any file needs --deep (conda doctor)."""
    prefix = make_env(capsys, bed, "rewritten")
    code, report = doctor(capsys, "rewritten", *H200)
    assert finding(report, "files")["status"] == "ok"
    assert "prefix-rewritten text files match their sha256_in_prefix" in finding(report, "files")["found"]
    rewritten = prefix / "etc" / "envkit-standin" / "prefix.txt"
    text = rewritten.read_text()
    assert str(prefix) in text  # rewritten for this env: a file of its own, not a hard link into the cache
    rewritten.write_text(text[:10])
    code, report = doctor(capsys, "rewritten", *H200)
    files = finding(report, "files")
    assert code == 5 and files["status"] == "problem"
    assert "etc/envkit-standin/prefix.txt (sha256 differs from the record's sha256_in_prefix)" in files["found"]
    rewritten.write_text(text)
    target = prefix / SITE / "pip" / "__init__.py"
    data = target.read_bytes()
    target.unlink()  # a new inode: the package cache's hard-linked copy stays intact
    target.write_bytes(data[:-1] + (b"#" if data[-1:] != b"#" else b"!"))  # same size, other bytes
    code, report = doctor(capsys, "rewritten", *H200)
    assert finding(report, "files")["status"] == "ok"  # sizes alone cannot see it
    code, report = doctor(capsys, "rewritten", "--deep", *H200)
    files = finding(report, "files")
    assert code == 5 and files["status"] == "problem" and "pip: 0 missing, 1 modified" in files["found"]
    assert "pip/__init__.py (sha256 differs from the record's)" in files["found"]

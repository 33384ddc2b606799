"""`envkit detect` through the real entry point: output, exit codes and usage errors."""

from __future__ import annotations

import pytest

from helpers import FakeGpu, FakeNVML
from helpers import cli_json, run_cli


def test_detect_json_has_the_stable_keys(capsys: pytest.CaptureFixture[str], fake_nvml: FakeNVML) -> None:
    fake_nvml.gpus = [FakeGpu("NVIDIA H200", (9, 0), 150754820096, "GPU-69adc721")]
    code, data = cli_json(capsys, "detect", "--json")
    assert code == 0
    assert data["driver"] == {"version": "580.159.04", "cuda": "13.0", "source": "nvml"}
    assert data["gpus"] == [{"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0",
                             "memory_mib": 143771, "uuid": "GPU-69adc721"}]
    sel = data["selection"]
    assert {"flavor", "torch", "torchvision", "cuda", "specs", "pip_index_url", "reasons"} <= set(sel)
    assert (sel["flavor"], sel["cuda"], sel["pip_index_url"]) == ("conda-forge", "13.0", None)
    assert sel["specs"][:2] == [f"pytorch={sel['torch']}=cuda*", "cuda-version=13.0"]


def test_detect_human_output_explains(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "detect", "--driver-version", "470.82.01", "--compute-capability", "8.0",
                           "--flavor", "pip")
    assert code == 0
    assert "470.82.01" in out and "cu118" in out and "minor version compatibility" in out


def test_no_driver_is_exit_0_with_a_cpu_notice(capsys: pytest.CaptureFixture[str], no_nvml: None,
                                               monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("envkit.detect.sources.from_driver_files", lambda root: __import__(
        "envkit.detect.sources", fromlist=["_Partial"])._Partial())
    code, out, _ = run_cli(capsys, "detect")
    assert code == 0 and "CPU build" in out


def test_conda_override_cuda_env(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Precedence: flags > ENVKIT_* > CONDA_OVERRIDE_CUDA > detection (issue 12)."""
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.4")
    code, data = cli_json(capsys, "detect", "--json", "--compute-capability", "9.0")
    assert code == 0 and data["cuda_override"] == "12.4" and data["selection"]["cuda"] is not None
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "")
    code, data = cli_json(capsys, "detect", "--json", "--compute-capability", "9.0")
    assert code == 0 and data["selection"]["cuda"] is None  # the environment beats detection
    # ... but an explicit --driver-version beats CONDA_OVERRIDE_CUDA='' (it was a CPU build before)
    code, data = cli_json(capsys, "detect", "--json", "--driver-version", "580.65.06", "--compute-capability", "9.0")
    assert code == 0 and data["cuda_override"] is None and data["selection"]["cuda"] == "13.0"
    assert any("CONDA_OVERRIDE_CUDA='' ignored" in n for n in data["notes"])
    # ENVKIT_CUDA (the --cuda default) beats CONDA_OVERRIDE_CUDA, and the --cuda flag beats ENVKIT_CUDA
    monkeypatch.setenv("ENVKIT_CUDA", "12.6")
    code, data = cli_json(capsys, "detect", "--json", "--compute-capability", "9.0")
    assert code == 0 and data["selection"]["cuda"] is not None  # a GPU build despite CONDA_OVERRIDE_CUDA=""
    code, data = cli_json(capsys, "detect", "--json", "--compute-capability", "9.0", "--cuda", "cpu")
    assert code == 0 and data["selection"]["cuda"] is None


@pytest.mark.parametrize(("args", "words"), [
    (["--cuda", "12.x"], "use auto, cpu or a CUDA version"),
    (["--driver-version", "banana"], "use an NVIDIA driver version"),
    (["--compute-capability", "99"], "use a compute capability like"),
    (["--python", "three"], "use a Python version"),
    (["--flavor", "nightly"], "conda-forge"),
])
def test_bad_values_are_usage_errors(capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    code, _out, err = run_cli(capsys, "detect", *args)
    assert code == 2
    assert words in err


def test_no_build_is_an_error_with_a_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "detect", "--driver-version", "575.57.08", "--compute-capability", "12.0",
                             "--torch", "2.6", "--flavor", "pip")
    assert code == 1
    assert "sm_120" in err and "fix:" in err and "2.7" in err
    code, data = cli_json(capsys, "detect", "--json", "--driver-version", "575.57.08", "--compute-capability",
                          "12.0", "--torch", "2.6", "--flavor", "pip")
    assert code == 1 and data["selection"] is None and "sm_120" in data["error"]


def test_cuda_above_driver(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "detect", "--driver-version", "535.104.05", "--cuda", "13.0")
    assert code == 1 and "update the NVIDIA driver" in err
    code, _out, _err = run_cli(capsys, "detect", "--driver-version", "535.104.05", "--cuda", "13.0",
                               "--no-driver-check")
    assert code == 0


def test_help_lists_env_vars_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0 and "CONDA_OVERRIDE_CUDA" in out and "Exit codes" in out


def test_cli_import_stays_light() -> None:
    import subprocess
    import sys

    code = ("import sys, envkit.cli; heavy=[m for m in ('torch','rattler','pynvml','jinja2','rich','yaml') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_detect_shows_the_pytorch_index_mirror_render_writes(capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    """ENVKIT_PYTORCH_INDEX (or config `pytorch_index`) moves the index URL in detect as it does in render,
    with the mirror's credentials left out of both."""
    machine = ("--driver-version", "580.65.06", "--compute-capability", "9.0", "--flavor", "pip")
    code, data = cli_json(capsys, "detect", "--json", *machine)
    assert code == 0 and data["selection"]["pip_index_url"] == "https://download.pytorch.org/whl/cu130"
    monkeypatch.setenv("ENVKIT_PYTORCH_INDEX", "https://bob:s3cret@mirror.example/pytorch-whl/")
    code, data = cli_json(capsys, "detect", "--json", *machine)
    assert code == 0 and data["selection"]["pip_index_url"] == "https://mirror.example/pytorch-whl/cu130"
    assert "pip wheels from https://mirror.example/pytorch-whl/cu130 inside the conda env" in data["selection"]["reasons"]
    code, out, _ = run_cli(capsys, "detect", *machine)
    assert code == 0 and "index: https://mirror.example/pytorch-whl/cu130" in out and "s3cret" not in out
    code, rendered, _ = run_cli(capsys, "render", "dl_train", *machine)
    assert code == 0 and "--extra-index-url https://mirror.example/pytorch-whl/cu130" in rendered
    assert "download.pytorch.org" not in rendered and "s3cret" not in rendered
    # the config file's pytorch_index, when the variable is unset
    monkeypatch.delenv("ENVKIT_PYTORCH_INDEX")
    config = tmp_path / "config.yaml"
    config.write_text("pytorch_index: https://mirror.corp/whl\n")
    monkeypatch.setenv("ENVKIT_CONFIG", str(config))
    code, data = cli_json(capsys, "detect", "--json", *machine)
    assert code == 0 and data["selection"]["pip_index_url"] == "https://mirror.corp/whl/cu130"


def test_detect_fits_80_columns_and_every_reason_reads_whole(capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    machine = ("detect", "--driver-version", "535.104.05", "--compute-capability", "8.0", "--flavor", "pip")
    code, data = cli_json(capsys, *machine, "--json")
    assert code == 0
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, *machine)
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80, out
    flowing = " ".join(out.split())  # wrapped at spaces, with the reasons' later lines indented under them
    long_reasons = [r for r in data["selection"]["reasons"] if len(r) > 76]
    assert long_reasons and all(" ".join(r.split()) in flowing for r in data["selection"]["reasons"])

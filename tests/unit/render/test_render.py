"""render: golden files, conda-lock as a third-party parser, --from on real-world shapes, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from helpers import FIXTURES
from golden_matrix import CASES, Case, render_case
from helpers import run_cli

GOLDEN = FIXTURES / "golden"
SIM = ["--driver-version", "580.159.04", "--compute-capability", "9.0"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_golden_files_byte_for_byte(case: Case) -> None:
    expected = (GOLDEN / f"{case.id}.yml").read_text(encoding="utf-8")
    assert render_case(case) == expected, "re-run scripts/regen_golden.py if the change is intended"
    assert render_case(case) == expected  # deterministic


def conda_lock_parse(path: Path, tmp_path: Path):  # noqa: ANN201
    """conda-lock 4's environment.yml parser (rejects pip index-option lines: strip them first)."""
    from conda_lock.src_parser.environment_yaml import parse_environment_file

    data = yaml.safe_load(path.read_text())
    for dep in data["dependencies"]:
        if isinstance(dep, dict):
            dep["pip"] = [p for p in dep["pip"] if not p.startswith("-")]
    stripped = tmp_path / f"stripped-{path.name}"
    stripped.write_text(yaml.safe_dump(data, sort_keys=False))
    mapping = tmp_path / "mapping.json"
    mapping.write_text("{}")
    return parse_environment_file(stripped, ["linux-64"], f"file://{mapping}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_golden_file_parses_with_conda_lock(case: Case, tmp_path: Path) -> None:
    path = GOLDEN / f"{case.id}.yml"
    spec = conda_lock_parse(path, tmp_path)
    deps = {d.name: d for d in spec.dependencies["linux-64"]}
    assert "python" in deps
    if case.flavor == "pip":
        assert deps["torch"].manager == "pip"
        text = path.read_text()
        variant = "cu130" if case.gpu else "cpu"
        assert f"--extra-index-url https://download.pytorch.org/whl/{variant}" in text
        assert f"torch==2.14.0+{variant}" in text  # the index line and the local-version pin travel together
    else:
        assert deps["pytorch"].manager == "conda"
    if case.flavor == "conda-forge":
        assert deps["pytorch"].build == ("cuda*" if case.gpu else "cpu*")
        if case.gpu:
            assert deps["cuda-version"].version.strip("=") in ("13.0", "13.0.*")
    if case.flavor == "pytorch":
        names = set(deps)
        assert ("pytorch-cuda" in names) == case.gpu and ("cpuonly" in names) != case.gpu
    channels = [c.url for c in spec.channels]
    assert "nodefaults" not in channels
    if case.mirror == "tuna":
        assert all(c.startswith("https://mirrors.tuna.tsinghua.edu.cn/") for c in channels)
        assert "--index-url https://pypi.tuna.tsinghua.edu.cn/simple" in path.read_text()
    assert {"transformers", "datasets"} <= {d.name for d in spec.dependencies["linux-64"] if d.manager == "pip"}


def test_header_is_comments_only_and_names_the_machine() -> None:
    text = (GOLDEN / "dl_train-conda-forge-cuda-direct.yml").read_text()
    header = text.split("name:")[0]
    assert all(line.startswith("#") for line in header.splitlines())
    assert "580.159.04" in header and "torch 2.13.0" in header
    assert "prefix:" not in text and "nodefaults" not in text


def test_render_writes_atomically(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "env.yml"
    code, stdout, err = run_cli(capsys, "render", "minimal", "-o", str(out), *SIM)
    assert code == 0 and stdout == "" and "wrote" in err
    assert yaml.safe_load(out.read_text())["name"] == "minimal"
    assert [p.name for p in tmp_path.iterdir()] == ["env.yml"]


def test_unwritable_output_leaves_no_partial_file(capsys: pytest.CaptureFixture[str]) -> None:
    target = Path("/proc/envkit-render-test/env.yml")  # unwritable for every user, root included
    code, out, err = run_cli(capsys, "render", "minimal", "-o", str(target), *SIM)
    assert code == 1 and "cannot write" in err and "fix:" in err and out == ""
    assert not target.exists()


def test_output_into_a_missing_path_under_a_file_fails_cleanly(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _out, err = run_cli(capsys, "render", "minimal", "-o", str(blocker / "env.yml"), *SIM)
    assert code == 1 and "cannot write" in err
    assert blocker.read_text() == "x"


def test_unknown_spec_lists_the_available_ones(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "render", "nope", *SIM)
    assert code == 1 and "dl_train" in err and "minimal" in err and "nlp" in err


@pytest.mark.parametrize("name", ["../etc", "a/b", "..", "x y"])
def test_spec_names_with_separators_are_rejected(capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, _out, err = run_cli(capsys, "render", name, *SIM)
    assert code != 0 and ("invalid spec name" in err or "does not exist" in err)


@pytest.mark.parametrize("env_name", ["../evil", "a/b", "base", "x:y"])
def test_env_names_with_separators_are_rejected(capsys: pytest.CaptureFixture[str], env_name: str) -> None:
    code, _out, err = run_cli(capsys, "render", "minimal", "--name", env_name, *SIM)
    assert code == 2 and "invalid environment name" in err


def write_spec(tmp_path: Path, body: str) -> str:
    path = tmp_path / "custom.yaml"
    path.write_text(body)
    return str(path)


@pytest.mark.parametrize(("body", "words"), [
    ("conda:\n  - numpy\nbogus: 1\n", ":3: key 'bogus': unknown key"),
    ("conda:\n  - 'numpy\"; rm -rf /'\n", "not allowed"),
    ("conda:\n  - \"x{{ 7*7 }}\"\n", "'{{'"),
    ("conda:\n  - \"evil: {a: b}\"\n", "':'"),
    ("conda:\n  - \"numpy\\nfoo\"\n", "'\\n'"),
    ("pip:\n  - \"pkg; os.system('x')\"\n", "not allowed"),
    ("conda:\n  - numpy=1.26\n  - numpy=2.0\n", "conflicting pins for numpy"),
    ("conda:\n  - pytorch=2.1\n", "chosen per machine"),
    ("conda:\n  - numpy=1.26=py311_0\n", "build string"),
    ("python: banana\n", "not a Python version"),
    ("conda: [numpy\n", "YAML syntax error"),
    ("variables:\n  BAD-NAME: x\n", "variable name"),
    ("torch: [torchtext]\n", "not a torch-family package"),
])
def test_bad_specs_are_rejected_with_file_and_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   body: str, words: str) -> None:
    spec = write_spec(tmp_path, body)
    code, out, err = run_cli(capsys, "render", "--spec", spec, *SIM)
    assert code == 1, out
    assert words in err and "custom.yaml" in err
    assert out == ""  # nothing rendered


def test_user_specs_come_before_packaged_ones(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "specs"
    user.mkdir()
    (user / "minimal.yaml").write_text("description: team minimal\nconda:\n  - rich\n")
    monkeypatch.setenv("ENVKIT_SPEC_PATH", str(user))
    code, out, _ = run_cli(capsys, "render", "minimal", *SIM)
    assert code == 0 and "  - rich" in out


def test_custom_mirror_credentials_never_reach_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "render", "dl_train", "--mirror", "https://bob:s3cret@mirror.corp/t/tk-123/conda",
                           *SIM)
    assert code == 0
    assert "s3cret" not in out and "tk-123" not in out and "bob" not in out
    assert "https://mirror.corp/conda/conda-forge" in out and "credentials were not written" in out


def test_mirror_lacking_a_channel_fails_before_writing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "env.yml"
    code, _stdout, err = run_cli(capsys, "render", "dl_train", "--flavor", "pytorch", "--torch", "2.5",
                                 "--mirror", "tuna", "-o", str(out), *SIM)
    assert code == 1 and "does not carry the channel(s) nvidia" in err and "--flavor conda-forge" in err
    assert not out.exists()


def test_unknown_mirror(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "render", "minimal", "--mirror", "nowhere", *SIM)
    assert code == 1 and "tuna" in err


FROM = FIXTURES / "from"


def adapted(capsys: pytest.CaptureFixture[str], name: str, *extra: str) -> tuple[dict, str, str]:
    code, out, err = run_cli(capsys, "render", "--from", str(FROM / name), *SIM, *extra)
    assert code == 0, err
    return yaml.safe_load(out), out, err


def deps_of(data: dict) -> tuple[list[str], list[str]]:
    conda = [d for d in data["dependencies"] if isinstance(d, str)]
    pip = next((d["pip"] for d in data["dependencies"] if isinstance(d, dict)), [])
    return conda, pip


def test_from_raw_conda_export(capsys: pytest.CaptureFixture[str]) -> None:
    data, text, err = adapted(capsys, "conda_export_raw.yml")
    conda, pip = deps_of(data)
    assert "prefix" not in data and "dropped prefix" in err
    assert not any(d.count("=") >= 2 and "cuda*" not in d for d in conda), "build strings must go"
    assert "numpy=1.26.4" in conda and "pandas=2.2.1" in conda
    assert not any(d.startswith(("pytorch-cuda", "pytorch-mutex")) for d in conda)
    # the file's exact torch, its CUDA (11.8 runs on this driver and GPU) and its own torchvision pair are kept; the
    # CUDA 11.8 runtime packages of the export stay at their versions, without the old machine's build strings
    assert "pytorch=2.1.0=cuda*" in conda and "cuda-version=11.8" in conda and "torchvision=0.16.0" in conda
    assert "cuda-cudart=11.8.89" in conda and "cuda-runtime=11.8.0" in conda
    assert pip == ["tqdm==4.66.2", "wandb==0.16.4"]
    assert data["channels"] == ["conda-forge", "defaults"] and data["name"] == "train"


def test_from_cudatoolkit_era_file_stops_on_an_h200(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "render", "--from", str(FROM / "cudatoolkit_11_3.yml"), *SIM)
    assert code == 1 and out == ""
    assert "torch 1.11.0 (pinned in cudatoolkit_11_3.yml) cannot be installed on this machine" in err
    assert "architecture: no pytorch build of torch 1.11.0 has code for sm_90" in err
    assert "nearest versions that work here: --torch 2.0 (torch 2.0.1, CUDA 11.8)" in err


def test_from_cudatoolkit_era_file_keeps_torch_on_an_a10(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "render", "--from", str(FROM / "cudatoolkit_11_3.yml"),
                             "--driver-version", "550.54.15", "--compute-capability", "8.6")
    assert code == 0, err
    conda, _ = deps_of(yaml.safe_load(out))
    # cudatoolkit 11.3 runs on this driver and has sm_86: the file's CUDA stays (it moved to 11.5 before)
    assert {"pytorch=1.11.0=*cuda*", "cudatoolkit=11.3", "torchvision=0.12.0", "torchaudio=0.11.0", "scipy",
            "python=3.9"} <= set(conda)
    assert "CUDA 11.3: the CUDA the file's torch was built for runs here, so it stays" in err


def test_torch_on_the_command_line_overrides_the_file_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    data, _text, err = adapted(capsys, "cudatoolkit_11_3.yml", "--torch", "2.0")
    conda, _ = deps_of(data)
    assert "torch 1.11.0 -> 2.0.1 (--torch on the command line)" in err
    assert "torchvision 0.12.0 -> 0.15.2 (pairs with torch 2.0.1)" in err
    assert not any(d.startswith("cudatoolkit") for d in conda)


def test_from_pytorch_cuda_file_keeps_its_torch(capsys: pytest.CaptureFixture[str]) -> None:
    """torch 2.0.1 has no conda-forge build: the pytorch channel serves it; the version never moves."""
    data, _text, err = adapted(capsys, "pytorch_cuda_11_8.yml")
    conda, _ = deps_of(data)
    assert data["channels"][:2] == ["pytorch", "nvidia"]
    assert "pytorch=2.0.1" in conda and "pytorch-cuda=11.8" in conda
    assert "comes from the pytorch flavor" in err
    assert {"matplotlib", "jupyter"} <= set(conda)


def test_from_pip_cu118_file_keeps_the_pip_flavor(capsys: pytest.CaptureFixture[str]) -> None:
    data, _text, err = adapted(capsys, "pip_cu118.yml")
    _, pip = deps_of(data)
    # the file's own cu118 build runs on the H200 (builder_cu118 has sm_90): kept, with its pair
    assert "--extra-index-url https://download.pytorch.org/whl/cu118" in pip
    assert "torch==2.1.0+cu118" in pip and "torchvision==0.16.0+cu118" in pip and "transformers==4.38.2" in pip
    assert not any("cu121" in p for p in pip)


def test_from_mirror_channels(capsys: pytest.CaptureFixture[str]) -> None:
    # torch 2.5.1 with pytorch-cuda=12.4 runs here: it stays on its pytorch channel (conda-forge has no 12.4 build)
    data, _text, err = adapted(capsys, "mirror_channels.yml")
    assert data["channels"] == ["pytorch", "nvidia", "conda-forge"]
    assert "-> conda-forge" in err and "-> pytorch" in err
    # USTC does not mirror nvidia: keeping CUDA 12.4 is impossible there, so torch 2.5.1 comes from conda-forge
    data, _text, _err = adapted(capsys, "mirror_channels.yml", "--mirror", "ustc")
    assert data["channels"] == ["https://mirrors.ustc.edu.cn/anaconda/cloud/conda-forge"]


def test_from_channel_prefixes_and_variables(capsys: pytest.CaptureFixture[str]) -> None:
    data, _text, err = adapted(capsys, "channel_prefix_vars.yml", "--name", "renamed")
    conda, _ = deps_of(data)
    assert data["name"] == "renamed"
    assert "conda-forge::numpy=1.26" in conda and "cuda-toolkit" in conda
    assert not any(d.startswith(("pytorch::", "nvidia::")) for d in conda)
    assert data["variables"] == {"CUDA_MODULE_LOADING": "LAZY", "OMP_NUM_THREADS": "8"}


def test_from_file_with_yaml_error_names_the_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("name: x\ndependencies:\n  - numpy\n  - [unclosed\n")
    code, _out, err = run_cli(capsys, "render", "--from", str(bad), *SIM)
    assert code == 1 and "bad.yml:" in err and "YAML syntax error" in err


def test_from_file_injection_is_rejected(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(json.dumps({"name": "x", "channels": ["conda-forge"],
                               "dependencies": ["numpy\nprefix: /etc"]}))
    code, out, err = run_cli(capsys, "render", "--from", str(bad), *SIM)
    assert code == 1 and out == "" and "not allowed" in err


def test_output_onto_a_directory_leaves_no_temp_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The rename is the last step: when it fails (here: the target is a folder) the temp file goes."""
    from envkit.errors import EnvkitError
    from envkit.fsutil import atomic_write_text

    target = tmp_path / "env.yml"
    target.mkdir()
    code, _out, err = run_cli(capsys, "render", "minimal", "-o", str(target), *SIM)
    assert code == 2 and "is a directory" in err  # refused before anything is written
    with pytest.raises(EnvkitError, match="cannot write"):
        atomic_write_text(target, "name: x\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env.yml"] and list(target.iterdir()) == []


def test_config_file_defaults_come_after_flags_and_env(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("flavor: pip\nmirror: tuna\ncuda: '12.4'\n")
    monkeypatch.setenv("ENVKIT_CONFIG", str(config))
    code, out, _ = run_cli(capsys, "render", "minimal")
    assert code == 0 and "torch==2.14.0+cu126" in out and "pypi.tuna.tsinghua.edu.cn" in out
    monkeypatch.setenv("ENVKIT_FLAVOR", "conda-forge")  # the environment beats the file
    code, out, _ = run_cli(capsys, "render", "minimal", "--mirror", "ustc")  # and a flag beats both
    assert code == 0 and "pytorch=" in out and "mirrors.ustc.edu.cn" in out
    config.write_text("cuda: twelve\n")
    code, _out, err = run_cli(capsys, "render", "minimal")
    assert code == 2 and "config.yaml:1: cuda" in err
    config.write_text("- not a mapping\n")
    code, _out, err = run_cli(capsys, "render", "minimal")
    assert code == 1 and "must hold a mapping" in err


def test_output_dash_is_stdout_not_a_file_named_dash(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _err = run_cli(capsys, "render", "minimal", "-o", "-", *SIM)
    assert code == 0 and "dependencies:" in out
    assert not (tmp_path / "-").exists()

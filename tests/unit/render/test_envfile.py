"""What conda's environment.yml accepts, envkit accepts: MatchSpec forms checked against conda's own
parser (vendored in conda-lock), pip requirements-file lines against pip's grammar, channels; and
what stays refused (injection into the YAML or a template)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from helpers import run_cli

A10 = ["--driver-version", "550.54.15", "--compute-capability", "8.6"]

MATCHSPECS = [
    "numpy", "numpy=1.26", "numpy==1.26.4", "numpy>=1.24,<2", "numpy 1.26.*", "numpy=1.26.4=py311h64a7726_0",
    "conda-forge::numpy", "nvidia/label/cuda-11.8.0::cuda-toolkit", "numpy[version='>=1.24',build=*py311*]",
    "numpy >= 1.24, <2", "numpy 1.26.4 py311h64a7726_0", "conda-forge/linux-64::numpy=1.26", "numpy=1.26.*",
    "libgcc-ng>=12", "numpy !=1.25.0", "numpy ~=1.26.0", "numpy[md5=abc123]", "pytorch=*=cuda*",
]


@pytest.mark.parametrize("text", MATCHSPECS)
def test_every_matchspec_form_means_the_same_after_envkit(text: str) -> None:
    """conda's MatchSpec reads envkit's rendering exactly as it reads the original."""
    from conda_lock._vendor.conda.models.match_spec import MatchSpec

    from envkit.render.envfile import parse_conda_spec, yaml_scalar

    rendered = parse_conda_spec(text).render()
    assert yaml.safe_load(f"- {yaml_scalar(rendered)}") == [rendered]
    before, after = MatchSpec(text), MatchSpec(rendered)
    for key in ("name", "version", "build", "channel", "subdir", "md5"):
        assert str(before.get(key)) == str(after.get(key)), (key, text, rendered)


PIP_LINES = [
    "-e .", "--editable=git+https://github.com/openai/CLIP.git@main#egg=clip", "-e ./vendor/lib[dev]",
    'pytype>=2020.6.1; platform_system != "Windows"', "black[jupyter]==23.1.0", "-r requirements.txt",
    "-r file:requirements.txt", "-c constraints.txt", "--find-links ./wheels", "-f https://data.pyg.org/whl/t.html",
    "--pre", "--index-url https://pypi.org/simple", "--extra-index-url https://${TOKEN}@pypi.example.com/simple",
    "--trusted-host pypi.example.com", "https://example.com/pkg-1.0-py3-none-any.whl", "./wheels/pkg-1.0-py3-none-any.whl",
    "pkg==1.0 --hash=sha256:58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f",
    "clip @ git+https://github.com/openai/CLIP.git@a1d0717", "git+https://github.com/huggingface/transformers.git",
    "tensorflow-cpu==2.15.0; sys_platform == 'linux'", "--prefer-binary", "--only-binary :all:",
]


@pytest.mark.parametrize("line", PIP_LINES)
def test_every_pip_requirements_file_line_is_kept_and_survives_yaml(line: str) -> None:
    from envkit.render.envfile import check_pip_line, yaml_scalar

    kept = check_pip_line(line)
    assert yaml.safe_load(f"- {yaml_scalar(kept)}") == [kept]
    assert kept.split()[-1] == line.split("=", 1)[-1].split()[-1] or kept.endswith(line.split()[-1])


@pytest.mark.parametrize(("line", "words"), [
    ("numpy\nprefix: /etc", "line break"),
    ("x{{ 7*7 }}", "'{{'"),
    ("pkg; os.system('x')", "not allowed"),
    ("evil: {a: b}", "not allowed"),
    ("-e $(rm -rf ~)", "not allowed"),
    ("--no-such-option x", "unsupported pip option"),
    ("--pre now", "takes no value"),
])
def test_pip_injection_stays_refused(line: str, words: str) -> None:
    from envkit.errors import RenderError
    from envkit.render.envfile import check_pip_line

    with pytest.raises(RenderError, match=None) as info:
        check_pip_line(line)
    assert words in info.value.message


@pytest.mark.parametrize(("spec", "words"), [
    ("numpy\nprefix: /etc", "'\\n'"), ("x{{ 7*7 }}", "'{{'"), ("evil: {a: b}", "':'"),
    ('numpy"; rm -rf /', "'\"'"), ("numpy[version='{{x}}']", "'{{'"), ("numpy[evil=1]", "unknown MatchSpec key"),
    ("bad channel::numpy", "not a channel"),
])
def test_conda_injection_stays_refused(spec: str, words: str) -> None:
    from envkit.errors import RenderError
    from envkit.render.envfile import parse_conda_spec

    with pytest.raises(RenderError) as info:
        parse_conda_spec(spec)
    assert words in info.value.message


@pytest.mark.parametrize("channel", ["conda-forge", "nvidia/label/cuda-11.8.0", "defaults", "main", "r", "msys2",
                                     "https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/pytorch/",
                                     "file:///srv/channel", "/opt/local-channel", "conda-forge/label/gcc7"])
def test_channels_conda_takes(channel: str) -> None:
    from envkit.render.envfile import check_channel

    assert check_channel(channel) == channel


def write(tmp_path: Path, body: str, name: str = "environment.yml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def test_nodefaults_is_dropped_with_a_note(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    env = write(tmp_path, "name: x\nchannels:\n  - conda-forge\n  - nodefaults\ndependencies:\n  - numpy\n")
    code, out, err = run_cli(capsys, "render", "--from", str(env), *A10)
    assert code == 0, err
    assert yaml.safe_load(out)["channels"] == ["conda-forge"]
    assert "dropped channel nodefaults (conda 26.7 fetches it as a channel and fails" in err


def test_a_torch_free_file_is_passed_through(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    env = write(tmp_path, "name: cli\nchannels:\n  - file:///srv/channel\ndependencies:\n  - numpy=1.26\n"
                "  - jq\n  - pip:\n    - 'rich; python_version >= \"3.8\"'\nvariables:\n  A: b\n")
    code, out, err = run_cli(capsys, "render", "--from", str(env), *A10)
    assert code == 0, err
    data = yaml.safe_load(out)
    assert data["channels"] == ["file:///srv/channel"]
    assert data["dependencies"] == ["numpy=1.26", "jq", "pip", {"pip": ['rich; python_version >= "3.8"']}]
    assert data["variables"] == {"A": "b"} and "pytorch" not in out and "conda-forge" not in out


@pytest.mark.parametrize(("header", "expected"), [
    ("name: base\n", "environment"), ("", "environment"), ("name: 'a b/c'\n", "c"), ("name: 'x y'\n", "environment"),
    ("name: 12\n", "environment"), ("name: ok-name\n", "ok-name"),
])
def test_names(capsys: pytest.CaptureFixture[str], tmp_path: Path, header: str, expected: str) -> None:
    env = write(tmp_path, header + "channels:\n  - conda-forge\ndependencies:\n  - numpy\n")
    code, out, err = run_cli(capsys, "render", "--from", str(env), *A10)
    assert code == 0, err
    assert yaml.safe_load(out)["name"] == expected
    if expected == "environment":
        assert "using 'environment' from the file name (pass --name to choose)" in err
    code, out, _ = run_cli(capsys, "render", "--from", str(env), "--name", "chosen", *A10)
    assert yaml.safe_load(out)["name"] == "chosen"


def test_a_pinned_torch_is_kept_with_its_pair_and_this_machines_cuda(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    env = write(tmp_path, "name: p\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.9\n  - pip\n  - pip:\n"
                "    - -f https://download.pytorch.org/whl/torch_stable.html\n    - torch==1.11.0+cu102\n"
                "    - torchvision==0.12.0+cu102\n    - -f https://data.pyg.org/whl/torch-1.11.0+cu102.html\n"
                "    - torch-scatter==2.0.9\n")
    code, out, err = run_cli(capsys, "render", "--from", str(env), *A10)
    assert code == 0, err
    pip = yaml.safe_load(out)["dependencies"][-1]["pip"]
    assert pip[:3] == ["--extra-index-url https://download.pytorch.org/whl/cu113", "torch==1.11.0+cu113",
                       "torchvision==0.12.0+cu113"]
    assert "-f https://data.pyg.org/whl/torch-1.11.0+cu113.html" in pip and "torch-scatter==2.0.9" in pip
    assert "torch 1.11.0+cu102 -> 1.11.0+cu113 (this machine's build)" in err
    assert "(PyG's page for torch 1.11 cu113: owned.yaml pyg_pages;" in err
    # --torch 1.13 would leave torch-scatter 2.0.9 (built for torch 1.11) beside torch 1.13: stop, name the coupling
    code, out, err = run_cli(capsys, "render", "--from", str(env), *A10, "--torch", "1.13")
    assert code == 1 and out == ""
    assert "torch-scatter==2.0.9 (environment.yml line 12) is built against torch 1.11" in err
    assert "--torch 1.11 (the torch these pins were built for)" in err


def test_a_python_the_pinned_torch_lacks_names_the_python_rule(capsys: pytest.CaptureFixture[str],
                                                                tmp_path: Path) -> None:
    env = write(tmp_path, "name: p\nchannels:\n  - pytorch\ndependencies:\n  - python=3.11\n  - pytorch=1.12.1\n"
                "  - cudatoolkit=11.6\n")
    code, out, err = run_cli(capsys, "render", "--from", str(env), *A10)
    assert code == 1 and out == ""
    assert "python: torch 1.12.1 supports python 3.7-3.10, not 3.11" in err
    assert "--torch 1.12 --python 3.10 (torch 1.12.1, CUDA 11.6)" in err


def test_an_old_driver_names_the_driver_rule(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """CUDA 10.x has no minor version compatibility: a 418 driver (CUDA 10.1) cannot run a cu102 build."""
    env = write(tmp_path, "name: p\nchannels:\n  - pytorch\ndependencies:\n  - python=3.8\n  - pytorch=1.9.0\n"
                "  - cudatoolkit=10.2\n")
    code, _out, err = run_cli(capsys, "render", "--from", str(env), "--driver-version", "418.87.00",
                              "--compute-capability", "7.0")
    assert code == 1
    assert "driver: torch 1.9.0's oldest pytorch build that runs on these GPUs needs CUDA 10.2 (driver >= 440.33)" \
        in err


# found on the development part of the real corpus (tests/fixtures/corpus_real): charlie-x-ray's
# `channel/subdir::name==ver=build` exports, aip-servers' `jaxlib=0.4.23[cuda118]`, rail-berkeley's `imageio[ffmpeg]`
def test_name_double_equals_version_equals_build_is_read_as_conda_reads_it() -> None:
    from envkit.render.envfile import parse_conda_spec

    spec = parse_conda_spec("conda-forge/linux-64::python==3.11.3=h2755cc3_0_cpython")
    assert (spec.name, spec.exact_version, spec.build, spec.channel) == \
        ("python", "3.11.3", "h2755cc3_0_cpython", "conda-forge/linux-64")
    again = parse_conda_spec(spec.render())
    assert (again.exact_version, again.build, again.channel) == ("3.11.3", "h2755cc3_0_cpython", "conda-forge/linux-64")


def test_a_bracket_without_key_value_is_ignored_as_conda_ignores_it() -> None:
    from envkit.render.envfile import parse_conda_spec

    assert parse_conda_spec("imageio[ffmpeg]").render() == "imageio"
    assert parse_conda_spec("jaxlib=0.4.23[cuda118]").render() == "jaxlib=0.4.23"
    with pytest.raises(Exception):
        parse_conda_spec("numpy[version='>=1',bogus=2]")


def test_a_quoted_option_value_is_one_word_as_pip_reads_it() -> None:
    """jungdaesuh/simsopt envs/jax.yml: `-e "..[JAX,dev]"` (pip splits option lines with shlex)."""
    from envkit.render.envfile import parse_pip_line

    line = parse_pip_line('-e "..[JAX,dev]"')
    assert (line.option, line.arg, line.text) == ("-e", "..[JAX,dev]", "-e ..[JAX,dev]")
    with pytest.raises(Exception):
        parse_pip_line("-e \"a'b\"")


def conda_lock_reads(path: Path) -> object:
    """conda-lock's own environment.yml parser (4.0.3: src_parser/environment_yaml.py), the reader of record."""
    parser = pytest.importorskip("conda_lock.src_parser.environment_yaml")
    mapping = path.with_name("pypi-to-conda.json")
    mapping.write_text("{}")  # no download of the name mapping: a local, empty one
    return parser.parse_environment_file(path, ["linux-64"], mapping_url=mapping.as_uri())


@pytest.mark.parametrize("mirror", [False, True], ids=["pip-index-lines", "mirror"])
def test_the_conda_lock_form_is_what_conda_lock_parses(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                       mirror: bool) -> None:
    """Plain renders keep pip's index lines (conda env create passes them to pip); conda-lock rejects them
    (InvalidRequirement), so --conda-lock moves them to its pip-repositories: and names what it dropped."""
    from packaging.requirements import InvalidRequirement

    env = write(tmp_path, "name: x\nchannels: [conda-forge]\ndependencies:\n  - numpy\n  - pip:\n"
                "    - --index-url https://pypi.corp.example/simple\n    - --extra-index-url https://extra.example/simple\n"
                "    - --trusted-host pypi.corp.example\n    - corp-utils==1.2\n")
    args = ["render", "--from", str(env), *A10, *(["--mirror", "https://mirror.example"] if mirror else [])]
    code, out, err = run_cli(capsys, *args, "-o", str(tmp_path / "plain.yml"))
    assert code == 0, err
    with pytest.raises(InvalidRequirement):
        conda_lock_reads(tmp_path / "plain.yml")  # the failure --conda-lock exists for
    code, out, err = run_cli(capsys, *args, "--conda-lock", "-o", str(tmp_path / "cl.yml"))
    assert code == 0, err
    spec = conda_lock_reads(tmp_path / "cl.yml")
    index = "https://mirror.example/pypi/simple" if mirror else "https://pypi.corp.example/simple"
    assert f"--index-url {index}" in (tmp_path / "plain.yml").read_text()
    assert [r.url for r in spec.pip_repositories] == [index, "https://extra.example/simple"]
    assert spec.allow_pypi_requests is False  # --index-url replaced PyPI; conda-lock must not fall back to it
    assert "corp-utils" in {d.name for d in spec.dependencies["linux-64"]}
    assert "note: conda-lock has no place for the pip option '--trusted-host pypi.corp.example'" in err
    assert "conda env create ignores (it would use PyPI)" in (tmp_path / "cl.yml").read_text()


def test_export_conda_lock_form(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from envkit.render.envfile import EnvFile, for_conda_lock

    plain = EnvFile("x", ("conda-forge",), ("python=3.11",), ("requests==2.32.3",))
    assert for_conda_lock(plain) == (plain, ())  # nothing to move: the same file, no note
    code, _o, err = run_cli(capsys, "export", "--prefix", str(tmp_path), "--format", "lock", "--conda-lock")
    assert code == 2 and "--conda-lock apply to --format yaml only" in err

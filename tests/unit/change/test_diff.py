"""The change diff and the torch guard's reading of a plan (pure: rows in, words out)."""

from __future__ import annotations

from envkit.change.diff import Row, blame, diff, names_torch, spec_name, torch_change, torch_pins
from envkit.engines.base import PlannedPackage


def rows(*items: tuple[str, str, str]) -> dict[str, Row]:
    return {n: Row(n, v, b, 100, False) for n, v, b in items}


def planned(name: str, depends: tuple[str, ...] = ()) -> PlannedPackage:
    return PlannedPackage(name, "1", "0", 0, "c", "noarch", f"{name}-1-0.conda", "u", 1, None, depends, False)


CUDA_ENV = rows(("pytorch", "2.13.0", "cuda130_generic_py311_h0_200"), ("cuda-version", "13.0", "h_3"),
                ("python", "3.11.7", "0"))


def test_diff_sorts_added_changed_removed_and_counts_only_what_is_not_cached() -> None:
    new = {**CUDA_ENV, "tqdm": Row("tqdm", "1.0", "0", 10, False), "numpy": Row("numpy", "2.0", "0", 5, True),
           "python": Row("python", "3.11.8", "0", 7, False)}
    del new["cuda-version"]
    d = diff(CUDA_ENV, new)
    assert [r.name for r in d.added] == ["numpy", "tqdm"]
    assert [(o.version, n.version) for o, n in d.changed] == [("3.11.7", "3.11.8")]
    assert [r.name for r in d.removed] == ["cuda-version"]
    assert d.download_bytes == 17 and not d.empty
    assert d.touches({"cuda-version"}) and not d.touches({"pandas"})
    assert diff(CUDA_ENV, CUDA_ENV).empty


def test_torch_change_names_a_cpu_swap_a_cuda_line_change_a_version_change_and_a_removal() -> None:
    cpu = {**CUDA_ENV, "pytorch": Row("pytorch", "2.13.0", "cpu_generic_py311_h0_0")}
    assert torch_change(CUDA_ENV, cpu).reasons == (
        "it replaces the CUDA 13.0 build of pytorch (cuda130_generic_py311_h0_200) by a CPU build "
        "(cpu_generic_py311_h0_0)",)
    older = {**CUDA_ENV, "pytorch": Row("pytorch", "2.5.1", "cuda126_generic_py311_h0_200")}
    reasons = torch_change(CUDA_ENV, older).reasons
    assert reasons[0].startswith("it changes pytorch's CUDA 13.0 to CUDA 12.6") and reasons[1] == (
        "it changes pytorch 2.13.0 to 2.5.1")
    gone = {k: v for k, v in CUDA_ENV.items() if k != "pytorch"}
    assert torch_change(CUDA_ENV, gone).reasons == ("it removes pytorch 2.13.0 (CUDA 13.0)",)
    assert not torch_change(CUDA_ENV, {**CUDA_ENV, "tqdm": Row("tqdm", "1", "0")})
    assert not torch_change(rows(("python", "3.11", "0")), CUDA_ENV)  # no torch before: nothing to guard


def test_the_legacy_channel_build_says_its_cuda_and_a_mutex_switch_to_cpu_is_a_cpu_swap() -> None:
    legacy = rows(("pytorch", "2.5.1", "py3.11_cuda12.4_cudnn9.1.0_0"), ("pytorch-cuda", "12.4", "h7"))
    cpu = rows(("pytorch", "2.5.1", "py3.11_cpu_0"))
    assert "by a CPU build" in torch_change(legacy, cpu).reasons[0]


def test_pins_keep_the_exact_torch_build_and_the_cuda_line() -> None:
    assert torch_pins(CUDA_ENV) == ["pytorch ==2.13.0 cuda130_generic_py311_h0_200", "cuda-version ==13.0"]
    assert torch_pins(rows(("python", "3.11", "0"))) == []


def test_spec_names_and_whether_the_command_names_torch() -> None:
    assert spec_name("conda-forge::NumPy>=2") == "numpy" and spec_name("pytorch=2.5.1=cuda*") == "pytorch"
    assert spec_name("scikit-learn 1.5.*") == "scikit-learn"
    assert names_torch(["tqdm", "pytorch=2.5.1"]) and names_torch(["cuda-version=12.6"])
    assert not names_torch(["tqdm", "torchvision"])


def test_blame_follows_the_dependencies_from_the_command_to_the_culprit() -> None:
    plan = [planned("legacy-cpu-addon", ("cpuonly",)), planned("cpuonly", ("pytorch-mutex 1.0 cpu",)),
            planned("pytorch-mutex"), planned("tqdm")]
    assert blame("pytorch-mutex", plan, ["tqdm", "legacy-cpu-addon"]) == ["legacy-cpu-addon", "cpuonly",
                                                                         "pytorch-mutex"]
    assert blame("pytorch-mutex", plan, ["tqdm"]) == []


def test_a_reinstall_is_its_own_row_and_only_for_what_stays_installed() -> None:
    d = diff(CUDA_ENV, CUDA_ENV, reinstall=["python", "tqdm"])
    assert [r.name for r in d.reinstalled] == ["python"] and not d.empty and d.touches({"python"})
    assert [r.name for r in d.linked] == ["python"]

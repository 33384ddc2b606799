"""torch 1.5.1-1.12 (envkit/compat/legacy.yaml): every row cites a source, and the era's rules (no build runs on
Hopper, Ampere and Pascal get a covering build, old drivers lack minor-version compatibility, deleted releases
are explained) hold for every release in the table (tests generated from the table itself)."""

from __future__ import annotations

import pytest
import yaml

from envkit.compat import legacy
from envkit.models import Driver, Gpu, Machine, Request


def machine(driver: str, cuda: str | None, cc: str, name: str) -> Machine:
    return Machine(Driver(driver, cuda, "simulated"), (Gpu(0, name, cc),), simulated=True)


A10 = machine("550.54.15", "12.4", "8.6", "NVIDIA A10")
H200 = machine("580.95.05", "13.0", "9.0", "NVIDIA H200")
GTX1080TI = machine("535.183.01", "12.2", "6.1", "NVIDIA GeForce GTX 1080 Ti")
RELEASES = [r.version for r in legacy.load().releases]
# 1.3.1-1.5.0: pip wheels only (the pytorch channel deleted pytorch < 1.5.1, pytorch#104754)
PIP_ONLY = [r.version for r in legacy.load().releases if not r.builds["pytorch"]]


def test_every_row_names_a_known_source() -> None:
    raw = yaml.safe_load(legacy.DATA_FILE.read_text())
    sources = set(raw["sources"])
    for section in ("driver_cuda", "minor_compat_floor", "arch_first_cuda", "deleted"):
        assert all(row["src"] in sources for row in raw[section]), section
    assert all(row["src"] in sources for row in raw["arch_lists"].values())
    for row in raw["torch"]:
        assert row["src"] and set(row["src"]) <= sources, row["version"]
        lists = [*row["pytorch_channel"].values(), *row["pip"].values(), *(row.get("conda_forge") or {}).values()]
        assert set(lists) <= set(raw["arch_lists"]), row["version"]
    assert RELEASES[0] == "1.12.1" and RELEASES[-1] == "1.3.1" and len(RELEASES) == 17


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize("flavor", ["pytorch", "pip"])
def test_no_legacy_build_runs_on_hopper(version: str, flavor: str) -> None:
    """No 1.x build has sm_90 SASS and CUDA <= 11.6 cannot JIT PTX for sm_90."""
    from envkit.errors import SelectionError

    gone = flavor == "pytorch" and version in PIP_ONLY
    with pytest.raises(SelectionError, match="the pytorch channel deleted pytorch < 1.5.1" if gone else
                       "architecture: no .* has code for sm_90"):
        legacy.select(H200, Request(torch=version, flavor=flavor))


@pytest.mark.parametrize("version", PIP_ONLY)
def test_releases_the_channel_deleted_still_run_from_their_pip_wheels_on_pascal(version: str) -> None:
    sel = legacy.select(GTX1080TI, Request(torch=version, flavor="pip"))
    assert sel.torch == version and sel.cuda in ("10.1", "10.2") and sel.pip_specs[0].startswith(f"torch=={version}")
    assert sel.pip_index_url == legacy.FIND_LINKS


# CUDA 10.2 and older have no sm_8x (legacy.yaml arch_first_cuda: 8.0 needs CUDA 11.0): 1.5.1/1.6.0 run on Pascal only
AMPERE_RELEASES = [v for v in RELEASES if tuple(map(int, v.split("."))) >= (1, 7, 0)]
CONDA_RELEASES = [v for v in RELEASES if v not in PIP_ONLY]


@pytest.mark.parametrize("version", [v for v in CONDA_RELEASES if v not in AMPERE_RELEASES])
def test_releases_of_cuda_10_have_no_ampere_build(version: str) -> None:
    from envkit.errors import SelectionError

    with pytest.raises(SelectionError, match="has code for sm_86"):
        legacy.select(A10, Request(torch=version, flavor="pytorch"))


@pytest.mark.parametrize("version,gpu", [(v, A10) for v in AMPERE_RELEASES] + [(v, GTX1080TI) for v in CONDA_RELEASES],
                         ids=[f"a10-{v}" for v in AMPERE_RELEASES] + [f"gtx1080ti-{v}" for v in CONDA_RELEASES])
def test_ampere_and_pascal_run_every_release_with_a_covering_build(version: str, gpu: Machine) -> None:
    from envkit.compat import parse_cc

    sel = legacy.select(gpu, Request(torch=version, flavor="pytorch"))
    assert sel.torch == version and sel.cuda is not None
    assert f"cudatoolkit={sel.cuda}" in sel.specs and f"pytorch={version}=*cuda*" in sel.specs
    release = legacy.matching(version)[0]
    build = next(b for b in release.builds["pytorch"] if b.cuda == sel.cuda)
    cc = parse_cc(gpu.gpus[0].compute_capability)
    assert cc in build.archs.sass or any(a[0] == cc[0] and a[1] < cc[1] for a in build.archs.sass)


def test_a10_gets_a_cuda_11_build_of_112_that_has_sm86() -> None:
    for flavor, label in (("pytorch", "cudatoolkit=11.6"), ("pip", "cu116")):
        sel = legacy.select(A10, Request(torch="1.12", flavor=flavor))
        assert (sel.torch, sel.variant) == ("1.12.1", label)
    sel = legacy.select(A10, Request(torch="1.12.0", flavor="pip"))
    assert sel.pip_specs == ("torch==1.12.0+cu116",) and sel.pip_index_url == "https://download.pytorch.org/whl/cu116"


def test_pip_versions_follow_what_was_published() -> None:
    r171 = legacy.matching("1.7.1")[0]
    assert legacy.pip_version(r171, "torch", "cu102") == "1.7.1"  # the PyPI default wheel, no +cu102
    assert legacy.pip_version(r171, "torch", "cu110") == "1.7.1+cu110"
    assert legacy.pip_version(r171, "torchaudio", "cu110") == "0.7.2"  # no +cuXYZ torchaudio before 0.10
    r1100 = legacy.matching("1.10.0")[0]
    assert legacy.pip_version(r1100, "torchaudio", "cu113") == "0.10.0+cu113"
    sel = legacy.select(A10, Request(torch="1.9.0", flavor="pip"))
    assert sel.pip_index_url == legacy.FIND_LINKS  # <= 1.10: the torch_stable.html find-links page


def test_old_drivers_without_minor_version_compatibility() -> None:
    """CUDA 10.x has no minor version compatibility: driver 418 (CUDA 10.1) cannot run cu102 builds;
    the CUDA level of such a driver comes from legacy.yaml's Table 3 rows."""
    from envkit.errors import SelectionError

    old = machine("418.87.00", None, "7.0", "Tesla V100")
    sel = legacy.select(old, Request(torch="1.7.1", flavor="pytorch"))
    assert sel.cuda == "10.1"
    with pytest.raises(SelectionError, match=r"driver: .* needs CUDA 10.2 \(driver >= 440.33\)"):
        legacy.select(old, Request(torch="1.9.0", flavor="pytorch"))
    mvc = machine("450.80.02", "11.0", "8.0", "A100")  # CUDA 11.1 builds run through minor version compatibility
    assert legacy.select(mvc, Request(torch="1.9.0", flavor="pytorch")).minor_version_compat


def test_the_select_hook_routes_only_older_requests() -> None:
    from envkit.compat.select import select

    assert select(A10, Request(torch="1.12.1", flavor="pytorch")).variant == "cudatoolkit=11.6"
    assert select(A10, Request(torch="1.13", flavor="pytorch")).variant.startswith("pytorch-cuda=")
    assert legacy.handles("1.12") and legacy.handles("<1.13") and not legacy.handles("2.1") \
        and not legacy.handles(None)


def test_deleted_releases_are_explained() -> None:
    from envkit.errors import SelectionError

    with pytest.raises(SelectionError, match=r"deleted pytorch < 1.5.1 \(https://github.com/pytorch/pytorch/issues/104754\)"):
        legacy.select(A10, Request(torch="1.4.0", flavor="pytorch"))

"""Named selection scenarios (user-pains.md S1-S8, S15) with the expected answers spelled out."""

from __future__ import annotations

import pytest

from envkit.compat import load
from envkit.compat.select import select
from envkit.errors import SelectionError, UsageError
from envkit.models import Driver, Gpu, Machine, Request


def m(driver: str | None, *ccs: str, cuda: str | None = None, override: str | None = None) -> Machine:
    drv = None
    if driver:
        drv = Driver(driver, cuda or load().cuda_for_driver(driver), "nvml")
    return Machine(drv, tuple(Gpu(i, f"gpu{i}", c) for i, c in enumerate(ccs)), cuda_override=override)


def test_h200_conda_forge_picks_cuda_13() -> None:
    sel = select(m("580.159.04", "9.0", cuda="13.0"), Request())
    assert (sel.torch, sel.cuda, sel.variant) == ("2.13.0", "13.0", "cuda130")
    assert sel.specs[:2] == ("pytorch=2.13.0=cuda*", "cuda-version=13.0")
    assert sel.channels == ("conda-forge",) and sel.pip_index_url is None


def test_h200_pip_flavor_uses_the_cu130_index() -> None:
    sel = select(m("580.159.04", "9.0"), Request(flavor="pip"))
    assert sel.pip_index_url == "https://download.pytorch.org/whl/cu130"
    assert sel.pip_specs[0] == f"torch=={sel.torch}+cu130"
    assert sel.specs == ("python=3.12", "pip")


def test_s1_driver_470_gets_cu118_and_says_why() -> None:
    sel = select(m("470.82.01", "8.0"), Request(flavor="pip"))
    assert (sel.torch, sel.variant) == ("2.7.1", "cu118")
    assert sel.minor_version_compat  # 11.8 above the 11.4 the driver reports
    assert any("minor version compatibility" in r for r in sel.reasons)


def test_s4_pascal_never_gets_a_build_without_sm_61() -> None:
    sel = select(m("580.159.04", "6.1"), Request(flavor="pip"))
    assert sel.variant == "cu126"  # cu130 has no sm_6x; uv#14742 picks it anyway
    sel = select(m("580.159.04", "6.1"), Request())
    assert sel.variant == "cuda129"  # conda-forge keeps Pascal in its 12.9 line only


def test_s5_rtx50_with_old_torch_names_the_constraint_and_the_way_out() -> None:
    with pytest.raises(SelectionError) as err:
        select(m("575.57.08", "12.0"), Request(flavor="pip", torch="2.6"))
    assert "torch 2.6 has no pip build for sm_120" in err.value.message
    assert "torch 2.7.1 with CUDA 12.8" in (err.value.hint or "")


def test_blackwell_dc_on_a_570_driver_gets_cu128() -> None:
    sel = select(m("570.124.06", "10.0"), Request(flavor="pip"))
    assert (sel.torch, sel.variant) == ("2.11.0", "cu128")


def test_volta_leaves_cuda_13_lines() -> None:
    assert select(m("580.159.04", "7.0"), Request()).variant == "cuda129"


def test_s2_535_uses_minor_version_compat_within_12x() -> None:
    sel = select(m("535.104.05", "8.6"), Request())
    assert sel.cuda == "12.9" and sel.minor_version_compat


def test_s8_no_driver_is_a_cpu_selection_with_notice() -> None:
    for flavor, spec in (("conda-forge", "=cpu*"), ("pytorch", "cpuonly"), ("pip", "+cpu")):
        sel = select(m(None), Request(flavor=flavor))
        assert sel.cuda is None and sel.variant == "cpu"
        assert any(spec in s for s in sel.specs + sel.pip_specs)
        assert "no NVIDIA driver" in sel.reasons[0]


def test_cpu_requested_even_with_a_gpu() -> None:
    assert select(m("580.159.04", "9.0"), Request(cuda="cpu")).cuda is None


def test_s7_docker_override_without_driver() -> None:
    sel = select(m(None, override="12.4"), Request())
    assert sel.cuda == "12.9" and sel.minor_version_compat
    sel = select(m(None, override="12.4"), Request(flavor="pip", torch="2.6"))
    assert sel.variant == "cu124" and not sel.minor_version_compat


def test_empty_conda_override_means_no_cuda() -> None:
    assert select(m("580.159.04", "9.0", override=""), Request()).cuda is None


def test_explicit_cuda_above_driver_is_an_error_unless_unchecked() -> None:
    with pytest.raises(SelectionError) as err:
        select(m("535.104.05", "8.0"), Request(cuda="13.0"))
    assert "update the NVIDIA driver" in (err.value.hint or "")
    sel = select(m("535.104.05", "8.0"), Request(cuda="13.0", no_driver_check=True))
    assert sel.cuda == "13.0"


def test_explicit_cuda_picks_the_line() -> None:
    sel = select(m(None), Request(cuda="12.4", flavor="pip", torch="2.5"))
    assert sel.variant == "cu124"


def test_s15_legacy_channel_refuses_new_torch() -> None:
    with pytest.raises(SelectionError) as err:
        select(m("550.54.15", "8.9"), Request(flavor="pytorch", torch="2.6"))
    assert "138506" in err.value.message and "conda-forge" in (err.value.hint or "")
    sel = select(m("550.54.15", "8.9"), Request(flavor="pytorch"))
    assert sel.torch == "2.5.1" and "pytorch-cuda=12.4" in sel.specs
    assert sel.channels == ("pytorch", "nvidia", "conda-forge")


def test_python_rule() -> None:
    sel = select(m("580.159.04", "9.0"), Request(python="3.9", flavor="pip"))
    assert sel.torch == "2.8.0"  # the newest torch with Python 3.9 wheels
    with pytest.raises(SelectionError):
        select(m("580.159.04", "9.0"), Request(python="3.9", torch="2.13"))


def test_torch_ranges_and_bad_specs() -> None:
    sel = select(m("580.159.04", "9.0"), Request(torch=">=2.4,<2.7"))
    assert sel.torch == "2.6.0"
    assert select(m("580.159.04", "9.0"), Request(torch="2.5.0")).torch == "2.5.0"
    with pytest.raises(UsageError):
        select(m(None), Request(torch="banana"))
    with pytest.raises(SelectionError):
        select(m(None), Request(torch="9.9"))


def test_hidden_gpus_keep_the_driver_choice() -> None:
    machine = Machine(Driver("580.159.04", "13.0", "nvml"), (), gpus_hidden=True)
    sel = select(machine, Request())
    assert sel.cuda == "13.0"
    assert any("hidden" in r for r in sel.reasons)


# -- the compat audit's cases (issue 11), on the corrected static data ---------------------------------
def test_audit_v100_on_a_580_driver_gets_cu128_for_torch_2_9() -> None:
    sel = select(m("580.159.04", "7.0"), Request(flavor="pip", torch="2.9"))
    assert (sel.torch, sel.variant) == ("2.9.1", "cu128")  # cu128 of 2.9 still ships sm_70 (pytorch#164471)
    assert any("sm_70 is in the cu128 build" in r for r in sel.reasons)


def test_audit_conda_forge_never_published_torch_2_2() -> None:
    with pytest.raises(SelectionError) as err:
        select(m("550.54.15", "8.6"), Request(torch="2.2"))
    assert err.value.message == "torch 2.2 does not exist on conda-forge; the nearest are 2.1.2 and 2.3.1"
    assert "--torch 2.3.1" in (err.value.hint or "")
    assert select(m("550.54.15", "8.6"), Request(torch="2.2", flavor="pip")).torch == "2.2.2"


def test_audit_conda_forge_python_ranges_differ_from_pip() -> None:
    sel = select(m("550.54.15", "8.6"), Request(torch="2.4", python="3.13"))
    assert (sel.torch, sel.python) == ("2.4.1", "3.13")
    with pytest.raises(SelectionError) as err:
        select(m("550.54.15", "8.6"), Request(torch="2.4", python="3.13", flavor="pip"))
    assert "3.8-3.12" in err.value.message
    with pytest.raises(SelectionError) as err:
        select(m("580.159.04", "9.0"), Request(torch="2.9", python="3.14"))
    assert "supports python 3.10-3.13, not 3.14" in err.value.message
    assert select(m("580.159.04", "9.0"), Request(torch="2.9", python="3.14", flavor="pip")).python == "3.14"


def test_audit_torchaudio_2_11_serves_later_torch_on_pip_only() -> None:
    sel = select(m("580.159.04", "9.0"), Request(flavor="pip", torch="2.12"))
    assert (sel.torch, sel.torchvision, sel.torchaudio) == ("2.12.1", "0.27.1", "2.11.0")
    sel = select(m("580.159.04", "9.0"), Request(torch="2.12"))
    assert sel.torchvision == "0.27.1" and sel.torchaudio is None  # conda-forge's 2.11.0 needs pytorch 2.10
    assert select(m("580.159.04", "9.0"), Request(torch="2.11")).torchaudio is None


def test_audit_conda_forge_companions_of_2_1() -> None:
    sel = select(m("550.54.15", "8.6"), Request(torch="2.1"))
    assert (sel.torchvision, sel.torchaudio) == ("0.16.1", None)


def test_audit_2_14_is_2_14_0_on_pip() -> None:
    sel = select(m("580.159.04", "9.0"), Request(flavor="pip"))
    assert (sel.torch, sel.torchvision, sel.variant) == ("2.14.0", "0.29.0", "cu130")


def test_audit_kepler_runs_conda_forge_cuda_11_8() -> None:
    sel = select(m("470.82.01", "3.5"), Request())  # conda-forge 11.8 builds list sm_35 (audit AL12)
    assert (sel.torch, sel.variant) == ("2.5.1", "cuda118") and sel.minor_version_compat


def test_catalogue_says_highest_only_of_the_variant_select_takes() -> None:
    """detect --catalogue on a CUDA 13.0 driver: cuda129 is usable but not "the highest variant <= 13.0"."""
    from envkit.compat.select import offers

    machine = m("580.65.06", "9.0", cuda="13.0")
    rows = {(r["torch"], r["variant"]): r for r in offers(machine, Request(), None)}
    picked = select(machine, Request(torch="2.13"))
    assert picked.variant == "cuda130"
    assert rows[("2.13.0", "cuda130")]["why"] == ("CUDA 13.0: the highest conda-forge CUDA variant of torch 2.13 "
                                                  "that is <= CUDA 13.0")
    other = rows[("2.13.0", "cuda129")]
    assert other["usable"] and "highest conda-forge CUDA variant" not in str(other["why"])
    assert other["why"] == ("CUDA 12.9 <= CUDA 13.0: runs on this driver, but envkit picks cuda130, the highest "
                            "variant of torch 2.13 that fits (--cuda 12.9 takes this one)")
    assert select(machine, Request(cuda="12.9", torch="2.13")).variant == "cuda129"  # as the row says
    highest = [r for r in rows.values() if "the highest" in str(r["why"]) and "envkit picks" not in str(r["why"])]
    assert all(r["variant"] == select(machine, Request(torch=str(r["torch"]))).variant for r in highest)


def test_cuda_x_y_is_the_drivers_level_so_12_4_gets_cuda129_on_conda_forge() -> None:
    """README "Create" and create --help: --cuda 12.4 is a driver level; conda-forge's torch 2.13 has no build
    <= 12.4, so the 12.9 build it runs through minor version compatibility is chosen, and said so."""
    sel = select(m(None, "9.0"), Request(cuda="12.4", torch="2.13"))
    assert (sel.cuda, sel.variant, sel.minor_version_compat) == ("12.9", "cuda129", True)
    assert any("minor version compatibility" in r for r in sel.reasons)

"""Table-driven selection tests, generated from the same compatibility data envkit ships.

For every (driver branch x GPU architecture x flavor) the chosen build must (a) cover every GPU,
(b) respect the driver (<= its CUDA, or the same major above its minor-version floor), (c) support
the Python, and (d) be the newest release for which such a build exists (checked by brute force).
"""

from __future__ import annotations

import itertools

import pytest
from packaging.version import Version

from envkit.compat import load, parse_cc
from envkit.compat.select import covers, select
from envkit.errors import SelectionError
from envkit.models import Driver, Gpu, Machine, Request

DATA = load()
DRIVERS = {  # branch -> a real driver version of that branch
    "470": "470.82.01", "525": "525.60.13", "535": "535.104.05", "550": "550.54.15",
    "570": "570.124.06", "580": "580.159.04", "590": "590.48.01",
}
CCS = ["6.1", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"]
FLAVORS = ["conda-forge", "pytorch", "pip"]


def machine(driver: str, *ccs: str) -> Machine:
    cuda = DATA.cuda_for_driver(driver)
    return Machine(Driver(driver, cuda, "nvml"), tuple(Gpu(i, f"gpu{i}", cc) for i, cc in enumerate(ccs)))


def fits(release, flavor, m: Machine) -> bool:  # noqa: ANN001 - brute-force oracle
    ceiling = Version(m.driver.cuda)
    for build in release.builds[flavor]:
        if not all(covers(build, parse_cc(g.compute_capability), DATA) for g in m.gpus):
            continue
        if build.cuda_version <= ceiling:
            return True
        floor = DATA.minor_compat_floor[build.cuda_version.major]
        if build.cuda_version.major == ceiling.major and Version(m.driver.version) >= floor:
            return True
    return False


@pytest.mark.parametrize(("branch", "cc", "flavor"), list(itertools.product(DRIVERS, CCS, FLAVORS)))
def test_matrix(branch: str, cc: str, flavor: str) -> None:
    m = machine(DRIVERS[branch], cc)
    candidates = [r for r in DATA.releases_for(flavor) if r.builds[flavor]]  # newest first
    expected = next((r for r in candidates if fits(r, flavor, m)), None)
    if expected is None:
        with pytest.raises(SelectionError) as err:
            select(m, Request(flavor=flavor))
        assert err.value.hint, "a no-build error must say what to do"
        return
    sel = select(m, Request(flavor=flavor))
    assert sel.torch == expected.version, sel.reasons
    assert sel.cuda is not None
    build = next(b for b in expected.builds[flavor] if b.cuda == sel.cuda)
    assert covers(build, parse_cc(cc), DATA)
    if sel.minor_version_compat:
        assert Version(sel.cuda) > Version(m.driver.cuda)
        assert Version(sel.cuda).major == Version(m.driver.cuda).major
    else:
        assert Version(sel.cuda) <= Version(m.driver.cuda)
        # rule 1: the highest variant <= the driver's CUDA among those covering the GPU
        ok = [b for b in expected.builds[flavor] if b.cuda_version <= Version(m.driver.cuda)
              and covers(b, parse_cc(cc), DATA)]
        assert sel.cuda == ok[-1].cuda
    assert sel.python in expected.python
    assert any(sel.cuda in r for r in sel.reasons)


PYTHONS = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]


@pytest.mark.parametrize(("python", "flavor"), list(itertools.product(PYTHONS, FLAVORS)))
def test_python_matrix_uses_each_flavors_own_ranges(python: str, flavor: str) -> None:
    """conda-forge's Python ranges differ from the wheels' (compat audit T10, T11, T16)."""
    m = machine(DRIVERS["580"], "9.0")
    expected = next((r for r in DATA.releases_for(flavor) if r.builds[flavor] and python in r.python
                     and fits(r, flavor, m)), None)
    if expected is None:
        with pytest.raises(SelectionError):
            select(m, Request(flavor=flavor, python=python))
        return
    sel = select(m, Request(flavor=flavor, python=python))
    assert (sel.torch, sel.python) == (expected.version, python)


@pytest.mark.parametrize("branch", list(DRIVERS))
def test_mixed_gpus_are_all_covered(branch: str) -> None:
    m = machine(DRIVERS[branch], "6.1", "12.0")  # a Pascal and an RTX 50 in one box
    try:
        sel = select(m, Request(flavor="pip"))
    except SelectionError as exc:
        assert "sm_" in exc.message
        return
    release = DATA.release(".".join(sel.torch.split(".")[:2]))
    build = next(b for b in release.builds["pip"] if b.cuda == sel.cuda)
    assert covers(build, (6, 1), DATA) and covers(build, (12, 0), DATA)

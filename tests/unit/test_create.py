"""The plan guard of `envkit create`: a solved plan whose build is not the selected one stops before any install."""

from __future__ import annotations

import pytest

from envkit.compat.select import select
from envkit.models import Driver, Gpu, Machine, Request


def test_plan_check_on_the_legacy_channel_names_both_sides() -> None:
    from types import SimpleNamespace

    from envkit.create import plan_guard
    from envkit.errors import PlanGuardError

    sel = select(Machine(Driver("550.54.15", "12.4", "nvml"), (Gpu(0, "L4", "8.9"),)), Request(flavor="pytorch"))
    assert sel.variant == "pytorch-cuda=12.4"

    def pkg(name: str, version: str, build: str) -> SimpleNamespace:
        return SimpleNamespace(name=name, version=version, build=build, depends=())

    good = [pkg("pytorch", "2.5.1", "py3.12_cuda12.4_cudnn9.1.0_0"), pkg("pytorch-cuda", "12.4", "hc786d27_7")]
    plan_guard(sel, good, ["pytorch=2.5.1"])
    bad = [pkg("pytorch", "2.5.1", "py3.12_cuda12.1_cudnn9.1.0_0"), pkg("pytorch-cuda", "12.1", "h0_7")]
    with pytest.raises(PlanGuardError) as err:
        plan_guard(sel, bad, ["pytorch=2.5.1"])
    assert "pytorch 2.5.1 py3.12_cuda12.1_cudnn9.1.0_0 with pytorch-cuda 12.1" in err.value.message
    assert "pytorch-cuda 12.4" in err.value.message and "pytorch-cuda=12.4" in (err.value.hint or "")

"""The golden render matrix, shared by the test and scripts/regen_golden.py."""

from __future__ import annotations

from dataclasses import dataclass

CUSTOM_MIRROR = "https://mirror.example.org/anaconda"


@dataclass(frozen=True)
class Case:
    flavor: str
    gpu: bool
    mirror: str | None

    @property
    def id(self) -> str:
        return f"dl_train-{self.flavor}-{'cuda' if self.gpu else 'cpu'}-{'mirror' if self.mirror else 'direct'}"


def _mirror(flavor: str, gpu: bool) -> str:
    # TUNA has no nvidia channel: the legacy CUDA flavor goes through a custom mirror
    return CUSTOM_MIRROR if (flavor == "pytorch" and gpu) else "tuna"


CASES = [Case(f, g, _mirror(f, g) if m else None)
         for f in ("conda-forge", "pytorch", "pip") for g in (False, True) for m in (False, True)]


def render_case(case: Case) -> str:
    from envkit.models import Request
    from envkit.plan import render_env

    torch = "2.5" if case.flavor == "pytorch" else None
    request = Request(cuda="auto" if case.gpu else "cpu", torch=torch, flavor=case.flavor)
    result = render_env(spec="dl_train", request=request, flavor_given=True, mirror=case.mirror,
                        driver_version="580.159.04", compute_capabilities=("9.0",) if case.gpu else (),
                        catalogue_mode="offline")  # golden files pin the static data
    return result.text

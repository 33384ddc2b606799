"""The CUDA level a solve assumes: command-line flags > ENVKIT_* > CONDA_OVERRIDE_CUDA > detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.detect import detect
from envkit.engines.base import CreateOptions, cuda_override_for
from envkit.models import Request


@pytest.mark.parametrize(("cuda", "driver", "env", "expected"), [
    ("13.0", None, "", "13.0"),  # --cuda X.Y (or ENVKIT_CUDA, click's envvar for it) beats the variable
    ("auto", "580.65.06", "", "13.0"),  # --driver-version beats CONDA_OVERRIDE_CUDA='' (issue 12)
    ("auto", "580.65.06", "12.4", "13.0"),  # ... and any other value of it
    ("auto", None, "", ""),  # the variable beats detection: no __cuda
    ("auto", None, "12.4", "12.4"),
    ("auto", None, None, None),  # nothing given: rattler detects the real driver
])
def test_cuda_override_precedence(cuda: str, driver: str | None, env: str | None, expected: str | None) -> None:
    environ = {} if env is None else {"CONDA_OVERRIDE_CUDA": env}
    machine = detect(driver_version=driver, compute_capabilities=("9.0",) if driver else (), cuda=cuda,
                     environ=environ, root=Path("/nonexistent"))
    opts = CreateOptions(name="x", request=Request(cuda=cuda), driver_version=driver)
    assert cuda_override_for(opts, machine, None) == expected


def test_every_engine_implements_the_contract() -> None:
    """create.py drives engines only through engines.base.Engine: each engine has every member of it."""
    import inspect

    from envkit.engines.base import Engine
    from envkit.engines.conda_cli import CondaCLIEngine
    from envkit.engines.rattler_engine import RattlerEngine

    members = {name for name, _ in inspect.getmembers(Engine) if not name.startswith("_")}
    assert members == {"name", "version", "in_place", "whole_file", "build_phase", "notes", "plan", "build",
                       "describe_virtual_packages"}
    for engine in (RattlerEngine, CondaCLIEngine):
        source = inspect.getsource(engine)
        for member in sorted(members):
            assert hasattr(engine, member) or f"self.{member} =" in source, f"{engine.__name__} lacks {member}"
    assert RattlerEngine.in_place is False and CondaCLIEngine.in_place is True
    assert RattlerEngine.whole_file is False and CondaCLIEngine.whole_file is True

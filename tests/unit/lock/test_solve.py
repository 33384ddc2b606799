"""`envkit lock`'s pip section (issue 12): the wheel tags each conda platform installs, how the pip
section splits into what pip resolves and what cannot be locked."""

from __future__ import annotations

from envkit.lock.solve import plan_pip, wheel_platforms
from envkit.render.mirrors import custom


def test_wheel_tags_per_platform() -> None:
    linux = wheel_platforms("linux-64")
    assert linux[0] == "manylinux_2_28_x86_64" and "manylinux_2_17_x86_64" in linux  # PEP 600, glibc 2.28 floor
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(linux)  # PEP 599/571/513
    assert "manylinux_2_29_x86_64" not in linux and not any("linux_x86_64" == t for t in linux)
    arm = wheel_platforms("linux-aarch64")
    assert "manylinux2014_aarch64" in arm and "manylinux1_aarch64" not in arm  # manylinux1 is x86 only
    mac = wheel_platforms("osx-arm64")
    assert {"macosx_13_0_arm64", "macosx_11_0_arm64", "macosx_11_0_universal2"} <= set(mac)
    assert not any("x86_64" in t or "macosx_14" in t for t in mac)
    assert "macosx_10_9_x86_64" in wheel_platforms("osx-64")
    assert wheel_platforms("win-64") == ("win_amd64",)


def test_plan_pip_splits_lines_and_keeps_credentials_out() -> None:
    plan = plan_pip(("--index-url https://user:pw-secret@idx.example/simple",
                     "--extra-index-url https://idx.example/t/tk-0123456789abcdef0123/extra",
                     "transformers>=4", "-e ./mine", "./wheels/local-1.0-py3-none-any.whl", "-r more.txt"), None)
    assert plan.lines == ("transformers>=4",)
    assert plan.indexes == ("https://idx.example/simple", "https://idx.example/extra")
    assert "pw-secret" not in repr(plan.indexes) and "tk-0123" not in repr(plan.indexes)
    assert [u.split("'")[1] for u in plan.unlockable] == ["-e ./mine", "./wheels/local-1.0-py3-none-any.whl",
                                                        "-r more.txt"]
    assert plan.options[0].startswith("--index-url https://user:pw-secret@")  # pip gets it (via its environment)


def test_plan_pip_behind_a_mirror_names_pypi() -> None:
    mirror = custom("http://127.0.0.1:9/m")
    plan = plan_pip(("datasets",), mirror)
    assert plan.options == ("--index-url http://127.0.0.1:9/m/pypi/simple",)  # resolved through the mirror
    assert plan.indexes == ("https://pypi.org/simple",) and plan.mirror_pypi == "http://127.0.0.1:9/m/pypi/simple"
    own = plan_pip(("--index-url https://corp.example/simple", "datasets"), mirror)
    assert own.indexes == ("https://corp.example/simple",) and own.options[0] == "--index-url https://corp.example/simple"

"""Which spec an environment NAME gets: its own, a typo's stop with "did you mean", else dl_train, said."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.errors import ExitCode, SpecError, UsageError
from envkit.render.specs import DEFAULT_SPEC, close_spec, find, spec_for_env


@pytest.mark.parametrize(("typed", "meant"), [("minmal", "minimal"), ("Minimal", "minimal"), ("dl-train", "dl_train"),
                                              ("dltrain", "dl_train"), ("dl_trian", "dl_train"), ("nlpp", "nlp")])
def test_a_typo_of_a_spec_name_stops_with_did_you_mean(typed: str, meant: str) -> None:
    assert close_spec(typed) == meant
    with pytest.raises(UsageError) as caught:
        spec_for_env(typed)
    assert caught.value.exit_code == ExitCode.USAGE
    assert f"did you mean {meant}?" in caught.value.message
    assert caught.value.hint is not None and f"envkit create {meant}" in caught.value.hint
    assert f"envkit create {typed} --spec {meant}" in caught.value.hint  # the way to keep the new name


@pytest.mark.parametrize("name", ["myproj", "train", "gpt2", "exp-0412", "minimal_gpu"])
def test_a_plain_new_name_gets_the_default_spec(name: str) -> None:
    choice = spec_for_env(name)
    assert (choice.spec, choice.named) == (DEFAULT_SPEC, False)


def test_a_spec_name_is_that_spec_and_a_user_spec_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert spec_for_env("minimal").spec == "minimal" and spec_for_env("minimal").named
    (tmp_path / "vision.yaml").write_text("description: mine\n")
    monkeypatch.setenv("ENVKIT_SPEC_PATH", str(tmp_path))
    assert spec_for_env("vision").named
    with pytest.raises(UsageError, match="did you mean vision"):
        spec_for_env("visoin", "bundle")


def test_an_unknown_spec_given_by_name_suggests_the_closest() -> None:
    with pytest.raises(SpecError, match=r"unknown environment spec 'minmal': did you mean minimal\?; available: "):
        find("minmal")
    with pytest.raises(SpecError) as caught:
        find("zzz")
    assert "did you mean" not in caught.value.message

"""One error tree: every expected failure says what happened, why, and the command that fixes it.

Only `envkit.cli.main` turns these into a red message and an exit code (architecture.md, habit 2).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes a CI job can branch on (README: "Exit codes")."""

    OK = 0
    ERROR = 1  # envkit or the environment around it failed
    USAGE = 2  # bad option values (click's own code for usage errors)
    VERIFY_FAILED = 3  # verify ran and something is broken on this GPU
    VERIFY_SKIPPED = 4  # no usable GPU: nothing GPU-related was proven
    PROBLEMS_FOUND = 5  # envkit doctor found at least one problem (issue 15)


class EnvkitError(Exception):
    """An expected failure: `message` says what and why, `hint` the next command to run."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  fix: {self.hint}"


class UsageError(EnvkitError):
    """A value the user typed cannot be understood."""

    exit_code = ExitCode.USAGE


class SelectionError(EnvkitError):
    """No PyTorch build satisfies driver, GPU architecture, Python and flavor together."""


class SpecError(EnvkitError):
    """An environment spec (envs/*.yaml or --spec) is missing or malformed."""


class RenderError(EnvkitError):
    """An environment.yml could not be rendered or adapted."""


class MirrorError(EnvkitError):
    """A mirror profile is unknown or lacks a channel the selection needs."""


class EngineError(EnvkitError):
    """Solving or installing an environment failed."""


class PlanGuardError(EngineError):
    """The solved plan would install a CPU PyTorch although a GPU build was selected."""


class EnvExistsError(EnvkitError):
    """An environment is already there and --force was not given."""


class EnvNotFoundError(EnvkitError):
    """A name or prefix does not point at an environment."""


class VerifyError(EnvkitError):
    """The verify payload could not be run at all (not a FAIL of the checks themselves)."""


class ExportError(EnvkitError):
    """An environment could not be exported."""

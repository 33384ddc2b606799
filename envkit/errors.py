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


class InputError(EnvkitError):
    """An input file is missing, not a regular file, too big, not UTF-8 text, or not well-formed."""


def os_error_hint(text: str) -> str | None:
    """The fix for a file-system failure named in an error text (errno name, strerror or rattler's
    "(os error N)"): a full disk is not a permissions problem, and a read-only cache is not the network."""
    lowered = text.lower()
    if "no space left" in lowered or "os error 28" in lowered or "enospc" in lowered or "quota exceeded" in lowered \
            or "os error 122" in lowered:
        return ("the disk (or quota) is full: free space there (df -h; clean old envs with envkit remove), "
                "or point ENVKIT_CACHE_DIR / --prefix at a filesystem with room")
    if "read-only file system" in lowered or "os error 30" in lowered or "erofs" in lowered:
        return ("that location is read-only: point ENVKIT_CACHE_DIR (package cache), ENVKIT_HOME or --prefix "
                "at a writable folder")
    if "permission denied" in lowered or "os error 13" in lowered or "eacces" in lowered \
            or "operation not permitted" in lowered:
        return ("envkit may not write there: fix the folder's permissions (ls -ld), or point ENVKIT_CACHE_DIR / "
                "ENVKIT_HOME / --prefix at a folder you own")
    return None


class ModelCodeError(VerifyError):
    """The user's own model factory, batch, model or loss raised: `details` is their traceback (it is their
    code), which the CLI prints whole under the one-line message."""

    def __init__(self, message: str, hint: str | None = None, details: str = "") -> None:
        super().__init__(message, hint)
        self.details = details

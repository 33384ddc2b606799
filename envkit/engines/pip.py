"""The pip step's index environment: what every pip run of envkit (create's install, lock's resolve, bundle's
download) passes to pip so that an index's credentials never touch a file, argv or a log."""

from __future__ import annotations

import re
from collections.abc import Sequence

from envkit.secrets import VAULT

_INDEX_LINE = re.compile(r"^(--index-url|-i|--extra-index-url)[ =](\S+)$")


def index_options(lines: Sequence[str]) -> list[tuple[str, str]]:
    """The index options of pip lines as (option, URL): `-i` and `--index-url` are one option (pip's
    `--index-url`), `--extra-index-url` the other; `=` or a space, as pip's requirements files take them."""
    found = []
    for line in lines:
        match = _INDEX_LINE.match(line.strip())
        if match:
            found.append(("--extra-index-url" if match.group(1) == "--extra-index-url" else "--index-url",
                          match.group(2)))
    return found


def pip_index_env(lines: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Index lines whose server needs credentials move out of the file into pip's environment
    (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL): the secret never touches a file, argv or a log."""
    kept: list[str] = []
    index: str | None = None
    extra: list[str] = []
    for line in lines:
        match = _INDEX_LINE.match(line.strip())
        if match:
            url = match.group(2)
            clean = VAULT.split(url) if ("@" in url or "/t/" in url) else url  # credentials in the file itself
            secret_url = VAULT.with_credentials(clean)
            if secret_url != clean:
                if match.group(1) == "--extra-index-url":
                    extra.append(secret_url)
                else:
                    index = secret_url
                continue
        kept.append(line)
    env: dict[str, str] = {}
    if index:
        env["PIP_INDEX_URL"] = index
    if extra:
        env["PIP_EXTRA_INDEX_URL"] = " ".join(extra)
    return kept, env

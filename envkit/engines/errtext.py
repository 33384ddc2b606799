"""rattler's errors, condensed to the one line envkit promises (what happened, the root cause).

py-rattler's exceptions carry the whole error chain as text: an anyhow-style chain ("Request failed
after 3 retries" then one "Caused by: ..." line per layer, the root cause last) or the solver's
explanation tree ("Cannot solve the request because of: ..." then `└─`/`├─` lines). The user gets one
line: the first statement, then the root cause (the last "Caused by"), or the tree flattened into
a sentence; the full text goes to the debug log, which `envkit -v` prints.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger("envkit.engine")

_TREE = re.compile(r"^[\s│├└─|`\\-]+")
_URL = re.compile(r"for url \((\S+?)\)")


def one_line(text: str, limit: int = 400) -> str:
    """The chain or tree in `text` as one line of at most `limit` characters (already-redacted text)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    causes = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Caused by:")]
    if causes:
        head = lines[0]
        url = _URL.search(text)
        line = f"{head}: {causes[-1]}" if causes[-1] != head else head
        if url and url.group(1) not in line:
            line += f" ({url.group(1)})"
    else:
        line = " ".join(_TREE.sub("", item).strip() for item in lines)
    line = re.sub(r"\s+", " ", line).strip()
    line = line.replace("Cannot solve the request because of: ", "")
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "… (envkit -v shows the full explanation)"
    return line


def condensed(text: str, context: str) -> str:
    """`one_line(text)`, after logging the full text (shown by `envkit -v`) under `context`."""
    if "\n" in text.strip():
        log.debug("%s, full engine message:\n%s", context, text.strip())
    return one_line(text)

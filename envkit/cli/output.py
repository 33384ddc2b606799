"""Human (rich) and --json rendering of the models. Only the cli/ package calls these.

It is also the redaction boundary: `redacting_streams()` (entered by cli._run around every
command) routes stdout and stderr through `secrets.redact`, so no message, hint, log line, child
process line, progress text or --json document can carry a credential out of envkit.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from envkit.models import DetectResult, Machine, Selection

if TYPE_CHECKING:
    from rich.console import Console

    from envkit.create import CreateResult
    from envkit.engines.rattler_engine import Progress
    from envkit.verify.report import VerifyReport


def machine_json(machine: Machine) -> dict[str, Any]:
    return machine.to_json()


def detect_json(result: DetectResult) -> dict[str, Any]:
    data = machine_json(result.machine)
    data["selection"] = None if result.selection is None else result.selection.to_json()
    data["error"] = result.error
    return data


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False)


# C0 controls except tab and newline, DEL, and the C1 controls (U+0080-U+009F: a lone 0x9b is CSI on many
# terminals); also the bidi overrides that reorder what a user reads (Trojan Source, CVE-2021-42574)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def sanitize(text: str) -> str:
    """`text` safe to show on a terminal: every control character but newline and tab becomes a visible
    escape (`\\x1b`, `\\u202e`), so a record, a node's output or a child's line can neither clear the
    screen, hide text, retitle the window nor write the clipboard (OSC 52). Apply it to every value
    that comes from a file, a record, a node or a child process; --json output needs no call (json.dumps
    escapes controls itself).
    """
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


# rich's markup grammar, as rich/markup.py (rich 15) writes it: RE_TAGS and escape(). Copied so that esc() and
# the plain output of a non-terminal need no rich import: importing and setting up rich's Console costs ~50 ms of
# CPU, an eighth of a warm create (scripts/bench_create.py, issue 26).
_RICH_TAG = re.compile(r"((\\*)\[([a-z#/@][^[]*?)])")
_RICH_ESCAPE = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def esc(text: str) -> str:
    """Escape user- and data-supplied text for rich markup (specs like pytorch[build=cuda*]); rich.markup.escape."""
    def double(match: re.Match[str]) -> str:
        backslashes, tag = match.groups()
        return f"{backslashes}{backslashes}\\{tag}"

    text = _RICH_ESCAPE.sub(double, text)
    if text.endswith("\\") and not text.endswith("\\\\"):
        return text + "\\"
    return text


def unmarkup(markup: str) -> str:
    """The text rich prints for `markup`, without its styles (rich.markup._parse: tags dropped, escaped
    brackets and backslashes kept literally)."""
    out: list[str] = []
    position = 0
    for match in _RICH_TAG.finditer(markup):
        full, escapes, _tag = match.groups()
        start, end = match.span()
        if start > position:
            out.append(markup[position:start])
        position = end
        if escapes:
            backslashes, escaped = divmod(len(escapes), 2)
            out.append("\\" * backslashes)
            if escaped:
                out.append(full[len(escapes):])
    out.append(markup[position:])
    return "".join(out)


class _PlainConsole:
    """What console() gives when stdout is no terminal, for the verbs' result lines: the same text, no
    styles, and no rich import (a script, a CI log, `> file`)."""

    def print(self, markup: str = "") -> None:
        plain(unmarkup(markup))


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def text_console() -> Console | _PlainConsole:
    """rich on a terminal; plain lines otherwise (styles are dropped there anyway)."""
    return console() if sys.stdout.isatty() else _PlainConsole()


def print_detect(result: DetectResult) -> None:
    from rich.table import Table

    con = console()
    m = result.machine
    if m.driver is None:
        con.print("[bold]Driver:[/] none found" + (" (simulated)" if m.simulated else ""))
    else:
        con.print(f"[bold]Driver:[/] {m.driver.version}  [bold]CUDA (driver max):[/] {m.driver.cuda or 'unknown'}"
                  f"  [dim]source: {m.driver.source}[/]")
    if m.cuda_override is not None:
        con.print(f"[bold]CUDA override:[/] {m.cuda_override or '(empty: no CUDA)'}")
    if m.gpus:
        table = Table(title=None, show_edge=False)
        for col in ("#", "GPU", "compute capability", "memory (MiB)", "UUID"):
            table.add_column(col)
        for g in m.gpus:
            table.add_row(str(g.index), g.name, g.compute_capability, str(g.memory_mib or "?"), g.uuid or "")
        con.print(table)
    elif m.gpus_hidden:
        con.print("[yellow]GPUs: hidden by CUDA_VISIBLE_DEVICES[/]")
    elif m.driver is not None and not m.gpus_known:
        con.print("[yellow]GPUs: unknown (NVML and nvidia-smi unavailable)[/]")
    for note in m.notes:
        con.print(f"[yellow]note:[/] {esc(note)}")
    if result.selection is not None:
        print_selection(result.selection, con)


def print_catalogue(table: dict[str, Any]) -> None:
    """`envkit detect --catalogue`: one table per flavor, torch x CUDA variant, usable or why not."""
    from rich.table import Table

    con = console()
    for block in table["flavors"]:
        con.print(f"[bold]{esc(block['flavor'])}[/]  [dim]{esc(block['source'])}[/]")
        grid = Table(show_edge=False)
        for col in ("torch", "variant", "python", "usable", "why"):
            grid.add_column(col)
        for row in block["offers"]:
            pys = row["python"]
            grid.add_row(row["torch"], row["variant"] or "-", f"{pys[0]}-{pys[-1]}" if pys else "-",
                         "[green]yes[/]" if row["usable"] else "[red]no[/]", esc(str(row["why"])))
        con.print(grid)


def print_selection(sel: Selection, con: Console | None = None) -> None:
    con = con or console()
    build = f"CUDA {sel.cuda} ({sel.variant})" if sel.cuda else "[yellow]CPU only[/]"
    con.print(f"[bold green]Selected:[/] torch {sel.torch} · {build} · python {sel.python} · flavor {sel.flavor}")
    con.print(esc("  conda: " + " ".join(sel.specs) + f"   channels: {', '.join(sel.channels)}"))
    if sel.pip_specs:
        con.print(esc("  pip:   " + " ".join(sel.pip_specs) + f"   index: {sel.pip_index_url}"))
    con.print("[bold]Why:[/]")
    for reason in sel.reasons:
        con.print(f"  - {esc(reason)}")
    if not sel.is_gpu:
        con.print("[bold yellow]Notice:[/] this is a CPU build; no GPU will be used.")


def error(message: str, hint: str | None) -> None:
    from envkit.secrets import redact

    message, hint = sanitize(redact(message)), sanitize(redact(hint)) if hint else hint
    if "\n" in message.strip() or (hint and "\n" in hint.strip()):
        # the promise is one `error:` line and one `fix:` line; a multi-line engine text is condensed
        # (its root cause kept) and shown whole only with -v
        from envkit.engines.errtext import condensed

        message = condensed(message, "error") or message.strip()
        hint = " ".join(hint.split()) if hint else hint
    con = console(stderr=True)
    con.print(f"[bold red]error:[/] {esc(message)}")
    if hint:
        con.print(f"[bold]fix:[/] {esc(hint)}")


def plain(text: str = "", err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


_STATUS_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "dim"}
_OUTCOME_STYLE = {"PASS": "bold green", "FAIL": "bold red", "SKIPPED": "bold yellow"}


def print_verify(report: VerifyReport) -> None:
    from rich.table import Table

    con = console()
    table = Table(show_edge=False, expand=False)
    for col in ("check", "GPU", "status", "time", "what it found"):
        table.add_column(col, overflow="fold")
    for c in report.checks:
        style = _STATUS_STYLE.get(c.get("status", ""), "")
        table.add_row(c["name"], "" if c.get("device") is None else str(c["device"]),
                      f"[{style}]{c['status'].upper()}[/]", f"{c.get('duration_s', 0):.2f}s", esc(c["explanation"]))
    con.print(table)
    style = _OUTCOME_STYLE[report.outcome]
    con.print(f"[{style}]{report.outcome}[/]: {esc(report.summary)}")
    if report.outcome == "SKIPPED":
        con.print("[bold yellow]!!! SKIPPED is not PASS: no check ran on a GPU. "
                  "Run on a machine with a visible NVIDIA GPU to prove this environment. !!![/]")


def human_size(n: int | None) -> str:
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def print_changes(result: CreateResult) -> None:
    for change in getattr(result, "changes", ()):
        plain(f"changed: {change}", err=True)


def print_plan(result: CreateResult) -> None:
    from rich.table import Table

    print_changes(result)
    con = console()
    table = Table(show_edge=False, title=f"plan for {result.prefix}")
    for col in ("package", "version", "build", "channel", "size", ""):
        table.add_column(col)
    for p in sorted(result.packages, key=lambda p: p.name):
        table.add_row(p.name, p.version, p.build, esc(p.channel), human_size(p.size), "cached" if p.cached else "")
    con.print(table)
    for line in result.pip_lines:
        con.print(f"  pip: {esc(line)}")
    if result.virtual_packages:
        con.print("  solved for: " + esc(" ".join(result.virtual_packages)))
    con.print(f"{len(result.packages)} packages, {human_size(result.download_bytes)} to download. "
              "Dry run: nothing was installed.")


def print_created(result: CreateResult) -> None:
    from envkit.shell.activate import next_steps

    print_changes(result)
    con = text_console()
    for note in result.notes:
        con.print(f"[yellow]note:[/] {esc(note)}")
    phases = ", ".join(f"{k} {v:.2f}s" for k, v in result.phases.items())
    con.print(f"[bold green]created[/] {esc(str(result.prefix))}: {len(result.packages)} conda packages"
              + (f", {len(result.pip_lines)} pip" if result.pip_lines else "") + f" ({phases})")
    if result.selection is not None:
        sel = result.selection
        con.print(f"  torch {sel.torch} · " + (f"CUDA {sel.cuda} ({sel.variant})" if sel.cuda else "CPU build")
                  + f" · python {sel.python} · {sel.flavor}")
    steps = next_steps(result.prefix)
    width = max(len(command) for command, _ in steps)
    con.print("  use it:")
    for command, what in steps:
        con.print(f"    {esc(command.ljust(width))}   [dim]# {esc(what)}[/]")
    if result.verify is not None:
        print_verify(result.verify)
    else:
        con.print("  verify skipped (--no-verify): run `envkit verify " + result.prefix.name + "`")


class _PlainProgress:
    """Phase lines, and a download line (bytes, rate, ETA) at most every PLAIN_EVERY_S seconds: a log or CI
    job sees a slow mirror without a line per chunk."""

    PLAIN_EVERY_S = 10.0

    def __init__(self) -> None:
        import threading
        import time

        from envkit.engines.fetch import Meter, describe
        from envkit.engines.rattler_engine import Progress

        self.meter = Meter()
        self.last = [time.monotonic()]
        lock = threading.Lock()

        def total(n: int) -> None:
            self.meter = Meter(n)

        def moved(n: int) -> None:  # from the download workers' threads
            self.meter.add(n)
            now = time.monotonic()
            with lock:
                if now - self.last[0] < self.PLAIN_EVERY_S:
                    return
                self.last[0] = now
            plain(f"download {describe(self.meter)}", err=True)

        self.progress = Progress(phase=lambda name: plain(f"{name}...", err=True), download_total=total,
                                 download_bytes=moved, download_kept=lambda n: self.meter.skip(n))

    def __enter__(self) -> Progress:
        return self.progress

    def __exit__(self, *exc: Any) -> None:
        return None


class _RichProgress:
    def __init__(self) -> None:
        from rich.progress import BarColumn, Progress as Bar, SpinnerColumn, TextColumn

        from envkit.engines.rattler_engine import Progress

        self.bar = Bar(SpinnerColumn(), TextColumn("{task.description:<9}"), BarColumn(),
                       TextColumn("{task.fields[detail]}"), console=console(stderr=True), transient=True)
        self.solve = self.bar.add_task("solve", total=None, detail="")
        self.download = self.bar.add_task("download", total=None, visible=False, detail="")
        self.link = self.bar.add_task("link", total=None, visible=False, detail="")
        from envkit.engines.fetch import Meter, describe

        self.meter = Meter()
        self.links = [0, 0]

        def phase(name: str) -> None:
            if name in ("download", "install"):
                self.bar.update(self.solve, total=1, completed=1, detail="done")
                self.bar.update(self.download, visible=True)
            if name == "install":
                self.bar.update(self.link, visible=True)

        def download_total(n: int) -> None:
            done = self.meter.done
            self.meter = Meter(n)
            self.meter.skip(done)  # a second total (rattler's own fetches after envkit's) keeps the count
            self.bar.update(self.download, total=n or None, completed=done, detail=describe(self.meter))

        def download_bytes(n: int) -> None:  # bytes, rate over the last seconds, ETA (engines/fetch.Meter)
            self.meter.add(n)
            self.bar.update(self.download, completed=self.meter.done, detail=describe(self.meter))

        def download_kept(n: int) -> None:  # resumed from an earlier attempt or run: done, but no speed
            self.meter.skip(n)
            self.bar.update(self.download, completed=self.meter.done, detail=describe(self.meter))

        def link_total(n: int) -> None:
            self.links[1] = n
            self.bar.update(self.link, total=n, detail=f"0/{n} packages")

        def linked(_name: str) -> None:
            self.links[0] += 1
            self.bar.update(self.link, advance=1, detail=f"{self.links[0]}/{self.links[1]} packages")

        self.progress = Progress(phase=phase, download_total=download_total, download_bytes=download_bytes,
                                 download_kept=download_kept, link_total=link_total, linked=linked)

    def __enter__(self) -> Progress:
        self.bar.start()
        return self.progress

    def __exit__(self, *exc: Any) -> None:
        self.bar.stop()


class _QuietProgress:
    def __enter__(self) -> Progress:
        from envkit.engines.rattler_engine import Progress

        return Progress()

    def __exit__(self, *exc: Any) -> None:
        return None


def progress(quiet: bool) -> AbstractContextManager[Progress]:
    """Rich bars on a terminal, plain phase lines otherwise, nothing with --quiet/--json."""
    if quiet:
        return _QuietProgress()
    if sys.stderr.isatty():
        return _RichProgress()
    return _PlainProgress()


def print_list(data: dict[str, Any]) -> None:
    from rich.table import Table

    con = console()
    if data["environments"]:
        table = Table(show_edge=False, title="environments")
        for col in ("name", "torch", "build", "last verify", "prefix"):
            table.add_column(col)
        for env in data["environments"]:
            build = (f"CUDA {env['cuda']}" if env["cuda"] else ("CPU" if env["torch"] else "")) + (
                f" ({env['flavor']})" if env["flavor"] else "")
            outcome = env["verify"] or "never"
            style = _OUTCOME_STYLE.get(outcome, "dim")
            torch = "(unreadable)" if env.get("unreadable") else (
                (env["torch"] or "?") if env["by_envkit"] else
                " ".join(filter(None, [env["torch"], f"({env.get('origin', 'not envkit')})"])))
            table.add_row(esc(env["name"]), esc(torch), esc(build), f"[{style}]{esc(outcome)}[/]", esc(env["prefix"]))
        con.print(table)
        for env in data["environments"]:
            if env.get("unreadable"):
                con.print(f"[yellow]note:[/] {esc(env['name'])}: {esc(env['unreadable'])}")
            if not env["by_envkit"] and env.get("origin") in ("copied", "older envkit"):
                con.print(f"[yellow]note:[/] {esc(env['name'])}: not proven envkit's: {esc(env['ownership'])}; "
                          f"remove it with: {esc(env['remove'])}")
    else:
        con.print("no environments yet: envkit create dl_train")
    table = Table(show_edge=False, title="specs")
    table.add_column("spec")
    table.add_column("description")
    for spec in data["specs"]:
        table.add_row(spec["name"], esc(spec["description"]))
    con.print(table)


class RedactingStream:
    """A text stream that redacts whole lines (a secret split across two writes is still caught)."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._pending = ""

    def write(self, text: str | bytes) -> int:
        from envkit.secrets import redact

        if isinstance(text, (bytes, bytearray)):  # click.echo(bytes) falls back to the text stream: no .buffer here
            text = bytes(text).decode(self.encoding, "replace")
        self._pending += text
        cut = max(self._pending.rfind("\n"), self._pending.rfind("\r"))
        if cut >= 0:
            ready, self._pending = self._pending[:cut + 1], self._pending[cut + 1:]
            self.inner.write(redact(ready))
        if len(self._pending) > 65536:  # a very long line without a newline: do not hold it forever
            self.flush()
        return len(text)

    def flush(self) -> None:
        from envkit.secrets import redact

        if self._pending:
            pending, self._pending = self._pending, ""
            self.inner.write(redact(pending))
        self.inner.flush()

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def isatty(self) -> bool:
        return bool(getattr(self.inner, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return getattr(self.inner, "errors", None) or "strict"

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:  # mode, name, closed...: the inner stream's
        if name == "buffer":  # bytes written there would bypass redaction
            raise AttributeError(name)
        return getattr(self.inner, name)


@contextmanager
def redacting_streams() -> Iterator[None]:
    """sys.stdout and sys.stderr redact for the duration (the one output boundary of envkit)."""
    out, err = sys.stdout, sys.stderr
    if isinstance(out, RedactingStream) or out is None or err is None:
        yield
        return
    sys.stdout, sys.stderr = RedactingStream(out), RedactingStream(err)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        sys.stdout, sys.stderr = out, err

"""Human (rich) and --json rendering of the models. Only the cli/ package calls these.

It is also the redaction boundary: `redacting_streams()` (entered by cli._run around every
command) routes stdout and stderr through `secrets.redact`, so no message, hint, log line, child
process line, progress text or --json document can carry a credential out of envkit.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from envkit.models import DetectResult, Machine, Selection

if TYPE_CHECKING:
    from rich.console import Console

    from envkit.change.apply import ChangeResult
    from envkit.change.clean import CleanResult
    from envkit.change.diff import ChangePlan, Row
    from envkit.config import Setting
    from envkit.create import CreateResult, Plan
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


def esc(text: str) -> str:
    """Escape user- and data-supplied text for rich markup (specs like pytorch[build=cuda*])."""
    from rich.markup import escape

    return escape(text)


_LIVE: list[Console] = []  # the stderr console of the live progress display, while one runs
_ROWS: list[_RichProgress] = []  # that display, for the child lines that name its current step


def console(stderr: bool = False) -> Console:
    """A console for stdout or stderr; while a live progress display runs, stderr is its console, so a line
    printed then lands above the bars instead of on the bar's own line."""
    from rich.console import Console

    if stderr and _LIVE:
        return _LIVE[-1]
    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def line(text: str, err: bool = True) -> None:
    """A line from a child process or a step (pip, the verify payload): wrapped at spaces to the terminal's
    width, control characters made visible, no markup."""
    console(stderr=err).print(esc(sanitize(text)), soft_wrap=False)
    if _ROWS:
        _ROWS[-1].step(text)


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
    con.print(f"[bold green]Selected:[/] torch {sel.torch} · {build} · python {sel.python} · flavor {sel.flavor}",
              soft_wrap=False)
    hanging(con, "  conda: ", esc(" ".join(sel.specs) + f"   channels: {', '.join(sel.channels)}"))
    if sel.pip_specs:
        hanging(con, "  pip:   ", esc(" ".join(sel.pip_specs) + f"   index: {sel.pip_index_url}"))
    con.print("[bold]Why:[/]")
    for reason in sel.reasons:
        hanging(con, "  - ", esc(reason))
    if not sel.is_gpu:
        con.print("[bold yellow]Notice:[/] this is a CPU build; no GPU will be used.")


def error(message: str, hint: str | None, details: str | None = None) -> None:
    """One `error:` line, then `details` as they are (a user's own traceback), then one `fix:` line."""
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
    if details:
        con.print(esc(sanitize(redact(details))), highlight=False, soft_wrap=True)
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
    con.print(f"[{style}]{report.outcome}[/]: {esc(report.summary)}", soft_wrap=False)


SKIPPED_TAIL = ". SKIPPED is not a PASS"  # where verify.report's SKIPPED summary turns from why to what it means


def verify_why(report: VerifyReport) -> str:
    """The outcome's reason alone (a SKIPPED summary without its explanation of SKIPPED)."""
    return report.summary.split(SKIPPED_TAIL, 1)[0]


def verify_line(report: VerifyReport) -> str:
    """The outcome in one line (verify -q): `SKIPPED: why (not a PASS)`."""
    return sanitize(f"{report.outcome}: {verify_why(report)}" + (" (not a PASS)" if report.outcome == "SKIPPED" else ""))


def print_model_verify(report: VerifyReport) -> None:
    """verify --model: the precisions side by side, the module that overflows, the code to paste."""
    from rich.table import Table

    con = console()
    analysis = report.data.get("analysis") or {}
    precisions = report.data.get("precisions") or {}
    judged = analysis.get("precisions") or {}
    if precisions:
        table = Table(show_edge=False, expand=False, title=f"{_safe(str(report.data.get('model')))} "
                      f"({_safe(str(report.data.get('model_class')))}, {report.data.get('steps')} steps, "
                      f"{'CPU mode' if analysis.get('cpu_mode') else _safe(_gpu_names(report))})")
        for col in ("", "verdict", "loss", "gap", "inf/nan", "skips", "scale", "ms/step", "speed", "MiB"):
            table.add_column(col, overflow="fold")
        for mode, rec in precisions.items():
            j = judged.get(mode, {})
            if "skipped" in rec:
                table.add_row(mode, "[dim]not run[/]", _safe(rec["skipped"]), *[""] * 7)
                continue
            losses = [v for v in rec.get("losses") or [] if v is not None]
            first_last = f"{losses[0]:.3g}→{losses[-1]:.3g}" if losses else "none finite"
            gap = (j.get("agreement") or {}).get("final_gap")
            verdict = {"safe": "[green]safe[/]", "unsafe": "[bold red]unsafe[/]"}.get(j.get("status", ""),
                                                                                        "[green]base[/]")
            scale = j.get("scale") or {}
            table.add_row(mode, verdict, first_last, "" if gap is None else f"{gap:.1%}",
                          str(len(rec.get("nonfinite_steps") or [])),
                          "" if "skipped_steps" not in rec else str(len(rec["skipped_steps"])),
                          "" if not scale else f"{scale.get('initial', 0):.3g}→{scale.get('final', 0):.3g} "
                          f"{scale.get('trend')}",
                          "" if rec.get("step_ms") is None else f"{rec['step_ms']:.2f}",
                          "" if j.get("speedup") is None else f"{j['speedup']:.2f}x",
                          "n/a" if rec.get("peak_mem_mib") is None else f"{rec['peak_mem_mib']:.0f}")
        con.print(table)
    for c in report.checks:
        if c.get("status") in ("fail", "warn") and c["name"] not in judged:
            con.print(f"[{_STATUS_STYLE[c['status']]}]{c['name']}[/]: {_safe(c['explanation'])}")
    for mode, j in judged.items():
        for reason in j.get("reasons", []) if j.get("status") == "unsafe" else []:
            con.print(f"[bold red]{mode}[/]: {_safe(reason)}")
    rec = analysis.get("recommendation") or {}
    if rec:
        con.print(f"[bold]recommended: {_safe(str(rec.get('choice')))}[/] - {_safe(str(rec.get('reason')))}")
        if rec.get("code"):
            con.print(_safe(rec["code"]), highlight=False)
        if rec.get("also"):
            con.print(_safe(rec["also"]))
            con.print(_safe(rec.get("also_code", "")), highlight=False)
    style = _OUTCOME_STYLE[report.outcome]
    con.print(f"[{style}]{report.outcome}[/]: {_safe(report.summary)}")
    if report.outcome == "SKIPPED":
        con.print("[bold yellow]!!! SKIPPED is not PASS: this ran on the CPU (CPU autocast). "
                  "Run it on the GPU you train on for the GPU verdict. !!![/]")


def _safe(text: str) -> str:
    """A value from the user's model or the payload (module names, messages): no markup, no control characters."""
    return esc(sanitize(str(text)))


def _gpu_names(report: VerifyReport) -> str:
    return ", ".join(g.get("name", "?") for g in report.data.get("gpus") or []) or "GPU"


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


def channel_names(urls: Iterable[str]) -> dict[str, str]:
    """A short name per channel URL for a narrow table (its last path part; #2, #3... when two share one)."""
    names: dict[str, str] = {}
    for url in dict.fromkeys(urls):
        base = url.rstrip("/").rsplit("/", 1)[-1] or url
        name, n = base, 1
        while name in names.values():
            n += 1
            name = f"{base}#{n}"
        names[url] = name
    return names


def hanging(con: Console, head: str, text: str) -> None:
    """`head` then `text` (markup-escaped by the caller), later lines indented under the text, not at column 0."""
    from rich.table import Table

    grid = Table.grid()
    grid.add_column(no_wrap=True)
    grid.add_column()
    grid.add_row(head, text)
    con.print(grid)


def print_plan_header(plan: Plan) -> None:
    """create, after the solve and before any download (stderr, beside the progress): the build and why,
    the package count and download size, and where it differs from what was asked."""
    con = console(stderr=True)
    sel = plan.selection
    if sel is not None:
        build = f"CUDA {sel.cuda} ({sel.variant})" if sel.cuda else "CPU only"
        con.print(f"[bold]plan:[/] torch {esc(sel.torch)} · {esc(build)} · python {esc(sel.python)} · "
                  f"{esc(sel.flavor)}", soft_wrap=False)
        for reason in sel.reasons:
            hanging(con, "  - ", esc(reason))
    else:
        con.print("[bold]plan:[/] the file's packages as they are (no selection)", soft_wrap=False)
    if plan.packages:
        cached = f", {plan.cached} already cached" if plan.cached else ""
        pip = f"; then {len(plan.pip_lines)} pip line(s)" if plan.pip_lines else ""
        con.print(f"  {len(plan.packages)} conda packages, {human_size(plan.download_bytes)} to download"
                  f"{cached}{pip}", soft_wrap=False)
    else:
        con.print("  packages: solved by the engine during the install", soft_wrap=False)
    for difference in plan.differences:
        hanging(con, "  ! ", f"[bold yellow]differs from what was asked:[/] {esc(difference)}")


def plan_line(result: CreateResult) -> str:
    """create --dry-run -q: the plan in one line."""
    return sanitize(f"plan for {result.prefix}: {len(result.packages)} packages"
                    + (f", {len(result.pip_lines)} pip" if result.pip_lines else "")
                    + f", {human_size(result.download_bytes)} to download (dry run: nothing was installed)")


def created_line(result: CreateResult) -> str:
    """create -q: the result in one line (what was built, and what verify proved)."""
    sel = result.selection
    build = "" if sel is None else (f"torch {sel.torch} " + (f"CUDA {sel.cuda} ({sel.variant})" if sel.cuda else "CPU")
                                    + f", python {sel.python}: ")
    proof = "verify skipped (--no-verify)" if result.verify is None else f"verify {verify_line(result.verify)}"
    return sanitize(f"created {result.prefix}: {build}") + proof


def print_plan(result: CreateResult) -> None:
    from rich.table import Table

    print_changes(result)
    con = console()
    con.print(f"plan for {esc(str(result.prefix))}", soft_wrap=False)  # a table title would not wrap
    table = Table(show_edge=False)
    for col in ("package", "version", "build", "channel", "size", ""):  # fold, never cut with an ellipsis
        table.add_column(col, overflow="fold", no_wrap=col in ("size", ""))
    short = channel_names(p.channel for p in result.packages)
    for p in sorted(result.packages, key=lambda p: p.name):
        table.add_row(p.name, p.version, p.build, esc(short[p.channel]), human_size(p.size),
                      "cached" if p.cached else "")
    con.print(table)
    for url, name in short.items():  # the whole URL once, below the table, wrapped rather than cut
        con.print(f"  channel {esc(name)}: {esc(url)}", soft_wrap=False)
    for line in result.pip_lines:
        con.print(f"  pip: {esc(line)}", soft_wrap=False)
    if result.virtual_packages:
        con.print("  solved for: " + esc(" ".join(result.virtual_packages)), soft_wrap=False)
    con.print(f"{len(result.packages)} packages, {human_size(result.download_bytes)} to download. "
              "Dry run: nothing was installed.", soft_wrap=False)


def print_created(result: CreateResult) -> None:
    from rich.table import Table

    from envkit.shell.activate import next_steps

    print_changes(result)
    con = console()
    for note in result.notes:
        con.print(f"[yellow]note:[/] {esc(note)}", soft_wrap=False)
    phases = ", ".join(f"{k} {v:.2f}s" for k, v in result.phases.items())
    con.print(f"[bold green]created[/] {esc(str(result.prefix))}: {len(result.packages)} conda packages"
              + (f", {len(result.pip_lines)} pip" if result.pip_lines else "") + f" ({phases})", soft_wrap=False)
    if result.selection is not None:
        sel = result.selection
        con.print(f"  torch {sel.torch} · " + (f"CUDA {sel.cuda} ({sel.variant})" if sel.cuda else "CPU build")
                  + f" · python {sel.python} · {sel.flavor}", soft_wrap=False)
    con.print("  use it:")
    # the command is never wrapped (it is copied as printed); its comment wraps beside it, or goes above it
    # when the command leaves it no room at this width
    steps = next_steps(result.prefix)
    width = max(len(command) for command, _ in steps) + 4
    if width + 24 <= con.width:
        grid = Table.grid(padding=(0, 3))
        grid.add_column(no_wrap=True)
        grid.add_column(style="dim")
        for command, what in steps:
            grid.add_row("    " + esc(command), f"# {esc(what)}")
        con.print(grid)
    else:
        for command, what in steps:
            con.print(f"    [dim]# {esc(what)}[/]", soft_wrap=False)
            con.print(f"    {esc(command)}")
    if result.verify is not None:
        print_verify(result.verify)
    else:
        con.print("  verify skipped (--no-verify): run `envkit verify " + result.prefix.name + "`")


class _PlainProgress:
    """Not a terminal: one plain line as each phase starts (solve..., download..., install..., pip...,
    verify...), and a download line (bytes, rate, time left) at most every PLAIN_EVERY_S seconds: a log or CI
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


# what a pip output line says it is doing, for the live row: "Collecting transformers", "Installing ..."
_PIP_STEP = re.compile(r"^\s*(Collecting|Downloading|Processing|Building wheel for|Installing collected packages:|"
                       r"Successfully installed)\s*(\S*)")


class _RichProgress:
    """One live row per phase on a terminal: solve, download (bytes, rate, time left), link (packages), pip
    (the current package), verify (the smoke test); rows of phases that did not happen stay hidden."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, Progress as Bar, SpinnerColumn, TextColumn, TimeElapsedColumn

        from envkit.engines.rattler_engine import Progress

        self.bar = Bar(SpinnerColumn(), TextColumn("{task.description:<9}"), BarColumn(bar_width=24),
                       TimeElapsedColumn(), TextColumn("{task.fields[detail]}"), console=console(stderr=True),
                       transient=True)
        self.solve = self.bar.add_task("solve", total=None, detail="")
        # a row's clock starts when its phase does (start_task), not when the display does
        self.download = self.bar.add_task("download", total=None, visible=False, detail="", start=False)
        self.link = self.bar.add_task("link", total=None, visible=False, detail="", start=False)
        self.pip = self.bar.add_task("pip", total=None, visible=False, detail="", start=False)
        self.verify = self.bar.add_task("verify", total=None, visible=False, detail="", start=False)
        self.current: int | None = None
        from envkit.engines.fetch import Meter, describe

        self.meter = Meter()  # bytes, rate over the last seconds, time left (engines/fetch.py)
        self.links = [0, 0]

        def done(task: Any, detail: str = "done") -> None:
            self.bar.update(task, total=1, completed=1, detail=detail)

        def downloaded() -> str:
            return describe(self.meter) if self.meter.total or self.meter.done else "nothing to download"

        def phase(name: str) -> None:
            if name == "download":  # envkit fetches what the cache lacks (engines/fetch.py), then rattler links
                done(self.solve)
                self.bar.update(self.download, visible=True, detail=downloaded())
                self.bar.start_task(self.download)
            elif name == "install":
                if not self.bar.tasks[self.solve].finished:
                    done(self.solve)
                self.bar.update(self.download, visible=True, detail=downloaded())
                self.bar.update(self.link, visible=True)
                self.bar.start_task(self.download)
                self.bar.start_task(self.link)
            elif name in ("pip", "verify"):
                for task in (self.solve, self.download, self.link, self.pip):
                    if self.bar.tasks[task].visible and not self.bar.tasks[task].finished:
                        done(task, self.bar.tasks[task].fields.get("detail") or "done")
                self.current = self.pip if name == "pip" else self.verify
                self.bar.start_task(self.current)
                self.bar.update(self.current, visible=True, detail=(
                    "resolving the pip section" if name == "pip" else "the AMP smoke test, by the env's own python"))

        def download_total(n: int) -> None:
            before = self.meter.done
            self.meter = Meter(n)
            self.meter.skip(before)  # a second total (rattler's own fetches after envkit's) keeps the count
            self.bar.update(self.download, total=n or None, completed=before, detail=downloaded())

        def download_bytes(n: int) -> None:  # from envkit's download workers or rattler's reporter
            self.meter.add(n)
            self.bar.update(self.download, completed=self.meter.done, detail=downloaded())

        def download_kept(n: int) -> None:  # resumed from an earlier attempt or run: done, but no speed
            self.meter.skip(n)
            self.bar.update(self.download, completed=self.meter.done, detail=downloaded())

        def link_total(n: int) -> None:
            self.links[1] = n
            self.bar.update(self.link, total=n, detail=f"0/{n} packages")

        def linked(_name: str) -> None:
            self.links[0] += 1
            self.bar.update(self.link, advance=1, detail=f"{self.links[0]}/{self.links[1]} packages")

        self.progress = Progress(phase=phase, download_total=download_total, download_bytes=download_bytes,
                                 download_kept=download_kept, link_total=link_total, linked=linked)

    def step(self, text: str) -> None:
        """A child's line (pip's): the current package on the phase's row."""
        match = _PIP_STEP.match(text)
        if self.current == self.pip and match:
            self.bar.update(self.pip, detail=sanitize(f"{match.group(1)} {match.group(2)}".strip())[:40])

    def __enter__(self) -> Progress:
        self.bar.start()
        _LIVE.append(self.bar.console)
        _ROWS.append(self)
        return self.progress

    def __exit__(self, *exc: Any) -> None:
        _ROWS.remove(self)
        _LIVE.remove(self.bar.console)
        self.bar.stop()


class _QuietProgress:
    def __enter__(self) -> Progress:
        from envkit.engines.rattler_engine import Progress

        return Progress()

    def __exit__(self, *exc: Any) -> None:
        return None


@contextmanager
def paused(bars: AbstractContextManager[Progress]) -> Iterator[None]:
    """Take the live bars off the terminal while a plan is printed and a question asked, then put them back."""
    if not isinstance(bars, _RichProgress):
        yield
        return
    bars.bar.stop()
    try:
        yield
    finally:
        bars.bar.start()


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
        for col in ("name", "torch", "build", "last verify", "prefix"):  # a long prefix folds, whole
            table.add_column(col, overflow="fold")
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
    table.add_column("spec", overflow="fold")
    table.add_column("description", overflow="fold")
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


# -- install / uninstall / update (envkit/change) ----------------------------------------------------------
def print_change_plan(plan: ChangePlan, err: bool = False) -> None:
    """The diff before anything is downloaded: + added, ~ changed (from -> to), - removed, the download size."""
    con = console(stderr=err)
    d = plan.diff
    if d.empty:
        con.print(f"{esc(str(plan.prefix))}: nothing to change (the env already has what was asked)")
        return
    con.print(f"{plan.action}{' (pip)' if plan.pip else ''} {'from' if plan.action == 'uninstall' else 'into'} "
              f"{esc(str(plan.prefix))}:")

    def size(row: Row) -> str:
        return "" if row.size is None else f"  {human_size(row.size)}{'' if row.cached else ' to download'}"

    for row in d.added:
        con.print(f"  [green]+ {esc(row.label())}[/]{size(row)}")
    for old, new in d.changed:
        con.print(f"  [yellow]~ {esc(old.name)} {esc(old.version)} {esc(old.build)} -> {esc(new.version)} "
                  f"{esc(new.build)}[/]{size(new)}")
    for row in d.removed:
        con.print(f"  [red]- {esc(row.label())}[/]")
    for row in d.reinstalled:
        con.print(f"  [cyan]= {esc(row.label())} (reinstalled)[/]{size(row)}")
    con.print(f"  {len(d.added)} added, {len(d.changed)} changed, {len(d.removed)} removed" +
              (f", {len(d.reinstalled)} reinstalled" if d.reinstalled else "") +
              ("" if plan.pip else f"; {human_size(d.download_bytes)} to download"))
    for reason in plan.torch.reasons:
        con.print(f"  [bold yellow]torch:[/] {esc(reason)}")


def print_change_result(result: ChangeResult) -> None:
    con = console()
    for note in result.notes:
        con.print(f"[yellow]note:[/] {esc(note)}")
    if result.dry_run:
        con.print("Dry run: nothing was downloaded or changed.")
        return
    if not result.applied:
        if result.restored_old:
            con.print(f"verify FAILED after the change: {esc(str(result.plan.prefix))} is back as it was")
        return
    phases = ", ".join(f"{k} {v:.2f}s" for k, v in result.phases.items())
    done = {"install": "installed", "uninstall": "uninstalled", "update": "updated"}[result.plan.action]
    con.print(f"[bold green]{done}[/] {esc(' '.join(result.plan.specs)) or 'everything'} "
              f"in {esc(str(result.plan.prefix))} ({phases})"
              + ("" if result.plan.pip else "; conda-meta/history records it"))
    if result.verify is not None:
        print_verify(result.verify)


def print_settings(settings: Sequence[Setting]) -> None:
    from rich.table import Table

    table = Table(show_edge=False)
    for col in ("key", "value", "from"):
        table.add_column(col)
    for s in settings:
        value = "" if s.value is None else ", ".join(s.value) if isinstance(s.value, list) else str(s.value)
        table.add_row(esc(s.key), esc(value), esc(s.origin))
    console().print(table)
    console().print("[dim]a command-line flag beats ENVKIT_*, which beats the config file, which beats the default[/]")


def print_clean(result: CleanResult) -> None:
    con = console()
    groups: dict[tuple[str, str], list[int]] = {}
    for item in result.items:
        if item.what in ("staging", "set-aside env") or item.action != "remove":
            con.print(f"  {esc(item.action)}: {esc(item.what)} {esc(str(item.path))} ({human_size(item.size)})")
            continue
        size, frees, count = groups.setdefault((item.what, str(item.path.parent)), [0, 0, 0])
        groups[(item.what, str(item.path.parent))] = [size + item.size, frees + item.frees, count + 1]
    for (what, where), (size, frees, count) in groups.items():
        shared = f", {human_size(size - frees)} of it hard-linked into envs (stays with them)" if size > frees else ""
        con.print(f"  {'would remove' if result.dry_run else 'removed'} {esc(what)} ({count} files and folders) in "
                  f"{esc(where)}: {human_size(size)}{shared}")
    for note in result.notes:
        con.print(f"[yellow]note:[/] {esc(note)}")
    if not result.items:
        con.print("nothing to clean")
        return
    con.print(f"Dry run: nothing was removed; {human_size(result.frees)} would be freed" if result.dry_run else
              f"{human_size(result.frees)} freed")

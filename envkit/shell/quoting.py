"""Every value envkit puts into shell code goes through one function here: nothing from a path, a file
or the environment is ever spliced into code any other way (issue 20).

Two kinds of quoting, one function per shell for each:

* a *word*: a value as one literal argument or assignment value (`sh_quote`, `bash_quote`, `zsh_quote`,
  `fish_quote`; `quote(value, shell)` picks one). Single quotes: POSIX 2024 XCU 2.2.2 "Single-Quotes"
  (nothing inside is special; a quote cannot appear, so it is written `'\\''`), bash(1) and zsh(1)
  QUOTING alike; bash and zsh also get control characters as ANSI-C `$'\\xHH'` pieces (bash(1) QUOTING,
  zsh(1) "QUOTING") so the code printed to a terminal shows no raw escape sequence. fish(1) "Quotes":
  inside single quotes only `\\'` and `\\\\` are special; control characters go outside the quotes as
  fish's `\\XHH` escapes. A NUL byte has no representation in any of them (a shell variable, like an
  environment variable, is a C string): `Unrepresentable`, and the caller leaves that value out.
* a *prompt text*: a literal to put into PS1/PROMPT so that prompt expansion shows it as it is and
  runs nothing (`prompt_bash`, `prompt_zsh`, `prompt_sh`; fish's prompt is a function that prints
  $CONDA_PROMPT_MODIFIER with printf '%s', which expands nothing). What is special depends on the shell
  that evaluates the code and on its options, so `prompt_assignment` writes code that picks, at run
  time, the variant for the shell that is really running (a zsh user with SHELL=/bin/bash evaluates
  "bash" code): every variant is a single-quoted literal computed here.
  - bash(1) PROMPTING: the prompt is first decoded for backslash escapes (`\\u`, `\\w`, `\\$`, `\\[` ...,
    `\\\\` is one backslash), then, when `shopt promptvars` is on (the default), expanded like a
    double-quoted string: parameter expansion, command substitution, arithmetic expansion and quote
    removal. So with promptvars on `\\`, `$` and a backtick become `\\\\` + the character (the decode
    step leaves `\\x`, the expansion step a literal x; a bare `\\$` would be the `$`/`#` escape); with it
    off only `\\` is doubled. In POSIX mode (bash(1) "POSIX mode", also `sh` when sh is bash) the
    expansion happens whatever promptvars says and `!` is the history number, `!!` a literal `!`.
  - zsh(1) zshmisc "EXPANSION OF PROMPT SEQUENCES": with PROMPT_SUBST (off by default, on in most
    frameworks) the prompt first gets parameter expansion, command substitution and arithmetic
    expansion (`\\` quotes `\\`, `$` and a backtick); with PROMPT_BANG `!` is the history number and
    `!!` a literal `!`; with PROMPT_PERCENT (on by default) `%` starts an escape and `%%` is a `%`.
  - POSIX sh (XCU 2.5.3 "PS1": parameter expansion, and since POSIX 2024 command substitution and
    arithmetic expansion; dash does all three, expanding the prompt as a double-quoted string:
    `\\` quotes `\\`, `$` and a backtick). ksh and mksh (KSH_VERSION) also replace `!` (POSIX: "!!"
    places a literal "!"); dash does not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from envkit.errors import InputError

SHELLS = ("bash", "zsh", "sh", "fish")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # POSIX XBD 3.216 "Name" (shell variable names)

_C0 = re.compile("[\x01-\x1f\x7f\udc80-\udcff]")  # and an undecodable byte of a path (os.fsdecode)
# words printed without quotes: no character any of the shells treats specially in a word (zsh's `=cmd`
# expansion needs a leading `=`; fish's `%self` a leading `%`, hence none in fish's set)
_PLAIN_SH = re.compile(r"[A-Za-z0-9_@%+:,./-][A-Za-z0-9_@%+=:,./-]*")
_PLAIN_FISH = re.compile(r"[A-Za-z0-9_+=:,./-]+")
# what `visible` spells out: C0 controls (tab and newline too: one line of prompt), DEL, the C1 controls
# (U+0080-U+009F: a lone 0x9b is CSI on many terminals), the bidi overrides (Trojan Source, CVE-2021-42574),
# lone surrogates (undecodable bytes of a path, os.fsdecode) - as envkit/cli/output.py's sanitize does
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


class Unrepresentable(InputError):
    """A value no shell can hold (a NUL byte): the caller leaves it out and says so."""


def _check(value: str, what: str) -> None:
    if "\0" in value:
        raise Unrepresentable(f"{what} contains a NUL byte, which no shell variable can hold",
                              "remove the NUL byte from where the value comes from")
    if re.search("[\ud800-\udc7f\udd00-\udfff]", value):  # a surrogate os.fsdecode does not make
        raise Unrepresentable(f"{what} holds a character that is not text", "rename it to valid UTF-8")


def _byte(char: str) -> int:
    """The byte a character stands for: itself (ASCII), or the byte os.fsdecode turned into U+DC80-U+DCFF."""
    return ord(char) - 0xDC00 if ord(char) >= 0xDC80 else ord(char)


def sh_quote(value: str, what: str = "a value") -> str:
    """POSIX sh (dash, ash, ksh): one literal word. Single quotes hold every byte but NUL (XCU 2.2.2); a byte
    that is not UTF-8 has no escape dash knows (no $'...'), and the code is text: refused."""
    _check(value, what)
    if re.search("[\udc80-\udcff]", value):
        raise Unrepresentable(f"{what} has bytes that are not UTF-8, which envkit cannot write into sh code",
                              "rename it to valid UTF-8, or use --shell bash, zsh or fish")
    if _PLAIN_SH.fullmatch(value):
        return value  # nothing special in any shell's syntax: printed as it is, easier to read
    return "'" + value.replace("'", "'\\''") + "'"


def _ansi_c_quote(value: str, what: str) -> str:
    """bash and zsh: single-quoted runs, each C0 control, DEL or undecodable byte as its own `$'\\xHH'` piece."""
    _check(value, what)
    if not _C0.search(value):
        return sh_quote(value, what)
    out: list[str] = []
    pos = 0
    for match in _C0.finditer(value):
        if match.start() > pos:
            out.append("'" + value[pos:match.start()].replace("'", "'\\''") + "'")
        out.append(f"$'\\x{_byte(match.group()):02x}'")
        pos = match.end()
    if pos < len(value):
        out.append("'" + value[pos:].replace("'", "'\\''") + "'")
    return "".join(out)


def bash_quote(value: str, what: str = "a value") -> str:
    """bash: one literal word (bash(1) QUOTING: single quotes, and $'...' for control characters)."""
    return _ansi_c_quote(value, what)


def zsh_quote(value: str, what: str = "a value") -> str:
    """zsh: one literal word (zsh(1) zshmisc QUOTING: the same forms as bash)."""
    return _ansi_c_quote(value, what)


def fish_quote(value: str, what: str = "a value") -> str:
    """fish: one literal word. fish(1) "Quotes": in single quotes only \\' and \\\\ are special; a control
    character or an undecodable byte goes outside them as `\\XHH` (fish "Escaping characters": the byte HH),
    so none is raw in the code."""
    _check(value, what)
    if _PLAIN_FISH.fullmatch(value):
        return value
    out: list[str] = []
    pos = 0
    for match in _C0.finditer(value):
        if match.start() > pos:
            out.append(_fish_single(value[pos:match.start()]))
        out.append(f"\\X{_byte(match.group()):02x}")  # fish: \Xxx is that byte, \xxx an ASCII one
        pos = match.end()
    if pos < len(value) or not out:
        out.append(_fish_single(value[pos:]))
    return "".join(out)


def _fish_single(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


QUOTE: dict[str, Callable[[str, str], str]] = {"bash": bash_quote, "zsh": zsh_quote, "sh": sh_quote,
                                               "fish": fish_quote}


def quote(value: str, shell: str, what: str = "a value") -> str:
    """The one word that stands for `value` in `shell`'s code."""
    return QUOTE[shell](value, what)


def var_name(name: str) -> str:
    """A variable name as it may appear in code unquoted; anything else is refused (never emitted)."""
    if not NAME_RE.fullmatch(name):
        raise InputError(f"{name[:60]!r} is not a valid shell variable name", "use letters, digits and _ only")
    return name


def visible(text: str) -> str:
    """`text` for display: every control character, bidi override and undecodable byte as a visible
    escape (`\\n`, `\\x1b`, `\\u202e`), so a name shown in a prompt is one line that moves no cursor."""
    def spell(match: re.Match[str]) -> str:
        char = match.group()
        if "\ud800" <= char <= "\udfff":
            return f"\\x{ord(char) - 0xDC00:02x}" if ord(char) >= 0xDC80 else f"\\u{ord(char):04x}"
        return char.encode("unicode_escape").decode("ascii")
    return _INVISIBLE.sub(spell, text)


# -- prompt texts ---------------------------------------------------------------------------------------
def _backslash(text: str, chars: str, prefix: str) -> str:
    return "".join(prefix + c if c in chars else c for c in text)


def prompt_bash(text: str, *, promptvars: bool = True, posix: bool = False) -> str:
    """`text` as bash shows it in PS1 (bash(1) PROMPTING, `shopt promptvars`, POSIX mode item on PS1 `!`)."""
    if posix or promptvars:
        out = "".join("\\\\\\\\" if c == "\\" else "\\\\" + c if c in "$`" else c for c in text)
    else:
        out = text.replace("\\", "\\\\")
    return out.replace("!", "!!") if posix else out


def prompt_zsh(text: str, *, subst: bool = False, bang: bool = False, percent: bool = True) -> str:
    """`text` as zsh shows it in PROMPT (zshmisc: PROMPT_SUBST, PROMPT_BANG, PROMPT_PERCENT)."""
    out = _backslash(text, "\\$`", "\\") if subst else text
    out = out.replace("!", "!!") if bang else out
    return out.replace("%", "%%") if percent else out


def prompt_sh(text: str, *, bang: bool = False) -> str:
    """`text` as a POSIX sh shows it in PS1 (dash: expanded as if double-quoted; ksh/mksh: and `!`)."""
    out = _backslash(text, "\\$`", "\\")
    return out.replace("!", "!!") if bang else out


# (condition, then-branch, else-branch) trees over the evaluating shell and its options; a leaf is a
# function of the text; `prompt_assignment` renders only the branches whose leaves differ

_ZSH: object = ("[[ -o promptsubst ]]",
                ("[[ -o promptbang ]]",
                 ("[[ -o promptpercent ]]", lambda t: prompt_zsh(t, subst=True, bang=True),
                  lambda t: prompt_zsh(t, subst=True, bang=True, percent=False)),
                 ("[[ -o promptpercent ]]", lambda t: prompt_zsh(t, subst=True),
                  lambda t: prompt_zsh(t, subst=True, percent=False))),
                ("[[ -o promptbang ]]",
                 ("[[ -o promptpercent ]]", lambda t: prompt_zsh(t, bang=True),
                  lambda t: prompt_zsh(t, bang=True, percent=False)),
                 ("[[ -o promptpercent ]]", prompt_zsh, lambda t: prompt_zsh(t, percent=False))))
_BASH: object = ("[ -o posix ]", lambda t: prompt_bash(t, posix=True),
                 ("shopt -q promptvars", prompt_bash, lambda t: prompt_bash(t, promptvars=False)))
PROMPT_TREE: object = ('[ -n "${ZSH_VERSION-}" ]', _ZSH,
                       ('[ -n "${BASH_VERSION-}" ]', _BASH,
                        ('[ -n "${KSH_VERSION-}" ]', lambda t: prompt_sh(t, bang=True), prompt_sh)))


def _leaves(tree: object, texts: tuple[str, ...]) -> set[tuple[str, ...]]:
    if callable(tree):
        return {tuple(tree(t) for t in texts)}
    assert isinstance(tree, tuple)
    return _leaves(tree[1], texts) | _leaves(tree[2], texts)


def _render_tree(tree: object, names: tuple[str, ...], texts: tuple[str, ...], indent: str) -> list[str]:
    leaves = _leaves(tree, texts)
    if len(leaves) == 1:
        values = next(iter(leaves))
        return [indent + " ".join(f"{n}={sh_quote(v, 'a prompt text')}" for n, v in zip(names, values))]
    assert isinstance(tree, tuple)
    cond, then, other = tree
    yes = _render_tree(then, names, texts, indent + "  ")
    no = _render_tree(other, names, texts, indent + "  ")
    if yes == no:  # this condition changes nothing for these texts
        return [line[2:] for line in yes]
    return [f"{indent}if {cond}; then", *yes, f"{indent}else", *no, f"{indent}fi"]


def prompt_assignment(names: Iterable[str], texts: Iterable[str], indent: str = "") -> list[str]:
    """POSIX code (parsed alike by bash, zsh, dash, ksh) that sets each variable of `names` to its text
    escaped for the prompt of the shell evaluating it; one plain assignment when no variant differs."""
    return _render_tree(PROMPT_TREE, tuple(var_name(n) for n in names), tuple(texts), indent)

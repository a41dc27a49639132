"""The shell examples of docs/: found by parsing each page's Markdown, classified by the marker
before them, run in a shell as a reader would paste them, or checked when they cannot run.

Every fenced block whose language is `bash`, `sh`, `shell` or `console` is an example. One
without a marker runs against the suite's stack (see `run_page`). A block that cannot run in a
test says so, and why, in an HTML comment on the line before it (mkdocs does not render it):

    <!-- example: not run (starts a long-lived stack) -->

A page of history says it once, anywhere on the page: `<!-- examples: not run (why) -->`. A
block whose stream stays open (a session's event stream) says `<!-- example: stays open -->`:
it runs until it has printed an event (a `data:` line), and must still be running then. Blocks
that are not run are checked (see `checks.check_block`): their syntax, that each program they
name exists, and that the project's commands accept their subcommands and options.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})

How = Literal["run", "not run", "stays open"]

_BLOCK_MARKER = re.compile(r"^\s*<!-- example: (.+?) -->\s*$")
_PAGE_MARKER = re.compile(r"^\s*<!-- examples: not run \((.+)\) -->\s*$", re.MULTILINE)
_NOT_RUN = re.compile(r"^not run \((.+)\)$")


@dataclass(frozen=True)
class ShellBlock:
    page: str
    line: int
    """The line of the opening fence, from 1."""
    language: str
    text: str
    how: How
    reason: str
    """Why it is not run ("" when it runs)."""

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"

    def commands(self) -> str:
        """The shell text: a console block's `$ ` lines (and their continuations) alone."""
        if self.language != "console":
            return self.text
        out: list[str] = []
        continued = False
        for line in self.text.splitlines():
            if line.startswith("$ "):
                out.append(line[2:])
            elif continued:
                out.append(line)
            else:
                continue
            continued = line.endswith("\\")
        return "\n".join(out) + "\n"


class MarkerError(ValueError):
    """A marker the test does not know: a typo would otherwise hide a block."""


def _marker(lines: list[str], fence_line: int) -> str | None:
    """The example marker on the nearest non-blank line above the fence, if any."""
    i = fence_line - 1
    while i >= 0 and not lines[i].strip():
        i -= 1
    if i < 0:
        return None
    found = _BLOCK_MARKER.match(lines[i])
    return found.group(1) if found else None


def _classify(marker: str | None, page_reason: str | None, where: str) -> tuple[How, str]:
    if page_reason is not None:
        if marker is not None:
            raise MarkerError(f"{where}: a block marker on a page marked as a whole")
        return "not run", page_reason
    if marker is None:
        return "run", ""
    if marker == "stays open":
        return "stays open", ""
    not_run = _NOT_RUN.match(marker)
    if not_run is None:
        raise MarkerError(
            f"{where}: unknown marker {marker!r}: use `not run (why)` or `stays open`"
        )
    return "not run", not_run.group(1)


def shell_blocks(page: Path) -> list[ShellBlock]:
    """The page's shell blocks in order, fenced blocks nested in lists included."""
    source = page.read_text()
    lines = source.splitlines()
    whole = _PAGE_MARKER.search(source)
    page_reason = whole.group(1) if whole else None
    out = []
    for token in MarkdownIt("commonmark").parse(source):
        language = token.info.strip().split(" ")[0] if token.type == "fence" else ""
        if language not in SHELL_LANGUAGES or token.map is None:
            continue
        where = f"docs/{page.name}:{token.map[0] + 1}"
        how, reason = _classify(_marker(lines, token.map[0]), page_reason, where)
        out.append(ShellBlock(page.name, token.map[0] + 1, language, token.content, how, reason))
    return out


def every_page() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


# -- reading commands out of a block ----------------------------------------------------------

_SEPARATORS = frozenset(";&|()\n")
_REDIRECTS = frozenset({">", ">>", "<", "&>", ">&", "<<", "<<<"})
_SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# bash prints a function's body normalised: comments gone, continuations joined, one command
# per line ending in `;`, quoted text as written
_NORMALISE = 'eval "__example() {"$\'\\n\'"$(cat)"$\'\\n\'"}" && declare -f __example'


def simple_commands(text: str) -> list[list[str]]:
    """The words of each simple command of `text` (as bash reads it), those inside `$(...)`
    included, with leading `VAR=value` assignments, `sudo` and redirections removed."""
    run = subprocess.run(["bash", "-c", _NORMALISE], input=text, capture_output=True, text=True)
    if run.returncode != 0:
        return []  # not valid shell: `bash -n` says why
    body = run.stdout.split("{", 1)[1].rsplit("}", 1)[0]
    return [c for c in _split(body) if c]


def _split(body: str) -> list[list[str]]:
    body = body.replace("\\\n", " ")  # continuations bash kept
    lexer = shlex.shlex(body, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    commands: list[list[str]] = [[]]
    substituted: list[list[str]] = []
    tokens = list(lexer)
    skip_next = in_array = False
    for i, token in enumerate(tokens):
        if skip_next:
            skip_next = False
        elif in_array:  # `NAME=(word ...)`: an array's words, not a command
            in_array = token != ")"
        elif _ASSIGNMENT.fullmatch(token) and tokens[i + 1 : i + 2] == ["("]:
            in_array = skip_next = True
        elif token in _REDIRECTS:
            skip_next = True
        elif set(token) <= _SEPARATORS | set("<>"):
            commands.append([])
        else:
            commands[-1].append(token)
            for inner in _SUBSTITUTION.findall(token):  # "$(openssl rand -hex 32)"
                substituted.extend(_split(inner))
    return [_program_first(c) for c in commands] + substituted


def _program_first(words: list[str]) -> list[str]:
    while words and (_ASSIGNMENT.match(words[0]) or words[0] in ("sudo", "exec", "command")):
        words = words[1:]
    return words

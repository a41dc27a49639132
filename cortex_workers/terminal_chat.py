"""`cortex-workers chat`: a conversation in the terminal, on the Python client.

Tokens print as they stream; each tool call and each result takes one line, the result coloured
by its severity; after a turn, each action the model proposed asks confirm, reject or skip.
Ctrl-C cancels the running turn (a second one exits); a dropped connection is resumed by the
client without a word. Defaults match `cortex-workers dev`: the API on http://127.0.0.1:8000
and the key it writes to `.cortex/api-key`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from .client import (
    APIError,
    Client,
    ConnectionFailed,
    DoneEvent,
    ErrorEvent,
    Event,
    ProposalEvent,
    StepRestartEvent,
    TokenEvent,
    ToolCallEvent,
    ToolProgressEvent,
    ToolResultEvent,
    TurnFinished,
    TurnStream,
)
from .vocabulary import ProposalStatus, ToolSeverity, TurnStatus

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
DEFAULT_KEY_FILE = ".cortex/api-key"
"""Where `cortex-workers dev` writes its key (`<data-dir>/api-key`, data dir `.cortex`)."""
SEVERITY_COLOURS = {
    ToolSeverity.OK: "32",  # green
    ToolSeverity.INFO: "90",  # gray
    ToolSeverity.WARNING: "33",  # yellow
    ToolSeverity.ERROR: "31",  # red
}
CALL_COLOUR, NOTE_COLOUR, PROPOSAL_COLOUR = "36", "2", "35"
RESULT_PREVIEW = 120
PROMPT = "you> "
DECISIONS = {"c": "confirm", "confirm": "confirm", "r": "reject", "reject": "reject"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--session", metavar="ID", help="continue this session")
    which.add_argument("--new", action="store_true", help="start a new session (the default)")
    parser.add_argument("--name", help="the new session's name")
    parser.add_argument("--provider", help="the new session's provider")
    parser.add_argument("--model", help="the new session's model")
    parser.add_argument("--base", help=f"the API's URL (default $CW, else {DEFAULT_BASE_URL})")
    parser.add_argument(
        "--key-file",
        help=f"a file holding the API key (default {DEFAULT_KEY_FILE}, else $CW_KEY)",
    )


def read_key(key_file: str | None) -> str | None:
    path = Path(key_file or DEFAULT_KEY_FILE)
    if path.is_file():
        return path.read_text().strip() or None
    if key_file is None:
        return os.environ.get("CW_KEY") or None
    return None


class Chat:
    """One terminal conversation with one session."""

    def __init__(
        self,
        client: Client,
        session_id: str,
        *,
        out: TextIO = sys.stdout,
        read: Callable[[str], str] = input,
        colour: bool = True,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.out = out
        self.read = read
        self.colour = colour
        self._mid_line = False

    def paint(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour else text

    def line(self, text: str) -> None:
        """A line of its own, after any text the answer left open."""
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False
        self.out.write(text + "\n")
        self.out.flush()

    def loop(self) -> int:
        interrupted = False
        while True:
            try:
                content = self.read(PROMPT)
            except EOFError:
                self.line("")
                return 0
            except KeyboardInterrupt:
                if interrupted:
                    self.line("")
                    return 0
                interrupted = True
                self.line("\n(Ctrl-C again, or Ctrl-D, to exit)")
                continue
            interrupted = False
            if content.strip() and not self.turn(content):
                return 0

    def turn(self, content: str) -> bool:
        """Run one turn to its end; False when the user asked to exit."""
        try:
            stream = self.client.stream(self.session_id, content)
        except KeyboardInterrupt:
            self.line(self.paint(NOTE_COLOUR, "(interrupted)"))
            return True
        except (APIError, ConnectionFailed) as exc:
            self.failed(exc)
            return True
        proposals: list[ProposalEvent] = []
        try:
            self.follow(stream, proposals)
        except KeyboardInterrupt:
            if not self.cancel(stream, proposals):
                return False
        except (APIError, ConnectionFailed) as exc:
            self.failed(exc)
        return self.decide(proposals)

    def failed(self, exc: Exception) -> None:
        self.line(self.paint(SEVERITY_COLOURS[ToolSeverity.ERROR], f"✗ {exc}"))

    def cancel(self, stream: TurnStream, proposals: list[ProposalEvent]) -> bool:
        """Cancel the turn and show the rest of its stream; False on a second Ctrl-C."""
        self.line(self.paint(NOTE_COLOUR, "^C cancelling the turn (Ctrl-C again exits)"))
        try:
            with contextlib.suppress(TurnFinished):  # it ended meanwhile
                self.client.turns.cancel(stream.turn_id)
            self.follow(stream, proposals)
        except KeyboardInterrupt:
            self.line("")
            return False
        return True

    def follow(self, stream: TurnStream, proposals: list[ProposalEvent]) -> None:
        for event in stream:
            self.show(event)
            if isinstance(event, ProposalEvent) and event.status is ProposalStatus.PENDING:
                proposals.append(event)

    def show(self, event: Event) -> None:
        if isinstance(event, TokenEvent):
            self.out.write(event.text)
            self.out.flush()
            self._mid_line = not event.text.endswith("\n")
        elif isinstance(event, StepRestartEvent):
            self.line(self.paint(NOTE_COLOUR, "↺ (that part of the answer was withdrawn)"))
        elif isinstance(event, ToolCallEvent):
            arguments = json.dumps(event.arguments, ensure_ascii=False)
            self.line(self.paint(CALL_COLOUR, f"→ {event.name} {arguments}"))
        elif isinstance(event, ToolProgressEvent):
            note = f"… {event.name} still running ({event.elapsed_s:.0f} s)"
            self.line(self.paint(NOTE_COLOUR, note))
        elif isinstance(event, ToolResultEvent):
            self.line(self.paint(SEVERITY_COLOURS[event.severity], result_line(event)))
        elif isinstance(event, ProposalEvent):
            text = f"? proposed: {event.action} on {event.product}: {event.rationale}"
            self.line(self.paint(PROPOSAL_COLOUR, text))
        elif isinstance(event, ErrorEvent):
            self.failed(Exception(f"{event.code}: {event.message}"))
        elif isinstance(event, DoneEvent):
            self.line(self.paint(NOTE_COLOUR, done_line(event)))

    def decide(self, proposals: list[ProposalEvent]) -> bool:
        """Ask about each proposal: confirm, reject or skip; False on Ctrl-C."""
        for proposal in proposals:
            try:
                answer = self.read(
                    f"{proposal.action} on {proposal.product}: [c]onfirm, [r]eject or [s]kip? "
                )
            except (EOFError, KeyboardInterrupt):
                self.line("")
                return False
            decision = DECISIONS.get(answer.strip().lower())
            if decision is None:
                self.line(self.paint(NOTE_COLOUR, f"skipped proposal {proposal.proposal_id}"))
                continue
            try:
                decided = getattr(self.client.proposals, decision)(proposal.proposal_id)
                self.line(self.paint(NOTE_COLOUR, f"proposal {decided.id}: {decided.status}"))
            except (APIError, ConnectionFailed) as exc:
                self.failed(exc)
        return True


def result_line(event: ToolResultEvent) -> str:
    preview = " ".join(event.content.split())
    if len(preview) > RESULT_PREVIEW:
        preview = preview[: RESULT_PREVIEW - 1] + "…"
    kind = f" [{event.error}]" if event.error else ""
    return f"← {event.name}{kind}: {preview}"


def done_line(event: DoneEvent) -> str:
    usage = f"{event.usage.input_tokens} in, {event.usage.output_tokens} out"
    if event.status is TurnStatus.DONE:
        return f"[{usage}, ${event.cost_usd:.6f}]"
    return f"[{event.status}; {usage}]"


def open_session(client: Client, args: argparse.Namespace) -> str:
    if args.session:
        return str(client.sessions.get(args.session).id)
    session = client.sessions.create(name=args.name, provider=args.provider, model=args.model)
    return session.id


def run(args: argparse.Namespace) -> int:
    """The `chat` command."""
    base = args.base or os.environ.get("CW") or DEFAULT_BASE_URL
    key = read_key(args.key_file)
    if key is None:
        print(
            "cortex-workers chat: no API key: run `cortex-workers dev` (it writes "
            f"{DEFAULT_KEY_FILE}), or pass --key-file, or set CW_KEY",
            file=sys.stderr,
        )
        return 2
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    # Ctrl-C cancels a turn even when started from a shell that ignores SIGINT for its
    # background jobs (Python leaves an inherited "ignore" in place)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with Client(base, key) as client:
        try:
            session_id = open_session(client, args)
        except (APIError, ConnectionFailed) as exc:
            print(f"cortex-workers chat: {exc}", file=sys.stderr)
            return 1
        session = client.sessions.get(session_id)
        print(f"session {session.id} ({session.provider}, {session.model}); Ctrl-D exits")
        return Chat(client, session_id, colour=colour).loop()

"""The reference-compatible plain stream: a session's events as bare text chunks.

Each assistant answer is sent as `data: <text chunk>` events, then `data: [DONE]`; a failed (or
cancelled) turn sends `data: ERROR: <message>` before its `[DONE]`. A chunk with line breaks is
one event of several `data:` lines, which an SSE client joins back with `\\n` (the SSE rule), so
the text arrives exactly. Tool calls, proposals and notices are not sent.

A step restarted after a worker died streams its answer again from the start; text already sent
cannot be taken back, so the restarted attempt's text is only sent past what the client already
has when it repeats it (a diverging retry is sent as it comes)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from sse_starlette import ServerSentEvent

from ..vocabulary import TurnStatus

DONE = "[DONE]"
ERROR_PREFIX = "ERROR: "


@dataclass
class PlainAnswers:
    """Turns one session's events into the chunks of each answer."""

    sent: dict[int, str] = field(default_factory=dict)
    """Text sent so far per model step of the current turn."""
    replaying: dict[int, int] = field(default_factory=dict)
    """Restarted steps: how much of their sent text the new attempt has repeated."""
    error: bool = False

    def chunks(self, event: str, data: dict[str, object]) -> list[str]:
        """The chunks one event sends (often none)."""
        step = data.get("step")
        if event == "token" and isinstance(step, int):
            return self._fresh(step, str(data.get("text") or ""))
        if event == "message" and isinstance(step, int) and step not in self.sent:
            return self._fresh(step, str(data.get("content") or ""))  # a snapshot: no tokens
        if event == "step_restart" and isinstance(step, int):
            self.replaying[step] = 0
            return []
        if event == "error":
            self.error = True
            return [ERROR_PREFIX + str(data.get("message") or "the turn failed")]
        if event == "done":
            return self._done(data.get("status"))
        return []

    def _done(self, status: object) -> list[str]:
        out = []
        if not self.error and status == TurnStatus.FAILED:
            out.append(ERROR_PREFIX + "the turn failed")
        elif not self.error and status == TurnStatus.CANCELLED:
            out.append(ERROR_PREFIX + "the turn was cancelled")
        self.sent, self.replaying, self.error = {}, {}, False
        return [*out, DONE]

    def _fresh(self, step: int, text: str) -> list[str]:
        sent = self.sent.get(step, "")
        at = self.replaying.get(step)
        if at is not None:
            ahead = sent[at:]
            if ahead.startswith(text):  # repeated: already sent
                self.replaying[step] = at + len(text)
                return []
            del self.replaying[step]
            if text.startswith(ahead):
                text = text[len(ahead) :]
        self.sent[step] = sent + text
        return [text] if text else []


async def plain_events(events: AsyncIterator[ServerSentEvent]) -> AsyncIterator[ServerSentEvent]:
    """The session's `events` as plain `data:` events, without names or ids."""
    answers = PlainAnswers()
    async for event in events:
        data = json.loads(str(event.data)) if event.data else {}
        for chunk in answers.chunks(str(event.event), data):
            yield ServerSentEvent(data=chunk)

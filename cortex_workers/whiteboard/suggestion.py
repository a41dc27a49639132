"""A sub-agent's `whiteboard_suggestion`: what it proposes to write on its coordinator's board.

A sub-agent's answer may end with a fenced block whose info string is `whiteboard_suggestion`
and whose body is a JSON object with any of the keys `note`, `progress` (with `percent`),
`blocker`, `resolve_blocker` (with `resolution`) and `decision` (with `rationale`):

    ```whiteboard_suggestion
    {"progress": "found the three failing hosts", "percent": 60,
     "blocker": "no credentials for host C"}
    ```

`apply_whiteboard_suggestion` writes it on the parent session's board (each change logged
with the agent as its source) and returns the answer without the block. A block that is not
a JSON object of those keys is left in the answer, unapplied.
"""

from __future__ import annotations

import json
import logging
import re
import uuid

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..messages import JsonObject
from ..store.db import Executor
from . import edits

log = logging.getLogger(__name__)

_BLOCK = re.compile(r"\n?[ \t]*```whiteboard_suggestion[ \t]*\n(?P<body>.*?)\n[ \t]*```\s*\Z", re.S)


class Suggestion(BaseModel):
    model_config = ConfigDict(extra="forbid")
    note: str | None = Field(default=None, min_length=1, max_length=4000)
    progress: str | None = Field(default=None, min_length=1, max_length=4000)
    percent: int | None = Field(default=None, ge=0, le=100)
    blocker: str | None = Field(default=None, min_length=1, max_length=4000)
    resolve_blocker: int | None = Field(default=None, ge=1)
    resolution: str | None = Field(default=None, max_length=4000)
    decision: str | None = Field(default=None, min_length=1, max_length=4000)
    rationale: str | None = Field(default=None, max_length=4000)


def split_suggestion(answer: str) -> tuple[str, Suggestion | None]:
    """The answer without a trailing valid suggestion block, and the suggestion."""
    found = _BLOCK.search(answer)
    if found is None:
        return answer, None
    try:
        suggestion = Suggestion.model_validate(json.loads(found.group("body")))
    except (ValueError, ValidationError):
        return answer, None
    return answer[: found.start()].rstrip(), suggestion


def _apply(db: Executor, sid: uuid.UUID, s: Suggestion, source: str) -> None:
    if s.progress is not None:
        edits.update_progress(db, sid, s.progress, s.percent, None, source=source)
    if s.blocker is not None:
        edits.open_blocker(db, sid, s.blocker, source=source)
    if s.resolve_blocker is not None:
        try:
            edits.resolve_blocker(db, sid, s.resolve_blocker, s.resolution, source=source)
        except edits.UnknownBlocker:
            log.info("whiteboard suggestion resolves an unknown blocker %s", s.resolve_blocker)
    if s.decision is not None:
        edits.log_decision(db, sid, s.decision, s.rationale, source=source)
    if s.note is not None:
        edits.add_note(db, sid, s.note, source=source)


def apply_whiteboard_suggestion(
    db: Executor, parent_session_id: uuid.UUID, answer_text: str, *, source: str = "agent"
) -> str:
    """Apply a trailing `whiteboard_suggestion` of a sub-agent's answer to the parent
    session's whiteboard, in the caller's transaction; return the answer without it. Without
    a board, the suggestion is dropped (and still removed from the answer)."""
    answer, suggestion = split_suggestion(answer_text)
    if suggestion is None:
        return answer
    try:
        _apply(db, parent_session_id, suggestion, source)
    except edits.NoWhiteboard:
        log.info("session %s has no whiteboard: suggestion dropped", parent_session_id)
    return answer


def suggestion_fields() -> JsonObject:
    """The suggestion's JSON Schema (for docs and sub-agents' prompts)."""
    return Suggestion.model_json_schema()

"""Changes to a whiteboard, each logged as an entry of the board's recent updates.

The coordinator's tools and a sub-agent's `whiteboard_suggestion` both write through here;
`source` says who wrote (`coordinator`, or `agent:<name>`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..store import whiteboard as store
from ..store.db import Executor
from ..vocabulary import WhiteboardEntryKind


class NoWhiteboard(LookupError):
    """The session has no whiteboard (it was not created with `whiteboard: true`)."""


class UnknownBlocker(LookupError):
    """No open blocker with that id on this board."""


@dataclass(frozen=True, slots=True)
class Applied:
    """What an edit changed, in a sentence (the tool's result)."""

    text: str


def _log(
    db: Executor,
    session_id: uuid.UUID,
    kind: WhiteboardEntryKind,
    text: str,
    source: str,
    detail: str | None = None,
) -> Applied:
    store.log_entry(db, session_id, kind, text, source=source, detail=detail)
    return Applied(text)


def update_mission(
    db: Executor, session_id: uuid.UUID, mission: str, focus: str | None, *, source: str
) -> Applied:
    if not store.set_fields(db, session_id, mission=mission, focus=focus):
        raise NoWhiteboard(str(session_id))
    said = f"mission: {mission}" + (f" (focus: {focus})" if focus else "")
    return _log(db, session_id, WhiteboardEntryKind.MISSION, said, source)


def update_progress(
    db: Executor,
    session_id: uuid.UUID,
    note: str,
    percent: int | None,
    focus: str | None,
    *,
    source: str,
) -> Applied:
    if not store.set_fields(db, session_id, progress=percent, progress_note=note, focus=focus):
        raise NoWhiteboard(str(session_id))
    said = f"progress{f' {percent}%' if percent is not None else ''}: {note}"
    return _log(db, session_id, WhiteboardEntryKind.PROGRESS, said, source)


def open_blocker(db: Executor, session_id: uuid.UUID, text: str, *, source: str) -> Applied:
    if not store.has_board(db, session_id):
        raise NoWhiteboard(str(session_id))
    blocker_id = store.open_blocker(db, session_id, text, source=source)
    return _log(
        db, session_id, WhiteboardEntryKind.BLOCKER, f"blocker #{blocker_id}: {text}", source
    )


def resolve_blocker(
    db: Executor,
    session_id: uuid.UUID,
    blocker_id: int,
    resolution: str | None,
    *,
    source: str,
) -> Applied:
    if not store.has_board(db, session_id):
        raise NoWhiteboard(str(session_id))
    text = store.resolve_blocker(db, session_id, blocker_id, resolution)
    if text is None:
        raise UnknownBlocker(f"no open blocker #{blocker_id} on this whiteboard")
    said = f"blocker #{blocker_id} resolved" + (f": {resolution}" if resolution else "")
    return _log(db, session_id, WhiteboardEntryKind.BLOCKER, said, source, detail=text)


def log_decision(
    db: Executor, session_id: uuid.UUID, decision: str, rationale: str | None, *, source: str
) -> Applied:
    if not store.has_board(db, session_id):
        raise NoWhiteboard(str(session_id))
    return _log(db, session_id, WhiteboardEntryKind.DECISION, decision, source, detail=rationale)


def add_note(db: Executor, session_id: uuid.UUID, note: str, *, source: str) -> Applied:
    if not store.has_board(db, session_id):
        raise NoWhiteboard(str(session_id))
    return _log(db, session_id, WhiteboardEntryKind.NOTE, note, source)

"""The whiteboard as the models read it: a short summary, and the board as JSON."""

from __future__ import annotations

import uuid
from typing import TypedDict

from ..store import whiteboard as store
from ..store.db import Executor
from ..vocabulary import BlockerStatus


class ProgressJson(TypedDict):
    percent: int | None
    note: str


class BoardJson(TypedDict):
    """The whole board as `get_team_status` answers it (times in ISO 8601)."""

    mission: str
    focus: str
    progress: ProgressJson
    blockers: list[store.BlockerDoc]
    decisions: list[store.EntryDoc]
    updates: list[store.EntryDoc]
    updated_at: str


SUMMARY_HEADER = "Team whiteboard (shared by the coordinator and its agents):"
MAX_SUMMARY_CHARS = 2000
RECENT_DECISIONS = 3
RECENT_UPDATES = 5


def _clip(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def summarize(board: store.Board) -> str:
    """A few lines: mission, focus, progress, open blockers, the last decisions and updates."""
    lines = [SUMMARY_HEADER, f"Mission: {_clip(board.mission) or '(not set)'}"]
    if board.focus:
        lines.append(f"Focus: {_clip(board.focus)}")
    if board.progress is not None or board.progress_note:
        percent = f"{board.progress}%" if board.progress is not None else ""
        lines.append(
            f"Progress: {' — '.join(p for p in (percent, _clip(board.progress_note)) if p)}"
        )
    blockers = [b for b in board.blockers if b.status == BlockerStatus.OPEN]
    lines.append("Open blockers: " + ("none" if not blockers else ""))
    lines += [f"- #{b.id} {_clip(b.text)}" for b in blockers]
    if board.decisions:
        lines.append("Recent decisions:")
        lines += [f"- {_clip(d.text)}" for d in board.decisions[-RECENT_DECISIONS:]]
    if board.updates:
        lines.append("Recent updates:")
        lines += [f"- [{u.source}] {_clip(u.text)}" for u in board.updates[-RECENT_UPDATES:]]
    text = "\n".join(line.rstrip() for line in lines)
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 1] + "…"


def whiteboard_summary(db: Executor, session_id: uuid.UUID) -> str | None:
    """The summary of the session's whiteboard, or None when the session has none.

    Read at each model step of a coordinator session (`turns.context`) and of its sub-agents'
    child turns (with the parent session's id)."""
    board = store.read_board(db, session_id, decisions=RECENT_DECISIONS, updates=RECENT_UPDATES)
    return summarize(board) if board is not None else None


def board_json(board: store.Board) -> BoardJson:
    """The whole board as a JSON object (`get_team_status` and the API)."""
    return {
        "mission": board.mission,
        "focus": board.focus,
        "progress": {"percent": board.progress, "note": board.progress_note},
        "blockers": [
            {
                "id": b.id,
                "text": b.text,
                "status": b.status.value,
                "resolution": b.resolution,
                "source": b.source,
                "created_at": b.created_at.isoformat(),
                "resolved_at": b.resolved_at.isoformat() if b.resolved_at else None,
            }
            for b in board.blockers
        ],
        "decisions": [_entry(d) for d in board.decisions],
        "updates": [_entry(u) for u in board.updates],
        "updated_at": board.updated_at.isoformat(),
    }


def _entry(entry: store.Entry) -> store.EntryDoc:
    return {
        "id": entry.id,
        "kind": entry.kind.value,
        "text": entry.text,
        "detail": entry.detail,
        "source": entry.source,
        "created_at": entry.created_at.isoformat(),
    }

"""The whiteboard of a coordinator session: its tables and all their SQL (migration 0009).

A session has a whiteboard when it has a `whiteboards` row (created with the session when it
asks for `whiteboard: true`). Blockers have a state; everything else written to the board is
also logged as an entry, newest last, which the board shows as its recent updates.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    SmallInteger,
    String,
    Text,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Mapped, mapped_column

from ..vocabulary import BlockerStatus, WhiteboardEntryKind
from .db import Executor
from .models import Base, one_of
from .sql import const


class WhiteboardRow(Base):
    __tablename__ = "whiteboards"
    __table_args__ = (
        CheckConstraint("progress BETWEEN 0 AND 100", name="ck_whiteboards_progress"),
    )
    session_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    mission: Mapped[str] = mapped_column(Text, server_default="")
    focus: Mapped[str] = mapped_column(Text, server_default="")
    progress: Mapped[int | None] = mapped_column(SmallInteger)
    progress_note: Mapped[str] = mapped_column(Text, server_default="")
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class BlockerRow(Base):
    __tablename__ = "whiteboard_blockers"
    __table_args__ = (
        one_of("status", BlockerStatus, table="whiteboard_blockers"),
        Index("ix_whiteboard_blockers_session", "session_id", "id"),
    )
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    session_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    text: Mapped[str] = mapped_column(Text)
    status: Mapped[BlockerStatus] = mapped_column(server_default=BlockerStatus.OPEN.value)
    resolution: Mapped[str | None] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class EntryRow(Base):
    __tablename__ = "whiteboard_entries"
    __table_args__ = (
        one_of("kind", WhiteboardEntryKind, table="whiteboard_entries"),
        Index("ix_whiteboard_entries_session", "session_id", "id"),
    )
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    session_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    kind: Mapped[WhiteboardEntryKind]
    text: Mapped[str] = mapped_column(Text)
    detail: Mapped[str | None] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


_wb, _bl, _en = WhiteboardRow.__table__.c, BlockerRow.__table__.c, EntryRow.__table__.c


@dataclass(frozen=True, slots=True)
class Blocker:
    id: int
    text: str
    status: BlockerStatus
    resolution: str | None
    source: str
    created_at: datetime
    resolved_at: datetime | None


@dataclass(frozen=True, slots=True)
class Entry:
    id: int
    kind: WhiteboardEntryKind
    text: str
    detail: str | None
    source: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Board:
    """A session's whiteboard as read: every blocker, the decisions and the recent entries."""

    session_id: uuid.UUID
    mission: str
    focus: str
    progress: int | None
    progress_note: str
    updated_at: datetime
    blockers: tuple[Blocker, ...]
    decisions: tuple[Entry, ...]
    updates: tuple[Entry, ...]


def create_board(db: Executor, session_id: uuid.UUID) -> None:
    """Give the session a whiteboard (nothing if it has one)."""
    db.execute(pg_insert(WhiteboardRow).values(session_id=session_id).on_conflict_do_nothing())


def has_board(db: Executor, session_id: uuid.UUID) -> bool:
    found = db.execute(select(_wb.session_id).where(_wb.session_id == session_id)).first()
    return found is not None


def _touch(db: Executor, session_id: uuid.UUID, **values: object) -> bool:
    """Set the board's fields and `updated_at`; False when the session has no board."""
    row = db.execute(
        update(WhiteboardRow)
        .where(_wb.session_id == session_id)
        .values(updated_at=func.now(), **values)
        .returning(_wb.session_id)
    ).first()
    return row is not None


def log_entry(
    db: Executor,
    session_id: uuid.UUID,
    kind: WhiteboardEntryKind,
    text: str,
    *,
    source: str,
    detail: str | None = None,
) -> int:
    """Append an entry to the board's log; returns its id."""
    return int(
        db.execute(
            insert(EntryRow)
            .values(session_id=session_id, kind=kind, text=text, detail=detail, source=source)
            .returning(_en.id)
        ).scalar_one()
    )


def set_fields(
    db: Executor,
    session_id: uuid.UUID,
    *,
    mission: str | None = None,
    focus: str | None = None,
    progress: int | None = None,
    progress_note: str | None = None,
) -> bool:
    """Change the fields given (None: unchanged); False when the session has no board."""
    values = {
        k: v
        for k, v in (
            ("mission", mission),
            ("focus", focus),
            ("progress", progress),
            ("progress_note", progress_note),
        )
        if v is not None
    }
    return _touch(db, session_id, **values)


def open_blocker(db: Executor, session_id: uuid.UUID, text: str, *, source: str) -> int:
    _touch(db, session_id)
    return int(
        db.execute(
            insert(BlockerRow)
            .values(session_id=session_id, text=text, source=source)
            .returning(_bl.id)
        ).scalar_one()
    )


def resolve_blocker(
    db: Executor, session_id: uuid.UUID, blocker_id: int, resolution: str | None
) -> str | None:
    """Resolve an open blocker of the session; its text, or None when there is no such open
    blocker."""
    row = db.execute(
        update(BlockerRow)
        .where(
            _bl.id == blocker_id,
            _bl.session_id == session_id,
            _bl.status == BlockerStatus.OPEN,
        )
        .values(status=BlockerStatus.RESOLVED, resolution=resolution, resolved_at=func.now())
        .returning(_bl.text)
    ).first()
    if row is None:
        return None
    _touch(db, session_id)
    return str(row.text)


def _entries(db: Executor, session_id: uuid.UUID, limit: int, *kinds: str) -> tuple[Entry, ...]:
    query = select(EntryRow.__table__).where(_en.session_id == session_id)
    if kinds:
        query = query.where(_en.kind.in_(kinds))
    rows = db.execute(query.order_by(_en.id.desc()).limit(limit)).all()
    return tuple(
        Entry(r.id, WhiteboardEntryKind(r.kind), r.text, r.detail, r.source, r.created_at)
        for r in reversed(rows)
    )


def read_board(
    db: Executor, session_id: uuid.UUID, *, decisions: int = 50, updates: int = 20
) -> Board | None:
    """The session's whiteboard, or None when it has none: every blocker (oldest first), the
    last `decisions` decisions and the last `updates` entries of any kind."""
    board = db.execute(select(WhiteboardRow.__table__).where(_wb.session_id == session_id)).first()
    if board is None:
        return None
    blockers = db.execute(
        select(BlockerRow.__table__).where(_bl.session_id == session_id).order_by(_bl.id)
    ).all()
    return Board(
        session_id=session_id,
        mission=board.mission,
        focus=board.focus,
        progress=board.progress,
        progress_note=board.progress_note,
        updated_at=board.updated_at,
        blockers=tuple(
            Blocker(
                id=b.id,
                text=b.text,
                status=BlockerStatus(b.status),
                resolution=b.resolution,
                source=b.source,
                created_at=b.created_at,
                resolved_at=b.resolved_at,
            )
            for b in blockers
        ),
        decisions=_entries(db, session_id, decisions, WhiteboardEntryKind.DECISION.value),
        updates=_entries(db, session_id, updates),
    )


class EntryDoc(TypedDict):
    """A decision or update as `board_view` reads it."""

    id: int
    kind: str
    text: str
    detail: str | None
    source: str
    created_at: str


class BlockerDoc(TypedDict):
    """A blocker as `board_view` reads it (times in ISO 8601)."""

    id: int
    text: str
    status: str
    resolution: str | None
    source: str
    created_at: str
    resolved_at: str | None


class BoardDoc(TypedDict):
    """The JSON document of a whiteboard that `board_view` reads and `board_of` turns into a
    `Board`."""

    mission: str
    focus: str
    progress: int | None
    progress_note: str
    updated_at: str
    blockers: list[BlockerDoc]
    decisions: list[EntryDoc]
    updates: list[EntryDoc]


def board_view(session_id: Any, *, decisions: int, updates: int) -> Any:
    """A scalar subquery: the board of `session_id` (a column of the enclosing statement) as
    a JSON document that `board_of` reads, or NULL when that session has no board. A step's
    claim reads it with the step (one index lookup when there is no board)."""
    wb = WhiteboardRow.__table__.alias("wb_view")
    bl = BlockerRow.__table__.alias("bl_view")

    def recent(limit: int, *kinds: str) -> Any:
        en = EntryRow.__table__.alias(f"en_{limit}_{len(kinds)}")
        last = select(en).where(en.c.session_id == wb.c.session_id)
        if kinds:
            last = last.where(en.c.kind.in_([const(k) for k in kinds]))
        last_rows = last.order_by(en.c.id.desc()).limit(limit).correlate_except(en).subquery()
        row = func.json_build_object(
            *(
                x
                for k in ("id", "kind", "text", "detail", "source", "created_at")
                for x in (const(k), last_rows.c[k])
            )
        )
        return select(
            func.coalesce(func.json_agg(aggregate_order_by(row, last_rows.c.id)), text("'[]'"))
        ).scalar_subquery()

    blocker = func.json_build_object(
        *(
            x
            for k in ("id", "text", "status", "resolution", "source", "created_at", "resolved_at")
            for x in (const(k), bl.c[k])
        )
    )
    blockers = (
        select(func.coalesce(func.json_agg(aggregate_order_by(blocker, bl.c.id)), text("'[]'")))
        .where(bl.c.session_id == wb.c.session_id)
        .scalar_subquery()
    )
    doc = func.json_build_object(
        const("mission"),
        wb.c.mission,
        const("focus"),
        wb.c.focus,
        const("progress"),
        wb.c.progress,
        const("progress_note"),
        wb.c.progress_note,
        const("updated_at"),
        wb.c.updated_at,
        const("blockers"),
        blockers,
        const("decisions"),
        recent(decisions, WhiteboardEntryKind.DECISION.value),
        const("updates"),
        recent(updates),
    )
    return select(doc).where(wb.c.session_id == session_id).scalar_subquery()


def board_of(session_id: uuid.UUID, doc: BoardDoc) -> Board:
    """The `Board` of a document `board_view` read."""

    def when(value: str | None) -> datetime | None:
        return datetime.fromisoformat(value) if value else None

    def entry(e: EntryDoc) -> Entry:
        created = when(e["created_at"])
        assert created is not None
        return Entry(
            e["id"], WhiteboardEntryKind(e["kind"]), e["text"], e["detail"], e["source"], created
        )

    def blocker(b: BlockerDoc) -> Blocker:
        created = when(b["created_at"])
        assert created is not None
        return Blocker(
            b["id"],
            b["text"],
            BlockerStatus(b["status"]),
            b["resolution"],
            b["source"],
            created,
            when(b["resolved_at"]),
        )

    updated = when(doc["updated_at"])
    assert updated is not None
    return Board(
        session_id=session_id,
        mission=doc["mission"],
        focus=doc["focus"],
        progress=doc["progress"],
        progress_note=doc["progress_note"],
        updated_at=updated,
        blockers=tuple(blocker(b) for b in doc["blockers"]),
        decisions=tuple(entry(e) for e in doc["decisions"]),
        updates=tuple(entry(e) for e in doc["updates"]),
    )

"""Synthetic history, loaded with bulk COPY: finished turns in sessions of 50, each with its
model step, its user and assistant messages and one audit row (the growth benchmark, and the
plan tests of the hot statements)."""

from __future__ import annotations

import io
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

TURNS_PER_SESSION = 50
CHUNK_SESSIONS = 200
"""Sessions per COPY chunk (10k turns)."""


def _copy(cur: psycopg.Cursor[Any], table: str, columns: str, rows: io.StringIO) -> None:
    with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        copy.write(rows.getvalue())


def _chunk(tenant: str, sessions: int, now: datetime) -> dict[str, io.StringIO]:
    """Text-format COPY rows of `sessions` sessions of finished turns."""
    out = {k: io.StringIO() for k in ("sessions", "turns", "steps", "messages", "decisions")}
    for _ in range(sessions):
        sid = uuid.uuid4()
        n = TURNS_PER_SESSION
        out["sessions"].write(f"{sid}\t{tenant}\t{{}}\t{2 * n}\t{n}\n")
        age = timedelta(days=1 + (hash(sid) % 89))
        for seq in range(1, n + 1):
            tid, step, at = uuid.uuid4(), uuid.uuid4(), (now - age + timedelta(seconds=seq * 9))
            ts = at.isoformat()
            out["turns"].write(
                f"{tid}\t{tenant}\t{sid}\t{seq}\tdone\tquestion {seq}\t{ts}\t{ts}\t{ts}\t1\t"
                f"answer {seq}\n"
            )
            out["steps"].write(f"{step}\t{tid}\t1\tmodel\tdone\t1\t{ts}\t{ts}\t{ts}\n")
            out["messages"].write(
                f"{uuid.uuid4()}\t{sid}\t{2 * seq - 1}\tuser\tquestion {seq}\t{tid}\t\\N\t{ts}\n"
                f"{uuid.uuid4()}\t{sid}\t{2 * seq}\tassistant\tanswer {seq}\t{tid}\t{step}\t{ts}\n"
            )
            out["decisions"].write(f"{tenant}\t{sid}\t{tid}\t{step}\tmodel\tscripted\t1\tf\t{ts}\n")
    return out


COLUMNS = {
    "sessions": "id, tenant_id, metadata, last_message_seq, last_turn_seq",
    "turns": "id, tenant_id, session_id, seq, status, content, created_at, started_at, "
    "finished_at, model_steps, answer",
    "steps": "id, turn_id, step_no, kind, status, attempt, available_at, created_at, finished_at",
    "messages": "id, session_id, seq, role, content, turn_id, step_id, created_at",
    "decisions": "tenant_id, session_id, turn_id, step_id, kind, name, attempt, is_error, "
    "created_at",
}


def load_history(dsn: str, turns: int) -> float:
    """COPY `turns` finished turns (and what goes with them) into a tenant of their own;
    returns the seconds it took, ANALYZE included."""
    t0 = time.monotonic()
    now = datetime.now(UTC)
    with psycopg.connect(dsn, autocommit=True) as conn:
        tenant = uuid.uuid4()
        conn.execute(
            "INSERT INTO tenants (id, name) VALUES (%s, %s)", (tenant, f"growth-{tenant.hex[:8]}")
        )
        left = turns // TURNS_PER_SESSION
        while left > 0:
            n = min(CHUNK_SESSIONS, left)
            rows = _chunk(str(tenant), n, now)
            with conn.transaction(), conn.cursor() as cur:
                for table in COLUMNS:
                    _copy(cur, table, COLUMNS[table], rows[table])
            left -= n
        conn.execute("VACUUM ANALYZE sessions, turns, steps, messages, decisions")
        conn.execute("CHECKPOINT")  # the load's writes are flushed before anything is measured
    return time.monotonic() - t0

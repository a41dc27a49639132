"""Whether this API process can reach what it needs: the database, Redis and the broker."""

from __future__ import annotations

from typing import TypedDict

from sqlalchemy import text

from ..runtime import Runtime

OK = "ok"


class Readiness(TypedDict):
    """Each dependency's state: `ok`, or `unavailable: <error type>`."""

    database: str
    redis: str
    broker: str


def _unavailable(exc: Exception) -> str:
    return f"unavailable: {type(exc).__name__}"


def _database(rt: Runtime) -> str:
    try:
        with rt.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        return _unavailable(exc)
    return OK


def _redis(rt: Runtime) -> str:
    try:
        rt.redis.ping()
    except Exception as exc:
        return _unavailable(exc)
    return OK


def _broker() -> str:
    try:
        from celery import current_app

        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return _unavailable(exc)
    return OK


def readiness(rt: Runtime) -> Readiness:
    """Check each dependency once (blocking: call it from a thread)."""
    return Readiness(database=_database(rt), redis=_redis(rt), broker=_broker())


def is_ready(checks: Readiness) -> bool:
    return all(state == OK for state in checks.values())

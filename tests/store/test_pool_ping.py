"""The pool pings a connection that sat idle before handing it out, and only such a one."""

from __future__ import annotations

import time

import psycopg
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError
from support import Stack

from cortex_workers.store.db import make_engine, normalize_url

pytestmark = pytest.mark.servers


def _backend_pid(engine: Engine) -> int:
    with engine.begin() as conn:
        return int(conn.execute(text("select pg_backend_pid()")).scalar_one())


def _terminate(stack: Stack, pid: int) -> None:
    url = normalize_url(stack.database_url).replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("select pg_terminate_backend(%s)", (pid,))


def test_an_idle_connection_whose_server_side_went_away_is_replaced_unnoticed(
    stack: Stack,
) -> None:
    engine = make_engine(stack.database_url, pool_size=1, ping_after_idle_s=0.2)
    try:
        pid = _backend_pid(engine)
        _terminate(stack, pid)
        time.sleep(0.3)
        assert _backend_pid(engine) != pid  # pinged, found dead, replaced: no error
    finally:
        engine.dispose()


def test_a_connection_back_within_the_idle_time_is_not_pinged(stack: Stack) -> None:
    """The trade-off: a connection reused at once goes out unchecked, so a server-side loss
    within that time costs one failed transaction; the pool then replaces its connections."""
    engine = make_engine(stack.database_url, pool_size=1, ping_after_idle_s=60)
    try:
        pid = _backend_pid(engine)
        _terminate(stack, pid)
        with pytest.raises(OperationalError):
            _backend_pid(engine)
        assert _backend_pid(engine) != pid
    finally:
        engine.dispose()

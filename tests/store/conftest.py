"""The store tests claim steps by hand as `support.TEST_HOLDER`; its heartbeat row never goes
stale, so workers of the same test session (whose takeover pass runs every 0.5 s) never take
those steps for a gone worker's."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy.engine import make_url
from support import TEST_HOLDER, Stack

from cortex_workers.store.db import normalize_url


@pytest.fixture(scope="session", autouse=True)
def test_holder_is_alive(stack: Stack) -> None:
    url = make_url(normalize_url(stack.database_url)).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO workers (holder, hostname, pid, seen_at) VALUES (%s, 'test', 0, "
            "'infinity') ON CONFLICT (holder) DO UPDATE SET seen_at = 'infinity'",
            (TEST_HOLDER.worker,),
        )

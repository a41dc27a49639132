"""`autocommit` and `autocommit_connection`: each statement commits on its own; the pooled
connection comes back as it was."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, text
from support import Stack

from cortex_workers.store.db import (
    autocommit,
    autocommit_connection,
    make_engine,
    make_sessionmaker,
    normalize_url,
    transaction,
)

pytestmark = pytest.mark.servers


def _seen_elsewhere(stack: Stack, name: str) -> bool:
    url = normalize_url(stack.database_url).replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as other:
        row = other.execute("select count(*) from autocommit_probe where name = %s", (name,))
        found = row.fetchone()
        assert found is not None
        return bool(found[0])


Opener = Callable[[Engine], AbstractContextManager[Any]]
OPENERS: dict[str, Opener] = {
    "session": lambda engine: autocommit(make_sessionmaker(engine)),
    "connection": autocommit_connection,
}


@pytest.mark.parametrize("kind", sorted(OPENERS))
def test_statements_commit_one_by_one_and_the_connection_goes_back_transactional(
    stack: Stack, kind: str
) -> None:
    engine = make_engine(stack.database_url, pool_size=1)
    factory = make_sessionmaker(engine)
    open_autocommit = OPENERS[kind]
    try:
        with transaction(factory) as db:
            db.execute(text("create table if not exists autocommit_probe (name text)"))
        with open_autocommit(engine) as db:
            db.execute(text("insert into autocommit_probe values ('first')"))
            # committed already, while the block still runs: no BEGIN was sent
            assert _seen_elsewhere(stack, "first")
            assert not db.execute(text("select now() <> statement_timestamp()")).scalar_one()
        # the same (only) pooled connection, in a transaction again: rolled back on error
        with pytest.raises(RuntimeError), transaction(factory) as db:
            db.execute(text("insert into autocommit_probe values ('second')"))
            raise RuntimeError("roll back")
        assert not _seen_elsewhere(stack, "second")
        with pytest.raises(RuntimeError), open_autocommit(engine) as db:
            db.execute(text("insert into autocommit_probe values ('third')"))
            raise RuntimeError("kept: it committed on its own")
        assert _seen_elsewhere(stack, "third")
        with transaction(factory) as db:
            assert db.execute(text("select now() = statement_timestamp()")).scalar_one() is False
    finally:
        with transaction(factory) as db:
            db.execute(text("drop table if exists autocommit_probe"))
        engine.dispose()

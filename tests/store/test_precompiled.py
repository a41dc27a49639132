"""`Precompiled`: a hot-path statement run on the psycopg cursor behaves as
`Connection.execute` of the same statement: the same parameter processing, the same errors,
and a broken connection is invalidated."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
import sqlalchemy.exc
from sqlalchemy import Engine, Integer, bindparam, func, literal, select, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql.psycopg import dialect as psycopg_dialect
from support import Stack

import cortex_workers.store
from cortex_workers.store.db import autocommit, make_engine, make_sessionmaker
from cortex_workers.store.sql import Precompiled

pytestmark = pytest.mark.servers


def _precompiled_statements() -> Iterator[tuple[str, Precompiled]]:
    for info in pkgutil.iter_modules(cortex_workers.store.__path__):
        module = importlib.import_module(f"cortex_workers.store.{info.name}")
        for name, value in vars(module).items():
            found = value.values() if isinstance(value, dict) else [value]
            for i, item in enumerate(found):
                if isinstance(item, Precompiled):
                    yield f"{info.name}.{name}[{i}]", item


PRECOMPILED = dict(_precompiled_statements())


@pytest.fixture(scope="module")
def engine(stack: Stack) -> Iterator[Engine]:
    engine = make_engine(stack.database_url, pool_size=1)
    yield engine
    engine.dispose()


def test_the_store_has_precompiled_statements() -> None:
    assert any(name.startswith("new_turns.") for name in PRECOMPILED)
    assert any(name.startswith("claims._CLAIM_WITH_VIEW") for name in PRECOMPILED)


@pytest.mark.parametrize("name", sorted(PRECOMPILED))
def test_every_precompiled_statement_compiles_to_one_text(name: str) -> None:
    """No `IN` list that expands and no value rendered at execution: the text sent is the
    same for any parameters."""
    form = PRECOMPILED[name]._compile(psycopg_dialect())
    assert form.sql and "POSTCOMPILE" not in form.sql


@pytest.mark.parametrize("name", sorted(PRECOMPILED))
def test_no_precompiled_statement_lists_two_tables_in_one_from(name: str) -> None:
    """A subquery that names a table and a CTE in one FROM is a join SQLAlchemy added when it
    could not correlate the subquery to an enclosing SELECT: the claim once scanned every
    turn's user message that way."""
    sql = PRECOMPILED[name]._compile(psycopg_dialect()).sql
    assert not re.search(r"FROM \w+(?: AS \w+)?, \w+", sql), sql


@pytest.mark.parametrize("name", sorted(PRECOMPILED))
def test_every_precompiled_statement_declares_its_parameter_set(name: str) -> None:
    """A TypedDict that compiling checks against what the statement binds."""
    assert PRECOMPILED[name].params is not None


class _Upto(TypedDict):
    upto: int


class _Other(TypedDict):
    other: int


def test_a_parameter_set_that_differs_from_what_the_statement_binds_is_refused() -> None:
    statement = select(bindparam("upto", type_=Integer).label("n"))
    Precompiled(statement, params=_Upto)._compile(psycopg_dialect())
    with pytest.raises(TypeError, match="make them agree"):
        Precompiled(statement, params=_Other)._compile(psycopg_dialect())


def test_a_statement_that_expands_at_execution_is_refused() -> None:
    expanding = Precompiled(select(literal(1)).where(literal(1).in_([1, 2])))
    with pytest.raises(TypeError):
        expanding._compile(psycopg_dialect())


@pytest.mark.parametrize("value", [{"a": [1, 2]}, [], "text", None], ids=repr)
def test_parameters_are_processed_as_sqlalchemy_processes_them(engine: Engine, value: Any) -> None:
    """JSON is wrapped for psycopg, and Python None is JSON null, as SQLAlchemy binds it;
    values the statement carries itself are sent too."""
    statement = select(
        func.jsonb_typeof(bindparam("doc", type_=JSONB)).label("kind"),
        bindparam("doc", type_=JSONB).label("doc"),
        literal("carried").label("carried"),
    )
    with autocommit(make_sessionmaker(engine)) as db:
        expected = db.execute(statement, {"doc": value}).one()
        got = Precompiled(statement).one(db, {"doc": value})
    assert tuple(got) == tuple(expected)
    assert got.kind == expected.kind and got.carried == "carried"


def test_rows_come_back_by_name_and_one_checks_the_count(engine: Engine) -> None:
    rows = Precompiled(
        select(text("n")).select_from(func.generate_series(1, bindparam("upto")).alias("n"))
    )
    with engine.connect() as conn:
        assert [r.n for r in rows.all(conn, {"upto": 3})] == [1, 2, 3]
        assert rows.first(conn, {"upto": 0}) is None
        assert rows.one(conn, {"upto": 1}).n == 1
        with pytest.raises(sqlalchemy.exc.NoResultFound):
            rows.one(conn, {"upto": 0})
        with pytest.raises(sqlalchemy.exc.MultipleResultsFound):
            rows.one(conn, {"upto": 2})


def test_errors_are_sqlalchemys_and_the_connection_stays_usable(engine: Engine) -> None:
    divide = Precompiled(select((literal(1) / bindparam("by")).label("q")))
    with engine.connect() as conn:
        with pytest.raises(sqlalchemy.exc.DataError) as caught:
            divide.first(conn, {"by": 0})
        assert not caught.value.connection_invalidated
        conn.rollback()
        assert divide.one(conn, {"by": 1}).q == 1


def test_a_broken_connection_is_invalidated_and_replaced(engine: Engine) -> None:
    """Its backend gone, the pooled connection is discarded, as `Connection.execute` does:
    the next checkout opens a new one."""
    suicide = Precompiled(select(func.pg_terminate_backend(func.pg_backend_pid()).label("x")))
    with engine.connect() as conn:
        pid = conn.execute(select(func.pg_backend_pid())).scalar_one()
        with pytest.raises(sqlalchemy.exc.OperationalError) as caught:
            suicide.first(conn, {})
        assert caught.value.connection_invalidated
        assert conn.invalidated
    with engine.connect() as conn:
        assert conn.execute(select(func.pg_backend_pid())).scalar_one() != pid

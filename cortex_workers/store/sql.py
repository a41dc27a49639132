"""Pieces of the hand-built hot-path statements (`store.new_turns`, `store.reply_statement`,
`store.tool_results`, `store.claims`), and `Precompiled`, which runs them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from enum import Enum
from typing import Any, TypeAlias, is_typeddict

import psycopg
from psycopg.rows import namedtuple_row
from psycopg.types.json import Jsonb
from pydantic import JsonValue
from sqlalchemy import ClauseElement, Dialect, bindparam, exists, literal_column
from sqlalchemy.exc import DBAPIError, MultipleResultsFound, NoResultFound
from sqlalchemy.orm import Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.types import UserDefinedType

from ..messages import ErrorDoc
from .db import Executor, is_disconnect

SqlValue: TypeAlias = (
    JsonValue | ErrorDoc | uuid.UUID | datetime | timedelta | Decimal | Enum | Jsonb
)
"""A value a statement binds: a JSON value or document (bare, or wrapped for psycopg as
`Jsonb`), an id, a time, an amount or one of `vocabulary`'s members."""
Params: TypeAlias = dict[str, SqlValue]
"""A statement's parameters by name."""


class _Untyped(UserDefinedType[Any]):
    """A parameter type SQLAlchemy renders no cast for: Postgres takes the type from the
    column the value is compared with or assigned to, or from the type psycopg sends. For
    parameters only: it has no column type to create."""

    cache_ok = True


def const(value: str | int | bool) -> Any:
    """A constant written into the statement rather than bound: the statement stays short
    enough (under 4096 characters and 50 parameters) for psycopg to cache its conversion.
    Only for the code's own constants, never for a value that comes from a caller. A
    vocabulary member is written as its value (`'pending'`)."""
    if isinstance(value, Enum):
        value = value.value
    text = f"'{value}'" if isinstance(value, str) else str(value).lower()
    return literal_column(text)


def exists_in(cte: Any) -> Any:
    """`EXISTS (SELECT * FROM cte)`: whether a CTE (a lock taken, a row updated) has a row."""
    return exists().select_from(cte)


def param(name: str) -> Any:
    """A bound parameter written without a cast (`%(name)s`, not `%(name)s::UUID`): what
    `const` does for constants, for values. Not for JSON, which must be cast to be stored as
    JSON rather than as a string."""
    return bindparam(name, type_=_Untyped())


@dataclass(frozen=True, slots=True)
class _Form:
    """A statement compiled for one dialect: its SQL text, the values of the parameters the
    statement carries itself, and the bind processors of the parameter types that have one."""

    sql: str
    defaults: Params
    processors: tuple[tuple[str, Callable[[Any], Any]], ...]

    def bind(self, params: Mapping[str, SqlValue]) -> Params:
        values = {**self.defaults, **params}
        for name, process in self.processors:
            if name in values:
                values[name] = process(values[name])
        return values


class Precompiled:
    """A constant statement of the hot path, compiled once per dialect and run on the
    connection's psycopg cursor, with SQLAlchemy's bind processing, error translation and
    invalidation of a broken connection kept.

    `Connection.execute` rebuilds, hashes and looks up the statement's cache key and builds
    result metadata at every execution; for the hot path's big CTE statements that is 100-150
    µs of CPU each, as much again as psycopg spends (`exec_driver_sql` costs the same). A
    statement wrapped here must compile to the same text for any parameters: no `IN` lists
    that expand, no values rendered into the text at execution. It must return rows (a
    `SELECT`, or `RETURNING`); they come back as named tuples of what psycopg returns, without
    SQLAlchemy's result processing: a vocabulary column is its value, a plain `str` (convert
    where a typed value is built: `StepKind(row.kind)`).

    `params`, a TypedDict, is the statement's parameter set: compiling checks that the
    statement binds every required key and nothing the TypedDict does not name."""

    __slots__ = ("_forms", "params", "statement")

    def __init__(self, statement: ClauseElement, *, params: type | None = None) -> None:
        if params is not None and not is_typeddict(params):
            raise TypeError("params: the statement's parameter set, a TypedDict")
        self.statement = statement
        self.params = params
        self._forms: dict[str, _Form] = {}

    def all(self, db: Executor, params: Mapping[str, Any]) -> Sequence[Any]:
        """Every row the statement returns."""
        conn = db.connection() if isinstance(db, Session) else db
        if not conn.in_transaction():
            conn.begin()  # what `Connection.execute` does first: SQLAlchemy's autobegin
        form = self._forms.get(conn.dialect.name) or self._compile(conn.dialect)
        values = form.bind(params)
        raw = conn.connection.dbapi_connection
        assert raw is not None
        cursor = raw.cursor(row_factory=namedtuple_row)
        try:
            cursor.execute(form.sql, values)
            return cursor.fetchall()
        except psycopg.Error as exc:
            lost = is_disconnect(conn.dialect, exc, raw, cursor)
            if lost:
                conn.invalidate(exc)
            raise DBAPIError.instance(
                form.sql,
                values,
                exc,
                psycopg.Error,
                connection_invalidated=lost,
                dialect=conn.dialect,
            ) from exc
        finally:
            cursor.close()

    def first(self, db: Executor, params: Mapping[str, Any]) -> Any | None:
        """The first row, or None."""
        rows = self.all(db, params)
        return rows[0] if rows else None

    def one(self, db: Executor, params: Mapping[str, Any]) -> Any:
        """The one row the statement returns; `NoResultFound` or `MultipleResultsFound`
        otherwise."""
        rows = self.all(db, params)
        if not rows:
            raise NoResultFound("the statement returned no row")
        if len(rows) > 1:
            raise MultipleResultsFound("the statement returned more than one row")
        return rows[0]

    def _compile(self, dialect: Dialect) -> _Form:
        compiled = self.statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        if (
            compiled.literal_execute_params
            or compiled.post_compile_params
            or compiled.escaped_bind_names
        ):
            raise TypeError("a precompiled statement must compile to one text, with plain names")
        processors = []
        for name, process in compiled._bind_processors.items():
            if not callable(process):  # a tuple-typed parameter: one processor per element
                raise TypeError(f"parameter {name!r}: tuple types are not supported")
            processors.append((name, process))
        self._check_params(compiled)
        form = _Form(
            sql=compiled.string,
            defaults={
                name: bind.effective_value
                for bind, name in compiled.bind_names.items()
                if not bind.required
            },
            processors=tuple(processors),
        )
        self._forms[dialect.name] = form
        return form

    def _check_params(self, compiled: SQLCompiler) -> None:
        if self.params is None:
            return
        bound = {name for bind, name in compiled.bind_names.items() if bind.required}
        required: frozenset[str] = getattr(self.params, "__required_keys__", frozenset())
        optional: frozenset[str] = getattr(self.params, "__optional_keys__", frozenset())
        if not required <= bound <= required | optional:
            raise TypeError(
                f"{self.params.__name__} names {sorted(required | optional)}, the statement "
                f"binds {sorted(bound)}: make them agree"
            )

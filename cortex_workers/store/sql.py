"""Pieces of the hand-built hot-path statements (`store.new_turns`, `store.replies`,
`store.tool_results`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, exists, literal_column
from sqlalchemy.types import UserDefinedType


class _Untyped(UserDefinedType[Any]):
    """A parameter type SQLAlchemy renders no cast for: Postgres takes the type from the
    column the value is compared with or assigned to, or from the type psycopg sends. For
    parameters only: it has no column type to create."""

    cache_ok = True


def const(value: str | int | bool) -> Any:
    """A constant written into the statement rather than bound: the statement stays short
    enough (under 4096 characters and 50 parameters) for psycopg to cache its conversion.
    Only for the code's own constants, never for a value that comes from a caller."""
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

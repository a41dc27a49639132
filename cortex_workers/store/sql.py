"""Pieces of the hand-built hot-path statements (`store.new_turns`, `store.replies`,
`store.tool_results`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import exists, literal_column


def const(value: str | int | bool) -> Any:
    """A constant written into the statement rather than bound: the statement stays short
    enough (under 4096 characters and 50 parameters) for psycopg to cache its conversion.
    Only for the code's own constants, never for a value that comes from a caller."""
    text = f"'{value}'" if isinstance(value, str) else str(value).lower()
    return literal_column(text)


def exists_in(cte: Any) -> Any:
    """`EXISTS (SELECT * FROM cte)`: whether a CTE (a lock taken, a row updated) has a row."""
    return exists().select_from(cte)

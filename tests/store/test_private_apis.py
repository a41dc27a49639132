"""What `store.sql.Precompiled` and `store.db` rely on below SQLAlchemy's and psycopg's public
APIs, spelled out: when an upgrade changes any of it, this fails first, with the name of what
moved. pyproject.toml pins both libraries to the minor versions tested here."""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

import psycopg
import psycopg._queries
import pytest
import sqlalchemy
from psycopg.rows import namedtuple_row
from sqlalchemy import Integer, bindparam, literal, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql.psycopg import dialect as psycopg_dialect
from sqlalchemy.engine.default import DefaultDialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler

pytestmark = pytest.mark.servers

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _pinned(name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(lowest, first excluded) version of a dependency, as pyproject.toml pins it."""
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    spec = next(d for d in dependencies if re.match(rf"{name}(\[|>|<|=|$)", d))
    low = re.search(r">=\s*([\d.]+)", spec)
    high = re.search(r"<\s*([\d.]+)", spec)
    assert low and high, f"{spec}: pin a tested range, >=low,<high"
    return tuple(map(int, low[1].split("."))), tuple(map(int, high[1].split(".")))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def test_the_installed_versions_are_in_the_pinned_ranges() -> None:
    for name, installed in (
        ("sqlalchemy", sqlalchemy.__version__),
        ("psycopg", psycopg.__version__),
    ):
        low, high = _pinned(name)
        assert low <= _version(installed) < high, f"{name} {installed} is outside {low}..{high}"


def test_a_compiled_statement_exposes_what_precompiled_reads() -> None:
    statement = select(
        bindparam("doc", type_=JSONB).label("doc"),
        literal("carried").label("carried"),
        (bindparam("n", type_=Integer) + 1).label("n"),
    )
    compiled = statement.compile(dialect=psycopg_dialect())
    assert isinstance(compiled, SQLCompiler)
    assert isinstance(compiled.string, str) and "%(doc)s" in compiled.string
    for empty in ("literal_execute_params", "post_compile_params", "escaped_bind_names"):
        assert not getattr(compiled, empty), empty
    names = {name: bind for bind, name in compiled.bind_names.items()}
    assert {"doc", "n"} <= set(names)
    assert names["doc"].required and not names["param_1"].required
    assert names["param_1"].effective_value == "carried"
    processors = compiled._bind_processors
    assert callable(processors["doc"])  # JSON is wrapped for psycopg


def test_the_error_translation_and_disconnect_check_keep_their_signatures() -> None:
    instance = inspect.signature(DBAPIError.instance).parameters
    assert list(instance)[:4] == ["statement", "params", "orig", "dbapi_base_err"]
    assert {"connection_invalidated", "dialect"} <= set(instance)
    assert list(inspect.signature(DefaultDialect.is_disconnect).parameters) == [
        "self",
        "e",
        "connection",
        "cursor",
    ]
    assert list(inspect.signature(DefaultDialect.do_ping).parameters) == [
        "self",
        "dbapi_connection",
    ]


def test_psycopg_caches_the_conversion_of_statements_up_to_module_limits_read_at_each_use() -> None:
    """`store.sql.cache_long_statements` raises these limits: they must be module globals that
    `convert` reads when it runs (tests/store/test_step_commit.py measures the statements
    against them)."""
    source = inspect.getsource(psycopg._queries.PostgresQuery.convert)
    assert "MAX_CACHED_STATEMENT_LENGTH" in source and "MAX_CACHED_STATEMENT_PARAMS" in source
    assert isinstance(psycopg._queries.MAX_CACHED_STATEMENT_LENGTH, int)
    assert isinstance(psycopg._queries.MAX_CACHED_STATEMENT_PARAMS, int)
    assert "row_factory" in inspect.signature(psycopg.Connection.cursor).parameters
    assert callable(namedtuple_row)

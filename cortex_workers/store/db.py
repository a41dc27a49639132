"""One engine per process, built on first use (after a fork, `runtime` builds a new one)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker


def normalize_url(url: str) -> str:
    """Name the psycopg 3 driver in a plain `postgresql://` URL."""
    if not url:
        raise RuntimeError(
            "DATABASE_URL is not set: run `cortex-workers dev` (embedded servers) or set it"
        )
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str, *, pool_size: int = 10) -> Engine:
    """An engine with pre-ping so a restarted Postgres costs one failed checkout, not a crash."""
    return create_engine(
        normalize_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_recycle=1800,
        pool_timeout=10,
        connect_args={"connect_timeout": 5},
    )


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session inside one transaction: committed on success, rolled back on error."""
    with factory() as session, session.begin():
        yield session

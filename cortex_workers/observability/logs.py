"""The log format: readable text by default, one JSON object per line with `CORTEX_LOG_FORMAT=json`.

JSON lines carry `turn_id`, `step_id` and `session_id` while a `log_context(...)` is in force,
and `trace_id` while a span is current, so a log search and a trace lead to each other. Text
lines stay as they were. See docs/operations.md.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from enum import StrEnum
from typing import TextIO
from uuid import UUID

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter

LOG_FORMAT_ENV = "CORTEX_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s"
JSON_RENAMES = {"asctime": "time", "levelname": "level", "name": "logger"}

_turn_id: ContextVar[str | None] = ContextVar("cortex_turn_id", default=None)
_step_id: ContextVar[str | None] = ContextVar("cortex_step_id", default=None)
_session_id: ContextVar[str | None] = ContextVar("cortex_session_id", default=None)


class LogFormat(StrEnum):
    """How log lines look: `text` for people, `json` for a log pipeline."""

    TEXT = "text"
    JSON = "json"


Id = UUID | str | int


@contextmanager
def log_context(
    *, turn_id: Id | None = None, step_id: Id | None = None, session_id: Id | None = None
) -> Iterator[None]:
    """Adds the given ids to every log line written inside (in this thread or task); ids left
    None keep the value of an enclosing context."""
    tokens: list[tuple[ContextVar[str | None], Token[str | None]]] = [
        (var, var.set(str(value)))
        for var, value in ((_turn_id, turn_id), (_step_id, step_id), (_session_id, session_id))
        if value is not None
    ]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


class ContextFilter(logging.Filter):
    """Puts the ids in force on each record as attributes, only those that are set."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in (
            ("turn_id", _turn_id),
            ("step_id", _step_id),
            ("session_id", _session_id),
        ):
            value = var.get()
            if value is not None:
                setattr(record, name, value)
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            record.trace_id = f"{span_context.trace_id:032x}"
            record.span_id = f"{span_context.span_id:016x}"
        return True


def log_format_from_env() -> LogFormat:
    """`CORTEX_LOG_FORMAT` (text or json; text when unset). Raises ValueError naming the choices."""
    value = os.environ.get(LOG_FORMAT_ENV, "").strip().lower() or LogFormat.TEXT
    try:
        return LogFormat(value)
    except ValueError:
        raise ValueError(f"{LOG_FORMAT_ENV}={value!r}: use text or json") from None


def build_handler(fmt: LogFormat | str, stream: TextIO | None = None) -> logging.Handler:
    """A handler writing to `stream` (stderr) in format `fmt`, with the context ids attached."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    match LogFormat(fmt):
        case LogFormat.JSON:
            handler.setFormatter(JsonFormatter(JSON_FIELDS, rename_fields=JSON_RENAMES))
        case LogFormat.TEXT:
            handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    handler.addFilter(ContextFilter())
    return handler


HANDLER_NAME = "cortex"
"""The name of the root handler `configure_logging` installs, so a second call replaces it."""


def configure_logging(level: int | str = logging.INFO, fmt: LogFormat | str | None = None) -> None:
    """Logs at `level` to stderr, as `fmt` (default: `CORTEX_LOG_FORMAT`, else text).

    Replaces the handler an earlier call installed and leaves other handlers alone."""
    handler = build_handler(log_format_from_env() if fmt is None else fmt)
    handler.set_name(HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)


QUIET_LOGGERS = ("celery.worker.strategy", "celery.app.trace", "celery.beat")
"""Where Celery logs each task received, each task succeeded, and each task beat sends."""


class QuietTicks(logging.Filter):
    """Drops Celery's "received", "succeeded" and beat's "Sending due task" lines of the tasks
    named (periodic maintenance, once a second each): their own lines say when they acted.
    Lines of failures and of every other task pass."""

    def __init__(self, task_names: frozenset[str]) -> None:
        super().__init__()
        self.task_names = task_names

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO:
            return True
        data = getattr(record, "data", None)
        if isinstance(data, dict):
            return data.get("name") not in self.task_names
        args = record.args
        if record.name == "celery.beat" and isinstance(args, tuple) and len(args) == 2:
            return args[1] not in self.task_names
        return True


def quiet_ticks(task_names: frozenset[str]) -> None:
    """Installs `QuietTicks` on Celery's task loggers (once per process)."""
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, QuietTicks) for f in logger.filters):
            logger.addFilter(QuietTicks(task_names))

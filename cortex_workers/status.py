"""`cortex-workers status`: what the stack is doing now, read from Postgres, the broker and Redis.

Per queue its depth, oldest age and steps in flight (`store.queue_stats`, the numbers the API's
queue gauges report), the workers that answer on the broker with the queues they consume, the
turns of the last hour by status, and the providers cooling down. The database and the broker
must answer for the stack to work: `Report.ok` says whether they did (the exit status).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from .observability.metrics import QueueStats
from .providers.limits import Cooldown
from .queues import QUEUES
from .runtime import get_runtime
from .settings import get_settings
from .store.db import autocommit
from .store.queue_stats import queue_stats, turn_counts
from .vocabulary import TurnStatus

PING_TIMEOUT_S = 1.0
RECENT_S = 3600.0
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker that answered, by its node name (`llm@host`), and the queues it consumes."""

    name: str
    queues: tuple[str, ...]


@dataclass
class Report:
    """What `status` found; a part is None when its source did not answer."""

    queues: list[QueueStats] | None = None
    turns: dict[TurnStatus, int] | None = None
    workers: list[WorkerInfo] | None = None
    cooling: list[Cooldown] | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """The database and the broker answered."""
        return self.queues is not None and self.workers is not None


def _attempt(report: Report, what: str, read: Callable[[], T]) -> T | None:
    try:
        return read()
    except Exception as exc:
        report.problems.append(f"{what}: {type(exc).__name__}: {exc}".strip())
        return None


def _read_database() -> tuple[list[QueueStats], dict[TurnStatus, int]]:
    if not get_settings().database_url:
        raise RuntimeError("DATABASE_URL is not set and no `dev` stack runs in --data-dir")
    with autocommit(get_runtime().db) as db:
        return queue_stats(db), turn_counts(db, within_s=RECENT_S)


def _read_workers(timeout_s: float) -> list[WorkerInfo]:
    """The workers that answer a broadcast within `timeout_s`; raises when the broker does not."""
    from celery import Celery

    url = get_settings().broker_url
    if not url:
        raise RuntimeError("no broker: set CELERY_BROKER_URL or REDIS_URL, or pass --data-dir")
    app = Celery("cortex-status", broker=url, set_as_current=False)
    app.conf.broker_transport_options = {"socket_connect_timeout": 2, "socket_timeout": 5}
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0.2)
        replies = app.control.inspect(timeout=timeout_s, connection=conn).active_queues() or {}
    return [
        WorkerInfo(name, tuple(sorted(str(q["name"]) for q in replies[name])))
        for name in sorted(replies)
    ]


def _read_cooling() -> list[Cooldown]:
    rt = get_runtime()
    return sorted(rt.health.cooling(rt.providers.names()).values(), key=lambda c: c.provider)


def gather(*, timeout_s: float = PING_TIMEOUT_S) -> Report:
    """Reads every source; one that fails is recorded in `problems`, not raised."""
    report = Report()
    database = _attempt(report, "database", _read_database)
    if database is not None:
        report.queues, report.turns = database
    report.workers = _attempt(report, "broker", lambda: _read_workers(timeout_s))
    report.cooling = _attempt(report, "redis", _read_cooling)
    return report


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _queue_lines(report: Report) -> list[str]:
    consumers: dict[str, list[str]] = {}
    for worker in report.workers or []:
        for queue in worker.queues:
            consumers.setdefault(queue, []).append(worker.name)
    unknown = "?" if report.workers is None else "none"
    lines = [f"{'queue':<12} {'depth':>6} {'oldest':>7} {'in flight':>9}  workers"]
    stats = {s.queue: s for s in report.queues or []}
    for queue in [*(q.value for q in QUEUES), *sorted(set(consumers) - set(QUEUES))]:
        workers = ", ".join(consumers.get(queue, [])) or unknown
        row = stats.get(queue)
        if row is None:
            lines.append(f"{queue:<12} {'?':>6} {'?':>7} {'?':>9}  {workers}")
        else:
            age = _age(row.oldest_age_s) if row.depth else "-"
            lines.append(f"{queue:<12} {row.depth:>6} {age:>7} {row.in_flight:>9}  {workers}")
    return lines


def render_text(report: Report) -> str:
    """The report for people: a table of the queues, then turns, providers and problems."""
    answered = "answers" if report.queues is not None else "does not answer"
    lines = [f"database {answered}; broker "]
    lines[0] += "answers" if report.workers is not None else "does not answer"
    lines += ["", *_queue_lines(report), ""]
    if report.turns is not None:
        counts = ", ".join(f"{status.value} {n}" for status, n in report.turns.items())
        lines.append(f"turns in the last hour: {counts}")
    if report.cooling is not None:
        cooling = "; ".join(
            f"{c.provider} for {_age(c.seconds_left)} ({c.reason})" for c in report.cooling
        )
        lines.append(f"providers cooling down: {cooling or 'none'}")
    lines += [f"problem: {p}" for p in report.problems]
    return "\n".join(lines)


def render_json(report: Report) -> str:
    """The report for machines: one JSON object."""
    document = {
        "ok": report.ok,
        "queues": None if report.queues is None else [asdict(q) for q in report.queues],
        "workers": None if report.workers is None else [asdict(w) for w in report.workers],
        "turns_last_hour": None
        if report.turns is None
        else {s.value: n for s, n in report.turns.items()},
        "providers_cooling": None
        if report.cooling is None
        else [asdict(c) for c in report.cooling],
        "problems": report.problems,
    }
    return json.dumps(document, indent=2)

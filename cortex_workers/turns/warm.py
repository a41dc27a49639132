"""Warm a worker process before it takes work: everything a step would otherwise build lazily.

A fresh process that builds its runtime inside its first steps (importing the provider SDKs,
building their clients and TLS contexts, compiling the redaction detectors, loading phone number
metadata, reading the model catalog and the tools) holds the interpreter for seconds. Under
gevent nothing else runs meanwhile, the lease keeper included, so a step's lease can lapse
before its first provider request and the step is delivered again. Warming at process start
moves that cost to before the worker says it is ready. See docs/operations.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import text

from ..messages import Message
from ..privacy import redact_messages
from ..runtime import Runtime
from .guards.route import privacy_policy
from .leases import keeper

log = logging.getLogger(__name__)

SAMPLE = (
    "mail jane@example.com or call +1 415 555 0100 / (415) 555-0100, card 4111 1111 1111 1111, "
    "IBAN DE89 3704 0044 0532 0130 00, host 10.0.0.1, SSN 123-45-6789, "
    "password=hunter2hunter2, token ghp_0123456789abcdefghijklmnopqrstuvwxyz"
)
"""Text that exercises every detector once (values are made up)."""


@dataclass
class Warmed:
    """How long each part of the warm-up took, in seconds."""

    phases: dict[str, float] = field(default_factory=dict)

    def timed(self, name: str, work: Callable[[], object]) -> None:
        started = time.perf_counter()
        try:
            work()
        except Exception as exc:  # a provider or service not usable yet: the step will say why
            log.warning("warm-up: %s failed (%s); it will be built on first use", name, exc)
        self.phases[name] = round(time.perf_counter() - started, 3)

    @property
    def total_s(self) -> float:
        return round(sum(self.phases.values()), 3)


def _connect(rt: Runtime) -> None:
    with rt.engine.connect() as db:
        db.execute(text("SELECT 1"))
    rt.redis.ping()
    _ = rt.stream_writer, rt.rate_limiter, rt.health


def _providers(rt: Runtime) -> None:
    registry = rt.providers
    for name in registry.names():
        if registry.unavailable(name) is None:
            registry.get(name).warm()


def _redaction(rt: Runtime) -> None:
    policy = privacy_policy(rt)
    if policy.active:
        redact_messages((Message(role="user", content=SAMPLE),), policy)


def _routing(rt: Runtime) -> None:
    from ..routing import choose_route  # noqa: F401 (imported for its side effect: loading)

    catalog = rt.providers.catalog
    for name in rt.providers.names():
        catalog.models_of(name)


def import_provider_sdks() -> None:
    """The provider SDKs (a second or more to import), in the worker's main process before its
    pool starts: prefork children inherit them, and have only their clients to build in the few
    seconds Celery gives a child to start."""
    import anthropic  # noqa: F401 (imported for its side effect: loading)
    import openai.lib.streaming.chat  # noqa: F401


def warm_runtime(rt: Runtime) -> Warmed:
    """Build this process's runtime ahead of its first step; log what each part took."""
    warmed = Warmed()
    warmed.timed("connections", lambda: _connect(rt))
    warmed.timed("tools", lambda: rt.tools)
    warmed.timed("providers", lambda: _providers(rt))
    warmed.timed("redaction", lambda: _redaction(rt))
    warmed.timed("routing", lambda: _routing(rt))
    warmed.timed("leases", lambda: keeper(rt))
    log.info(
        "worker warmed in %.2fs (%s)",
        warmed.total_s,
        ", ".join(f"{k} {v:.2f}s" for k, v in warmed.phases.items()),
    )
    return warmed

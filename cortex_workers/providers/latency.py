"""Measured latency per provider and model: the last samples of real calls, kept in Redis and
shared by every process; p50/p95 are read from them (the router's latency SLA, GET /v1/providers).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import redis

SAMPLES = 200
"""Samples kept per provider:model (the most recent)."""
TTL_S = 7 * 24 * 3600
INDEX = "cortex:latency:index"
FLUSH_S = 1.0
"""How long a process keeps its samples before it writes them, all in one round trip."""

log = logging.getLogger(__name__)


def _key(provider: str, model: str) -> str:
    return f"cortex:latency:{provider}:{model}"


@dataclass(frozen=True, slots=True)
class LatencyStats:
    p50_ms: float
    p95_ms: float
    samples: int


def record_latency(client: redis.Redis, provider: str, model: str, ms: float) -> None:
    """One call's duration (from the request to its last event), written now."""
    _write(client, {(provider, model): [ms]})


def _write(
    client: redis.Redis, samples: dict[tuple[str, str], list[float]]
) -> dict[tuple[str, str], LatencyStats | None]:
    """Samples, oldest first, of each provider:model, and what is measured of each after them:
    one round trip for all of them."""
    pipe = client.pipeline(transaction=False)
    for (provider, model), values in samples.items():
        key = _key(provider, model)
        pipe.lpush(key, *(round(ms, 1) for ms in values))
        pipe.ltrim(key, 0, SAMPLES - 1)
        pipe.expire(key, TTL_S)
        pipe.sadd(INDEX, f"{provider}\t{model}")
        pipe.lrange(key, 0, -1)
    replies = pipe.execute()
    return {pair: _stats(replies[5 * i + 4]) for i, pair in enumerate(samples)}


class LatencyRecorder:
    """A process's view of the measured latency. A model step adds its sample to memory and
    sends nothing; a timer writes every sample of the last `flush_s` in one round trip, and
    reads back what is measured of those models. A step's review reads the measured latency
    from this process's copy, at most `flush_s` old (a model this process has not read
    recently costs one read). A sample reaches Redis within `flush_s`; one not yet written
    when the process was killed is lost (the percentiles are of the samples that arrived)."""

    def __init__(self, client: redis.Redis, *, flush_s: float = FLUSH_S) -> None:
        self._client = client
        self._flush_s = flush_s
        self._lock = threading.Lock()
        self._pending: defaultdict[tuple[str, str], list[float]] = defaultdict(list)
        self._timer: threading.Timer | None = None
        self._pid = os.getpid()
        self._known: dict[tuple[str, str], tuple[float, LatencyStats | None]] = {}
        """What was read of each model, and when (`time.monotonic()`)."""

    def add(self, provider: str, model: str, ms: float) -> None:
        with self._lock:
            self._pending[(provider, model)].append(ms)
            if self._timer is not None and self._pid != os.getpid():
                self._timer = None  # made before a fork: the parent's timer is not running here
            if self._timer is None:
                self._pid = os.getpid()
                self._timer = threading.Timer(self._flush_s, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def stats(self, provider: str, model: str) -> LatencyStats | None:
        """What is measured of a model, as read at most `flush_s` ago (without the samples of
        this process still waiting to be written)."""
        pair = (provider, model)
        with self._lock:
            known = self._known.get(pair)
        if known is not None and time.monotonic() - known[0] < self._flush_s:
            return known[1]
        read_at = time.monotonic()
        try:
            stats = latency_of(self._client, [pair]).get(pair)
        except redis.RedisError as exc:  # nothing measured to judge by: no spike
            log.warning("could not read the measured latency of %s:%s: %s", *pair, exc)
            return None
        with self._lock:
            self._known[pair] = (read_at, stats)
        return stats

    def flush(self) -> None:
        """Write what is pending now (the timer's work; also at a worker's shutdown)."""
        with self._lock:
            pending, self._pending = dict(self._pending), defaultdict(list)
            if self._timer is not None:
                self._timer.cancel()
            self._timer = None
        if not pending:
            return
        read_at = time.monotonic()
        try:
            measured = _write(self._client, pending)
        except redis.RedisError as exc:
            log.warning("could not record %d latency samples: %s", len(pending), exc)
            return
        with self._lock:
            self._known.update({pair: (read_at, stats) for pair, stats in measured.items()})


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def _stats(raw: list[bytes]) -> LatencyStats | None:
    values = [float(v) for v in raw]
    if not values:
        return None
    return LatencyStats(percentile(values, 50), percentile(values, 95), len(values))


def latency_of(
    client: redis.Redis, pairs: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], LatencyStats]:
    """The measured latency of each (provider, model) that has samples, in one round trip."""
    wanted = list(dict.fromkeys(pairs))
    pipe = client.pipeline(transaction=False)
    for provider, model in wanted:
        pipe.lrange(_key(provider, model), 0, -1)
    out = {}
    for pair, raw in zip(wanted, pipe.execute(), strict=True):
        stats = _stats(raw)
        if stats is not None:
            out[pair] = stats
    return out


def measured(client: redis.Redis) -> dict[tuple[str, str], LatencyStats]:
    """Every provider:model with samples (GET /v1/providers)."""
    members = client.smembers(INDEX)
    pairs = []
    for member in members:
        text = member.decode() if isinstance(member, bytes) else str(member)
        provider, _, model = text.partition("\t")
        pairs.append((provider, model))
    return latency_of(client, pairs)

"""Measured latency per provider and model: the last samples of real calls, kept in Redis and
shared by every process; p50/p95 are read from them (the router's latency SLA, GET /v1/providers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

import redis

SAMPLES = 200
"""Samples kept per provider:model (the most recent)."""
TTL_S = 7 * 24 * 3600
INDEX = "cortex:latency:index"


def _key(provider: str, model: str) -> str:
    return f"cortex:latency:{provider}:{model}"


@dataclass(frozen=True, slots=True)
class LatencyStats:
    p50_ms: float
    p95_ms: float
    samples: int


def record_latency(client: redis.Redis, provider: str, model: str, ms: float) -> None:
    """One call's duration (from the request to its last event), in one round trip."""
    key = _key(provider, model)
    pipe = client.pipeline(transaction=False)
    pipe.lpush(key, round(ms, 1))
    pipe.ltrim(key, 0, SAMPLES - 1)
    pipe.expire(key, TTL_S)
    pipe.sadd(INDEX, f"{provider}\t{model}")
    pipe.execute()


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


def before_last(client: redis.Redis, provider: str, model: str) -> LatencyStats | None:
    """The measured latency without the most recent sample (the call being judged)."""
    raw = cast(list[bytes], client.lrange(_key(provider, model), 1, -1))
    return _stats(raw)

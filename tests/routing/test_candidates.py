"""The router's candidates from a deployment's configuration and measured latency (real Redis)."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import SecretStr
from support import Stack, wait_until

from cortex_workers.messages import Message, ModelRequest
from cortex_workers.providers.latency import (
    LatencyRecorder,
    LatencyStats,
    latency_of,
    record_latency,
)
from cortex_workers.routing import RouteSpec
from cortex_workers.runtime import Runtime
from cortex_workers.settings import ModelSettings, get_settings
from cortex_workers.turns.guards.route_choice import candidates, decide_route
from cortex_workers.vocabulary import ModelTier


def _runtime(**changes: Any) -> Runtime:
    base = {
        "llm_provider": "openai",
        "openai_api_key": SecretStr("sk-x"),
        "ollama_base_url": None,
        "llm_providers": {},
        "llm_fallback_providers": [],
    }
    return Runtime(get_settings().model_copy(update={**base, **changes}))


def test_keyless_builtins_are_offered_only_when_configured(stack: Stack) -> None:
    plain = {(c.provider, c.model) for c in candidates(_runtime())}
    assert ("openai", "gpt-4o") in plain
    assert not any(p in {"scripted", "ollama"} for p, _ in plain)
    with_ollama = candidates(_runtime(ollama_base_url="http://10.0.0.5:11434/v1"))
    ollama = [c for c in with_ollama if c.provider == "ollama"]
    assert ollama and all(c.local for c in ollama)
    assert all(not c.local for c in with_ollama if c.provider == "openai")


def test_measured_latency_feeds_the_candidates(stack: Stack) -> None:
    rt = _runtime()
    model = f"gpt-4o-latency-{uuid.uuid4().hex[:6]}"
    for ms in (100, 200, 300, 400, 1000):
        record_latency(rt.redis, "openai", model, ms)
    stats = latency_of(rt.redis, [("openai", model)])[("openai", model)]
    assert (stats.p50_ms, stats.p95_ms, stats.samples) == (300, 1000, 5)
    rt = _runtime(llm_models={model: ModelSettings(provider="openai", tier="fast")})
    found = [c for c in candidates(rt) if c.model == model]
    assert found and found[0].latency_p95_ms == 1000


def test_local_only_routes_to_the_local_server(stack: Stack) -> None:
    rt = _runtime(ollama_base_url="http://127.0.0.1:11434/v1")
    request = ModelRequest(model="auto", messages=(Message(role="user", content="hi"),))
    decision = decide_route(rt, RouteSpec(tier=ModelTier.DEEP), request, local_only=True)
    assert decision.provider == "ollama"
    assert all(r.why == "mode" for r in decision.rejected if r.provider == "openai")


def test_a_process_writes_its_samples_once_per_second_in_one_round_trip(stack: Stack) -> None:
    rt = _runtime()
    model = f"gpt-4o-batched-{uuid.uuid4().hex[:6]}"
    recorder = LatencyRecorder(rt.redis, flush_s=3600)  # only an explicit flush writes
    for ms in (100, 200, 300, 400, 1000):
        recorder.add("openai", model, ms)
    assert latency_of(rt.redis, [("openai", model)]) == {}  # nothing sent per sample
    recorder.flush()
    stats = latency_of(rt.redis, [("openai", model)])[("openai", model)]
    assert (stats.p50_ms, stats.p95_ms, stats.samples) == (300, 1000, 5)
    recorder.flush()  # nothing pending: nothing written twice
    assert latency_of(rt.redis, [("openai", model)])[("openai", model)].samples == 5


def test_the_timer_writes_a_sample_within_its_interval(stack: Stack) -> None:
    rt = _runtime()
    model = f"gpt-4o-timed-{uuid.uuid4().hex[:6]}"
    LatencyRecorder(rt.redis, flush_s=0.2).add("openai", model, 250)
    stats = wait_until(
        lambda: latency_of(rt.redis, [("openai", model)]).get(("openai", model)),
        timeout=10,
        what="the timer's write",
    )
    assert (stats.p50_ms, stats.samples) == (250, 1)


def test_a_review_reads_the_measured_latency_at_most_once_per_interval(stack: Stack) -> None:
    rt = _runtime()
    model = f"gpt-4o-cached-{uuid.uuid4().hex[:6]}"
    for ms in (100, 100, 100):
        record_latency(rt.redis, "openai", model, ms)
    recorder = LatencyRecorder(rt.redis, flush_s=3600)
    first = recorder.stats("openai", model)
    assert first is not None and first.samples == 3
    record_latency(rt.redis, "openai", model, 900)  # another process's sample
    assert recorder.stats("openai", model) == first  # this process's copy, not read again
    recorder.add("openai", model, 500)
    recorder.flush()  # the write reads back what is measured now
    assert recorder.stats("openai", model) == LatencyStats(100, 900, 5)

"""CI-sized fault scenarios (the full ones: `scripts/faults/run --scenario all`).

Each test starts its OWN stack through the harness (its own Postgres on a Unix socket in a
temporary directory, its own Valkey on an ephemeral loopback port, the API, one worker per queue
group and beat as subprocesses) instead of the suite's fixtures, because it kills and restarts
parts of it. 30 turns each, faults for 40-45 s, about 90 s a test in all; everything is torn
down at the end, also on failure (the work directory with the logs is kept then, and its path
printed).

What must hold whatever the faults: no accepted turn lost (every one ends), no duplicated
message or turn, no order violation within a session, what an SSE client rebuilds equals what
is stored, and at least one fault landed on running work (a run where none did proves nothing).
Timing is only reported, never asserted.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from scripts.faults import run_scenario

pytestmark = pytest.mark.servers

# The suite's broker choice carries over: with CORTEX_TEST_BROKER_URL on RabbitMQ, each stack
# gets a RabbitMQ vhost of its own (created and deleted by the harness); streams stay on Redis.
BROKER = "rabbitmq" if os.environ.get("CORTEX_TEST_BROKER_URL", "").startswith("amqp") else "redis"
SMALL: dict[str, Any] = {"sessions": 5, "turns": 6, "drain_s": 75.0, "broker": BROKER}


def _check(report: dict[str, Any]) -> None:
    c = report["counts"]
    print(json.dumps({"counts": c, "problems": report["problems"]}, indent=1, default=str))
    evidence = json.dumps(report["problems"], default=str)[:4000]
    assert c["not_accepted"] == 0, evidence
    assert c["submitted"] == c["planned"], evidence
    assert c["lost"] == 0, evidence
    assert c["done"] + c["failed_visibly"] + c["cancelled"] == c["submitted"], evidence
    assert c["duplicated_assistant_messages"] == 0, evidence
    assert c["duplicated_other_messages"] == 0, evidence
    assert c["duplicate_turns"] == 0, evidence
    assert c["order_violations"] == 0, evidence
    assert c["stream_vs_stored_mismatches"] == 0, evidence
    assert c["redis_stream_vs_stored_mismatches"] == 0, evidence
    assert c["faults_landed"] >= 1, json.dumps(report["faults"], default=str)[:4000]


@pytest.mark.timeout(240)
def test_worker_sigkills() -> None:
    """Scenario 1: the llm and tools workers are SIGKILLed every 5-15 s and restarted."""
    report = run_scenario("1", duration_s=45, max_faults=6, seed=11, **SMALL)
    _check(report)
    assert report["counts"]["retried_steps"], "a kill that landed must have caused a retry"


@pytest.mark.timeout(240)
def test_redis_restart_with_persistence() -> None:
    """Scenario 2: Valkey (append-only file on) is SIGKILLed and restarted twice mid-run."""
    report = run_scenario("2a", duration_s=45, max_faults=2, seed=12, **SMALL)
    _check(report)


@pytest.mark.timeout(240)
def test_sse_disconnect_and_resume() -> None:
    """Scenario 5: SSE clients drop their connections at random and resume with
    Last-Event-ID (or ?after=), some only after the stream expired (Postgres snapshot)."""
    report = run_scenario("5", duration_s=40, seed=15, **SMALL)
    _check(report)
    assert report["counts"]["sse_forced_disconnects"] >= 1

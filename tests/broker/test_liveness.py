"""Worker liveness and graceful drain (docs/reliability.md).

- A SIGKILLed worker's step is taken over as soon as its heartbeat stops, not when its lease
  runs out: the killed worker here holds a 120 s lease, far longer than the test waits.
- A live worker whose model takes 20 s to its first token keeps its step (one attempt).
- SIGTERM drains: a step still running after `CORTEX_DRAIN_S` is handed back, re-published at
  once, and completed by another worker exactly once; the drained worker exits 0.

Times are logged (`-s` shows them), never asserted.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from support import Api, Fakes, Workers, stored_text, text_of, wait_until

pytestmark = pytest.mark.servers

LONG_LEASE = {"CORTEX_LEASE_S": "120"}


@pytest.fixture
def llm_restored(workers: Workers) -> Iterator[Workers]:
    """The test replaces the llm worker; the session's own comes back afterwards."""
    yield workers
    for name in [n for n in workers.procs if n.startswith("llm")]:
        workers.kill(name)
        workers.procs.pop(name)
    workers.start("llm")


def _streaming(client: Api, tid: str, step: int = 1) -> None:
    wait_until(
        lambda: any(
            e.event == "token" and e.data["step"] == step for e in client.turn_events(tid, limit=4)
        ),
        timeout=30,
        what="the model step streaming",
    )


def _exactly_once(client: Api, sid: str, tid: str, text: str) -> dict[str, object]:
    turn = client.wait_turn(tid, timeout=60)
    assert turn["status"] == "done", turn
    assert turn["answer"] == text
    messages = client.messages(sid)
    assert Counter((m["turn_id"], m["role"]) for m in messages)[(tid, "assistant")] == 1
    events = client.turn_events(tid)
    assert text_of(events) == stored_text(messages, tid)
    assert [e.event for e in events].count("done") == 1
    return turn


def test_a_sigkilled_workers_step_is_taken_over_before_its_lease_ends(
    client: Api, llm_restored: Workers
) -> None:
    workers = llm_restored
    workers.kill("llm")
    workers.start("llm", **LONG_LEASE)
    text = " ".join(f"w{i}" for i in range(40))
    sid = client.scripted_session({"text": text, "token_ms": 100})
    tid = client.submit(sid)
    _streaming(client, tid)
    killed = time.monotonic()
    workers.kill("llm")
    workers.start("llm", **LONG_LEASE)
    wait_until(
        lambda: any(e.event == "step_restart" for e in client.turn_events(tid)),
        timeout=60,
        what="the step resumed by another worker",
    )
    print(f"\nSIGKILL -> step_restart: {time.monotonic() - killed:.2f}s (lease: 120s)")
    turn = _exactly_once(client, sid, tid, text)
    steps = turn["steps"]
    assert isinstance(steps, list) and steps[0]["attempt"] == 2


def test_a_live_worker_slow_to_its_first_token_keeps_its_step(
    client: Api, fakes: Fakes, workers: Workers
) -> None:
    content = f"slow first token {uuid.uuid4()}"
    fakes.openai.enqueue(content, {"delay_s": 20, "text": "worth the wait"})
    sid = client.create_session(provider="openai", model="gpt-4o-mini")["id"]
    started = time.monotonic()
    tid = client.submit(sid, content)
    turn = _exactly_once(client, sid, tid, "worth the wait")
    print(f"\n20 s first token: done in {time.monotonic() - started:.1f}s")
    steps = turn["steps"]
    assert isinstance(steps, list) and steps[0]["attempt"] == 1
    assert not any(e.event == "step_restart" for e in client.turn_events(tid))
    assert len(fakes.openai.requests_for(content)) == 1


def test_sigterm_drains_and_hands_back_a_long_step(client: Api, llm_restored: Workers) -> None:
    workers = llm_restored
    workers.kill("llm")
    workers.start("llm", CORTEX_DRAIN_S="1")
    text = " ".join(f"d{i}" for i in range(100))
    sid = client.scripted_session({"text": text, "token_ms": 100})
    tid = client.submit(sid)
    _streaming(client, tid)
    stopping = time.monotonic()
    assert workers.terminate("llm", timeout=30) == 0
    print(f"\nSIGTERM -> exited: {time.monotonic() - stopping:.2f}s (CORTEX_DRAIN_S=1)")
    workers.procs.pop("llm")
    workers.start("llm-b")  # where the handed-back step goes on
    turn = _exactly_once(client, sid, tid, text)
    steps = turn["steps"]
    assert isinstance(steps, list) and steps[0]["attempt"] == 2
    assert any(e.event == "step_restart" for e in client.turn_events(tid))
    assert "handed back 1 steps" in workers.log("llm")

"""Tool side effects exactly once (docs/tools.md, "Exactly once"): the tools worker is
SIGKILLed after a call reached the plugin's HTTP server and before its result was recorded.

- An idempotent tool (`idempotent: true` in its manifest) is sent again by the takeover with
  the same `Idempotency-Key`, so the receiver can recognise the repeat.
- Any other tool with side effects is not sent again: the server sees one request and the
  model gets an "outcome unknown" result.

Each test holds its request at the bridge (bounded: 30 s) while the worker is killed, and
brings the session's tools worker back afterwards.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from support import Api, Fakes, Workers, wait_until


@pytest.fixture
def tools_restored(workers: Workers) -> Iterator[Workers]:
    """The test kills the tools worker; a fresh one is running afterwards."""
    yield workers
    if workers.procs["tools"].poll() is not None:
        workers.start("tools")


def _killed_mid_call(
    client: Api, fakes: Fakes, workers: Workers, tool: str
) -> tuple[dict[str, object], list[dict[str, object]]]:
    """Run a turn calling `tool` once, killing the tools worker while the bridge holds the
    call; returns the call's tool_result and the requests the bridge saw for it."""
    ref = uuid.uuid4().hex
    path = f"/effects/{tool}"
    held = fakes.bridge.holds[path] = threading.Event()
    try:
        sid = client.scripted_session(
            {"tool_calls": [{"name": tool, "arguments": {"ref": ref}}]}, {"text": "noted"}
        )
        tid = client.submit(sid, "do it")

        def mine() -> list[dict[str, object]]:
            return [r for r in fakes.bridge.requests if r["json"] == {"ref": ref}]

        wait_until(lambda: mine(), timeout=60, what=f"{tool}'s request at the bridge")
        workers.kill("tools")
    finally:
        held.set()  # the held handler ends (its answer goes nowhere)
        fakes.bridge.holds.pop(path, None)
    workers.start("tools")
    turn = client.wait_turn(tid, timeout=90)
    assert turn["status"] == "done", turn
    results = [e.data for e in client.turn_events(tid) if e.event == "tool_result"]
    assert len(results) == 1, results
    return results[0], mine()


def test_an_idempotent_tool_is_sent_again_with_the_same_key_after_a_takeover(
    client: Api, fakes: Fakes, tools_restored: Workers
) -> None:
    result, requests = _killed_mid_call(client, fakes, tools_restored, "charge_card")
    # twice at least (a loaded machine may take the step over once more: the key is the same)
    assert len(requests) >= 2, requests
    keys = {r["idempotency_key"] for r in requests}
    assert len(keys) == 1 and None not in keys, keys
    assert not result["is_error"], result


def test_a_tool_with_effects_is_not_sent_twice_and_the_model_hears_outcome_unknown(
    client: Api, fakes: Fakes, tools_restored: Workers
) -> None:
    result, requests = _killed_mid_call(client, fakes, tools_restored, "send_letter")
    assert len(requests) == 1, requests
    assert requests[0]["idempotency_key"]
    assert result["is_error"] and result["error"] == "outcome_unknown", result
    assert str(result["content"]).startswith("outcome unknown")


def test_a_plugin_call_carries_an_idempotency_key(client: Api, fakes: Fakes) -> None:
    ref = uuid.uuid4().hex
    sid = client.scripted_session(
        {"tool_calls": [{"name": "charge_card", "arguments": {"ref": ref}}]}, {"text": "ok"}
    )
    assert client.wait_turn(client.submit(sid), timeout=60)["status"] == "done"
    sent = [r for r in fakes.bridge.requests if r["json"] == {"ref": ref}]
    assert len(sent) == 1 and str(sent[0]["idempotency_key"]).startswith("cw-")

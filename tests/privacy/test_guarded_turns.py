"""Whole turns through the guarded call: redaction before a remote provider and restoration in
the answer, failing closed, local-only, and frugal's escalation (real workers, wire fakes)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from privacy_support import REMOTE_KEY, Guarded, received, text_events
from support import Api, stored_text, text_of, wait_until

EMAIL = "ann.lee@example.com"
CARD = "4111 1111 1111 1111"


def test_a_key_an_email_and_a_card_never_reach_the_provider_and_come_back_restored(
    gclient: Api, guarded: Guarded
) -> None:
    tag = uuid.uuid4().hex
    prompt = f"{tag}: my key is {REMOTE_KEY}, mail {EMAIL}, card {CARD}, ticket TCK-123456"
    sid = gclient.create_session(provider="openai", model="gpt-4o")["id"]
    tid = gclient.submit(sid, prompt)  # the fake echoes the user's text back
    events = gclient.turn_events(tid)
    turn = gclient.wait_turn(tid)
    assert turn["status"] == "done", turn.get("error")
    bodies = received(guarded.remote, tag)
    assert len(bodies) == 1
    wire = json.dumps(bodies[0])
    for value in (REMOTE_KEY, EMAIL, CARD, "4111", "TCK-123456"):
        assert value not in wire
    for placeholder in ("[PROVIDER_KEY_1]", "[EMAIL_1]", "[CARD_1]", "[TICKET_1]"):
        assert placeholder in wire
    # the user sees and the session stores their own data
    assert text_of(events) == prompt
    assert stored_text(gclient.messages(sid), tid) == prompt
    assert turn["answer"] == prompt
    # the fake streams 6-character pieces: placeholders arrive split, and none shows
    assert not any("[" in t or "]" in t for t in text_events(events))
    model_step = turn["steps"][0]
    assert model_step["redactions"] == {"provider_key": 1, "email": 1, "card": 1, "ticket": 1}
    logs = guarded.log_text()
    assert tag in logs or "run_model_step" in logs  # the workers did log this turn
    assert not any(v in logs for v in (EMAIL, CARD, "TCK-123456"))


def test_nothing_is_redacted_for_a_local_provider(gclient: Api, guarded: Guarded) -> None:
    tag = uuid.uuid4().hex
    sid = gclient.create_session(provider="ollama", model="llama3.1")["id"]
    turn = gclient.wait_turn(gclient.submit(sid, f"{tag} mail {EMAIL}"))
    assert turn["status"] == "done"
    assert EMAIL in json.dumps(received(guarded.local, tag))
    assert turn["steps"][0]["redactions"] is None


def test_a_failing_redactor_sends_nothing_and_fails_the_step_visibly(
    gclient: Api, guarded: Guarded
) -> None:
    tag = uuid.uuid4().hex
    sid = gclient.create_session(provider="openai", model="gpt-4o")["id"]
    # the operator pattern `(a|aa)+$` runs past the timeout on this text
    tid = gclient.submit(sid, f"{tag} card {CARD} " + "a" * 60 + "b")
    events = gclient.turn_events(tid)
    turn = gclient.wait_turn(tid)
    assert turn["status"] == "failed"
    assert turn["error"]["code"] == "redaction_failed"
    errors = [e.data for e in events if e.event == "error"]
    assert errors and errors[0]["code"] == "redaction_failed"
    assert received(guarded.remote, tag) == []
    assert "4111" not in json.dumps(turn["error"]) and "aaaa" not in json.dumps(turn["error"])


def test_local_only_calls_only_local_providers(gclient: Api, guarded: Guarded) -> None:
    refused = gclient.http.post(
        "/v1/sessions", json={"provider": "openai", "model": "gpt-4o", "mode": "local-only"}
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "local_only"
    tag = uuid.uuid4().hex
    before = len(guarded.remote.requests)
    sid = gclient.create_session(model="auto", mode="local-only")["id"]
    turn = gclient.wait_turn(gclient.submit(sid, f"{tag} hello, local"))
    assert turn["status"] == "done", turn.get("error")
    step = turn["steps"][0]
    assert step["route"]["provider"] in {"ollama", "scripted"}
    assert any(r["why"] == "mode" and r["provider"] == "openai" for r in step["route"]["rejected"])
    assert len(guarded.remote.requests) == before, "the remote fake received a request"


def test_frugal_redoes_an_answer_cut_off_on_the_output_limit_on_the_full_model(
    gclient: Api, guarded: Guarded
) -> None:
    tag = uuid.uuid4().hex
    sid = gclient.create_session(provider="openai", model="gpt-4o", mode="frugal")["id"]
    content = f"{tag} explain it all"
    guarded.remote.enqueue(
        content,
        {"text": "The short version is that", "finish_reason": "length"},
        {"text": "The whole answer."},
    )
    tid = gclient.submit(sid, content)
    events = gclient.turn_events(tid)
    turn = gclient.wait_turn(tid)
    assert turn["status"] == "done", turn.get("error")
    models = [r.body["model"] for r in guarded.remote.requests_for(content)]
    assert models == ["gpt-4o-mini", "gpt-4o"]
    fast_system = [m["content"] for m in guarded.remote.requests_for(content)[0].body["messages"]]
    assert any("[[NEED_MORE_CONTEXT]]" in str(m) for m in fast_system)
    assert "step_restart" in [e.event for e in events]
    assert text_of(events) == "The whole answer." == turn["answer"]
    step = turn["steps"][0]
    assert step["model"] == "gpt-4o"
    assert step["route"]["escalation"]["why"] == "output_limit"
    assert step["route"]["escalation"]["from"] == "openai:gpt-4o-mini"


def test_frugal_marker_escalates_and_never_reaches_the_user(gclient: Api, guarded: Guarded) -> None:
    tag = uuid.uuid4().hex
    sid = gclient.create_session(provider="openai", model="gpt-4o", mode="frugal")["id"]
    content = f"{tag} a hard one"
    guarded.remote.enqueue(content, {"text": "[[NEED_MORE_CONTEXT]]"}, {"text": "Deep answer."})
    tid = gclient.submit(sid, content)
    events = gclient.turn_events(tid)
    turn = gclient.wait_turn(tid)
    assert turn["status"] == "done"
    assert not any("NEED_MORE" in t for t in text_events(events))
    assert turn["answer"] == "Deep answer."
    assert turn["steps"][0]["route"]["escalation"]["why"] == "marker"


def test_a_routed_turn_records_the_decision(gclient: Api, guarded: Guarded) -> None:
    tag = uuid.uuid4().hex
    sid = gclient.create_session(
        model="auto", route={"tier": "deep", "capabilities": ["reasoning"]}
    )["id"]
    turn = gclient.wait_turn(gclient.submit(sid, f"{tag} think hard"))
    assert turn["status"] == "done", turn.get("error")
    route = turn["steps"][0]["route"]
    assert route["tier"] == "deep" and route["reason"].startswith("the requested tier deep")
    assert any(r["why"] == "capabilities" for r in route["rejected"])
    bodies = received(guarded.remote, tag)
    assert [b["model"] for b in bodies] == [route["model"]]
    assert turn["steps"][0]["model"] == route["model"]


def test_a_tenant_in_local_only_mode_sends_nothing_to_a_remote_provider(
    guarded: Guarded,
) -> None:
    from cortex_workers.admin import create_key
    from cortex_workers.runtime import get_runtime
    from cortex_workers.store.db import transaction
    from cortex_workers.store.tenant_admin import set_overrides
    from cortex_workers.vocabulary import LlmMode

    name = f"local-tenant-{uuid.uuid4().hex[:8]}"
    with guarded.api.as_tenant(create_key(name)) as client:
        sid = client.create_session(provider="openai", model="gpt-4o")["id"]  # still normal
        with transaction(get_runtime().db) as db:
            assert set_overrides(db, name, {"mode": LlmMode.LOCAL_ONLY})
        refused = client.http.post("/v1/sessions", json={"provider": "openai"})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "local_only"
        tag = uuid.uuid4().hex
        turn = client.wait_turn(client.submit(sid, f"{tag} hello"))
        assert turn["status"] == "failed" and turn["error"]["code"] == "local_only"
        assert received(guarded.remote, tag) == []


def test_providers_show_locality_capabilities_and_measured_latency(
    gclient: Api, guarded: Guarded
) -> None:
    sid = gclient.create_session(provider="openai", model="gpt-4o")["id"]
    assert gclient.wait_turn(gclient.submit(sid, f"{uuid.uuid4().hex} hi"))["status"] == "done"

    def measured() -> dict[str, Any] | None:  # a worker writes its samples once a second
        shown = {p["name"]: p for p in gclient.http.get("/v1/providers").json()}
        return shown if any(m["model"] == "gpt-4o" for m in shown["openai"]["latency"]) else None

    providers = wait_until(measured, timeout=10, what="the call's latency sample")
    assert providers["openai"]["local"] is False and providers["ollama"]["local"] is True
    catalog = {m["name"]: m for m in providers["openai"]["catalog"]}
    assert catalog["gpt-4o"]["tier"] == "balanced" and "vision" in catalog["gpt-4o"]["capabilities"]
    latency = {m["model"]: m for m in providers["openai"]["latency"]}
    assert latency["gpt-4o"]["samples"] >= 1
    assert 0 < latency["gpt-4o"]["p50_ms"] <= latency["gpt-4o"]["p95_ms"]


def test_summaries_are_redacted_too_and_stored_restored(gclient: Api, guarded: Guarded) -> None:
    tag = uuid.uuid4().hex
    sid = gclient.create_session(provider="openai", model="gpt-4o")["id"]
    for i in range(6):  # past the test window of 8 messages: a summary folds the oldest
        turn = gclient.wait_turn(gclient.submit(sid, f"{tag} turn {i}: write to {i}{EMAIL}"))
        assert turn["status"] == "done"

    def summary() -> str:
        return str(gclient.http.get(f"/v1/sessions/{sid}").json()["summary"])

    wait_until(lambda: summary() != "", timeout=30, interval=0.2, what="a summary")
    bodies = received(guarded.remote, tag)
    assert any("Summarize" in json.dumps(b["messages"]) for b in bodies)
    assert all(EMAIL not in json.dumps(b) for b in bodies)
    assert EMAIL in summary() and "[EMAIL_" not in summary()

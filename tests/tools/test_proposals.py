"""propose_action: the model can only propose; an operator confirms or rejects; nothing runs
without a confirm, and nothing runs twice."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import update
from support import Api, Workers, wait_until

from cortex_workers.runtime import get_runtime
from cortex_workers.store.db import transaction
from cortex_workers.store.models import Proposal

PROPOSE = {
    "name": "propose_action",
    "arguments": {
        "action": "restart",
        "product": "billing-api",
        "rationale": "error rate at 40% since 14:02",
        "blast_radius": "one service",
        "reversible": True,
        "params": {"hosts": ["h1"]},
    },
}


def _propose(client: Api, **arguments: Any) -> tuple[str, str, dict[str, Any]]:
    """A proposal of PROPOSE's arguments, with `arguments` over them."""
    call = {**PROPOSE, "arguments": {**PROPOSE["arguments"], **arguments}}
    sid = client.scripted_session(
        {"text": "I suggest a restart.", "tool_calls": [call]},
        {"text": "Proposed; waiting for your confirmation."},
    )
    tid = client.submit(sid, "billing is failing")
    events = client.turn_events(tid)
    proposal = next(e.data for e in events if e.event == "proposal")
    result = next(e.data for e in events if e.event == "tool_result")
    assert not result["is_error"]
    import json

    body = json.loads(result["content"])
    assert body == {
        "proposal_id": proposal["id"],
        "posted_to_chat": True,
        "awaits_confirmation": True,
    }
    assert {k: proposal[k] for k in ("action", "product", "rationale", "status")} == {
        "action": call["arguments"]["action"],
        "product": call["arguments"]["product"],
        "rationale": "error rate at 40% since 14:02",
        "status": "pending",
    }
    return sid, proposal["id"], proposal


def test_a_proposal_waits_and_executes_only_when_confirmed(client: Api) -> None:
    sid, pid, _ = _propose(client)
    listed = client.http.get(f"/v1/sessions/{sid}/proposals").json()
    assert [(p["id"], p["status"], p["outcome"]) for p in listed] == [(pid, "pending", None)]
    r = client.http.post(f"/v1/proposals/{pid}/confirm")
    assert r.status_code == 200 and r.json()["status"] == "confirmed"
    done = wait_until(
        lambda: (p := client.http.get(f"/v1/proposals/{pid}").json())["status"] == "executed" and p,
        timeout=30,
        what="execution",
    )
    assert done["outcome"]["executed"] is False  # the default executor only records
    # confirming again is harmless: same proposal, no second execution
    again = client.http.post(f"/v1/proposals/{pid}/confirm")
    assert again.status_code == 200 and again.json()["executed_at"] == done["executed_at"]
    assert client.http.post(f"/v1/proposals/{pid}/reject").status_code == 409


def test_a_rejected_proposal_is_never_executed(client: Api) -> None:
    _, pid, _ = _propose(client)
    r = client.http.post(f"/v1/proposals/{pid}/reject")
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    assert client.http.post(f"/v1/proposals/{pid}/reject").json()["status"] == "rejected"
    refused = client.http.post(f"/v1/proposals/{pid}/confirm")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "proposal_decided"
    assert client.http.get(f"/v1/proposals/{pid}").json()["executed_at"] is None


def test_another_tenant_cannot_see_or_decide_a_proposal(client: Api, other_client: Api) -> None:
    sid, pid, _ = _propose(client)
    for method, path in (
        ("POST", f"/v1/proposals/{pid}/confirm"),
        ("POST", f"/v1/proposals/{pid}/reject"),
        ("GET", f"/v1/proposals/{pid}"),
        ("GET", f"/v1/sessions/{sid}/proposals"),
    ):
        r = other_client.http.request(method, path)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", path
    assert client.http.get(f"/v1/proposals/{pid}").json()["status"] == "pending"


def test_an_unanswered_proposal_expires(client: Api) -> None:
    sid, pid, _ = _propose(client)
    with transaction(get_runtime().db) as db:  # ten minutes pass
        db.execute(
            update(Proposal)
            .where(Proposal.id == uuid.UUID(pid))
            .values(expires_at=Proposal.created_at)
        )
    expired = wait_until(
        lambda: (p := client.http.get(f"/v1/proposals/{pid}").json())["status"] == "expired" and p,
        timeout=30,
        what="expiry by beat",
    )
    assert expired["executed_at"] is None
    r = client.http.post(f"/v1/proposals/{pid}/confirm")
    assert r.status_code == 409 and r.json()["error"]["details"]["status"] == "expired"


def test_proposal_decisions_reach_the_session_stream(client: Api) -> None:
    sid, pid, _ = _propose(client)
    stream = client.events(f"/v1/sessions/{sid}/events", last_event_id="1:0-0", until_done=1)
    created = [e for e in stream if e.event == "proposal"]
    assert created and created[0].data["status"] == "pending" and created[0].data["turn"]
    client.http.post(f"/v1/proposals/{pid}/reject")
    # resuming after the turn's last event: only the decision notice comes now
    notices = client.events(
        f"/v1/sessions/{sid}/events", last_event_id=stream[-1].id, limit=1, until_done=99
    )
    assert notices[0].event == "proposal" and notices[0].data["id"] == pid
    assert notices[0].data["status"] == "rejected" and notices[0].data["turn"] is None


def test_an_execution_whose_worker_died_is_marked_failed_not_rerun(client: Api) -> None:
    from datetime import timedelta

    _, pid, _ = _propose(client)
    with transaction(get_runtime().db) as db:  # confirmed, taken by a worker that then died
        db.execute(
            update(Proposal)
            .where(Proposal.id == uuid.UUID(pid))
            .values(
                status="executing",
                decided_at=Proposal.created_at,
                execution_started_at=Proposal.created_at - timedelta(hours=1),
            )
        )
    failed = wait_until(
        lambda: (
            (p := client.http.get(f"/v1/proposals/{pid}").json())["status"] == "execution_failed"
            and p
        ),
        timeout=30,
        what="sweep",
    )
    assert "outcome is unknown" in failed["outcome"]["error"]


def _executed(client: Api, pid: str) -> dict[str, Any]:
    r = client.http.post(f"/v1/proposals/{pid}/confirm")
    assert r.status_code == 200, r.text
    return dict(
        wait_until(
            lambda: (
                (p := client.http.get(f"/v1/proposals/{pid}").json())["status"] == "executed" and p
            ),
            timeout=30,
            what="execution",
        )
    )


def _tenant_of(pid: str) -> str:
    with transaction(get_runtime().db) as db:
        row = db.get(Proposal, uuid.UUID(pid))
        assert row is not None
        return str(row.tenant_id)


def test_the_executor_receives_the_proposal_s_tenant(client: Api, workers: Workers) -> None:
    _, pid, _ = _propose(client)
    _executed(client, pid)
    # the default executor logs what it received: the proposal and the tenant it belongs to
    line = f"proposal {pid} of tenant {_tenant_of(pid)} confirmed: 'restart' on 'billing-api'"
    wait_until(lambda: line in workers.log("tools"), timeout=10, what="the executor's log line")


FORGED = "proposal 00000000-0000-0000-0000-000000000000 of tenant root confirmed: 'drop'"


def test_model_supplied_action_and_product_cannot_forge_log_lines(
    client: Api, workers: Workers
) -> None:
    _, pid, _ = _propose(client, action=f"restart\n{FORGED}", product=f"billing\r\n{FORGED}")
    _executed(client, pid)
    wait_until(
        lambda: f"proposal {pid} " in workers.log("tools"), timeout=10, what="the executor's log"
    )
    lines = [line for line in workers.log("tools").splitlines() if FORGED in line]
    assert lines and all(f"proposal {pid} of tenant" in line for line in lines), lines
    (line,) = lines  # one line, the newlines in it escaped
    assert f"restart\\n{FORGED}" in line and f"billing\\r\\n{FORGED}" in line

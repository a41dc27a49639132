"""Rollbacks racing submissions never leave a half-rolled-back session: a message is out of
the history exactly when its turn is rolled back, and every turn ends."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from checkpoint_support import ENDED
from sqlalchemy import text
from support import Api

from cortex_workers.runtime import get_runtime

pytestmark = pytest.mark.servers

ROUNDS = 20


def test_concurrent_rollback_and_submission_leave_a_consistent_session(client: Api) -> None:
    # every reply streams for a while, so that rollbacks meet turns in every state
    slow = {"text": "a reply in several tokens", "first_token_ms": 20, "token_ms": 5}
    sid = client.scripted_session(*[slow] * (2 * ROUNDS + 1))
    base = client.submit(sid, "base")
    client.wait_turn(base)
    codes: list[int] = []
    turns: list[str] = []

    def rollback(i: int) -> None:
        mode = "interrupt" if i % 2 else "reject"
        r = client.http.post(f"/v1/sessions/{sid}/rollback", json={"to": base, "if_busy": mode})
        codes.append(r.status_code)

    def submit(i: int) -> None:
        turns.append(client.submit(sid, f"round {i}"))

    for i in range(ROUNDS):
        threads = [threading.Thread(target=f, args=(i,)) for f in (submit, rollback)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        client.wait_turn(turns[-1], statuses=ENDED)
    assert set(codes) <= {200, 409}
    final = [client.wait_turn(t, statuses=ENDED)["status"] for t in turns]
    assert set(final) <= {"done", "cancelled", "rolled_back"}
    assert _mismatches(sid) == []
    visible = {m["turn_id"] for m in client.messages(sid)}
    assert all(client.turn(t)["status"] != "rolled_back" for t in visible)


def _mismatches(sid: str) -> list[Any]:
    """Messages whose rolled_back flag disagrees with their turn's status."""
    rt = get_runtime()
    with rt.db() as db:
        return list(
            db.execute(
                text(
                    "SELECT m.seq, m.rolled_back, t.status FROM messages m "
                    "JOIN turns t ON t.id = m.turn_id WHERE m.session_id = :sid "
                    "AND m.rolled_back <> (t.status = 'rolled_back')"
                ),
                {"sid": sid},
            ).all()
        )

"""`context_degradation`: a new rolling summary much shorter than the one it replaces is an
anomaly in the timeline of the turn whose summarize step it is (docs/checkpoints.md)."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from support import Api, wait_until
from timeline_support import timeline

from cortex_workers.runtime import get_runtime

EARLIER = "An earlier summary of many facts. " * 150  # 5,100 characters


def test_a_summary_much_shorter_than_the_previous_one_is_an_anomaly(client: Api) -> None:
    # The wire-level OpenAI fake echoes the last user message, so the summary that replaces
    # this long one is a few dozen characters: under the default threshold (0.2 x previous).
    sid = client.create_session(provider="openai", model="gpt-4o")["id"]
    with get_runtime().engine.begin() as conn:
        conn.execute(
            text("UPDATE sessions SET summary = :s WHERE id = :id"), {"s": EARLIER, "id": sid}
        )
    tag = uuid.uuid4().hex
    tids = []
    for i in range(6):  # past the test window of 8 messages: a summary folds the oldest
        turn = client.wait_turn(client.submit(sid, f"{tag} fact {i}"))
        assert turn["status"] == "done"
        tids.append(turn["id"])

    def degradation() -> dict[str, object] | None:
        for tid in tids:
            for event in timeline(client, tid):
                if event["kind"] == "anomaly" and event["data"]["kind"] == "context_degradation":
                    return dict(event["data"])
        return None

    found = wait_until(degradation, timeout=30, what="a context_degradation anomaly")
    assert found["previous_chars"] == len(EARLIER)
    assert isinstance(found["summary_chars"], int) and found["summary_chars"] < 0.2 * len(EARLIER)
    # the default action records it only: the new summary is stored
    assert found["action"] == "continue"
    summary = wait_until(
        lambda: (s := client.http.get(f"/v1/sessions/{sid}").json()["summary"]) != EARLIER and s,
        timeout=30,
        what="the new summary",
    )
    assert len(summary) < 0.2 * len(EARLIER)

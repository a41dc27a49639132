"""Text Postgres cannot store never breaks a turn."""

from __future__ import annotations

from support import Api


def test_a_tool_result_with_nul_characters_is_stored_with_a_replacement(client: Api) -> None:
    from cortex_workers.runtime import get_runtime
    from cortex_workers.store import repo
    from cortex_workers.store.db import transaction

    sid = client.scripted_session({"text": "ok"})
    tid = client.submit(sid, "hi")
    client.wait_turn(tid)
    with transaction(get_runtime().db) as db:
        seq = repo.insert_message(
            db,
            session_id=sid,
            role="tool",
            content="a\x00b",
            tool_calls=[{"id": "x\x00", "name": "n", "arguments": {}}],
        )
    stored = [m for m in client.messages(sid) if m["seq"] == seq][0]
    assert stored["content"] == "a\ufffdb"
    assert stored["tool_calls"][0]["id"] == "x\ufffd"

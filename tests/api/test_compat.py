"""The reference-compatible endpoints: `POST /input` answers 202 at once, and
`GET /output/stream` sends each answer as plain `data:` chunks ending with `data: [DONE]`, or
`data: ERROR: …` then `data: [DONE]` when the turn fails."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
from support import Api, stored_text

MULTILINE = "First line of the answer,\nand a second one\n\nafter a blank line."


def _data_events(lines: Iterator[str]) -> Iterator[str]:
    """Each event's data as an SSE client joins it (several `data:` lines → `\\n`)."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield "\n".join(data)
            data = []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            assert field == "data", f"only data: lines, got {line!r}"
            data.append(value[1:] if value.startswith(" ") else value)


def _until_done(lines: Iterator[str]) -> list[str]:
    out = []
    for chunk in _data_events(lines):
        out.append(chunk)
        if chunk == "[DONE]":
            return out
    raise AssertionError(f"the stream ended without [DONE]: {out}")


def _post_input(client: Api, content: str, conversation_id: str | None = None) -> dict[str, str]:
    body = {"content": content} | ({"conversation_id": conversation_id} if conversation_id else {})
    r = client.http.post("/input", json=body)
    assert r.status_code == 202, r.text
    accepted = r.json()
    assert set(accepted) == {"status", "conversation_id", "turn_id"}
    assert accepted["status"] == "processing"
    return dict(accepted)


def test_a_streaming_client_receives_the_chunks_of_the_answer_and_done(client: Api) -> None:
    sid = client.scripted_session({"text": MULTILINE, "token_ms": 5})
    with client.http.stream("GET", "/output/stream", params={"conversation_id": sid}) as r:
        # the stream is open (its starting point fixed) before the input is posted
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        accepted = _post_input(client, "tell me", sid)
        assert accepted["conversation_id"] == sid
        chunks = _until_done(r.iter_lines())
    assert chunks[-1] == "[DONE]" and len(chunks) > 3, chunks
    assert "".join(chunks[:-1]) == MULTILINE
    assert "".join(chunks[:-1]) == stored_text(client.messages(sid), accepted["turn_id"])


def test_a_new_conversation_is_a_new_session_and_its_answer_streams(client: Api) -> None:
    accepted = _post_input(client, "hello there")
    sid, tid = accepted["conversation_id"], accepted["turn_id"]
    assert client.http.get(f"/v1/sessions/{sid}").status_code == 200
    params = {"conversation_id": sid, "turn_id": tid}  # from that answer on, even if it is done
    with client.http.stream("GET", "/output/stream", params=params) as r:
        chunks = _until_done(r.iter_lines())
    client.wait_turn(tid)
    assert "".join(chunks[:-1]) == stored_text(client.messages(sid), tid) != ""
    second = _post_input(client, "and again", sid)
    assert second["conversation_id"] == sid and second["turn_id"] != tid


def test_a_failing_provider_sends_error_then_done(client: Api) -> None:
    sid = client.scripted_session({"error": {"status": 400, "message": "the model refused"}})
    accepted = _post_input(client, "fail please", sid)
    params = {"conversation_id": sid, "turn_id": accepted["turn_id"]}
    with client.http.stream("GET", "/output/stream", params=params) as r:
        chunks = _until_done(r.iter_lines())
    assert chunks[-1] == "[DONE]"
    errors = [c for c in chunks if c.startswith("ERROR: ")]
    assert len(errors) == 1 and chunks[-2] == errors[0], chunks
    assert "refused" in errors[0]
    assert client.turn(accepted["turn_id"])["status"] == "failed"


def test_errors_keep_the_error_shape(client: Api, other_client: Api) -> None:
    sid = client.scripted_session({"text": "x"})
    for r in [
        other_client.http.post("/input", json={"content": "x", "conversation_id": sid}),
        other_client.http.get("/output/stream", params={"conversation_id": sid}),
        httpx.post(f"{client.base_url}/input", json={"content": "x"}),
        client.http.post("/input", json={"content": ""}),
        client.http.get("/output/stream"),
    ]:
        assert r.status_code in (401, 404, 422), r.text
        assert set(r.json()["error"]) == {"code", "message", "details"}


def test_a_restarted_step_sends_only_text_the_client_does_not_have() -> None:
    from cortex_workers.api.plain_stream import PlainAnswers

    answers = PlainAnswers()
    sent: list[str] = []
    for event, data in [
        ("token", {"text": "Hello ", "step": 1}),
        ("token", {"text": "wor", "step": 1}),
        ("step_restart", {"step": 1, "attempt": 2}),
        ("token", {"text": "Hello ", "step": 1}),
        ("token", {"text": "world", "step": 1}),
        ("message", {"content": "Hello world", "step": 1}),
        ("tool_call", {"id": "c1", "name": "calculate", "step": 1}),
        ("token", {"text": " again", "step": 2}),
        ("done", {"status": "done"}),
    ]:
        sent += answers.chunks(event, data)
    assert sent == ["Hello ", "wor", "ld", " again", "[DONE]"]

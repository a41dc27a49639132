"""`ask` and `stream` against the real stack: the text equals the stored answer, across a
dropped connection and a `step_restart`."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from fakes.tcp_proxy import TcpProxy
from support import Fakes, stored_text

from cortex_workers.client import (
    AsyncClient,
    Client,
    DoneEvent,
    StepRestartEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnFailed,
)

SLOW_TEXT = " ".join(f"word{i}" for i in range(40)) + "."
TOOL_TURN = (
    {
        "text": "Checking both. ",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "2+2"}},
            {"name": "current_time", "arguments": {}},
        ],
    },
    {"text": "It is 4."},
)


def _stored(cw: Client, session_id: str, turn_id: str) -> str:
    page = cw.sessions.messages(session_id, limit=500)
    return stored_text([m.model_dump() for m in page.messages], turn_id)


def test_ask_returns_the_stored_answer_with_usage_and_cost(cw: Client) -> None:
    session = cw.sessions.create(metadata={"script": list(TOOL_TURN)})
    answer = cw.ask(session.id, "what is 2+2?")
    assert answer.text == "Checking both. It is 4."
    assert answer.text == _stored(cw, session.id, answer.turn.id)
    assert answer.turn.status == "done" and answer.turn.answer is not None
    assert answer.usage.output_tokens > 0
    assert answer.usage.input_tokens == answer.turn.usage.input_tokens
    assert answer.usage.output_tokens == answer.turn.usage.output_tokens
    assert answer.cost == answer.turn.cost_usd


def test_stream_yields_typed_tool_events_in_order(cw: Client) -> None:
    session = cw.sessions.create(metadata={"script": list(TOOL_TURN)})
    stream = cw.stream(session.id, "what is 2+2?")
    events = list(stream)
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [c.name for c in calls] == ["calculate", "current_time"]
    assert calls[0].arguments == {"expression": "2+2"}
    assert {r.call_id for r in results} == {c.call_id for c in calls}
    assert next(r for r in results if r.name == "calculate").content == '{"result": 4}'
    assert isinstance(events[-1], DoneEvent) and events[-1].status == "done"
    assert stream.text == _stored(cw, session.id, stream.turn_id) == "Checking both. It is 4."


def test_a_stream_cut_mid_way_resumes_without_lost_or_repeated_text(
    cw_proxied: Client, proxy: TcpProxy
) -> None:
    session = cw_proxied.sessions.create(metadata={"script": [{"text": SLOW_TEXT, "token_ms": 20}]})
    stream = cw_proxied.stream(session.id, "count")
    tokens: list[TokenEvent] = []
    cuts = 0
    for event in stream:
        if isinstance(event, TokenEvent):
            tokens.append(event)
            if len(tokens) in (3, 15):
                cuts += proxy.cut_all() > 0
    assert cuts == 2
    assert proxy.connections >= 3  # the stream was resumed on new connections
    assert len({t.id for t in tokens}) == len(tokens)  # no event twice
    assert "".join(t.text for t in tokens) == SLOW_TEXT  # none missing
    assert stream.text == SLOW_TEXT == _stored(cw_proxied, session.id, stream.turn_id)


def test_async_ask_survives_a_cut_connection(cw: Client, proxy: TcpProxy, tenant_key: str) -> None:
    session = cw.sessions.create(metadata={"script": [{"text": SLOW_TEXT, "token_ms": 20}]})

    async def ask() -> str:
        async with AsyncClient(proxy.base_url, tenant_key, timeout=30) as acw:
            stream = await acw.stream(session.id, "count")
            seen = 0
            async for event in stream:
                seen += isinstance(event, TokenEvent)
                if seen == 5:
                    proxy.cut_all()
            answer = stream.answer(await acw.turns.get(stream.turn_id))
            assert answer.turn.answer == SLOW_TEXT
            return answer.text

    assert asyncio.run(ask()) == SLOW_TEXT
    assert proxy.connections >= 2


def test_a_step_restart_withdraws_the_partial_text(cw: Client, fakes: Fakes) -> None:
    content = f"fails halfway {uuid.uuid4()}"
    fakes.openai.enqueue(
        content,
        {"text": "this partial text is withdrawn later on", "error_mid_stream": True},
        {"text": "the final answer"},
    )
    session = cw.sessions.create(provider="openai", model="gpt-4o-mini")
    stream = cw.stream(session.id, content)
    events = list(stream)
    restart = next(i for i, e in enumerate(events) if isinstance(e, StepRestartEvent))
    assert any(isinstance(e, TokenEvent) for e in events[:restart])  # text came, then went
    assert stream.text == "the final answer" == _stored(cw, session.id, stream.turn_id)
    assert stream.answer(cw.turns.get(stream.turn_id)).text == "the final answer"


def test_ask_raises_turn_failed_with_the_error_events_code(cw: Client) -> None:
    session = cw.sessions.create(
        metadata={"script": [{"text": "never", "error": {"status": 400, "message": "bad"}}]}
    )
    with pytest.raises(TurnFailed) as failed:
        cw.ask(session.id, "fail please")
    turn = cw.turns.get(failed.value.turn_id)
    assert turn.status == "failed" and turn.error is not None
    assert failed.value.code == turn.error["code"] and failed.value.code


def test_events_resume_after_a_given_last_event_id(cw: Client) -> None:
    session = cw.sessions.create(metadata={"script": list(TOOL_TURN)})
    accepted = cw.turns.create(session.id, "what is 2+2?")
    everything = list(cw.turns.events(accepted.id))
    for cut in (0, 2, len(everything) - 2):
        rest = cw.turns.events(accepted.id, last_event_id=everything[cut].id)
        assert [e.id for e in rest] == [e.id for e in everything[cut + 1 :]]
        assert rest.done is not None and rest.last_event_id == everything[-1].id

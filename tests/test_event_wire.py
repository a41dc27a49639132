"""The turn stream's events on the wire: each typed event encodes to exactly the event name and
JSON data clients read (docs/events.md), and a provider's stream folds into one Completion."""

from __future__ import annotations

import pytest

from cortex_workers.messages import (
    AgentDone,
    AgentStarted,
    AssistantMessage,
    CompletionBuilder,
    FinishEvent,
    ProposalChanged,
    StepRestart,
    StreamOpened,
    TaskChanged,
    TextDelta,
    Token,
    ToolCall,
    ToolCallEvent,
    ToolCallRequested,
    ToolProgress,
    ToolResultReady,
    TurnDone,
    TurnError,
    TurnEvent,
    Usage,
    UsageEvent,
    WarningEvent,
    encode,
)
from cortex_workers.providers.base import collect
from cortex_workers.vocabulary import (
    AgentMode,
    ProposalStatus,
    TaskStatus,
    ToolSeverity,
    TurnStatus,
)

WIRE: list[tuple[TurnEvent, str, str]] = [
    (StreamOpened(), "open", "{}"),
    (Token(text="héllo ", step=1), "token", '{"text": "héllo ", "step": 1}'),
    (
        ToolCallRequested.of(ToolCall("call_0_0", "calculate", {"expression": "2+2"}), step=1),
        "tool_call",
        '{"id": "call_0_0", "name": "calculate", "arguments": {"expression": "2+2"}, "step": 1}',
    ),
    (
        ToolResultReady(
            id="call_0_0",
            name="calculate",
            is_error=False,
            content='{"result": 4}',
            truncated=False,
            severity=ToolSeverity.OK,
            error=None,
        ),
        "tool_result",
        '{"id": "call_0_0", "name": "calculate", "is_error": false, "content": "{\\"result\\": 4}",'
        ' "truncated": false, "severity": "ok", "error": null}',
    ),
    (
        ToolProgress(id="c", name="slow_tool", elapsed_s=1.0, message="taking long"),
        "tool_progress",
        '{"id": "c", "name": "slow_tool", "elapsed_s": 1.0, "message": "taking long"}',
    ),
    (
        ProposalChanged(
            id="p1",
            action="restart",
            product="api",
            rationale="errors",
            status=ProposalStatus.PENDING,
            params={},
            blast_radius=None,
            reversible=None,
            expires_at="2026-11-24T23:00:00+00:00",
        ),
        "proposal",
        '{"id": "p1", "action": "restart", "product": "api", "rationale": "errors",'
        ' "status": "pending", "params": {}, "blast_radius": null, "reversible": null,'
        ' "expires_at": "2026-11-24T23:00:00+00:00"}',
    ),
    (
        AgentStarted(
            id="call_0_0",
            name="research_agent",
            agent="research",
            task_id="t1",
            mode=AgentMode.BACKGROUND,
        ),
        "agent_started",
        '{"id": "call_0_0", "name": "research_agent", "agent": "research", "task_id": "t1",'
        ' "mode": "background"}',
    ),
    (
        AgentDone(
            id="call_0_0",
            name="math_agent",
            agent="math",
            task_id="t2",
            status=TaskStatus.COMPLETED,
        ),
        "agent_done",
        '{"id": "call_0_0", "name": "math_agent", "agent": "math", "task_id": "t2",'
        ' "status": "completed"}',
    ),
    (
        TaskChanged(
            id="t1",
            agent="research",
            status=TaskStatus.WORKING,
            progress={"fraction": 0.4, "note": "reading source 3"},
            error=None,
            follow_up_turn_id=None,
        ),
        "task",
        '{"id": "t1", "agent": "research", "status": "working",'
        ' "progress": {"fraction": 0.4, "note": "reading source 3"}, "error": null,'
        ' "follow_up_turn_id": null}',
    ),
    (StepRestart(step=5, attempt=2), "step_restart", '{"step": 5, "attempt": 2}'),
    (
        AssistantMessage(content="It is 4.", step=3),
        "message",
        '{"role": "assistant", "content": "It is 4.", "step": 3}',
    ),
    (
        TurnError(code="depth_exceeded", message="stopped after 4 model steps"),
        "error",
        '{"code": "depth_exceeded", "message": "stopped after 4 model steps"}',
    ),
    (
        TurnDone(status=TurnStatus.DONE, usage=Usage(312, 36), cost_usd=0.0),
        "done",
        '{"status": "done", "usage": {"input_tokens": 312, "output_tokens": 36}, "cost_usd": 0.0}',
    ),
]


@pytest.mark.parametrize(("event", "name", "data"), WIRE, ids=[w[1] for w in WIRE])
def test_each_event_encodes_to_its_name_and_the_contract_json(
    event: TurnEvent, name: str, data: str
) -> None:
    assert encode(event) == (name, data)


def test_a_streamed_step_and_the_non_streaming_call_fold_the_same_completion() -> None:
    events = [
        WarningEvent("prompt_tools", "tools offered through the prompt"),
        TextDelta("Checking "),
        TextDelta("both."),
        ToolCallEvent(ToolCall("c1", "calculate", {"expression": "1"})),
        UsageEvent(10, 1),
        UsageEvent(12, 3, cache_read_tokens=5, cache_write_tokens=2),  # the last one wins
        FinishEvent("tool_calls"),
    ]
    builder = CompletionBuilder()
    for event in events:
        builder.add(event)
    folded = builder.completion
    assert collect(iter(events)) == folded
    assert folded.text == "Checking both." and folded.finish_reason == "tool_calls"
    assert [c.id for c in folded.tool_calls] == ["c1"]
    assert (folded.input_tokens, folded.output_tokens) == (12, 3)
    assert (folded.cache_read_tokens, folded.cache_write_tokens) == (5, 2)
    assert [w.code for w in folded.warnings] == ["prompt_tools"]

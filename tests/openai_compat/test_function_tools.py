"""Client `function` tools through the official `openai` SDK: a response that calls one
completes with its `function_call` item, and the client continues with the call's output,
by `previous_response_id` or by resending the whole input (as the Agents SDK does)."""

from __future__ import annotations

import json

import openai
import pytest
from openai_support import MODEL, script

pytestmark = pytest.mark.servers  # on both CI passes: the API is checked on either server set

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
CALL = {"text": "", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}


def test_a_function_call_completes_the_response_and_its_output_continues_it(
    oai: openai.OpenAI,
) -> None:
    first = oai.responses.create(
        model=MODEL,
        input="What is the weather in Paris?",
        tools=[WEATHER],  # type: ignore[list-item]
        metadata=script(CALL, {"text": "It is sunny.", "echo_request": True}),
    )
    assert first.status == "completed"
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1
    call = calls[0]
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert first.tools[0].type == "function" and first.tools[0].name == "get_weather"

    second = oai.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21C"}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert second.status == "completed"
    assert second.output_text.startswith("It is sunny. ")
    asked = json.loads(second.output_text.removeprefix("It is sunny. "))
    assert asked["tools"] == ["get_weather"]  # offered again on the continuation
    items = oai.responses.input_items.list(second.id, order="asc").data
    assert [i.type for i in items] == ["function_call_output"]


def test_a_tool_output_reaches_the_model_as_the_calls_result(oai: openai.OpenAI) -> None:
    first = oai.responses.create(
        model=MODEL,
        input="Weather?",
        tools=[WEATHER],  # type: ignore[list-item]
        metadata=script(CALL, {"text": "", "echo_request": True}),
    )
    call = next(item for item in first.output if item.type == "function_call")
    second = oai.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "rain"}],
    )
    asked = json.loads(second.output_text)
    assert asked["roles"][-3:] == ["user", "assistant", "tool"]  # no empty user message
    assert "rain" in asked["last"]
    assert asked["tools"] == []  # this response offered none


def test_a_client_resending_the_whole_input_continues_the_script(oai: openai.OpenAI) -> None:
    meta = script(CALL, "Sunny in Paris.")
    first = oai.responses.create(
        model=MODEL,
        input="Weather in Paris?",
        tools=[WEATHER],
        metadata=meta,  # type: ignore[list-item]
    )
    call = next(item for item in first.output if item.type == "function_call")
    second = oai.responses.create(
        model=MODEL,
        input=[
            {"role": "user", "content": "Weather in Paris?"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ],
        tools=[WEATHER],  # type: ignore[list-item]
        metadata=meta,
    )
    assert second.status == "completed"
    assert second.output_text == "Sunny in Paris."


def test_a_streamed_function_call_is_one_output_item_with_its_arguments(
    oai: openai.OpenAI,
) -> None:
    stream = oai.responses.create(
        model=MODEL,
        input="Weather?",
        tools=[WEATHER],  # type: ignore[list-item]
        metadata=script(CALL),
        stream=True,
    )
    events = list(stream)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[-1] == "response.completed"
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.item.type for e in added] == ["function_call"]
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert json.loads(done.arguments) == {"city": "Paris"}
    assert types.count("response.function_call_arguments.delta") == 1
    final = events[-1].response
    assert [i.type for i in final.output] == ["function_call"]
    assert final.output[0].id == added[0].item.id


def test_an_output_for_an_unknown_call_is_refused_naming_it(oai: openai.OpenAI) -> None:
    first = oai.responses.create(model=MODEL, input="Hi", metadata=script("Hello."))
    with pytest.raises(openai.BadRequestError) as err:
        oai.responses.create(
            model=MODEL,
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": "call_nope", "output": "x"}],
        )
    assert err.value.body["param"] == "input[0].call_id"  # type: ignore[index]
    assert "call_nope" in err.value.body["message"]  # type: ignore[index]


def test_a_hosted_tool_type_is_refused_by_name(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        oai.responses.create(model=MODEL, input="Hi", tools=[{"type": "web_search"}])  # type: ignore[list-item]
    assert err.value.body["param"] == "tools[0].type"  # type: ignore[index]
    assert err.value.body["code"] == "unsupported_parameter"  # type: ignore[index]


def test_the_operators_tools_run_server_side_as_mcp_call_items(oai: openai.OpenAI) -> None:
    tools = [{"type": "cortex_tools", "names": ["calculate"]}, WEATHER]
    calculate = {"tool_calls": [{"name": "calculate", "arguments": {"expression": "6*7"}}]}
    response = oai.responses.create(
        model=MODEL,
        input="Six times seven?",
        tools=tools,  # type: ignore[arg-type]
        metadata=script(calculate, {"text": "", "echo_request": True}),
    )
    assert response.status == "completed"
    kinds = [item.type for item in response.output]
    assert kinds == ["mcp_call", "message"]
    call = response.output[0]
    assert call.type == "mcp_call"
    assert call.server_label == "cortex" and call.name == "calculate"
    assert call.output is not None and "42" in call.output
    asked = json.loads(response.output_text)
    assert sorted(asked["tools"]) == ["calculate", "get_weather"]
    assert asked["roles"][-2:] == ["assistant", "tool"]

    events = list(
        oai.responses.create(
            model=MODEL,
            input="Again?",
            tools=tools,  # type: ignore[arg-type]
            metadata=script(calculate, "Forty-two."),
            stream=True,
        )
    )
    done = [e for e in events if e.type == "response.output_item.done"]
    assert [e.item.type for e in done] == ["mcp_call", "message"]
    assert "42" in (done[0].item.output or "")  # type: ignore[union-attr]
    assert events[-1].response.output_text == "Forty-two."


def test_an_unknown_operator_tool_is_refused_naming_it(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        oai.responses.create(
            model=MODEL,
            input="Hi",
            tools=[{"type": "cortex_tools", "names": ["no_such_tool"]}],  # type: ignore[list-item]
        )
    assert err.value.body["param"] == "tools"  # type: ignore[index]
    assert "no_such_tool" in err.value.body["message"]  # type: ignore[index]


def test_an_mcp_call_item_sent_back_joins_the_history(oai: openai.OpenAI) -> None:
    tools = [{"type": "cortex_tools", "names": ["calculate"]}]
    calculate = {"tool_calls": [{"name": "calculate", "arguments": {"expression": "6*7"}}]}
    first = oai.responses.create(
        model=MODEL,
        input="Six times seven?",
        tools=tools,
        metadata=script(calculate, "42."),  # type: ignore[arg-type]
    )
    resent = [{"role": "user", "content": "Six times seven?"}]
    resent += [item.model_dump(exclude_none=True) for item in first.output]
    resent += [{"role": "user", "content": "And doubled?"}]
    second = oai.responses.create(
        model=MODEL,
        input=resent,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
        metadata=script(calculate, "42.", {"text": "", "echo_request": True}),
    )
    asked = json.loads(second.output_text)
    assert asked["roles"][-5:] == ["user", "assistant", "tool", "assistant", "user"]

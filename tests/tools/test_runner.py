"""run_tool turns every tool problem into an error result the model can act on."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from cortex_workers.messages import ToolSpec
from cortex_workers.tools import (
    Tool,
    ToolOutcome,
    ToolRegistry,
    default_registry,
    run_tool,
    tool,
)

ECHO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "times": {"type": "integer", "minimum": 1}},
    "required": ["text"],
    "additionalProperties": False,
}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def _run(registry: ToolRegistry, name: str, arguments: Any, **kw: Any) -> ToolOutcome:
    options: dict[str, Any] = {"allowed": None, "timeout_s": 5.0, "output_cap": 65536}
    options.update(kw)
    return run_tool(registry, name, arguments, **options)


@pytest.fixture
def registry() -> ToolRegistry:
    reg = ToolRegistry()

    @tool("echo", description="Repeat text.", parameters=ECHO_SCHEMA, registry=reg)
    def echo(text: str, times: int = 1) -> dict[str, str]:
        return {"echo": text * times}

    @tool("boom", description="Always fails.", parameters=EMPTY_SCHEMA, registry=reg)
    def boom() -> None:
        raise RuntimeError("disk on fire")

    return reg


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # let abandoned tool threads finish


def test_a_valid_call_returns_the_json_result(registry: ToolRegistry) -> None:
    outcome = _run(registry, "echo", {"text": "ab", "times": 2})
    assert outcome.is_error is False
    assert outcome.truncated is False
    assert outcome.content == '{"echo": "abab"}'
    assert outcome.latency_ms >= 0


def test_a_string_result_is_used_as_is_and_non_ascii_is_kept() -> None:
    reg = ToolRegistry()
    reg.register(Tool("greet", "Greets.", EMPTY_SCHEMA, lambda: "héllo ✓"))
    reg.register(Tool("greet_json", "Greets.", EMPTY_SCHEMA, lambda: ["héllo"]))
    assert _run(reg, "greet", {}).content == "héllo ✓"
    assert _run(reg, "greet_json", {}).content == '["héllo"]'


def test_unknown_tool_becomes_an_error_listing_available_tools(registry: ToolRegistry) -> None:
    outcome = _run(registry, "nope", {})
    assert outcome.is_error is True
    assert "'nope'" in outcome.content
    assert "available tools: boom, echo" in outcome.content


def test_tool_not_in_allowed_is_refused_and_only_allowed_tools_are_listed(
    registry: ToolRegistry,
) -> None:
    outcome = _run(registry, "boom", {}, allowed=["echo"])
    assert outcome.is_error is True
    assert outcome.content == "unknown tool 'boom'; available tools: echo"


def test_non_object_arguments_become_an_error_result(registry: ToolRegistry) -> None:
    outcome = _run(registry, "echo", ["ab"])
    assert outcome.is_error is True
    assert outcome.content.startswith("invalid arguments for echo: expected a JSON object")


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "'text' is a required property at $"),
        ({"text": 3}, "3 is not of type 'string' at $.text"),
        ({"text": "a", "times": 0}, "0 is less than the minimum of 1 at $.times"),
        ({"text": "a", "extra": 1}, "Additional properties are not allowed"),
    ],
)
def test_invalid_arguments_become_an_error_result_naming_the_problem(
    registry: ToolRegistry, arguments: dict[str, Any], problem: str
) -> None:
    outcome = _run(registry, "echo", arguments)
    assert outcome.is_error is True
    assert outcome.content.startswith("invalid arguments for echo: ")
    assert problem in outcome.content


def test_a_raising_tool_becomes_an_error_with_type_and_message(registry: ToolRegistry) -> None:
    outcome = _run(registry, "boom", {})
    assert outcome.is_error is True
    assert outcome.content == "boom failed: RuntimeError: disk on fire"
    assert "Traceback" not in outcome.content


def test_a_hung_tool_is_abandoned_with_a_timeout_error(release: threading.Event) -> None:
    reg = ToolRegistry()
    reg.register(Tool("slow", "Sleeps 2 s.", EMPTY_SCHEMA, lambda: release.wait(2.0)))
    outcome = _run(reg, "slow", {}, timeout_s=0.2)
    assert outcome.is_error is True
    assert outcome.content == "slow timed out after 0.2s"


def test_the_tools_own_timeout_overrides_the_callers_default(release: threading.Event) -> None:
    reg = ToolRegistry()
    reg.register(Tool("slow", "Sleeps.", EMPTY_SCHEMA, lambda: release.wait(2.0), timeout_s=0.1))
    outcome = _run(reg, "slow", {}, timeout_s=30.0)
    assert outcome.content == "slow timed out after 0.1s"


def test_output_over_the_cap_is_truncated_to_the_cap() -> None:
    reg = ToolRegistry()
    reg.register(Tool("big", "Big.", EMPTY_SCHEMA, lambda: "x" * (200 * 1024)))
    outcome = _run(reg, "big", {}, output_cap=65536)
    assert outcome.is_error is False
    assert outcome.truncated is True
    assert len(outcome.content.encode("utf-8")) <= 65536
    assert outcome.content == "x" * 65536


@pytest.mark.parametrize("cap", [0, 1, 2, 3, 4, 5, 6, 7, 10])
def test_truncation_cuts_on_a_character_boundary_and_stays_valid_utf8(cap: int) -> None:
    text = "a€😀é€😀"  # 1, 3, 4, 2, 3, 4 bytes
    reg = ToolRegistry()
    reg.register(Tool("multi", "Multibyte.", EMPTY_SCHEMA, lambda: text))
    outcome = _run(reg, "multi", {}, output_cap=cap)
    encoded = outcome.content.encode("utf-8")
    assert outcome.truncated is True
    assert len(encoded) <= cap
    assert text.startswith(outcome.content)
    assert len(encoded) > cap - 4  # nothing dropped beyond the partial character


def test_output_exactly_at_the_cap_is_not_truncated() -> None:
    reg = ToolRegistry()
    reg.register(Tool("euro", "Euro.", EMPTY_SCHEMA, lambda: "€€"))
    outcome = _run(reg, "euro", {}, output_cap=6)
    assert (outcome.content, outcome.truncated) == ("€€", False)


def test_unserializable_results_fall_back_to_str_via_json_default() -> None:
    reg = ToolRegistry()
    reg.register(Tool("when", "Time.", EMPTY_SCHEMA, lambda: {"delta": timedelta(seconds=1)}))
    assert _run(reg, "when", {}).content == '{"delta": "0:00:01"}'


def test_current_time_returns_an_iso_8601_utc_timestamp() -> None:
    outcome = _run(default_registry(), "current_time", {})
    assert outcome.is_error is False
    parsed = datetime.fromisoformat(outcome.content)
    assert parsed.utcoffset() == timedelta(0)
    assert outcome.content.endswith("+00:00")


def test_current_time_rejects_arguments() -> None:
    outcome = _run(default_registry(), "current_time", {"tz": "Europe/Paris"})
    assert outcome.is_error is True
    assert outcome.content.startswith("invalid arguments for current_time: ")


def test_calculate_returns_the_result_as_json() -> None:
    outcome = _run(default_registry(), "calculate", {"expression": "2 * (3 + 4)"})
    assert (outcome.content, outcome.is_error) == ('{"result": 14}', False)


def test_calculate_errors_become_error_results_the_model_can_read() -> None:
    outcome = _run(default_registry(), "calculate", {"expression": "1 / 0"})
    assert outcome.is_error is True
    assert outcome.content == "calculate failed: ValueError: division by zero"


def test_default_registry_is_a_singleton_holding_the_builtins() -> None:
    assert default_registry() is default_registry()
    assert {"calculate", "current_time"} <= set(default_registry().names())


def test_registry_rejects_duplicate_names_and_invalid_schemas() -> None:
    reg = ToolRegistry()
    reg.register(Tool("one", "One.", EMPTY_SCHEMA, lambda: 1))
    with pytest.raises(ValueError, match="already registered"):
        reg.register(Tool("one", "Again.", EMPTY_SCHEMA, lambda: 1))
    bad_schema = {"type": "object", "properties": {"a": {"type": "nonsense"}}}
    with pytest.raises(ValueError, match="'bad'"):
        reg.register(Tool("bad", "Bad.", bad_schema, lambda: 1))
    assert "one" in reg and "bad" not in reg


def test_specs_follow_the_requested_order_and_default_to_all() -> None:
    reg = ToolRegistry()
    reg.register(Tool("b", "B.", EMPTY_SCHEMA, lambda: 1))
    reg.register(Tool("a", "A.", EMPTY_SCHEMA, lambda: 1))
    assert [s.name for s in reg.specs(["b", "a"])] == ["b", "a"]
    assert [s.name for s in reg.specs(None)] == ["a", "b"]
    assert reg.specs(["a"]) == [ToolSpec(name="a", description="A.", parameters=EMPTY_SCHEMA)]

"""The tool router on its own: pagination, cursors, caps, deadlines, classification."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from cortex_workers.tools import Limits, Tool, ToolContext, ToolRegistry, run_call
from cortex_workers.tools.builtin import register_builtins
from cortex_workers.tools.results import Page, UpstreamError

KEY = b"k" * 32
OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
RELEASE = threading.Event()


def _paged(ctx: ToolContext) -> Page:
    offset = int((ctx.cursor or {}).get("offset", 0))
    return Page(
        {"items": list(range(offset, min(offset + 10, 30)))},
        next={"offset": offset + 10} if offset + 10 < 30 else None,
    )


def _blocked() -> str:
    RELEASE.wait(5)
    return "late"


@pytest.fixture
def registry() -> ToolRegistry:
    r = ToolRegistry()
    register_builtins(r)
    r.register(Tool("pages", "paged", OBJECT, _paged, paginated=True, takes_context=True))
    r.register(Tool("other_pages", "paged", OBJECT, _paged, paginated=True, takes_context=True))
    r.register(Tool("blocked", "waits", OBJECT, _blocked, timeout_s=0.3))
    r.register(Tool("upstream", "fails", OBJECT, lambda: (_ for _ in ()).throw(UpstreamError(502))))
    r.register(Tool("text", "big text", OBJECT, lambda: "é" * 100_000))
    return r


def call(registry: ToolRegistry, name: str, session: str = "s1", **arguments: Any) -> Any:
    return run_call(
        registry,
        name,
        arguments,
        allowed=None,
        cursor_key=KEY,
        limits=Limits(default_timeout_s=2, progress_after_s=0.1, output_cap=65536),
        ctx=ToolContext(session_id=session, session_name="n", turn_id="t", call_id="c"),
    )


def test_three_pages_follow_one_another_through_signed_cursors(registry: ToolRegistry) -> None:
    seen, cursor = [], None
    for _ in range(3):
        outcome = call(registry, "pages", **({"cursor": cursor} if cursor else {}))
        assert not outcome.is_error
        body = json.loads(outcome.content)
        seen += body["items"]
        cursor = body.get("next_cursor")
    assert seen == list(range(30)) and cursor is None


@pytest.mark.parametrize("tamper", ["flip", "other_session", "other_tool", "garbage"])
def test_a_tampered_or_foreign_cursor_is_a_validation_error(
    registry: ToolRegistry, tamper: str
) -> None:
    cursor = json.loads(call(registry, "pages").content)["next_cursor"]
    body, mac = cursor.split(".")
    name, session = "pages", "s1"
    if tamper == "flip":
        cursor = ("A" if body[0] != "A" else "B") + body[1:] + "." + mac
    elif tamper == "other_session":
        session = "s2"
    elif tamper == "other_tool":
        name = "other_pages"
    else:
        cursor = "not-a-cursor"
    outcome = call(registry, name, session, cursor=cursor)
    assert outcome.is_error and outcome.error == "validation"
    assert outcome.content.startswith("validation: invalid cursor")


def test_the_offered_schema_of_a_paginated_tool_takes_a_cursor(registry: ToolRegistry) -> None:
    spec = registry.specs(["pages"])[0]
    assert spec.parameters["properties"]["cursor"]["type"] == "string"
    tool = registry.get("pages")
    assert tool is not None and "cursor" not in tool.parameters["properties"]


def test_a_call_past_its_ceiling_reports_progress_then_a_tool_timeout(
    registry: ToolRegistry,
) -> None:
    progress: list[float] = []
    outcome = run_call(
        registry,
        "blocked",
        {},
        allowed=None,
        cursor_key=KEY,
        limits=Limits(progress_after_s=0.1),
        on_progress=progress.append,
        ctx=ToolContext("s", None, "t", "c"),
    )
    RELEASE.set()
    assert len(progress) == 1 and progress[0] >= 0.1
    assert outcome.is_error and outcome.error == "timeout" and outcome.severity == "warning"
    assert json.loads(outcome.content)["error"] == "tool_timeout"


def test_upstream_and_input_errors_are_classified(registry: ToolRegistry) -> None:
    up = call(registry, "upstream")
    assert (up.content, up.severity, up.error) == ("upstream: 502", "error", "upstream")
    bad = call(registry, "calculate", expression="1/0")
    assert (bad.content, bad.severity, bad.error) == (
        "invalid: division by zero",
        "warning",
        "input",
    )


def test_text_over_the_cap_is_cut_on_a_character_boundary_and_flagged(
    registry: ToolRegistry,
) -> None:
    outcome = call(registry, "text")
    assert outcome.truncated and outcome.severity == "info" and not outcome.is_error
    assert len(outcome.content.encode()) <= 65536 and outcome.content.endswith("[truncated]")


def test_propose_action_returns_a_proposal_and_executes_nothing(registry: ToolRegistry) -> None:
    outcome = call(registry, "propose_action", action="restart", product="api", rationale="errors")
    assert outcome.effect is not None and outcome.effect.action == "restart"
    assert not outcome.is_error
    missing = call(registry, "propose_action", action="restart", product="api")
    assert missing.is_error and missing.error == "validation" and "rationale" in missing.content


def test_no_tool_runs_past_the_global_ceiling_whatever_it_asks(registry: ToolRegistry) -> None:
    hold = threading.Event()
    registry.register(
        Tool("greedy", "waits", OBJECT, lambda: hold.wait(5), timeout_s=600, max_timeout_s=600)
    )
    outcome = run_call(
        registry,
        "greedy",
        {},
        allowed=None,
        cursor_key=KEY,
        limits=Limits(max_timeout_s=0.3, progress_after_s=10),
        ctx=ToolContext("s", None, "t", "c"),
    )
    hold.set()
    assert outcome.error == "timeout"


def test_a_results_images_pass_on_beside_the_capped_value_within_the_image_limits() -> None:
    from cortex_workers.tools.results import ToolImage, WithImages

    small, large = ToolImage("image/png", "iVBORw0KGgo="), ToolImage("image/png", "A" * 4000)
    answer = WithImages(
        {"text": "x" * 100_000, "media": [{"type": "image"}] * 4},
        (small, large, ToolImage("audio/wav", "UklGRg=="), small, small),
    )
    registry = ToolRegistry()
    registry.register(Tool("charts", "images", OBJECT, lambda: answer))
    outcome = run_call(
        registry,
        "charts",
        {},
        allowed=None,
        cursor_key=KEY,
        limits=Limits(output_cap=4096, image_max_bytes=1000, images_per_result=2),
        ctx=ToolContext(session_id="s", session_name="n", turn_id="t", call_id="c"),
    )
    assert not outcome.is_error
    # the images do not count against the cap, which still holds for what the model reads
    assert outcome.truncated and len(outcome.content.encode()) <= 4096
    assert outcome.images == ("data:image/png;base64,iVBORw0KGgo=",) * 2
    omitted = json.loads(outcome.content)["images_omitted"]
    assert [o["reason"] for o in omitted] == [
        "larger than image_max_bytes (1000)",
        "not an image",
        "more than images_per_message (2)",
    ]

"""A turn is one trace: the API request that created it, each run of its steps on whichever
worker (a re-run after a worker was killed too), its provider calls and its tool runs, as an
OpenTelemetry collector receives them from a `cortex-workers dev` stack."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import psutil
import pytest
from fakes.otlp_receiver import OtlpReceiver, ReceivedSpan
from support import api_ready, dev_env, free_port, start_dev, stop_dev, wait_until

TWO_TOOLS: list[dict[str, Any]] = [
    {
        "text": "Working.",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "2**10"}},
            {"name": "current_time", "arguments": {}},
        ],
    },
    {"text": "2**10 is 1024."},
]


@dataclass
class DevStack:
    proc: subprocess.Popen[bytes]
    http: httpx.Client
    receiver: OtlpReceiver

    def turn(self, script: list[dict[str, Any]], content: str = "hello") -> str:
        sid = self.http.post("/v1/sessions", json={"metadata": {"script": script}}).json()["id"]
        r = self.http.post(f"/v1/sessions/{sid}/turns", json={"content": content})
        assert r.status_code == 202, r.text
        return str(r.json()["id"])

    def get(self, tid: str) -> dict[str, Any]:
        return dict(self.http.get(f"/v1/turns/{tid}").json())

    def wait_done(self, tid: str, timeout: float = 40) -> dict[str, Any]:
        return dict(
            wait_until(
                lambda: (t := self.get(tid))["status"] in ("done", "failed", "cancelled") and t,
                timeout=timeout,
                interval=0.2,
                what=f"turn {tid} to end",
            )
        )

    def trace(
        self, trace_id: str, done: Callable[[list[ReceivedSpan]], bool]
    ) -> list[ReceivedSpan]:
        """The spans of `trace_id`, once `done` holds on them."""
        spans = self.receiver.wait_for(
            lambda spans: done([s for s in spans if s.trace_id == trace_id]), timeout=20
        )
        return [s for s in spans if s.trace_id == trace_id]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    """`cortex-workers dev` exporting its traces to a local receiver, with short leases so a
    killed worker's step is re-published within seconds."""
    tmp = tmp_path_factory.mktemp("traces")
    port = free_port()
    with OtlpReceiver() as receiver:
        env = dev_env(
            **{
                **receiver.env(),
                "OTEL_BSP_SCHEDULE_DELAY": "200",
                "CORTEX_LEASE_S": "3",
                "CORTEX_REPUBLISH_AFTER_S": "2",
                "CORTEX_RETRY_BASE_S": "0.2",
                "CORTEX_RETRY_MAX_S": "0.5",
            }
        )
        proc = start_dev(tmp / "data", port, tmp / "dev.log", env)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until(lambda: api_ready(base), timeout=120, interval=0.5, what="dev stack")
            key = (tmp / "data" / "api-key").read_text().strip()
            headers = {"Authorization": f"Bearer {key}"}
            with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
                yield DevStack(proc, http, receiver)
        finally:
            stop_dev(proc)


def _int(value: object) -> int:
    assert isinstance(value, int), value
    return value


def _named(spans: list[ReceivedSpan], prefix: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def _request_span(spans: list[ReceivedSpan], step: ReceivedSpan) -> ReceivedSpan:
    """The API request span a step span is a child of."""
    parent = next((s for s in spans if s.span_id == step.parent_span_id), None)
    assert parent is not None, [s.name for s in spans]
    assert parent.kind == "server"
    return parent


def test_a_two_tool_turn_is_one_trace(dev: DevStack) -> None:
    started = time.monotonic()
    tid = dev.turn(TWO_TOOLS, "2**10?")
    turn = dev.wait_done(tid)
    assert turn["status"] == "done"
    trace_id = turn["trace_id"]
    assert trace_id and len(trace_id) == 32

    def complete(spans: list[ReceivedSpan]) -> bool:
        return (
            len(_named(spans, "cortex.step model")) == 2
            and len(_named(spans, "cortex.step tool")) == 2
            and len(_named(spans, "execute_tool ")) == 2
            and len(_named(spans, "chat ")) == 2
            and any(s.kind == "server" for s in spans)
        )

    spans = dev.trace(trace_id, complete)
    steps = _named(spans, "cortex.step ")
    request = _request_span(spans, steps[0])
    assert all(s.parent_span_id == request.span_id for s in steps)  # each a child of the request
    by_id = {s.span_id: s for s in spans}
    for s in steps:
        assert s.kind == "consumer"
        assert s.attributes["cortex.turn_id"] == tid
        assert s.attributes["cortex.attempt"] == 1
        assert s.attributes["messaging.destination.name"] in ("llm", "tools")
    assert sorted(_int(s.attributes["cortex.step_no"]) for s in steps) == [1, 2, 3, 4]

    tools = _named(spans, "execute_tool ")
    assert {s.attributes["gen_ai.tool.name"] for s in tools} == {"calculate", "current_time"}
    assert all(s.attributes["gen_ai.tool.call.id"] for s in tools)
    assert all(by_id[s.parent_span_id or ""].name == "cortex.step tool" for s in tools)
    assert all("gen_ai.tool.call.arguments" not in s.attributes for s in tools)  # no content

    chats = _named(spans, "chat ")
    for chat in chats:
        assert chat.kind == "client"
        assert by_id[chat.parent_span_id or ""].name == "cortex.step model"
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "scripted"
        assert chat.attributes["gen_ai.request.model"] == chat.name.removeprefix("chat ")
        assert chat.attributes["gen_ai.response.model"]
        assert _int(chat.attributes["gen_ai.usage.output_tokens"]) > 0
        assert "gen_ai.input.messages" not in chat.attributes
    reasons = sorted(str(c.attributes["gen_ai.response.finish_reasons"]) for c in chats)
    assert reasons == ["['stop']", "['tool_calls']"]
    assert time.monotonic() - started < 90


def _kill_tree(process: psutil.Process) -> None:
    """SIGKILL a worker and its pool, as an OOM kill would."""
    for p in [*process.children(recursive=True), process]:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


def test_a_step_rerun_after_its_worker_was_killed_is_in_the_same_trace(dev: DevStack) -> None:
    started = time.monotonic()
    words = " ".join(f"w{i}" for i in range(40))
    tid = dev.turn([{"text": words, "token_ms": 150}])

    def streaming() -> bool:
        steps = dev.get(tid)["steps"]
        return bool(steps) and steps[0]["status"] == "leased" and steps[0]["attempt"] == 1

    wait_until(streaming, timeout=30, interval=0.1, what="the model step to stream")
    time.sleep(0.5)
    llm = next(
        p
        for p in psutil.Process(dev.proc.pid).children(recursive=True)
        if "--queues llm" in " ".join(p.cmdline())
    )
    _kill_tree(llm)

    turn = dev.wait_done(tid, timeout=60)
    assert turn["status"] == "done"
    assert turn["steps"][0]["attempt"] >= 2
    trace_id = turn["trace_id"]

    def rerun(spans: list[ReceivedSpan]) -> bool:
        steps = _named(spans, "cortex.step model")
        return any(_int(s.attributes["cortex.attempt"]) >= 2 for s in steps) and bool(
            _named(spans, "chat ")
        )

    spans = dev.trace(trace_id, rerun)
    step = next(
        s for s in _named(spans, "cortex.step model") if s.attributes["cortex.attempt"] != 1
    )
    assert step.attributes["cortex.turn_id"] == tid
    request = _request_span(spans, step)
    assert request.trace_id == trace_id
    assert time.monotonic() - started < 90

"""Property-based fuzzing of the live API from its own OpenAPI schema (schemathesis).

Every operation in `/openapi.json` is called with data that fits its schema (positive) and with
data that does not (negative), authenticated as a fresh tenant: first with generated ids, then,
for operations that take ids, with ids of that tenant's own session, turn, proposal and
schedule, so the handlers behind the 404 are fuzzed too. The two SSE routes are included: a
stream that opens is closed at once (its status is what counts). No response may be a 5xx, and
every 4xx must carry the error shape. Bounded and deterministic: `MAX_EXAMPLES` per operation,
mode and id source, derandomized, no example database, no shrinking.

Also explicit: absurd paging values are 422 and an oversized body is 413, in the error shape.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from support import Api, wait_until

MAX_EXAMPLES = 25
"""Generated cases per operation, generation mode and id source."""
MAX_BYTES = 65536  # CORTEX_REQUEST_MAX_BYTES of the test stack
SSE_TYPE = "text/event-stream"
PROPOSE = {
    "name": "propose_action",
    "arguments": {"action": "restart", "product": "x", "rationale": "y"},
}


@dataclass
class Tally:
    """What the fuzzer sent and what came back."""

    statuses: Counter[int] = field(default_factory=Counter)
    by_operation: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    nothing_to_negate: set[str] = field(default_factory=set)

    @property
    def calls(self) -> int:
        return sum(self.statuses.values())

    def summary(self) -> str:
        statuses = ", ".join(f"{s}: {n}" for s, n in sorted(self.statuses.items()))
        return f"{self.calls} calls over {len(self.by_operation)} operations ({statuses})"


OPENAI_PATHS = ("/v1/responses", "/v1/conversations", "/v1/models")
"""Routes answering OpenAI's error shape (docs/openai-compatibility.md)."""


def openai_shape_problem(err: dict[str, Any]) -> str | None:
    """Why an error is not OpenAI's `{"message", "type", "param", "code"}`, or None."""
    if set(err) != {"message", "type", "param", "code"}:
        return f"not OpenAI's error keys: {sorted(err)}"
    if not (isinstance(err["message"], str) and err["message"] and isinstance(err["type"], str)):
        return "no error.message or error.type"
    return None


def shape_problem(
    status: int, content_type: str, body: bytes, *, openai: bool = False
) -> str | None:
    """Why a 4xx body is not `{"error": {"code", "message", "details"}}` (OpenAI's shape on
    its routes, with `openai`), or None."""
    if not content_type.startswith("application/json"):
        return f"content-type {content_type!r}"
    try:
        data = json.loads(body)
    except ValueError:
        return "body is not JSON"
    if not isinstance(data, dict) or set(data) != {"error"} or not isinstance(data["error"], dict):
        return "not {'error': {...}}"
    err = data["error"]
    if openai:
        return openai_shape_problem(err)
    if not (isinstance(err.get("code"), str) and err["code"]):
        return "no error.code"
    if not (isinstance(err.get("message"), str) and err["message"]):
        return "no error.message"
    if "details" not in err:
        return "no error.details"
    return None


@dataclass
class Fuzzer:
    """Sends generated cases to the live API as one tenant and tallies the answers."""

    http: requests.Session
    base_url: str
    auth: dict[str, str]
    tally: Tally = field(default_factory=Tally)

    def send(self, case: Case[Any]) -> tuple[int, str, bytes]:
        """Send one case; a stream that opens (200, SSE) is closed before its first event."""
        kwargs = case.as_transport_kwargs(base_url=self.base_url, headers=self.auth)
        with self.http.request(**kwargs, stream=True, timeout=(5, 30), allow_redirects=False) as r:
            content_type = r.headers.get("content-type", "")
            if r.status_code == 200 and content_type.startswith(SSE_TYPE):
                return r.status_code, content_type, b""
            return r.status_code, content_type, r.content

    def check(self, label: str, case: Case[Any]) -> None:
        """One case: no 5xx, and a 4xx only in the error shape."""
        status, content_type, body = self.send(case)
        self.tally.statuses[status] += 1
        self.tally.by_operation[case.operation.label] += 1
        problem = None
        if status >= 500:
            problem = "server error"
        elif status >= 400:
            openai = case.operation.path.startswith(OPENAI_PATHS)
            problem = shape_problem(status, content_type, body, openai=openai)
        if problem:
            curl = case.as_curl_command(base_url=self.base_url)
            self.tally.failures.append(f"{label}: {status} {problem}: {body[:300]!r}\n  {curl}")

    def fuzz(
        self,
        operation: Any,
        mode: GenerationMode,
        path_parameters: dict[str, str] | None = None,
    ) -> None:
        """Up to `MAX_EXAMPLES` cases of one operation in one mode."""
        strategy = operation.as_strategy(
            generation_mode=mode,
            headers={"authorization": self.auth["Authorization"]},
            path_parameters=path_parameters,
        )
        label = f"{operation.label} [{mode.value}{', own ids' if path_parameters else ''}]"

        @settings(
            max_examples=MAX_EXAMPLES,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def run(case: Case[Any]) -> None:
            self.check(label, case)

        try:
            run()
        except Unsatisfiable:
            # Nothing of this operation can be made invalid (its only input is the fixed
            # Authorization header): the positive run covers it.
            self.tally.nothing_to_negate.add(operation.label)


@dataclass(frozen=True)
class Owned:
    """Ids of the fuzzing tenant's own objects, by path parameter name."""

    ids: dict[str, str]


def _openai_ids(client: Api) -> dict[str, str]:
    """A response, a conversation with an item, and a model of the OpenAI-compatible routes."""
    script = json.dumps([{"text": "answered"}])
    response = client.http.post(
        "/v1/responses", json={"model": "scripted-1", "input": "y", "metadata": {"script": script}}
    )
    assert response.status_code == 200, response.text
    item = {"type": "message", "role": "user", "content": "an item"}
    conversation = client.http.post("/v1/conversations", json={"items": [item]}).json()["id"]
    items = client.http.get(f"/v1/conversations/{conversation}/items").json()["data"]
    return {
        "response_id": response.json()["id"],
        "conversation_id": conversation,
        "item_id": items[0]["id"],
        "model": "scripted-1",
    }


@pytest.fixture
def owned(client: Api) -> Owned:
    """A session with a finished turn that proposed an action, all of the fuzzing tenant."""
    sid = client.scripted_session(
        {"text": "I suggest a restart.", "tool_calls": [PROPOSE]},
        {"text": "Proposed."},
        name="fuzzed",
    )
    tid = client.submit(sid, "propose something")
    assert client.wait_turn(tid)["status"] == "done"
    proposals = client.http.get(f"/v1/sessions/{sid}/proposals").json()
    assert len(proposals) == 1, proposals
    job = {"instructions": "x", "input": "y", "result_schema": {"type": "object"}}
    job_id = client.http.post("/v1/jobs", json=job).json()["id"]
    batch = {"instructions": "x", "inputs": ["y"], "result_schema": {"type": "object"}}
    batch_id = client.http.post("/v1/batches", json=batch).json()["id"]
    hook = {"url": "http://127.0.0.1:9/hooks", "events": ["job.completed"]}
    webhook_id = client.http.post("/v1/webhooks", json=hook).json()["id"]
    schedule = client.http.post(
        f"/v1/sessions/{sid}/schedules", json={"content": "scheduled", "every_s": 3600}
    )
    assert schedule.status_code == 201, schedule.text
    return Owned(
        {
            **_openai_ids(client),
            "session_id": sid,
            "turn_id": tid,
            "proposal_id": proposals[0]["id"],
            "job_id": job_id,
            "batch_id": batch_id,
            "webhook_id": webhook_id,
            "schedule_id": schedule.json()["id"],
            "task_id": _agent_task(client),
        }
    )


def _agent_task(client: Api) -> str:
    """An agent task of the fuzzing tenant (a finished foreground call of `lookup`)."""
    sid = client.scripted_session(
        {"tool_calls": [{"name": "lookup_agent", "arguments": {"task": "t"}}]},
        {"text": "ok"},
        agents=["lookup"],
        tools=[],
    )
    assert client.wait_turn(client.submit(sid, "call it"))["status"] == "done"
    (task,) = client.http.get(f"/v1/sessions/{sid}/tasks").json()
    return str(task["id"])


@pytest.fixture
def http() -> Iterator[requests.Session]:
    with requests.Session() as session:
        yield session


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_fuzzing_every_operation_gets_no_5xx_and_every_4xx_in_the_error_shape(
    client: Api, tenant_key: str, owned: Owned, http: requests.Session, mode: GenerationMode
) -> None:
    schema = schemathesis.openapi.from_url(f"{client.base_url}/openapi.json")
    fuzzer = Fuzzer(http, client.base_url, {"Authorization": f"Bearer {tenant_key}"})
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    paths = {op.path for op in operations}
    assert {"/v1/turns/{turn_id}/events", "/v1/sessions/{session_id}/events"} <= paths
    for operation in operations:
        fuzzer.fuzz(operation, mode)
        names = [p.name for p in operation.path_parameters]
        if names:  # again with the tenant's own ids, to reach past the 404
            fuzzer.fuzz(operation, mode, {n: owned.ids[n] for n in names})
    tally = fuzzer.tally
    print(f"\nschemathesis {schemathesis.__version__}, {mode.value}: {tally.summary()}")
    missing = {op.label for op in operations} - set(tally.by_operation) - tally.nothing_to_negate
    assert not missing, f"operations never called: {sorted(missing)}"
    assert not tally.failures, "\n".join(tally.failures)
    # the turns the fuzzer submitted to the tenant's session all end (nothing left running),
    # once the schedules it created there stop firing
    sid = owned.ids["session_id"]
    for schedule in client.http.get(f"/v1/sessions/{sid}/schedules").json()["schedules"]:
        client.http.delete(f"/v1/schedules/{schedule['id']}")
    wait_until(
        lambda: client.http.get(f"/v1/sessions/{sid}").json()["active_turn"] is None,
        timeout=120,
        interval=0.2,
        what="the fuzzed session's turns to end",
    )


# --- explicit bad input ------------------------------------------------------------------------


def assert_error_shape(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
    problem = shape_problem(r.status_code, r.headers.get("content-type", ""), r.content)
    assert problem is None, (problem, r.text)
    err = dict(r.json()["error"])
    assert err["code"] == code, err
    return err


@pytest.mark.parametrize(
    "params",
    [
        {"limit": -1},
        {"limit": 0},
        {"limit": 501},
        {"limit": 2**63},
        {"limit": "9" * 100},
        {"limit": "ten"},
        {"limit": "1.5"},
        {"limit": "1e3"},
        {"limit": ""},
        {"after": -1},
        {"after": 2**31},
        {"after": 2**64},
        {"after": "9" * 5000},
        {"after": "NaN"},
        {"after": "0x10"},
        {"after": "\u0661"},  # an Arabic-Indic digit one: int() would take it
    ],
)
def test_absurd_paging_values_are_422_in_the_error_shape(
    client: Api, params: dict[str, Any]
) -> None:
    sid = client.create_session(name="paging")["id"]
    r = client.http.get(f"/v1/sessions/{sid}/messages", params=params)
    err = assert_error_shape(r, 422, "validation_error")
    assert any(d["loc"][:2] == ["query", next(iter(params))] for d in err["details"]), err


def test_absurd_paging_values_on_an_unknown_session_are_still_422_not_404(client: Api) -> None:
    r = client.http.get(f"/v1/sessions/{uuid.uuid4()}/messages", params={"limit": -1})
    assert_error_shape(r, 422, "validation_error")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/sessions", {"system_prompt": "p" * (MAX_BYTES + 1)}),
        ("/v1/sessions", {"metadata": {"k": ["v" * 1000] * 100}}),
        ("{sid}/turns", {"content": "x" * (MAX_BYTES + 1)}),
        ("{sid}/turns", {"content": "\u00e9" * (MAX_BYTES // 2 + 1)}),  # 2 bytes a character
    ],
)
def test_an_oversized_body_is_413_in_the_error_shape(
    client: Api, path: str, body: dict[str, Any]
) -> None:
    sid = client.create_session(name="big")["id"]
    url = path.replace("{sid}", f"/v1/sessions/{sid}")
    r = client.http.post(url, json=body)
    err = assert_error_shape(r, 413, "payload_too_large")
    assert err["details"] == {"max_bytes": MAX_BYTES}
    assert client.messages(sid) == []

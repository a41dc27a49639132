"""Each API request is a SERVER span, and the request that submits a turn starts the turn's trace:
its id is the turn's `trace_id`. The API runs in a subprocess with the OTEL_* variables pointing at
a local OTLP receiver, so OpenTelemetry's global state never touches the test process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from fakes.otlp_receiver import OtlpReceiver, ReceivedSpan
from sqlalchemy import create_engine, text
from support import Api, Stack, Workers, free_port, stream_until_done, wait_until

ROOT = Path(__file__).resolve().parents[2]
SUBMIT = "POST /v1/sessions/{session_id}/turns"
TURN_EVENTS = "GET /v1/turns/{turn_id}/events"
SCRUBBED = ("OTEL_", "PROMETHEUS_MULTIPROC_DIR", "CORTEX_TRACE_", "CORTEX_METRICS_TOKEN")

StartApi = Callable[..., Api]


def _api_up(api: Api) -> bool:
    try:
        return api.http.get("/healthz").status_code == 200
    except Exception:
        return False


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture
def start_api(
    stack: Stack, workers: Workers, tenant_key: str, tmp_path: Path, receiver: OtlpReceiver
) -> Iterator[StartApi]:
    """Starts `uvicorn config.asgi:app` in a subprocess with this run's settings plus `env`;
    returns a client of it authenticated as a fresh tenant. It asks for `receiver` so that the
    receiver outlives the API: the API's shutdown exports its last spans to it."""
    procs: list[subprocess.Popen[bytes]] = []
    clients: list[Api] = []

    def start(env: Mapping[str, str]) -> Api:
        port = free_port()
        base = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}
        log = (tmp_path / f"api-{port}.log").open("wb")
        argv = ["-m", "uvicorn", "config.asgi:app", "--host", "127.0.0.1", "--port", str(port)]
        procs.append(
            subprocess.Popen(
                [sys.executable, *argv, "--log-level", "warning"],
                env={**base, **env},
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        client = Api(f"http://127.0.0.1:{port}", tenant_key)
        clients.append(client)
        wait_until(
            lambda: procs[-1].poll() is not None or _api_up(client), timeout=120, what="api up"
        )
        assert procs[-1].poll() is None, (tmp_path / f"api-{port}.log").read_text()
        return client

    yield start
    for client in clients:
        client.http.close()
    for proc in procs:
        proc.terminate()  # the lifespan's shutdown exports the spans still buffered
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # never left running, whatever the test saw
            proc.kill()
            proc.wait(timeout=20)
            raise


def _named(name: str, trace_id: str | None = None) -> Callable[[list[ReceivedSpan]], bool]:
    return lambda spans: any(
        s.name == name and (trace_id is None or s.trace_id == trace_id) for s in spans
    )


def _one(spans: list[ReceivedSpan], name: str, trace_id: str) -> ReceivedSpan:
    (found,) = [s for s in spans if s.name == name and s.trace_id == trace_id]
    return found


def _stored_traceparent(stack: Stack, turn_id: str) -> str | None:
    engine = create_engine(stack.database_url)
    try:
        with engine.connect() as conn:
            query = text("SELECT traceparent FROM turns WHERE id = :id")
            value: str | None = conn.execute(query, {"id": turn_id}).scalar_one()
            return value
    finally:
        engine.dispose()


def test_submitting_a_turn_starts_its_trace_and_the_turn_names_it(
    start_api: StartApi, receiver: OtlpReceiver, stack: Stack
) -> None:
    api = start_api(receiver.env())
    sid = api.scripted_session({"text": "traced"})
    tid = api.submit(sid)
    trace_id = api.turn(tid)["trace_id"]
    assert isinstance(trace_id, str) and len(trace_id) == 32
    request = _one(receiver.wait_for(_named(SUBMIT, trace_id)), SUBMIT, trace_id)
    assert request.kind == "server" and request.parent_span_id is None
    assert request.status == "unset"
    assert request.resource["service.name"] == "cortex-workers-api"
    port = int(api.base_url.rsplit(":", 1)[1])
    assert request.attributes == {
        "http.request.method": "POST",
        "http.route": "/v1/sessions/{session_id}/turns",
        "url.path": f"/v1/sessions/{sid}/turns",
        "url.scheme": "http",
        "server.address": "127.0.0.1",
        "server.port": port,
        "http.response.status_code": 202,
    }
    # the steps' spans will be children of exactly this span
    stored = _stored_traceparent(stack, tid)
    assert stored is not None and stored.startswith(f"00-{trace_id}-{request.span_id}-")
    assert int(stored.rsplit("-", 1)[1], 16) & 1  # sampled


def test_a_request_with_a_traceparent_continues_the_callers_trace(
    start_api: StartApi, receiver: OtlpReceiver
) -> None:
    api = start_api(receiver.env())
    sid = api.scripted_session({"text": "traced"})
    caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    headers = {"traceparent": f"00-{caller_trace}-{caller_span}-01"}
    response = api.post_turn(sid, headers=headers)
    assert response.status_code == 202, response.text
    assert api.turn(response.json()["id"])["trace_id"] == caller_trace
    request = _one(receiver.wait_for(_named(SUBMIT, caller_trace)), SUBMIT, caller_trace)
    assert request.parent_span_id == caller_span


def test_an_event_stream_is_a_span_of_its_own_linked_to_the_turns_trace(
    start_api: StartApi, receiver: OtlpReceiver
) -> None:
    api = start_api(receiver.env())
    sid = api.scripted_session({"text": "a few tokens to stream"})
    tid = api.submit(sid)
    trace_id = api.turn(tid)["trace_id"]
    submitted = _one(receiver.wait_for(_named(SUBMIT, trace_id)), SUBMIT, trace_id)
    events = stream_until_done(api.http, f"/v1/turns/{tid}/events")
    assert events[-1].event == "done"
    spans = receiver.wait_for(_named(TURN_EVENTS), timeout=20)
    (stream,) = [s for s in spans if s.name == TURN_EVENTS]
    assert stream.kind == "server" and stream.trace_id != trace_id
    assert stream.attributes["http.route"] == "/v1/turns/{turn_id}/events"
    assert [(link.trace_id, link.span_id) for link in stream.links] == [
        (trace_id, submitted.span_id)
    ]
    assert not [s for s in receiver.spans if s.trace_id == trace_id and s.name != SUBMIT]


def test_a_session_stream_links_to_the_trace_of_each_turn_it_streams(
    start_api: StartApi, receiver: OtlpReceiver
) -> None:
    api = start_api(receiver.env())
    sid = api.scripted_session({"text": "first"}, {"text": "second"})
    path = f"/v1/sessions/{sid}/events"
    tids: list[str] = []
    with api.http.stream("GET", path) as stream:
        tids.append(api.submit(sid))
        done = 0
        for line in stream.iter_lines():
            if line == "event: done":
                done += 1
                if done == 1:
                    tids.append(api.submit(sid))
                if done == 2:
                    break
    traces = [api.turn(tid)["trace_id"] for tid in tids]
    name = "GET /v1/sessions/{session_id}/events"
    spans = receiver.wait_for(_named(name), timeout=20)
    (stream_span,) = [s for s in spans if s.name == name]
    assert [link.trace_id for link in stream_span.links] == traces


def test_a_5xx_marks_the_request_span_failed(start_api: StartApi, receiver: OtlpReceiver) -> None:
    dead_redis = f"redis://127.0.0.1:{free_port()}/0"
    api = start_api({**receiver.env(), "REDIS_URL": dead_redis})
    response = api.http.post("/v1/sessions", json={})
    assert response.status_code == 503, response.text
    name = "POST /v1/sessions"
    (span,) = [s for s in receiver.wait_for(_named(name)) if s.name == name]
    assert span.status == "error"
    assert span.attributes["http.response.status_code"] == 503
    assert span.attributes["error.type"] == "503"


def test_probes_and_scrapes_are_not_traced(start_api: StartApi, receiver: OtlpReceiver) -> None:
    api = start_api(receiver.env())
    for path in ("/healthz", "/readyz", "/metrics"):
        assert api.http.get(path).status_code == 200
    assert api.http.get("/v1/tools").status_code == 200
    receiver.wait_for(_named("GET /v1/tools"))
    # the MCP SDK traces its own client calls (the configured MCP servers' discovery): not ours
    ours = {s.name for s in receiver.spans if not s.name.startswith("MCP ")}
    assert ours == {"GET /v1/tools"}


def test_with_tracing_off_the_turn_has_no_trace_id(client: Api) -> None:
    sid = client.scripted_session({"text": "untraced"})
    assert client.turn(client.submit(sid))["trace_id"] is None

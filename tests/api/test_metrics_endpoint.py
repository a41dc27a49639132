"""`GET /metrics` on the API's port: every family the operations guide lists, HTTP requests by
route template (never by path), open SSE connections, and the optional bearer token."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from support import Api, wait_until

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
HTTP = "http_server_request_duration_seconds"
SLOW = {"text": "one two three four five six", "token_ms": 300}


def documented_families() -> set[str]:
    """The metric names of the table in docs/operations.md."""
    names = re.findall(
        r"^\| `([a-z_]+)` \| (?:counter|gauge|histogram) \|", OPERATIONS.read_text(), re.M
    )
    assert len(names) >= 19, names
    return set(names)


def scrape(api: Api, **headers: str) -> httpx.Response:
    return httpx.get(f"{api.base_url}/metrics", headers=headers, timeout=30)


def samples(api: Api) -> list[Sample]:
    response = scrape(api)
    assert response.status_code == 200, response.text
    families = text_string_to_metric_families(response.text)
    return [sample for family in families for sample in family.samples]


def declared(text: str) -> set[str]:
    """The names of the `# TYPE` lines (counters with their `_total`)."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def value(found: list[Sample], name: str, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels`."""
    return sum(s.value for s in found if s.name == name and labels.items() <= s.labels.items())


def test_every_documented_family_is_exposed_without_a_key(client: Api) -> None:
    response = scrape(client)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert documented_families() <= declared(response.text)


def test_every_reconciler_action_is_exposed_before_the_reconciler_acts(client: Api) -> None:
    from cortex_workers.turns.reconcile import ACTIONS

    found = samples(client)
    actions = {s.labels["action"] for s in found if s.name == "cortex_reconciler_actions_total"}
    assert actions >= set(ACTIONS)
    assert len(ACTIONS) == 12


def test_queue_gauges_are_read_from_postgres_for_each_step_queue(client: Api) -> None:
    found = samples(client)
    for name in ("cortex_queue_depth", "cortex_queue_oldest_age_seconds", "cortex_steps_in_flight"):
        queues = {s.labels["queue"] for s in found if s.name == name}
        assert {"llm", "tools", "summarize"} <= queues, (name, queues)


def test_requests_are_counted_by_route_template_never_by_path(client: Api) -> None:
    sid = client.create_session()["id"]
    missing = uuid.uuid4()
    assert client.http.get(f"/v1/sessions/{sid}").status_code == 200
    assert client.http.get(f"/v1/turns/{missing}").status_code == 404
    assert client.http.get(f"/no/such/{missing}").status_code == 404
    assert client.http.request("PROPFIND", f"/v1/sessions/{sid}").status_code == 405
    response = scrape(client)
    assert sid not in response.text and str(missing) not in response.text
    families = text_string_to_metric_families(response.text)
    found = [s for family in families for s in family.samples if s.name == f"{HTTP}_count"]

    def count(route: str, method: str | None = None, status: str | None = None) -> float:
        labels = {"http_route": route}
        labels |= {"http_request_method": method} if method else {}
        labels |= {"http_response_status_code": status} if status else {}
        return value(found, f"{HTTP}_count", **labels)

    assert count("/v1/sessions/{session_id}", "GET", "200") >= 1
    assert count("/v1/sessions", "POST", "201") >= 1
    assert count("/v1/turns/{turn_id}", "GET", "404") >= 1
    assert count("unmatched", "GET", "404") >= 1
    assert count("/v1/sessions/{session_id}", "_OTHER", "405") >= 1  # PROPFIND
    methods = {s.labels["http_request_method"] for s in found}
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "_OTHER"}
    assert "PROPFIND" not in methods


def test_an_open_event_stream_is_counted_until_it_ends(client: Api) -> None:
    def open_turn_streams() -> float:
        return value(samples(client), "cortex_sse_connections", stream="turn")

    before = open_turn_streams()
    sid = client.scripted_session(SLOW)
    tid = client.submit(sid)
    with client.http.stream("GET", f"/v1/turns/{tid}/events") as stream:
        lines = stream.iter_lines()
        next(lines)  # the stream has started
        assert open_turn_streams() == before + 1
        for _ in lines:
            pass  # to its end: the turn's `done`
    wait_until(lambda: open_turn_streams() == before, timeout=10, what="the stream uncounted")
    found = samples(client)
    assert value(found, f"{HTTP}_count", http_route="/v1/turns/{turn_id}/events") >= 1


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong-token", "Basic c2VjcmV0", "Bearer metrics-secret-2"]
)
def test_with_a_metrics_token_a_scrape_without_it_is_refused(
    client: Api, monkeypatch: pytest.MonkeyPatch, authorization: str | None
) -> None:
    monkeypatch.setenv("CORTEX_METRICS_TOKEN", "metrics-secret")
    headers = {"Authorization": authorization} if authorization is not None else {}
    response = scrape(client, **headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    error = response.json()["error"]
    assert error["code"] == "unauthorized" and "CORTEX_METRICS_TOKEN" in error["message"]
    assert "metrics-secret" not in response.text


def test_with_a_metrics_token_a_scrape_that_sends_it_is_answered(
    client: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORTEX_METRICS_TOKEN", "metrics-secret")
    response = scrape(client, Authorization="Bearer metrics-secret")
    assert response.status_code == 200
    assert "cortex_turns_total" in response.text
    assert client.http.get("/healthz").status_code == 200  # the rest of the API is unaffected

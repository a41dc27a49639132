"""What the workers count while they run a turn: its end, each step's outcome, the tool calls
by severity and the provider calls' tokens, read from the workers' multiprocess metric files
(the test workers run with `PROMETHEUS_MULTIPROC_DIR` set, see tests/conftest.py)."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import Api, Workers, wait_until

from cortex_workers.observability.metrics import MULTIPROC_DIR_ENV, render_latest

Sample = tuple[str, frozenset[tuple[str, str]]]


def _scrape(workers: Workers, monkeypatch: pytest.MonkeyPatch) -> dict[Sample, float]:
    """Every sample the workers wrote, keyed by name and labels."""
    monkeypatch.setenv(MULTIPROC_DIR_ENV, workers.env[MULTIPROC_DIR_ENV])
    body, _ = render_latest()
    monkeypatch.delenv(MULTIPROC_DIR_ENV)
    out: defaultdict[Sample, float] = defaultdict(float)
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] += sample.value
    return out


def _sum(samples: dict[Sample, float], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def _settle(timeout: float = 15.0) -> None:
    """Wait (a while, at most) until no step of a running turn is open: the counts compared
    below are the whole stack's, so an earlier test's turn must not add to them."""
    from sqlalchemy import func, select

    from cortex_workers.runtime import get_runtime
    from cortex_workers.store.models import Step, Turn
    from cortex_workers.vocabulary import OPEN_STEP_STATUSES, TurnStatus

    query = (
        select(func.count())
        .select_from(Step)
        .join(Turn, Turn.id == Step.turn_id)
        .where(Step.status.in_(OPEN_STEP_STATUSES), Turn.status == TurnStatus.RUNNING)
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with get_runtime().db() as db:
            if db.execute(query).scalar_one() == 0:
                return
        time.sleep(0.2)


def test_a_turn_counts_its_end_its_steps_tool_calls_and_tokens(
    client: Api, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = client.scripted_session(
        {
            "error": {"status": 503, "times": 1},
            "tool_calls": [
                {"name": "calculate", "arguments": {"expression": "2+2"}},
                {"name": "calculate", "arguments": {"expression": "1/0"}},
            ],
        },
        {"text": "Four, and the other one failed."},
    )
    _settle()
    before = _scrape(workers, monkeypatch)
    tid = client.submit(sid)
    assert client.wait_turn(tid)["status"] == "done"

    def delta(name: str, **labels: str) -> float:
        return _sum(_scrape(workers, monkeypatch), name, **labels) - _sum(before, name, **labels)

    # the end is counted right after its commit, which the API may show first
    wait_until(lambda: delta("cortex_turns_total", status="done") == 1, timeout=10, what="end")
    assert delta("cortex_turn_duration_seconds_count", status="done") == 1
    assert delta("cortex_turns_total", status="failed") == 0
    assert delta("cortex_steps_total", kind="model", outcome="retried") == 1
    assert delta("cortex_steps_total", kind="model", outcome="done") == 2
    assert delta("cortex_steps_total", kind="tool", outcome="done") == 2
    assert delta("cortex_llm_retries_total", provider="scripted") == 1
    assert delta("cortex_tool_calls_total", tool="calculate", severity="ok") == 1
    assert delta("cortex_tool_calls_total", tool="calculate", severity="warning") == 1
    assert delta("cortex_tool_duration_seconds_count", tool="calculate") == 2
    assert delta("cortex_step_queue_wait_seconds_count", kind="tool") == 2
    assert delta("cortex_step_queue_wait_seconds_count", kind="model") == 3
    tokens = "gen_ai_client_token_usage_count"
    assert delta(tokens, gen_ai_provider_name="scripted", gen_ai_token_type="input") == 2
    assert delta(tokens, gen_ai_provider_name="scripted", gen_ai_token_type="output") == 2
    calls = "gen_ai_client_operation_duration_seconds_count"
    assert delta(calls, gen_ai_provider_name="scripted", error_type="provider_503") == 1
    assert delta(calls, gen_ai_provider_name="scripted", error_type="") == 2

    # a second delivery of a step that is done claims nothing
    from cortex_workers.dispatch import publish
    from cortex_workers.turns.steps import NextStep
    from cortex_workers.vocabulary import StepKind

    first = next(s for s in client.turn(tid)["steps"] if s["step_no"] == 1)
    publish([NextStep(uuid.UUID(first["id"]), StepKind.MODEL)])
    wait_until(
        lambda: delta("cortex_steps_total", kind="model", outcome="duplicate") >= 1,
        timeout=15,
        what="the duplicate delivery to be counted",
    )
    assert delta("cortex_turns_total", status="done") == 1  # once per turn


def test_a_jobs_model_calls_are_counted_like_a_turns(
    client: Api, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a name outside the catalog is counted as `other` (bounded labels): compared before and after
    model = f"job-metrics-{uuid.uuid4().hex[:8]}"
    calls = "gen_ai_client_operation_duration_seconds_count"
    tokens = "gen_ai_client_token_usage_count"
    _settle()
    before = _scrape(workers, monkeypatch)
    schema = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}
    script = [{"text": "not json"}, {"text": '{"ok": true}'}]
    body = {"instructions": "Answer ok.", "input": "x", "result_schema": schema}
    body |= {"provider": "scripted", "model": model, "metadata": {"script": script}}
    r = client.http.post("/v1/jobs", json=body)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    wait_until(
        lambda: client.http.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded",
        timeout=30,
        what="the job",
    )
    _settle()
    found = _scrape(workers, monkeypatch)

    def added(name: str, **labels: str) -> float:
        return _sum(found, name, **labels) - _sum(before, name, **labels)

    assert added(calls, gen_ai_request_model="other", error_type="") == 2  # invalid, valid
    assert added(tokens, gen_ai_request_model="other") == 4  # input and output of each
    assert _sum(found, calls, gen_ai_request_model=model) == 0  # never a label of its own

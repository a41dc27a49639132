"""Budget exhaustion end to end, on a worker group and APIs of their own (their `[llm.budget]`
differs from the shared stack's): with `on_exhausted = "local"` a turn whose next call the
budget cannot take goes on with the local provider and says so; a global daily limit refuses a
new turn before anything is stored."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from budget_support import new_tenant
from fakes.openai_server import FakeOpenAI
from side_stack import side_api, side_env
from support import Api, Stack, Workers, wait_until

REMOTE_KEY = "sk-test-remote-budget"
PROVIDERS = {"openai": {"model": "gpt-4o", "max_tokens": 256}}
"""gpt-4o is priced (2.50 / 10.00 USD per million tokens); a call reserves 256 output tokens."""
ANSWER_LOCALLY = {"text": "Answered on the local model."}


@dataclass
class Side:
    env: dict[str, str]
    api: Api
    remote: FakeOpenAI
    local: FakeOpenAI
    logs: Path


@pytest.fixture(scope="module")
def side(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Side]:
    """`llm` and `tools` workers and an API with `on_exhausted = "local"` (the local provider:
    Ollama, served by a fake on 127.0.0.1)."""
    remote, local = FakeOpenAI(), FakeOpenAI()
    remote_url, local_url = remote.start(), local.start()
    env = side_env(
        stack,
        broker_db=10,
        OPENAI_API_KEY=REMOTE_KEY,
        OPENAI_API_BASE=f"{remote_url}/v1",
        OLLAMA_BASE_URL=f"{local_url}/v1",
        CORTEX_LLM_PROVIDERS=json.dumps(PROVIDERS),
        CORTEX_LLM_BUDGET=json.dumps({"on_exhausted": "local", "local_provider": "ollama"}),
        CORTEX_LLM_FALLBACK_PROVIDERS="[]",
    )
    logs = Path(str(tmp_path_factory.mktemp("budget-side-logs")))
    group = Workers(env=env, log_dir=logs)
    group.purge_queues()
    try:
        group.start_together("llm", "tools")
        with side_api(env, logs / "api.log") as base:
            yield Side(env, Api(base), remote, local, logs)
    finally:
        group.stop_all()
        remote.stop()
        local.stop()


def test_a_turn_the_budget_runs_out_on_goes_on_with_the_local_provider(side: Side) -> None:
    from cortex_workers.runtime import get_runtime
    from cortex_workers.store import tenant_admin
    from cortex_workers.store.db import transaction
    from cortex_workers.store.models import Tenant

    tenant_id, key = new_tenant()
    content = f"what is 6*7? {uuid.uuid4()}"
    # the first call uses its whole output allowance, so the second one cannot fit
    side.remote.answer_by_position(
        content,
        {
            "tool_calls": [{"name": "calculate", "arguments": {"expression": "6*7"}}],
            "usage": {"input": 100, "output": 256},
        },
    )
    side.local.answer_by_position(content, {}, ANSWER_LOCALLY)
    with side.api.as_tenant(key) as client:
        sid = client.create_session(provider="openai", model="gpt-4o", tools=["calculate"])["id"]
        dry = client.post_turn(sid, content, dry_run=True).json()
        first_call_max = math.ceil(dry["estimate"]["cost_usd_max"] * 1e6)
        with transaction(get_runtime().db) as db:
            tenant = db.get(Tenant, tenant_id)
            assert tenant is not None
            name = tenant.name
            # room for the first call's maximum, not for a second one after it
            tenant_admin.set_overrides(db, name, {"daily_usd_limit_micros": first_call_max + 500})
        tid = client.submit(sid, content)
        turn = client.wait_turn(tid, timeout=60)
        events = client.turn_events(tid)

        def tenant_scope() -> dict[str, Any]:  # the API reads a tenant's limits every ~2 s
            scopes = client.http.get("/v1/budget").json()["scopes"]
            return dict(next(s for s in scopes if s["scope"] == "tenant"))

        wait_until(lambda: tenant_scope()["limit_usd"] is not None, timeout=10, what="limit")
        mine = tenant_scope()
    assert turn["status"] == "done", turn.get("error")
    assert turn["answer"] == ANSWER_LOCALLY["text"]
    steps = [s for s in turn["steps"] if s["kind"] == "model"]
    assert [(s["provider"], s["model"]) for s in steps] == [
        ("openai", "gpt-4o"),
        ("ollama", "llama3.1"),
    ]
    assert [w["code"] for w in turn["warnings"]] == ["budget_exhausted"]
    assert "ollama" in turn["warnings"][0]["message"]
    assert [e.data["name"] for e in events if e.event == "tool_result"] == ["calculate"]
    assert events[-1].event == "done" and not any(e.event == "error" for e in events)
    assert len(side.remote.requests_for(content)) == 1  # the remote never saw the second call
    assert len(side.local.requests_for(content)) == 1
    assert mine["spent_usd"] <= mine["limit_usd"] and mine["reserved_usd"] == 0


def test_the_global_daily_limit_refuses_a_new_turn_before_storing_it(
    side: Side, tmp_path: Path
) -> None:
    env = {**side.env, "CORTEX_LLM_BUDGET": json.dumps({"daily_usd_limit": 0.000001})}
    _, key = new_tenant()  # the tenant itself has no limit: only the global one applies
    with side_api(env, tmp_path / "global-api.log") as base, Api(base).as_tenant(key) as client:
        sid = client.create_session(provider="openai", model="gpt-4o")["id"]
        r = client.post_turn(sid, "one more question")
        messages = client.messages(sid)
        session = client.http.get(f"/v1/sessions/{sid}").json()
    assert r.status_code == 402, r.text
    error = r.json()["error"]
    assert error["code"] == "budget_exhausted"
    assert error["details"]["scope"] == "global"
    assert error["details"]["limit_usd"] == pytest.approx(0.000001)
    assert {"spent_usd", "resets_at"} <= set(error["details"])
    assert messages == [] and session["active_turn"] is None
    assert not side.remote.requests_for("one more question")

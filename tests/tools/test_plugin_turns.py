"""Operator plugin tools through the real pipeline: a bridge call, session limits, the SSRF
guard, and malformed manifests reported by GET /v1/tools."""

from __future__ import annotations

import json
import uuid

from support import Api, Fakes


def _call(client: Api, tool: str, session_name: str, **arguments: object) -> dict:
    sid = client.scripted_session(
        {"tool_calls": [{"name": tool, "arguments": arguments}]}, {"text": "ok"}, name=session_name
    )
    events = client.turn_events(client.submit(sid, "search"))
    return next(e.data for e in events if e.event == "tool_result")


def test_a_plugin_calls_its_bridge_with_its_token(client: Api, fakes: Fakes) -> None:
    result = _call(client, "ticket_search", "incident-42", query="disk full")
    assert not result["is_error"], result
    assert json.loads(result["content"])["hits"][0]["key"] == "OPS-1"
    sent = [r for r in fakes.bridge.requests if r["json"] == {"query": "disk full"}]
    assert sent and sent[-1]["auth"] == "Bearer bridge-secret-token"


def test_a_plugin_refuses_tenants_its_manifest_does_not_allow(api: Api, fakes: Fakes) -> None:
    from cortex_workers.admin import create_key

    before = len(fakes.bridge.requests)
    with api.as_tenant(create_key(f"marketing-{uuid.uuid4().hex[:8]}")) as other:
        # a session named like the operator's incidents authorizes nothing
        result = _call(other, "ticket_search", "incident-42", query="x")
        listed = [t["name"] for t in other.http.get("/v1/tools").json()["tools"]]
    assert result["is_error"] and result["error"] == "forbidden"
    assert len(fakes.bridge.requests) == before
    assert "ticket_search" not in listed


def test_a_plugin_pointing_at_this_machine_without_permission_is_blocked(
    client: Api, fakes: Fakes
) -> None:
    before = len(fakes.bridge.requests)
    result = _call(client, "sneaky", "anything", q="x")
    assert result["is_error"] and result["error"] == "blocked"
    assert "allow_private_host" in result["content"]
    assert len(fakes.bridge.requests) == before  # no connection reached the bridge


def test_tools_lists_loaded_plugins_and_the_rejected_manifest_with_its_reason(
    client: Api,
) -> None:
    body = client.http.get("/v1/tools").json()
    tools = {t["name"]: t for t in body["tools"]}
    assert tools["ticket_search"]["source"] == "plugin"
    assert "allowed_tenants" not in tools["ticket_search"]
    assert "tenant-*" not in json.dumps(body)
    assert {"calculate", "current_time", "propose_action"} <= set(tools)
    rejected = [r for r in body["rejected"] if "broken.yaml" in r["source"]]
    assert rejected and "/" not in rejected[0]["source"]  # the file, not the directory
    assert rejected and rejected[0]["reason"]
    assert "bridge-secret-token" not in json.dumps(body)

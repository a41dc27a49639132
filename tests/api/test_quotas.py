"""Per-tenant quotas: schedules and webhooks a tenant may hold at once answer 429
`quota_exceeded` past their limit, in the error shape (real API)."""

from __future__ import annotations

from support import Api


def test_a_tenant_past_its_schedules_quota_gets_429(client: Api) -> None:
    sid = client.scripted_session({"text": "tick"})
    body = {"content": "tick", "every_s": 3600}
    for _ in range(100):  # tenant_max_schedules, by default
        assert client.http.post(f"/v1/sessions/{sid}/schedules", json=body).status_code == 201
    refused = client.http.post(f"/v1/sessions/{sid}/schedules", json=body)
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "quota_exceeded" and error["details"]["quota"] == "schedules"


def test_a_tenant_past_its_webhooks_quota_gets_429(client: Api) -> None:
    body = {"url": "http://127.0.0.1:9/hook", "events": ["turn.completed"]}
    for _ in range(20):  # tenant_max_webhooks, by default
        created = client.http.post("/v1/webhooks", json=body)
        assert created.status_code == 201, created.text
    refused = client.http.post("/v1/webhooks", json=body)
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["details"] == {"quota": "webhooks", "limit": 20}

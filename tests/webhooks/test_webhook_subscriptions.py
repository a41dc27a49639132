"""Subscribing, listing and deleting webhooks; the SSRF guard at creation and at delivery."""

from __future__ import annotations

import pytest
from support import Api

from cortex_workers.webhooks.sending import send
from cortex_workers.webhooks.signing import message_id, payload, sign


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.7/hooks",
        "http://localhost:9/hooks",  # resolves to loopback; only 127.0.0.1 is listed
    ],
)
def test_a_url_on_a_private_or_metadata_host_is_refused(client: Api, url: str) -> None:
    r = client.http.post("/v1/webhooks", json={"url": url, "events": ["turn.completed"]})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "webhook_url_blocked"


def test_an_unknown_event_or_a_bad_url_is_a_validation_error(client: Api) -> None:
    r = client.http.post(
        "/v1/webhooks", json={"url": "http://127.0.0.1:9/x", "events": ["turn.started"]}
    )
    assert r.status_code == 422
    r = client.http.post("/v1/webhooks", json={"url": "ftp://x/y", "events": ["job.completed"]})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_webhook_url"


def test_the_secret_is_shown_once_and_a_deleted_webhook_is_gone(client: Api, api: Api) -> None:
    body = {"url": "http://127.0.0.1:9/hooks", "events": ["job.completed", "batch.completed"]}
    created = client.http.post("/v1/webhooks", json=body).json()
    listed = client.http.get("/v1/webhooks").json()
    assert [w["id"] for w in listed] == [created["id"]]
    assert "secret" not in listed[0] and listed[0]["events"] == body["events"]
    assert client.http.get(f"/v1/webhooks/{created['id']}/deliveries").json() == []
    assert client.http.delete(f"/v1/webhooks/{created['id']}").status_code == 204
    assert client.http.delete(f"/v1/webhooks/{created['id']}").status_code == 404
    assert client.http.get(f"/v1/webhooks/{created['id']}/deliveries").status_code == 404


def test_delivery_refuses_a_loopback_host_that_is_not_listed() -> None:
    """Checked again at delivery time: DNS may answer otherwise than when it was created."""
    import uuid
    from datetime import UTC, datetime

    body = payload(type="job.completed", timestamp=datetime.now(UTC), data={"job_id": "j"})
    message = sign("whsec_" + "QUJD" * 8, msg_id=message_id(uuid.uuid4()), body=body)
    result = send("http://127.0.0.1:9/x", message, timeout_s=1, allowed_private_hosts=[])
    assert result.status_code is None and not result.delivered
    assert result.error is not None and result.error.startswith("webhook_url_blocked")

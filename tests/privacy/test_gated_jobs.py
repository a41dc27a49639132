"""Jobs and batches call providers through the provider gate: redacted before a remote
provider (failing closed), never sent in mode `local-only`, restored in the result (real
workers, a wire-level fake provider counting requests)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from privacy_support import REMOTE_KEY, Guarded, received
from support import Api, wait_until

EMAIL = "ann.lee@example.com"
ANYTHING = {"type": "object"}


def _post(client: Api, path: str, **body: Any) -> Any:
    return client.http.post(
        path, json={"instructions": "Return the input.", "result_schema": ANYTHING, **body}
    )


def _ended(client: Api, job_id: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        job = dict(client.http.get(f"/v1/jobs/{job_id}").json())
        return job if job["status"] in ("succeeded", "failed") else None

    return dict(wait_until(ended, timeout=30, interval=0.1, what=f"job {job_id}"))


def _settled(client: Api, path: str) -> None:
    """Wait until the job or batch at `path` is no longer queued or running."""
    wait_until(
        lambda: client.http.get(path).json()["status"] not in ("queued", "running"),
        timeout=60,
        interval=0.2,
        what=path,
    )


def test_a_job_s_key_and_email_never_reach_the_provider_and_come_back_restored(
    gclient: Api, guarded: Guarded
) -> None:
    tag = uuid.uuid4().hex
    value = {"note": f"{tag} key {REMOTE_KEY} mail {EMAIL}"}
    posted = _post(gclient, "/v1/jobs", input=value, provider="openai", model="gpt-4o")
    assert posted.status_code == 202, posted.text
    job = _ended(gclient, posted.json()["id"])
    bodies = received(guarded.remote, tag)
    assert len(bodies) == 1
    wire = json.dumps(bodies[0])
    assert REMOTE_KEY not in wire and EMAIL not in wire
    assert "[PROVIDER_KEY_1]" in wire and "[EMAIL_1]" in wire
    assert job["status"] == "succeeded", job["error"]
    assert job["result"] == value  # the fake echoes the input: restored for the tenant


def test_a_batch_is_redacted_input_by_input(gclient: Api, guarded: Guarded) -> None:
    tag = uuid.uuid4().hex
    inputs = [{"n": i, "note": f"{tag} mail {i}{EMAIL}"} for i in range(3)]
    posted = _post(gclient, "/v1/batches", inputs=inputs, provider="openai", model="gpt-4o")
    assert posted.status_code == 202, posted.text
    batch_id = posted.json()["id"]

    def done() -> dict[str, Any] | None:
        batch = dict(gclient.http.get(f"/v1/batches/{batch_id}").json())
        return batch if batch["status"] not in ("queued", "running") else None

    wait_until(done, timeout=60, interval=0.2, what="the batch")
    bodies = received(guarded.remote, tag)
    assert len(bodies) == 3 and all(EMAIL not in json.dumps(b) for b in bodies)


def test_a_job_whose_redaction_times_out_sends_nothing_and_fails_visibly(
    gclient: Api, guarded: Guarded
) -> None:
    tag = uuid.uuid4().hex
    hostile = f"{tag} " + "a" * 60 + "b"  # the operator pattern `(a|aa)+$` runs past 0.3 s
    before = len(guarded.remote.requests)
    posted = _post(gclient, "/v1/jobs", input=hostile, provider="openai", model="gpt-4o")
    job = _ended(gclient, posted.json()["id"])
    assert received(guarded.remote, tag) == [] and len(guarded.remote.requests) == before
    assert job["status"] == "failed" and job["error"]["code"] == "redaction_failed"


def test_a_local_only_tenant_s_jobs_and_batches_send_nothing_remote(guarded: Guarded) -> None:
    from cortex_workers.admin import create_key
    from cortex_workers.runtime import get_runtime
    from cortex_workers.store.db import transaction
    from cortex_workers.store.tenant_admin import set_overrides
    from cortex_workers.vocabulary import LlmMode

    name = f"local-jobs-{uuid.uuid4().hex[:8]}"
    tag = uuid.uuid4().hex
    before = len(guarded.remote.requests)
    with guarded.api.as_tenant(create_key(name)) as client:
        with transaction(get_runtime().db) as db:
            assert set_overrides(db, name, {"mode": LlmMode.LOCAL_ONLY})
        remote = [
            _post(client, path, provider="openai", model="gpt-4o", **body)
            for path, body in (("/v1/jobs", {"input": tag}), ("/v1/batches", {"inputs": [tag]}))
        ]
        for path, posted in zip(("/v1/jobs", "/v1/batches"), remote, strict=True):
            if posted.status_code == 202:  # accepted after all: let it run before counting
                _settled(client, f"{path}/{posted.json()['id']}")
        local = _post(client, "/v1/jobs", input={"note": tag}, provider="ollama")
        assert local.status_code == 202, local.text
        assert _ended(client, local.json()["id"])["status"] == "succeeded"
    assert received(guarded.remote, tag) == [] and len(guarded.remote.requests) == before
    assert received(guarded.local, tag) != []
    for refused in remote:
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "local_only"

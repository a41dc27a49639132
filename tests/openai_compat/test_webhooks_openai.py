"""A webhook of shape `openai` announces the end of a response in OpenAI's form, verified and
parsed by the SDK's `client.webhooks.unwrap`."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from fakes.webhook_receiver import Receiver
from openai_support import MODEL, script
from support import Api, wait_until

pytestmark = pytest.mark.servers  # on both CI passes: the API is checked on either server set


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def test_a_response_completed_webhook_in_openai_form_is_unwrapped_by_the_sdk(
    oai: openai.OpenAI, client: Api, receiver: Receiver
) -> None:
    url = receiver.start()
    created = client.http.post(
        "/v1/webhooks", json={"url": url, "events": ["turn.completed"], "shape": "openai"}
    )
    assert created.status_code == 201, created.text
    assert created.json()["shape"] == "openai"
    secret = created.json()["secret"]
    receiver.secret = secret
    client.wait_turn(client.submit(client.scripted_session({"text": "not a response"})))
    response = oai.responses.create(model=MODEL, input="hi", metadata=script("done"))
    got = wait_until(
        lambda: [r for r in receiver.received if r.verified], timeout=30, what="webhook sent"
    )
    assert len(got) == 1  # the plain turn has no OpenAI form: not sent
    event = oai.webhooks.unwrap(got[0].body, got[0].headers, secret=secret)
    assert event.type == "response.completed"
    assert event.data.id == response.id


def test_a_response_cut_at_max_output_tokens_is_announced_as_incomplete(
    oai: openai.OpenAI, client: Api, receiver: Receiver
) -> None:
    url = receiver.start()
    created = client.http.post(
        "/v1/webhooks", json={"url": url, "events": ["turn.completed"], "shape": "openai"}
    )
    assert created.status_code == 201, created.text
    receiver.secret = secret = created.json()["secret"]
    response = oai.responses.create(
        model=MODEL, input="count", max_output_tokens=1, metadata=script("one two")
    )
    assert response.status == "incomplete"
    got = wait_until(
        lambda: [r for r in receiver.received if r.verified], timeout=30, what="webhook sent"
    )
    event = oai.webhooks.unwrap(got[0].body, got[0].headers, secret=secret)
    assert event.type == "response.incomplete"
    assert event.data.id == response.id

"""The Responses API through the official `openai` SDK: plain, streamed, background, polled,
chained with `previous_response_id`, cancelled, deleted, and with the async client."""

from __future__ import annotations

import asyncio

import openai
import pytest
from openai_support import MODEL, script
from support import Api, wait_until

pytestmark = pytest.mark.servers  # on both CI passes: the API is checked on either server set


def test_a_plain_response_completes_with_the_scripted_text_and_usage(oai: openai.OpenAI) -> None:
    response = oai.responses.create(
        model=MODEL, input="Hi there", metadata=script("Hello from the script.")
    )
    assert response.status == "completed"
    assert response.id.startswith("resp_")
    assert response.output_text == "Hello from the script."
    assert response.output[0].type == "message"
    assert response.usage is not None
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    again = oai.responses.retrieve(response.id)
    assert again.output_text == "Hello from the script."
    assert again.metadata == response.metadata


def test_a_streamed_response_sends_gap_free_events_ending_in_completed(oai: openai.OpenAI) -> None:
    stream = oai.responses.create(
        model=MODEL, input="Hi", metadata=script("one two three four"), stream=True
    )
    events = list(stream)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    for name in (
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ):
        assert types.count(name) == 1, name
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "one two three four"
    assert events[-1].response.output_text == "one two three four"


def test_a_background_response_is_queued_at_once_and_polled_until_completed(
    oai: openai.OpenAI,
) -> None:
    created = oai.responses.create(
        model=MODEL,
        input="Work slowly",
        background=True,
        metadata=script({"text": "slow and steady", "first_token_ms": 300}),
    )
    assert created.status in ("queued", "in_progress")
    assert created.background is True
    done = wait_until(
        lambda: (r := oai.responses.retrieve(created.id)).status == "completed" and r,
        timeout=60,
        what="background response completed",
    )
    assert done.output_text == "slow and steady"


def test_previous_response_id_chains_three_responses_in_one_history(oai: openai.OpenAI) -> None:
    first = oai.responses.create(
        model=MODEL,
        input="My name is Ada.",
        metadata=script("Nice to meet you.", "Noted.", "You are Ada, who likes tea."),
    )
    second = oai.responses.create(model=MODEL, input="I like tea.", previous_response_id=first.id)
    third = oai.responses.create(
        model=MODEL, input="What do you know?", previous_response_id=second.id
    )
    assert second.previous_response_id == first.id
    assert [first.output_text, second.output_text] == ["Nice to meet you.", "Noted."]
    assert third.status == "completed", third.error
    assert third.output_text == "You are Ada, who likes tea."
    items = oai.responses.input_items.list(third.id)
    assert [i.content[0].text for i in items.data] == ["What do you know?"]


def test_continuing_an_earlier_response_forks_instead_of_mixing_histories(
    oai: openai.OpenAI,
) -> None:
    first = oai.responses.create(model=MODEL, input="one", metadata=script("A1", "A2", "A3"))
    oai.responses.create(model=MODEL, input="two", previous_response_id=first.id)
    branch = oai.responses.create(
        model=MODEL,
        input="other two",
        previous_response_id=first.id,
        metadata=script("B2"),
    )
    assert branch.status == "completed", branch.error
    assert branch.output_text == "B2"
    assert branch.previous_response_id == first.id


def test_a_running_background_response_is_cancelled_and_cancel_is_idempotent(
    oai: openai.OpenAI,
) -> None:
    slow = " ".join(f"w{i}" for i in range(200))
    created = oai.responses.create(
        model=MODEL,
        input="Talk a lot",
        background=True,
        metadata=script({"text": slow, "token_ms": 50}),
    )
    cancelled = oai.responses.cancel(created.id)
    assert cancelled.status == "cancelled"
    assert oai.responses.cancel(created.id).status == "cancelled"
    assert oai.responses.retrieve(created.id).status == "cancelled"


def test_cancelling_a_foreground_response_answers_400(oai: openai.OpenAI) -> None:
    done = oai.responses.create(model=MODEL, input="hi", metadata=script("ok"))
    with pytest.raises(openai.BadRequestError) as caught:
        oai.responses.cancel(done.id)
    assert caught.value.body["type"] == "invalid_request_error"  # type: ignore[index]


def test_a_deleted_response_is_gone(oai: openai.OpenAI) -> None:
    done = oai.responses.create(model=MODEL, input="hi", metadata=script("ok"))
    oai.responses.delete(done.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(done.id)


def test_input_messages_with_instructions_reach_the_model(oai: openai.OpenAI) -> None:
    response = oai.responses.create(
        model=MODEL,
        instructions="Answer like a pirate.",
        input=[
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "input_text", "text": "Ahoy?"}]},
        ],
        metadata=script({"text": "Arr.", "echo_context": True}),
    )
    assert response.output_text.startswith("Arr.")
    assert "Answer like a pirate." in response.output_text
    assert "Be brief." in response.output_text
    assert response.instructions == "Answer like a pirate."


def test_models_lists_the_usable_models_and_auto(oai: openai.OpenAI) -> None:
    ids = [m.id for m in oai.models.list()]
    assert "auto" in ids and MODEL in ids
    assert not any("*" in i for i in ids)


def test_the_async_client_creates_streams_and_retrieves(api: Api, tenant_key: str) -> None:
    async def run() -> tuple[str, str, str]:
        async with openai.AsyncOpenAI(
            base_url=f"{api.base_url}/v1", api_key=tenant_key, max_retries=0
        ) as client:
            plain = await client.responses.create(
                model=MODEL, input="hi", metadata=script("async hello")
            )
            stream = await client.responses.create(
                model=MODEL, input="hi", metadata=script("async stream"), stream=True
            )
            text = "".join(
                [e.delta async for e in stream if e.type == "response.output_text.delta"]
            )
            again = await client.responses.retrieve(plain.id)
            conversation = await client.conversations.create(metadata={"topic": "async"})
            return plain.output_text, text, again.output_text + conversation.metadata["topic"]

    assert asyncio.run(run()) == ("async hello", "async stream", "async helloasync")


def test_an_idempotency_key_creates_one_response(oai: openai.OpenAI) -> None:
    def create(text: str) -> openai.types.responses.Response:
        return oai.responses.create(
            model=MODEL,
            input=text,
            metadata=script("once"),
            extra_headers={"Idempotency-Key": "openai-compat-key-1"},
        )

    first, again = create("same"), create("same")
    assert again.id == first.id
    with pytest.raises(openai.BadRequestError) as caught:
        create("different")
    assert caught.value.code == "idempotency_key_reused"


def test_a_response_not_stored_cannot_be_retrieved(oai: openai.OpenAI) -> None:
    response = oai.responses.create(model=MODEL, input="hi", store=False, metadata=script("x"))
    assert response.output_text == "x"
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(response.id)

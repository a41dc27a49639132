"""Conversations through the SDK: a conversation is a session, its items its messages, and a
response in it is its next turn."""

from __future__ import annotations

import openai
import pytest
from openai_support import MODEL, script

pytestmark = pytest.mark.servers  # on both CI passes: the API is checked on either server set


def test_a_conversation_is_created_with_items_and_metadata(oai: openai.OpenAI) -> None:
    conversation = oai.conversations.create(
        items=[{"type": "message", "role": "user", "content": "Remember: blue."}],
        metadata={"topic": "colours"},
    )
    assert conversation.id.startswith("conv_")
    assert oai.conversations.retrieve(conversation.id).metadata == {"topic": "colours"}
    items = oai.conversations.items.list(conversation.id, order="asc")
    assert [i.content[0].text for i in items.data] == ["Remember: blue."]  # type: ignore[union-attr]
    updated = oai.conversations.update(conversation.id, metadata={"topic": "paint"})
    assert updated.metadata == {"topic": "paint"}


def test_responses_in_a_conversation_add_their_turns_to_its_items(oai: openai.OpenAI) -> None:
    conversation = oai.conversations.create()
    first = oai.responses.create(
        model=MODEL,
        input="Hello",
        conversation=conversation.id,
        metadata=script("Hi!", "Still here."),
    )
    assert first.conversation is not None and first.conversation.id == conversation.id
    added = oai.conversations.items.create(
        conversation.id, items=[{"type": "message", "role": "user", "content": "A note."}]
    )
    assert len(added.data) == 1
    second = oai.responses.create(model=MODEL, input="Again", conversation=conversation.id)
    assert second.output_text == "Still here."
    texts = [
        i.content[0].text  # type: ignore[union-attr]
        for i in oai.conversations.items.list(conversation.id, order="asc").data
    ]
    assert texts == ["Hello", "Hi!", "A note.", "Again", "Still here."]
    page = oai.conversations.items.list(conversation.id, order="asc", limit=2)
    assert page.has_more and len(page.data) == 2
    rest = oai.conversations.items.list(conversation.id, order="asc", after=page.data[-1].id)
    assert len(rest.data) == 3


def test_an_item_is_retrieved_and_deleted_and_a_conversation_deleted(oai: openai.OpenAI) -> None:
    conversation = oai.conversations.create(
        items=[{"type": "message", "role": "user", "content": "drop me"}]
    )
    item = oai.conversations.items.list(conversation.id).data[0]
    assert oai.conversations.items.retrieve(item.id, conversation_id=conversation.id).id == item.id
    oai.conversations.items.delete(item.id, conversation_id=conversation.id)
    assert oai.conversations.items.list(conversation.id).data == []
    assert oai.conversations.delete(conversation.id).deleted is True
    try:
        oai.conversations.retrieve(conversation.id)
        raise AssertionError("a deleted conversation was found")
    except openai.NotFoundError:
        pass

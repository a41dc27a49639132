"""`input_image` parts through the official `openai` SDK: the image reaches the model (the
scripted model reports it), stays in the chain's history, shows in the input items and in a
conversation's items, and is refused beyond its limits in OpenAI's error shape."""

from __future__ import annotations

import base64
import json

import openai
import pytest
from openai_support import MODEL, script

pytestmark = pytest.mark.servers  # on both CI passes: the API is checked on either server set

DATA_URL = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(32)).decode()
HTTPS_URL = "https://images.example/cat.png"


def _asking(*urls: str, text: str = "What is in the picture?") -> list[dict[str, object]]:
    parts: list[dict[str, object]] = [{"type": "input_text", "text": text}]
    parts += [{"type": "input_image", "image_url": u, "detail": "auto"} for u in urls]
    return [{"role": "user", "content": parts}]


def test_an_input_image_reaches_the_model_and_stays_in_the_chain(oai: openai.OpenAI) -> None:
    first = oai.responses.create(
        model=MODEL,
        input=_asking(DATA_URL, HTTPS_URL),  # type: ignore[arg-type]
        metadata=script({"text": "", "echo_request": True}, {"text": "", "echo_request": True}),
    )
    assert first.status == "completed"
    assert json.loads(first.output_text)["images"] == [DATA_URL[:64], HTTPS_URL]
    items = oai.responses.input_items.list(first.id).data
    (item,) = items
    assert [part.type for part in item.content] == ["input_text", "input_image", "input_image"]  # type: ignore[union-attr]
    second = oai.responses.create(model=MODEL, input="And now?", previous_response_id=first.id)
    assert json.loads(second.output_text)["images"] == [DATA_URL[:64], HTTPS_URL]


def test_a_conversation_item_may_carry_an_image(oai: openai.OpenAI) -> None:
    conversation = oai.conversations.create(items=_asking(HTTPS_URL))  # type: ignore[arg-type]
    (item,) = oai.conversations.items.list(conversation.id).data
    assert item.type == "message"
    assert [part.type for part in item.content] == ["input_text", "input_image"]  # type: ignore[union-attr]


def test_too_many_images_and_a_bad_one_are_400(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as many:
        oai.responses.create(model=MODEL, input=_asking(*[HTTPS_URL] * 9))  # type: ignore[arg-type]
    assert many.value.body["code"] == "too_many_images"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as bad:
        oai.responses.create(model=MODEL, input=_asking("ftp://x.example/a.png"))  # type: ignore[arg-type]
    assert bad.value.body["code"] == "bad_image"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as by_file:
        oai.responses.create(
            model=MODEL,
            input=[{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}],  # type: ignore[list-item]
        )
    assert by_file.value.body["param"] == "input[0].content[0].file_id"  # type: ignore[index]

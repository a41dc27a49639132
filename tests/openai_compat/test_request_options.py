"""`temperature`, `max_output_tokens` (and the `incomplete` status) and `text.format`
json_schema through the official `openai` SDK: each reaches the model call and is echoed."""

from __future__ import annotations

import json

import openai
import pytest
from openai_support import MODEL, script
from pydantic import BaseModel

pytestmark = pytest.mark.servers  # on both CI passes: the API is checked on either server set


def test_temperature_and_max_output_tokens_reach_the_model_call(oai: openai.OpenAI) -> None:
    response = oai.responses.create(
        model=MODEL,
        input="Hi",
        temperature=0.25,
        max_output_tokens=500,
        metadata=script({"text": "", "echo_request": True}),
    )
    asked = json.loads(response.output_text)
    assert asked["temperature"] == 0.25
    assert asked["max_tokens"] == 500
    assert response.temperature == 0.25
    assert response.max_output_tokens == 500
    assert response.status == "completed"


def test_an_answer_cut_at_max_output_tokens_is_incomplete(oai: openai.OpenAI) -> None:
    response = oai.responses.create(
        model=MODEL,
        input="Count",
        max_output_tokens=3,
        metadata=script("one two three four five six"),
    )
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == "one two three "
    assert oai.responses.retrieve(response.id).status == "incomplete"


def test_a_streamed_cut_answer_ends_with_response_incomplete(oai: openai.OpenAI) -> None:
    events = list(
        oai.responses.create(
            model=MODEL,
            input="Count",
            max_output_tokens=2,
            metadata=script("one two three"),
            stream=True,
        )
    )
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"  # type: ignore[union-attr]


class City(BaseModel):
    name: str
    country: str


def test_text_format_json_schema_reaches_the_model_and_parses(oai: openai.OpenAI) -> None:
    answer = '{"name": "Paris", "country": "France"}'
    parsed = oai.responses.parse(
        model=MODEL, input="A city?", text_format=City, metadata=script(answer)
    )
    assert parsed.output_parsed == City(name="Paris", country="France")
    assert parsed.text is not None and parsed.text.format is not None
    assert parsed.text.format.type == "json_schema"
    echoed = oai.responses.create(
        model=MODEL,
        input="A city?",
        text={
            "format": {"type": "json_schema", "name": "city", "schema": City.model_json_schema()}
        },
        metadata=script({"text": "", "echo_request": True}),
    )
    assert json.loads(echoed.output_text)["result_schema"]["properties"]["name"]["type"] == "string"


def test_an_unsupported_text_format_is_refused_by_name(oai: openai.OpenAI) -> None:
    try:
        oai.responses.create(model=MODEL, input="Hi", text={"format": {"type": "json_object"}})
    except openai.BadRequestError as err:
        assert err.body["param"] == "text.format.type"  # type: ignore[index]
    else:
        raise AssertionError("json_object was accepted")

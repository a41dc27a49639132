"""Every error the SDK can meet on these routes reads OpenAI's shape:
`{"error": {"message", "type", "param", "code"}}`."""

from __future__ import annotations

import httpx
import openai
import pytest
from openai_support import MODEL, script
from support import Api

pytestmark = pytest.mark.servers  # on both CI passes: the API is checked on either server set


def _error(exc: openai.APIStatusError) -> dict[str, object]:
    body = exc.response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


def test_an_unknown_model_is_404_model_not_found(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        oai.responses.create(model="no-such-model", input="hi")
    error = _error(caught.value)
    assert error["code"] == "model_not_found"
    assert error["type"] == "invalid_request_error"


def test_an_unknown_response_is_404(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        oai.responses.retrieve("resp_" + "0" * 32)
    assert _error(caught.value)["type"] == "invalid_request_error"
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve("not-an-id")


def test_an_unsupported_field_is_400_naming_it(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        oai.responses.create(model=MODEL, input="hi", top_p=0.5)
    error = _error(caught.value)
    assert error["param"] == "top_p"
    assert "top_p" in str(error["message"])
    assert error["code"] == "unsupported_parameter"
    with pytest.raises(openai.BadRequestError) as tools:
        oai.responses.create(
            model=MODEL,
            input="hi",
            tools=[{"type": "file_search", "vector_store_ids": ["vs_1"]}],
        )
    assert _error(tools.value)["param"] == "tools[0].type"


def test_an_invalid_body_is_400_with_the_field_as_param(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        oai.responses.create(model=MODEL, input=[{"role": "wizard", "content": "hi"}])  # type: ignore[list-item]
    error = _error(caught.value)
    assert error["type"] == "invalid_request_error"
    assert str(error["param"]).startswith("input")


def test_a_bad_starting_after_is_400(oai: openai.OpenAI) -> None:
    done = oai.responses.create(model=MODEL, input="hi", metadata=script("ok"))
    with pytest.raises(openai.BadRequestError) as caught:
        list(oai.responses.retrieve(done.id, stream=True, starting_after=10_000))
    assert _error(caught.value)["param"] == "starting_after"
    with pytest.raises(openai.BadRequestError):
        list(oai.responses.retrieve(done.id, stream=True, starting_after=-1))


def test_another_tenants_response_and_conversation_are_404(
    oai: openai.OpenAI, other_oai: openai.OpenAI
) -> None:
    mine = oai.responses.create(model=MODEL, input="hi", metadata=script("mine"))
    conversation = oai.conversations.create()
    with pytest.raises(openai.NotFoundError):
        other_oai.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        other_oai.responses.create(model=MODEL, input="hi", previous_response_id=mine.id)
    with pytest.raises(openai.NotFoundError):
        other_oai.conversations.retrieve(conversation.id)


def test_a_missing_key_is_401_in_openais_shape(api: Api) -> None:
    answer = httpx.post(f"{api.base_url}/v1/responses", json={"model": MODEL, "input": "hi"})
    assert answer.status_code == 401
    assert answer.json()["error"]["type"] == "authentication_error"

"""Images in a user message on the native API: stored with the message, sent to OpenAI-style
providers as `image_url` parts and to Anthropic as image blocks, reported by the scripted
model, counted by the dry run, and refused beyond their limits with a clear error."""

from __future__ import annotations

import base64
import json

import pytest
from support import Api, Fakes

from cortex_workers.api.images import checked_images
from cortex_workers.errors import InvalidRequest, TooLarge
from cortex_workers.settings import Settings

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(64)).decode()
DATA_URL = f"data:image/png;base64,{PNG}"
HTTPS_URL = "https://images.example/cat.png"


def _parts(text: str, *urls: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}, *({"type": "image", "url": u} for u in urls)]


def test_an_image_reaches_the_scripted_model_and_stays_with_its_message(client: Api) -> None:
    sid = client.scripted_session({"text": "", "echo_request": True}, {"echo_request": True})
    r = client.http.post(
        f"/v1/sessions/{sid}/turns", json={"content": _parts("What is this?", DATA_URL)}
    )
    assert r.status_code == 202, r.text
    turn = client.wait_turn(r.json()["id"])
    assert turn["status"] == "done", turn
    asked = json.loads(turn["answer"])
    assert asked["images"] == [DATA_URL[:64]]
    user = next(m for m in client.messages(sid) if m["role"] == "user")
    assert user["content"] == "What is this?"
    assert user["images"] == [DATA_URL]
    later = client.wait_turn(client.submit(sid, "And now?"))
    assert json.loads(later["answer"])["images"] == [DATA_URL[:64]]  # still in the history


def test_an_image_only_message_is_a_turn(client: Api) -> None:
    sid = client.scripted_session({"text": "", "echo_request": True})
    r = client.http.post(
        f"/v1/sessions/{sid}/turns", json={"content": [{"type": "image", "url": HTTPS_URL}]}
    )
    assert r.status_code == 202, r.text
    turn = client.wait_turn(r.json()["id"])
    asked = json.loads(turn["answer"])
    assert asked["images"] == [HTTPS_URL]
    assert asked["roles"][-1] == "user"


def test_openai_gets_image_url_parts_and_anthropic_image_blocks(client: Api, fakes: Fakes) -> None:
    sid = client.create_session(provider="openai", model="gpt-4o")["id"]
    key = "describe the openai picture"
    r = client.http.post(
        f"/v1/sessions/{sid}/turns", json={"content": _parts(key, DATA_URL, HTTPS_URL)}
    )
    assert r.status_code == 202, r.text
    assert client.wait_turn(r.json()["id"])["status"] == "done"
    (sent,) = fakes.openai.requests_for(key)
    user = next(m for m in sent.body["messages"] if m["role"] == "user")
    assert user["content"] == [
        {"type": "text", "text": key},
        {"type": "image_url", "image_url": {"url": DATA_URL}},
        {"type": "image_url", "image_url": {"url": HTTPS_URL}},
    ]

    sid = client.create_session(provider="anthropic", model="claude-sonnet-4-5")["id"]
    key = "describe the anthropic picture"
    r = client.http.post(
        f"/v1/sessions/{sid}/turns", json={"content": _parts(key, DATA_URL, HTTPS_URL)}
    )
    assert r.status_code == 202, r.text
    assert client.wait_turn(r.json()["id"])["status"] == "done"
    (sent,) = fakes.anthropic.requests_for(key)
    user = next(m for m in sent.body["messages"] if m["role"] == "user")
    assert user["content"] == [
        {"type": "text", "text": key},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "image", "source": {"type": "url", "url": HTTPS_URL}},
    ]


def test_the_dry_run_counts_images_and_routes_only_to_models_that_read_them(client: Api) -> None:
    sid = client.create_session(provider="scripted", model="scripted-1")["id"]
    plain = client.post_turn(sid, "look", dry_run=True).json()
    r = client.http.post(
        f"/v1/sessions/{sid}/turns",
        json={"content": _parts("look", DATA_URL, DATA_URL), "dry_run": True},
    )
    assert r.status_code == 200, r.text
    pictured = r.json()
    assert pictured["estimate"]["input_tokens"] >= plain["estimate"]["input_tokens"] + 2 * 1_600

    auto = client.create_session(model="auto")["id"]
    r = client.http.post(
        f"/v1/sessions/{auto}/turns", json={"content": _parts("look", DATA_URL), "dry_run": True}
    )
    assert r.status_code == 200, r.text
    route = r.json()["route"]
    assert route["model"] != "scripted-1"  # the catalog says it reads no images
    rejected = {(x["provider"], x["model"]): x for x in route["rejected"]}
    assert "vision" in rejected[("scripted", "scripted-1")]["detail"]


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ([{"type": "image", "url": "http://plain.example/a.png"}], "bad_image"),
        ([{"type": "image", "url": "data:text/html;base64,PGI+"}], "bad_image"),
        ([{"type": "image", "url": "data:image/png;base64,%%%%"}], "bad_image"),
        ([{"type": "image", "url": HTTPS_URL}] * 9, "too_many_images"),
        ([{"type": "text", "text": ""}], "validation_error"),
    ],
)
def test_bad_images_are_refused_naming_the_problem(
    client: Api, content: list[dict[str, str]], code: str
) -> None:
    sid = client.scripted_session({"text": "never"})
    r = client.http.post(f"/v1/sessions/{sid}/turns", json={"content": content})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == code
    assert client.messages(sid) == []


def test_an_image_over_the_size_limit_is_too_large_and_the_count_is_a_setting() -> None:
    settings = Settings(image_max_bytes=48, images_per_message=1)
    small = "data:image/png;base64,AAAA"
    assert checked_images(settings, [small], "content") == (small,)
    with pytest.raises(TooLarge):
        checked_images(settings, [DATA_URL], "content")
    with pytest.raises(InvalidRequest) as many:
        checked_images(settings, [HTTPS_URL, HTTPS_URL], "content")
    assert many.value.code == "too_many_images"

"""A response's stream resumes with `starting_after`: after a cut connection, after its worker
was SIGKILLed, and through another API process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import openai
import pytest
from fakes.tcp_proxy import TcpProxy
from openai_support import MODEL, script
from support import Api, Workers, free_port, wait_until

pytestmark = pytest.mark.servers  # on both CI passes: the API is checked on either server set

TEXT = " ".join(f"word{i}" for i in range(40))
DELTA = "response.output_text.delta"


def _deltas(events: list[object]) -> str:
    return "".join(getattr(e, "delta", "") for e in events if getattr(e, "type", "") == DELTA)


def test_a_stream_cut_by_a_proxy_resumes_with_starting_after_to_the_same_text(
    oai: openai.OpenAI, proxy: TcpProxy, tenant_key: str
) -> None:
    created = oai.responses.create(
        model=MODEL, input="go", background=True, metadata=script({"text": TEXT, "token_ms": 40})
    )
    cut = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key=tenant_key, max_retries=0)
    seen: list[object] = []
    with pytest.raises((httpx.HTTPError, openai.APIError)):
        for event in cut.responses.retrieve(created.id, stream=True):
            seen.append(event)
            if len(seen) == 8:
                proxy.cut_all()
    last = seen[-1].sequence_number  # type: ignore[attr-defined]
    rest = list(oai.responses.retrieve(created.id, stream=True, starting_after=last))
    assert rest[0].sequence_number == last + 1
    assert [e.sequence_number for e in rest] == list(range(last + 1, last + 1 + len(rest)))
    assert rest[-1].type == "response.completed"
    assert _deltas(seen) + _deltas(rest) == TEXT
    replay = list(oai.responses.retrieve(created.id, stream=True))
    assert _deltas(replay) == TEXT
    assert len(replay) == last + 1 + len(rest)


@pytest.fixture
def second_api() -> Iterator[str]:
    """Another API process on the same stack (uvicorn, as `cortex-workers api` runs it)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "config.asgi:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(base), timeout=60, what="second api ready")
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


def _ready(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_background_response_survives_a_worker_kill_and_resumes_through_another_api(
    oai: openai.OpenAI, client: Api, workers: Workers, second_api: str, tenant_key: str
) -> None:
    created = oai.responses.create(
        model=MODEL, input="go", background=True, metadata=script({"text": TEXT, "token_ms": 100})
    )
    seen: list[object] = []
    for event in oai.responses.retrieve(created.id, stream=True):
        seen.append(event)
        if sum(1 for e in seen if getattr(e, "type", "") == DELTA) == 5:
            break
    workers.kill("llm")
    workers.start("llm")
    last = seen[-1].sequence_number  # type: ignore[attr-defined]
    other = openai.OpenAI(base_url=f"{second_api}/v1", api_key=tenant_key, max_retries=0)
    rest = list(other.responses.retrieve(created.id, stream=True, starting_after=last))
    assert rest[-1].type == "response.completed"
    final = rest[-1].response  # type: ignore[attr-defined]
    assert final.output_text == TEXT
    restarted = [
        e for e in rest if e.type == "response.output_item.done" and e.item.status == "incomplete"
    ]
    last_item = max(e.output_index for e in rest if e.type == "response.output_text.delta")
    after_restart = "".join(
        e.delta
        for e in rest
        if e.type == "response.output_text.delta" and e.output_index == last_item
    )
    assert after_restart == TEXT
    assert len(restarted) <= 1
    turn = client.turn(created.id.removeprefix("resp_"))
    assert turn["status"] == "done"
    assert turn["answer"] == TEXT
    assert oai.responses.retrieve(created.id).status == "completed"

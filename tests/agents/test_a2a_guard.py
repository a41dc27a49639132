"""A2A calls go through the pinned-address guard of plugins and webhooks (docs/security.md):
a private host is allowed only where its own card says so, never a URL the fetched agent card
names elsewhere; an answer larger than the cap is refused; the environment's proxies are
ignored; and each request connects to the address its host was checked at, so a DNS answer
that changes between the check and the connect (rebinding) reaches nothing.

The first tests run agent tasks end to end (real API, real workers, real a2a-sdk servers
counting the requests they receive); the proxy and rebinding ones call the A2A client of the
workers (`run_remote`) in this process, so that the environment and the DNS answers are the
test's (a counting proxy, a resolver whose later answers point at another real server)."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from support import Api, free_port

from agents.a2a_server import A2aServer
from agents.helpers import tasks
from cortex_workers.agents.a2a import RemoteCall, run_remote
from cortex_workers.agents.cards import A2aCard
from cortex_workers.tools import http_guard
from cortex_workers.vocabulary import TaskStatus


def _task(client: Api, agent: str, text: str) -> dict[str, Any]:
    """A session whose model calls `agent` with `text`: the agent's task, once the turn ended."""
    sid = client.scripted_session(
        {"tool_calls": [{"name": f"{agent}_agent", "arguments": {"task": text}}]},
        {"text": "Done."},
        tools=[],
        agents=[agent],
    )
    turn = client.wait_turn(client.submit(sid, "hand it over"), timeout=90)
    assert turn["status"] == "done", turn.get("error")
    (task,) = tasks(client, sid)
    return dict(task)


def test_a_url_the_fetched_card_names_is_held_to_public_addresses(
    client: Api, decoy_servers: tuple[Any, Any]
) -> None:
    decoy, target = decoy_servers
    before = len(target.requests)
    task = _task(client, "translator_decoy", f"bonjour {uuid.uuid4().hex}")
    assert target.requests[before:] == []  # the card's allow_private is not the target's
    assert "GET /.well-known/agent-card.json" in decoy.requests  # its own host was allowed
    assert task["status"] == "failed"
    assert task["error"]["code"] == "blocked_address"
    assert "translator_decoy agent" in task["error"]["message"]
    assert "localhost" not in task["error"]["message"]


def test_an_answer_larger_than_the_cap_is_refused(client: Api, big_server: Any) -> None:
    tag = uuid.uuid4().hex
    task = _task(client, "translator_big", tag)
    assert tag in big_server.executor.messages  # the call was made; its answer is 5 MiB
    assert task["status"] == "failed" and task["result"] is None
    assert task["error"]["code"] == "agent_error"
    assert "translator_big agent" in task["error"]["message"]


# --- in this process: the environment's proxies, and DNS rebinding ----------------------


class _Proxy(ThreadingHTTPServer):
    """Records every request it gets and answers 502."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.requests: list[str] = []


class _ProxyHandler(BaseHTTPRequestHandler):
    server: _Proxy

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _any(self) -> None:
        self.server.requests.append(f"{self.command} {self.path}")
        self.send_response(502)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_CONNECT = _any


@pytest.fixture
def counting_proxy() -> Iterator[_Proxy]:
    server = _Proxy()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _call(text: str) -> RemoteCall:
    return RemoteCall(
        text=text,
        message_id=uuid.uuid4().hex,
        remote_task_id=None,
        remember=lambda _remote_id: None,
        timeout_s=30,
        budget_s=30,
        still_ours=lambda: True,
    )


def _card(url: str) -> A2aCard:
    return A2aCard(
        name="translator",
        description="A remote translator.",
        url=url,
        allow_private=True,
        poll_s=0.3,
    )


def test_the_environment_s_proxies_are_ignored(
    a2a_server: Any, counting_proxy: _Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = f"http://127.0.0.1:{counting_proxy.server_address[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, address)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    outcome = run_remote(_card(a2a_server.url), _call("hallo"))
    # only the agent's: other clients of this process (the API's) may honour the variables
    assert [r for r in counting_proxy.requests if a2a_server.url in r] == []
    assert outcome is not None and outcome.status == TaskStatus.COMPLETED, outcome
    assert outcome.result == "TRANSLATED(hallo)"


def _answer(ip: str, port: int) -> list[tuple[Any, ...]]:
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]


def test_each_request_connects_to_the_address_its_host_was_checked_at(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host, port = "agent.pinned.test", free_port()
    pinned = A2aServer(port, url=f"http://{host}:{port}")  # on 127.0.0.1
    rebound = A2aServer(port, host="127.0.0.2")  # where a second answer for the host points
    checked: list[str] = []
    later: list[str] = []
    real = socket.getaddrinfo

    def check_dns(name: str, *args: Any) -> list[tuple[Any, ...]]:
        checked.append(name)
        return _answer("127.0.0.1", port) if name == host else list(real(name, *args))

    def rebinding_dns(name: str | bytes, *args: Any, **kw: Any) -> list[tuple[Any, ...]]:
        if (name.decode() if isinstance(name, bytes) else name) == host:  # anyio sends bytes
            later.append(host)
            return _answer("127.0.0.2", port)
        return list(real(name, *args, **kw))

    # the guard's lookup (its resolver) answers the checked address; any later lookup of the
    # name (a connect that resolves it again) gets the rebound one
    monkeypatch.setitem(http_guard.resolve_checked.__kwdefaults__, "resolver", check_dns)
    monkeypatch.setattr(socket, "getaddrinfo", rebinding_dns)
    pinned.start()
    rebound.start()
    started = len(pinned.requests), len(rebound.requests)  # their own readiness checks
    try:
        outcome = run_remote(_card(f"http://{host}:{port}"), _call("hola"))
    finally:
        pinned.stop()
        rebound.stop()
    assert rebound.requests[started[1] :] == [] and later == []  # never resolved again
    assert outcome is not None and outcome.status == TaskStatus.COMPLETED, outcome
    assert outcome.result == "TRANSLATED(hola)"
    sent = pinned.requests[started[0] :]
    assert len(checked) == len(sent) >= 2, (checked, sent)  # each request: one lookup, checked

"""Async HTTP helpers for the benchmark: sessions, turns, SSE followers, bounded fan-out."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import aiohttp
import httpx

from scripts.faults.driver import SseLines

T = TypeVar("T")
A = TypeVar("A")

TERMINAL = ("done", "failed", "cancelled")


def words(n: int, prefix: str = "") -> str:
    """`n` whitespace-separated tokens (the scripted model streams one per token)."""
    body = " ".join(f"w{i}" for i in range(n - (1 if prefix else 0)))
    return f"{prefix} {body}".strip() if prefix else body


_ssl: ssl.SSLContext | None = None


def make_client(
    base: str, key: str, *, connections: int = 4, timeout: float = 60.0
) -> httpx.AsyncClient:
    """A client with a small pool. httpcore scans its whole pool for every request, which
    costs O(pool size) CPU per request; the benchmark's drivers therefore give each
    concurrent user (or SSE follower) its own small client rather than one large pool, so
    that the load generator's own CPU stays small on a 2-core machine."""
    global _ssl
    if _ssl is None:  # loading the CA bundle per client would cost ~20 ms each
        _ssl = ssl.create_default_context()
    return httpx.AsyncClient(
        base_url=base,
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx.Timeout(timeout, connect=30.0),
        limits=httpx.Limits(
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=4,  # below uvicorn's 5 s keep-alive: never reuse a closing one
        ),
        verify=_ssl,
    )


class Reply(Protocol):
    @property
    def status_code(self) -> int: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...


class Poster(Protocol):
    """What `create_session` and `submit_turn` need: an httpx client or a `LeanPoster`."""

    async def post(self, url: str, *, json: Any = None) -> Reply: ...


@dataclass(frozen=True)
class LeanReply:
    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


class LeanPoster:
    """JSON POSTs over one kept-alive aiohttp connection, for the throughput driver. httpx
    costs about 2 ms of CPU per request on this machine and aiohttp a fraction of that; the
    load generator shares the two cores with the stack it measures, so its own CPU is
    throughput the stack does not get."""

    def __init__(self, base: str, key: str, *, timeout: float = 60.0) -> None:
        self._session = aiohttp.ClientSession(
            base_url=base,
            headers={"Authorization": f"Bearer {key}"},
            connector=aiohttp.TCPConnector(limit=1, keepalive_timeout=4),
            timeout=aiohttp.ClientTimeout(total=timeout, connect=30.0),
        )

    async def post(self, url: str, *, json: Any = None) -> LeanReply:
        async with self._session.post(url, json=json) as r:
            return LeanReply(r.status, await r.text())

    async def aclose(self) -> None:
        await self._session.close()


SESSION_EXTRA: dict[str, Any] = {}
"""Fields every benchmark session is created with besides its script (`--whiteboard`)."""


async def create_session(
    http: Poster, script: list[dict[str, Any]], tools: list[str] | None = None
) -> str:
    body: dict[str, Any] = {"metadata": {"script": script}, "tools": tools or [], **SESSION_EXTRA}
    r = await http.post("/v1/sessions", json=body)
    if r.status_code != 201:
        raise RuntimeError(f"POST /v1/sessions: {r.status_code} {r.text[:300]}")
    return str(r.json()["id"])


async def submit_turn(http: Poster, sid: str, content: str = "go") -> str:
    r = await http.post(f"/v1/sessions/{sid}/turns", json={"content": content})
    if r.status_code != 202:
        raise RuntimeError(f"POST turn: {r.status_code} {r.text[:300]}")
    return str(r.json()["id"])


async def cancel_turn(http: httpx.AsyncClient, tid: str) -> int:
    r = await http.post(f"/v1/turns/{tid}/cancel")
    return r.status_code


@dataclass
class Event:
    id: str
    event: str
    data: str
    t: float
    """`time.monotonic()` when the client had parsed the event."""

    def json(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.data)
        return doc


async def sse_events(response: httpx.Response) -> AsyncIterator[Event]:
    """The events of an SSE response as they are parsed (pings and comments skipped)."""
    parser = SseLines()
    async for line in response.aiter_lines():
        if (parsed := parser.feed(line)) is not None:
            yield Event(*parsed, time.monotonic())


@dataclass
class Followed:
    """What one SSE follower of a turn received."""

    events: list[Event] = field(default_factory=list)
    connected_at: float | None = None
    """When the response headers arrived."""
    error: str | None = None

    @property
    def tokens(self) -> list[Event]:
        return [e for e in self.events if e.event == "token"]

    @property
    def done(self) -> Event | None:
        return next((e for e in self.events if e.event == "done"), None)

    def first(self, event: str) -> Event | None:
        return next((e for e in self.events if e.event == event), None)


async def follow(
    http: httpx.AsyncClient,
    tid: str,
    *,
    timeout: float = 120.0,
    on_connect: Callable[[], None] | None = None,
) -> Followed:
    """Follow a turn's events until `done` (or the timeout)."""
    out = Followed()
    try:
        async with asyncio.timeout(timeout):
            async with http.stream("GET", f"/v1/turns/{tid}/events") as r:
                if r.status_code != 200:
                    out.error = f"HTTP {r.status_code}"
                    return out
                out.connected_at = time.monotonic()
                if on_connect is not None:
                    on_connect()
                async for ev in sse_events(r):
                    out.events.append(ev)
                    if ev.event == "done":
                        return out
        out.error = "stream ended before done"
    except TimeoutError:
        out.error = "timeout"
    except httpx.HTTPError as exc:
        out.error = f"{type(exc).__name__}: {exc}"[:200]
    return out


async def fan(
    clients: list[httpx.AsyncClient],
    items: Iterable[A],
    job: Callable[[httpx.AsyncClient, A], Awaitable[T]],
) -> list[T | BaseException]:
    """`job(client, item)` for every item, one at a time per client (so as many at once as
    there are clients); results (or exceptions) in the items' order."""
    queue: asyncio.Queue[tuple[int, A]] = asyncio.Queue()
    todo = list(items)
    for i, item in enumerate(todo):
        queue.put_nowait((i, item))
    out: list[T | BaseException] = [RuntimeError("not run")] * len(todo)

    async def worker(http: httpx.AsyncClient) -> None:
        while not queue.empty():
            i, item = queue.get_nowait()
            try:
                out[i] = await job(http, item)
            except Exception as exc:
                out[i] = exc

    await asyncio.gather(*(worker(c) for c in clients))
    return out


def ok(results: list[T | BaseException]) -> list[T]:
    """The results, raising the first exception among them."""
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results  # type: ignore[return-value]

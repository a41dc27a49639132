"""The sync client is generated from the async one (scripts/unasync_client.py, with unasync):
the generated modules are those the async source gives today, and the generation turns async
code into its blocking twin."""

from __future__ import annotations

from scripts.unasync_client import ROOT, TARGET, stale, sync_module

ASYNC = '''"""`AsyncClient` reads a stream: `async for event in stream`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
from httpx_sse import aconnect_sse


class AsyncClient:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def events(self, path: str) -> AsyncIterator[str]:
        async with aconnect_sse(self.http, "GET", path) as source:
            async for sse in source.aiter_sse():
                yield sse.data
        await asyncio.sleep(0.1)

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self
'''

SYNC = '''# Generated from cortex_workers/client/aio/example.py by scripts/unasync_client.py: do not
# edit. Change the async source, then run `.venv/bin/python scripts/unasync_client.py`.
"""`Client` reads a stream: `for event in stream`."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
from httpx_sse import connect_sse


class Client:
    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    def events(self, path: str) -> Iterator[str]:
        with connect_sse(self.http, "GET", path) as source:
            for sse in source.iter_sse():
                yield sse.data
        time.sleep(0.1)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self
'''


def test_the_sync_client_is_the_one_generated_from_the_async_source() -> None:
    assert (TARGET / "client.py").exists()
    behind = [str(p.relative_to(ROOT)) for p in stale()]
    assert not behind, f"{behind}: run `.venv/bin/python scripts/unasync_client.py`"


def test_the_generation_drops_async_and_await_and_takes_the_sync_names() -> None:
    assert sync_module(ASYNC, "example.py") == SYNC

"""`AsyncTransport`: sends `Call`s on one `httpx.AsyncClient`, retrying as
`cortex_workers.client.transport` says."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from ..transport import Call, delay_for, delay_for_error, result_of


class AsyncTransport:
    """Sends `Call`s on one `httpx.AsyncClient`, retrying as the policy says."""

    def __init__(self, http: httpx.AsyncClient, *, max_retries: int) -> None:
        self.http = http
        self.max_retries = max_retries

    async def send(self, call: Call) -> Any:
        attempt = 0
        while True:
            try:
                response = await self.http.request(
                    call.method, call.path, json=call.json, params=call.params, headers=call.headers
                )
            except httpx.TransportError as exc:
                await asyncio.sleep(delay_for_error(call, exc, attempt, self.max_retries))
                attempt += 1
                continue
            delay = delay_for(response, attempt, self.max_retries)
            if delay is None:
                return result_of(response)
            await asyncio.sleep(delay)
            attempt += 1

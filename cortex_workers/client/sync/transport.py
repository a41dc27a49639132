# Generated from cortex_workers/client/aio/transport.py by scripts/unasync_client.py: do not
# edit. Change the async source, then run `.venv/bin/python scripts/unasync_client.py`.
"""`SyncTransport`: sends `Call`s on one `httpx.Client`, retrying as
`cortex_workers.client.transport` says."""

from __future__ import annotations

import time
from typing import Any

import httpx

from ..transport import Call, delay_for, delay_for_error, result_of


class SyncTransport:
    """Sends `Call`s on one `httpx.Client`, retrying as the policy says."""

    def __init__(self, http: httpx.Client, *, max_retries: int) -> None:
        self.http = http
        self.max_retries = max_retries

    def send(self, call: Call) -> Any:
        attempt = 0
        while True:
            try:
                response = self.http.request(
                    call.method, call.path, json=call.json, params=call.params, headers=call.headers
                )
            except httpx.TransportError as exc:
                time.sleep(delay_for_error(call, exc, attempt, self.max_retries))
                attempt += 1
                continue
            delay = delay_for(response, attempt, self.max_retries)
            if delay is None:
                return result_of(response)
            time.sleep(delay)
            attempt += 1

"""`AsyncClient`: the v1 API of cortex-workers."""

from __future__ import annotations

import httpx

from ..functions import R
from ..models import Answer, IfBusy, JsonObject
from ..transport import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S, headers_for
from .functions import AsyncFunction
from .resources import (
    Batches,
    BudgetResource,
    Jobs,
    Proposals,
    Sessions,
    Turns,
    UsageResource,
    Webhooks,
)
from .streams import AsyncTurnStream
from .transport import AsyncTransport


class AsyncClient:
    """The v1 API of cortex-workers: `AsyncClient("http://127.0.0.1:8000", api_key)`.

    Requests that fail on a connection error, a 503 or a 429 are retried up to `max_retries`
    times (turn submissions carry an `Idempotency-Key`, so a retry never creates a second turn);
    errors raise the typed exceptions of `cortex_workers.client.errors`.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.max_retries = max_retries
        self.http = http or httpx.AsyncClient(
            base_url=base_url, headers=headers_for(api_key), timeout=timeout
        )
        self.transport = AsyncTransport(self.http, max_retries=max_retries)
        self.sessions = Sessions(self.transport)
        self.turns = Turns(self.transport)
        self.proposals = Proposals(self.transport)
        self.jobs = Jobs(self.transport)
        self.batches = Batches(self.transport)
        self.webhooks = Webhooks(self.transport)
        self.budget = BudgetResource(self.transport)
        self.usage = UsageResource(self.transport)

    async def stream(
        self,
        session_id: str,
        content: str,
        *,
        if_busy: IfBusy = "enqueue",
        idempotency_key: str | None = None,
    ) -> AsyncTurnStream:
        """Submit a turn and follow it: iterate the result for its typed events; its `text` is
        the answer so far, `step_restart` applied."""
        accepted = await self.turns.create(
            session_id, content, if_busy=if_busy, idempotency_key=idempotency_key
        )
        return self.turns.events(accepted.id)

    async def ask(
        self,
        session_id: str,
        content: str,
        *,
        if_busy: IfBusy = "enqueue",
        idempotency_key: str | None = None,
    ) -> Answer:
        """Submit a turn and wait for its answer through its event stream."""
        stream = await self.stream(
            session_id, content, if_busy=if_busy, idempotency_key=idempotency_key
        )
        return await stream.wait()

    def function(
        self,
        instructions: str,
        *,
        result: type[R],
        provider: str | None = None,
        model: str | None = None,
        max_attempts: int = 3,
        metadata: JsonObject | None = None,
    ) -> AsyncFunction[R]:
        """An LLM function: `fn(input)` runs one job and returns its result as `result`;
        `fn.map(inputs)` runs one batch."""
        return AsyncFunction(
            self.transport,
            instructions,
            result,
            provider=provider,
            model=model,
            max_attempts=max_attempts,
            metadata=metadata,
        )

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

"""`AsyncClient`: the v1 API from asyncio code, with the surface of `Client`."""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from . import calls
from .events import Event
from .functions import AsyncFunction
from .models import (
    Answer,
    Batch,
    BatchAccepted,
    BatchResultsPage,
    Budget,
    DeliveryList,
    IfBusy,
    Job,
    JobAccepted,
    MessagesPage,
    Proposal,
    Session,
    Turn,
    TurnAccepted,
    UsageGroup,
    UsageReport,
    Webhook,
    WebhookDelivery,
    WebhookList,
    items_of,
)
from .streams import AsyncTurnStream
from .sync import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S
from .transport import AsyncTransport, headers_for

R = TypeVar("R", bound=BaseModel)


class _Resource:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._send = client.transport.send


class Sessions(_Resource):
    async def create(
        self,
        *,
        name: str | None = None,
        system_prompt: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        tools: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        call = calls.create_session(
            name=name,
            system_prompt=system_prompt,
            provider=provider,
            model=model,
            tools=tools,
            metadata=metadata,
        )
        return Session.model_validate(await self._send(call))

    async def get(self, session_id: str) -> Session:
        return Session.model_validate(await self._send(calls.get_session(session_id)))

    async def messages(
        self, session_id: str, *, after: int | None = None, limit: int | None = None
    ) -> MessagesPage:
        call = calls.messages(session_id, after=after, limit=limit)
        return MessagesPage.model_validate(await self._send(call))


class Turns(_Resource):
    async def create(
        self,
        session_id: str,
        content: str,
        *,
        if_busy: IfBusy = "enqueue",
        idempotency_key: str | None = None,
    ) -> TurnAccepted:
        """Submit a turn. Sent with an `Idempotency-Key` (a new one unless given), so the
        client's retries never create a second turn."""
        call = calls.create_turn(
            session_id, content, if_busy=if_busy, idempotency_key=idempotency_key
        )
        return TurnAccepted.model_validate(await self._send(call))

    async def get(self, turn_id: str) -> Turn:
        return Turn.model_validate(await self._send(calls.get_turn(turn_id)))

    async def cancel(self, turn_id: str) -> Turn:
        return Turn.model_validate(await self._send(calls.cancel_turn(turn_id)))

    def events(self, turn_id: str, *, last_event_id: str | None = None) -> AsyncTurnStream:
        """The turn's events after `last_event_id` (all of them without it), until `done`."""
        return AsyncTurnStream(self._client, turn_id, last_event_id=last_event_id)


class Proposals(_Resource):
    async def get(self, proposal_id: str) -> Proposal:
        return Proposal.model_validate(await self._send(calls.get_proposal(proposal_id)))

    async def confirm(self, proposal_id: str) -> Proposal:
        return Proposal.model_validate(
            await self._send(calls.decide_proposal(proposal_id, "confirm"))
        )

    async def reject(self, proposal_id: str) -> Proposal:
        return Proposal.model_validate(
            await self._send(calls.decide_proposal(proposal_id, "reject"))
        )


class Jobs(_Resource):
    async def create(
        self,
        instructions: str,
        input: Any,
        result_schema: dict[str, Any],
        *,
        provider: str | None = None,
        model: str | None = None,
        max_attempts: int = 3,
        metadata: dict[str, Any] | None = None,
    ) -> JobAccepted:
        call = calls.create_job(
            instructions,
            input,
            result_schema,
            provider=provider,
            model=model,
            max_attempts=max_attempts,
            metadata=metadata,
        )
        return JobAccepted.model_validate(await self._send(call))

    async def get(self, job_id: str) -> Job:
        return Job.model_validate(await self._send(calls.get_job(job_id)))


class Batches(_Resource):
    async def create(
        self,
        instructions: str,
        result_schema: dict[str, Any],
        inputs: list[Any],
        *,
        provider: str | None = None,
        model: str | None = None,
        max_attempts: int = 3,
        metadata: dict[str, Any] | None = None,
    ) -> BatchAccepted:
        call = calls.create_batch(
            instructions,
            result_schema,
            inputs,
            provider=provider,
            model=model,
            max_attempts=max_attempts,
            metadata=metadata,
        )
        return BatchAccepted.model_validate(await self._send(call))

    async def get(self, batch_id: str) -> Batch:
        return Batch.model_validate(await self._send(calls.get_batch(batch_id)))

    async def results(
        self, batch_id: str, *, offset: int | None = None, limit: int | None = None
    ) -> BatchResultsPage:
        """The results in input order, from index `offset`; `next_offset` for the next page."""
        call = calls.batch_results(batch_id, offset=offset, limit=limit)
        return BatchResultsPage.model_validate(await self._send(call))


class Webhooks(_Resource):
    async def create(self, url: str, events: list[str]) -> Webhook:
        """The new webhook, with its signing `secret` (shown this once)."""
        return Webhook.model_validate(await self._send(calls.create_webhook(url, events)))

    async def list(self) -> WebhookList:
        body = await self._send(calls.list_webhooks())
        return [Webhook.model_validate(w) for w in items_of(body, "webhooks")]

    async def delete(self, webhook_id: str) -> None:
        await self._send(calls.delete_webhook(webhook_id))

    async def deliveries(self, webhook_id: str) -> DeliveryList:
        body = await self._send(calls.webhook_deliveries(webhook_id))
        return [WebhookDelivery.model_validate(d) for d in items_of(body, "deliveries")]


class BudgetResource(_Resource):
    async def get(self) -> Budget:
        return Budget.model_validate(await self._send(calls.get_budget()))


class UsageResource(_Resource):
    async def get(
        self,
        *,
        start: str | None = None,
        end: str | None = None,
        group_by: UsageGroup | None = None,
    ) -> UsageReport:
        """`GET /v1/usage?from=&to=&group_by=`: `start` and `end` are ISO dates or times."""
        call = calls.get_usage(start=start, end=end, group_by=group_by)
        return UsageReport.model_validate(await self._send(call))


class AsyncClient:
    """`Client` for asyncio: the same resources and methods, awaited.

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
        self.sessions = Sessions(self)
        self.turns = Turns(self)
        self.proposals = Proposals(self)
        self.jobs = Jobs(self)
        self.batches = Batches(self)
        self.webhooks = Webhooks(self)
        self.budget = BudgetResource(self)
        self.usage = UsageResource(self)

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
        return AsyncTurnStream(self, accepted.id)

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
        metadata: dict[str, Any] | None = None,
    ) -> AsyncFunction[R]:
        """An LLM function: `fn(input)` runs one job and returns its result as `result`;
        `fn.map(inputs)` runs one batch."""
        return AsyncFunction(
            self,
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


__all__ = ["AsyncClient", "Event"]

"""The API's resources, one class each: `client.sessions`, `client.turns`, `client.jobs`, …"""

from __future__ import annotations

from typing import Any

from .. import calls
from ..models import (
    Batch,
    BatchAccepted,
    BatchResultsPage,
    Budget,
    DeliveryList,
    IfBusy,
    Job,
    JobAccepted,
    JsonObject,
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
from .transport import AsyncTransport


class _Resource:
    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport
        self._send = transport.send


class Sessions(_Resource):
    async def create(
        self,
        *,
        name: str | None = None,
        system_prompt: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        tools: list[str] | None = None,
        metadata: JsonObject | None = None,
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
        return AsyncTurnStream(self._transport, turn_id, last_event_id=last_event_id)


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
        result_schema: JsonObject,
        *,
        provider: str | None = None,
        model: str | None = None,
        max_attempts: int = 3,
        metadata: JsonObject | None = None,
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
        result_schema: JsonObject,
        inputs: list[Any],
        *,
        provider: str | None = None,
        model: str | None = None,
        max_attempts: int = 3,
        metadata: JsonObject | None = None,
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

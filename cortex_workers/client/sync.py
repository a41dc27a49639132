"""`Client`: the v1 API from blocking code."""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from . import calls
from .events import Event
from .functions import Function
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
from .streams import TurnStream
from .transport import SyncTransport, headers_for

R = TypeVar("R", bound=BaseModel)
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_RETRIES = 5


class _Resource:
    def __init__(self, client: Client) -> None:
        self._client = client
        self._send = client.transport.send


class Sessions(_Resource):
    def create(
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
        return Session.model_validate(self._send(call))

    def get(self, session_id: str) -> Session:
        return Session.model_validate(self._send(calls.get_session(session_id)))

    def messages(
        self, session_id: str, *, after: int | None = None, limit: int | None = None
    ) -> MessagesPage:
        call = calls.messages(session_id, after=after, limit=limit)
        return MessagesPage.model_validate(self._send(call))


class Turns(_Resource):
    def create(
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
        return TurnAccepted.model_validate(self._send(call))

    def get(self, turn_id: str) -> Turn:
        return Turn.model_validate(self._send(calls.get_turn(turn_id)))

    def cancel(self, turn_id: str) -> Turn:
        return Turn.model_validate(self._send(calls.cancel_turn(turn_id)))

    def events(self, turn_id: str, *, last_event_id: str | None = None) -> TurnStream:
        """The turn's events after `last_event_id` (all of them without it), until `done`."""
        return TurnStream(self._client, turn_id, last_event_id=last_event_id)


class Proposals(_Resource):
    def get(self, proposal_id: str) -> Proposal:
        return Proposal.model_validate(self._send(calls.get_proposal(proposal_id)))

    def confirm(self, proposal_id: str) -> Proposal:
        return Proposal.model_validate(self._send(calls.decide_proposal(proposal_id, "confirm")))

    def reject(self, proposal_id: str) -> Proposal:
        return Proposal.model_validate(self._send(calls.decide_proposal(proposal_id, "reject")))


class Jobs(_Resource):
    def create(
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
        return JobAccepted.model_validate(self._send(call))

    def get(self, job_id: str) -> Job:
        return Job.model_validate(self._send(calls.get_job(job_id)))


class Batches(_Resource):
    def create(
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
        return BatchAccepted.model_validate(self._send(call))

    def get(self, batch_id: str) -> Batch:
        return Batch.model_validate(self._send(calls.get_batch(batch_id)))

    def results(
        self, batch_id: str, *, offset: int | None = None, limit: int | None = None
    ) -> BatchResultsPage:
        """The results in input order, from index `offset`; `next_offset` for the next page."""
        call = calls.batch_results(batch_id, offset=offset, limit=limit)
        return BatchResultsPage.model_validate(self._send(call))


class Webhooks(_Resource):
    def create(self, url: str, events: list[str]) -> Webhook:
        """The new webhook, with its signing `secret` (shown this once)."""
        return Webhook.model_validate(self._send(calls.create_webhook(url, events)))

    def list(self) -> WebhookList:
        body = self._send(calls.list_webhooks())
        return [Webhook.model_validate(w) for w in items_of(body, "webhooks")]

    def delete(self, webhook_id: str) -> None:
        self._send(calls.delete_webhook(webhook_id))

    def deliveries(self, webhook_id: str) -> DeliveryList:
        body = self._send(calls.webhook_deliveries(webhook_id))
        return [WebhookDelivery.model_validate(d) for d in items_of(body, "deliveries")]


class BudgetResource(_Resource):
    def get(self) -> Budget:
        return Budget.model_validate(self._send(calls.get_budget()))


class UsageResource(_Resource):
    def get(
        self,
        *,
        start: str | None = None,
        end: str | None = None,
        group_by: UsageGroup | None = None,
    ) -> UsageReport:
        """`GET /v1/usage?from=&to=&group_by=`: `start` and `end` are ISO dates or times."""
        call = calls.get_usage(start=start, end=end, group_by=group_by)
        return UsageReport.model_validate(self._send(call))


class Client:
    """The v1 API of cortex-workers: `Client("http://127.0.0.1:8000", api_key)`.

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
        http: httpx.Client | None = None,
    ) -> None:
        self.max_retries = max_retries
        self.http = http or httpx.Client(
            base_url=base_url, headers=headers_for(api_key), timeout=timeout
        )
        self.transport = SyncTransport(self.http, max_retries=max_retries)
        self.sessions = Sessions(self)
        self.turns = Turns(self)
        self.proposals = Proposals(self)
        self.jobs = Jobs(self)
        self.batches = Batches(self)
        self.webhooks = Webhooks(self)
        self.budget = BudgetResource(self)
        self.usage = UsageResource(self)

    def stream(
        self,
        session_id: str,
        content: str,
        *,
        if_busy: IfBusy = "enqueue",
        idempotency_key: str | None = None,
    ) -> TurnStream:
        """Submit a turn and follow it: iterate the result for its typed events; its `text` is
        the answer so far, `step_restart` applied."""
        accepted = self.turns.create(
            session_id, content, if_busy=if_busy, idempotency_key=idempotency_key
        )
        return TurnStream(self, accepted.id)

    def ask(
        self,
        session_id: str,
        content: str,
        *,
        if_busy: IfBusy = "enqueue",
        idempotency_key: str | None = None,
    ) -> Answer:
        """Submit a turn and wait for its answer through its event stream."""
        return self.stream(
            session_id, content, if_busy=if_busy, idempotency_key=idempotency_key
        ).wait()

    def function(
        self,
        instructions: str,
        *,
        result: type[R],
        provider: str | None = None,
        model: str | None = None,
        max_attempts: int = 3,
        metadata: dict[str, Any] | None = None,
    ) -> Function[R]:
        """An LLM function: `fn(input)` runs one job and returns its result as `result`;
        `fn.map(inputs)` runs one batch."""
        return Function(
            self,
            instructions,
            result,
            provider=provider,
            model=model,
            max_attempts=max_attempts,
            metadata=metadata,
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Client", "Event"]

"""Calling a remote A2A agent (kind `a2a`) with the `a2a-sdk` client.

The card is read from `<url>/.well-known/agent-card.json`; the task's input is sent as one
message (`return_immediately`), and the remote task is polled until it ends, the agent's time
is up, or the task stops being ours (cancelled). The remote task's id is remembered, so a
redelivery polls the same remote task instead of sending the message again.

Every request (the card, each call) passes the same SSRF guard as plugin tools, pinned to the
address it checked (`a2a_transport`): its host must resolve to public addresses, or, for the
card's own host only, loopback/private ones where the card says `allow_private: true`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import httpx
from a2a.client import A2AClientError, Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from ..tools.http_guard import BlockedAddress, ResponseTooLarge
from ..vocabulary import TaskStatus
from .a2a_transport import PinnedTransport
from .cards import A2aCard
from .python import Outcome

log = logging.getLogger(__name__)

_ENDED = {
    TaskState.TASK_STATE_COMPLETED: TaskStatus.COMPLETED,
    TaskState.TASK_STATE_FAILED: TaskStatus.FAILED,
    TaskState.TASK_STATE_CANCELED: TaskStatus.CANCELED,
    TaskState.TASK_STATE_REJECTED: TaskStatus.FAILED,
    TaskState.TASK_STATE_INPUT_REQUIRED: TaskStatus.FAILED,
    TaskState.TASK_STATE_AUTH_REQUIRED: TaskStatus.FAILED,
}


@dataclass(frozen=True, slots=True)
class RemoteCall:
    """One run of an a2a agent task."""

    text: str
    message_id: str
    remote_task_id: str | None
    """The remote task a previous run started, if one did."""
    remember: Callable[[str], None]
    """Store the remote task's id (before polling it)."""
    timeout_s: float
    budget_s: float
    still_ours: Callable[[], bool]


def run_remote(card: A2aCard, call: RemoteCall) -> Outcome | None:
    """Run the call (see the module's doc); None when the task stopped being ours."""
    try:
        return asyncio.run(_run(card, call))
    except BlockedAddress as exc:  # where it points is the operator's to know: in the log
        log.warning(
            "a2a agent %s: %s resolves to %s, not allowed (%s)",
            card.name,
            exc.host,
            exc.address,
            exc.reason,
        )
        message = (
            f"the {card.name} agent's host resolves to an address that is not allowed "
            f"({exc.reason}); the operator may set allow_private: true in its card for a "
            "private host"
        )
        return Outcome(TaskStatus.FAILED, error={"code": "blocked_address", "message": message})
    except (A2AClientError, httpx.HTTPError, ConnectionError, ValueError, ResponseTooLarge) as exc:
        log.warning("a2a agent %s at %s failed: %s", card.name, card.url, exc)
        message = (
            f"calling the {card.name} agent failed ({type(exc).__name__}); "
            "the operator's logs say why"
        )
        return Outcome(TaskStatus.FAILED, error={"code": "agent_error", "message": message})


async def _run(card: A2aCard, call: RemoteCall) -> Outcome | None:
    timeout = httpx.Timeout(min(30.0, max(1.0, call.timeout_s)))
    transport = PinnedTransport(card.url, allow_private=card.allow_private)
    async with httpx.AsyncClient(timeout=timeout, transport=transport, trust_env=False) as http:
        config = ClientConfig(streaming=False, polling=True, httpx_client=http)
        client = await ClientFactory(config).create_from_url(card.url)
        ends = time.monotonic() + call.timeout_s
        remote_id = call.remote_task_id
        if remote_id is None:
            sent = await _send(client, call)
            if isinstance(sent, Outcome):
                return sent
            remote_id = sent.id
            call.remember(remote_id)
            ended = _ended(sent)
            if ended is not None:
                return ended
        while time.monotonic() < ends:
            await asyncio.sleep(min(card.poll_s, max(0.0, ends - time.monotonic())))
            if not await asyncio.to_thread(call.still_ours):
                await _cancel(client, remote_id)
                return None
            ended = _ended(await client.get_task(GetTaskRequest(id=remote_id)))
            if ended is not None:
                return ended
        await _cancel(client, remote_id)
        message = f"the agent did not answer within {call.budget_s:g} s"
        return Outcome(TaskStatus.FAILED, error={"code": "timeout", "message": message})


async def _send(client: Client, call: RemoteCall) -> Task | Outcome:
    message = Message(message_id=call.message_id, role=Role.ROLE_USER, parts=[Part(text=call.text)])
    request = SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=True)
    )
    last = None
    async for response in client.send_message(request):
        last = response
    if last is None:
        raise ValueError("the agent sent no answer")
    if last.HasField("message"):
        return Outcome(TaskStatus.COMPLETED, result=_text(last.message.parts))
    return last.task


async def _cancel(client: Client, remote_id: str) -> None:
    with contextlib.suppress(A2AClientError, httpx.HTTPError):  # best effort: it ended here
        await client.cancel_task(CancelTaskRequest(id=remote_id))


def _ended(task: Task) -> Outcome | None:
    status = _ENDED.get(task.status.state)
    if status is None:
        return None
    if status == TaskStatus.COMPLETED:
        parts = [p for artifact in task.artifacts for p in artifact.parts]
        return Outcome(status, result=_text(parts or list(task.status.message.parts)))
    note = _text(list(task.status.message.parts)) or TaskState.Name(task.status.state)
    code = "canceled" if status == TaskStatus.CANCELED else "agent_error"
    return Outcome(status, error={"code": code, "message": note})


def _text(parts: Iterable[Part]) -> str:
    texts = []
    for part in parts:
        if part.HasField("text"):
            texts.append(part.text)
        elif part.HasField("data"):
            texts.append(json.dumps(MessageToDict(part.data)))
    return "\n".join(texts)

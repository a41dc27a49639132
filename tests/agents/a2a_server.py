"""A real A2A agent for the tests, built with a2a-sdk and served on loopback: it answers each
message with a task that works for a moment, then completes with a text artifact."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

import httpx
import uvicorn
from a2a.helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    add_a2a_routes_to_fastapi,
    create_agent_card_routes,
    create_jsonrpc_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
)
from fastapi import FastAPI, Request, Response

WORK_S = 1.5


class Translator(AgentExecutor):
    """'Translates' the message: answers `TRANSLATED(<text>)` after WORK_S seconds."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        text = context.get_user_input()
        self.messages.append(text)
        await asyncio.sleep(WORK_S)
        await updater.add_artifact([Part(text=f"TRANSLATED({text})")], name="translation")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel(new_text_message("cancelled"))


class BigAnswer(Translator):
    """Completes at once with an artifact of `size` characters."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        self.messages.append(context.get_user_input())
        await updater.add_artifact([Part(text="x" * self.size)], name="answer")
        await updater.complete()


class A2aServer:
    """Served on `host`:`port`; its card names `url` (default: that address) as where it
    answers, and `executor` answers. `requests` holds each HTTP request it received."""

    def __init__(
        self,
        port: int,
        *,
        url: str | None = None,
        executor: Translator | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.bound = f"http://{host}:{port}"
        self.requests: list[str] = []
        self.url = url or self.bound
        self.executor = executor or Translator()
        card = AgentCard(
            name="translator",
            description="Translates text.",
            version="1.0",
            supported_interfaces=[
                AgentInterface(
                    url=f"{self.url}/", protocol_binding="JSONRPC", protocol_version="1.0"
                )
            ],
            capabilities=AgentCapabilities(streaming=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="translate", name="Translate", description="Any text")],
        )
        handler = DefaultRequestHandler(
            agent_executor=self.executor, task_store=InMemoryTaskStore(), agent_card=card
        )
        app = FastAPI()

        @app.middleware("http")
        async def count(
            request: Request, call_next: Callable[[Request], Awaitable[Response]]
        ) -> Response:
            self.requests.append(f"{request.method} {request.url.path}")
            return await call_next(request)

        add_a2a_routes_to_fastapi(
            app,
            agent_card_routes=create_agent_card_routes(card),
            jsonrpc_routes=create_jsonrpc_routes(handler, rpc_url="/"),
        )
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.bound}/.well-known/agent-card.json").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("the A2A server did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)

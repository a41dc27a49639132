"""Running a `python` agent's handler: `handler(input, ctx)` in a thread of its own, watched
until it answers, raises, or its time is up (then its answer, if any, is ignored). An
`async def` handler is run to completion in that thread's own event loop."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..messages import ErrorDoc, JsonObject
from ..vocabulary import TaskStatus


@dataclass(frozen=True, slots=True)
class AgentContext:
    """What a handler gets besides its input."""

    task_id: str
    session_id: str
    report: Callable[[float, str], None]

    def progress(self, fraction: float, note: str = "") -> None:
        """Report how far along the task is (0..1) and what it is doing."""
        self.report(max(0.0, min(1.0, float(fraction))), str(note)[:500])


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended: its task status, result (str or JSON-able) or error."""

    status: TaskStatus
    result: Any = None
    error: ErrorDoc | None = None


Handler = Callable[[JsonObject, AgentContext], Any]


def importable_from(directory: Path) -> None:
    """Handler modules may live next to their cards: the cards' directory goes last on the
    import path (an installed package or the standard library of the same name wins)."""
    where = str(directory.resolve())
    if directory.is_dir() and where not in sys.path:
        sys.path.append(where)


def resolve(spec: str) -> Handler:
    """`module:function`, imported."""
    module, _, name = spec.partition(":")
    fn = getattr(importlib.import_module(module), name)
    if not callable(fn):
        raise TypeError(f"{spec} is not callable")
    return cast(Handler, fn)


def _call(fn: Handler, input: JsonObject, ctx: AgentContext) -> Any:
    """The handler's answer; an awaitable one (an `async def` handler) is awaited."""
    answer = fn(input, ctx)
    if inspect.isawaitable(answer):
        return asyncio.run(_awaited(answer))
    return answer


async def _awaited(answer: Awaitable[Any]) -> Any:
    return await answer


def _jsonable(value: Any) -> Any:
    if isinstance(value, str):
        return value
    json.dumps(value)  # raises TypeError for what JSON cannot hold
    return value


def run_handler(
    handler: str,
    input: JsonObject,
    ctx: AgentContext,
    *,
    timeout_s: float,
    budget_s: float,
    check_every_s: float,
    still_ours: Callable[[], bool],
) -> Outcome | None:
    """Run the handler for at most `timeout_s` (what is left of the agent's `budget_s`);
    None when the task stopped being ours meanwhile (cancelled, or another attempt took it):
    its result is not stored."""
    try:
        fn = resolve(handler)
    except Exception as exc:
        return Outcome(TaskStatus.FAILED, error={"code": "agent_error", "message": f"{exc}"})
    pool = ThreadPoolExecutor(1, thread_name_prefix="agent")
    future: Future[Any] = pool.submit(_call, fn, input, ctx)
    pool.shutdown(wait=False)
    ends = time.monotonic() + timeout_s
    while not future.done():
        left = ends - time.monotonic()
        if left <= 0:
            message = f"the agent did not answer within {budget_s:g} s"
            return Outcome(TaskStatus.FAILED, error={"code": "timeout", "message": message})
        try:
            future.exception(timeout=min(left, check_every_s))
        except TimeoutError:
            if not still_ours():
                return None
    raised = future.exception()
    if raised is not None:
        message = f"{type(raised).__name__}: {raised}"
        return Outcome(TaskStatus.FAILED, error={"code": "agent_error", "message": message})
    try:
        return Outcome(TaskStatus.COMPLETED, result=_jsonable(future.result()))
    except (TypeError, ValueError) as bad:
        message = f"the agent's answer is not JSON: {bad}"
        return Outcome(TaskStatus.FAILED, error={"code": "agent_error", "message": message})

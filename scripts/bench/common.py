"""What every part of the benchmark shares: the stack, the options, the figures and details."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from .client import LeanPoster, make_client
from .stack import BenchStack
from .stats import Figure

log = logging.getLogger("bench")
T = TypeVar("T")


@dataclass
class Bench:
    stack: BenchStack
    args: argparse.Namespace
    figures: list[Figure] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def figure(self, key: str, label: str, unit: str, **kw: Any) -> Figure:
        f = Figure(key, label, unit, **kw)
        self.figures.append(f)
        return f

    def client(self, connections: int = 4, timeout: float = 60.0) -> httpx.AsyncClient:
        return make_client(
            self.stack.api_base, self.stack.api_key, connections=connections, timeout=timeout
        )

    @contextlib.asynccontextmanager
    async def clients(
        self, n: int, timeout: float = 60.0
    ) -> AsyncIterator[list[httpx.AsyncClient]]:
        """`n` clients of one connection each (see `make_client`), closed on exit."""
        async with contextlib.AsyncExitStack() as stack:
            yield [await stack.enter_async_context(self.client(1, timeout)) for _ in range(n)]

    @contextlib.asynccontextmanager
    async def posters(self, n: int, timeout: float = 60.0) -> AsyncIterator[list[LeanPoster]]:
        """`n` lean JSON-POST clients of one connection each, closed on exit."""
        base, key = self.stack.api_base, self.stack.api_key
        posters = [LeanPoster(base, key, timeout=timeout) for _ in range(n)]
        try:
            yield posters
        finally:
            await asyncio.gather(*(p.aclose() for p in posters))

    def say(self, msg: str) -> None:
        log.info(msg)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class Sampler:
    """Calls `fn` every `every` seconds on a thread, keeping what it returns, until stopped."""

    def __init__(self, fn: Callable[[], Any], every: float = 0.5) -> None:
        self.fn, self.every = fn, every
        self.samples: list[tuple[float, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                self.samples.append((time.monotonic(), self.fn()))
            self._stop.wait(self.every)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def values(self) -> list[Any]:
        return [v for _, v in self.samples]

"""`python -m scripts.bench.launch <celery arguments>`: a Celery worker whose scripted model
notes when it yields the first token of a reply, for the added-time-to-first-token figure.

The provider itself is unchanged: its `stream` is wrapped so that, for replies whose first
token starts with `ttft-`, the instant (`time.monotonic()`, i.e. CLOCK_MONOTONIC, which every
process on the machine shares) is taken just before that token is handed to the model step,
and written (`<token> <seconds>`) to the file named by `BENCH_TTFT_LOG` only after the step
has asked for the next event, so writing it does not delay the token. Everything else is
`python -m celery` as usual (including gevent's monkey-patching, which comes first).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

MARK = "ttft-"


def instrument(path: str) -> None:
    from cortex_workers.messages import TextDelta
    from cortex_workers.providers.scripted import ScriptedProvider

    original = ScriptedProvider.stream
    lock = threading.Lock()

    def stream(self: ScriptedProvider, request: Any) -> Iterator[Any]:
        first = True
        for event in original(self, request):
            if first and isinstance(event, TextDelta):
                first = False
                if event.text.startswith(MARK):
                    at = time.monotonic()
                    yield event
                    line = f"{event.text.strip()} {at:.6f}\n".encode()
                    with lock:
                        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                        try:
                            os.write(fd, line)
                        finally:
                            os.close(fd)
                    continue
            yield event

    ScriptedProvider.stream = stream  # type: ignore[method-assign]


def main() -> None:
    from celery.__main__ import maybe_patch_concurrency

    maybe_patch_concurrency(sys.argv)
    path = os.environ.get("BENCH_TTFT_LOG")
    if path:
        instrument(path)
    from celery.bin.celery import main as celery_main

    sys.argv[0] = "celery"
    sys.exit(celery_main())


if __name__ == "__main__":
    main()

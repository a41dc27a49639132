"""`GET /metrics`: the Prometheus exposition of the whole deployment as this API sees it.

Every family this process has (every process's, in multiprocess mode: under `cortex-workers
dev`, the whole stack) and the queue gauges, read from Postgres at each scrape. Open unless
`CORTEX_METRICS_TOKEN` is set; then only `Authorization: Bearer <token>` gets an answer.
"""

from __future__ import annotations

import hmac
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from ...observability.metrics import (
    QueueStatsCollector,
    expose_reconciler_actions,
    metrics_token,
    render_latest,
)
from ...runtime import Runtime
from ...store.queue_stats import read_queue_stats
from ...turns.reconcile import ACTIONS as RECONCILER_ACTIONS
from ..deps import RuntimeDep
from ..errors import error_response

router = APIRouter(tags=["meta"])


def _scrape(rt: Runtime) -> tuple[bytes, str]:
    expose_reconciler_actions(RECONCILER_ACTIONS)
    return render_latest([QueueStatsCollector(partial(read_queue_stats, rt.db))])


def _authorized(authorization: str | None, token: str) -> bool:
    scheme, _, sent = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), token.encode())


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "Prometheus text exposition"},
        401: {"description": "`CORTEX_METRICS_TOKEN` is set and was not sent as a bearer token"},
    },
)
async def metrics(
    rt: RuntimeDep, authorization: Annotated[str | None, Header()] = None
) -> Response:
    """Prometheus metrics: turns, steps, queues, model calls, tools, SSE clients, HTTP requests
    (docs/operations.md lists them). No key needed unless `CORTEX_METRICS_TOKEN` is set."""
    token = metrics_token()
    if token is not None and not _authorized(authorization, token):
        return error_response(
            401,
            "unauthorized",
            "send the metrics token: Authorization: Bearer <CORTEX_METRICS_TOKEN>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    body, content_type = await run_in_threadpool(_scrape, rt)
    return Response(body, media_type=content_type)

"""What a worker process sets up around its tasks: metrics server, tracing and the log format.

`config/celery_app.py` connects these to Celery's signals; nothing here imports Celery. A
prefork worker is one parent and its pool children: the parent serves the metrics of all of them
(prometheus_client's multiprocess mode, which `cortex-workers worker` switches on by setting
`PROMETHEUS_MULTIPROC_DIR` before anything imports prometheus_client) and each child configures
its own tracing. A `threads` or `gevent` worker is one process that does both. See
docs/operations.md.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

from .observability.logs import LogFormat, configure_logging, log_format_from_env, quiet_ticks
from .observability.metrics import mark_process_dead, start_worker_metrics_server
from .observability.tracing import configure_tracing, shutdown_tracing
from .queues import TICKS, Queue
from .runtime import get_runtime

METRICS_PORT_ENV = "CORTEX_METRICS_PORT"
METRICS_ADDR_ENV = "CORTEX_METRICS_ADDR"
WORKER_SERVICE = "cortex-workers-worker"
"""The OpenTelemetry service name of workers, unless `OTEL_SERVICE_NAME` gives another."""


def metrics_port(env: Mapping[str, str] = os.environ) -> int:
    """`CORTEX_METRICS_PORT` (0, the default, serves no metrics). Raises ValueError."""
    value = env.get(METRICS_PORT_ENV, "").strip() or "0"
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ValueError(f"{METRICS_PORT_ENV}={value!r}: use a port number, or 0 for none")
    return port


def on_worker_start() -> None:
    """In the worker's main process, before its pool starts (Celery's `worker_init`)."""
    from .turns.warm import import_provider_sdks

    import_provider_sdks()
    configure_tracing(WORKER_SERVICE)
    addr = os.environ.get(METRICS_ADDR_ENV, "").strip() or "0.0.0.0"
    start_worker_metrics_server(metrics_port(), addr=addr)


def on_pool_child_start() -> None:
    """In a prefork pool child after the fork (`worker_process_init`)."""
    configure_tracing(WORKER_SERVICE)


NO_MODEL_QUEUES = frozenset({Queue.TOOLS, Queue.WEBHOOKS})
"""Queues whose tasks never call a model: their workers have nothing to warm."""


def calls_models(queues: set[str]) -> bool:
    """Whether a worker consuming `queues` runs model calls (and so should warm up)."""
    return not queues <= NO_MODEL_QUEUES


def warm_before_work() -> None:
    """Build the runtime (connections, provider clients, redaction detectors, the catalog)
    before the process takes its first task: in a prefork child after the fork, in a threads or
    gevent worker before it says it is ready. A step that built them itself would hold the
    interpreter long enough, under gevent, for its lease to lapse."""
    from .turns.warm import warm_runtime

    warm_runtime(get_runtime())


def on_pool_child_exit(pid: int) -> None:
    """In a prefork pool child about to exit (`worker_process_shutdown`)."""
    get_runtime().flush_latency()
    shutdown_tracing()
    mark_process_dead(pid)


def on_worker_stop() -> None:
    """In the worker's main process at shutdown (`worker_shutdown`)."""
    get_runtime().flush_latency()
    shutdown_tracing()


def quiet_maintenance_logs() -> None:
    """No log line per maintenance tick (`after_setup_logger`, worker and beat)."""
    quiet_ticks(TICKS)


def exit_at_once(code: int) -> None:
    """After the warm shutdown (tasks done or handed back, tracing flushed): end the process
    without the interpreter's teardown, whose garbage collection of a worker's large heap took
    seconds on a busy machine (and a stack's stop waited for its slowest worker)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def json_logs_requested() -> bool:
    """`CORTEX_LOG_FORMAT=json`."""
    return log_format_from_env() is LogFormat.JSON


def use_json_early() -> None:
    """JSON lines from the worker's start, warnings included (`celeryd_init`)."""
    logging.captureWarnings(True)
    configure_logging(logging.INFO, LogFormat.JSON)


def use_json_root_logs(root: logging.Logger, level: int) -> None:
    """Replaces the text handlers Celery just put on the root logger (`after_setup_logger`)."""
    for handler in list(root.handlers):
        root.removeHandler(handler)
    configure_logging(level, LogFormat.JSON)


def send_task_logs_to_root(task_logger: logging.Logger) -> None:
    """Celery's task logger writes on its own; in JSON mode it goes through the root's handler
    instead (`after_setup_task_logger`)."""
    for handler in list(task_logger.handlers):
        task_logger.removeHandler(handler)
    task_logger.propagate = True

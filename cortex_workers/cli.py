"""The `cortex-workers` command: dev, api, worker, beat, flower, status, migrate, retention, keys,
tenants, chat.

Process commands refer to the composition root by string (`config.asgi:app`,
`config.celery_app:app`) so the package never imports `config`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import monitor, tenant_commands
from .admin import check_config, create_key, migrate, use_embedded_if_unset, use_running_if_unset
from .observability.logs import LogFormat, configure_logging, log_format_from_env
from .queues import QUEUES, Queue
from .settings import get_settings
from .terminal_chat import add_arguments as add_chat_arguments
from .worker_hooks import METRICS_PORT_ENV, metrics_port

CELERY_APP = "config.celery_app:app"
ASGI_APP = "config.asgi:app"
QUEUE_POOLS: dict[str, tuple[str, int]] = {
    Queue.LLM: ("gevent", 1000),
    Queue.TOOLS: ("threads", 32),
    Queue.WEBHOOKS: ("threads", 16),
    Queue.BATCH: ("threads", 8),
    Queue.AGENTS: ("threads", 16),
}
"""Model steps wait on providers' streams through sockets: greenlets hold hundreds of them per
process for less CPU than threads (docs/benchmarks.md). Tools stay on threads: a tool that
computes without yielding would stall every greenlet of its process, and its timeout could not
fire."""
DEFAULT_POOL = ("threads", 4)


MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
API_SERVICE = "cortex-workers-api"
"""The OpenTelemetry service name of the API, unless `OTEL_SERVICE_NAME` gives another."""


def cmd_retention(args: argparse.Namespace) -> int:
    """Print what retention would delete (`--dry-run`), or delete it once."""
    from .turns import retention

    stack = use_embedded_if_unset(Path(args.data_dir))
    try:
        if args.dry_run:
            found = retention.due()
            for d in found:
                print(
                    f"{d.tenant}: before {d.cutoff:%Y-%m-%dT%H:%M:%SZ}: {d.turns} turns, "
                    f"{d.steps} steps, {d.messages} messages, {d.tool_calls} tool_calls, "
                    f"{d.decisions} decisions"
                )
            if not found:
                print("no tenant has a retention: nothing would be deleted")
        else:
            for done in retention.apply_retention():
                print(f"{done.tenant}: deleted {done.turns} turns, {done.decisions} decisions")
    finally:
        if stack is not None:
            stack.stop()
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    stack = use_embedded_if_unset(Path(args.data_dir))
    try:
        migrate()
    finally:
        if stack is not None:
            stack.stop()
    print("database is at the newest revision")
    return 0


def cmd_keys_create(args: argparse.Namespace) -> int:
    stack = use_embedded_if_unset(Path(args.data_dir))
    try:
        migrate()
        print(create_key(args.tenant))
    finally:
        if stack is not None:
            stack.stop()
    return 0


def cmd_api(args: argparse.Namespace) -> int:
    import uvicorn

    from .observability.tracing import configure_tracing, shutdown_tracing

    settings = get_settings()
    configure_tracing(API_SERVICE)  # this process; `--workers N` children start their own
    # JSON lines: uvicorn's loggers keep no handlers of their own and reach ours on the root
    json_logs = log_format_from_env() is LogFormat.JSON
    try:
        uvicorn.run(
            ASGI_APP,
            host=args.host or settings.api_host,
            port=args.port or settings.api_port,
            workers=args.workers,
            log_level="info",
            log_config=None if json_logs else uvicorn.config.LOGGING_CONFIG,
            proxy_headers=False,
            timeout_graceful_shutdown=5,
        )
    finally:
        shutdown_tracing()
    return 0


def default_hostname(queues: Sequence[str]) -> str:
    """A worker's Celery node name: its queues (`llm@host`, `summarize-maintenance@host`), as
    Flower and `celery inspect` show it."""
    return f"{'-'.join(queues)}@%h"


def worker_argv(
    queues: Sequence[str],
    *,
    pool: str | None,
    concurrency: int | None,
    loglevel: str,
    hostname: str | None = None,
) -> list[str]:
    default_pool, default_conc = QUEUE_POOLS.get(queues[0], DEFAULT_POOL)
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        CELERY_APP,
        "worker",
        "--queues",
        ",".join(queues),
        "--pool",
        pool or default_pool,
        "--concurrency",
        str(concurrency or default_conc),
        "--hostname",
        hostname or default_hostname(queues),
        "--loglevel",
        loglevel,
        "--without-mingle",
        "--without-gossip",
    ]


def cmd_worker(args: argparse.Namespace) -> int:
    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    port = metrics_port() if args.metrics_port is None else args.metrics_port
    os.environ[METRICS_PORT_ENV] = str(port)
    pool = args.pool or QUEUE_POOLS.get(queues[0], DEFAULT_POOL)[0]
    if port and pool == "prefork" and not os.environ.get(MULTIPROC_DIR_ENV):
        # the parent serves its pool children's metrics: multiprocess mode, which
        # prometheus_client reads when it is imported, so set before the exec
        os.environ[MULTIPROC_DIR_ENV] = tempfile.mkdtemp(prefix="cortex-metrics-")
    argv = worker_argv(
        queues,
        pool=pool,
        concurrency=args.concurrency,
        loglevel=args.loglevel,
        hostname=args.hostname,
    )
    os.execv(argv[0], _quiet_if_json(argv))


def beat_argv(loglevel: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", CELERY_APP, "beat", "--loglevel", loglevel]


def cmd_beat(args: argparse.Namespace) -> int:
    argv = beat_argv(args.loglevel)
    os.execv(argv[0], _quiet_if_json(argv))


def _quiet_if_json(celery_argv: list[str]) -> list[str]:
    """With JSON log lines, no banner: every line a Celery process writes is a JSON object."""
    if log_format_from_env() is not LogFormat.JSON:
        return celery_argv
    return [*celery_argv[:3], "--quiet", *celery_argv[3:]]  # `python -m celery --quiet …`


def flower_argv(*, host: str, port: int) -> list[str]:
    """Flower on this stack's broker (the Celery app's settings); the credentials come from
    `FLOWER_BASIC_AUTH` in its environment (see `monitor`)."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        CELERY_APP,
        "flower",
        f"--address={host}",
        f"--port={port}",
        "--tasks_columns=name,uuid,state,args,received,started,runtime,worker",
    ]


def cmd_flower(args: argparse.Namespace) -> int:
    try:
        auth = monitor.flower_auth()
    except ValueError as exc:
        print(f"cortex-workers flower: {exc}", file=sys.stderr)
        return 2
    use_running_if_unset(Path(args.data_dir))  # attached servers stay their owner's
    if not get_settings().broker_url:
        print(
            "cortex-workers flower: no broker: set CELERY_BROKER_URL or REDIS_URL, or run "
            f"`cortex-workers dev --data-dir {args.data_dir}` first",
            file=sys.stderr,
        )
        return 2
    env = monitor.flower_env(auth)  # with the URLs of the servers attached to, if any
    print(f"Flower on http://{args.host}:{args.port}", flush=True)
    if auth.generated:
        print(f"  user {auth.user}, password {auth.password}", flush=True)
    argv = flower_argv(host=args.host, port=args.port)
    os.execve(argv[0], argv, env)


def cmd_status(args: argparse.Namespace) -> int:
    from .status import gather, render_json, render_text

    use_running_if_unset(Path(args.data_dir))
    report = gather(timeout_s=args.timeout)
    print(render_json(report) if args.json else render_text(report))
    return 0 if report.ok else 1


def cmd_dev(args: argparse.Namespace) -> int:
    from .supervisor import run_dev

    flower_port = None if args.no_flower else args.flower_port
    code = run_dev(
        data_dir=Path(args.data_dir), port=args.port, host=args.host, flower_port=flower_port
    )
    # everything is stopped: skip the interpreter's teardown (seconds of garbage collection
    # on a busy machine), so that Ctrl-C ends `dev` promptly
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def cmd_chat(args: argparse.Namespace) -> int:
    from .terminal_chat import run

    return run(args)


def _add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", default=".cortex", help="embedded servers' data (when no URLs are set)"
    )


def _add_database_commands(sub: Any) -> None:
    """`migrate` and `retention`."""
    mig = sub.add_parser("migrate", help="apply database migrations")
    _add_data_dir(mig)
    mig.set_defaults(func=cmd_migrate)
    ret = sub.add_parser("retention", help="delete finished history past [retention] (once)")
    ret.add_argument("--dry-run", action="store_true", help="only say what would be deleted")
    _add_data_dir(ret)
    ret.set_defaults(func=cmd_retention)


def build_parser() -> argparse.ArgumentParser:
    """Every command and its options: long because it lists them all in one place."""
    parser = argparse.ArgumentParser(prog="cortex-workers", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="everything in one command, on embedded servers by default")
    _add_data_dir(dev)
    dev.add_argument("--port", type=int, default=8000)
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--flower-port", type=int, default=monitor.DEFAULT_PORT)
    dev.add_argument("--no-flower", action="store_true", help="do not start Flower")
    dev.set_defaults(func=cmd_dev)

    api = sub.add_parser("api", help="the HTTP API")
    api.add_argument("--host", default=None)
    api.add_argument("--port", type=int, default=None)
    api.add_argument("--workers", type=int, default=1)
    api.set_defaults(func=cmd_api)

    worker = sub.add_parser("worker", help="a Celery worker for some queues")
    worker.add_argument(
        "--queues", "-Q", required=True, help=f"comma-separated: {', '.join(QUEUES)}"
    )
    worker.add_argument("--pool", choices=["threads", "prefork", "gevent", "solo"])
    worker.add_argument("--concurrency", "-c", type=int)
    worker.add_argument("--loglevel", default="INFO")
    worker.add_argument("--hostname", "-n", help="Celery node name (default: QUEUES@%%h)")
    worker.add_argument(
        "--metrics-port",
        type=int,
        help=f"serve Prometheus metrics on this port (default ${METRICS_PORT_ENV}, else 0: off)",
    )
    worker.set_defaults(func=cmd_worker)

    beat = sub.add_parser("beat", help="the scheduler (RedBeat; a second one is harmless)")
    beat.add_argument("--loglevel", default="INFO")
    beat.set_defaults(func=cmd_beat)

    flower = sub.add_parser("flower", help="Flower, the Celery monitor, on this stack's broker")
    _add_data_dir(flower)
    flower.add_argument("--host", default="127.0.0.1", help="its /metrics needs no password")
    flower.add_argument("--port", type=int, default=monitor.DEFAULT_PORT)
    flower.set_defaults(func=cmd_flower)

    status = sub.add_parser("status", help="queues, workers, recent turns; exit 1 when down")
    _add_data_dir(status)
    status.add_argument("--json", action="store_true", help="one JSON object")
    status.add_argument("--timeout", type=float, default=1.0, help="seconds to wait for workers")
    status.set_defaults(func=cmd_status)

    _add_database_commands(sub)

    chat = sub.add_parser("chat", help="a conversation in the terminal, through the API")
    add_chat_arguments(chat)
    chat.set_defaults(func=cmd_chat)

    _add_keys_and_tenants(sub)
    return parser


def _add_keys_and_tenants(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = sub.add_parser("keys", help="API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="print a new API key for a tenant")
    create.add_argument("--tenant", required=True)
    _add_data_dir(create)
    create.set_defaults(func=cmd_keys_create)
    tenant_commands.add_commands(sub, keys_sub, _add_data_dir)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        # CORTEX_LOG_FORMAT: text, or json; `status` prints a report, not the servers' chatter
        configure_logging("WARNING" if args.command in ("status", "chat") else "INFO")
        metrics_port()  # a bad CORTEX_METRICS_PORT stops every command, not just a worker
    except ValueError as exc:
        print(f"cortex-workers: {exc}", file=sys.stderr)
        return 2
    if args.command in ("dev", "api", "worker", "beat"):
        problem = check_config()
        if problem is not None:
            print(f"cortex-workers: configuration error: {problem}", file=sys.stderr)
            return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())

"""The `cortex-workers` command: dev, api, worker, beat, migrate, keys create.

Process commands refer to the composition root by string (`config.asgi:app`,
`config.celery_app:app`) so the package never imports `config`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .admin import check_config, create_key, migrate, use_embedded_if_unset
from .queues import QUEUES, Queue
from .settings import get_settings

CELERY_APP = "config.celery_app:app"
ASGI_APP = "config.asgi:app"
QUEUE_POOLS: dict[str, tuple[str, int]] = {
    Queue.LLM: ("gevent", 1000),
    Queue.TOOLS: ("threads", 32),
}
"""Model steps wait on providers' streams through sockets: greenlets hold hundreds of them per
process for less CPU than threads (docs/benchmarks.md). Tools stay on threads: a tool that
computes without yielding would stall every greenlet of its process, and its timeout could not
fire."""
DEFAULT_POOL = ("threads", 4)


def _setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


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

    settings = get_settings()
    uvicorn.run(
        ASGI_APP,
        host=args.host or settings.api_host,
        port=args.port or settings.api_port,
        workers=args.workers,
        log_level="info",
        proxy_headers=False,
        timeout_graceful_shutdown=5,
    )
    return 0


def worker_argv(
    queues: Sequence[str], *, pool: str | None, concurrency: int | None, loglevel: str
) -> list[str]:
    default_pool, default_conc = QUEUE_POOLS.get(queues[0], DEFAULT_POOL)
    name = "-".join(queues)
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
        f"{name}-{os.getpid()}@%h",
        "--loglevel",
        loglevel,
        "--without-mingle",
        "--without-gossip",
    ]


def cmd_worker(args: argparse.Namespace) -> int:
    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    argv = worker_argv(queues, pool=args.pool, concurrency=args.concurrency, loglevel=args.loglevel)
    os.execv(argv[0], argv)


def beat_argv(loglevel: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", CELERY_APP, "beat", "--loglevel", loglevel]


def cmd_beat(args: argparse.Namespace) -> int:
    argv = beat_argv(args.loglevel)
    os.execv(argv[0], argv)


def cmd_dev(args: argparse.Namespace) -> int:
    from .supervisor import run_dev

    return run_dev(data_dir=Path(args.data_dir), port=args.port, host=args.host)


def _add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", default=".cortex", help="embedded servers' data (when no URLs are set)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cortex-workers", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="everything in one command, on embedded servers by default")
    _add_data_dir(dev)
    dev.add_argument("--port", type=int, default=8000)
    dev.add_argument("--host", default="127.0.0.1")
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
    worker.set_defaults(func=cmd_worker)

    beat = sub.add_parser("beat", help="the scheduler (RedBeat; a second one is harmless)")
    beat.add_argument("--loglevel", default="INFO")
    beat.set_defaults(func=cmd_beat)

    mig = sub.add_parser("migrate", help="apply database migrations")
    _add_data_dir(mig)
    mig.set_defaults(func=cmd_migrate)

    keys = sub.add_parser("keys", help="API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="print a new API key for a tenant")
    create.add_argument("--tenant", required=True)
    _add_data_dir(create)
    create.set_defaults(func=cmd_keys_create)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    _setup_logging()
    args = build_parser().parse_args(argv)
    if args.command in ("dev", "api", "worker", "beat"):
        problem = check_config()
        if problem is not None:
            print(f"cortex-workers: configuration error: {problem}", file=sys.stderr)
            return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())

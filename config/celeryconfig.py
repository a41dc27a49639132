"""Celery settings: queues, routes and delivery rules (see DESIGN.md, "Delivery and durability").

Built from `cortex_workers.settings` when the app is configured, never at import time.
"""

from __future__ import annotations

from typing import Any

from kombu import Exchange
from kombu import Queue as KombuQueue

from cortex_workers.queues import QUEUES, RUN_MODEL_STEP, Queue, task_name
from cortex_workers.settings import Settings

__all__ = ["QUEUES", "TASK_MODULES", "celery_settings"]

TASK_MODULES = (
    "cortex_workers.tasks.llm",
    "cortex_workers.tasks.tools",
    "cortex_workers.tasks.summarize",
    "cortex_workers.tasks.maintenance",
    "cortex_workers.tasks.webhooks",
    "cortex_workers.tasks.jobs",
    "cortex_workers.tasks.agents",
)
"""The modules that define the tasks: a worker imports them at start."""


def celery_settings(settings: Settings) -> dict[str, Any]:
    is_redis = settings.broker_url.startswith(
        ("redis://", "rediss://", "valkey://", "unix://", "sentinel://")
    )
    transport: dict[str, Any] = {}
    if is_redis:
        # Recovery comes from the step lease, not from Redis re-delivery: keep this far above
        # the longest task so kombu never re-runs a slow task on its own.
        transport = {
            "visibility_timeout": settings.visibility_timeout_s,
            "socket_timeout": 10,
            "socket_connect_timeout": 5,
            "health_check_interval": 30,
            "retry_on_timeout": True,
            # kombu's default of 10 runs out under a worker with hundreds of concurrent tasks
            # (gevent), leaving acknowledgements undelivered
            "max_connections": 200,
        }
        if settings.broker_url.startswith("sentinel://"):
            # kombu's sentinel transport asks these sentinels for the primary, and again after
            # a connection fails (a failover)
            transport["master_name"] = settings.redis_sentinel_master
            transport["sentinel_kwargs"] = {"socket_timeout": 5}
    return {
        **_redbeat_redis(settings),
        "broker_url": settings.broker_url,
        "broker_transport_options": transport,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "task_queues": [
            KombuQueue(q.value, Exchange(q.value, type="direct"), routing_key=q.value)
            for q in QUEUES
        ],
        "task_default_queue": Queue.MAINTENANCE.value,
        "task_routes": {task_name(q, "*"): {"queue": q.value} for q in QUEUES},
        "task_annotations": (
            {RUN_MODEL_STEP: {"rate_limit": settings.llm_worker_rate_limit}}
            if settings.llm_worker_rate_limit
            else {}
        ),
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # A prefork child runs the process hooks (engines, tracing) before it reports up; on a
        # node short of CPU that takes longer than Celery's 4 s, and a child killed for it is
        # replaced by one that is killed the same way: a replaced child never took a task.
        "worker_proc_alive_timeout": 30.0,
        "task_serializer": "json",
        "accept_content": ["json"],
        "result_serializer": "json",
        "task_ignore_result": True,
        "result_backend": None,
        # One (disabled) backend object for the whole process. Celery otherwise keeps one per
        # thread, which under gevent is one per task greenlet: it built a new backend for every
        # task it ran (~4 % of an `llm` worker's CPU under load).
        "result_backend_thread_safe": True,
        "task_time_limit": int(settings.turn_timeout_s) + 60,
        "task_soft_time_limit": int(settings.turn_timeout_s),
        "worker_hijack_root_logger": False,
        # Task events cost several Redis publishes per task: off unless someone watches.
        # Flower turns them on in every worker when it starts (its default --enable_events).
        "worker_send_task_events": False,
        "task_send_sent_event": False,
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "broker_pool_limit": 20,
        # RedBeat keeps the schedule in Redis under a lock, so a second beat is harmless.
        "beat_scheduler": "config.scheduler.ResilientRedBeatScheduler",
        "redbeat_key_prefix": "cortex:redbeat",
        "redbeat_lock_timeout": max(30, int(settings.reconcile_every_s * 6)),
        "beat_max_loop_interval": max(1, int(settings.reconcile_every_s)),
        "timezone": "UTC",
    }


def _redbeat_redis(settings: Settings) -> dict[str, Any]:
    """Where RedBeat keeps the schedule and its lock: the Redis URL, or, under Sentinel, the
    primary the sentinels name (RedBeat's own `redis-sentinel` form)."""
    target = settings.sentinel()
    if target is None:
        return {"redbeat_redis_url": settings.redis_url}
    options: dict[str, Any] = {
        "sentinels": list(target.sentinels),
        "service_name": target.master,
        "db": target.db,
        "socket_timeout": 5,
    }
    if target.password:
        options["password"] = target.password
    if target.username:
        options["username"] = target.username
    return {"redbeat_redis_url": "redis-sentinel://", "redbeat_redis_options": options}

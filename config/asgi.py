"""ASGI entry: `uvicorn config.asgi:app` (or `cortex-workers api`)."""

from __future__ import annotations

from cortex_workers.api.app import create_app

from .celery_app import app as celery_app  # noqa: F401  (the app dispatch publishes through)

app = create_app()

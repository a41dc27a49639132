"""Composition root: the Celery app, its settings, the ASGI entry."""

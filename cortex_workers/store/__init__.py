"""Postgres: the record of everything, and the queue of record for steps."""

from . import job_tables, schedules, timeline, webhook_tables, whiteboard

# imported so that their tables join `models.Base.metadata` whatever is imported first
__all__ = ["job_tables", "schedules", "timeline", "webhook_tables", "whiteboard"]

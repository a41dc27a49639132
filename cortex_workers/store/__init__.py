"""Postgres: the record of everything, and the queue of record for steps."""

from . import job_tables, webhook_tables

__all__ = ["job_tables", "webhook_tables"]  # imported so their tables join `models.Base.metadata`

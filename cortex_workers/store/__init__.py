"""Postgres: the record of everything, and the queue of record for steps."""

"""Thin Celery entry points: ids in, the domain does the work, dispatch publishes what's next."""

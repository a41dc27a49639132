"""The turn loop as plain functions: no Celery, no HTTP. Each returns the steps to publish."""

# Generated from cortex_workers/client/aio/__init__.py by scripts/unasync_client.py: do not
# edit. Change the async source, then run `.venv/bin/python scripts/unasync_client.py`.
"""`Client`, and the streams and functions it hands out."""

from .client import Client
from .functions import Function
from .streams import TurnStream

__all__ = ["Client", "Function", "TurnStream"]

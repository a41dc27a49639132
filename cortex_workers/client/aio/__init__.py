"""`AsyncClient`, and the streams and functions it hands out."""

from .client import AsyncClient
from .functions import AsyncFunction
from .streams import AsyncTurnStream

__all__ = ["AsyncClient", "AsyncFunction", "AsyncTurnStream"]

"""Session tokens sent as `?token=` stay out of the logs.

Uvicorn's access log writes each request's path with its query string; this filter replaces
the value of every `token` query parameter with `[redacted]` before the line is written. (The
request spans record `url.path` only, never the query.)"""

from __future__ import annotations

import logging
import re

ACCESS_LOGGER = "uvicorn.access"
REDACTED = "[redacted]"
_TOKEN_PARAM = re.compile(r"([?&]token=)[^&\s\"]*")


def redact_query(text: str) -> str:
    """`text` with the value of each `token=` query parameter replaced by `[redacted]`."""
    return _TOKEN_PARAM.sub(rf"\g<1>{REDACTED}", text)


class RedactTokens(logging.Filter):
    """Rewrites a record's message arguments (and message) without `token=` values."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_query(a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str):
            record.msg = redact_query(record.msg)
        return True


def install_log_redaction() -> None:
    """Once per process: the access logger drops token values."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, RedactTokens) for f in logger.filters):
        logger.addFilter(RedactTokens())

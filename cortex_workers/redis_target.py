"""Where a process finds Redis: one URL, or the primary that Redis Sentinel names.

With `REDIS_SENTINELS` (`host:port,host:port`) and `REDIS_SENTINEL_MASTER` (the name the
sentinels monitor), every Redis client of a process (streams, rate limits, provider health, the
API's reads) asks the sentinels for the current primary and asks again after a connection
fails, so a failover (a replica promoted) is followed without a restart. `REDIS_URL` may
instead be written in kombu's form, `sentinel://h1:26379;sentinel://h2:26379/0`, with the
master name in `REDIS_SENTINEL_MASTER`. The broker follows the same sentinels through kombu's
`sentinel` transport (see `broker_url_for` and `config/celeryconfig.py`). Pure values: the
clients are built in `redis_clients`.

While no primary is known, a command raises `MasterNotFoundError` (a `ConnectionError`): the API
answers 503 with `Retry-After`, as for any Redis outage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

SENTINEL_SCHEME = "sentinel://"
SENTINEL_PORT = 26379


@dataclass(frozen=True)
class SentinelTarget:
    """The sentinels to ask, the name of the primary they watch, and what to connect with."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None

    def connection_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for connections to the primary (not to the sentinels)."""
        kwargs: dict[str, Any] = {"db": self.db}
        if self.username:
            kwargs["username"] = self.username
        if self.password:
            kwargs["password"] = self.password
        return kwargs


def parse_sentinels(text: str) -> tuple[tuple[str, int], ...]:
    """`host:port,host:port` (the port defaults to 26379) as (host, port) pairs. Raises
    ValueError, saying what is wrong, for an entry that is not `host[:port]`."""
    pairs: list[tuple[str, int]] = []
    for raw in text.replace(";", ",").split(","):
        item = raw.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":") if ":" in item else (item, "", "")
        host = host.strip("[]")
        if not host or (port and not port.isdigit()):
            raise ValueError(
                f"REDIS_SENTINELS: {item!r} is not host:port; write e.g. 10.0.0.5:26379"
            )
        pairs.append((host, int(port) if port else SENTINEL_PORT))
    return tuple(pairs)


def _from_sentinel_url(url: str) -> tuple[tuple[tuple[str, int], ...], int, str | None, str | None]:
    """kombu's `sentinel://[user:pass@]h1:p1;sentinel://h2:p2[/db]`: hosts, db and credentials
    (taken from the first URL that carries them)."""
    hosts: list[tuple[str, int]] = []
    db, username, password = 0, None, None
    for part in url.split(";"):
        part = part.strip()
        if not part:
            continue
        if not part.startswith(SENTINEL_SCHEME):
            raise ValueError(
                f"REDIS_URL: {part!r} is not a sentinel:// URL; write every sentinel as "
                "sentinel://host:port, separated by ';'"
            )
        split = urlsplit(part)
        if split.hostname is None:
            raise ValueError(f"REDIS_URL: {part!r} has no host")
        hosts.append((split.hostname, split.port or SENTINEL_PORT))
        path = split.path.strip("/")
        if path:
            if not path.isdigit():
                raise ValueError(f"REDIS_URL: database {path!r} is not a number")
            db = int(path)
        username = username or split.username or None
        password = password or split.password or None
    return tuple(hosts), db, username, password


def sentinel_target(redis_url: str, *, sentinels: str, master: str) -> SentinelTarget | None:
    """The Sentinel setup the settings describe, or None for a plain Redis URL. With
    `sentinels` set, a `redis://` URL still gives the database number and the credentials."""
    if redis_url.startswith(SENTINEL_SCHEME):
        hosts, db, username, password = _from_sentinel_url(redis_url)
        if sentinels:
            hosts = parse_sentinels(sentinels)
    elif sentinels:
        hosts = parse_sentinels(sentinels)
        split = urlsplit(redis_url) if redis_url else None
        path = split.path.strip("/") if split else ""
        db = int(path) if path.isdigit() else 0
        username = split.username if split else None
        password = split.password if split else None
    else:
        return None
    if not hosts:
        raise ValueError("REDIS_SENTINELS names no sentinel; write host:port[,host:port]")
    if not master:
        raise ValueError(
            "REDIS_SENTINEL_MASTER is not set: name the primary the sentinels monitor "
            "(`sentinel monitor NAME ...` in their config, often `mymaster`)"
        )
    return SentinelTarget(hosts, master, db=db, username=username, password=password)


def broker_url_for(target: SentinelTarget) -> str:
    """kombu's URL for the `sentinel` transport: one `sentinel://` per sentinel; the master
    name goes in the transport options (`master_name`)."""
    auth = ""
    if target.password:
        auth = f"{target.username or ''}:{target.password}@"
    urls = [f"{SENTINEL_SCHEME}{auth}{host}:{port}" for host, port in target.sentinels]
    return ";".join(urls) + f"/{target.db}"

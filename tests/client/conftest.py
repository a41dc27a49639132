"""The Python client against the real stack, directly and through a proxy that drops
connections when a test says so."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from fakes.tcp_proxy import TcpProxy
from support import Api

from cortex_workers.client import Client


@pytest.fixture
def cw(api: Api, tenant_key: str) -> Iterator[Client]:
    """A client of a fresh tenant, talking to the API directly."""
    with Client(api.base_url, tenant_key, timeout=30) as client:
        yield client


@pytest.fixture
def proxy(api: Api) -> Iterator[TcpProxy]:
    where = urlsplit(api.base_url)
    proxied = TcpProxy(where.hostname or "127.0.0.1", where.port or 80)
    yield proxied
    proxied.stop()


@pytest.fixture
def cw_proxied(proxy: TcpProxy, tenant_key: str) -> Iterator[Client]:
    """A client of the same tenant as `cw`, through `proxy`."""
    with Client(proxy.base_url, tenant_key, timeout=30) as client:
        yield client

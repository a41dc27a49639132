"""The official `openai` SDK, sync and async, pointed at our API as a fresh tenant."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import openai
import pytest
from fakes.tcp_proxy import TcpProxy
from support import Api


@pytest.fixture
def oai(api: Api, tenant_key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{api.base_url}/v1", api_key=tenant_key, max_retries=0) as c:
        yield c


@pytest.fixture
def other_oai(api: Api) -> Iterator[openai.OpenAI]:
    from cortex_workers.admin import create_key

    key = create_key("openai-other")
    with openai.OpenAI(base_url=f"{api.base_url}/v1", api_key=key, max_retries=0) as c:
        yield c


@pytest.fixture
def proxy(api: Api) -> Iterator[TcpProxy]:
    where = urlsplit(api.base_url)
    proxied = TcpProxy(where.hostname or "127.0.0.1", where.port or 80)
    yield proxied
    proxied.stop()

"""The transport of A2A calls: the SSRF guard of plugins and webhooks, for an async client.

Each request's host is resolved once and checked, and the connection goes to that checked
address (the URL is pinned to it, with the `Host` header and TLS server name of the original),
so a DNS answer that changes between the check and the connect (rebinding) reaches nothing.
Only the card's own host may be private (`allow_private`): a URL the fetched agent card names
elsewhere is held to public addresses. The environment's proxies are ignored, and an answer
larger than `MAX_BODY_BYTES` fails (`ResponseTooLarge`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx

from ..tools.http_guard import ResponseTooLarge, parse_url, resolve_checked

MAX_BODY_BYTES = 4 * 1024 * 1024


class _Capped(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, cap: int, what: str) -> None:
        self.inner, self.cap, self.what = inner, cap, what

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self.inner:
            size += len(chunk)
            if size > self.cap:
                raise ResponseTooLarge(f"{self.what}: the answer exceeds {self.cap} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class PinnedTransport(httpx.AsyncBaseTransport):
    """Connects each request to the address its host was checked at (see the module)."""

    def __init__(self, card_url: str, *, allow_private: bool, max_body: int = MAX_BODY_BYTES):
        self.private_host = parse_url(card_url).host if allow_private else None
        self.max_body = max_body
        self.inner = httpx.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        host = url.host
        port = url.port or (443 if url.scheme == "https" else 80)
        allow = self.private_host is not None and host == self.private_host
        addresses = await asyncio.to_thread(resolve_checked, host, port, allow_private=allow)
        request.url = url.copy_with(host=str(addresses[0]))  # pinned to the checked address
        request.headers["Host"] = url.netloc.decode("ascii")
        request.headers["Accept-Encoding"] = "identity"  # the cap counts what is decoded
        if url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": host}
        response = await self.inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        what = f"{request.method} {url.scheme}://{host}{url.path}"
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Capped(response.stream, self.max_body, what),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()

"""Whether a provider is local: its calls stay on this machine or private network (mode
`local-only` calls only these; redaction applies to all the others)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from .config import ProviderConfig

CLOUD_BUILTINS = frozenset({"openai", "azure_openai", "anthropic"})
"""The cloud services: never local by default, even through a proxy on a loopback address."""


def private_address(base_url: str | None) -> bool:
    """A loopback, private or link-local address, or `localhost`."""
    if not base_url:
        return False
    host = urlsplit(base_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def is_local(config: ProviderConfig) -> bool:
    """The provider's `local` flag when set; else the scripted provider, `ollama`, and an
    OpenAI-compatible server on a loopback or private address (not a cloud built-in)."""
    if config.local is not None:
        return config.local
    if config.kind == "scripted":
        return True
    if config.name in CLOUD_BUILTINS or config.kind != "openai":
        return False
    return config.name == "ollama" or private_address(config.base_url)

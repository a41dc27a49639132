"""The images of a user message, as the native API and the Responses API take them: `https:`
URLs, which the provider fetches, or `data:image/…;base64,` URLs, within the configured size
and count (docs/api.md, "Images").

Checked without a regular expression (a tenant's text): a data URL is split at its comma and
its payload decoded by `base64`, which is linear in its size.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

from ..errors import InvalidRequest, TooLarge
from ..settings import Settings

MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""What every provider that reads images takes."""
MAX_URL = 4096
"""The longest `https:` image URL."""


def checked_images(settings: Settings, urls: Sequence[str], where: str) -> tuple[str, ...]:
    """`urls` as stored, or the error that names the first bad one (`where`: its field)."""
    if len(urls) > settings.images_per_message:
        raise InvalidRequest(
            f"{where}: at most {settings.images_per_message} images per message "
            f"(images_per_message), got {len(urls)}",
            code="too_many_images",
        )
    for i, url in enumerate(urls):
        _check(settings, url, f"{where}[{i}]")
    return tuple(urls)


def _check(settings: Settings, url: str, where: str) -> None:
    if url.startswith("https://"):
        if len(url) > MAX_URL or any(c.isspace() for c in url):
            raise InvalidRequest(f"{where}: not a usable https URL", code="bad_image")
        return
    if not url.startswith("data:"):
        raise InvalidRequest(
            f"{where}: an image is an https: URL or a data:image/...;base64, URL",
            code="bad_image",
        )
    header, comma, payload = url.partition(",")
    media_type, _, encoding = header.removeprefix("data:").partition(";")
    if not comma or encoding != "base64" or media_type not in MEDIA_TYPES:
        raise InvalidRequest(
            f"{where}: a data URL must be data:<type>;base64,<data> with type one of "
            + ", ".join(sorted(MEDIA_TYPES)),
            code="bad_image",
        )
    if len(payload) // 4 * 3 > settings.image_max_bytes:
        raise TooLarge(
            f"{where}: the image is larger than image_max_bytes ({settings.image_max_bytes})"
        )
    try:
        base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(
            f"{where}: the data URL is not valid base64", code="bad_image"
        ) from None

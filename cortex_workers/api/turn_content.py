"""A turn's `content` on the native API: its text, or its parts (text and images; docs/api.md,
"Images"), validated as one field so that a wrong one is one error naming `content`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

MAX_TEXT = 200_000
"""The longest text a request may carry in one field."""


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text"]
    text: str = Field(max_length=MAX_TEXT)


class ImagePart(BaseModel):
    """An image: an `https:` URL, or a `data:image/…;base64,` URL (docs/api.md, "Images")."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["image"]
    url: str = Field(min_length=1)


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]
TurnContent = (
    Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
    | Annotated[list[ContentPart], Field(min_length=1, max_length=64)]
)


def _one_content_error(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """One error for `content` (not one per member of the union), saying both forms."""
    try:
        parts = handler(value)
    except ValidationError as exc:
        if isinstance(value, str):
            problem = str(exc.errors()[0]["msg"])
        elif isinstance(value, list):
            problem = str(exc.errors()[-1]["msg"])
        else:
            problem = f"got {type(value).__name__}"
        raise ValueError(
            "content is a non-empty string, or a list of parts "
            '({"type": "text", "text"} or {"type": "image", "url"}): ' + problem
        ) from None
    if isinstance(parts, list):
        text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
        if not text and not any(isinstance(p, ImagePart) for p in parts):
            raise ValueError("content has no text and no image")
        if len(text) > MAX_TEXT:
            raise ValueError(f"content's text is longer than {MAX_TEXT} characters")
    return parts


Content = Annotated[TurnContent, WrapValidator(_one_content_error)]
"""A turn's `content`: a non-empty string, or a list of text and image parts."""

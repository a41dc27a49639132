"""Validating a job's answer (model output) against its `result_schema` (the tenant's): both
are untrusted, so the whole validation runs within one time budget. Every regular expression
of the schema (`pattern`, `patternProperties`, and `additionalProperties` beside them) runs on
the `regex` module with what is left of it, and every keyword checks it before it applies, so
neither a pattern such as `^(a+)+$` nor a schema whose `anyOf`s branch exponentially holds a
worker. Past it the answer is invalid with a clear error."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import regex
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

VALIDATION_BUDGET_S = 2.0
"""The time one answer's whole validation may take (its pattern matching included)."""


Keyword = Callable[[Validator, Any, Any, dict[str, Any]], Iterator[ValidationError] | None]
"""How jsonschema applies one keyword: its errors, if any."""


class _Budget:
    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds

    def check(self) -> None:
        """`ValidationError` once the budget is spent."""
        if time.monotonic() >= self.ends:
            raise ValidationError(
                "the result_schema took too long to apply to this answer; use a simpler schema"
            )

    def search(self, pattern: str, text: str) -> bool:
        """`regex.search`, within what is left; `ValidationError` when it runs out."""
        left = self.ends - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return regex.search(pattern, text, timeout=left) is not None
        except TimeoutError:
            raise ValidationError(
                f"the schema's pattern {pattern[:80]!r} took too long to match; "
                "use a simpler pattern"
            ) from None
        except regex.error:
            raise ValidationError(f"the schema's pattern {pattern[:80]!r} is not valid") from None


def bounded_validator(
    schema: dict[str, Any], *, budget_s: float = VALIDATION_BUDGET_S
) -> Validator:
    """A Draft 2020-12 validator of `schema` whose regular expressions share one budget."""
    budget = _Budget(budget_s)

    def pattern(v: Validator, patrn: str, instance: Any, _: Any) -> Iterator[ValidationError]:
        if v.is_type(instance, "string") and not budget.search(patrn, instance):
            yield ValidationError(f"{instance[:200]!r} does not match {patrn!r}")

    def pattern_properties(
        v: Validator, patterns: dict[str, Any], instance: Any, _: Any
    ) -> Iterator[ValidationError]:
        if not v.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, value in instance.items():
                if budget.search(patrn, key):
                    yield from v.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(
        v: Validator, allowed: Any, instance: Any, schema: dict[str, Any]
    ) -> Iterator[ValidationError]:
        if not v.is_type(instance, "object"):
            return
        named, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
        extras = [
            k for k in instance if k not in named and not any(budget.search(p, k) for p in patterns)
        ]
        if v.is_type(allowed, "object"):
            for extra in extras:
                yield from v.descend(instance[extra], allowed, path=extra)
        elif not allowed and extras:
            listed = ", ".join(repr(e) for e in sorted(extras)[:20])
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )

    keywords: dict[str, Keyword] = {
        **Draft202012Validator.VALIDATORS,
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
    }
    timed = {name: _timed(budget, apply) for name, apply in keywords.items()}
    return validators.extend(Draft202012Validator, timed)(schema)


def _timed(budget: _Budget, apply: Keyword) -> Keyword:
    """`apply`, once the budget is checked (every keyword, at every depth, checks it)."""

    def timed(
        v: Validator, value: Any, instance: Any, schema: dict[str, Any]
    ) -> Iterator[ValidationError]:
        budget.check()
        yield from apply(v, value, instance, schema) or ()

    return timed

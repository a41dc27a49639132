"""Values are typed: `dict[str, Any]` is left only where a shape is open by contract (a JSON
Schema, a provider's passthrough, a library's keyword arguments), and every error is carried as
an `ErrorDoc` (`cortex_workers.messages`).

The ceiling below is the count today: lower it when a shape gets its type, never raise it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cortex_workers"
UNTYPED = "dict[str, Any]"
CEILING = 36
"""Lines of `cortex_workers/` that spell `dict[str, Any]` (as `grep -rn` counts them)."""
UNTYPED_ERRORS = ("dict[", "Mapping[", "Any")
"""What an error's annotation must not be made of: its shape is `ErrorDoc` (or a `str` that
names a failure's kind)."""


def _lines_with(needle: str) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted(PACKAGE.rglob("*"))
        if path.is_file() and path.suffix in {".py", ".pyi"}
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if needle in line
    ]


def _annotations_of_errors(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, annotation) of every variable, field or parameter named `error`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name | ast.Attribute):
            name = node.target.id if isinstance(node.target, ast.Name) else node.target.attr
            if name == "error":
                found.append((node.lineno, ast.unparse(node.annotation)))
        elif isinstance(node, ast.arg) and node.arg == "error" and node.annotation is not None:
            found.append((node.lineno, ast.unparse(node.annotation)))
    return found


def test_untyped_dicts_do_not_grow_beyond_the_ceiling() -> None:
    found = _lines_with(UNTYPED)
    assert len(found) <= CEILING, (
        f"{len(found)} lines spell {UNTYPED} (ceiling {CEILING}): give the new shape a type "
        "(a TypedDict, dataclass, pydantic model, enum, or `JsonObject` where it is open JSON)",
        found,
    )


def test_the_ceiling_follows_the_count_down() -> None:
    found = _lines_with(UNTYPED)
    assert len(found) >= CEILING - 5, (
        f"only {len(found)} lines spell {UNTYPED} now: lower CEILING to {len(found)}"
    )


def test_every_error_is_annotated_as_an_error_doc_not_an_untyped_dict() -> None:
    untyped = [
        f"{path.relative_to(ROOT)}:{line}: error: {annotation}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, annotation in _annotations_of_errors(ast.parse(path.read_text()))
        if any(part in annotation for part in UNTYPED_ERRORS)
    ]
    assert not untyped, untyped


def test_the_error_check_sees_fields_variables_and_parameters() -> None:
    source = (
        "class A:\n    error: dict[str, Any] | None = None\n"
        "def f(*, error: Mapping[str, Any]) -> None:\n    error: dict[str, object] = {}\n"
        "class B:\n    error: ErrorDoc | None\n"
    )
    annotations = sorted(a for _, a in _annotations_of_errors(ast.parse(source)))
    assert annotations == [
        "ErrorDoc | None",
        "Mapping[str, Any]",
        "dict[str, Any] | None",
        "dict[str, object]",
    ]

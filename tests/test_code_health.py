"""The package stays readable: small modules and functions, lifecycle values spelled once,
strict typing and lint clean.

A module over 400 lines or a function over 60 lines is allowed only when its docstring says
why, with the words "long because".
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cortex_workers"
BIN = Path(sys.executable).parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
EXCUSE = "long because"


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts)


def _excused(node: ast.AST) -> bool:
    doc = (
        ast.get_docstring(node)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef)
        else None
    )
    return doc is not None and EXCUSE in doc


def test_no_module_is_over_400_lines_unless_its_docstring_says_why() -> None:
    long = []
    for path in _sources():
        text = path.read_text()
        if text.count("\n") > MAX_MODULE_LINES and not _excused(ast.parse(text)):
            long.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert not long, long


def test_no_function_is_over_60_lines_unless_its_docstring_says_why() -> None:
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > MAX_FUNCTION_LINES and not _excused(node):
                long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {size} lines")
    assert not long, long


LIFECYCLE_WORDS = re.compile(r'"(running|pending)"')


def test_lifecycle_states_are_spelled_only_in_the_vocabulary() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _sources()
        if path.name != "vocabulary.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if LIFECYCLE_WORDS.search(line)
    ]
    assert not found, found


@pytest.mark.parametrize(
    "command",
    [["mypy"], ["ruff", "check", "."], ["ruff", "format", "--check", "."]],
    ids=["mypy-strict", "ruff-check", "ruff-format"],
)
def test_static_checks_pass(command: list[str]) -> None:
    tool = BIN / command[0]
    assert tool.exists(), f"{tool} missing: install the dev extra"
    proc = subprocess.run(
        [str(tool), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

"""The second CI pass (on the machine's PostgreSQL, Redis and RabbitMQ) runs the tests marked
`servers`: every test module under the directories whose subject is the server implementation
must say so, or it would silently run on the embedded servers only."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SERVER_DIRS = (
    "store",
    "broker",
    "stream",
    "faults",
    "celery_contract",
    "hot_path",
    "hosts",
    "mcp",
)


def _marks_servers(module: ast.Module) -> bool:
    for node in module.body:
        if not isinstance(node, ast.Assign):
            continue
        if not any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            continue
        if "mark.servers" in ast.unparse(node.value):
            return True
    return False


def test_every_module_of_the_server_directories_is_marked_servers() -> None:
    unmarked = [
        str(path.relative_to(TESTS))
        for directory in SERVER_DIRS
        for path in sorted((TESTS / directory).rglob("test_*.py"))
        if not _marks_servers(ast.parse(path.read_text()))
    ]
    assert unmarked == [], f"add `pytestmark = pytest.mark.servers` to {unmarked}"


def test_the_server_directories_exist_and_hold_tests() -> None:
    for directory in SERVER_DIRS:
        assert list((TESTS / directory).glob("test_*.py")), directory

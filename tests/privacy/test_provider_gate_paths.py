"""Every provider call goes through the provider gate (or is the model step's own guarded
call): a module that calls a provider's completion API any other way fails this test, so a new
path cannot skip redaction, mode `local-only`, the rate limits or the budget."""

from __future__ import annotations

import ast
from pathlib import Path

import cortex_workers

PACKAGE = Path(cortex_workers.__file__).parent

ALLOWED = {
    "turns/guards/provider_gate.py",  # the gate: summaries, jobs, batches, what comes next
    "turns/guards/restore.py",  # the model step's call site, guarded inline (guards.route)
}
"""The only modules that may call `Provider.stream` outside the providers themselves."""

NOT_PROVIDER_CALLS = {
    "providers",  # a provider wrapping another (prompt-level tools) or an SDK
    "client",  # the HTTP client's `stream(session, content)`: our own API, not a provider
    "terminal_chat.py",  # the terminal chat, over the HTTP client
}
SDK_CALLS = {"create", "stream"}
SDK_OWNERS = {"completions", "messages", "responses"}


def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.split("/")[0] in NOT_PROVIDER_CALLS:
            continue
        out.append((rel, ast.parse(path.read_text(), rel)))
    return out


def _provider_calls(tree: ast.Module) -> list[str]:
    """`x.stream(...)`, `collect(...)` of `providers.base`, and SDK completion calls."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("providers.base"):
            found += [f"import {a.name}" for a in node.names if a.name == "collect"]
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr, owner = node.func.attr, node.func.value
        if attr == "stream":
            found.append(f"line {node.lineno}: .stream(...)")
        elif attr in SDK_CALLS and isinstance(owner, ast.Attribute) and owner.attr in SDK_OWNERS:
            found.append(f"line {node.lineno}: .{owner.attr}.{attr}(...)")
    return found


def test_no_module_but_the_gate_and_the_model_step_calls_a_provider() -> None:
    offenders = {
        rel: calls
        for rel, tree in _modules()
        if rel not in ALLOWED and (calls := _provider_calls(tree))
    }
    assert offenders == {}, (
        "call providers through turns.guards.provider_gate (redaction, local-only, budget, "
        f"rate limits): {offenders}"
    )


def test_the_check_sees_a_direct_call() -> None:
    tree = ast.parse("from ..providers.base import collect\nrt.providers.get('x').stream(r)\n")
    assert len(_provider_calls(tree)) == 2
    assert _provider_calls(ast.parse("client.chat.completions.create(model='m')")) != []

"""Fault-injection harness for cortex-workers.

Runs a whole stack it controls (its own Postgres and Valkey processes, the API, one worker per
queue group, beat) on loopback, drives sessions of scripted turns through the HTTP API with SSE
followers, injects a fault schedule, and checks Postgres, the Redis streams and what the clients
received: submitted, done, failed visibly, lost, duplicated messages, order violations,
stream-vs-stored mismatches, recovery times and how many faults landed on running work.

    python -m scripts.faults --scenario 1 --sessions 3 --turns 4 --duration 60
    scripts/faults/run --scenario all --json faults.json

Scenarios: 1 worker SIGKILLs, 2 Redis kill+restart (2a with, 2b without persistence),
3 Postgres restart, 4 Redis SIGSTOP for 20 s, 5 SSE disconnects with Last-Event-ID resumption,
5k SSE disconnects during worker SIGKILLs. See README.md next to this file.
"""

from typing import Any

# Lazy: the workers import `scripts.faults.chaos_tools`, which must not pull in the harness.
_EXPORTS = {
    "Checker": "checker",
    "table": "checker",
    "text_of": "checker",
    "Driver": "driver",
    "DriverConfig": "driver",
    "FaultRecord": "faults",
    "SCENARIOS": "scenarios",
    "expand": "scenarios",
    "run_scenario": "scenarios",
    "Stack": "stack",
    "StackConfig": "stack",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)

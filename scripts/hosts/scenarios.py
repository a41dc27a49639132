"""The multi-host and failover runs: the fault harness's driver and checker over a
`HostStack` or a `SentinelStack`, with a fault plan of their own.

`run_hosts`: S sessions x T turns whose first reply calls two tools, while `w1` loses power
(every process at once; back after `off_s`) and later `api1` is cut off (healed after
`partition_s`); clients reach the APIs through one forward, so those that lose `api1` reconnect
to `api2` with Last-Event-ID. `run_failover`: the same turns over Sentinel, and the Redis
primary is killed while they run. Both return the checker's report (counts of lost, duplicated,
out-of-order, stream-vs-stored mismatches) with what the fault plan did.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from scripts.faults.checker import Checker, table
from scripts.faults.driver import Driver, DriverConfig
from scripts.faults.faults import FaultRecord
from scripts.faults.stack import Stack, StackConfig

from .stacks import HostStack, SentinelStack

MUST_BE_ZERO = (
    "not_accepted",
    "lost",
    "duplicated_assistant_messages",
    "duplicated_other_messages",
    "duplicate_turns",
    "order_violations",
    "stream_vs_stored_mismatches",
    "redis_stream_vs_stored_mismatches",
)
SETTINGS = {"CORTEX_LIVENESS_S": "3"}


class TwoToolDriver(Driver):
    """Every turn's first reply calls two tools (then a second model step answers)."""

    def _tool_calls(self, rng: random.Random) -> list[dict[str, Any]]:
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        return [
            {"name": "calculate", "arguments": {"expression": f"{a} * {b}"}},
            {"name": "chaos_sleep", "arguments": {"seconds": round(rng.uniform(0.5, 1.5), 2)}},
        ]


def _fire(stack: Stack, kind: str, action: Callable[[], Any], **details: Any) -> FaultRecord:
    in_flight = stack.in_flight()
    leased = sum(int(n) for n in in_flight.get("leased", {}).values())
    record = FaultRecord(kind, time.time(), in_flight=in_flight, landed=leased > 0)
    record.landed_on = leased
    result = action()
    record.details = {**details, "result": result}
    return record


def _drive(
    stack: Stack,
    plan: Callable[[Driver], list[FaultRecord]],
    *,
    sessions: int,
    turns: int,
    seed: int,
    drain_s: float,
    label: str,
    echo: Callable[[str], None],
) -> dict[str, Any]:
    cfg = DriverConfig(
        sessions=sessions,
        turns=turns,
        seed=seed,
        tokens=(20, 40),
        tool_share=1.0,
        read_timeout_s=8.0,
        follow_timeout_s=drain_s + 120,
    )
    driver = TwoToolDriver(stack.api_base, stack.api_key, cfg, run_id=stack.run_id)
    driver.plan()
    t0 = time.time()
    driver.start()
    faults = plan(driver)
    checker = Checker(stack, driver, faults, scenario=label, t0=t0)
    deadline = time.monotonic() + drain_s
    driver.join(drain_s)
    open_n = checker.wait_terminal(max(5.0, deadline - time.monotonic()))
    driver.join(30 if open_n == 0 else 5)
    driver.stop()
    driver.join(15)
    report = checker.check()
    report["stack"] = stack.describe()
    report["processes"] = stack.process_report()
    report["stack_events"] = [{**e, "t_rel": round(e["t"] - t0, 2)} for e in stack.events]
    echo(table(report))
    return report


def without_primary(stack: SentinelStack) -> dict[str, Any]:
    """With no primary known (the only Redis killed, no replica to promote), the API answers
    503 with Retry-After; once the primary is back it answers as before. The statuses seen."""
    import httpx

    assert stack.cluster is not None
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    body = {"name": "while-no-primary"}
    out: dict[str, Any] = {}
    with httpx.Client(base_url=stack.api_base, headers=headers, timeout=30) as client:
        server = stack.cluster.kill_primary()
        down = client.post("/v1/sessions", json=body)
        out["down"] = {
            "status": down.status_code,
            "retry_after": down.headers.get("retry-after"),
            "code": down.json().get("error", {}).get("code"),
        }
        stack.cluster.start_again(server)
        statuses = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            statuses.append(client.post("/v1/sessions", json=body).status_code)
            if statuses[-1] == 201:
                break
            time.sleep(0.5)
        out["back"] = statuses
    return out


def _wait_running(driver: Driver, stack: Stack, at_least: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not driver.all_done():
        if len(stack.running_turn_ids()) >= at_least:
            return
        time.sleep(0.2)


def run_hosts(
    *,
    sessions: int = 6,
    turns: int = 5,
    seed: int = 33,
    off_s: float = 6.0,
    partition_s: float = 12.0,
    drain_s: float = 150.0,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """`w1` loses power while turns run, then `api1` is partitioned (see the module docstring)."""
    stack = HostStack(StackConfig(settings=dict(SETTINGS)))
    try:
        stack.start()
        echo(f"   hosts up: {stack.describe()['hosts']}")

        def plan(driver: Driver) -> list[FaultRecord]:
            records = []
            _wait_running(driver, stack, 3, 60)
            time.sleep(1.0)
            records.append(_fire(stack, "power_off_w1", lambda: stack.power_off("w1")))
            time.sleep(off_s)
            stack.power_on("w1")
            _wait_running(driver, stack, 2, 30)
            records.append(_fire(stack, "partition_api1", lambda: stack.partition("api1")))
            before = dict(stack.api.served) if stack.api else {}
            records[-1].details["served_before"] = {f"{h}:{p}": n for (h, p), n in before.items()}
            time.sleep(partition_s)
            stack.heal("api1")
            records[-1].t_end = time.time()
            return records

        report = _drive(
            stack, plan, sessions=sessions, turns=turns, seed=seed, drain_s=drain_s,
            label="hosts", echo=echo,
        )  # fmt: skip
        assert stack.api is not None
        report["api_connections"] = {
            host: stack.api.served.get((stack.address(host), 8000), 0) for host in ("api1", "api2")
        }
        before = report["faults"][-1]["details"].get("served_before", {})
        api2 = f"{stack.address('api2')}:8000"
        report["api2_connections_after_partition"] = report["api_connections"]["api2"] - before.get(
            api2, 0
        )
        return report
    finally:
        stack.stop()


def run_failover(
    *,
    sessions: int = 5,
    turns: int = 4,
    seed: int = 34,
    drain_s: float = 150.0,
    after: Callable[[SentinelStack], dict[str, Any]] | None = None,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The Redis primary is killed under running turns; a replica takes over. `after` runs on
    the live stack once every turn ended; what it returns is the report's `after`."""
    stack = SentinelStack(StackConfig(settings=dict(SETTINGS)))
    try:
        stack.start()

        def plan(driver: Driver) -> list[FaultRecord]:
            _wait_running(driver, stack, sessions, 60)
            time.sleep(1.5)
            return [_fire(stack, "redis_failover", stack.fail_over)]

        report = _drive(
            stack, plan, sessions=sessions, turns=turns, seed=seed, drain_s=drain_s,
            label="sentinel failover", echo=echo,
        )  # fmt: skip
        if after is not None:
            report["after"] = after(stack)
        return report
    finally:
        stack.stop()


def problems(report: dict[str, Any]) -> dict[str, int]:
    """The counts that must be zero, where they are not, plus unfinished submissions."""
    counts = report["counts"]
    out = {k: counts[k] for k in MUST_BE_ZERO if counts.get(k)}
    if counts["submitted"] != counts["planned"]:
        out["not_submitted"] = counts["planned"] - counts["submitted"]
    ended = counts["done"] + counts["failed_visibly"] + counts["cancelled"]
    if ended != counts["submitted"]:
        out["not_ended"] = counts["submitted"] - ended
    return out

"""The scenarios: a stack, a driver, a fault schedule and the checker, put together."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .checker import Checker, table
from .driver import Driver, DriverConfig
from .faults import (
    Partitions,
    PostgresRestarts,
    RedisPause,
    RedisRestarts,
    Schedule,
    SseDisconnects,
    SseDisconnectsWithKills,
    WorkerKills,
)
from .stack import Stack, StackConfig

log = logging.getLogger("faults")

SSE_STREAM_TTL_S = 8


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    schedule: type[Schedule]
    sessions: int
    turns: int
    duration_s: float
    max_faults: int
    redis_persist: bool = True
    settings: dict[str, str] = field(default_factory=dict)
    driver: dict[str, Any] = field(default_factory=dict)


SCENARIOS: dict[str, Scenario] = {
    "1": Scenario(
        "1",
        "SIGKILL of the llm and tools workers at random every 5-15 s",
        WorkerKills,
        sessions=20,
        turns=10,
        duration_s=150,
        max_faults=20,
    ),
    "2a": Scenario(
        "2a",
        "Redis (Valkey) killed and restarted mid-run, append-only file on",
        RedisRestarts,
        sessions=8,
        turns=6,
        duration_s=60,
        max_faults=2,
        redis_persist=True,
    ),
    "2b": Scenario(
        "2b",
        "Redis (Valkey) killed and restarted mid-run, no persistence (all data lost)",
        RedisRestarts,
        sessions=8,
        turns=6,
        duration_s=60,
        max_faults=2,
        redis_persist=False,
    ),
    "3": Scenario(
        "3",
        "Postgres stopped (fast shutdown) for 6-10 s mid-run and started again",
        PostgresRestarts,
        sessions=8,
        turns=6,
        duration_s=60,
        max_faults=2,
    ),
    "4": Scenario(
        "4",
        "Redis paused (SIGSTOP) for 20 s, then resumed",
        RedisPause,
        sessions=8,
        turns=6,
        duration_s=70,
        max_faults=1,
    ),
    "5": Scenario(
        "5",
        "SSE clients disconnecting at random and resuming with Last-Event-ID",
        SseDisconnects,
        sessions=10,
        turns=6,
        duration_s=120,
        max_faults=400,
        # streams expire soon after `done`, so late resumptions get the Postgres snapshot
        settings={"CORTEX_STREAM_TTL_S": str(SSE_STREAM_TTL_S)},
        driver={
            "disconnect_p": 0.06,
            "late_reconnect_p": 0.15,
            "late_reconnect_s": SSE_STREAM_TTL_S + 3.0,
            "use_after_param_p": 0.3,
        },
    ),
    "5k": Scenario(
        "5k",
        "SSE disconnects and late resumptions while workers are SIGKILLed (5 and 1 together)",
        SseDisconnectsWithKills,
        sessions=8,
        turns=5,
        duration_s=100,
        max_faults=10,
        settings={"CORTEX_STREAM_TTL_S": str(SSE_STREAM_TTL_S)},
        driver={
            "disconnect_p": 0.05,
            "late_reconnect_p": 0.35,
            # long enough for a retried step to finish and its stream to expire meanwhile
            "late_reconnect_s": SSE_STREAM_TTL_S + 25.0,
            "use_after_param_p": 0.3,
        },
    ),
    "6": Scenario(
        "6",
        "a worker cut off from Postgres, another from Redis (TCP proxies), then healed",
        Partitions,
        sessions=8,
        turns=6,
        duration_s=70,
        max_faults=2,
        # liveness well inside the harness's 5 s lease, so a takeover by liveness shows
        settings={"CORTEX_LIVENESS_S": "2"},
    ),
}


def pace(duration_s: float, turns: int) -> tuple[int, int]:
    """Tokens per reply so that a session's turns keep it busy for most of the fault window
    (faults that fire on an idle stack do not count): about 1.45 model steps per turn (tool
    turns have two) at ~0.1 s per token, never fewer than 8-28 tokens."""
    per_turn_s = 0.85 * duration_s / max(1, turns)
    mean = int(per_turn_s / (1.45 * 0.1))
    mean = max(18, min(mean, 400))
    return max(8, int(mean * 0.6)), int(mean * 1.4)


def expand(scenario: str, redis_persist: str = "both") -> list[str]:
    """`all`, `2` (both persistence modes unless one is named) or a single key."""
    keys = {"all": ["1", "2", "3", "4", "5", "5k", "6"]}.get(scenario, [scenario])
    out: list[str] = []
    for k in keys:
        if k == "2":
            out += {"yes": ["2a"], "no": ["2b"]}.get(redis_persist, ["2a", "2b"])
        elif k in SCENARIOS:
            out.append(k)
        else:
            raise ValueError(f"unknown scenario {k!r}: 1, 2, 2a, 2b, 3, 4, 5, 5k, 6 or all")
    return out


def run_scenario(
    key: str,
    *,
    broker: str = "redis",
    broker_url: str | None = None,
    sessions: int | None = None,
    turns: int | None = None,
    duration_s: float | None = None,
    max_faults: int | None = None,
    seed: int = 1,
    drain_s: float = 150.0,
    workdir: Path | None = None,
    keep: bool = False,
    keep_on_failure: bool = True,
    settings: dict[str, str] | None = None,
    driver_overrides: dict[str, Any] | None = None,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run one scenario on a fresh stack and return the checker's report."""
    sc = SCENARIOS[key]
    sc = replace(
        sc,
        sessions=sessions or sc.sessions,
        turns=turns or sc.turns,
        duration_s=duration_s or sc.duration_s,
        max_faults=max_faults if max_faults is not None else sc.max_faults,
    )
    label = f"{sc.key} [{broker_url or broker}]"
    echo(
        f"-- scenario {label}: {sc.title}; {sc.sessions} sessions x {sc.turns} turns, "
        f"faults for up to {sc.duration_s:.0f}s (max {sc.max_faults}), seed {seed}"
    )
    cfg = StackConfig(
        broker=broker,
        broker_url=broker_url,
        redis_persist=sc.redis_persist,
        workdir=workdir,
        keep=keep,
        settings={**sc.settings, **(settings or {})},
    )
    started = time.time()
    stack = Stack(cfg)
    report: dict[str, Any] = {}
    try:
        stack.start()
        echo(f"   stack up in {time.time() - started:.1f}s ({stack.workdir})")
        dcfg = DriverConfig(
            sessions=sc.sessions,
            turns=sc.turns,
            seed=seed,
            tokens=pace(sc.duration_s, sc.turns),
            follow_timeout_s=sc.duration_s + drain_s,
            **{**sc.driver, **(driver_overrides or {})},
        )
        driver = Driver(stack.api_base, stack.api_key, dcfg, run_id=stack.run_id)
        driver.plan()
        schedule = sc.schedule(
            stack, driver, duration_s=sc.duration_s, max_faults=sc.max_faults, seed=seed
        )
        schedule.prepare()
        t0 = time.time()
        driver.start()
        schedule.start()
        # the schedule ends at its duration, its max count, or when the driver is done
        schedule.join(sc.duration_s + 90)
        schedule.stop()
        schedule.collect()  # the SSE clients' own drops, if any
        fault_window = time.time() - t0
        echo(
            f"   faults over after {fault_window:.0f}s: {schedule.summary()}; "
            f"driver {driver.progress()}"
        )
        checker = Checker(stack, driver, schedule.records, scenario=label, t0=t0)
        # the driver submits for as long as it needs; then every accepted turn must end
        deadline = time.monotonic() + drain_s
        driver.join(drain_s)
        open_n = checker.wait_terminal(max(5.0, deadline - time.monotonic()))
        driver.join(30 if open_n == 0 else 5)
        driver.join_observers(30 if open_n == 0 else 5)
        driver.stop()
        driver.join(15)
        driver.join_observers(10)
        report = checker.check()
        report["title"] = sc.title
        report["seed"] = seed
        report["elapsed_s"] = round(time.time() - started, 1)
        report["fault_window_s"] = round(fault_window, 1)
        report["schedule"] = schedule.summary()
        report["stack"] = stack.describe()
        report["processes"] = stack.process_report()
        report["stack_events"] = [{**e, "t_rel": round(e["t"] - t0, 2)} for e in stack.events]
        report["driver"] = {
            "sessions": [
                {"idx": s["idx"], "id": s["id"], "mode": s["mode"]} for s in driver.sessions
            ],
            "config": {k: v for k, v in vars(dcfg).items()},
        }
        unexpected = {
            n: p["unexpected_exits"]
            for n, p in report["processes"].items()
            if p["unexpected_exits"]
        }
        report["counts"]["unexpected_process_exits"] = sum(len(v) for v in unexpected.values())
        if schedule.error:
            report["verdict"] = [v for v in report["verdict"] if v != "ok"]
            report["verdict"].append(f"fault schedule failed: {schedule.error}")
            report["ok"] = False
        if isinstance(schedule, PostgresRestarts):
            _outage_verdict(report, schedule)
        if not report["ok"] and keep_on_failure and workdir is None:
            stack.cfg.keep = True
            report["kept_workdir"] = str(stack.workdir)
        echo(table(report))
        if report.get("kept_workdir"):
            echo(f"   logs and data kept in {report['kept_workdir']}")
    finally:
        stack.stop()
    return report


def _outage_verdict(report: dict[str, Any], schedule: PostgresRestarts) -> None:
    """Scenario 3: during the outage the API must answer 503 with the error shape, never 500."""
    codes: dict[str, int] = {}
    for f in schedule.records:
        for k, n in f.details.get("codes_during_outage", {}).items():
            codes[k] = codes.get(k, 0) + n
    violations = schedule.violations()
    n503 = sum(n for k, n in codes.items() if k.endswith(" 503"))
    report["outage"] = {"codes_during_outage": codes, "violations": violations[:10]}
    report["counts"]["outage_503"] = n503
    report["counts"]["outage_violations"] = len(violations)
    verdict = [v for v in report["verdict"] if v != "ok"]
    if violations:
        verdict.append(
            f"outage_violations={len(violations)} (a 5xx other than 503, or no error shape)"
        )
    if schedule.records and n503 == 0:
        verdict.append("no 503 seen during the Postgres outage")
    report["verdict"] = verdict or ["ok"]
    report["ok"] = not verdict

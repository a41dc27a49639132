"""`python -m scripts.faults`: run fault scenarios and print the checker's counts."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from .scenarios import SCENARIOS, expand, run_scenario


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.faults",
        description="Fault-injection runs against a stack this command starts and stops "
        "(its own Postgres and Valkey, API, workers, beat; loopback only).",
        epilog="Scenarios: "
        + "; ".join(f"{k}: {s.title}" for k, s in SCENARIOS.items())
        + ". '2' runs 2a and 2b; 'all' runs every one.",
    )
    p.add_argument("--scenario", "-s", default="1", help="1, 2, 2a, 2b, 3, 4, 5, 5k, 6 or all")
    p.add_argument(
        "--broker",
        default="redis",
        choices=["redis", "rabbitmq", "both"],
        help="Celery broker: the stack's Valkey, RabbitMQ on 127.0.0.1:5672 (an isolated "
        "vhost, created and deleted by the run), or both (each scenario twice); streams stay "
        "on Redis either way",
    )
    p.add_argument("--broker-url", help="explicit broker URL (overrides --broker)")
    p.add_argument(
        "--redis-persist",
        default="both",
        choices=["yes", "no", "both"],
        help="scenario 2: with the append-only file, without, or both (2a, 2b)",
    )
    p.add_argument("--sessions", type=int, help="sessions (default per scenario)")
    p.add_argument("--turns", type=int, help="turns per session (default per scenario)")
    p.add_argument("--duration", type=float, help="fault window in seconds (default per scenario)")
    p.add_argument("--max-faults", type=int, help="most faults to inject (default per scenario)")
    p.add_argument(
        "--drain",
        type=float,
        default=150.0,
        help="after the fault window, how long turns may take to finish (s)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path, help="write the reports here")
    p.add_argument("--workdir", type=Path, help="work directory (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, data)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="CORTEX_X=V",
        help="extra setting for every process (repeatable)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _stop(signum: int, _: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("faults").setLevel(logging.INFO)
    signal.signal(signal.SIGTERM, _stop)
    try:
        keys = expand(args.scenario, args.redis_persist)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    settings = dict(kv.split("=", 1) for kv in args.set)
    brokers = ["redis", "rabbitmq"] if args.broker == "both" else [args.broker]
    reports: list[dict[str, Any]] = []
    started = time.time()
    try:
        for key in keys:
            for broker in brokers:
                reports.append(
                    run_scenario(
                        key,
                        broker=broker,
                        broker_url=args.broker_url,
                        sessions=args.sessions,
                        turns=args.turns,
                        duration_s=args.duration,
                        max_faults=args.max_faults,
                        seed=args.seed,
                        drain_s=args.drain,
                        workdir=(args.workdir / f"{key}-{broker}") if args.workdir else None,
                        keep=args.keep,
                        settings=settings,
                    )
                )
    except KeyboardInterrupt:
        print("interrupted; everything was stopped", file=sys.stderr)
        return 130
    finally:
        if args.json and reports:
            out = {
                "ok": all(r.get("ok") for r in reports),
                "elapsed_s": round(time.time() - started, 1),
                "runs": reports,
            }
            args.json.write_text(json.dumps(out, indent=2, default=str))
            print(f"wrote {args.json}")
    ok = all(r.get("ok") for r in reports)
    print(
        f"== {len(reports)} run(s): {'all ok' if ok else 'PROBLEMS FOUND'} "
        f"in {time.time() - started:.0f}s"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m scripts.bench`: start a private stack, measure, print a table, write JSON."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from cortex_workers.cli import QUEUE_POOLS

from .common import Bench
from .stack import BenchStack, BenchStackConfig, raise_fd_limit
from .stats import table

PARTS = (
    "latency",
    "ttft",
    "roundtrips",
    "throughput",
    "observability",
    "fanout",
    "concurrency",
    "batch",
    "growth",
    "hosts",
)
ALONE = ("hosts",)
"""Parts that build a stack of their own (scripts/hosts): run with `--only` and nothing else."""
QUICK = {
    "reps": 2,
    "tput_warmup": 2.0,
    "tput_window": 4.0,
    "latency_n": 15,
    "roundtrip_turns": 5,
    "pools": "prefork:cores,threads:1000",
    "conc_max": 200,
    "sse_max": 500,
    "batch_size": 200,
}


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.bench",
        description="Benchmarks of cortex-workers on a private stack it starts and stops "
        "(its own Postgres and Valkey, API, one worker per queue group, beat; loopback only). "
        "Each figure is the median of --reps repetitions.",
    )
    p.add_argument(
        "--only",
        default=",".join(p for p in PARTS if p not in ("growth", *ALONE)),
        help=f"comma-separated parts: {', '.join(PARTS)}",
    )
    p.add_argument("--reps", type=int, default=3, help="repetitions per figure")
    p.add_argument("--quick", action="store_true", help="smaller sizes: about two minutes")
    p.add_argument("--json", type=Path, help="write every figure and detail here")
    p.add_argument(
        "--profile",
        type=Path,
        help="also profile the llm worker and the API with py-spy: while plain turns run one "
        "at a time (after the latency part) and during one extra throughput window; "
        "collapsed stacks go here",
    )
    g = p.add_argument_group("throughput")
    g.add_argument("--tput-warmup", type=float, default=4.0, help="seconds before the window")
    g.add_argument("--tput-window", type=float, default=10.0, help="seconds counted")
    g.add_argument(
        "--tput-users",
        type=int,
        default=96,
        help="closed-loop clients (enough that the llm queue never runs dry; its mean length is "
        "in the JSON)",
    )
    g.add_argument(
        "--tput-pool",
        default=f"{QUEUE_POOLS['llm'][0]}:{QUEUE_POOLS['llm'][1]}",
        help="pool:concurrency of the llm worker and of the chain worker (default: the "
        "shipped default of `cortex-workers worker --queues llm`)",
    )
    g = p.add_argument_group("observability (throughput sizes and users as above)")
    g.add_argument(
        "--obs-scrape-every",
        type=float,
        default=2.0,
        help="seconds between scrapes of the API's /metrics while tracing and metrics are on",
    )
    g = p.add_argument_group("latency and time to first token")
    g.add_argument("--latency-n", type=int, default=40, help="turns per repetition")
    g.add_argument("--first-token-ms", type=int, default=200, help="model's delay before token 1")
    g.add_argument(
        "--roundtrip-turns", type=int, default=10, help="turns whose statements are counted"
    )
    g.add_argument(
        "--growth-sizes",
        default="100000,1000000",
        help="growth: turns of synthetic history loaded, cumulative, comma-separated",
    )
    g = p.add_argument_group("slow calls on one llm worker")
    g.add_argument(
        "--pools",
        default="prefork:cores,prefork:8,threads:1000,gevent:1000",
        help="pool:concurrency list ('cores' = CPU count)",
    )
    g.add_argument(
        "--conc-levels",
        type=_ints,
        default=_ints("10,50,200,500,1000"),
        help="numbers of calls tried, in order, until a pool runs out of slots",
    )
    g.add_argument("--conc-max", type=int, default=1000, help="largest level tried")
    g.add_argument("--slow-token-ms", type=int, default=500, help="20 tokens this far apart")
    g.add_argument(
        "--conc-db-pool",
        type=int,
        default=0,
        help="CORTEX_DB_POOL_SIZE of the worker (default: the shipped 20, or concurrency / 10 "
        "when that is more; 20 + 20 overflow timed out with 1,000 threads)",
    )
    g.add_argument(
        "--conc-redis-pool",
        type=int,
        default=0,
        help="CORTEX_REDIS_POOL_SIZE of the worker (default: its concurrency + 100, so that "
        "no step waits for a connection)",
    )
    g = p.add_argument_group("turns while a batch runs")
    g.add_argument("--batch-size", type=int, default=1000, help="jobs of the batch")
    g.add_argument(
        "--batch-first-token-ms", type=int, default=100, help="each batch job's model latency"
    )
    g = p.add_argument_group("SSE fan-out")
    g.add_argument(
        "--sse-levels",
        type=_ints,
        default=_ints("500,1000,2000"),
        help="numbers of clients tried, in order, until one level is not served live",
    )
    g.add_argument("--sse-max", type=int, default=2000, help="most clients tried")
    g.add_argument("--sse-reps", type=int, default=1, help="repetitions per level")
    g.add_argument(
        "--sse-first-ms",
        type=int,
        default=0,
        help="model's delay before token 1 (default 2000 + 5 per client)",
    )
    g = p.add_argument_group("stack")
    g.add_argument("--workdir", type=Path, help="work directory (default: a temporary one)")
    g.add_argument("--keep", action="store_true", help="keep the work directory (logs, data)")
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="CORTEX_X=V",
        help="extra setting for every process (repeatable)",
    )
    g.add_argument(
        "--whiteboard",
        action="store_true",
        help="every session is a coordinator's, with a whiteboard (what it costs a step)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _apply_quick(args: argparse.Namespace, argv: list[str]) -> None:
    """--quick changes the sizes the command line did not set explicitly."""
    given = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    for key, value in QUICK.items():
        if f"--{key.replace('_', '-')}" not in given:
            setattr(args, key, value)


def _stop(signum: int, _: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _parts() -> dict[str, Callable[[Bench], None]]:
    from .batch import batch
    from .concurrency import concurrency
    from .fanout import fanout
    from .growth import growth
    from .latency import latency, ttft
    from .observability import observability
    from .roundtrips import roundtrips
    from .throughput import throughput

    return {
        "latency": latency,
        "ttft": ttft,
        "roundtrips": roundtrips,
        "throughput": throughput,
        "observability": observability,
        "fanout": fanout,
        "concurrency": concurrency,
        "batch": batch,
        "growth": growth,
    }


def _clean(value: Any) -> Any:
    """JSON-safe: NaN (an empty sample) becomes null, floats are rounded."""
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 4)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _run_alone(only: list[str], args: argparse.Namespace) -> int:
    """`--only hosts`: the multi-host figures (scripts/hosts/bench.py), on their own stack."""
    if only != ["hosts"]:
        print("`hosts` runs on a stack of its own: give it alone (--only hosts)")
        return 2
    from scripts.hosts.bench import run_bench
    from scripts.hosts.network import unavailable_reason

    if reason := unavailable_reason():
        print(f"hosts: network namespaces unavailable: {reason}")
        return 2
    figures = run_bench(reps=max(args.reps, 5))
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"hosts": figures}, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    if args.quick:
        _apply_quick(args, argv)
    if args.whiteboard:
        from .client import SESSION_EXTRA

        SESSION_EXTRA["whiteboard"] = True
    only = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in only if p not in PARTS]
    if unknown:
        print(f"unknown part(s): {', '.join(unknown)}; choose from {', '.join(PARTS)}")
        return 2
    if any(p in ALONE for p in only):
        return _run_alone(only, args)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("bench").setLevel(logging.INFO)
    logging.getLogger("faults").setLevel(logging.INFO)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, _stop)
    fds = raise_fd_limit(20000)
    settings = dict(kv.split("=", 1) for kv in args.set)
    stack = BenchStack(BenchStackConfig(workdir=args.workdir, keep=args.keep, settings=settings))
    bench = Bench(stack, args)
    started = time.monotonic()
    parts = _parts()
    interrupted = False
    try:
        stack.start()
        bench.say(f"stack up ({stack.api_base}, workdir {stack.workdir}); parts: {', '.join(only)}")
        for name in PARTS:
            if name not in only:
                continue
            bench.say(f"== {name}")
            t0 = time.monotonic()
            try:
                parts[name](bench)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                logging.getLogger("bench").exception("%s failed", name)
                bench.errors.append(f"{name}: {type(exc).__name__}: {exc}")
            bench.details.setdefault("part_seconds", {})[name] = round(time.monotonic() - t0, 1)
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted; stopping everything", file=sys.stderr)
    finally:
        stack.stop()
    wall = time.monotonic() - started
    print()
    print(table(bench.figures))
    print(f"\nwall time {wall:.0f} s; {os.cpu_count()} cores; medians of {args.reps} repetitions")
    for e in bench.errors:
        print(f"error: {e}")
    if args.json:
        doc: dict[str, Any] = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {
                "cores": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
                "open_files_limit": fds,
            },
            "argv": argv,
            "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "wall_s": round(wall, 1),
            "stack": {
                "settings": {k: v for k, v in stack.env.items() if k.startswith("CORTEX_")},
                "process_env": stack.proc_env,
                "workers": {k: v.label for k, v in stack.worker_specs.items()},
            },
            "interrupted": interrupted,
            "figures": {f.key: f.as_dict() for f in bench.figures},
            "details": bench.details,
            "errors": bench.errors,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(_clean(doc), indent=2, default=str))
        print(f"wrote {args.json}")
    if interrupted:
        return 130
    return 1 if bench.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())

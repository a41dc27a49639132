"""Figure 6: what tracing, metrics and Flower's task events cost in turn throughput.

The turn-throughput measurement of figure 1 (`drive_turns`), on the same stack, three ways, in
alternation (A, B, C, A, B, C, …) so that drifting machine load does not favour one of them;
before each window the API, the three workers and beat are restarted with that way's
environment:

- A, baseline: what a process does by default: metrics in single-process mode and never
  scraped, tracing off, no task events.
- B, tracing and metrics: `OTEL_EXPORTER_OTLP_ENDPOINT` points every process at a loopback
  OTLP/HTTP sink (`scripts.bench.otlp_sink`, a process of its own that accepts and counts every
  export, so the exporters pay their real cost), `PROMETHEUS_MULTIPROC_DIR` is set for every
  process (as `cortex-workers dev` does), and the API's `/metrics` (every process's values) is
  scraped every `--obs-scrape-every` seconds during warm-up and window.
- C, Flower: a real `cortex-workers flower` consumes the events; the `llm` worker starts with
  `-E` (task events from its first task), the others get them from Flower's `enable_events`
  broadcast, as they do under `cortex-workers dev`. Metrics and tracing as in A.

B/A and C/A are the ratios of the turns/s of the same repetition; the figure is their median.
B counts as measured only if the sink received spans, C only if Flower counted events: else the
part fails, loudly.
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import httpx

from scripts.faults.stack import free_port

from .common import Bench, run
from .stack import BenchStack
from .stats import median
from .throughput import drive_turns

OBSERVABILITY_ENV_PREFIXES = ("OTEL_",)
MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
SINK, FLOWER = "otlp_sink", "flower"


class Mode(StrEnum):
    BASELINE = "baseline"
    TRACED = "traced"
    FLOWER = "flower"


@dataclass
class Scrapes:
    """The API's `/metrics`, fetched every `every` seconds on a thread until stopped."""

    url: str
    every: float
    ok: int = 0
    failed: list[str] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    bytes: int = 0

    @contextmanager
    def running(self) -> Iterator[Scrapes]:
        stop = threading.Event()

        def loop() -> None:
            with httpx.Client(timeout=10) as http:
                while not stop.is_set():
                    t0 = time.monotonic()
                    try:
                        r = http.get(self.url)
                        if r.status_code == 200:
                            self.ok += 1
                            self.bytes += len(r.content)
                            self.ms.append((time.monotonic() - t0) * 1000)
                        else:
                            self.failed.append(f"HTTP {r.status_code}")
                    except httpx.HTTPError as exc:
                        self.failed.append(f"{type(exc).__name__}: {exc}")
                    stop.wait(max(0.0, self.every - (time.monotonic() - t0)))

        thread = threading.Thread(target=loop, name="bench-scraper", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(15)


def _get_json(url: str) -> dict[str, Any]:
    r = httpx.get(url, timeout=5)
    r.raise_for_status()
    doc: dict[str, Any] = r.json()
    return doc


def flower_events(port: int) -> float:
    """Events Flower has counted so far: the sum of its `flower_events_total` series."""
    r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    r.raise_for_status()
    total = 0.0
    for line in r.text.splitlines():
        if line.startswith("flower_events_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _wait_http(url: str, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(0.3)
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s ({last})")


class Ways:
    """Switches the stack between the three ways (environment, restarts, Flower)."""

    def __init__(self, stack: BenchStack) -> None:
        self.stack = stack
        self.original_env = dict(stack.env)
        self.sink_port = free_port()
        self.flower_port = free_port()
        self.flower_auth = f"bench:{secrets.token_urlsafe(12)}"
        self.multiproc_dirs = 0

    def start_sink(self) -> None:
        argv = [sys.executable, "-m", "scripts.bench.otlp_sink", "--port", str(self.sink_port)]
        self.stack.run_proc(SINK, argv)
        _wait_http(self.sink_url("/stats"), 30, "OTLP sink")

    def sink_url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.sink_port}{path}"

    def sink_stats(self) -> dict[str, Any]:
        return _get_json(self.sink_url("/stats"))

    def base_env(self) -> dict[str, str]:
        return {
            k: v
            for k, v in self.original_env.items()
            if not k.startswith(OBSERVABILITY_ENV_PREFIXES) and k != MULTIPROC_DIR_ENV
        }

    def switch(self, mode: Mode) -> None:
        stack = self.stack
        stack.stop_worker(FLOWER)  # before the restart: it would re-enable the workers' events
        env = self.base_env()
        argv_extra: dict[str, list[str]] = {}
        match mode:
            case Mode.BASELINE:
                pass
            case Mode.TRACED:
                self.multiproc_dirs += 1
                metrics_dir = stack.workdir / "metrics" / str(self.multiproc_dirs)
                metrics_dir.mkdir(parents=True)
                env |= {
                    "OTEL_EXPORTER_OTLP_ENDPOINT": self.sink_url(),
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                    MULTIPROC_DIR_ENV: str(metrics_dir),
                }
            case Mode.FLOWER:
                argv_extra["llm"] = ["-E"]
        stack.env = env
        stack.restart_app(argv_extra)
        if mode is Mode.FLOWER:
            self.start_flower()

    def start_flower(self) -> None:
        data_dir = self.stack.workdir / "flower"
        data_dir.mkdir(exist_ok=True)
        argv = [sys.executable, "-m", "cortex_workers.cli", "flower", "--host", "127.0.0.1"]
        argv += ["--port", str(self.flower_port), "--data-dir", str(data_dir)]
        self.stack.run_proc(FLOWER, argv, env={"FLOWER_BASIC_AUTH": self.flower_auth})
        _wait_http(f"http://127.0.0.1:{self.flower_port}/healthcheck", 60, "Flower")

    def restore(self) -> None:
        self.stack.stop_worker(FLOWER)
        self.stack.stop_worker(SINK)
        self.stack.env = dict(self.original_env)
        self.stack.restart_app()


def measure(b: Bench, ways: Ways, mode: Mode) -> dict[str, Any]:
    """One throughput window in `mode` (the stack already switched to it)."""
    a = b.args

    def drive() -> dict[str, Any]:
        return run(
            drive_turns(
                b,
                users=a.tput_users,
                warm_s=a.tput_warmup,
                window_s=a.tput_window,
                turns_per_session=8,
            )
        )

    match mode:
        case Mode.BASELINE:
            return {"turns": drive()}
        case Mode.TRACED:
            before = ways.sink_stats()
            scrapes = Scrapes(f"{b.stack.api_base}/metrics", a.obs_scrape_every)
            with scrapes.running():
                turns = drive()
            time.sleep(6)  # the batch processors export every 5 s
            after = ways.sink_stats()
            sink = {k: after[k] - before[k] for k in after}
            if sink["spans"] <= 0:
                raise RuntimeError(
                    f"the OTLP sink received no spans during a traced window ({sink}): "
                    "tracing was not on, the measurement is invalid"
                )
            if scrapes.ok == 0 or scrapes.failed:
                raise RuntimeError(
                    f"/metrics scrapes: {scrapes.ok} ok, failures {scrapes.failed[:3]}"
                )
            return {
                "turns": turns,
                "sink": sink,
                "scrapes": {
                    "ok": scrapes.ok,
                    "every_s": scrapes.every,
                    "median_ms": round(median(scrapes.ms), 1),
                    "mean_bytes": scrapes.bytes // scrapes.ok,
                },
            }
        case Mode.FLOWER:
            before_events = flower_events(ways.flower_port)
            turns = drive()
            events = flower_events(ways.flower_port) - before_events
            if events <= 0:
                raise RuntimeError(
                    "Flower counted no task events during its window: events were not on, "
                    "the measurement is invalid"
                )
            return {"turns": turns, "flower_events": events}


def observability(b: Bench) -> None:
    stack, reps = b.stack, b.args.reps
    base = b.figure("obs_baseline_turns_per_s", "turn throughput, observability off", "turns/s")
    traced = b.figure(
        "obs_traced_turns_per_s", "turn throughput, tracing + metrics (scraped)", "turns/s"
    )
    flower = b.figure("obs_flower_turns_per_s", "turn throughput, Flower's events on", "turns/s")
    traced_ratio = b.figure(
        "obs_traced_ratio",
        "tracing + metrics / off",
        "×",
        target="≥ 0.90×",
        higher_is_better=True,
    )
    flower_ratio = b.figure("obs_flower_ratio", "Flower's events on / off", "×")
    ways = Ways(stack)
    rows: list[dict[str, Any]] = []
    try:
        ways.start_sink()
        for rep in range(reps):
            row: dict[str, Any] = {}
            for mode in Mode:
                b.say(f"observability: rep {rep + 1}, {mode}")
                ways.switch(mode)
                row[mode] = measure(b, ways, mode)
            tps = {m: float(row[m]["turns"]["turns_per_s"]) for m in Mode}
            base.reps.append(tps[Mode.BASELINE])
            traced.reps.append(tps[Mode.TRACED])
            flower.reps.append(tps[Mode.FLOWER])
            traced_ratio.reps.append(tps[Mode.TRACED] / tps[Mode.BASELINE])
            flower_ratio.reps.append(tps[Mode.FLOWER] / tps[Mode.BASELINE])
            rows.append(row)
            b.say(
                f"  rep {rep + 1}: off {tps[Mode.BASELINE]:.1f}, traced {tps[Mode.TRACED]:.1f} "
                f"({row[Mode.TRACED]['sink']['spans']} spans received), Flower "
                f"{tps[Mode.FLOWER]:.1f} turns/s ({row[Mode.FLOWER]['flower_events']:.0f} events)"
            )
    finally:
        b.details["observability"] = {
            "users": b.args.tput_users,
            "warmup_s": b.args.tput_warmup,
            "window_s": b.args.tput_window,
            "scrape_every_s": b.args.obs_scrape_every,
            "ratio_of_medians": {
                "traced": traced.value / base.value if base.reps and base.value else None,
                "flower": flower.value / base.value if base.reps and base.value else None,
            },
            "reps": rows,
        }
        ways.restore()
    traced_ratio.reached = traced_ratio.value >= 0.90

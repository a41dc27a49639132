"""Benchmarks of cortex-workers: turn throughput against a bare Celery chain, POST→done latency,
added time to first token, slow model calls per worker process by pool, and SSE fan-out, each
on a private stack started and stopped by the run. See docs/benchmarks.md.

    scripts/bench/run                       # the full run, about eight minutes on 2 cores
    scripts/bench/run --quick --json q.json # about two minutes
    scripts/bench/run --only throughput,latency --reps 3
"""

"""`cortex-workers worker`: named by its queues, metrics on --metrics-port (prefork: the parent
serves them, in multiprocess mode), JSON log lines with CORTEX_LOG_FORMAT=json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from support import Stack, free_port, wait_until


def test_a_prefork_worker_serves_metrics_and_writes_json_lines(
    stack: Stack, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "worker.log"
    env = {**os.environ, **stack.env, "CORTEX_LOG_FORMAT": "json"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    argv = [sys.executable, "-m", "cortex_workers.cli", "worker", "--queues", "summarize"]
    argv += ["--pool", "prefork", "--concurrency", "2", "--metrics-port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: b"ready" in log.read_bytes(), timeout=60, what="worker ready")
        r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/plain")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0
    # every line is one JSON object, but for what Celery prints itself when it stops
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines if line != "worker: Warm shutdown (MainProcess)"]
    ready = [r for r in records if str(r.get("message", "")).endswith("ready.")]
    assert ready and ready[0]["message"].startswith("summarize@"), ready
    assert {"time", "level", "logger", "message"} <= set(ready[0])

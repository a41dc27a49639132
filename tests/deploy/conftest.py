"""A real Prometheus server on a free loopback port, with a temporary config and data directory.

`start_prometheus(targets)` starts one that scrapes the given `host:port` targets (itself when
none are given) every second, loading deploy/prometheus/alerts.yaml, and stops it after the test.
Without the `prometheus` program the test skips (or fails under
CORTEX_REQUIRE_SYSTEM_PROGRAMS=1).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import free_port, require_program, wait_until

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yaml"


@dataclass(frozen=True)
class Prometheus:
    url: str
    log: Path

    def query(self, expr: str) -> dict[str, Any]:
        """The JSON answer of an instant query; raises on a query Prometheus refuses."""
        response = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        body: dict[str, Any] = response.json()
        assert response.status_code == 200 and body["status"] == "success", (expr, body)
        return body

    def alert_names(self) -> set[str]:
        """The alerting rules the server loaded."""
        body = httpx.get(f"{self.url}/api/v1/rules", timeout=10).json()
        return {rule["name"] for group in body["data"]["groups"] for rule in group["rules"]}

    def up(self, job: str) -> bool:
        result = self.query(f'up{{job="{job}"}} == 1')["data"]["result"]
        return bool(result)


def _config(port: int, targets: Sequence[str], metrics_path: str) -> str:
    jobs: list[dict[str, Any]] = [
        {"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
    ]
    if targets:
        jobs.append(
            {
                "job_name": "cortex",
                "metrics_path": metrics_path,
                "static_configs": [{"targets": list(targets)}],
            }
        )
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": jobs,
    }
    return json.dumps(config)  # JSON is YAML


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def start_prometheus(tmp_path: Path) -> Iterator[Callable[..., Prometheus]]:
    program = require_program("prometheus", "it scrapes and queries the metrics")
    procs: list[subprocess.Popen[bytes]] = []

    def start(targets: Sequence[str] = (), metrics_path: str = "/metrics") -> Prometheus:
        port = free_port()
        work = tmp_path / f"prometheus-{port}"
        (work / "data").mkdir(parents=True)
        config = work / "prometheus.yml"
        config.write_text(_config(port, targets, metrics_path))
        log = work / "prometheus.log"
        with log.open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        program,
                        f"--config.file={config}",
                        f"--storage.tsdb.path={work / 'data'}",
                        f"--web.listen-address=127.0.0.1:{port}",
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: procs[-1].poll() is not None or _ready(url), what="prometheus")
        except AssertionError:
            raise AssertionError(log.read_text()) from None
        assert procs[-1].poll() is None, log.read_text()
        return Prometheus(url=url, log=log)

    yield start
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

"""A `cortex-workers dev` stack (without Flower) on free ports and its own data directory, for
the end-to-end metrics tests, and the real Prometheus server of tests/deploy that scrapes it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from deploy.conftest import start_prometheus
from ops.dev_stack import start_dev
from ops_metrics.dev_metrics import DevMetricsStack
from support import api_ready, dev_env, free_port, stop_dev, wait_until

__all__ = ["dev_metrics_stack", "start_prometheus"]


@pytest.fixture(scope="module")
def dev_metrics_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevMetricsStack]:
    root = tmp_path_factory.mktemp("ops-metrics")
    data_dir, log = root / "data", root / "dev.log"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # a failed model attempt is retried within a second
    env = dev_env(CORTEX_RETRY_BASE_S="0.2", CORTEX_RETRY_MAX_S="0.5")
    proc = start_dev(data_dir, port=port, flower_port=None, log=log, env=env)
    try:
        wait_until(lambda: api_ready(base), timeout=120, interval=0.5, what="dev stack ready")
        key = (data_dir / "api-key").read_text().strip()
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as api:
            yield DevMetricsStack(base, api, log)
    finally:
        stop_dev(proc)

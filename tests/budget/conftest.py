"""Budget tests: extra `llm` worker processes on the stack's broker (with the session's own,
five processes run model steps)."""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from budget_support import LlmWorkers
from support import Api, Workers, wait_until

from cortex_workers.cli import worker_argv
from cortex_workers.supervisor import die_with_parent


@pytest.fixture(scope="module")
def llm_workers(workers: Workers, api: Api) -> Iterator[LlmWorkers]:
    logs = [workers.log_dir / f"budget-llm-{i}-{uuid.uuid4().hex[:6]}.log" for i in range(4)]
    procs = []
    for i, log in enumerate(logs):
        argv = worker_argv(
            ["llm"], pool=None, concurrency=100, loglevel="INFO", hostname=f"budget{i}@%h"
        )
        procs.append(
            subprocess.Popen(
                argv,
                # a small pool each: four processes of 100 greenlets must not take every
                # connection the test server has (the stack's own workers need theirs, and a
                # heartbeat that cannot connect makes a live worker look gone)
                env={**workers.env, "CORTEX_DB_POOL_SIZE": "5"},
                stdout=log.open("ab"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: die_with_parent(signal.SIGKILL),
            )
        )
    wait_until(
        lambda: all(b"ready" in log.read_bytes() for log in logs),
        timeout=90,
        what="extra llm workers ready",
    )
    # a worker logs "ready" once warm (runtime, provider clients, detectors built): its first
    # steps hold their leases like any later one
    group = LlmWorkers(procs)
    yield group
    group.kill_all()

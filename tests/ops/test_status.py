"""`cortex-workers status`: queues, the workers that answer, recent turns; exit 1 when the
broker does not answer."""

from __future__ import annotations

import json

from ops.dev_stack import DevStack, cli
from support import dev_env, free_port


def test_status_prints_queues_workers_and_turns(dev_stack: DevStack) -> None:
    dev_stack.two_tool_turn()
    out = cli("status", "--data-dir", str(dev_stack.data_dir), env=dev_env())
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "database answers; broker answers"
    rows = {line.split()[0]: line for line in lines if line.split()[:1]}
    for queue, node in [
        ("llm", "llm@"),
        ("tools", "tools@"),
        ("summarize", "summarize-maintenance@"),
        ("maintenance", "summarize-maintenance@"),
        ("webhooks", "webhooks@"),
        ("batch", "batch@"),
        ("agents", "agents@"),
    ]:
        assert node in rows[queue], out.stdout
    assert "turns in the last hour:" in out.stdout
    assert "providers cooling down: none" in out.stdout
    assert "INFO" not in out.stdout + out.stderr  # the report only

    report = json.loads(
        cli("status", "--json", "--data-dir", str(dev_stack.data_dir), env=dev_env()).stdout
    )
    assert report["ok"] is True
    queues = ["llm", "tools", "summarize", "maintenance", "webhooks", "batch", "agents"]
    assert [q["queue"] for q in report["queues"]] == queues
    assert all(q["depth"] == 0 and q["in_flight"] == 0 for q in report["queues"])
    assert {w["name"].split("@")[0] for w in report["workers"]} == {
        "llm",
        "tools",
        "summarize-maintenance",
        "webhooks",
        "batch",
        "agents",
    }
    assert report["turns_last_hour"]["done"] >= 1
    assert report["problems"] == []


def test_status_exits_1_when_the_broker_does_not_answer(dev_stack: DevStack) -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    env = dev_env(REDIS_URL=nowhere, CELERY_BROKER_URL=nowhere)
    out = cli("status", "--data-dir", str(dev_stack.data_dir), env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.splitlines()[0] == "database answers; broker does not answer"
    assert "problem: broker:" in out.stdout
    assert "turns in the last hour:" in out.stdout  # what the database knows is still shown

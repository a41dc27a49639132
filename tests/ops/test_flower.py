"""Flower under `cortex-workers dev`: workers named by queue, tasks named by queue and shown by
their ids, every queue on the broker, and nothing without the credentials."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
from ops.dev_stack import QUEUE_NODES, DevStack, flower_up
from support import dev_env, free_port, wait_until

from cortex_workers.queues import TICKS


def test_flower_answers_only_with_the_credentials(dev_stack: DevStack) -> None:
    for path in ("/api/workers", "/api/tasks", "/api/queues/length"):
        assert httpx.get(f"{dev_stack.flower}{path}", timeout=10).status_code == 401
        wrong = ("admin", "not-the-password")
        assert httpx.get(f"{dev_stack.flower}{path}", auth=wrong, timeout=10).status_code == 401
    # its URL and credentials are printed with the banner, once every queue's worker answers
    wait_until(
        lambda: dev_stack.flower_auth[1] in dev_stack.log.read_text(),
        timeout=90,
        interval=0.5,
        what="the banner with Flower's credentials",
    )
    assert "Flower" in dev_stack.log.read_text()


def test_flower_lists_one_worker_per_queue_with_its_queues(dev_stack: DevStack) -> None:
    workers = dev_stack.flower_get("/api/workers", refresh=1)
    queues = {
        name.split("@")[0]: sorted(q["name"] for q in info["active_queues"])
        for name, info in workers.items()
    }
    assert queues == QUEUE_NODES


def test_flower_shows_a_turns_tasks_by_name_with_their_ids_and_no_content(
    dev_stack: DevStack,
) -> None:
    sid, tid = dev_stack.two_tool_turn()

    def tasks_of_turn() -> list[dict[str, str]]:
        tasks = latest_200().values()
        mine = [t for t in tasks if f"turn={tid}" in (t.get("args") or "")]
        return mine if len(mine) >= 4 else []

    def latest_200() -> dict[str, dict[str, str]]:
        """What Flower's task list shows first."""
        return dict(dev_stack.flower_get("/api/tasks", limit=200, sort_by="-received"))

    tasks = wait_until(tasks_of_turn, timeout=30, interval=0.5, what="the turn's tasks in Flower")
    names = sorted(t["name"] for t in tasks)
    assert names == ["cortex.llm.run_model_step"] * 2 + ["cortex.tools.run_tool_step"] * 2
    for task in tasks:
        kind = "model" if task["name"].startswith("cortex.llm.") else "tool"
        assert task["args"] == f"step={task['uuid']} turn={tid} session={sid} kind={kind}"
        assert task["kwargs"] in ("", "{}")
        assert task["state"] == "SUCCESS"
    every = dev_stack.flower_get("/api/tasks").values()
    assert not [t for t in every if "2**10" in f"{t.get('args')}{t.get('kwargs')}"]
    # beat's maintenance ticks (every second each) do not flood the list
    assert not [t for t in latest_200().values() if t["name"] in TICKS]


def test_an_idle_stack_writes_at_most_a_few_lines(dev_stack: DevStack) -> None:
    """Beat's maintenance passes run every second; an idle stack logs none of them."""
    time.sleep(3)  # let what came before settle
    before = dev_stack.log.read_text(errors="replace").splitlines()
    time.sleep(60)  # a minute of an idle console: sixty ticks of each pass
    after = dev_stack.log.read_text(errors="replace").splitlines()
    new = after[len(before) :]
    assert len(new) <= 3, "\n".join(new[:20])


def test_flower_shows_every_queue_on_the_broker(dev_stack: DevStack) -> None:
    lengths = dev_stack.flower_get("/api/queues/length")["active_queues"]
    assert {q["name"] for q in lengths} >= {"llm", "tools", "summarize", "maintenance"}


def test_flower_command_reaches_a_running_dev_stack_through_its_data_dir(
    dev_stack: DevStack,
) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "cortex_workers.cli", "flower", "--port", str(port)]
    argv += ["--data-dir", str(dev_stack.data_dir)]
    env = dev_env(FLOWER_BASIC_AUTH="ops:s3cret")
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: flower_up(url, ("ops", "s3cret")), timeout=60, what="second flower")
        assert httpx.get(f"{url}/api/workers", timeout=10).status_code == 401
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert b"s3cret" not in out  # given, so not printed
    assert b"s3cret" not in b" ".join(a.encode() for a in argv)  # nor on its command line

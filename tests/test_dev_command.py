"""`cortex-workers dev`: the whole stack on embedded servers, supervised, and stopped cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from ops.dev_stack import start_dev
from support import api_ready, dev_env, free_port, parse_sse, stop_dev, wait_until

SCRIPT = [
    {
        "text": "Working.",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "2**10"}},
            {"name": "current_time", "arguments": {}},
        ],
    },
    {"text": "2**10 is 1024."},
]


def _children(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    return psutil.Process(proc.pid).children(recursive=True)


def _cmd(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:  # exited meanwhile, or a zombie not yet reaped
        return ""


@pytest.fixture
def dev_dir(tmp_path: Path) -> Path:
    return tmp_path / "cortex-data"


def test_dev_runs_the_stack_restarts_dead_parts_and_keeps_data(
    dev_dir: Path, tmp_path: Path
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "dev.log"
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    flower_port = free_port()
    env = dev_env(CORTEX_PLUGINS_DIR=str(plugins))
    proc = start_dev(dev_dir, port=port, flower_port=flower_port, log=log, env=env)
    try:
        # the banner comes once the API and a worker of every queue answer
        wait_until(lambda: "is ready" in log.read_text(), timeout=240, what="dev stack ready")
        assert api_ready(base)
        key = (dev_dir / "api-key").read_text().strip()
        assert key in log.read_text()  # printed with a curl example
        assert "curl" in log.read_text()
        cmdlines = [_cmd(p) for p in _children(proc)]
        for queue in ("--queues llm", "--queues tools", "--queues summarize"):
            assert any(queue in c for c in cmdlines), cmdlines
        assert any(" beat" in c for c in cmdlines)
        assert any(" flower " in c and f"--port={flower_port}" in c for c in cmdlines), cmdlines
        flower_password = (dev_dir / "flower-auth").read_text().strip().partition(":")[2]
        assert flower_password and flower_password in log.read_text()  # printed with its URL

        http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        sid = http.post("/v1/sessions", json={"metadata": {"script": SCRIPT}}).json()["id"]
        tid = http.post(f"/v1/sessions/{sid}/turns", json={"content": "2**10?"}).json()["id"]
        with http.stream("GET", f"/v1/turns/{tid}/events") as r:
            events = []
            for e in parse_sse(r.iter_lines()):
                events.append(e)
                if e.event == "done":
                    break
        assert [e.event for e in events].count("tool_result") == 2
        assert http.get(f"/v1/turns/{tid}").json()["answer"] == "2**10 is 1024."

        # a worker that dies is started again
        llm = next(p for p in _children(proc) if "--queues llm" in _cmd(p))
        llm.kill()
        wait_until(
            lambda: any("--queues llm" in _cmd(p) and p.pid != llm.pid for p in _children(proc)),
            timeout=60,
            what="llm worker restart",
        )
        tid2 = http.post(f"/v1/sessions/{sid}/turns", json={"content": "again"}).json()["id"]
        wait_until(
            lambda: http.get(f"/v1/turns/{tid2}").json()["status"] == "done",
            timeout=60,
            what="turn after restart",
        )
        # a new plugin manifest is picked up on SIGHUP, without a restart
        (plugins / "runbook.yaml").write_text(
            "name: runbook_lookup\ndescription: Find a runbook.\n"
            "parameters: {topic: {type: string}}\n"
            "endpoint: {method: GET, url: 'https://runbooks.example.internal/search'}\n"
        )
        api_proc = next(p for p in _children(proc) if " api " in _cmd(p) + " ")
        api_proc.send_signal(signal.SIGHUP)
        wait_until(
            lambda: "runbook_lookup" in {t["name"] for t in http.get("/v1/tools").json()["tools"]},
            timeout=30,
            what="tools reloaded",
        )
        # workers reload in place on SIGHUP too (no re-exec, same process)
        tools_worker = next(p for p in _children(proc) if "--queues tools" in _cmd(p))
        tools_worker.send_signal(signal.SIGHUP)
        wait_until(
            lambda: "tools reloaded on SIGHUP" in log.read_text(), timeout=30, what="worker reload"
        )
        assert tools_worker.is_running() and "--queues tools" in _cmd(tools_worker)
        children = _children(proc)
    finally:
        stop_dev(proc)
    assert proc.returncode == 0
    time.sleep(0.5)
    assert not [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    # `keys create` reaches the same embedded servers through --data-dir
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cortex_workers.cli",
            "keys",
            "create",
            "--tenant",
            "ops",
            "--data-dir",
            str(dev_dir),
        ],
        env=dev_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    ops_key = out.stdout.strip().splitlines()[-1]
    assert ops_key.startswith("cwk_")

    # data survives a restart, and the key created meanwhile works
    proc = start_dev(dev_dir, port=port, flower_port=None, log=log, env=dev_env())
    try:
        wait_until(lambda: api_ready(base), timeout=120, interval=0.5, what="dev stack restarted")
        assert (dev_dir / "api-key").read_text().strip() == key
        r = httpx.get(
            f"{base}/v1/sessions/{sid}/messages", headers={"Authorization": f"Bearer {key}"}
        )
        assert [m["role"] for m in r.json()["messages"]][:2] == ["user", "assistant"]
        # a provider without its secret is listed, unavailable, with what to set
        providers = {
            p["name"]: p
            for p in httpx.get(
                f"{base}/v1/providers", headers={"Authorization": f"Bearer {key}"}
            ).json()
        }
        assert providers["scripted"]["available"] and providers["scripted"]["default"]
        assert not providers["anthropic"]["available"]
        assert "ANTHROPIC_API_KEY" in providers["anthropic"]["reason"]
        assert (
            httpx.get(
                f"{base}/v1/providers", headers={"Authorization": f"Bearer {ops_key}"}
            ).status_code
            == 200
        )
    finally:
        stop_dev(proc)


def test_dev_keeps_one_token_secret_in_its_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cortex_workers.supervisor import dev_token_secret

    monkeypatch.delenv("CORTEX_TOKEN_SECRET", raising=False)
    first = dev_token_secret(tmp_path)
    assert len(first) >= 32 and (tmp_path / "token-secret").stat().st_mode & 0o777 == 0o600
    assert dev_token_secret(tmp_path) == first  # tokens survive a restart
    monkeypatch.setenv("CORTEX_TOKEN_SECRET", "from-the-environment")
    assert dev_token_secret(tmp_path) == "from-the-environment"


def test_the_restart_delay_grows_while_a_child_keeps_dying_and_resets_after_a_healthy_run() -> None:
    from cortex_workers.supervisor import HEALTHY_S, Child

    child = Child("worker", ["true"])
    delays = []
    for restarts in range(8):
        child.restarts, child.started_at = restarts, 1000.0
        delays.append(child.restart_delay(1000.0 + 1))  # died a second after its start
    assert delays == [0.5, 1, 2, 4, 8, 16, 30, 30]
    child.restarts, child.started_at = 12, 1000.0
    assert child.restart_delay(1000.0 + HEALTHY_S + 1) == 0.5  # after a healthy hour, quick
    assert child.restarts == 0

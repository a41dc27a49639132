"""`cortex-workers dev` from start to stop: it refuses a busy port before starting anything,
says it is ready only once a worker of every queue answers, stops at once when nothing runs
(on SIGTERM, Ctrl-C or a closed terminal's SIGHUP), and leaves no process behind (its embedded
servers included), even when it is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from ops.dev_stack import QUEUE_NODES, start_dev
from support import api_ready, dev_env, free_port, wait_until


def _servers(data_dir: Path) -> list[psutil.Process]:
    """The embedded PostgreSQL and Valkey of `data_dir` that still run."""
    found = []
    valkey = json.loads((data_dir / "valkey" / "server.json").read_text())["pid"]
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if proc.info["pid"] == valkey or f"{data_dir / 'pg'}" in cmdline and "postgres" in cmdline:
            found.append(proc)
    return found


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_a_busy_port_is_named_before_anything_starts(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        argv = [sys.executable, "-m", "cortex_workers.cli", "dev", "--data-dir", str(data_dir)]
        argv += ["--port", str(port), "--no-flower"]
        run = subprocess.run(argv, env=dev_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert f"port {port} on 127.0.0.1 (API) is busy" in run.stderr
    assert "--port" in run.stderr
    assert not data_dir.exists()  # no server started, no key made


@pytest.mark.parametrize("stop", ["sigterm", "terminal closed"])
def test_ready_means_every_queue_answers_and_a_stop_leaves_nothing(
    tmp_path: Path, stop: str
) -> None:
    """Stopped by SIGTERM (a process manager) or by its terminal closing: the terminal's SIGHUP
    reaches the whole foreground process group, as the shell of a closed terminal sends it."""
    data_dir, log = tmp_path / "data", tmp_path / "dev.log"
    port = free_port()
    proc = start_dev(data_dir, port=port, flower_port=None, log=log, env=dev_env())
    try:
        wait_until(lambda: "is ready" in log.read_text(), timeout=240, what="dev ready")
        text = log.read_text()
        before_ready = text[: text.index("is ready")]
        for node in QUEUE_NODES:
            assert f"{node}@" in before_ready and "ready." in before_ready, node
        assert api_ready(f"http://127.0.0.1:{port}")
        _the_banners_example_runs(text)
        servers = _servers(data_dir)
        assert len(servers) == 2, servers
        children = psutil.Process(proc.pid).children(recursive=True)
    finally:
        if stop == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGHUP)
        proc.wait(60)
    assert proc.returncode == 0
    text = log.read_text()
    assert text.count("drain: no step running; stopping now") == len(QUEUE_NODES)
    assert "steps still running after" not in text
    wait_until(lambda: not _alive(children + servers), timeout=15, what="every process gone")


def _the_banners_example_runs(log: str) -> None:
    """The banner's "Try it" lines, pasted into a shell, make a session with `CW` / `CW_KEY`."""
    lines = log[log.index("Try it") :].splitlines()[1:]
    example = "\n".join(line for line in lines[: lines.index("Ctrl-C stops everything.")])
    assert "export CW=http://127.0.0.1:" in example and "$CW/v1/sessions" in example
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", example], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert '"id"' in run.stdout, run.stdout


def test_a_sigkilled_dev_leaves_no_embedded_server_behind(tmp_path: Path) -> None:
    """What a process manager does: SIGTERM, and SIGKILL when it does not stop in time."""
    data_dir, log = tmp_path / "data", tmp_path / "dev.log"
    proc = start_dev(data_dir, port=free_port(), flower_port=None, log=log, env=dev_env())
    try:
        wait_until(
            lambda: "is starting" in log.read_text(), timeout=120, what="the embedded servers"
        )
        servers = _servers(data_dir)
        assert len(servers) == 2, servers
        children = psutil.Process(proc.pid).children(recursive=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.kill()
        proc.wait(10)
    wait_until(lambda: not _alive(servers + children), timeout=30, what="every process gone")

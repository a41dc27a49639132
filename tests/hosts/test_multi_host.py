"""Five hosts on a private bridge (scripts/hosts): `db` (Postgres, Redis, beat), `api1`,
`api2`, `w1` and `w2` (a worker of every queue group each). 30 turns that each call two tools
run while `w1` loses power (every process at once) and later `api1` is cut off; clients reach
the APIs through one address that skips an API that does not answer, so those that lose `api1`
resume on `api2` with Last-Event-ID. Nothing is lost, duplicated or out of order, and what every
client rebuilt from SSE is the stored text."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from scripts.hosts.network import PREFIX, Forward, Network
from scripts.hosts.scenarios import problems, run_hosts

# both CI passes: the hosts bring servers of their own, and the passes run side by side
pytestmark = pytest.mark.servers


@pytest.mark.timeout(420)
@pytest.mark.usefixtures("namespaces")
def test_turns_survive_a_power_loss_and_a_partition_across_hosts() -> None:
    report = run_hosts(sessions=6, turns=5, seed=33)
    evidence = json.dumps({"counts": report["counts"], "problems": report["problems"]}, default=str)
    assert report["counts"]["planned"] == 30
    assert problems(report) == {}, evidence[:4000]
    kinds = {f["kind"]: f for f in report["faults"]}
    assert kinds["power_off_w1"]["details"]["result"], "w1 had processes to kill"
    assert any(f["landed"] for f in report["faults"]), report["faults"]
    # the clients cut off from api1 went on on api2
    assert report["api2_connections_after_partition"] > 0, report["api_connections"]


def _namespaces() -> set[str]:
    """This process's namespaces (another test run may be making its own meanwhile)."""
    mine = f"{PREFIX}{os.getpid()}-"
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in out.stdout.splitlines() if line.startswith(mine)}


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("namespaces")
def test_hosts_reach_each_other_only_over_their_link() -> None:
    before = _namespaces()
    with Network() as net:
        a, b = net.add_host("a"), net.add_host("b")
        server = subprocess.Popen(
            ["python3", "-m", "http.server", "8080", "--bind", a.address],
            preexec_fn=net.preexec("a"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        fetch = f"import urllib.request as u; u.urlopen('http://{a.address}:8080/', timeout=2)"

        def reach() -> int:
            return subprocess.run(
                ["python3", "-c", fetch], preexec_fn=net.preexec("b"), capture_output=True
            ).returncode

        import time

        deadline = time.monotonic() + 20
        while reach() != 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert reach() == 0
        forward = Forward(net, [(a.address, 8080)])
        import httpx

        assert httpx.get(forward.url, timeout=5).status_code == 200
        net.partition("a")
        assert reach() != 0
        net.heal("a")
        assert reach() == 0
        c = net.add_host("c")  # added while the others run
        assert c.address not in (a.address, b.address)
        assert net.power_off("a") == [server.pid]
        assert server.wait(5) == -9
        forward.close()
        assert len(_namespaces() - before) == 4  # a, b, c and the bridge's
    assert _namespaces() == before

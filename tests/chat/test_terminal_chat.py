"""`cortex-workers chat` in a pseudo-terminal, against the real stack."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pexpect
import pytest
from fakes.tcp_proxy import TcpProxy
from support import Api, wait_until

from cortex_workers.client import Client

TOOL_TURN = [
    {
        "text": "Checking both. ",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "2+2"}},
            {"name": "calculate", "arguments": {"expression": "1/0"}},
        ],
    },
    {"text": "It is 4."},
]
PROPOSE_TURN = [
    {
        "text": "A restart should help. ",
        "tool_calls": [
            {
                "name": "propose_action",
                "arguments": {"action": "restart", "product": "billing", "rationale": "stuck"},
            }
        ],
    },
    {"text": "Proposed."},
]
SLOW_TEXT = " ".join(f"w{i}" for i in range(60)) + "."
GREEN, YELLOW, RESET = "\x1b[32m", "\x1b[33m", "\x1b[0m"


@pytest.fixture
def cw(api: Api, tenant_key: str) -> Iterator[Client]:
    with Client(api.base_url, tenant_key) as client:
        yield client


@pytest.fixture
def key_file(tmp_path: Path, tenant_key: str) -> Path:
    path = tmp_path / "api-key"
    path.write_text(tenant_key + "\n")
    return path


def chat(base_url: str, key_file: Path, *args: str) -> pexpect.spawn[Any]:
    """The chat in a pseudo-terminal; everything it printed is in `child.logfile_read`."""
    argv = ["-m", "cortex_workers.cli", "chat", "--base", base_url, "--key-file", str(key_file)]
    child = pexpect.spawn(
        sys.executable, [*argv, *args], encoding="utf-8", timeout=30, dimensions=(50, 200)
    )
    child.logfile_read = io.StringIO()
    child.expect_exact("you> ")
    return child


def test_a_two_tool_turn_prints_each_call_and_result_on_its_line(
    api: Api, cw: Client, key_file: Path
) -> None:
    session = cw.sessions.create(metadata={"script": TOOL_TURN})
    child = chat(api.base_url, key_file, "--session", session.id)
    child.sendline("what is 2+2?")
    child.expect_exact("Checking both. ")
    child.expect_exact('→ calculate {"expression": "2+2"}')
    child.expect_exact('→ calculate {"expression": "1/0"}')
    child.expect_exact("It is 4.")
    child.expect_exact("you> ")
    output = child.logfile_read.getvalue()
    # one line per result, in the order the calls finished, coloured by severity
    assert GREEN + '← calculate: {"result": 4}' + RESET in output
    assert YELLOW + "← calculate [input]: invalid: division by zero" + RESET in output  # warning
    child.sendeof()
    child.expect(pexpect.EOF)


def _last_turn(cw: Client, session_id: str) -> str:
    messages = cw.sessions.messages(session_id, limit=500).messages
    return str(next(m.turn_id for m in reversed(messages) if m.turn_id))


def test_a_proposal_is_confirmed_from_the_prompt(api: Api, cw: Client, key_file: Path) -> None:
    session = cw.sessions.create(metadata={"script": PROPOSE_TURN})
    child = chat(api.base_url, key_file, "--session", session.id)
    child.sendline("billing is stuck")
    child.expect_exact("? proposed: restart on billing: stuck")
    child.expect_exact("Proposed.")
    child.expect_exact("restart on billing: [c]onfirm, [r]eject or [s]kip? ")
    child.sendline("c")
    child.expect(r"proposal ([0-9a-f-]{36}): confirmed")
    proposal = cw.proposals.get(child.match.group(1))
    assert proposal.session_id == session.id and proposal.status != "rejected"
    assert proposal.status in ("confirmed", "executing", "executed")
    child.expect_exact("you> ")
    child.sendeof()
    child.expect(pexpect.EOF)


def test_ctrl_c_cancels_the_running_turn_and_twice_exits(
    api: Api, cw: Client, key_file: Path
) -> None:
    # 60 words at 500 ms: the turn is still running when Ctrl-C comes, on a loaded machine too
    session = cw.sessions.create(metadata={"script": [{"text": SLOW_TEXT, "token_ms": 500}]})
    child = chat(api.base_url, key_file, "--session", session.id)
    child.sendline("count slowly")
    child.expect_exact("w3 ")
    child.sendintr()
    child.expect_exact("cancelling the turn")
    child.expect_exact("[cancelled;")
    child.expect_exact("you> ")
    turn = cw.turns.get(_last_turn(cw, session.id))
    assert turn.status == "cancelled" and turn.answer is None
    child.sendintr()
    child.expect_exact("Ctrl-C again")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_a_dropped_connection_resumes_silently(api: Api, cw: Client, key_file: Path) -> None:
    where = urlsplit(api.base_url)
    proxy = TcpProxy(where.hostname or "127.0.0.1", where.port or 80)
    try:
        session = cw.sessions.create(metadata={"script": [{"text": SLOW_TEXT, "token_ms": 30}]})
        child = chat(proxy.base_url, key_file, "--session", session.id)
        child.sendline("count")
        child.expect_exact("w10 ")
        assert proxy.cut_all() > 0
        child.expect_exact("you> ")
        output = child.logfile_read.getvalue()
        assert SLOW_TEXT in output and "✗" not in output
        wait_until(lambda: proxy.connections >= 2, timeout=5, what="a new connection")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        proxy.stop()


def test_the_defaults_are_where_cortex_workers_dev_serves_and_writes_its_key() -> None:
    from cortex_workers.cli import build_parser
    from cortex_workers.terminal_chat import DEFAULT_BASE_URL, DEFAULT_KEY_FILE

    dev = build_parser().parse_args(["dev"])
    assert f"http://{dev.host}:{dev.port}" == DEFAULT_BASE_URL
    assert Path(DEFAULT_KEY_FILE) == Path(dev.data_dir) / "api-key"  # supervisor.dev_key

"""A guard for the embedded servers a process started: it stops them when that process ends,
however it ends (SIGKILL included).

Started by `EmbeddedStack` with a pipe on its standard input; the pipe closes when its parent
dies, and then the guard stops PostgreSQL (a fast shutdown: SIGINT to the postmaster, SIGQUIT
if it lingers) and Valkey. A parent that stops the servers itself closes the pipe after: the
guard finds them gone and exits.

    python -m cortex_workers.embedded_guard --pg-data DIR [--pid PID ...]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .devstack import pid_alive

STOP_WAIT_S = 8.0


def _postmaster(pg_data: Path) -> int | None:
    try:
        return int((pg_data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _stop(pid: int, first: signal.Signals, last: signal.Signals) -> None:
    try:
        os.kill(pid, first)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_WAIT_S
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, last)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cortex_workers.embedded_guard")
    parser.add_argument("--pg-data", type=Path)
    parser.add_argument("--pid", type=int, action="append", default=[])
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent; its end is ours
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while sys.stdin.buffer.read(1024):  # until the parent is gone (EOF)
        pass
    if args.pg_data is not None:
        postmaster = _postmaster(args.pg_data)
        if postmaster is not None:
            _stop(postmaster, signal.SIGINT, signal.SIGQUIT)
    for pid in args.pid:
        _stop(pid, signal.SIGTERM, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())

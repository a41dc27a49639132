"""The counted stack of tests/hot_path: its API and the counting proxies of its processes."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from support import Api
from wire_counter import PostgresCounter, RedisCounter

PROCESSES = ("api", "llm", "tools")


@dataclass
class Counted:
    """The counted stack: its API, and the proxies' counts per process."""

    api: Api
    postgres: dict[str, PostgresCounter]
    redis: dict[str, RedisCounter]
    per_turn: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, list[tuple[str, str]]]] = field(default_factory=list)
    """Per measured turn, per process: the statements sent (for a failure's message)."""

    def snapshot(self) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {}
        for name in PROCESSES:
            out[f"pg:{name}"] = self.postgres[name].snapshot()
            out[f"redis:{name}"] = self.redis[name].snapshot()
        return out

    def measure(self, run_turn: Callable[[], Any], *, turns: int) -> dict[str, float]:
        """Run `turns` turns one after another (after one that warms the processes up) and
        return, per process, the median of what each turn cost: `pg:<process>` round trips
        (every BEGIN, COMMIT and pre-ping; not those of the workers' heartbeat connection)
        and `redis` commands of all processes together."""
        run_turn()
        costs: list[dict[str, int]] = []
        self.sent = []
        for _ in range(turns):
            before = self.snapshot()
            marks = {name: len(self.postgres[name].statements) for name in PROCESSES}
            run_turn()
            after = self.snapshot()
            self.sent.append({n: self.postgres[n].statements[marks[n] :] for n in PROCESSES})
            cost = {
                f"pg:{name}": _sum_apps(after[f"pg:{name}"] - before[f"pg:{name}"])
                for name in PROCESSES
            }
            cost["redis"] = sum(
                sum((after[f"redis:{n}"] - before[f"redis:{n}"]).values()) for n in PROCESSES
            )
            costs.append(cost)
        self.per_turn = costs
        return {key: statistics.median(c[key] for c in costs) for key in costs[0]}


def _sum_apps(counts: Counter[str]) -> int:
    """Round trips of a process's connections, without its heartbeat's (a connection of its
    own, on a timer)."""
    return sum(n for app, n in counts.items() if app != "cortex-liveness")

"""A Markdown table of one or more `--json` reports, one column per run:

python -m scripts.faults.report faults-1.json faults-2.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROWS: list[tuple[str, str]] = [
    ("turns submitted", "submitted"),
    ("done", "done"),
    ("failed visibly", "failed_visibly"),
    ("lost", "lost"),
    ("duplicated assistant messages", "duplicated_assistant_messages"),
    ("duplicated other messages / turns", "duplicates_other"),
    ("order violations", "order_violations"),
    ("stream ≠ stored (SSE clients)", "stream_vs_stored_mismatches"),
    ("stream ≠ stored (fresh clients after the fault)", "observer_mismatches"),
    ("SSE streams incomplete", "sse_incomplete"),
    ("HTTP 5xx other than 503 / bad error shape", "http_violations"),
    ("faults fired / landed", "faults"),
    ("steps mid-flight at the faults", "steps_mid_flight_at_faults"),
    ("steps retried", "retried"),
    ("longest turn recovery (s): fault → turn ended", "longest_recovery_s"),
    ("step recovery p50 / max (s): fault → step done again", "step_recovery"),
    ("turn duration p50 / max (s)", "durations"),
    ("verdict", "verdict"),
]


def _cell(run: dict[str, Any], key: str) -> str:
    c = run["counts"]
    match key:
        case "duplicates_other":
            return f"{c['duplicated_other_messages']} / {c['duplicate_turns']}"
        case "http_violations":
            return f"{c['http_5xx_not_503']} / {c['error_shape_violations']}"
        case "faults":
            return f"{c['faults_fired']} / {c['faults_landed']}"
        case "retried":
            return ", ".join(f"{v} {k}" for k, v in sorted(c["retried_steps"].items())) or "0"
        case "step_recovery":
            if "step_recovery_p50_s" not in c:
                return "–"
            return f"{c['step_recovery_p50_s']} / {c['step_recovery_max_s']}"
        case "durations":
            return f"{c['turn_seconds_p50']} / {c['turn_seconds_max']}"
        case "verdict":
            return "ok" if run["ok"] else "PROBLEMS"
        case "observer_mismatches":
            return f"{c['observer_mismatches']} of {c['fresh_observers']}"
    value = c.get(key)
    return "–" if value is None else str(value)


def table(runs: list[dict[str, Any]]) -> str:
    head = ["", *(str(r["scenario"]) for r in runs)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for label, key in ROWS:
        lines.append("| " + " | ".join([label, *(_cell(r, key) for r in runs)]) + " |")
    return "\n".join(lines)


def main(paths: list[str]) -> int:
    runs = [run for p in paths for run in json.loads(Path(p).read_text())["runs"]]
    print(table(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

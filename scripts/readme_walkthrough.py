"""Run the README's walkthrough as a new user would, and check what it prints (used by
scripts/smoke).

The shell blocks of the README's "## Walkthrough" section run in order in one bash process, in a
directory whose `.cortex` is the running stack's data directory (the walkthrough reads the API
key from `.cortex/api-key`), with `http://127.0.0.1:8000` pointed at the stack's port. `curl`
fails on an HTTP error status and is bounded in time. The block that follows a shell block
(```json or a bare ```) is its expected output:

- an SSE block (`event:` lines): every event shown must have been received, with its id, its
  event name and its data; events may arrive in another order (tool results come in completion
  order), `…` lines stand for events left out;
- any other block must match the whole output, where `…` stands for anything, and ids, timestamps
  and `*_ms` figures match any value of their kind.

Usage: python3 scripts/readme_walkthrough.py BASE_URL DATA_DIR [README]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

DOC_BASE = "http://127.0.0.1:8000"
MARK = "@@readme-walkthrough-block-{}@@"
TIMEOUT_S = 180
PREAMBLE = """set -euo pipefail
curl() { command curl --fail-with-body --show-error --max-time 60 "$@"; }
"""

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_SPECIAL = re.compile(
    rf"(?P<uuid>{_UUID}|[0-9a-f]{{8}}-…)"
    r"|(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))"
    r'|(?P<ms>"[a-z_]+_ms": ?)\d+'
    r"|(?P<gap>…)"
    r"|(?P<space>\s+)"
)


@dataclass
class Step:
    """A shell block and the output the README shows for it (None: nothing shown)."""

    script: str
    expected: str | None


def walkthrough_steps(readme: str) -> list[Step]:
    """The shell blocks of the Walkthrough section, each with the block that follows it."""
    match = re.search(r"^## Walkthrough\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    if match is None:
        raise SystemExit("README.md has no '## Walkthrough' section")
    steps: list[Step] = []
    for fence in _FENCE.finditer(match.group(1)):
        lang, body = fence.group(1), fence.group(2)
        if lang == "sh":
            steps.append(Step(body, None))
        elif steps and steps[-1].expected is None:
            steps[-1].expected = body
    if not steps:
        raise SystemExit("the Walkthrough section has no ```sh blocks")
    return steps


def pattern(expected: str) -> str:
    """A regular expression for output shown as `expected` (see the module docstring)."""
    out, pos = [], 0
    for m in _SPECIAL.finditer(expected):
        out.append(re.escape(expected[pos : m.start()]))
        pos = m.end()
        if m.group("uuid"):
            out.append(_UUID)
        elif m.group("time"):
            out.append(r"\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d)")
        elif m.group("ms"):
            out.append(re.escape(m.group("ms")) + r"\d+")
        elif m.group("gap"):
            out.append(".*?")
        else:
            out.append(r"\s*")
    out.append(re.escape(expected[pos:]))
    return "".join(out)


def sse_events(text: str) -> list[tuple[str, str, str]]:
    """(id, event, data) of each event in SSE text; `…` lines are skipped."""
    events, fields = [], {"id": "", "event": "", "data": ""}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if fields["event"]:
                events.append((fields["id"], fields["event"], fields["data"]))
            fields = {"id": "", "event": "", "data": ""}
        elif ":" in line and not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.strip()
    return events


def check_sse(expected: str, actual: str) -> list[str]:
    got = sse_events(actual)
    problems = []
    for eid, event, data in sse_events(expected):
        regex = re.compile(pattern(data), re.S)
        if not any(e == event and regex.fullmatch(d) for _, e, d in got):
            problems.append(f"no `{event}` event with data {data}")
        if eid not in {i for i, _, _ in got}:
            problems.append(f"no event with id {eid}")
    if got and sse_events(expected)[-1][1] == "done" and got[-1][1] != "done":
        problems.append("the stream did not end with `done`")
    return problems


def check(expected: str, actual: str) -> list[str]:
    """What is missing from `actual`; empty when it shows what the README says."""
    if re.search(r"^event: ", expected, re.M):
        return check_sse(expected, actual)
    if re.fullmatch(pattern(expected.strip()), actual.strip(), re.S):
        return []
    return ["the output does not match the README's"]


def main() -> None:
    base, data_dir = sys.argv[1].rstrip("/"), Path(sys.argv[2]).resolve()
    readme = Path(sys.argv[3] if len(sys.argv) > 3 else "README.md").read_text()
    steps = walkthrough_steps(readme)
    script = PREAMBLE + "".join(
        f"{s.script.replace(DOC_BASE, base)}\nprintf '\\n{MARK.format(i)}\\n'\n"
        for i, s in enumerate(steps)
    )
    with tempfile.TemporaryDirectory() as cwd:
        os.symlink(data_dir, Path(cwd) / ".cortex")
        run = subprocess.run(
            ["bash", "-c", script],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    outputs = re.split(r"\n@@readme-walkthrough-block-\d+@@\n", run.stdout)
    failed = run.returncode != 0
    for i, step in enumerate(steps):
        actual = outputs[i] if i < len(outputs) - 1 else None
        problems = (
            ["the block failed (curl error or non-zero exit)"]
            if actual is None
            else check(step.expected, actual)
            if step.expected is not None
            else []
        )
        if problems:
            failed = True
            print(f"--- walkthrough block {i + 1}:\n{step.script}")
            print("    " + "\n    ".join(problems))
            print(f"--- its output:\n{actual if actual is not None else outputs[-1]}")
            break
    if failed:
        print(f"--- stderr:\n{run.stderr[-3000:]}")
        raise SystemExit(f"README walkthrough: failed (bash exited with {run.returncode})")
    print(f"README walkthrough: {len(steps)} blocks ran, every output as the README shows")


if __name__ == "__main__":
    main()

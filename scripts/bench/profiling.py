"""Sampling profiles with py-spy (collapsed stacks) and a summary of where the samples went."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from scripts.faults.stack import _pdeathsig

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^():]*)(?::(?P<line>\d+))?\)$")


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise RuntimeError("py-spy is not installed (pip install py-spy)")
    return found


def py_spy_record(
    pid: int, out: Path, duration_s: float, *, gil: bool, rate: int = 100
) -> subprocess.Popen[bytes]:
    """Sample `pid` (and its threads; children too, for prefork) for `duration_s` into `out`
    (collapsed stacks: `frame;frame;... count` per line; flamegraph.pl or speedscope read it).

    `gil=True` keeps only samples of the thread holding the GIL: where the process's Python
    CPU goes. `gil=False` keeps every thread that is not idle, including threads blocked in a
    database or Redis call: where a step's time goes.

    Call it from the stack's spawner thread: the parent-death signal is tied to the forking
    thread."""
    return subprocess.Popen(
        [
            py_spy(),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(max(1, int(duration_s))),
            "--rate",
            str(rate),
            "--format",
            "raw",
            "--subprocesses",
            "--nonblocking",
            "--full-filenames",
            *(["--gil"] if gil else []),
            "-o",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: _pdeathsig(signal.SIGKILL),
    )


def _module(file: str) -> str:
    """A short name for where a frame's code lives: the package for site-packages, the
    project-relative path for the project, the stdlib module otherwise."""
    if "site-packages/" in file:
        rest = file.split("site-packages/", 1)[1]
        return rest.split("/", 1)[0].removesuffix(".py")
    for root in ("cortex_workers/", "config/", "scripts/"):
        if f"/{root}" in file:
            return root + file.split(f"/{root}", 1)[1]
    if "/lib/python3" in file:
        rest = file.split("/lib/python3", 1)[1].split("/", 1)[-1]
        return "stdlib:" + rest.split("/", 1)[0].removesuffix(".py")
    return file or "?"


def _frames(stack: str) -> list[tuple[str, str]]:
    out = []
    for raw in stack.split(";"):
        m = _FRAME.match(raw.strip())
        if m is None:
            out.append((raw.strip(), "?"))
        else:
            out.append((m.group("func"), m.group("file") or ""))
    return out


def summarize(path: Path, top: int = 25) -> dict[str, Any]:
    """Self and inclusive shares of samples: per function (leaf = self) and per module
    (inclusive: a module counts once per sample it appears in)."""
    total = 0
    self_fn: Counter[str] = Counter()
    self_mod: Counter[str] = Counter()
    incl_fn: Counter[str] = Counter()
    incl_mod: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = _frames(stack)
        # py-spy prefixes thread/process frames: keep only code frames
        frames = [f for f in frames if f[1]]
        if not frames:
            continue
        total += count
        func, file = frames[-1]
        self_fn[f"{func} ({_module(file)})"] += count
        self_mod[_module(file)] += count
        for name in {f"{fn} ({_module(fl)})" for fn, fl in frames}:
            incl_fn[name] += count
        for mod in {_module(fl) for _, fl in frames}:
            incl_mod[mod] += count

    def share(c: Counter[str]) -> list[tuple[str, float]]:
        return [(k, round(100 * v / total, 1)) for k, v in c.most_common(top)] if total else []

    project = Counter({k: v for k, v in incl_fn.items() if "(cortex_workers/" in k})
    return {
        "samples": total,
        "inclusive_by_project_function": share(project),
        "self_by_function": share(self_fn),
        "self_by_module": share(self_mod),
        "inclusive_by_function": share(incl_fn),
        "inclusive_by_module": share(incl_mod),
    }

"""Every shell example of docs/ runs as written, with the variables every page names (`CW`, the
API's base URL, and `CW_KEY`, a tenant's key), against the suite's stack; or, marked on its page
as not run and why, is checked (see docs_examples/shell_blocks.py and checks.py).

A page's examples run in order, each in `bash -euo pipefail` as a reader pastes them into one
terminal: the variables a block sets (`SID`, `T1`, ...) reach the blocks after it. They run in
a scratch copy of the checkout (the repository's files linked, `config/` copied), with the
project's `.venv/bin` first on `PATH` (`cortex-workers`, as docs/operations.md says).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from docs_examples.checks import VENV_BIN, check_block
from docs_examples.shell_blocks import (
    ROOT,
    SHELL_LANGUAGES,
    ShellBlock,
    every_page,
    shell_blocks,
)
from support import Api, wait_until

PAGES = [p.name for p in every_page()]
BLOCK_TIMEOUT_S = 180
# Before a block: the variables of the blocks before it. After it: the variables it made or
# changed, for the next (bash prints them as `declare` lines it can read back).
PROLOGUE = """__names_before=$(compgen -v)
. "$EXAMPLE_STATE"
"""
EPILOGUE = """
for __name in $(compgen -v); do
  case $'\\n'"$__names_before"$'\\n' in *$'\\n'"$__name"$'\\n'*) continue ;; esac
  case $__name in __* | _ | PIPESTATUS | BASH_*) continue ;; esac
  declare -p "$__name"
done > "$EXAMPLE_STATE.next"
mv "$EXAMPLE_STATE.next" "$EXAMPLE_STATE"
"""


def _blocks(page: str) -> list[ShellBlock]:
    return shell_blocks(ROOT / "docs" / page)


def _checkout(at: Path) -> Path:
    """A scratch copy of the checkout: every top-level entry linked, `config/` copied (an
    example may add to it)."""
    at.mkdir()
    for entry in ROOT.iterdir():
        if entry.name in (".git", ".cortex", "config"):
            continue
        (at / entry.name).symlink_to(entry)
    shutil.copytree(ROOT / "config", at / "config", ignore=shutil.ignore_patterns("__pycache__"))
    return at


def _script(block: ShellBlock, folder: Path) -> Path:
    path = folder / f"{block.page}-{block.line}.sh"
    path.write_text(PROLOGUE + block.commands() + EPILOGUE)
    return path


def _bash(script: Path) -> list[str]:
    return ["bash", "--noprofile", "--norc", "-euo", "pipefail", str(script)]


def _run(block: ShellBlock, script: Path, *, env: dict[str, str], cwd: Path) -> None:
    run = subprocess.run(
        _bash(script), env=env, cwd=cwd, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
    )
    assert run.returncode == 0, (
        f"{block.where} exits {run.returncode} as written:\n{block.text}\n"
        f"-- its output:\n{run.stdout[-3000:]}\n-- its errors:\n{run.stderr[-3000:]}"
    )


def _run_open(block: ShellBlock, script: Path, *, env: dict[str, str], cwd: Path) -> None:
    """A block whose stream stays open: it prints, and is still running after it printed."""
    out = script.with_suffix(".out")
    with out.open("w") as sink:
        proc = subprocess.Popen(
            _bash(script), env=env, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_until(
            lambda: "data:" in out.read_text() or proc.poll() is not None,
            timeout=60,
            what=f"the stream of {block.where}",
        )
        assert proc.poll() is None, f"{block.where} ended:\n{out.read_text()[-3000:]}"
        assert "data:" in out.read_text()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.how != "not run" for b in _blocks(p))])
def test_the_shell_examples_of_the_page_run_as_written(
    page: str, api: Api, tenant_key: str, tmp_path: Path
) -> None:
    cwd = _checkout(tmp_path / "checkout")
    state = tmp_path / "state.sh"
    state.write_text("")
    env = {
        **os.environ,
        "CW": api.base_url,
        "CW_KEY": tenant_key,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        "EXAMPLE_STATE": str(state),
    }
    ran = 0
    for block in _blocks(page):
        if block.how == "not run":
            continue
        script = _script(block, tmp_path)
        if block.how == "run":
            _run(block, script, env=env, cwd=cwd)
        else:
            _run_open(block, script, env=env, cwd=cwd)
        ran += 1
    assert ran > 0


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.how == "not run" for b in _blocks(p))])
def test_the_examples_that_are_not_run_are_checked(page: str) -> None:
    problems = {b.where: check_block(b) for b in _blocks(page) if b.how == "not run"}
    assert {where: found for where, found in problems.items() if found} == {}


_ANY_FENCE = re.compile(r"^\s*```\s*(\w+)", re.MULTILINE)


def test_every_shell_block_is_found_and_either_run_or_marked_with_why_not() -> None:
    """The parser sees every fence a plain scan sees (indented ones in lists included), and a
    block that is not run says why."""
    for page in every_page():
        scanned = [m for m in _ANY_FENCE.findall(page.read_text()) if m in SHELL_LANGUAGES]
        found = shell_blocks(page)
        assert len(found) == len(scanned), page.name
        assert all(b.reason.strip() for b in found if b.how == "not run"), page.name


def test_the_check_of_an_example_that_is_not_run_can_fail() -> None:
    """A wrong option, subcommand, script, path, service or object is found."""
    wrong = {
        "scripts/bench/run --jsn out.json": "--jsn is not an option",
        "scripts/bench/runner --json out.json": "no such executable",
        "cortex-workers tenants creat acme": "cortex-workers refuses it",
        "cortex-workers worker --queuez tools": "cortex-workers refuses it",
        "kubectl -n cortex exec deploy/cortex-api -- cortex-workers keys make": "refuses it",
        "docker compose exec api cortex-workers key create --tenant acme": "refuses it",
        ".venv/bin/python -m scripts.hosts rerun": "rerun is not a subcommand",
        ".venv/bin/python -m scripts.nothing": "no module scripts.nothing",
        "scripts/test tests/tools/test_calculator.py::test_nothing_like_it": "has no test",
        "kubectl apply -k deploy/kubernetes-old": "no such file or directory",
        "kubectl -n cortex exec deploy/cortex-nope -- true": "has no deployment cortex-nope",
        "docker compose logs -f worker-nope": "compose.yaml has no service worker-nope",
        "cd deploy/prometheus && promtol check config prometheus.yml": "promtol: not installed",
        "curl -s $CW/v1/tools -H 'Authorization: Bearer $CW_KEY": "bash -n",
    }
    for text, expected in wrong.items():
        block = ShellBlock("x.md", 1, "sh", text + "\n", "not run", "a test of the check")
        problems = check_block(block)
        assert any(expected in p for p in problems), (text, problems)

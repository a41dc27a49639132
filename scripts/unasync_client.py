"""Generate the sync client from the async one, with unasync (as httpcore does).

    .venv/bin/python scripts/unasync_client.py          # write cortex_workers/client/sync/
    .venv/bin/python scripts/unasync_client.py --check  # exit 1 if a generated file is stale

Each module of `cortex_workers/client/aio/` becomes the module of the same name in
`cortex_workers/client/sync/`: `async` and `await` are dropped, and the names below replaced
(unasync's own rules add `__aenter__` → `__enter__`, `AsyncIterator` → `Iterator`, and
`AsyncX` → `SyncX` for any other class). The docstrings get the same names, and lose their
`async for` and `await`. The result is sorted and formatted with ruff, like the rest of the tree,
under a header that says it is generated. The suite checks that the files are current
(tests/test_generated_client.py).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import tokenize_rt
import unasync

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "cortex_workers" / "client" / "aio"
TARGET = ROOT / "cortex_workers" / "client" / "sync"

NAMES = {
    "AsyncClient": "Client",  # ours, and httpx's
    "AsyncTurnStream": "TurnStream",
    "AsyncFunction": "Function",
    "aclose": "close",
    "aread": "read",
    "aconnect_sse": "connect_sse",
    "aiter_sse": "iter_sse",
    "asyncio": "time",  # asyncio.sleep → time.sleep: the only use of asyncio in the source
}
"""Tokens of the async source and their sync names."""

TEXT = [
    (re.compile(r"\bAsyncClient\b"), "Client"),
    (re.compile(r"\bAsyncTurnStream\b"), "TurnStream"),
    (re.compile(r"\bAsyncFunction\b"), "Function"),
    (re.compile(r"\bAsyncTransport\b"), "SyncTransport"),
    (re.compile(r"\basync (for|with) "), r"\1 "),
    (re.compile(r"\bawait "), ""),
]
"""What changes in the text of strings (docstrings, messages)."""

HEADER = (
    "# Generated from cortex_workers/client/aio/{name} by scripts/unasync_client.py: do not\n"
    "# edit. Change the async source, then run `.venv/bin/python scripts/unasync_client.py`.\n"
)


RULE = unasync.Rule(fromdir="/aio/", todir="/sync/", additional_replacements=NAMES)
"""unasync's token rule, with our names."""


def unasync_tokens(tokens: list[tokenize_rt.Token]) -> Iterator[tokenize_rt.Token]:
    """The tokens of the sync module: unasync's, then the text of strings as `TEXT` says."""
    for token in RULE._unasync_tokens(tokens):
        if token.name == "STRING":
            token = token._replace(src=unasync_text(token.src))
        yield token


def unasync_text(text: str) -> str:
    for pattern, replacement in TEXT:
        text = pattern.sub(replacement, text)
    return text


def ruff(args: list[str], source: str, path: Path) -> str:
    """`source` as ruff leaves it (`args`: `format`, or `check --fix …`), with the project's
    configuration, as if it were the file at `path`."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(path), "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ruff {' '.join(args)} on {path}: {done.stderr}")
    return done.stdout


def sync_module(source: str, name: str) -> str:
    """The sync module `name` generated from the text of its async source."""
    text = tokenize_rt.tokens_to_src(unasync_tokens(tokenize_rt.src_to_tokens(source)))
    target = TARGET / name
    text = ruff(["check", "--fix", "--select", "I", "--quiet"], text, target)
    return HEADER.format(name=name) + ruff(["format", "--quiet"], text, target)


def generated() -> dict[Path, str]:
    """Every generated module, by its path, as it should read."""
    return {
        TARGET / source.name: sync_module(source.read_text(), source.name)
        for source in sorted(SOURCE.glob("*.py"))
    }


def stale() -> list[Path]:
    """The generated modules that differ from their source's generation, or should not be."""
    want = generated()
    there = set(TARGET.glob("*.py"))
    differ = [p for p, text in want.items() if not p.exists() or p.read_text() != text]
    return sorted(differ + list(there - set(want)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only say whether it is current")
    if parser.parse_args().check:
        paths = stale()
        for path in paths:
            print(f"{path.relative_to(ROOT)} is not generated from its source", file=sys.stderr)
        return 1 if paths else 0
    TARGET.mkdir(exist_ok=True)
    want = generated()
    for path in set(TARGET.glob("*.py")) - set(want):
        path.unlink()
    for path, text in want.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

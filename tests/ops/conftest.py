"""A `cortex-workers dev` stack with Flower, on free ports and its own data directory, shared by
the operations tests of this run."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from ops.dev_stack import DevStack, ready_stack, start_dev
from support import dev_env, free_port, stop_dev


@pytest.fixture(scope="session")
def dev_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    root = tmp_path_factory.mktemp("ops")
    data_dir, log = root / "data", root / "dev.log"
    port, flower_port = free_port(), free_port()
    proc = start_dev(data_dir, port=port, flower_port=flower_port, log=log, env=dev_env())
    base, flower = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{flower_port}"
    try:
        key, auth = ready_stack(data_dir, base=base, flower=flower, log=log)
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as api:
            yield DevStack(data_dir, api, flower, auth, log)
    finally:
        stop_dev(proc)

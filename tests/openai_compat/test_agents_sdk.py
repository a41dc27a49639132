"""The OpenAI Agents SDK runs an agent against our Responses API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from openai_support import MODEL
from support import Api

pytestmark = pytest.mark.servers  # on both CI passes: the API is checked on either server set


def test_an_agents_sdk_agent_runs_to_its_answer(api: Api, tenant_key: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = Path(__file__).with_name("agent_run.py")
    done = subprocess.run(
        [sys.executable, str(script), f"{api.base_url}/v1", tenant_key, MODEL],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "Say hello."  # the scripted model echoes without a script


def test_an_agents_sdk_agent_calls_its_function_tool_and_answers(
    api: Api, tenant_key: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = Path(__file__).with_name("agent_tool_run.py")
    done = subprocess.run(
        [sys.executable, str(script), f"{api.base_url}/v1", tenant_key, MODEL],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    ran = json.loads(done.stdout.strip().splitlines()[-1])
    assert ran == {"calls": ["Paris"], "output": "It is sunny in Paris."}

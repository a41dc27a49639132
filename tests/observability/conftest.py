"""Observability tests run the code under test in subprocesses: OpenTelemetry's global provider
and prometheus_client's storage mode are chosen once per process, so the test process stays
untouched and each case starts from the environment it sets."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from fakes.otlp_receiver import OtlpReceiver

PROGRAMS = Path(__file__).resolve().parent / "programs"
SCRUBBED_PREFIXES = ("OTEL_", "PROMETHEUS_MULTIPROC_DIR", "CORTEX_LOG_FORMAT", "CORTEX_TRACE_")

RunProgram = Callable[..., subprocess.CompletedProcess[str]]


def clean_env(extra: Mapping[str, str] = {}) -> dict[str, str]:
    """This process's environment without any observability setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
    return {**env, **extra}


@pytest.fixture
def otlp_receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture
def run_program() -> RunProgram:
    """Runs `programs/<name>.py` with a clean environment plus `env`; fails on a non-zero exit."""

    def run(
        name: str, *args: str, env: Mapping[str, str] = {}, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, str(PROGRAMS / f"{name}.py"), *args],
            env=clean_env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    return run


StartProgram = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def start_program() -> Iterator[StartProgram]:
    """Starts `programs/<name>.py` (clean environment plus `env`, stdout piped); whatever is
    still running at the end of the test is killed."""
    started: list[subprocess.Popen[str]] = []

    def start(name: str, *args: str, env: Mapping[str, str] = {}) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, str(PROGRAMS / f"{name}.py"), *args],
            env=clean_env(env),
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)

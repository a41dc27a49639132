"""Log lines: readable text by default; with CORTEX_LOG_FORMAT=json one object per line carrying
the turn, step, session and trace ids in force."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import threading
from collections.abc import Callable, Iterator

import pytest
from fakes.otlp_receiver import OtlpReceiver

from cortex_workers.observability import logs

RunProgram = Callable[..., subprocess.CompletedProcess[str]]
IDS = {"turn_id", "step_id", "session_id", "trace_id"}


def test_json_lines_carry_the_context_ids_and_the_trace_id_where_they_apply(
    run_program: RunProgram, otlp_receiver: OtlpReceiver
) -> None:
    env = {**otlp_receiver.env(), "CORTEX_LOG_FORMAT": "json"}
    proc = run_program("json_logs", env=env)
    trace_id = json.loads(proc.stdout)["trace_id"]
    lines = [json.loads(line) for line in proc.stderr.splitlines() if '"logger"' in line]
    ours = [line for line in lines if line["logger"] == "cortex_workers.example"]
    outside, inside = ours  # one handler after two configure_logging calls: no duplicates
    assert outside["message"] == "outside" and outside["level"] == "INFO"
    assert not IDS & set(outside)
    assert inside["message"] == "inside the turn" and inside["level"] == "WARNING"
    assert {key: inside[key] for key in IDS} == {
        "turn_id": "turn-1",
        "step_id": "7",
        "session_id": "sess-1",
        "trace_id": trace_id,
    }
    assert len(trace_id) == 32 and "time" in inside


def test_text_stays_the_default(run_program: RunProgram) -> None:
    proc = run_program("json_logs")
    ours = [line for line in proc.stderr.splitlines() if "cortex_workers.example" in line]
    assert [line.split(" ", 2)[2] for line in ours] == [
        "INFO cortex_workers.example: outside",
        "WARNING cortex_workers.example: inside the turn",
    ]


@pytest.fixture
def json_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    logger = logging.getLogger("tests.observability.json_log")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logs.build_handler(logs.LogFormat.JSON, stream)
    logger.addHandler(handler)
    yield logger, stream
    logger.removeHandler(handler)


def _lines(stream: io.StringIO) -> list[dict[str, str]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_an_inner_log_context_overrides_only_what_it_sets_and_restores_on_exit(
    json_log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = json_log
    with logs.log_context(turn_id="t1", session_id="s1"):
        with logs.log_context(step_id="st2"):
            logger.info("inner")
        logger.info("outer")
    logger.info("none")
    inner, outer, none = _lines(stream)
    assert (inner["turn_id"], inner["session_id"], inner["step_id"]) == ("t1", "s1", "st2")
    assert (outer["turn_id"], "step_id" in outer) == ("t1", False)
    assert not IDS & set(none)


def test_a_log_context_does_not_leak_into_another_thread(
    json_log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = json_log
    with logs.log_context(turn_id="t1"):
        other = threading.Thread(target=logger.info, args=("elsewhere",))
        other.start()
        other.join()
    (line,) = _lines(stream)
    assert "turn_id" not in line


def test_an_unknown_log_format_is_refused_with_the_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CORTEX_LOG_FORMAT", "xml")
    with pytest.raises(ValueError, match="use text or json"):
        logs.log_format_from_env()


def test_maintenance_ticks_leave_no_line_but_their_failures_and_other_tasks_do() -> None:
    import logging

    from cortex_workers.observability.logs import QuietTicks
    from cortex_workers.queues import RECONCILE, RUN_MODEL_STEP, TICKS

    quiet = QuietTicks(TICKS)

    def record(logger: str, level: int, msg: str, args: object, data: object = None) -> bool:
        rec = logging.LogRecord(logger, level, __file__, 1, msg, None, None)
        rec.args = args  # type: ignore[assignment]
        if data is not None:
            rec.data = data
        return quiet.filter(rec)

    tick, step = {"name": RECONCILE, "id": "x"}, {"name": RUN_MODEL_STEP, "id": "y"}
    received = "Task %(name)s[%(id)s] received"
    assert not record("celery.worker.strategy", logging.INFO, received, tick, tick)
    assert not record("celery.app.trace", logging.INFO, "Task %(name)s succeeded", tick, tick)
    due = "Scheduler: Sending due task %s (%s)"
    assert not record("celery.beat", logging.INFO, due, ("reconcile", RECONCILE))
    assert record("celery.beat", logging.INFO, due, ("retention", "cortex.maintenance.x"))
    assert record("celery.worker.strategy", logging.INFO, received, step, step)
    assert record("celery.app.trace", logging.ERROR, "Task %(name)s raised", tick, tick)

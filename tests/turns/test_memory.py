"""Memory: the model sees system prompt + rolling summary + the recent window."""

from __future__ import annotations

from support import Api, wait_until


def test_messages_that_leave_the_window_are_folded_into_the_summary(client: Api) -> None:
    # The test stack keeps a window of 8 messages; six echo turns make 12.
    sid = client.scripted_session(system_prompt="Be brief.")
    for i in range(6):
        client.wait_turn(client.submit(sid, f"fact number {i}"))
    session = wait_until(
        lambda: (s := client.http.get(f"/v1/sessions/{sid}").json())["summary_upto_seq"] > 0 and s,
        timeout=30,
        what="a summary",
    )
    assert "fact number 0" in session["summary"]
    assert "fact number 5" not in session["summary"]
    # what the next model step would see: system prompt, summary, then only the recent window
    from cortex_workers.runtime import get_runtime
    from cortex_workers.store.models import Step
    from cortex_workers.store.steps import Claim
    from cortex_workers.turns.context import load_model_context

    tid = client.submit(sid, "fact number 6")
    client.wait_turn(tid)
    rt = get_runtime()
    with rt.db() as db:
        step = db.query(Step).filter(Step.turn_id == tid, Step.kind == "model").one()
        ctx = load_model_context(
            rt,
            db,
            Claim(step.id, step.turn_id, step.step_no, "model", 1, None, step.call_index, None),
        )
    assert ctx.messages[0].role == "system" and ctx.messages[0].content.startswith("Be brief.")
    assert ctx.messages[1].role == "system" and "fact number 0" in ctx.messages[1].content
    conversation = [m for m in ctx.messages if m.role != "system"]
    assert len(conversation) <= 8
    assert conversation[-1].content == "fact number 6"
    assert all(m.content != "fact number 0" for m in conversation)


def test_summaries_run_on_the_summarize_queue_and_are_recorded_as_steps(client: Api) -> None:
    sid = client.scripted_session()
    ids = [client.submit(sid, f"m{i}") for i in range(6)]
    for t in ids:
        client.wait_turn(t)
    kinds = [s["kind"] for t in ids for s in client.turn(t)["steps"]]
    assert "summarize" in kinds
    wait_until(
        lambda: all(s["status"] == "done" for t in ids for s in client.turn(t)["steps"]),
        timeout=30,
        what="summarize steps done",
    )

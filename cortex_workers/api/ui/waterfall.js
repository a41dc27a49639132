// A turn's steps placed on a time axis, from the stored turn and its execution timeline.
//
// A step's row carries no times of its own, so they are read from the timeline: a model step
// starts with its `route` event (its call follows) and runs for its `latency_ms`; a tool step
// ends with its `tool` event and ran for its `latency_ms` before it. A step becomes ready when
// the step before it ended (a tool step: when its model step ended); the gap to its start is
// its queue wait. A step with no event is placed right after the one before it.

const ENDING_EVENT = new Set(["tool", "completion", "failure"]);
const START_EVENT = "route"; // one per attempt of a model step

function ms(iso) {
  const t = Date.parse(iso);
  return Number.isFinite(t) ? t : null;
}

/** Per step: `{step, ready, start, end, wait, run, events}` in ms since the turn was created. */
export function placeSteps(turn, timeline) {
  const t0 = ms(turn.created_at) ?? 0;
  const all = timeline.map((event) => ({ ...event, t: (ms(event.at) ?? t0) - t0 }));
  const byStep = new Map();
  for (const event of all) {
    const key = event.step === null || event.step === undefined ? "turn" : event.step;
    if (!byStep.has(key)) byStep.set(key, []);
    byStep.get(key).push(event);
  }
  const steps = [...turn.steps].sort((a, b) => a.step_no - b.step_no || a.attempt - b.attempt);
  const placed = [];
  const endOf = new Map();
  let lastEnd = 0;
  for (const step of steps) {
    const events = byStep.get(step.step_no) || [];
    const parentEnd = endOf.get(step.parent_step_id);
    const ready = step.kind === "tool" && parentEnd !== undefined ? parentEnd : lastEnd;
    const took = step.latency_ms || 0;
    let start;
    let end;
    const ending = events.filter((e) => ENDING_EVENT.has(e.kind)).pop();
    const starts = events.filter((e) => e.kind === START_EVENT);
    const first = starts[0] || events[0];
    const lastStart = starts.length ? starts[starts.length - 1].t : -Infinity;
    if (step.kind === "tool" && ending) {
      end = ending.t;
      start = Math.max(ready, end - took);
    } else if (first) {
      start = first.t;
      end = Math.max(start + took, lastStart + took, ending ? ending.t : start);
    } else {
      start = ready;
      end = ready + took;
    }
    const row = { step, events, ready, start, end, wait: Math.max(0, start - ready), run: Math.max(0, end - start) };
    placed.push(row);
    endOf.set(step.id, end);
    // Tool steps of one model step run side by side: the next model step waits for all of them.
    lastEnd = Math.max(lastEnd, end);
  }
  const finished = ms(turn.finished_at);
  const total = Math.max(1, lastEnd, finished === null ? 0 : finished - t0);
  return { rows: placed, turnEvents: byStep.get("turn") || [], total, all };
}

/** "340 ms", "2.1 s" */
export function duration(millis) {
  if (millis < 1000) return `${Math.round(millis)} ms`;
  return `${(millis / 1000).toFixed(millis < 10000 ? 2 : 1)} s`;
}

/** About five round tick values across `total` ms. */
export function ticks(total) {
  const raw = total / 5;
  const magnitude = 10 ** Math.floor(Math.log10(raw || 1));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) || raw;
  const out = [];
  for (let t = 0; t <= total + 1e-9 && out.length < 12; t += step) out.push(t);
  return out;
}

// The turn inspector: a dialog with the turn's execution as a waterfall (one bar per step on a
// time axis: queue wait, then run; the timeline's events as marks), and each step's tokens and
// cost. Reads GET /v1/turns/{tid} and GET /v1/turns/{tid}/timeline.

import { plainWords } from "./api.js";
import { el, money, usageLine } from "./render.js";
import { duration, placeSteps, ticks } from "./waterfall.js";

const NOTABLE = new Set(["retry", "fallback", "rate_limited", "budget", "redaction", "anomaly",
  "recovery", "failure", "handoff"]);
const ROUTINE_BUDGET = new Set(["reserved", "settled"]); // every model call's; not marked

function notable(event, step) {
  if (event.kind === "budget") return !ROUTINE_BUDGET.has(event.data && event.data.action);
  if (event.kind === "route") return step.attempt > 1; // a retried step's later routes
  return NOTABLE.has(event.kind);
}

/** A percentage of the axis, for CSSOM positions (never an inline style attribute). */
function pct(value, total) {
  return `${Math.max(0, Math.min(100, (value / total) * 100)).toFixed(3)}%`;
}

function place(node, left, width, total) {
  node.style.left = pct(left, total);
  if (width !== null) node.style.width = pct(width, total);
  return node;
}

/** A short line of an event's facts: `provider: scripted, model: scripted-1`. */
export function facts(data) {
  if (!data || typeof data !== "object") return "";
  const parts = [];
  for (const [key, value] of Object.entries(data)) {
    if (value === null || value === undefined || key === "arguments") continue;
    const shown = typeof value === "object" ? JSON.stringify(value) : String(value);
    parts.push(`${key}: ${shown.length > 60 ? `${shown.slice(0, 60)}…` : shown}`);
  }
  return parts.join(", ");
}

function stepName(step, events) {
  if (step.kind === "tool") {
    const tool = events.find((e) => e.kind === "tool");
    return tool && tool.data.name ? `tool ${tool.data.name}` : "tool";
  }
  const model = step.model ? ` ${step.provider}/${step.model}` : "";
  return `${step.kind}${model}`;
}

function stepRow(row, total) {
  const { step, events, wait, run, ready } = row;
  const tokens = step.usage.input_tokens + step.usage.output_tokens;
  const notes = [];
  if (step.attempt > 1) notes.push(`attempt ${step.attempt}`);
  if (step.fallback_from) notes.push(`instead of ${step.fallback_from}`);
  if (step.redactions) notes.push("redacted");
  const label = el("div", { class: "wf-label" },
    el("span", { class: "wf-name", text: `#${step.step_no} ${stepName(step, events)}` }),
    el("span", { class: "label", text: [`${step.status}`, `${duration(run)}`,
      wait ? `waited ${duration(wait)}` : "", tokens ? `${step.usage.input_tokens} in / ${step.usage.output_tokens} out` : "",
      step.kind === "model" ? money(step.cost_usd) : "", ...notes].filter(Boolean).join(" · ") }));
  const track = el("div", { class: "wf-track" });
  if (wait) track.append(place(el("span", { class: "wf-wait", title: `queued ${duration(wait)}` }), ready, wait, total));
  const bar = el("span", { class: `bar kind-${step.kind} status-${step.status}`,
    title: `${step.kind} step ${step.step_no}: ran ${duration(run)}` });
  track.append(place(bar, row.start, Math.max(run, total / 400), total));
  for (const event of events) {
    if (!notable(event, step)) continue;
    track.append(place(el("span", { class: `wf-mark mark-${event.kind}`, title: `${event.kind}: ${facts(event.data)}` }),
      event.t, null, total));
  }
  return el("li", { class: "wf-row", "data-step": String(step.step_no), "data-kind": step.kind }, label, track);
}

function axis(total) {
  const scale = el("div", { class: "wf-axis", "aria-hidden": "true" });
  for (const t of ticks(total)) scale.append(place(el("span", { text: duration(t) }), t, null, total));
  return el("div", { class: "wf-axis-row" }, el("div", { class: "wf-label" }), scale);
}

function eventTable(placed) {
  const rows = placed.all.map((event) => el("tr", { "data-kind": event.kind },
      el("td", { text: duration(Math.max(0, event.t)) }),
      el("td", { text: event.step === null ? "turn" : `#${event.step}` }),
      el("td", {}, el("span", { class: `kind mark-${event.kind}`, text: event.kind })),
      el("td", { text: facts(event.data) })));
  return el("table", { class: "wf-events" },
    el("caption", { text: "Timeline events" }),
    el("thead", {}, el("tr", {}, ...["at", "step", "kind", "facts"].map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, ...rows));
}

/** Fills the inspector dialog for `turnId` and opens it. */
export async function inspectTurn(api, dialog, turnId) {
  const body = dialog.querySelector(".inspector-body");
  const title = dialog.querySelector("h2");
  title.textContent = "Turn inspector";
  body.replaceChildren(el("p", { class: "label", text: "Loading…" }));
  if (!dialog.open) dialog.showModal();
  try {
    const [turn, timeline] = await Promise.all([
      api.get(`/v1/turns/${turnId}`),
      api.get(`/v1/turns/${turnId}/timeline`),
    ]);
    const placed = placeSteps(turn, timeline.timeline);
    title.textContent = `Turn ${turn.seq}`;
    const summary = `${usageLine(turn.status, turn.usage, turn.cost_usd)} · ${turn.steps.length} steps · ${duration(placed.total)}`;
    const waterfall = el("ol", { class: "waterfall", "aria-label": "Steps" },
      ...placed.rows.map((row) => stepRow(row, placed.total)));
    const legend = el("p", { class: "wf-legend label" },
      el("span", { class: "wf-wait key" }), "queue wait ",
      el("span", { class: "bar kind-model key" }), "model ",
      el("span", { class: "bar kind-tool key" }), "tool ",
      el("span", { class: "wf-mark key" }), "retry, fallback, budget, redaction, anomaly");
    body.replaceChildren(el("p", { class: "inspector-summary", text: summary }), legend, axis(placed.total), waterfall);
    if (turn.error) body.append(el("p", { class: "error", text: `${turn.error.code}: ${turn.error.message}` }));
    body.append(eventTable(placed));
  } catch (error) {
    body.replaceChildren(el("p", { class: "error", role: "alert", text: plainWords(error) }));
  }
}

// The sessions sidebar (names, activity, search) and the new-session form.

import { ago, el } from "./render.js";

const $ = (id) => document.getElementById(id);

/** Tools only a whiteboard (coordinator) session is offered (`cortex_workers.whiteboard`). */
export const WHITEBOARD_TOOLS = ["update_mission", "update_progress", "manage_blocker", "log_decision", "get_team_status"];
/** A catalog entry that is a pattern (`gpt-*`, `o[0-9]*`), not a model one can ask for. */
const PATTERN = /[*?[\]]/;

export const DEMO_SCRIPT = [
  {
    text: "Let me check two things first.",
    tool_calls: [
      { name: "calculate", arguments: { expression: "6 * 7" } },
      { name: "current_time", arguments: {} },
    ],
  },
  {
    text: "I suggest restarting the demo service.",
    tool_calls: [{
      name: "propose_action",
      arguments: { action: "restart", product: "demo", rationale: "a restart clears the stuck queue", reversible: true },
    }],
  },
  { text: "The proposal is waiting for your decision. Meanwhile:\n\n- **6 × 7** is `42`\n- the clock was read", token_ms: 40 },
  {
    // the answer to a second message: a longer one, streamed slowly enough to watch
    text: "## What happened\n\nEach step of the first answer ran as a task of its own: the model step asked for " +
      "two tools, both ran **side by side** on the tools queue, and their results went back to the model. " +
      "The restart was only *proposed*: nothing runs until someone confirms it.\n\n" +
      "1. Open **Inspect** under an answer to see its steps on a time axis.\n" +
      "2. Reload the page while an answer streams: it goes on where it was.\n\n" +
      "> Durable by design: a worker that dies mid-step is replaced, and the step runs again.",
    token_ms: 60,
  },
];
const DEMO_TOOLS = new Set(["calculate", "current_time", "propose_action"]);

/** The models of a provider one can choose: concrete names only (its default first). */
export function concreteModels(provider) {
  const names = [provider.default_model, ...provider.models];
  return [...new Set(names.filter((m) => typeof m === "string" && m.trim() && !PATTERN.test(m)))];
}

export class SessionList {
  constructor(api) {
    this.api = api;
    this.sessions = [];
    this.list = $("session-list");
    $("session-search").addEventListener("input", () => this.draw());
  }

  async load() {
    const page = await this.api.get("/v1/sessions?limit=100");
    this.sessions = page.sessions;
    this.draw();
    if (!this.sessions.length) $("new-session").open = true;
  }

  /** A turn was just posted in this tab: the session's last activity is now. */
  touched(sessionId) {
    const session = this.sessions.find((s) => s.id === sessionId);
    if (session) session.last_activity_at = new Date().toISOString();
    this.draw();
  }

  draw() {
    const query = $("session-search").value.trim().toLowerCase();
    const current = new URLSearchParams(location.hash.slice(1)).get("session");
    const shown = this.sessions.filter((s) => !query || (s.name || s.id).toLowerCase().includes(query));
    if (!this.sessions.length) {
      this.list.replaceChildren(el("li", { class: "label empty", text: "No sessions yet: create one below." }));
      return;
    }
    if (!shown.length) {
      this.list.replaceChildren(el("li", { class: "label empty", text: "No session matches." }));
      return;
    }
    this.list.replaceChildren(...shown.map((s) => {
      // the server's last activity (the newest turn's time), the creation time when no turn yet
      const active = s.last_activity_at && s.last_activity_at !== s.created_at;
      const when = active ? `active ${ago(s.last_activity_at)}` : `created ${ago(s.created_at)}`;
      const link = el("a", { href: `#session=${s.id}`, "data-id": s.id, "aria-current": s.id === current ? "page" : null },
        el("span", { class: "session-name", text: s.name || `Session ${s.id.slice(0, 8)}` }),
        el("span", { class: "session-when label", text: when }));
      return el("li", {}, link);
    }));
  }
}

function toolBox(tool) {
  const id = `tool-${tool.name}`;
  const input = el("input", { type: "checkbox", id, name: "tools", value: tool.name,
    checked: tool.source === "builtin" ? "" : null });
  return el("label", { for: id, title: tool.description }, input, tool.name);
}

/** Providers' concrete models and the tools (built-in ones ticked; whiteboard ones apart). */
export async function fillNewSessionForm(api) {
  const [providers, tools] = await Promise.all([api.get("/v1/providers"), api.get("/v1/tools")]);
  const select = $("ns-model");
  select.replaceChildren();
  for (const p of providers) {
    const group = el("optgroup", { label: p.available ? p.name : `${p.name} (unavailable${p.reason ? `: ${p.reason}` : ""})` });
    for (const model of concreteModels(p)) {
      const option = el("option", { value: JSON.stringify([p.name, model]), text: `${p.name} / ${model}` });
      option.disabled = !p.available;
      if (p.default && model === p.default_model) option.selected = true;
      group.append(option);
    }
    if (group.children.length) select.append(group);
  }
  const box = $("ns-tools");
  const usual = tools.tools.filter((t) => !WHITEBOARD_TOOLS.includes(t.name));
  box.replaceChildren(el("legend", { text: "Tools" }), ...usual.map(toolBox));
  const board = tools.tools.filter((t) => WHITEBOARD_TOOLS.includes(t.name));
  if (board.length) {
    box.append(el("p", { class: "label", text: `Whiteboard sessions (coordinators) also get ${board.map((t) => t.name).join(", ")}.` }));
  }
  $("create-session").disabled = false; // the choices are loaded
}

export function fillDemo() {
  $("ns-metadata").value = JSON.stringify({ script: DEMO_SCRIPT }, null, 2);
  for (const option of $("ns-model").options) {
    if (JSON.parse(option.value)[0] === "scripted" && !option.disabled) option.selected = true;
  }
  for (const box of document.querySelectorAll("#ns-tools input[name=tools]")) {
    if (DEMO_TOOLS.has(box.value)) box.checked = true;
  }
}

export function newSessionBody(form) {
  const [provider, model] = JSON.parse($("ns-model").value || "[null, null]");
  const tools = [...form.querySelectorAll("input[name=tools]:checked")].map((i) => i.value);
  const body = { provider, model, tools };
  const name = $("ns-name").value.trim();
  if (name) body.name = name;
  const metadata = $("ns-metadata").value.trim();
  if (metadata) body.metadata = JSON.parse(metadata);
  return body;
}

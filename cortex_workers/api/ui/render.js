// DOM pieces of the conversation: turns, answer bubbles, tool rows, proposal cards, events.

import { renderMarkdown } from "./markdown.js";

/** An element; `text` sets its text (never HTML), `class` its class, the rest attributes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name === "style") throw new Error("inline styles break the page's CSP");
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

const SEVERITIES = new Set(["ok", "info", "warning", "error"]);
const MARKDOWN_LIMIT = 20000; // longer answers are shown as plain text

export function brief(value, max = 2000) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** One line of arguments for a tool row's heading: `expression: 6 * 7`. */
function argumentsLine(args) {
  if (!args || typeof args !== "object") return "";
  const parts = Object.entries(args).map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`);
  const line = parts.join(", ");
  return line.length > 80 ? `${line.slice(0, 80)}…` : line;
}

export function money(usd) {
  if (typeof usd !== "number") return "";
  return usd === 0 ? "$0" : usd < 0.01 ? `$${usd.toFixed(6)}` : `$${usd.toFixed(4)}`;
}

/** "done · 120 tokens in, 30 out · $0.000123" */
export function usageLine(status, usage, cost) {
  const u = usage || {};
  const cached = u.cache_read_tokens ? ` (${u.cache_read_tokens} cached)` : "";
  return `${status} · ${u.input_tokens || 0} tokens in${cached}, ${u.output_tokens || 0} out · ${money(cost || 0)}`;
}

/** An assistant bubble whose Markdown is drawn at most once per frame while it streams. */
class Answer {
  constructor(step) {
    this.text = "";
    this.node = el("div", { class: "bubble assistant", "data-step": step === null ? null : String(step) });
    this.pending = false;
  }

  set(text) {
    this.text = text;
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => this.draw());
  }

  draw() {
    this.pending = false;
    if (this.text.length > MARKDOWN_LIMIT) {
      this.node.classList.add("plain");
      this.node.textContent = this.text;
    } else {
      this.node.replaceChildren(renderMarkdown(this.text));
    }
  }
}

/** One turn: the user's message, then each step's answer, tool rows, cards and events. */
export class TurnView {
  constructor(turnId, container, { onInspect } = {}) {
    this.id = turnId;
    this.answers = new Map();
    this.tools = new Map();
    this.node = el("section", { class: "turn", "data-turn-id": turnId || "" });
    this.body = el("div", { class: "turn-body" });
    this.meta = el("div", { class: "turn-meta" });
    this.status = el("p", { class: "label status" });
    this.meta.append(this.status);
    if (onInspect && turnId) {
      this.inspect = el("button", { type: "button", class: "link inspect", text: "Inspect", hidden: "" });
      this.inspect.addEventListener("click", () => onInspect(this));
      this.meta.append(this.inspect);
    }
    this.node.append(this.body, this.meta);
    container.append(this.node);
  }

  user(text) {
    if (!this.userNode) {
      this.userNode = el("div", { class: "bubble user" });
      this.body.prepend(el("p", { class: "who label", text: "You" }), this.userNode);
    }
    this.userNode.textContent = text;
  }

  /** The answer of model step `step` (created on first use, after what came before). */
  answer(step) {
    let answer = this.answers.get(step);
    if (!answer) {
      answer = new Answer(step);
      this.answers.set(step, answer);
      this.body.append(answer.node);
    }
    return answer;
  }

  appendToken(step, text) {
    const answer = this.answer(step);
    answer.set(answer.text + text);
  }

  setAnswer(step, text) {
    this.answer(step).set(text || "");
  }

  appendAssistant(text) {
    const answer = new Answer(null);
    this.body.append(answer.node);
    answer.set(text);
  }

  toolList() {
    const last = this.body.lastElementChild;
    if (last && last.classList.contains("tools")) return last;
    const list = el("div", { class: "tools", role: "group", "aria-label": "Tool calls" });
    this.body.append(list);
    return list;
  }

  toolCall(id, name, args) {
    if (this.tools.has(id)) return this.tools.get(id);
    const row = new ToolRow(id, name, args);
    this.tools.set(id, row);
    this.toolList().append(row.node);
    return row;
  }

  toolResult(id, name, severity, content, note) {
    const row = this.tools.get(id) || this.toolCall(id, name, {});
    row.result(SEVERITIES.has(severity) ? severity : "ok", content, note);
    return row;
  }

  /** Where the proposal `proposalId` belongs: after the tool rows of the call that made it. */
  anchorOf(proposalId) {
    for (const row of this.tools.values()) if (row.proposalId === proposalId) return row.node.parentElement;
    return null;
  }

  placeCard(card) {
    const anchor = this.anchorOf(card.dataset.proposalId);
    if (anchor && anchor.parentElement === this.body) anchor.after(card);
    else if (!card.isConnected) this.body.append(card);
  }

  line(kind, text) {
    this.body.append(el("p", { class: `event ${kind}`, "data-event": kind, text }));
  }

  error(message) {
    this.body.append(el("p", { class: "error", role: "alert", text: message }));
  }

  /** The turn's ending: status, tokens and cost (from the `done` event or the stored turn). */
  ended(status, usage, cost) {
    this.node.dataset.status = status;
    this.status.textContent = usageLine(status, usage, cost);
    if (this.inspect) this.inspect.hidden = false;
  }

  setSeq(seq) {
    this.seq = seq;
    if (this.inspect) this.inspect.setAttribute("aria-label", `Inspect turn ${seq}`);
  }
}

/** A tool call as a compact row: name, state and arguments; opens to show the details. */
class ToolRow {
  constructor(id, name, args) {
    this.name = name;
    this.state = el("span", { class: "tool-state", text: "running" });
    this.head = el("button", { type: "button", class: "tool-head", "aria-expanded": "false" },
      el("span", { class: "tool-name", text: name }), " ", this.state, " ",
      el("span", { class: "tool-args", text: argumentsLine(args) }));
    this.detail = el("div", { class: "tool-detail", hidden: "" },
      el("p", { class: "label", text: "Arguments" }), el("pre", { text: brief(args) }));
    this.node = el("div", { class: "tool pending", "data-tool-call": id, "data-name": name }, this.head, this.detail);
    this.head.addEventListener("click", () => this.toggle());
  }

  toggle(open = this.detail.hidden) {
    this.detail.hidden = !open;
    this.head.setAttribute("aria-expanded", String(open));
    this.node.classList.toggle("open", open);
  }

  result(level, content, note) {
    this.node.className = `tool severity-${level}${this.detail.hidden ? "" : " open"}`;
    this.node.dataset.severity = level;
    this.state.textContent = note ? `${level} (${note})` : level;
    if (!this.resultNode) {
      this.resultNode = el("pre", { class: "result" });
      this.detail.append(el("p", { class: "label", text: "Result" }), this.resultNode);
    }
    this.resultNode.textContent = brief(content);
    try {
      const parsed = JSON.parse(content);
      if (parsed && typeof parsed.proposal_id === "string") this.proposalId = parsed.proposal_id;
    } catch { /* not JSON: no proposal */ }
  }
}

/** A proposal card with Confirm / Reject while it is pending and `decide` is given. */
export function proposalCard(proposal, decide) {
  const card = el("article", { class: "proposal", "data-proposal-id": proposal.id });
  updateProposal(card, proposal, decide);
  return card;
}

export function updateProposal(card, proposal, decide) {
  const title = `Proposed: ${proposal.action} on ${proposal.product}`;
  card.setAttribute("aria-label", title);
  card.replaceChildren(el("h3", { text: title }), el("p", { text: proposal.rationale || "" }));
  const facts = [];
  if (proposal.blast_radius) facts.push(`blast radius: ${proposal.blast_radius}`);
  if (proposal.reversible !== null && proposal.reversible !== undefined) {
    facts.push(proposal.reversible ? "reversible" : "not reversible");
  }
  if (facts.length) card.append(el("p", { class: "label", text: facts.join(" · ") }));
  card.append(el("p", { class: "status", "aria-live": "polite", text: `Status: ${proposal.status}` }));
  card.dataset.status = proposal.status;
  if (proposal.status === "pending" && decide) {
    const confirm = el("button", { type: "button", class: "primary", text: "Confirm" });
    const reject = el("button", { type: "button", text: "Reject" });
    confirm.addEventListener("click", () => decide(proposal.id, "confirm"));
    reject.addEventListener("click", () => decide(proposal.id, "reject"));
    card.append(el("div", { class: "actions" }, confirm, reject));
  }
}

/** A short human line for an event the page has no special view for. */
export function describe(name, data) {
  const parts = [];
  for (const key of ["name", "agent", "status", "message", "task"]) {
    if (data && typeof data[key] === "string") parts.push(`${key}: ${data[key]}`);
  }
  return `${name.replaceAll("_", " ")}${parts.length ? ` — ${parts.join(", ")}` : ""}`;
}

/** "5 min ago" for an ISO time. */
export function ago(iso, now = Date.now()) {
  const s = Math.max(0, (now - Date.parse(iso)) / 1000);
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

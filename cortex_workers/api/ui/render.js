// DOM pieces of the conversation: turns, step text, tool chips, proposal cards, other events.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (value !== undefined && value !== null) node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

const SEVERITIES = new Set(["ok", "info", "warning", "error"]);

function brief(value, max = 2000) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** One turn: the user's message, then each step's text, tool chips, cards and events. */
export class TurnView {
  constructor(turnId, container) {
    this.id = turnId;
    this.steps = new Map();
    this.chips = new Map();
    this.node = el("section", { class: "turn", "data-turn-id": turnId || "" });
    this.body = el("div", { class: "turn-body" });
    this.status = el("p", { class: "label status" });
    this.node.append(this.body, this.status);
    container.append(this.node);
  }

  user(text) {
    if (!this.userNode) {
      this.userNode = el("div", { class: "bubble user", "aria-label": "You" });
      this.body.prepend(this.userNode);
    }
    this.userNode.textContent = text;
  }

  /** The text of model step `step` (created on first use, after what came before). */
  stepText(step) {
    let node = this.steps.get(step);
    if (!node) {
      node = el("div", { class: "bubble assistant", "data-step": String(step) });
      this.steps.set(step, node);
      this.body.append(node);
    }
    return node;
  }

  appendAssistant(text) {
    this.body.append(el("div", { class: "bubble assistant", text }));
  }

  chipRow() {
    const last = this.body.lastElementChild;
    if (last && last.classList.contains("chips")) return last;
    const row = el("div", { class: "chips" });
    this.body.append(row);
    return row;
  }

  toolCall(id, name, args) {
    if (this.chips.has(id)) return this.chips.get(id);
    const summary = el("summary", { text: `${name} …` });
    const chip = el("details", { class: "chip pending", "data-tool-call": id, "data-name": name },
      summary, el("pre", { text: `arguments: ${brief(args)}` }));
    this.chips.set(id, chip);
    this.chipRow().append(chip);
    return chip;
  }

  toolResult(id, name, severity, content, note) {
    const chip = this.chips.get(id) || this.toolCall(id, name, {});
    const level = SEVERITIES.has(severity) ? severity : "ok";
    chip.className = `chip severity-${level}`;
    chip.dataset.severity = level;
    chip.querySelector("summary").textContent = `${name}: ${level}${note ? ` (${note})` : ""}`;
    let result = chip.querySelector("pre.result");
    if (!result) {
      result = el("pre", { class: "result" });
      chip.append(result);
    }
    result.textContent = `result: ${brief(content)}`;
  }

  line(kind, text) {
    this.body.append(el("p", { class: `event ${kind}`, "data-event": kind, text }));
  }

  error(message) {
    this.body.append(el("p", { class: "error", role: "alert", text: message }));
  }

  setStatus(text) {
    this.status.textContent = text;
  }
}

/** A proposal card with Confirm / Reject while it is pending and `decide` is given. */
export function proposalCard(proposal, decide) {
  const card = el("article", { class: "proposal", "data-proposal-id": proposal.id });
  updateProposal(card, proposal, decide);
  return card;
}

export function updateProposal(card, proposal, decide) {
  card.replaceChildren(
    el("h3", { text: `Proposed: ${proposal.action} on ${proposal.product}` }),
    el("p", { text: proposal.rationale || "" }),
  );
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

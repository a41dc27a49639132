// One session's conversation: stored history, then its live session stream.

import { plainWords } from "./api.js";
import { TurnView, describe, el, proposalCard, updateProposal } from "./render.js";
import { TaskList } from "./tasks.js";

const EVENTS = ["token", "tool_call", "tool_progress", "proposal", "tool_result", "step_restart",
  "message", "error", "done", "task", "agent_started", "agent_done"];
const ENDED = new Set(["done", "failed", "cancelled"]);
const SUMMARIZED_TURNS = 50; // a reload reads the ending of at most this many recent turns
const RECENT_TASKS = 5;

export class ChatView {
  /**
   * `api`: an Api (key or token); `streamToken()`: a session token for EventSource (a new one
   * when the last expired, or null when none can be had); `canChat`: may post and decide;
   * `onInspect(turnView)`: opens the turn inspector; `withKey`: the API key is at hand (so
   * the session's background tasks can be read).
   */
  constructor({ api, sessionId, streamToken, canChat, ui, onInspect, withKey }) {
    Object.assign(this, { api, sessionId, streamToken, canChat, ui, onInspect, withKey });
    this.turns = new Map();
    this.cards = new Map();
    this.tasks = new TaskList(ui.tasks);
    this.lastEventId = null;
    this.current = null;
    this.source = null;
    this.refusals = 0;
    this.startAfter = null;
  }

  async open() {
    const { api, sessionId } = this;
    const [session, messages, proposals] = await Promise.all([
      api.get(`/v1/sessions/${sessionId}`),
      api.messages(sessionId),
      api.get(`/v1/sessions/${sessionId}/proposals`),
    ]);
    this.ui.title.textContent = session.name || `Session ${sessionId.slice(0, 8)}`;
    this.ui.subtitle.textContent = `${session.provider} / ${session.model} · ${session.usage.input_tokens + session.usage.output_tokens} tokens · $${session.cost_usd.toFixed(4)}`;
    this.ui.transcript.replaceChildren();
    const active = session.active_turn;
    this.renderHistory(messages, active ? active.id : null);
    for (const proposal of proposals) this.showProposal(proposal, proposal.turn_id);
    if (active) this.setCurrent(active.id, active.status);
    this.scrollToEnd();
    if (this.withKey) this.loadTasks();
    this.summarizeHistory(active ? active.id : null);
    // The running turn is streamed from its start: its stored steps are not drawn twice.
    await this.connect(active ? `${active.seq}:0-0` : null);
  }

  close() {
    if (this.source) this.source.close();
    this.source = null;
  }

  turn(turnId) {
    let view = this.turns.get(turnId);
    if (!view) {
      view = new TurnView(turnId, this.ui.transcript, { onInspect: this.onInspect });
      this.turns.set(turnId, view);
    }
    return view;
  }

  renderHistory(messages, activeTurnId) {
    for (const m of messages) {
      if (m.rolled_back) continue;
      const view = this.turn(m.turn_id || null);
      if (m.role === "user") view.user(m.content);
      else if (m.turn_id === activeTurnId) continue;
      else if (m.role === "assistant") {
        if (m.content) view.appendAssistant(m.content);
        for (const call of m.tool_calls || []) view.toolCall(call.id, call.name, call.arguments);
      } else if (m.role === "tool") {
        view.toolResult(m.tool_call_id, m.name || "tool", m.is_error ? "error" : "ok", m.content);
      }
    }
  }

  /** The session's latest background tasks (a session token may not list them). */
  async loadTasks() {
    const tasks = await this.api.get(`/v1/sessions/${this.sessionId}/tasks`).catch(() => []);
    for (const task of tasks.slice(-RECENT_TASKS)) this.tasks.show(task);
  }

  /** Each finished turn's ending (status, tokens, cost) from the stored turn, newest first. */
  async summarizeHistory(activeTurnId) {
    const ids = [...this.turns.keys()].filter((id) => id && id !== activeTurnId).reverse();
    for (const id of ids.slice(0, SUMMARIZED_TURNS)) {
      const turn = await this.api.get(`/v1/turns/${id}`).catch(() => null);
      if (!turn) continue;
      const view = this.turns.get(id);
      view.setSeq(turn.seq);
      if (ENDED.has(turn.status) && !view.node.dataset.status) view.ended(turn.status, turn.usage, turn.cost_usd);
      for (const call of turn.tool_calls) {
        const row = view.tools.get(call.id);
        if (row && call.result !== null) view.toolResult(call.id, call.name, call.severity, call.result, call.truncated ? "truncated" : "");
      }
    }
  }

  async connect(after) {
    if (after) this.startAfter = after;
    const token = this.refusals > 3 ? null : await this.streamToken().catch(() => null);
    if (!token) {
      this.ui.notice("The live view stopped: the link or key is no longer valid. Reload to try again.");
      return;
    }
    const params = new URLSearchParams({ token });
    const cursor = this.lastEventId || this.startAfter;
    if (cursor) params.set("after", cursor);
    const source = new EventSource(`/v1/sessions/${this.sessionId}/events?${params}`);
    this.source = source;
    for (const name of EVENTS) {
      source.addEventListener(name, (event) => this.onEvent(name, event));
    }
    source.onopen = () => {
      this.refusals = 0;
      this.ui.connection("");
    };
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED && this.source === source) {
        // Refused (an expired token): reconnect once with a fresh one, from the last event.
        this.source = null;
        this.refusals += 1;
        this.ui.connection("Reconnecting…");
        setTimeout(() => this.connect(null), 1000);
      } else {
        this.ui.connection("Connection lost; reconnecting…");
      }
    };
  }

  onEvent(name, event) {
    if (event.lastEventId) this.lastEventId = event.lastEventId;
    let data = {};
    try { data = JSON.parse(event.data); } catch { data = { message: event.data }; }
    if (name === "proposal" && !data.turn) {
      this.showProposal(data, null);
      return;
    }
    if (name === "task") {
      this.tasks.show(data);
      if (!data.turn) return;
    }
    const known = this.turns.has(data.turn);
    const view = this.turn(data.turn);
    if (!known) this.introduce(view);
    if (!ENDED.has(this.statusOf(data.turn))) this.setCurrent(data.turn, "running");
    const follow = this.atBottom();
    this.apply(view, name, data);
    if (follow) this.scrollToEnd();
  }

  /** The reader is at the end of the conversation (so new text keeps it in view). */
  atBottom() {
    const box = this.ui.transcript;
    return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  }

  scrollToEnd() {
    // after the next frame, when streamed Markdown has been drawn
    requestAnimationFrame(() => requestAnimationFrame(() => {
      this.ui.transcript.scrollTop = this.ui.transcript.scrollHeight;
    }));
  }

  /** A turn first seen on the stream: posted elsewhere, or a follow-up with no message. */
  introduce(view) {
    this.api.get(`/v1/turns/${view.id}`).then((turn) => {
      view.setSeq(turn.seq);
      if (turn.content) view.user(turn.content);
      else if (!view.userNode) view.line("follow-up", "Follow-up answer");
    }).catch(() => {});
  }

  apply(view, name, data) {
    switch (name) {
      case "token": view.appendToken(data.step, data.text); break;
      case "step_restart": view.setAnswer(data.step, ""); break;
      case "message": view.setAnswer(data.step, data.content); break;
      case "tool_call": view.toolCall(data.id, data.name, data.arguments); break;
      case "tool_progress": view.line("tool_progress", `${data.name} is still running (${Math.round(data.elapsed_s)} s)`); break;
      case "tool_result": {
        const row = view.toolResult(data.id, data.name, data.severity || (data.is_error ? "error" : "ok"),
          data.content, data.error || (data.truncated ? "truncated" : ""));
        const card = row.proposalId && this.cards.get(row.proposalId);
        if (card) view.placeCard(card);
        break;
      }
      case "proposal": this.showProposal(data, view.id); break;
      case "error": view.error(`The turn failed: ${data.message || data.code}`); break;
      case "done": this.finish(view, data); break;
      case "task": break; // shown in the task list
      default: view.line(name, describe(name, data));
    }
  }

  statusOf(turnId) {
    return this.current && this.current.id === turnId ? this.current.status : null;
  }

  finish(view, data) {
    view.ended(data.status, data.usage, data.cost_usd);
    this.setCurrent(view.id, data.status);
  }

  setCurrent(turnId, status) {
    this.current = { id: turnId, status };
    const running = !ENDED.has(status);
    this.ui.cancel.hidden = !(running && this.canChat);
    this.ui.status.textContent = running ? `Turn ${status}…` : `Last turn ${status}.`;
    this.ui.status.classList.toggle("busy", running);
  }

  showProposal(proposal, turnId) {
    const decide = this.canChat ? (id, verdict) => this.decide(id, verdict) : null;
    const card = this.cards.get(proposal.id);
    if (card) {
      card.proposal = { ...card.proposal, ...proposal };
      updateProposal(card, card.proposal, decide);
      return;
    }
    if (!proposal.action) return; // a notice about a proposal not shown here
    const fresh = proposalCard(proposal, decide);
    fresh.proposal = proposal;
    this.cards.set(proposal.id, fresh);
    if (turnId) this.turn(turnId).placeCard(fresh);
    else this.ui.transcript.append(fresh);
  }

  async decide(proposalId, verdict) {
    try {
      const row = await this.api.post(`/v1/proposals/${proposalId}/${verdict}`);
      this.showProposal(row, row.turn_id);
    } catch (error) {
      this.ui.notice(plainWords(error));
      const row = await this.api.get(`/v1/proposals/${proposalId}`).catch(() => null);
      if (row) this.showProposal(row, row.turn_id);
    }
  }

  async send(content) {
    const accepted = await this.api.post(`/v1/sessions/${this.sessionId}/turns`, { content });
    const view = this.turn(accepted.id);
    view.setSeq(accepted.seq);
    view.user(content);
    this.ui.transcript.append(view.node); // after anything already shown
    this.scrollToEnd();
    if (!this.current || ENDED.has(this.current.status)) this.setCurrent(accepted.id, accepted.status);
    return accepted;
  }

  async cancel() {
    if (!this.current) return;
    const turn = await this.api.post(`/v1/turns/${this.current.id}/cancel`);
    this.setCurrent(turn.id, turn.status);
  }
}

export function emptyState(container, text) {
  container.replaceChildren(el("p", { class: "label empty", text }));
}

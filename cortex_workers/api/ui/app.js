// The chat page: sign in with an API key (kept in sessionStorage) or open an embed link
// `#session=<id>&token=<session token>`; list and create sessions; chat.

import { Api, plainWords } from "./api.js";
import { ChatView, emptyState } from "./chat.js";
import { el } from "./render.js";

const KEY = "cortex-api-key";
const $ = (id) => document.getElementById(id);
const DEMO_SCRIPT = [
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
  { text: "The proposal is waiting for your decision; the answer is 42.", token_ms: 40 },
];

const ui = {
  title: $("chat-title"),
  transcript: $("transcript"),
  status: $("turn-status"),
  cancel: $("cancel"),
  notice(text) {
    const box = $("notice");
    box.textContent = text;
    box.hidden = !text;
  },
  connection(text) {
    if (text) ui.status.dataset.connection = text;
    else delete ui.status.dataset.connection;
    if (text) ui.status.textContent = text;
  },
};

let chat = null;

function route() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { session: params.get("session"), token: params.get("token") };
}

/** A session token for EventSource, minted with the API key (valid one hour). */
function mintWith(api, sessionId) {
  return async () => (await api.post(`/v1/sessions/${sessionId}/tokens`, { ttl_s: 3600, scope: "chat" })).token;
}

async function openSession(api, sessionId, { canChat, streamToken }) {
  if (chat) chat.close();
  ui.notice("");
  $("chat").hidden = false;
  $("composer").hidden = !canChat;
  $("read-only").hidden = canChat;
  for (const link of document.querySelectorAll("#session-list a")) {
    if (link.dataset.id === sessionId) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  chat = new ChatView({ api, sessionId, streamToken, canChat, ui });
  try {
    await chat.open();
  } catch (error) {
    ui.notice(plainWords(error));
  }
}

async function listSessions(api) {
  const list = $("session-list");
  const page = await api.get("/v1/sessions?limit=100");
  if (!page.sessions.length) {
    emptyState(list, "No sessions yet: create one below.");
    $("new-session").open = true;
    return;
  }
  list.replaceChildren(...page.sessions.map((s) => el("li", {},
    el("a", { href: `#session=${s.id}`, "data-id": s.id, text: s.name || `Session ${s.id.slice(0, 8)}` }))));
}

async function fillNewSessionForm(api) {
  const [providers, tools] = await Promise.all([api.get("/v1/providers"), api.get("/v1/tools")]);
  const select = $("ns-model");
  select.replaceChildren();
  for (const p of providers) {
    const models = p.models.length ? p.models : [p.default_model];
    for (const model of models) {
      const option = el("option", { value: JSON.stringify([p.name, model]), text: `${p.name} / ${model}${p.available ? "" : " (unavailable)"}` });
      if (!p.available) option.disabled = true;
      if (p.default && model === p.default_model) option.selected = true;
      select.append(option);
    }
  }
  const box = $("ns-tools");
  box.replaceChildren(el("legend", { text: "Tools" }));
  for (const t of tools.tools) {
    const id = `tool-${t.name}`;
    box.append(el("label", { for: id }, el("input", { type: "checkbox", id, name: "tools", value: t.name, checked: "" }), t.name));
  }
  $("create-session").disabled = false; // the choices are loaded
}

function newSessionBody(form) {
  const [provider, model] = JSON.parse($("ns-model").value || "[null, null]");
  const tools = [...form.querySelectorAll("input[name=tools]:checked")].map((i) => i.value);
  const body = { provider, model, tools };
  const name = $("ns-name").value.trim();
  if (name) body.name = name;
  const metadata = $("ns-metadata").value.trim();
  if (metadata) body.metadata = JSON.parse(metadata);
  return body;
}

async function startWithKey(key) {
  const api = new Api(key);
  try {
    await listSessions(api);
  } catch (error) {
    sessionStorage.removeItem(KEY);
    ui.notice(plainWords(error));
    $("login").hidden = false;
    return;
  }
  sessionStorage.setItem(KEY, key);
  $("login").hidden = true;
  $("workspace").hidden = false;
  $("forget-key").hidden = false;
  $("sessions-pane").hidden = false;
  fillNewSessionForm(api).catch((error) => ui.notice(plainWords(error)));
  $("new-session-form").onsubmit = async (event) => {
    event.preventDefault();
    try {
      const session = await api.post("/v1/sessions", newSessionBody(event.target));
      $("ns-name").value = "";
      $("ns-metadata").value = "";
      $("new-session").open = false;
      await listSessions(api);
      location.hash = `session=${session.id}`;
    } catch (error) {
      ui.notice(error instanceof SyntaxError ? "Metadata must be JSON." : plainWords(error));
    }
  };
  const show = () => {
    const { session } = route();
    if (session) openSession(api, session, { canChat: true, streamToken: mintWith(api, session) });
  };
  window.onhashchange = show;
  show();
}

function startEmbedded(sessionId, token) {
  $("login").hidden = true;
  $("workspace").hidden = false;
  $("sessions-pane").hidden = true;
  $("workspace").classList.add("embedded");
  const api = new Api(token);
  const canChat = readScope(token) === "chat";
  openSession(api, sessionId, { canChat, streamToken: async () => token });
}

/** The scope a session token carries (its payload is readable; only the server trusts it). */
function readScope(token) {
  try {
    const payload = token.slice(4).split(".")[0].replaceAll("-", "+").replaceAll("_", "/");
    return JSON.parse(atob(payload)).sc;
  } catch {
    return "read";
  }
}

function wireComposer() {
  const form = $("composer");
  const input = $("message");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const content = input.value.trim();
    if (!content || !chat) return;
    $("send").disabled = true;
    try {
      await chat.send(content);
      input.value = "";
    } catch (error) {
      ui.notice(plainWords(error));
    } finally {
      $("send").disabled = false;
      input.focus();
    }
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  ui.cancel.addEventListener("click", () => chat && chat.cancel().catch((error) => ui.notice(plainWords(error))));
  $("fill-demo").addEventListener("click", () => {
    $("ns-metadata").value = JSON.stringify({ script: DEMO_SCRIPT }, null, 2);
  });
  $("forget-key").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    location.hash = "";
    location.reload();
  });
}

function main() {
  wireComposer();
  const { session, token } = route();
  if (session && token) return startEmbedded(session, token);
  const key = sessionStorage.getItem(KEY);
  if (key) return startWithKey(key);
  $("login").hidden = false;
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    startWithKey($("api-key").value.trim());
  });
  $("api-key").focus();
}

main();

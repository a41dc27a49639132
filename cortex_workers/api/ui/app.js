// The chat page: sign in with an API key (kept in sessionStorage) or open an embed link
// `#session=<id>&token=<session token>`; list and create sessions; chat; inspect a turn.

import { Api, plainWords } from "./api.js";
import { ChatView } from "./chat.js";
import { inspectTurn } from "./inspector.js";
import { SessionList, fillDemo, fillNewSessionForm, newSessionBody } from "./sessions.js";
import { wireTheme } from "./theme.js";

const KEY = "cortex-api-key";
const $ = (id) => document.getElementById(id);

const ui = {
  title: $("chat-title"),
  subtitle: $("chat-subtitle"),
  transcript: $("transcript"),
  tasks: $("tasks"),
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
let sessions = null;

function route() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { session: params.get("session"), token: params.get("token") };
}

/** A session token for EventSource, minted with the API key (valid one hour). */
function mintWith(api, sessionId) {
  return async () => (await api.post(`/v1/sessions/${sessionId}/tokens`, { ttl_s: 3600, scope: "chat" })).token;
}

async function openSession(api, sessionId, { canChat, streamToken, withKey = false }) {
  if (chat) chat.close();
  ui.notice("");
  $("chat").hidden = false;
  $("no-session").hidden = true;
  $("composer").hidden = !canChat;
  $("read-only").hidden = canChat;
  if (sessions) sessions.draw();
  const onInspect = (view) => inspectTurn(api, $("inspector"), view.id);
  chat = new ChatView({ api, sessionId, streamToken, canChat, ui, onInspect, withKey });
  try {
    await chat.open();
  } catch (error) {
    ui.notice(plainWords(error));
  }
}

function showWorkspace({ embedded }) {
  $("signed-out").hidden = true;
  $("workspace").hidden = false;
  $("sessions-pane").hidden = embedded;
  $("workspace").classList.toggle("embedded", embedded);
  $("forget-key").hidden = embedded;
}

function showSignedOut() {
  $("workspace").hidden = true;
  $("forget-key").hidden = true;
  $("signed-out").hidden = false;
  $("api-key").focus();
}

async function startWithKey(key) {
  const api = new Api(key);
  sessions = new SessionList(api);
  try {
    await sessions.load();
  } catch (error) {
    sessionStorage.removeItem(KEY);
    ui.notice(plainWords(error));
    showSignedOut();
    return;
  }
  ui.notice("");
  sessionStorage.setItem(KEY, key);
  showWorkspace({ embedded: false });
  fillNewSessionForm(api).catch((error) => ui.notice(plainWords(error)));
  $("new-session-form").onsubmit = async (event) => {
    event.preventDefault();
    try {
      const session = await api.post("/v1/sessions", newSessionBody(event.target));
      $("ns-name").value = "";
      $("ns-metadata").value = "";
      $("new-session").open = false;
      await sessions.load();
      location.hash = `session=${session.id}`;
    } catch (error) {
      ui.notice(error instanceof SyntaxError ? "Metadata must be JSON." : plainWords(error));
    }
  };
  const show = () => {
    const { session } = route();
    if (session) openSession(api, session, { canChat: true, streamToken: mintWith(api, session), withKey: true });
    else {
      $("chat").hidden = true;
      $("no-session").hidden = false;
    }
  };
  window.onhashchange = show;
  show();
}

function startEmbedded(sessionId, token) {
  showWorkspace({ embedded: true });
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
      if (sessions) sessions.touched(chat.sessionId);
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
  $("fill-demo").addEventListener("click", fillDemo);
  $("forget-key").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    location.hash = "";
    location.reload();
  });
  $("inspector-close").addEventListener("click", () => $("inspector").close());
}

function main() {
  wireTheme($("theme"));
  wireComposer();
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    startWithKey($("api-key").value.trim());
  });
  const { session, token } = route();
  if (session && token) return startEmbedded(session, token);
  const key = sessionStorage.getItem(KEY);
  if (key) return startWithKey(key);
  return showSignedOut();
}

main();

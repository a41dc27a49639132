// HTTP to the v1 API, with either the tenant's API key or a session token.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const PLAIN = {
  401: "Not signed in: the key or link is wrong or has expired.",
  403: "This link may only read the conversation.",
  404: "Not found (or not yours).",
  409: "That is no longer possible: it changed in the meantime.",
  413: "The message is too long.",
  422: "The request was not accepted",
  429: "Too many requests; wait a moment and try again.",
  503: "The service is unavailable right now; try again soon.",
};

/** A sentence a person can act on, for an error of any kind. */
export function plainWords(error) {
  if (error instanceof ApiError) {
    const lead = PLAIN[error.status] || `The server answered ${error.status}.`;
    return error.status === 422 || !PLAIN[error.status] ? `${lead}: ${error.message}` : lead;
  }
  return "Cannot reach the server; check the connection and try again.";
}

export class Api {
  /** `credential` is an API key or a session token. */
  constructor(credential) {
    this.credential = credential;
  }

  async request(method, path, body) {
    const headers = { Authorization: `Bearer ${this.credential}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await response.json().catch(() => null);
    if (!response.ok) {
      const err = (data && data.error) || {};
      throw new ApiError(response.status, err.code || "error", err.message || response.statusText);
    }
    return data;
  }

  get(path) { return this.request("GET", path); }
  post(path, body) { return this.request("POST", path, body === undefined ? {} : body); }

  /** Every stored message of the session, oldest first. */
  async messages(sessionId) {
    const out = [];
    let after = 0;
    for (;;) {
      const page = await this.get(`/v1/sessions/${sessionId}/messages?after=${after}&limit=500`);
      out.push(...page.messages);
      if (page.next_after === null || page.next_after === undefined) return out;
      after = page.next_after;
    }
  }
}

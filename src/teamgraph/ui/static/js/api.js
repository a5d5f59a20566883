// The documented HTTP API, nothing else: auth, sessions, teams, runs and their SSE streams.

import { shortIds } from "./dom.js";
import { SSEParser } from "./sse.js";
import { END_EVENTS, PAUSE_EVENTS } from "./vocab.js";

const API = "/api/v1";

export class ApiError extends Error {
  constructor(status, detail, errors = []) {
    super(shortIds(typeof detail === "string" ? detail : JSON.stringify(detail)));
    this.status = status;
    this.errors = errors;
  }
}

async function failure(response) {
  let body = {};
  try {
    body = await response.json();
  } catch {
    /* not JSON */
  }
  const fields = (body.errors || []).map((e) => `${e.field}: ${e.message}`).join("; ");
  let detail = body.detail || response.statusText;
  if (Array.isArray(detail)) detail = detail.map((d) => d.msg || JSON.stringify(d)).join("; ");
  return new ApiError(response.status, fields ? `${detail} — ${fields}` : detail, body.errors);
}

export class Api {
  constructor(token = null, onUnauthorized = () => {}) {
    this.token = token;
    this.onUnauthorized = onUnauthorized;
  }

  headers(extra = {}) {
    return this.token ? { Authorization: `Bearer ${this.token}`, ...extra } : extra;
  }

  async request(method, path, body) {
    const init = { method, headers: this.headers() };
    if (body instanceof URLSearchParams) init.body = body;
    else if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    const response = await fetch(path, init);
    if (response.status === 401 && this.token) this.onUnauthorized();
    if (!response.ok) throw await failure(response);
    return response.status === 204 ? null : response.json();
  }

  register(email, password) {
    return this.request("POST", `${API}/auth/register`, { email, password });
  }

  login(email, password) {
    return this.request("POST", `${API}/auth/login`, new URLSearchParams({ username: email, password }));
  }

  logout() {
    return this.request("POST", `${API}/auth/logout`); // forgets the log-in cookie
  }

  sessions() {
    return this.request("GET", `${API}/auth/sessions`);
  }

  createSession(name, team, template) {
    return this.request("POST", `${API}/auth/session`, { name, team, template: template || null });
  }

  renameSession(id, name) {
    return this.request("PATCH", `${API}/auth/session/${encodeURIComponent(id)}/name`, { name });
  }

  deleteSession(id) {
    return this.request("DELETE", `${API}/auth/session/${encodeURIComponent(id)}`);
  }

  messages(sessionId) {
    return this.request("GET", `${API}/sessions/${encodeURIComponent(sessionId)}/messages`);
  }

  teams() {
    return this.request("GET", `${API}/teams`);
  }

  templates() {
    return this.request("GET", `${API}/templates`);
  }

  runs(sessionId) {
    return this.request("GET", `${API}/sessions/${encodeURIComponent(sessionId)}/runs`);
  }

  run(runId) {
    return this.request("GET", `${API}/runs/${encodeURIComponent(runId)}`);
  }

  startRun(sessionId, input, template) {
    const body = { input };
    if (template) body.template = template;
    return this.request("POST", `${API}/sessions/${encodeURIComponent(sessionId)}/runs`, body);
  }

  cancel(runId) {
    return this.request("POST", `${API}/runs/${encodeURIComponent(runId)}/cancel`);
  }

  resume(runId, body) {
    return this.request("POST", `${API}/runs/${encodeURIComponent(runId)}/resume`, body);
  }

  /**
   * Follow a run's events from `after` (a seq): the stored ones, then live ones, until the run
   * ends or pauses. A broken connection reconnects with `Last-Event-ID`, so nothing is lost or
   * seen twice. Returns {done: Promise, close()}.
   */
  follow(runId, after, onEvent) {
    const controller = new AbortController();
    let last = after;
    let stopped = false; // the run ended or paused: the server closed the stream on purpose
    const once = async () => {
      const headers = this.headers({ Accept: "text/event-stream" });
      if (last > 0) headers["Last-Event-ID"] = String(last);
      const response = await fetch(`${API}/runs/${encodeURIComponent(runId)}/events`, {
        headers,
        signal: controller.signal,
      });
      if (!response.ok) throw await failure(response);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      const parser = new SSEParser();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        for (const message of parser.feed(value)) {
          const event = JSON.parse(message.data);
          if (event.seq <= last) continue;
          last = event.seq;
          stopped = STOPS.has(event.type);
          onEvent(event);
        }
      }
    };
    const done = (async () => {
      let delay = 250;
      let idle = 0; // attempts in a row that brought nothing new
      while (!controller.signal.aborted && !stopped && idle < 3) {
        const before = last;
        try {
          await once();
        } catch (error) {
          if (controller.signal.aborted) break;
          if (error instanceof ApiError && error.status < 500 && error.status !== 429) throw error;
        }
        if (stopped || controller.signal.aborted) break;
        idle = last > before ? 0 : idle + 1;
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = last > before ? 250 : Math.min(delay * 2, 4000);
      }
      return last;
    })();
    return { done, close: () => controller.abort() };
  }
}

const STOPS = new Set([...END_EVENTS, ...PAUSE_EVENTS]);

// The workspace controller: auth, sessions, sending, following a run live, replaying past runs.

import { Api } from "./api.js";
import { clear, h } from "./dom.js";
import { cachedEvents, saveEvents } from "./eventcache.js";
import { isFinished, newRunState, reduce, replay } from "./runstate.js";
import { OPEN, PAUSED } from "./vocab.js";
import { renderMessages, renderPending } from "./views/chat.js";
import {
  renderHeader, renderPlan, renderPlanner, renderRunList, renderStepDetail, renderTeam, renderTools, renderUsage,
} from "./views/workspace.js";

const $ = (id) => document.getElementById(id);
const store = window.localStorage;

const app = {
  api: new Api(store.getItem("teamgraph.token"), () => logout("Your login has expired; log in again.")),
  teams: [],
  templates: [],
  sessions: [],
  session: null, // the open session
  messages: [],
  runs: [],
  view: null, // {runId, events, state, mode: "live" | "replay", position, stream}
  selected: null, // the step shown in detail
  decisions: {},
  openTools: new Set(),
  registering: false,
};
window.teamgraph = app; // for debugging and the browser tests' inspection

// ---- rendering ------------------------------------------------------------------------------

let frame = 0;
function render() {
  if (!frame) frame = requestAnimationFrame(draw);
}

function currentState() {
  return app.view ? app.view.state : null;
}

/** A selector for the focused element that survives a redraw (nodes, runs, tool calls). */
function focusSelector() {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  if (el.id) return `#${CSS.escape(el.id)}`;
  const keyed = el.closest("[data-step],[data-run],[data-call]");
  const root = keyed && keyed.parentElement && keyed.parentElement.closest("[id]");
  if (!keyed || !root) return null;
  const attr = ["data-step", "data-run", "data-call"].find((a) => keyed.hasAttribute(a));
  const base = `#${CSS.escape(root.id)} [${attr}="${CSS.escape(keyed.getAttribute(attr))}"]`;
  return keyed === el ? base : `${base} ${el.tagName.toLowerCase()}`;
}

function draw() {
  const focused = focusSelector();
  drawAll();
  if (focused && (!document.activeElement || document.activeElement === document.body)) {
    const again = document.querySelector(focused);
    if (again) again.focus({ preventScroll: true });
  }
}

function drawAll() {
  frame = 0;
  const state = currentState();
  const team = app.teams.find((t) => t.name === (state ? state.team : app.session && app.session.team));
  const now = app.view && app.view.mode === "replay" ? state.lastTs || Date.now() : Date.now();
  renderHeader({ status: $("run-status"), meta: $("run-meta") }, state, team);
  renderPlanner($("planner"), state);
  renderPlan({ graph: $("graph"), nested: $("nested") }, state, { now, selected: app.selected, onSelect: selectStep });
  renderStepDetail($("step-detail"), state, app.selected, now, () => selectStep(null));
  renderTeam({ control: $("control"), tree: $("tree") }, state);
  renderTools({ tools: $("tools"), count: $("tool-count") }, state, app.openTools);
  renderUsage($("usage"), state);
  renderRunList($("run-list"), app.runs, app.view && app.view.runId, openRun);
  const live = app.view && app.view.mode === "live";
  renderMessages($("messages"), app.messages, live ? state : null, live);
  renderPending($("pending"), live ? state : null, { answer, decide, decisions: app.decisions });
  const open = live && state && OPEN.includes(state.status);
  $("cancel-run").hidden = !open; // a paused run can be closed too
  $("cancel-run").textContent = state && PAUSED.includes(state.status) ? "Close paused run" : "Cancel run";
  $("send").disabled = !app.session || Boolean(open);
  drawReplay();
}

function selectStep(key) {
  app.selected = key;
  render();
}

function toast(text) {
  const el = $("toast");
  el.textContent = text;
  el.classList.add("show");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => el.classList.remove("show"), 3500);
}

setInterval(() => {
  const state = currentState();
  if (state && app.view.mode === "live" && state.status === "running") render(); // elapsed times
}, 1000);

// ---- auth -----------------------------------------------------------------------------------

function showAuth(message = "") {
  $("app").hidden = true;
  $("auth").hidden = false;
  $("auth-error").textContent = message;
  $("auth-email").focus();
}

function setRegistering(on) {
  app.registering = on;
  $("auth-submit").textContent = on ? "Create account" : "Log in";
  $("auth-toggle").textContent = on ? "Have an account? Log in" : "No account? Register";
  $("auth-hint").hidden = !on;
  $("auth-password").autocomplete = on ? "new-password" : "current-password";
}

async function submitAuth(event) {
  event.preventDefault();
  const email = $("auth-email").value.trim();
  const password = $("auth-password").value;
  $("auth-error").textContent = "";
  try {
    if (app.registering) await app.api.register(email, password);
    const token = await app.api.login(email, password);
    app.api.token = token.access_token;
    store.setItem("teamgraph.token", token.access_token);
    store.setItem("teamgraph.email", email);
    $("auth-password").value = "";
    setRegistering(false);
    await enter();
  } catch (error) {
    $("auth-error").textContent = error.message;
  }
}

function logout(message = "") {
  closeStream();
  app.api.logout().catch(() => {}); // the cookie goes too; nothing to tell if it fails
  store.removeItem("teamgraph.token");
  store.removeItem("teamgraph.session");
  app.api.token = null;
  Object.assign(app, { session: null, view: null, sessions: [], messages: [], runs: [], selected: null });
  setRegistering(false);
  showAuth(message);
}

async function enter() {
  [app.teams, app.templates] = await Promise.all([app.api.teams(), app.api.templates()]);
  $("auth").hidden = true;
  $("app").hidden = false;
  $("user-email").textContent = store.getItem("teamgraph.email") || "";
  fillTeamSelect();
  await loadSessions();
  const last = store.getItem("teamgraph.session");
  const target = app.sessions.find((s) => s.session_id === last) || app.sessions[0];
  if (target) await openSession(target.session_id);
  else render();
}

// ---- teams, templates, sessions -------------------------------------------------------------

function fillTeamSelect() {
  const select = $("new-team");
  clear(select);
  for (const team of app.teams) {
    select.append(h("option", { value: team.name }, `${team.name} (${team.pattern})`));
  }
  onTeamChange();
}

function templateOptions(select, selected) {
  clear(select);
  select.append(h("option", { value: "" }, "planner decides"));
  for (const t of app.templates) {
    const option = h("option", { value: t.name, title: t.description }, t.name);
    option.selected = t.name === selected;
    select.append(option);
  }
}

function onTeamChange() {
  const team = app.teams.find((t) => t.name === $("new-team").value);
  $("new-team-info").textContent = team ? team.description : "";
  $("new-template-label").hidden = !team || team.pattern !== "workflow";
  templateOptions($("new-template"), "");
}

async function loadSessions() {
  app.sessions = await app.api.sessions();
  drawSessions();
}

function drawSessions() {
  const list = $("session-list");
  clear(list);
  if (!app.sessions.length) list.append(h("li", { class: "muted small" }, "No sessions yet: create one above."));
  for (const s of app.sessions) {
    const active = app.session && app.session.session_id === s.session_id;
    list.append(h("li", { class: active ? "active" : "", "data-session": s.session_id },
      h("button", { type: "button", class: "open", onclick: () => openSession(s.session_id), "aria-current": active ? "true" : null },
        s.name || "Untitled", h("small", {}, s.team + (s.template ? ` · ${s.template}` : ""))),
      h("button", { type: "button", class: "icon rename", "aria-label": `Rename ${s.name || "Untitled"}`, onclick: () => startRename(s) }, "✎"),
      h("button", { type: "button", class: "icon delete", "aria-label": `Delete ${s.name || "Untitled"}`, onclick: () => removeSession(s) }, "✕")));
  }
}

function startRename(session) {
  const li = document.querySelector(`li[data-session="${CSS.escape(session.session_id)}"]`);
  const input = h("input", { value: session.name, maxlength: 200, "aria-label": "New name", class: "rename-input" });
  let finished = false; // Enter or Escape, then the blur of the removed field: act once
  const done = async (save) => {
    if (finished) return;
    finished = true;
    const name = input.value.trim();
    if (save && name && name !== session.name) {
      try {
        await app.api.renameSession(session.session_id, name);
        await loadSessions();
        if (app.session && app.session.session_id === session.session_id) setSessionHeader(app.sessions.find((s) => s.session_id === session.session_id));
      } catch (error) {
        toast(error.message);
        drawSessions();
      }
    } else drawSessions();
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") done(true);
    if (e.key === "Escape") done(false);
  });
  input.addEventListener("blur", () => done(true), { once: true });
  clear(li).append(input);
  input.focus();
  input.select();
}

async function removeSession(session) {
  if (!window.confirm(`Delete the session "${session.name || "Untitled"}" and its history?`)) return;
  try {
    await app.api.deleteSession(session.session_id);
  } catch (error) {
    toast(error.message);
    return;
  }
  if (app.session && app.session.session_id === session.session_id) {
    closeStream();
    Object.assign(app, { session: null, view: null, messages: [], runs: [], selected: null });
    setSessionHeader(null);
  }
  await loadSessions();
  render();
}

async function createSession(event) {
  event.preventDefault();
  try {
    const created = await app.api.createSession(
      $("new-name").value.trim() || `Session ${app.sessions.length + 1}`,
      $("new-team").value,
      $("new-template-label").hidden ? null : $("new-template").value,
    );
    $("new-name").value = "";
    await loadSessions();
    await openSession(created.session_id);
    $("composer-input").focus();
  } catch (error) {
    toast(error.message);
  }
}

function setSessionHeader(session) {
  $("session-title").textContent = session ? session.name || "Untitled" : "No session";
  $("session-team").textContent = session ? session.team : "";
  const team = session && app.teams.find((t) => t.name === session.team);
  $("composer-template-label").hidden = !team || team.pattern !== "workflow";
  templateOptions($("composer-template"), session ? session.template : "");
}

async function openSession(id) {
  closeStream();
  const session = app.sessions.find((s) => s.session_id === id);
  if (!session) return;
  Object.assign(app, { session, view: null, selected: null, decisions: {} });
  store.setItem("teamgraph.session", id);
  setSessionHeader(session);
  drawSessions();
  document.body.querySelector(".app").classList.remove("show-sidebar");
  await refreshHistory();
  const latest = app.runs[0];
  if (latest && !isFinished(latest.status)) await attach(latest.run_id, latest);
  else if (latest) await openRun(latest.run_id);
  render();
}

async function refreshHistory() {
  if (!app.session) return;
  const id = app.session.session_id;
  const [messages, runs] = await Promise.all([app.api.messages(id), app.api.runs(id)]);
  if (!app.session || app.session.session_id !== id) return;
  app.messages = messages;
  app.runs = runs;
}

// ---- runs -----------------------------------------------------------------------------------

function closeStream() {
  if (app.view && app.view.stream) app.view.stream.close();
  clearInterval(app.playTimer);
  app.playTimer = null;
}

/** Follow a run live: the events this tab already had (kept across a reload), then the rest
 * from the server with `Last-Event-ID` — or everything from its first event. */
async function attach(runId, meta = {}) {
  closeStream();
  const view = { runId, events: cachedEvents(runId), state: newRunState({ run_id: runId, ...meta }), mode: "live", position: 0 };
  for (const event of view.events) reduce(view.state, event);
  view.position = view.events.length;
  app.view = view;
  app.decisions = {};
  follow(view.state.lastSeq);
  render();
}

function follow(after) {
  const view = app.view;
  view.stream = app.api.follow(view.runId, after, (event) => {
    view.events.push(event);
    reduce(view.state, event);
    view.position = view.events.length;
    render();
  });
  view.stream.done
    .then(async () => {
      if (app.view !== view) return;
      await refreshHistory();
      render();
    })
    .catch((error) => toast(error.message));
}

async function send(event) {
  event.preventDefault();
  const input = $("composer-input");
  const text = input.value.trim();
  $("composer-error").textContent = "";
  if (!text || !app.session) return;
  const template = $("composer-template-label").hidden ? null : $("composer-template").value || null;
  try {
    const accepted = await app.api.startRun(app.session.session_id, text, template);
    input.value = "";
    app.selected = null;
    await attach(accepted.run_id, { input: text, team: app.session.team, status: accepted.status });
    app.runs = await app.api.runs(app.session.session_id);
    render();
  } catch (error) {
    $("composer-error").textContent = error.message;
  }
}

async function cancelRun() {
  const view = app.view;
  if (!view) return;
  const paused = PAUSED.includes(view.state.status); // its stream ended at the pause
  try {
    await app.api.cancel(view.runId);
  } catch (error) {
    toast(error.message);
    return;
  }
  if (paused && app.view === view) follow(view.state.lastSeq);
}

async function answer(text) {
  const view = app.view;
  if (await resumeWith({ answer: text })) {
    app.messages = [...app.messages, { role: "user", content: text, run_id: view.runId }]; // stored too
    render();
  }
}

async function decide(requestId, decision) {
  app.decisions[requestId] = decision;
  const waiting = app.view.state.pending.approvals.filter((a) => !app.decisions[a.requestId]);
  if (waiting.length) {
    render();
    return;
  }
  await resumeWith({ decisions: { ...app.decisions } });
}

async function resumeWith(body) {
  const view = app.view;
  try {
    await app.api.resume(view.runId, body);
  } catch (error) {
    app.decisions = {};
    toast(error.message);
    render();
    return false;
  }
  app.decisions = {};
  view.state.pending = { clarification: null, approvals: [] };
  view.state.status = "running";
  follow(view.state.lastSeq);
  render();
  return true;
}

/** Open a run of the session: live if it is still going, else a replay of its stored events. */
async function openRun(runId) {
  const meta = app.runs.find((r) => r.run_id === runId) || { run_id: runId };
  if (!isFinished(meta.status)) {
    await attach(runId, meta);
    return;
  }
  closeStream();
  const events = [];
  const view = { runId, events, state: newRunState(meta), mode: "replay", position: 0 };
  app.view = view;
  app.selected = null;
  view.stream = app.api.follow(runId, 0, (event) => events.push(event));
  try {
    await view.stream.done;
  } catch (error) {
    toast(error.message);
  }
  if (app.view !== view) return;
  view.position = events.length;
  view.state = replay(events, events.length, identity(runId));
  render();
}

/** What a replay starts from: who ran what, not how it ended. */
function identity(runId) {
  const row = app.runs.find((r) => r.run_id === runId) || {};
  return { run_id: runId, team: row.team, pattern: row.pattern, input: row.input };
}

function seek(position) {
  const view = app.view;
  if (!view || view.mode !== "replay") return;
  view.position = Math.max(0, Math.min(view.events.length, position));
  view.state = replay(view.events, view.position, identity(view.runId));
  render();
}

function togglePlay() {
  const view = app.view;
  if (!view || view.mode !== "replay") return;
  if (app.playTimer) {
    clearInterval(app.playTimer);
    app.playTimer = null;
  } else {
    if (view.position >= view.events.length) seek(0);
    app.playTimer = setInterval(() => {
      if (!app.view || app.view.position >= app.view.events.length) {
        clearInterval(app.playTimer);
        app.playTimer = null;
        render();
        return;
      }
      // skip runs of tokens so playback moves at the pace of things happening
      let next = app.view.position + 1;
      while (next < app.view.events.length && app.view.events[next - 1].type === "token") next += 1;
      seek(next);
    }, 120);
  }
  render();
}

function drawReplay() {
  const view = app.view;
  const on = view && view.mode === "replay";
  $("replay").hidden = !on;
  if (!on) return;
  const range = $("replay-range");
  range.max = String(view.events.length);
  range.value = String(view.position);
  const event = view.events[view.position - 1];
  $("replay-pos").textContent = `${view.position}/${view.events.length}${event ? ` · ${event.type}` : ""}`;
  $("replay-play").textContent = app.playTimer ? "Pause" : "Play";
  $("replay-play").setAttribute("aria-label", app.playTimer ? "Pause" : "Play");
}

// ---- wiring ---------------------------------------------------------------------------------

function wire() {
  $("auth-form").addEventListener("submit", submitAuth);
  $("auth-toggle").addEventListener("click", () => setRegistering(!app.registering));
  $("logout").addEventListener("click", () => logout());
  $("new-session").addEventListener("submit", createSession);
  $("new-team").addEventListener("change", onTeamChange);
  $("composer").addEventListener("submit", send);
  $("composer-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("cancel-run").addEventListener("click", cancelRun);
  $("replay-range").addEventListener("input", (e) => seek(Number(e.target.value)));
  $("replay-start").addEventListener("click", () => seek(0));
  $("replay-prev").addEventListener("click", () => seek(app.view.position - 1));
  $("replay-next").addEventListener("click", () => seek(app.view.position + 1));
  $("replay-end").addEventListener("click", () => seek(app.view.events.length));
  $("replay-play").addEventListener("click", togglePlay);
  const shell = document.querySelector(".app");
  $("sidebar-open").addEventListener("click", () => shell.classList.add("show-sidebar"));
  $("sidebar-close").addEventListener("click", () => shell.classList.remove("show-sidebar"));
  $("workspace-toggle").addEventListener("click", () => shell.classList.toggle("show-workspace"));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") shell.classList.remove("show-sidebar", "show-workspace");
  });
  window.addEventListener("pagehide", () => {
    if (app.view && app.view.mode === "live" && !isFinished(app.view.state.status)) saveEvents(app.view);
  });
}

async function boot() {
  wire();
  setRegistering(false);
  if (!app.api.token) {
    showAuth();
    return;
  }
  try {
    await enter();
  } catch (error) {
    logout(error.status === 401 ? "" : error.message);
  }
}

boot();

// Event → view state: the pure heart of the workspace. `reduce(state, event)` folds one run's
// events (the server's `Event` vocabulary, in seq order) into everything the panels draw. No DOM,
// no I/O: a replay is `events.slice(0, k).reduce(reduce, newRunState())`.

/** @typedef {{input_tokens: number, output_tokens: number, cost_usd: number}} Usage */

import { OPEN, PAUSED } from "./vocab.js";

const ROLES = new Set(["planner", "moderator", "supervisor", "synthesizer"]);
const CONTEXT_MARK = "\n\n## Context from previous steps\n";

const zeroUsage = () => ({ input_tokens: 0, output_tokens: 0, cost_usd: 0 });

function addUsage(into, usage) {
  into.input_tokens += usage.input_tokens || 0;
  into.output_tokens += usage.output_tokens || 0;
  into.cost_usd += usage.cost_usd || 0;
}

/** A fresh view state for a run (`meta` may carry what the run's row says before any event). */
export function newRunState(meta = {}) {
  return {
    runId: meta.run_id || null,
    status: meta.status || "pending",
    team: meta.team || null,
    pattern: meta.pattern || null,
    input: meta.input || "",
    planner: null, // {tier, confidence, reasoning, notes, planName}
    teams: {}, // team instance key → {key, path, parentStep, plan, steps: {id → step}, order}
    rootTeam: null,
    agents: {}, // "research_desk › researcher" → {label, path, usage, calls}
    usage: zeroUsage(),
    tools: [], // {callId, agent, tool, args, output, isError, state, stepKey, path}
    control: { holder: null, trail: [] },
    pending: { clarification: null, approvals: [] },
    streams: {}, // "path|step" → {agent, text, stepKey}
    live: null, // the stream shown as the answer being written
    output: meta.output || "",
    error: meta.error || "",
    tree: { name: null, kind: "team", children: {} }, // team → nested team → agent, from paths
    lastSeq: 0,
    lastTs: null,
    startedTs: null,
    count: 0,
  };
}

const instanceKey = (teamPath, parentId) => `${teamPath.join("/")}@${parentId || ""}`;
const stepKey = (instance, id) => `${instance}#${id}`;

/** The team instance an event belongs to: its path less the trailing agent (and tool). */
function teamOf(event) {
  const drop = event.type === "tool_called" || event.type === "tool_returned" ? 2 : 1;
  const own = event.type === "plan_created" || event.type === "run_started" ? 0 : drop;
  const path = event.path.slice(0, Math.max(1, event.path.length - own));
  return { path, key: instanceKey(path, path.length > 1 ? event.parent_id : null) };
}

function ensureTeam(state, path, key) {
  if (!state.teams[key]) {
    const parentPath = path.slice(0, -1);
    let parentStep = null;
    if (parentPath.length) {
      // the step of the enclosing team whose worker is this nested team
      const parentId = key.slice(key.indexOf("@") + 1);
      const candidates = Object.values(state.teams).filter(
        (t) => t.path.join("/") === parentPath.join("/") && t.steps[parentId],
      );
      if (candidates.length) parentStep = stepKey(candidates[candidates.length - 1].key, parentId);
    }
    state.teams[key] = { key, path, parentStep, plan: null, steps: {}, order: [] };
    if (path.length === 1 && !state.rootTeam) state.rootTeam = key;
  }
  return state.teams[key];
}

function ensureStep(team, id, worker, task) {
  if (!team.steps[id]) {
    team.steps[id] = {
      key: stepKey(team.key, id),
      id,
      worker: worker || "",
      task: task || "",
      context: "",
      dependsOn: [],
      state: "pending",
      startedTs: null,
      endedTs: null,
      elapsed: null,
      usage: zeroUsage(),
      output: "",
      error: "",
      reason: "",
      child: null, // key of the nested team instance that ran this step
    };
    team.order.push(id);
  }
  return team.steps[id];
}

function stepOf(state, event) {
  if (!event.step_id) return null;
  const { key } = teamOf(event);
  const team = state.teams[key];
  return team && team.steps[event.step_id] ? team.steps[event.step_id] : null;
}

function findStep(state, key) {
  if (!key) return null;
  const at = key.lastIndexOf("#");
  const team = state.teams[key.slice(0, at)];
  return team ? team.steps[key.slice(at + 1)] || null : null;
}

/** Usage lands on its agent, its step, and every enclosing step up the tree of teams. */
function chargeSteps(state, event, usage) {
  const { path, key } = teamOf(event);
  let team = ensureTeam(state, path, key); // a nested planner spends before its plan exists
  let step = stepOf(state, event);
  if (!step && team) step = findStep(state, team.parentStep);
  const seen = new Set();
  while (step && !seen.has(step.key)) {
    seen.add(step.key);
    addUsage(step.usage, usage);
    const owner = state.teams[step.key.slice(0, step.key.lastIndexOf("#"))];
    team = owner;
    step = owner ? findStep(state, owner.parentStep) : null;
  }
}

function agentLabel(path) {
  return path.slice(1).join(" › ") || path.join(" › ");
}

function addToTree(state, path, leafKind) {
  if (!state.tree.name) state.tree.name = path[0];
  let node = state.tree;
  path.slice(1).forEach((name, i) => {
    const last = i === path.length - 2;
    if (!node.children[name]) node.children[name] = { name, kind: "agent", children: {} };
    node = node.children[name];
    if (!last) node.kind = "team";
    else if (leafKind === "team") node.kind = "team";
  });
}

function setHolder(state, path) {
  state.control.holder = agentLabel(path);
}

const handlers = {
  run_started(state, e) {
    state.team = e.team;
    state.pattern = e.pattern;
    state.input = state.input || e.input;
    state.status = "running";
    state.startedTs = state.startedTs || e.ts;
    state.tree.name = e.path[0];
    ensureTeam(state, e.path.slice(0, 1), instanceKey(e.path.slice(0, 1), null));
  },
  plan_created(state, e) {
    const { path, key } = teamOf(e);
    const team = ensureTeam(state, path, key);
    team.plan = { name: e.plan_name, tier: e.tier, confidence: e.confidence };
    for (const s of e.steps) {
      const step = ensureStep(team, s.id, s.worker, s.task);
      step.dependsOn = [...(s.depends_on || [])];
    }
    if (team.parentStep) {
      const parent = findStep(state, team.parentStep);
      if (parent) parent.child = key;
    }
    if (path.length === 1) {
      state.planner = {
        tier: e.tier,
        confidence: e.confidence,
        reasoning: e.reasoning || "",
        notes: e.notes || [],
        planName: e.plan_name,
      };
    }
    if (path.length > 1) addToTree(state, path, "team");
  },
  step_started(state, e) {
    const { path, key } = teamOf(e);
    const step = ensureStep(ensureTeam(state, path, key), e.step_id, e.worker, "");
    const at = e.task.indexOf(CONTEXT_MARK);
    step.task = at >= 0 ? e.task.slice(0, at) : e.task;
    if (at >= 0) step.context = e.task.slice(at + CONTEXT_MARK.length).trim();
    Object.assign(step, { state: "running", startedTs: e.ts, endedTs: null, error: "" });
    addToTree(state, e.path, "agent");
  },
  step_completed(state, e) {
    const { path, key } = teamOf(e);
    const step = ensureStep(ensureTeam(state, path, key), e.step_id, e.worker, "");
    Object.assign(step, { state: "done", output: e.output, elapsed: e.elapsed_s, endedTs: e.ts });
  },
  step_failed(state, e) {
    const { path, key } = teamOf(e);
    const step = ensureStep(ensureTeam(state, path, key), e.step_id, e.worker, "");
    Object.assign(step, { state: "failed", error: e.error, elapsed: e.elapsed_s, endedTs: e.ts });
  },
  step_skipped(state, e) {
    const { path, key } = teamOf(e);
    const step = ensureStep(ensureTeam(state, path, key), e.step_id, e.worker, "");
    Object.assign(step, { state: "skipped", reason: e.reason, endedTs: e.ts });
  },
  agent_started(state, e) {
    addToTree(state, e.path, "agent");
  },
  token(state, e) {
    const key = streamKey(e);
    if (!state.streams[key]) {
      const step = stepOf(state, e);
      state.streams[key] = { agent: agentLabel(e.path), text: "", stepKey: step ? step.key : null };
    }
    state.streams[key].text += e.text;
    if (!ROLES.has(e.agent) && (!state.live || state.live !== key)) {
      if (!state.live || state.streams[state.live].done) state.live = key;
    }
    addToTree(state, e.path, "agent");
  },
  model_retry(state, e) {
    // the failed attempt's tokens are void: back to where the agent's last call ended
    const stream = state.streams[streamKey(e)];
    if (stream) stream.text = stream.text.slice(0, stream.settled || 0);
  },
  agent_message(state, e) {
    const key = streamKey(e);
    if (state.streams[key]) state.streams[key].done = true; // stays shown until the next one
    addToTree(state, e.path, "agent");
  },
  tool_called(state, e) {
    const step = stepOf(state, e);
    const agent = agentLabel(e.path.slice(0, -1));
    const known = state.tools.find((t) => t.callId === e.call_id && t.agent === agent);
    if (known) {
      known.args = e.args; // a re-executed step announces its call again; an edit changes it
      return;
    }
    state.tools.push({
      callId: e.call_id,
      agent,
      tool: e.tool,
      args: e.args,
      output: null,
      isError: false,
      state: "running",
      stepKey: step ? step.key : null,
      seq: e.seq,
    });
    addToTree(state, e.path.slice(0, -1), "agent");
  },
  tool_returned(state, e) {
    const call = [...state.tools].reverse().find((t) => t.callId === e.call_id);
    if (call) Object.assign(call, { output: e.output, isError: e.is_error, state: "done" });
    else {
      handlers.tool_called(state, { ...e, args: {} }); // its call came before a replay's start
      Object.assign(state.tools[state.tools.length - 1], { output: e.output, state: "done" });
    }
  },
  handoff(state, e) {
    const team = e.path.slice(0, -1);
    state.control.trail.push({
      from: agentLabel([...team, e.from_agent]),
      to: agentLabel([...team, e.to_agent]),
      reason: e.reason || "",
      seq: e.seq,
    });
    setHolder(state, [...team, e.to_agent]);
    addToTree(state, [...team, e.to_agent], "agent");
  },
  clarification_requested(state, e) {
    state.pending.clarification = { question: e.question };
    state.status = PAUSED[0];
  },
  approval_requested(state, e) {
    const call = state.tools.find((t) => t.callId === e.call_id && t.state === "running");
    if (call) call.state = "approval";
    state.pending.approvals.push({
      requestId: e.request_id,
      agent: e.agent,
      tool: e.tool,
      args: e.args,
      callId: e.call_id,
      stepId: e.step_id,
    });
    state.status = PAUSED[0];
  },
  resumed(state, e) {
    for (const call of state.tools) if (call.state === "approval") call.state = "running";
    state.pending = { clarification: null, approvals: [] };
    state.status = "running";
    if (e.plan_name && !(state.rootTeam && state.teams[state.rootTeam].plan)) {
      // followed from the resume on: the plan comes with it (it is not announced again)
      handlers.plan_created(state, { ...e, type: "plan_created", path: e.path.slice(0, 1) });
    }
    const root = state.rootTeam && state.teams[state.rootTeam];
    for (const id of e.completed_steps || []) {
      if (root && root.steps[id] && root.steps[id].state !== "done") root.steps[id].state = "done";
    }
  },
  usage(state, e) {
    const label = agentLabel(e.path);
    if (!state.agents[label]) {
      state.agents[label] = { label, path: e.path, model: e.model, usage: zeroUsage(), calls: 0 };
    }
    const agent = state.agents[label];
    const stream = state.streams[streamKey(e)];
    if (stream) stream.settled = stream.text.length; // a retry later keeps what this call said
    agent.calls += 1;
    addUsage(agent.usage, e.usage);
    addUsage(state.usage, e.usage);
    chargeSteps(state, e, e.usage);
    addToTree(state, e.path, "agent");
  },
  run_completed(state, e) {
    state.status = e.status;
    state.output = e.output;
    state.live = null;
  },
  run_failed(state, e) {
    state.status = "failed";
    state.error = e.error;
    state.live = null;
  },
  run_cancelled(state, e) {
    state.status = "cancelled";
    state.error = e.reason || "";
    state.live = null;
  },
};

/** One agent's call stream: parallel runs of one nested team differ by the step they work for. */
function streamKey(e) {
  return `${e.path.join("/")}|${e.parent_id || ""}|${e.step_id || ""}`;
}

const HOLDERS = new Set(["token", "usage", "agent_message", "agent_started"]);

/** Fold one event into the state (mutates and returns it; events must come in seq order). */
export function reduce(state, event) {
  if (event.seq && event.seq <= state.lastSeq) return state; // a replayed duplicate
  const handler = handlers[event.type];
  if (handler) handler(state, event);
  if (HOLDERS.has(event.type) && event.path.length > 1 && !ROLES.has(event.agent)) {
    if (!state.control.holder || state.pattern === "single") setHolder(state, event.path);
  }
  state.lastSeq = event.seq || state.lastSeq;
  state.lastTs = event.ts || state.lastTs;
  state.count += 1;
  return state;
}

/** The view state after the first `count` events (a replay position). */
export function replay(events, count = events.length, meta = {}) {
  const state = newRunState(meta);
  for (const event of events.slice(0, count)) reduce(state, event);
  return state;
}

/** True once a run with this status has ended (not merely paused). */
export const isFinished = (status) => !OPEN.includes(status);

/** The root team's plan, in plan order, with dependency edges. */
export function rootPlan(state) {
  const team = state.teams[state.rootTeam];
  return team ? team.order.map((id) => team.steps[id]) : [];
}

/** Nested team instances that made a plan of their own (for nested groups). */
export function nestedTeams(state) {
  return Object.values(state.teams).filter((t) => t.path.length > 1 && t.order.length);
}

/** Step counts by state for a list of steps. */
export function stepCounts(steps) {
  const counts = { pending: 0, running: 0, done: 0, failed: 0, skipped: 0 };
  for (const s of steps) counts[s.state] = (counts[s.state] || 0) + 1;
  return counts;
}

/** The outputs of a step's dependencies, labelled with their ids (the worker's context). */
export function contextOf(state, step) {
  if (step.context) return step.context;
  const team = state.teams[step.key.slice(0, step.key.lastIndexOf("#"))];
  return step.dependsOn
    .map((id) => team && team.steps[id])
    .filter((dep) => dep && dep.output)
    .map((dep) => `### ${dep.id}\n${dep.output}`)
    .join("\n\n");
}

/** Seconds a step has run: final when it ended, else up to `now` (ISO string or ms). */
export function elapsedOf(step, now) {
  if (step.elapsed !== null && step.elapsed !== undefined) return step.elapsed;
  if (!step.startedTs) return null;
  const end = step.endedTs ? Date.parse(step.endedTs) : typeof now === "number" ? now : Date.parse(now);
  return Math.max(0, (end - Date.parse(step.startedTs)) / 1000);
}

/** The text streaming into the chat as the answer (null when none is). */
export function liveText(state) {
  return state.live && state.streams[state.live] ? state.streams[state.live] : null;
}

// The workspace panels, each drawn from the view state alone.

import { append, clear, fmtSeconds, fmtTokens, fmtUsd, h } from "../dom.js";
import { renderMarkdown } from "../markdown.js";
import { contextOf, elapsedOf, nestedTeams, rootPlan, stepCounts } from "../runstate.js";
import { renderGraph } from "./graph.js";

export function renderHeader(els, state, team) {
  els.status.textContent = state ? state.status : "idle";
  els.status.dataset.state = state ? state.status : "idle";
  clear(els.meta);
  if (!state) return;
  const steps = rootPlan(state);
  const counts = stepCounts(steps);
  const total = state.usage.input_tokens + state.usage.output_tokens;
  const item = (label, value, id) => h("span", { id }, `${label} `, h("b", {}, value));
  append(els.meta, [
    item("team", state.team || "…", "meta-team"),
    state.pattern ? item("pattern", state.pattern) : null,
    steps.length ? item("steps", `${counts.done}/${steps.length} done`, "meta-steps") : null,
    item("tokens", fmtTokens(total), "meta-tokens"),
    item("cost", fmtUsd(state.usage.cost_usd), "meta-cost"),
    budgetLine(state, team),
  ]);
}

function budgetLine(state, team) {
  const budget = team && team.budget;
  if (!budget) return null;
  const parts = [];
  if (budget.max_tokens) parts.push(`${fmtTokens(state.usage.input_tokens + state.usage.output_tokens)} / ${fmtTokens(budget.max_tokens)} tokens`);
  if (budget.max_usd) parts.push(`${fmtUsd(state.usage.cost_usd)} / ${fmtUsd(budget.max_usd)}`);
  if (budget.max_model_calls) {
    const calls = Object.values(state.agents).reduce((n, a) => n + a.calls, 0);
    parts.push(`${calls} / ${budget.max_model_calls} model calls`);
  }
  return parts.length ? h("span", { id: "meta-budget" }, "budget ", h("b", {}, parts.join(" · "))) : null;
}

export function renderPlanner(el, state) {
  clear(el);
  if (!state || !state.planner) return;
  const p = state.planner;
  append(el, [
    h("span", { id: "planner-tier" }, "Planner tier ", h("b", {}, p.tier)),
    ` · confidence ${Math.round(p.confidence * 100)}% · `,
    h("span", {}, p.planName),
    p.reasoning ? h("div", {}, p.reasoning) : null,
    p.notes.map((n) => h("div", { class: "muted" }, n)),
  ]);
}

export function renderPlan(els, state, opts) {
  const steps = state ? rootPlan(state) : [];
  const pattern = state && state.pattern;
  const emptyText = !state
    ? "Send a message to run the team; its plan appears here."
    : pattern && pattern !== "workflow"
      ? `A ${pattern} team makes no plan: follow who holds control under Team.`
      : "Planning…";
  renderGraph(els.graph, steps, { ...opts, emptyText, legend: true });
  clear(els.nested);
  for (const team of state ? nestedTeams(state) : []) {
    const box = h("div", { class: "group", "data-team": team.path.join("/") },
      h("h4", {}, `${team.path.slice(1).join(" › ")}`,
        team.parentStep ? h("span", { class: "muted" }, ` — for step ${team.parentStep.split("#").pop()}`) : null,
        team.plan ? h("span", { class: "muted" }, ` · ${team.plan.tier}`) : null));
    const graph = h("div", { class: "graph" });
    box.append(graph);
    renderGraph(graph, team.order.map((id) => team.steps[id]), opts);
    els.nested.append(box);
  }
}

function findStepByKey(state, key) {
  if (!state || !key) return null;
  const at = key.lastIndexOf("#");
  const team = state.teams[key.slice(0, at)];
  return team ? team.steps[key.slice(at + 1)] : null;
}

function block(title, body, cls = "text") {
  if (!body) return null;
  return h("div", { class: "block" }, h("h4", {}, title), h("div", { class: cls }, body));
}

function markdownBlock(title, source, id) {
  if (!source) return null;
  return h("div", { class: "block" }, h("h4", {}, title), h("div", { class: "text md", id }, renderMarkdown(source)));
}

export function renderStepDetail(el, state, key, now, onClose) {
  const step = findStepByKey(state, key);
  el.hidden = !step;
  clear(el);
  if (!step) return;
  const tokens = step.usage.input_tokens + step.usage.output_tokens;
  const elapsed = elapsedOf(step, now);
  const tools = state.tools.filter((t) => t.stepKey === step.key);
  append(el, [
    h("h3", {}, `Step ${step.id}`, h("button", { type: "button", class: "icon", "aria-label": "Close the step", onclick: onClose }, "✕")),
    h("dl", {},
      h("dt", {}, "state"), h("dd", { id: "detail-state" }, step.state),
      h("dt", {}, "worker"), h("dd", {}, step.worker),
      h("dt", {}, "depends on"), h("dd", {}, step.dependsOn.join(", ") || "—"),
      h("dt", {}, "elapsed"), h("dd", {}, elapsed === null ? "—" : fmtSeconds(elapsed)),
      h("dt", {}, "tokens"), h("dd", {}, `${fmtTokens(tokens)} (${fmtUsd(step.usage.cost_usd)})`)),
    block("Task", step.task),
    markdownBlock("Context from previous steps", contextOf(state, step), "detail-context"),
    markdownBlock("Output", step.output, "detail-output"),
    block("Error", step.error, "text error"),
    block("Skipped because", step.reason, "text error"),
    tools.length ? block("Tool calls", tools.map((t) => `${t.tool}(${JSON.stringify(t.args)})`).join("\n")) : null,
  ]);
}

export function renderTeam(els, state) {
  clear(els.control);
  clear(els.tree);
  if (!state) return;
  const { holder, trail } = state.control;
  const working = rootPlan(state).filter((st) => st.state === "running").map((st) => st.worker);
  append(els.control, [
    state.pattern === "workflow"
      ? h("div", { id: "holder" }, "Working now: ", h("b", {}, working.join(", ") || "—"))
      : h("div", { id: "holder" }, "Control: ", h("b", {}, holder || "—")),
    trail.length
      ? h("ol", { class: "trail", id: "trail" },
          trail.map((t) => h("li", {}, `${t.from} → ${t.to}`, t.reason ? h("span", { class: "muted" }, ` — ${t.reason}`) : null)))
      : null,
  ]);
  const active = holder ? holder.split(" › ") : [];
  const draw = (node, trailPath) => {
    const kids = Object.values(node.children);
    if (!kids.length) return null;
    return h("ul", {}, kids.map((child) => {
      const path = [...trailPath, child.name];
      const isActive = active.length && path.join(" › ") === active.join(" › ");
      const usage = state.agents[path.join(" › ")];
      return h("li", { "data-kind": child.kind },
        h("span", { class: isActive ? "active" : "" },
          child.name,
          h("span", { class: "kind" }, child.kind === "team" ? "team" : "agent"),
          usage ? h("span", { class: "kind" }, `${fmtTokens(usage.usage.input_tokens + usage.usage.output_tokens)} tok`) : null),
        draw(child, path));
    }));
  };
  els.tree.append(h("div", {}, h("b", {}, state.tree.name || state.team || ""), draw(state.tree, [])));
}

export function renderTools(els, state, open) {
  clear(els.tools);
  const tools = state ? state.tools : [];
  els.count.textContent = tools.length ? `(${tools.length})` : "";
  if (!tools.length) {
    els.tools.append(h("p", { class: "muted small" }, "No tool calls yet."));
    return;
  }
  for (const t of tools) {
    const details = h("details", { "data-call": t.callId },
      h("summary", {}, h("b", {}, t.tool), h("span", { class: "muted" }, t.agent),
        h("span", { class: `state ${t.isError ? "err" : ""}` }, { running: "running…", approval: "waiting for approval" }[t.state] || (t.isError ? "error" : "done"))),
      h("div", { class: "small muted" }, "arguments"),
      h("pre", {}, JSON.stringify(t.args, null, 2)),
      t.output !== null ? [h("div", { class: "small muted" }, "result"), h("pre", { class: t.isError ? "err" : "" }, t.output)] : null);
    details.open = open.has(t.callId);
    details.addEventListener("toggle", () => (details.open ? open.add(t.callId) : open.delete(t.callId)));
    els.tools.append(details);
  }
}

export function renderUsage(el, state) {
  clear(el);
  if (!state) return;
  const rows = Object.values(state.agents);
  append(el, [
    h("table", { id: "usage-table" },
      h("thead", {}, h("tr", {}, ["agent", "calls", "in", "out", "USD"].map((c) => h("th", {}, c)))),
      h("tbody", {}, rows.map((a) => h("tr", {},
        h("td", {}, a.label), h("td", {}, a.calls), h("td", {}, a.usage.input_tokens),
        h("td", {}, a.usage.output_tokens), h("td", {}, fmtUsd(a.usage.cost_usd))))),
      h("tfoot", {}, h("tr", {}, h("td", {}, "total"), h("td", {}, rows.reduce((n, a) => n + a.calls, 0)),
        h("td", {}, state.usage.input_tokens), h("td", {}, state.usage.output_tokens),
        h("td", { id: "usage-total-usd" }, fmtUsd(state.usage.cost_usd))))),
  ]);
}

/** A server timestamp (UTC; SQLite returns it without its offset) as a Date. */
const utc = (iso) => new Date(/(Z|[+-]\d\d:?\d\d)$/.test(iso) ? iso : `${iso}Z`);

export function renderRunList(el, runs, activeId, onOpen) {
  clear(el);
  if (!runs.length) {
    el.append(h("li", { class: "muted small" }, "No runs yet."));
    return;
  }
  for (const run of runs) {
    el.append(h("li", {}, h("button", {
      type: "button", class: run.run_id === activeId ? "active" : "", "data-run": run.run_id,
      onclick: () => onOpen(run.run_id),
    }, h("span", { class: "input" }, run.input), h("span", { class: "status", "data-state": run.status }, run.status),
      h("span", { class: "small muted" }, utc(run.created_at).toLocaleString()),
      h("span", { class: "small muted" }, run.planner_tier ? `tier ${run.planner_tier}` : ""))));
  }
}

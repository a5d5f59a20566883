// The plan as a graph: one node per step, edges from depends_on, layers by depth, coloured by
// state, with worker, elapsed time and tokens. Nodes are focusable; Enter or a click selects.

import { clear, fmtSeconds, fmtTokens, h, s } from "../dom.js";
import { layoutPlan } from "../layout.js";
import { elapsedOf } from "../runstate.js";

const STATES = ["pending", "running", "done", "failed", "skipped"];

function shorten(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function edgePath(layout, edge) {
  const a = layout.nodes[edge.from];
  const b = layout.nodes[edge.to];
  const x1 = a.x + layout.nodeWidth / 2;
  const y1 = a.y + layout.nodeHeight;
  const x2 = b.x + layout.nodeWidth / 2;
  const y2 = b.y;
  const mid = (y1 + y2) / 2;
  return `M${x1},${y1} C${x1},${mid} ${x2},${mid} ${x2},${y2}`;
}

function node(step, pos, layout, opts) {
  const elapsed = elapsedOf(step, opts.now);
  const tokens = step.usage.input_tokens + step.usage.output_tokens;
  const facts = [step.worker, elapsed !== null ? fmtSeconds(elapsed) : "", tokens ? `${fmtTokens(tokens)} tok` : ""];
  const select = () => opts.onSelect(step.key);
  return s(
    "g",
    {
      class: `node${opts.selected === step.key ? " selected" : ""}`,
      transform: `translate(${pos.x},${pos.y})`,
      "data-state": step.state,
      "data-step": step.id,
      tabindex: "0",
      role: "button",
      "aria-label": `Step ${step.id}, ${step.state}, worker ${step.worker}`,
      onclick: select,
      onkeydown: (e) => {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          select();
        }
      },
    },
    s("title", {}, `${step.id} (${step.state})\n${step.task}`),
    s("rect", { width: layout.nodeWidth, height: layout.nodeHeight, rx: 8 }),
    s("text", { class: "id", x: 10, y: 20 }, shorten(step.id, 26)),
    s("text", { class: "sub", x: 10, y: 38 }, shorten(facts.filter(Boolean).join(" · "), 34)),
    s("text", { class: "sub", x: 10, y: 54 }, step.state),
  );
}

/** Draw `steps` (one team's plan) into `container`. */
export function renderGraph(container, steps, opts) {
  clear(container);
  if (!steps.length) {
    container.append(h("p", { class: "muted small empty" }, opts.emptyText || "No plan yet."));
    return;
  }
  const layout = layoutPlan(steps);
  const byId = Object.fromEntries(steps.map((st) => [st.id, st]));
  const pad = 6;
  const svg = s("svg", {
    width: layout.width + pad * 2,
    height: layout.height + pad * 2,
    viewBox: `${-pad} ${-pad} ${layout.width + pad * 2} ${layout.height + pad * 2}`,
    "data-steps": steps.length,
  });
  for (const edge of layout.edges) {
    const live = byId[edge.to].state === "running";
    svg.append(s("path", { class: `edge${live ? " live" : ""}`, d: edgePath(layout, edge) }));
  }
  for (const step of steps) svg.append(node(step, layout.nodes[step.id], layout, opts));
  container.append(svg);
  if (opts.legend) {
    container.append(
      h("div", { class: "legend", "aria-hidden": "true" },
        STATES.map((st) => h("span", {}, h("i", { class: `sw-${st}` }), st))),
    );
  }
}

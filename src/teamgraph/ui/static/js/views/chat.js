// The conversation: stored messages, the answer being written, and what a paused run asks.

import { clear, h, shortIds } from "../dom.js";
import { renderMarkdown } from "../markdown.js";
import { liveText, rootPlan, stepCounts } from "../runstate.js";
import { PAUSED, STOPPED } from "../vocab.js";

function bubble(role, content, extra = {}) {
  const body = role === "user" ? h("div", { class: "body" }, content) : h("div", { class: "body md" }, renderMarkdown(content));
  return h("article", { class: `msg ${role}`, ...extra },
    h("div", { class: "who" }, role === "user" ? "you" : extra.who || "team"), body);
}

/** Stored messages, then the current run's live part (when it is not stored yet). */
export function renderMessages(el, messages, state, showLive) {
  const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
  clear(el);
  if (!messages.length && !state) {
    el.append(h("div", { class: "empty" }, h("p", {}, "Ask the team something. Its plan, agents, tool calls and costs appear in the workspace as it works.")));
  }
  for (const m of messages) {
    el.append(bubble(m.role, m.content, { "data-run": m.run_id || null }));
  }
  if (state && showLive) el.append(...liveBubbles(state, messages));
  if (atBottom || showLive) el.scrollTop = el.scrollHeight;
}

function liveBubbles(state, messages) {
  const out = [];
  const asked = messages.some((m) => m.role === "user" && m.run_id === state.runId);
  if (!asked && state.input) out.push(bubble("user", state.input, { "data-live": "input" }));
  const answered = messages.some((m) => m.role === "assistant" && m.run_id === state.runId);
  if (answered) return out;
  if (state.output) {
    out.push(bubble("assistant", state.output, { id: "answer", "data-run": state.runId, who: `${state.team} · ${state.status}` }));
  } else if (state.error && STOPPED.includes(state.status)) {
    out.push(h("article", { class: "msg assistant", id: "answer" }, h("div", { class: "who" }, state.status), h("div", { class: "body error" }, shortIds(state.error))));
  } else if (!PAUSED.includes(state.status)) {
    const stream = liveText(state);
    const steps = rootPlan(state);
    const counts = stepCounts(steps);
    const progress = steps.length ? `${counts.done + counts.failed + counts.skipped} of ${steps.length} steps finished` : "working…";
    out.push(h("article", { class: "msg assistant streaming", id: "live" },
      h("div", { class: "who" }, stream ? `${stream.agent} is writing` : state.team || "team", h("span", { class: "progress" }, progress)),
      h("div", { class: "body md" }, stream ? renderMarkdown(stream.text) : "")));
  }
  return out;
}

/** Cards for a paused run: a question to answer or tool calls to approve, reject or edit. */
export function renderPending(el, state, actions) {
  const paused = state && PAUSED.includes(state.status);
  // redraw only when what is asked changes, so nothing typed into a card is lost
  const signature = paused ? JSON.stringify([state.runId, state.pending, Object.keys(actions.decisions)]) : "";
  if (el.dataset.signature === signature) return;
  el.dataset.signature = signature;
  clear(el);
  if (!paused) return;
  const { clarification, approvals } = state.pending;
  if (clarification) {
    const input = h("textarea", { id: "clarify-answer", rows: 2, "aria-label": "Your answer", maxlength: 20000 });
    const hint = h("p", { id: "clarify-hint", class: "error small", role: "alert" });
    const form = h("form", { class: "ask", id: "clarification" },
      h("h3", {}, "The team asks"),
      h("p", { id: "clarify-question" }, clarification.question),
      input,
      hint,
      h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Answer")));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const text = input.value.trim();
      hint.textContent = text ? "" : "Write an answer first.";
      if (text) actions.answer(text);
      else input.focus();
    });
    // Enter sends, as in the message box; Shift+Enter is a new line; an IME's Enter composes
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
    input.addEventListener("input", () => { hint.textContent = ""; });
    el.append(form);
    queueMicrotask(() => input.focus());
  }
  const decided = actions.decisions;
  for (const a of approvals) {
    if (decided[a.requestId]) continue;
    el.append(approvalCard(a, actions));
  }
}

function approvalCard(a, actions) {
  const comment = h("input", { class: "comment", placeholder: "Comment for the agent (optional)", maxlength: 2000, "aria-label": "Comment" });
  const args = h("textarea", { class: "args", rows: 4, "aria-label": "Arguments (JSON)", hidden: true }, JSON.stringify(a.args, null, 2));
  const error = h("p", { class: "error small" });
  const decide = (action) => {
    const decision = { action };
    if (comment.value.trim()) decision.comment = comment.value.trim();
    if (action === "edit") {
      try {
        decision.args = JSON.parse(args.value);
      } catch (e) {
        error.textContent = `The arguments are not valid JSON: ${e.message}`;
        return;
      }
      if (typeof decision.args !== "object" || decision.args === null || Array.isArray(decision.args)) {
        error.textContent = "The arguments must be a JSON object.";
        return;
      }
    }
    actions.decide(a.requestId, decision);
  };
  const editButton = h("button", { type: "button", class: "edit" }, "Edit arguments");
  editButton.addEventListener("click", () => {
    if (args.hidden) {
      args.hidden = false;
      editButton.textContent = "Approve with these arguments";
      args.focus();
    } else decide("edit");
  });
  return h("div", { class: "ask approval", "data-request": a.requestId },
    h("h3", {}, `Approve ${a.tool}?`),
    h("p", { class: "small" }, `${a.agent} wants to call `, h("b", {}, a.tool), a.stepId ? ` in step ${a.stepId}` : "", ":"),
    h("pre", {}, JSON.stringify(a.args, null, 2)),
    args, comment, error,
    h("div", { class: "row" },
      h("button", { type: "button", class: "primary approve", onclick: () => decide("approve") }, "Approve"),
      h("button", { type: "button", class: "danger reject", onclick: () => decide("reject") }, "Reject"),
      editButton));
}

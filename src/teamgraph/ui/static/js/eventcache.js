// A live run's events kept in the tab's session storage across a reload, so the reloaded page
// goes on with `Last-Event-ID` instead of replaying the run from its first event.

const CACHE = "teamgraph.events.";

/** Keep a live run's events across a reload of the page (this tab only). */
export function saveEvents(view) {
  try {
    sessionStorage.setItem(CACHE + view.runId, JSON.stringify(view.events));
  } catch {
    /* storage full: the next load replays the run from its first event instead */
  }
}

export function cachedEvents(runId) {
  const key = CACHE + runId;
  let events = [];
  try {
    events = JSON.parse(sessionStorage.getItem(key) || "[]");
  } catch {
    events = [];
  }
  sessionStorage.removeItem(key);
  // what the tab received from the run's first event on, in order (seqs jump after a resume)
  const whole =
    Array.isArray(events) &&
    events.length > 0 &&
    events[0].type === "run_started" &&
    events.every((e, i) => e && Number.isInteger(e.seq) && (i === 0 || e.seq > events[i - 1].seq));
  return whole ? events : [];
}

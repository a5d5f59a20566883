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
  const whole = Array.isArray(events) && events.every((e, i) => e && e.seq === i + 1);
  return whole ? events : [];
}

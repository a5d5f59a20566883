// Drives langchain-ai/agent-chat-ui (built from its repository, unchanged) in Chromium against
// `teamgraph serve`, and prints a PASS/FAIL checklist: the procedure is in docs/langgraph.md.
// Needs playwright-core (npm) and Chromium; API, UI, KEY_FILE and CHROMIUM may be set.
import fs from "node:fs";
import { chromium } from "playwright-core";

const API = process.env.API ?? "http://127.0.0.1:8765";
const UI = process.env.UI ?? "http://localhost:3000";
const key = fs.readFileSync(process.env.KEY_FILE ?? "teamgraph-key.txt", "utf8").trim();
const H = { "x-api-key": key, "content-type": "application/json" };
const results = [];
const check = (name, ok, note = "") => {
  results.push({ name, ok, note });
  console.log(`${ok ? "PASS" : "FAIL"} ${name}${note ? " — " + note : ""}`);
};
const post = async (path, body) =>
  (await fetch(API + path, { method: "POST", headers: H, body: JSON.stringify(body) })).json();

// what the sidebar must not list: an OpenAI-route session and a thread of another team
await post("/v1/chat/completions", { model: "notebook", messages: [{ role: "user", content: "hello" }] });
const other = await post("/langgraph/threads", {});
await post(`/langgraph/threads/${other.thread_id}/runs/wait`, {
  assistant_id: "research",
  input: { messages: [{ role: "user", content: "Compare Redis and Memcached" }] },
});

const chromiumPath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
await ctx.addInitScript((k) => localStorage.setItem("lg:chat:apiKey", k), key);
const page = await ctx.newPage();
const errors = [];
const searches = [];
page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
page.on("response", async (r) => {
  if (r.url().startsWith(API) && r.status() >= 400) errors.push(`${r.status()} ${r.request().method()} ${r.url()}`);
  if (r.url().endsWith("/threads/search")) searches.push(await r.json().catch(() => null));
});
const shot = (name) => page.screenshot({ path: `./${name}.png`, fullPage: true });
const count = (re) => page.getByText(re).count();
const until = async (fn, ms = 60000) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return true;
    await page.waitForTimeout(250);
  }
  return false;
};
async function send(text) {
  const box = page.getByPlaceholder("Type your message...");
  await box.fill(text);
  await box.press("Enter");
}
const threadId = () => new URL(page.url()).searchParams.get("threadId");
const state = async () =>
  (await fetch(`${API}/langgraph/threads/${threadId()}/state`, { headers: H })).json();

await page.goto(UI);
await page.waitForTimeout(5000);
check("no connection error", (await count("Failed to connect to LangGraph server")) === 0);

// send, stream, tool-call cards
let streamed = false;
page.on("response", (r) => {
  if (r.url().endsWith("/runs/stream") && (r.headers()["content-type"] ?? "").startsWith("text/event-stream")) streamed = true;
});
await send("Find how Redis persists data");
check("send: the answer shows", await until(async () => (await count(/append-only/i)) > 0));
check("stream: the run came over /runs/stream (SSE)", streamed);
check("tool-call card (search_docs)", (await count("search_docs")) > 0);
await shot("1-answer");

// a clarifying question, shown and answered
const before = await count(/append-only/i);
await send("help");
check("question shown", await until(async () => (await count(/Could you say more/)) > 0));
const box = page.locator("div.rounded-lg", { has: page.getByText("Human Interrupt") });
check(
  "question readable in the interrupt card",
  (await box.getByText(/Could you say more/).count()) > 0,
  "agent-chat-ui tables the interrupt value: the question must be a field of it, not a bare string",
);
await shot("2-question");
await send("How Redis persists data");
check("question answered", await until(async () => (await count(/append-only/i)) > before));

// approvals: approve, reject, edit
async function approval() {
  await send("Save a note: Redis keeps data in memory");
  return until(async () => (await page.getByRole("button", { name: "Approve", exact: true }).count()) > 0);
}
const saved = () => count(/saved note/);
check("approval shown (approve / edit / reject)", await approval());
check("approval offers reject", (await page.getByRole("button", { name: "Submit rejection" }).count()) > 0);
await shot("3-approval");
let n = await saved();
await page.getByRole("button", { name: "Approve", exact: true }).click();
check("approve works", await until(async () => (await saved()) > n));

check("second approval shown", await approval());
await page.getByPlaceholder("Share feedback with the agent...").fill("not now");
await page.getByRole("button", { name: "Submit rejection" }).click();
check("reject works", await until(async () => (await count(/rejected/i)) > 0));
await shot("4-rejected");

check("third approval shown", await approval());
n = await saved();
const area = page.locator("textarea").filter({ hasText: "Redis keeps data in memory" }).first();
await area.fill("Edited: Redis persists with AOF");
await page.getByRole("button", { name: "Submit", exact: true }).click();
const edited = await until(async () => (await saved()) > n);
const calls = (await state()).values.messages.flatMap((m) => m.tool_calls ?? []);
check("edit works", edited && calls.some((c) => c.args?.text === "Edited: Redis persists with AOF"));
await shot("5-edited");

// thread list limited to the assistant, history after reload
const listed = searches.filter(Boolean).at(-1) ?? [];
const ids = listed.map((t) => t.thread_id);
check(
  "thread list limited to the assistant",
  ids.includes(threadId()) && !ids.includes(other.thread_id) && listed.every((t) => t.metadata.graph_id === "notebook"),
  `${ids.length} listed`,
);
await page.reload();
check("history after reload", await until(async () => (await count("Find how Redis persists data")) > 0 && (await count("search_docs")) > 0));
await shot("6-reloaded");
check("no error responses or console errors", errors.length === 0, errors.slice(0, 5).join(" | "));
await browser.close();
fs.writeFileSync("./results.json", JSON.stringify(results, null, 2));
process.exitCode = results.every((r) => r.ok) ? 0 : 1;

// What agent-chat-ui's SDK (@langchain/langgraph-sdk) sends and reads, against teamgraph:
// the run id from Content-Location (onRunCreated), the interrupt where useStream looks once a
// stream has ended (history[0].tasks[-1].interrupts), LangChain's human-in-the-loop decisions,
// tool calls in the messages, the sidebar's search. Run by tests/api/test_agent_protocol_js.py.
const assert = require("node:assert/strict");
const { Client } = require("@langchain/langgraph-sdk");

async function drain(stream) {
  const parts = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

async function main() {
  const client = new Client({ apiUrl: `${process.env.BASE}/langgraph`, apiKey: process.env.KEY });
  const thread = await client.threads.create({ metadata: { source: "js" } });
  let runId = null;
  const ask = { type: "human", content: [{ type: "text", text: "Save a note: Redis keeps data in memory" }] };
  const first = await drain(
    client.runs.stream(thread.thread_id, "notebook", {
      input: { messages: [ask] },
      streamMode: ["values"],
      streamSubgraphs: true,
      streamResumable: true,
      onRunCreated: (meta) => {
        runId = meta.run_id;
      },
    }),
  );
  assert.ok(runId, "onRunCreated: the run id from Content-Location");
  assert.ok(first.at(-1).data.__interrupt__, "the last values part carries __interrupt__");

  let [head] = await client.threads.getHistory(thread.thread_id, { limit: 10 });
  assert.deepEqual(head.next, ["notebook"]);
  const interrupt = head.tasks.at(-1).interrupts.at(-1);
  assert.equal(interrupt.value.action_requests[0].name, "save_note");
  assert.deepEqual(interrupt.value.review_configs[0].allowed_decisions, ["approve", "edit", "reject"]);

  const edited = { name: "save_note", args: { text: "Edited by the JS client" } };
  await drain(
    client.runs.stream(thread.thread_id, "notebook", {
      command: { resume: { decisions: [{ type: "edit", edited_action: edited }] } },
      streamMode: ["values"],
    }),
  );
  [head] = await client.threads.getHistory(thread.thread_id, { limit: 10 });
  assert.deepEqual(head.tasks, []);
  const messages = head.values.messages;
  const call = messages.find((m) => m.tool_calls?.length).tool_calls[0];
  const result = messages.find((m) => m.type === "tool");
  assert.equal(result.tool_call_id, call.id);
  assert.equal(call.args.text, "Edited by the JS client");
  assert.match(result.content, /saved note/);

  const listed = await client.threads.search({ metadata: { graph_id: "notebook" }, limit: 100 });
  assert.deepEqual(listed.map((t) => t.thread_id), [thread.thread_id]);
  assert.equal(listed[0].metadata.source, "js");
  const run = await client.runs.get(thread.thread_id, runId);
  assert.equal(run.status, "success");
  console.log("ok");
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
const key = process.env.TEAMGRAPH_API_KEY;
const url = new URL(process.env.TEAMGRAPH_URL + "/mcp");
const checks = {};
async function connect(elicit) {
  const client = new Client({ name: "js", version: "1" }, { capabilities: elicit ? { elicitation: {} } : {} });
  if (elicit) client.setRequestHandler(ElicitRequestSchema, elicit);
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { "x-api-key": key } } }));
  return client;
}
const c = await connect();
const tools = (await c.listTools()).tools.map(t => t.name);
checks.list = tools.includes("research");
const progress = [];
const r = await c.callTool({ name: "research", arguments: { request: "How Redis persists data" } }, undefined, { onprogress: p => progress.push(p.message) });
checks.call = r.content[0].text.includes("append-only file");
checks.progress = progress.some(m => m && m.startsWith("> Plan"));
const paused = await c.callTool({ name: "notebook", arguments: { request: "help" } });
checks.paused_text = paused.content[0].text.includes("run_id");
const go = await c.callTool({ name: "notebook", arguments: { request: "How Redis persists data", run_id: paused.structuredContent.run_id } });
checks.followup = go.content[0].text.includes("append-only file");
await c.close();
const e = await connect(async req => ({ action: "accept", content: { decision: "approve" } }));
const saved = await e.callTool({ name: "notebook", arguments: { request: "Save a note: Redis keeps data" } });
checks.elicited_approval = saved.content[0].text.includes("saved note");
await e.close();
console.log(JSON.stringify(checks));

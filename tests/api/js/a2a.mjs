import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";
import crypto from "crypto";
const key = process.env.TEAMGRAPH_API_KEY;
const base = process.env.TEAMGRAPH_URL;
const authFetch = (url, init = {}) => { const h = new Headers(init.headers || {}); h.set("x-api-key", key); return fetch(url, { ...init, headers: h }); };
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
}));
const msg = (text, task) => ({ message: { messageId: crypto.randomUUID(), role: Role.ROLE_USER, parts: [{ content: { $case: "text", value: text }, filename: "", mediaType: "" }], taskId: task?.id ?? "", contextId: task?.contextId ?? "", metadata: undefined, extensions: [], referenceTaskIds: [] } });
const checks = {};
const research = await factory.createFromUrl(`${base}/a2a/research/`);
let taskId = "", chunks = 0, working = 0;
for await (const r of research.sendMessageStream(msg("How Redis persists data"))) {
  taskId = taskId || r.payload?.value?.id || r.payload?.value?.taskId || "";
  if (r.payload?.$case === "artifactUpdate") chunks++;
  if (r.payload?.$case === "statusUpdate") working++;
}
const done = await research.getTask({ id: taskId, tenant: "", historyLength: undefined });
checks.stream = done.status.state === TaskState.TASK_STATE_COMPLETED && JSON.stringify(done.artifacts).includes("append-only file") && chunks > 0;
const notebook = await factory.createFromUrl(`${base}/a2a/notebook/`);
const sent = await notebook.sendMessage(msg("help"));
const t = sent.task ?? sent.payload?.value ?? sent;
checks.input_required = t.status.state === TaskState.TASK_STATE_INPUT_REQUIRED;
const answered = await notebook.sendMessage(msg("How Redis persists data", t));
const a = answered.task ?? answered.payload?.value ?? answered;
checks.continued = a.id === t.id && a.status.state === TaskState.TASK_STATE_COMPLETED;
const paused = await notebook.sendMessage(msg("help"));
const p = paused.task ?? paused.payload?.value ?? paused;
const cancelled = await notebook.cancelTask({ id: p.id, tenant: "", metadata: undefined });
checks.cancel = cancelled.status.state === TaskState.TASK_STATE_CANCELED;
console.log(JSON.stringify(checks));

import OpenAI from "openai";
const client = new OpenAI({ baseURL: process.env.TEAMGRAPH_URL + "/v1", apiKey: process.env.TEAMGRAPH_API_KEY, maxRetries: 0 });
const checks = {};
checks.retrieve = (await client.models.retrieve("research")).id === "research";
try { await client.models.retrieve("nope"); } catch (e) { checks.not_found = e.status === 404 && e.code === "model_not_found"; }
const ask = [{ role: "user", content: "Save a note: Redis keeps data" }];
const first = await client.chat.completions.create({ model: "notebook", messages: ask });
const notice = first.choices[0].message.content;
checks.notice = notice.includes('Reply "approve"');
const stream = await client.chat.completions.create({ model: "notebook", stream: true, messages: [...ask, { role: "assistant", content: notice }, { role: "user", content: "approve" }] });
let text = ""; for await (const c of stream) text += c.choices[0]?.delta?.content ?? "";
checks.approved = text.includes("saved note");
try { await client.chat.completions.create({ model: "research", messages: [{ role: "user", content: "x".repeat(2_000_000) }] }); } catch (e) { checks.too_large = e.status === 413 && e.code === "request_too_large"; }
console.log(JSON.stringify(checks));

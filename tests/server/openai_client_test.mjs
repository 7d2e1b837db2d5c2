// The official `openai` npm package against `kvedge serve`: models list, a chat completion without and
// with streaming (the same greedy text both ways, usage and the kvedge fields), a second turn that
// reuses the first one's tokens, and the SDK's typed errors (wrong API key, bad request).
// Usage: node openai_client_test.mjs --kvedge BINARY -- SERVE_MODEL_ARGS...   (exit 77: packages missing)
import { check, checkEq, parseArgs, requireTestPackage, runSteps, startServer } from "./serve_process.mjs";

const { OpenAI } = requireTestPackage("openai");
const opts = parseArgs();
const apiKey = "kvedge-test-key-7f3a";
const server = await startServer(opts.kvedge, [...opts.serveArgs, "--api-key", apiKey]);
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0, timeout: 120000 });
let model = null;
let first = null;  // the first turn: {messages, reply}

function checkKvedge(k, where) {
  check(k && typeof k === "object", `${where}: no kvedge object`);
  check(typeof k.session === "string" && k.session.length > 0, `${where}: kvedge.session ${JSON.stringify(k.session)}`);
  for (const f of ["cached_tokens", "tokens_in_cache", "kv_bytes", "kv_budget_bytes"]) {
    check(Number.isInteger(k[f]) && k[f] >= 0, `${where}: kvedge.${f} = ${JSON.stringify(k[f])}`);
  }
  check(k.tokens_in_cache > 0 && k.kv_bytes > 0, `${where}: an empty cache after a reply: ${JSON.stringify(k)}`);
  check(k.kv_bytes <= k.kv_budget_bytes, `${where}: kv_bytes over the budget: ${JSON.stringify(k)}`);
  check(typeof k.ttft_s === "number" && k.ttft_s >= 0, `${where}: kvedge.ttft_s ${JSON.stringify(k.ttft_s)}`);
}

// Long enough that the reply outlasts the server's first read of it: the server sends the text that is
// ready at each read, so a short reply from this tiny model can come whole in one chunk.
const kReplyTokens = 160;
const messages = [{ role: "system", content: "You tell short stories." },
                  { role: "user", content: "Once upon a time there was a cat." }];
const steps = [
  ["models.list", async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    check(ids.length >= 1 && ids.every((id) => typeof id === "string" && id), `model ids ${JSON.stringify(ids)}`);
    model = ids[0];
  }],
  ["chat.completions.create, not streaming", async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: kReplyTokens, temperature: 0 });
    checkEq(r.object, "chat.completion", "object");
    checkEq(r.choices.length, 1, "choices");
    const c = r.choices[0];
    checkEq(c.message.role, "assistant", "role");
    check(typeof c.message.content === "string" && c.message.content.length > 0, `content ${JSON.stringify(c.message.content)}`);
    check(["stop", "length"].includes(c.finish_reason), `finish_reason ${c.finish_reason}`);
    check(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0 && r.usage.completion_tokens <= kReplyTokens,
          `usage ${JSON.stringify(r.usage)}`);
    checkEq(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens, "total_tokens");
    checkKvedge(r.kvedge, "response");
    first = { reply: c.message.content, usage: r.usage, finish: c.finish_reason };
  }],
  ["chat.completions.create, streaming: the same greedy text in chunks", async () => {
    const stream = await client.chat.completions.create({ model, messages, max_tokens: kReplyTokens, temperature: 0, stream: true,
                                                          stream_options: { include_usage: true } });
    let text = "", pieces = 0, finish = null, kvedge = null, usage = null;
    for await (const chunk of stream) {
      checkEq(chunk.object, "chat.completion.chunk", "chunk object");
      const c = chunk.choices[0];
      if (c?.delta?.content) { text += c.delta.content; pieces++; }
      if (c?.finish_reason) finish = c.finish_reason;
      if (chunk.kvedge) kvedge = chunk.kvedge;
      if (chunk.usage) usage = chunk.usage;
    }
    check(pieces >= 2, `the reply came in ${pieces} piece(s), not streamed: ${JSON.stringify(text)} (whole: ${JSON.stringify(first.reply)})`);
    checkEq(text, first.reply, "streamed text vs the non-streamed reply (greedy)");
    checkEq(finish, first.finish, "finish_reason");
    checkKvedge(kvedge, "final chunk");
    check(usage !== null, "no usage in the stream (stream_options.include_usage)");
    checkEq(usage.completion_tokens, first.usage.completion_tokens, "streamed completion_tokens");
  }],
  ["a second turn continues the conversation's session", async () => {
    const next = [...messages, { role: "assistant", content: first.reply }, { role: "user", content: "What did the cat do next?" }];
    const r = await client.chat.completions.create({ model, messages: next, max_tokens: 8, temperature: 0 });
    const cached = r.usage.prompt_tokens_details?.cached_tokens;
    check(Number.isInteger(cached) && cached > 0, `usage.prompt_tokens_details.cached_tokens = ${cached}`);
    check(cached < r.usage.prompt_tokens, `cached ${cached} of ${r.usage.prompt_tokens} prompt tokens`);
    checkKvedge(r.kvedge, "second turn");
    checkEq(r.kvedge.cached_tokens, cached, "kvedge.cached_tokens vs usage");
  }],
  ["a wrong API key is the SDK's AuthenticationError", async () => {
    const bad = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "not-the-key", maxRetries: 0 });
    let err = null;
    try { await bad.chat.completions.create({ model, messages, max_tokens: 4 }); } catch (e) { err = e; }
    check(err instanceof OpenAI.AuthenticationError, `got ${err?.constructor?.name}: ${err?.message}`);
    checkEq(err.status, 401, "status");
    check(typeof err.error?.message === "string" && err.error.message.length > 0, `error body ${JSON.stringify(err.error)}`);
  }],
  ["a bad request is the SDK's BadRequestError", async () => {
    let err = null;
    try { await client.chat.completions.create({ model, messages: "not a list", max_tokens: 4 }); } catch (e) { err = e; }
    check(err instanceof OpenAI.BadRequestError, `got ${err?.constructor?.name}: ${err?.message}`);
    checkEq(err.status, 400, "status");
    check(/messages/.test(err.error?.message ?? ""), `the error does not name 'messages': ${JSON.stringify(err.error)}`);
  }],
];
process.exit(await runSteps(steps, server));

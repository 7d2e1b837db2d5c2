// Load test for `kvedge serve`, loopback only, with its own bounded loop: N clients for T seconds, each
// holding conversations and mixing streamed and whole chat completions, streams cancelled mid-reply,
// bad requests and the read-only endpoints. Passes when: no 5xx but 503 (429/503 carry Retry-After),
// every bad request got a 4xx, no request hung, /health is ok afterwards, every conversation's last
// session is still listed by /v1/sessions and continues with cached tokens, the peak RSS (VmHWM) stays
// within --kv-budget-total + the model file + 64 MiB, and SIGTERM ends the server with exit code 0.
// Needs no npm package (Node's own fetch).
// Usage: node load_test.mjs --kvedge BINARY [--clients 16] [--seconds 10] [--budget-mib 8]
//            [--rss-check on|off] [--seed 1] -- SERVE_MODEL_ARGS...     (-m MODEL must be among them)
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs, startServer } from "./serve_process.mjs";

const opts = parseArgs();
const clients = Number(opts.clients ?? 16);
const seconds = Number(opts.seconds ?? 10);
const budgetMiB = Number(opts.budgetMib ?? 8);
const rssCheck = (opts.rssCheck ?? "on") === "on";
const seed = Number(opts.seed ?? 1);
const requestTimeoutMs = 180000;  // a request still unanswered after this is a stuck worker
const modelIdx = opts.serveArgs.indexOf("-m");
if (modelIdx < 0) throw new Error("the serve arguments need -m MODEL (its size enters the RSS bound)");
const modelBytes = statSync(opts.serveArgs[modelIdx + 1]).size;

const sessionDir = mkdtempSync(join(tmpdir(), "kvedge-load-"));
const server = await startServer(opts.kvedge, [...opts.serveArgs, "--kv-budget-total", `${budgetMiB}MiB`,
                                               "--session-dir", sessionDir]);
const base = server.url;
const failures = [];
const fail = (what) => { if (failures.length < 50) failures.push(what); };

// Deterministic per-client randomness (mulberry32).
function rng(s) {
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const openings = ["Once upon a time", "Tell me about the little dog.", "Lily went to the park.", "Why is the sky blue?",
                  "Tom had a red ball.", "Write a story about a cat and a fish.", "What happened next?", "The sun was hot."];

const stats = { status: {}, kinds: {}, tokens: 0, ttft: [], latency: [], cancelled: 0, retryAfterMissing: 0 };
const count = (map, key) => { map[key] = (map[key] ?? 0) + 1; };

async function readSse(resp, onChunk) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "", done = false;
  while (!done) {
    const r = await reader.read();
    done = r.done;
    buf += decoder.decode(r.value ?? new Uint8Array(), { stream: !done });
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, end); buf = buf.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return true;
        if (onChunk(JSON.parse(data)) === false) { await reader.cancel(); return false; }
      }
    }
  }
  return false;
}

// Sends one request; returns the Response or null after counting a 429/503 (and honouring Retry-After).
async function call(kind, path, init, signal) {
  count(stats.kinds, kind);
  const resp = await fetch(base + path, { ...init, signal });
  count(stats.status, resp.status);
  if (resp.status >= 500 && resp.status !== 503) fail(`${kind}: HTTP ${resp.status}: ${await resp.text()}`);
  if (resp.status === 429 || resp.status === 503) {
    const retry = resp.headers.get("retry-after");
    if (!retry) stats.retryAfterMissing++;
    await resp.arrayBuffer();
    await new Promise((r) => setTimeout(r, Math.min(1000, 1000 * (Number(retry) || 1))));
    return null;
  }
  return resp;
}
const json = (body) => ({ method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });

const badRequests = [
  ["malformed JSON", () => ({ method: "POST", headers: { "Content-Type": "application/json" }, body: "{\"messages\": [" })],
  ["messages not a list", () => json({ messages: "hello" })],
  ["no messages", () => json({ max_tokens: 4 })],
  ["content a number", () => json({ messages: [{ role: "user", content: 42 }] })],
  ["no messages at all", () => json({ messages: [] })],
  ["max_tokens a string", () => json({ messages: [{ role: "user", content: "hi" }], max_tokens: "many" })],
  ["negative temperature", () => json({ messages: [{ role: "user", content: "hi" }], temperature: -3 })],
  ["top_p above 1", () => json({ messages: [{ role: "user", content: "hi" }], top_p: 7 })],
  ["invalid UTF-8", () => ({ method: "POST", headers: { "Content-Type": "application/json" },
                              body: Buffer.concat([Buffer.from("{\"messages\":[{\"role\":\"user\",\"content\":\""),
                                                   Buffer.from([0xff, 0xfe]), Buffer.from("\"}]}")]) })],
  ["a 40 MiB body", () => ({ method: "POST", headers: { "Content-Type": "application/json" },
                             body: "{\"messages\":[{\"role\":\"user\",\"content\":\"" + "a".repeat(40 << 20) + "\"}]}" })],
];

async function client(id, deadline, conversations) {
  const rand = rng(seed * 1000003 + id);
  const pick = (a) => a[Math.floor(rand() * a.length)];
  let conv = null, started = 0;
  // Each conversation opens with its own text: two conversations with the same history (same opening,
  // same greedy reply) would be one conversation to the server, which continues whichever asks first
  // in the session they share, so the other could not be checked for reuse.
  const newConversation = () => {
    const opening = `${pick(openings)} (${id}.${started++})`;
    conv = { client: id, messages: [{ role: "user", content: opening }], session: null, turns: 0, dropped: false };
    conversations.push(conv);
  };
  newConversation();
  while (Date.now() < deadline) {
    const signal = AbortSignal.timeout(requestTimeoutMs);
    const r = rand();
    try {
      if (conv.turns >= 2 + Math.floor(rand() * 4)) newConversation();
      const request = { messages: conv.messages, max_tokens: 4 + Math.floor(rand() * 28),
                        temperature: rand() < 0.5 ? 0 : 0.8, seed: id };
      if (r < 0.45) {  // one turn, streamed or whole
        const stream = r < 0.25;
        const t0 = performance.now();
        const resp = await call(stream ? "chat stream" : "chat", "/v1/chat/completions", json({ ...request, stream }), signal);
        if (!resp) continue;
        if (resp.status !== 200) { fail(`chat: HTTP ${resp.status}: ${await resp.text()}`); continue; }
        let text = "", kvedge = null, first = null;
        if (stream) {
          const finished = await readSse(resp, (c) => {
            if (c.error) { fail(`chat stream: error chunk ${JSON.stringify(c.error)}`); return false; }
            const piece = c.choices?.[0]?.delta?.content;
            if (piece) { if (first === null) first = performance.now() - t0; text += piece; stats.tokens++; }
            if (c.kvedge) kvedge = c.kvedge;
            return true;
          });
          if (!finished) { fail("chat stream: ended without [DONE]"); continue; }
          if (first !== null) stats.ttft.push(first);
        } else {
          const body = await resp.json();
          text = body.choices?.[0]?.message?.content ?? "";
          kvedge = body.kvedge;
          stats.tokens += body.usage?.completion_tokens ?? 0;
          stats.latency.push(performance.now() - t0);
        }
        if (!kvedge?.session) { fail(`chat: no kvedge.session (${stream ? "stream" : "whole"})`); continue; }
        conv.session = kvedge.session;
        conv.dropped = false;
        conv.messages = [...conv.messages, { role: "assistant", content: text }, { role: "user", content: pick(openings) }];
        conv.turns++;
      } else if (r < 0.6) {  // a stream the client drops after a few pieces
        const controller = new AbortController();
        const resp = await call("chat cancelled", "/v1/chat/completions",
                                json({ ...request, max_tokens: 64, stream: true }),
                                AbortSignal.any([signal, controller.signal]));
        if (!resp) continue;
        if (resp.status !== 200) { fail(`cancel: HTTP ${resp.status}: ${await resp.text()}`); continue; }
        const after = 1 + Math.floor(rand() * 4);
        let pieces = 0;
        try {
          await readSse(resp, (c) => {
            if (c.choices?.[0]?.delta?.content && ++pieces >= after) controller.abort();
            return true;
          });
        } catch (e) {
          if (e.name !== "AbortError") throw e;
          stats.cancelled++;
        }
        // The conversation goes on without the dropped turn: its next request re-sends the same
        // messages (a retry), which the server fed with part of a reply since. That session is not
        // extended by the retry, so until a turn completes the conversation is not checked for reuse.
        conv.dropped = true;
      } else if (r < 0.8) {  // a bad request: a 4xx, never a 2xx or 5xx
        const [name, make] = pick(badRequests);
        if (name === "a 40 MiB body" && rand() < 0.8) continue;  // rare: 40 MiB per request is costly
        const resp = await call("bad request", "/v1/chat/completions", make(), signal);
        if (!resp) continue;
        const body = await resp.text();
        if (resp.status < 400 || resp.status >= 500) fail(`bad request '${name}': HTTP ${resp.status}`);
        else if (!/"error"/.test(body) && resp.status !== 413) fail(`bad request '${name}': no error JSON: ${body.slice(0, 200)}`);
      } else {  // the read-only endpoints
        const path = pick(["/health", "/v1/models", "/metrics", "/v1/sessions", "/no/such/route"]);
        const resp = await call("get", path, {}, signal);
        if (!resp) continue;
        await resp.arrayBuffer();
        if (path === "/no/such/route" ? resp.status !== 404 : resp.status !== 200) fail(`GET ${path}: HTTP ${resp.status}`);
      }
    } catch (e) {
      // The 40 MiB body may be refused before it is all sent: the server closes the connection.
      if (e.name === "TimeoutError") fail(`client ${id}: a request got no answer in ${requestTimeoutMs / 1000} s`);
      else if (!(e.cause?.code === "EPIPE" || e.cause?.code === "ECONNRESET") || r < 0.6 || r >= 0.8) {
        fail(`client ${id}: ${e.name}: ${e.message}${e.cause ? " (" + (e.cause.code ?? e.cause.message) + ")" : ""}`);
      }
    }
  }
}

function vm(field) {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${server.pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : NaN;
}
const mib = (b) => (b / 1048576).toFixed(1);
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))].toFixed(0) : "-"; };

const rssStart = vm("VmRSS");
const t0 = Date.now();
const conversations = [];
await Promise.all(Array.from({ length: clients }, (_, i) => client(i, t0 + seconds * 1000, conversations)));
const elapsed = (Date.now() - t0) / 1000;

// Afterwards: the server is healthy and lost no session.
const health = await fetch(base + "/health");
if (health.status !== 200) fail(`/health: HTTP ${health.status}: ${await health.text()}`);
const listed = (await (await fetch(base + "/v1/sessions")).json()).data ?? [];
const byId = new Map(listed.map((s) => [s.id, s]));
const withSession = conversations.filter((c) => c.session !== null);
const missing = withSession.filter((c) => !byId.has(c.session));
if (missing.length) fail(`${missing.length} of ${withSession.length} conversations' sessions are not listed, e.g. ${missing[0].session}`);
let continued = 0;
const endedDropped = withSession.filter((c) => c.dropped).length;
for (const c of withSession.filter((c) => !c.dropped)) {
  const resp = await fetch(base + "/v1/chat/completions", json({ messages: c.messages, max_tokens: 1, temperature: 0 }));
  if (resp.status !== 200) { fail(`continuing ${c.session}: HTTP ${resp.status}: ${await resp.text()}`); continue; }
  const body = await resp.json();
  if (!(body.usage?.prompt_tokens_details?.cached_tokens > 0)) {
    fail(`conversation ${c.session} (client ${c.client}, ${c.turns} turns) continued with no cached tokens: ${JSON.stringify(body.usage)}`);
  } else continued++;
}
if (stats.retryAfterMissing) fail(`${stats.retryAfterMissing} 429/503 responses without Retry-After`);
const hwm = vm("VmHWM"), rssEnd = vm("VmRSS");
const bound = budgetMiB * 1048576 + modelBytes + 64 * 1048576;
if (rssCheck && !(hwm <= bound)) fail(`peak RSS ${mib(hwm)} MiB over the bound ${mib(bound)} MiB (budget + model + 64 MiB)`);
const onDisk = listed.filter((s) => s.on_disk).length;
const code = await server.stop();
if (code !== 0) fail(`kvedge serve exited ${code} after SIGTERM`);
rmSync(sessionDir, { recursive: true, force: true });

console.log(`load: ${clients} clients x ${seconds} s (${elapsed.toFixed(1)} s), KV budget ${budgetMiB} MiB, seed ${seed}`);
console.log(`requests: ${JSON.stringify(stats.kinds)}; status: ${JSON.stringify(stats.status)}; streams dropped mid-reply: ${stats.cancelled}`);
console.log(`tokens: ${stats.tokens} completed (${(stats.tokens / elapsed).toFixed(1)}/s); TTFT p50 ${pct(stats.ttft, 0.5)} ms ` +
            `p95 ${pct(stats.ttft, 0.95)} ms; whole reply p50 ${pct(stats.latency, 0.5)} ms p95 ${pct(stats.latency, 0.95)} ms`);
console.log(`sessions: ${listed.length} listed (${onDisk} on disk); ${continued}/${withSession.length - endedDropped} conversations continued with cached tokens ` +
            `(${endedDropped} more ended on a dropped stream: not checked)`);
console.log(`RSS: start ${mib(rssStart)} MiB, end ${mib(rssEnd)} MiB, peak ${mib(hwm)} MiB; bound ${mib(bound)} MiB` +
            (rssCheck ? "" : " (not checked: sanitizer build)"));
if (failures.length) {
  for (const f of failures) console.log(`FAIL: ${f}`);
  console.log(`--- server output (last 4000 chars) ---\n${server.log().slice(-4000)}`);
  process.exit(1);
}
console.log("ok: load test passed");

// The chat page in a real browser: playwright-core drives Debian's headless Chromium against
// `kvedge serve --api-key`. Without the key a message fails with the server's 401 shown; with it the
// reply streams in (several updates before it ends), the KV figures fill in, the conversation list
// holds the conversation after a reload, a second turn reuses the session's tokens, Stop ends a
// reply early, and user text is shown as text, never as HTML.
// Usage: node browser_test.mjs --kvedge BINARY [--chromium PATH] -- SERVE_MODEL_ARGS...  (exit 77: skipped)
import { existsSync } from "node:fs";
import { check, checkEq, kSkip, parseArgs, requireTestPackage, runSteps, startServer } from "./serve_process.mjs";

const { chromium } = requireTestPackage("playwright-core");
const opts = parseArgs();
const chromiumPath = opts.chromium ?? "/usr/bin/chromium";
if (!existsSync(chromiumPath)) {
  console.log(`SKIP: no Chromium at ${chromiumPath} (Debian package 'chromium', scripts/install-deps.sh)`);
  process.exit(kSkip);
}
const apiKey = "browser-test-key";
const server = await startServer(opts.kvedge, [...opts.serveArgs, "--api-key", apiKey]);
let browser = null, page = null;
const pageErrors = [];
const foreignRequests = [];  // the page loads nothing from anywhere but the server (no CDN)
const stepTimeout = 120000;

// Counts the page's updates of the last assistant message (each streamed piece sets its text once).
async function watchReply() {
  await page.evaluate(() => {
    window.__updates = 0;
    window.__observer?.disconnect();
    window.__observer = new MutationObserver((records) => {
      for (const r of records) if (r.target.classList?.contains("assistant") && r.target.textContent) window.__updates++;
    });
    window.__observer.observe(document.getElementById("messages"), { childList: true, subtree: true });
  });
}
const idle = () => page.waitForSelector("body[data-state=idle]", { timeout: stepTimeout });
// Sends text and waits until the page has taken it up and finished with it: its state went to
// "streaming" (seen by an observer, however quickly it went back) and is "idle" again. Waiting for
// "idle" alone can return before the page has started (it was idle already).
async function sendMessage(text) {
  await page.evaluate(() => {
    window.__busySeen = false;
    window.__busyObserver?.disconnect();
    window.__busyObserver = new MutationObserver((records) => {
      if (records.some((r) => r.oldValue === "streaming") || document.body.dataset.state === "streaming") {
        window.__busySeen = true;
      }
    });
    window.__busyObserver.observe(document.body, { attributes: true, attributeFilter: ["data-state"], attributeOldValue: true });
  });
  await page.fill("#input", text);
  await page.click("#send");
  await page.waitForFunction(() => window.__busySeen, null, { timeout: stepTimeout });
  await idle();
}
const text = (sel) => page.textContent(sel);
const lastReply = () => page.locator(".msg.assistant").last();
// The reply's own text, without the page's note after it ("stopped", "max tokens reached").
const lastReplyText = () => lastReply().evaluate((n) => n.firstChild?.nodeType === Node.TEXT_NODE ? n.firstChild.data : "");

const steps = [
  ["Chromium starts and loads /", async () => {
    browser = await chromium.launch({ executablePath: chromiumPath, headless: true,
                                      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
    page = await browser.newPage();
    page.on("pageerror", (e) => pageErrors.push(e.message));
    page.on("request", (r) => { if (!r.url().startsWith(server.url + "/")) foreignRequests.push(r.url()); });
    const resp = await page.goto(server.url + "/");
    checkEq(resp.status(), 200, "GET / status");
    check(/text\/html/.test(resp.headers()["content-type"] ?? ""), `content-type ${resp.headers()["content-type"]}`);
    checkEq(await page.title(), "kvedge chat", "title");
  }],
  ["without the API key a message fails with the server's 401, shown", async () => {
    await page.waitForFunction(() => /HTTP 401/.test(document.getElementById("status").textContent), null,
                               { timeout: stepTimeout }).catch(() => {});
    check(/HTTP 401/.test(await text("#status")), `the model list's 401 is not shown: ${JSON.stringify(await text("#status"))}`);
    await sendMessage("Once upon a time");
    const err = await text("#error");
    check(/HTTP 401/.test(err), `#error = ${JSON.stringify(err)}`);
    checkEq(await page.inputValue("#input"), "Once upon a time", "the failed message goes back to the input");
    checkEq(await page.locator(".msg").count(), 0, "messages shown after the failure");
  }],
  ["with the key the reply streams in and ends", async () => {
    await page.fill("#api-key", apiKey);
    await page.press("#api-key", "Tab");  // a changed key reloads the model list with it
    await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null,
                               { timeout: stepTimeout });
    check((await page.locator("#model option").count()) >= 1, "no model listed");
    await page.fill("#max-tokens", "200");  // long enough to come in several chunks (the server sends what is ready)
    await page.fill("#temperature", "0");
    await page.click("#new-chat");
    await watchReply();
    await sendMessage("Once upon a time");
    const updates = await page.evaluate(() => window.__updates);
    const reply = await lastReplyText();
    checkEq(await text("#error"), "", "#error");
    check(reply.length > 0, "an empty reply");
    check(updates >= 2, `the reply was set ${updates} time(s): not streamed`);
    check(!(await lastReply().evaluate((n) => n.classList.contains("streaming"))), "still marked streaming");
    checkEq(await page.locator(".msg.user").count(), 1, "user messages");
    console.log(`   reply (${updates} updates): ${JSON.stringify(reply.slice(0, 80))}`);
  }],
  ["the KV figures of the conversation appear", async () => {
    await page.waitForFunction(() => document.getElementById("kv-disk").textContent !== "-", null, { timeout: stepTimeout });
    check((await text("#kv-session")) !== "-", "no session id");
    check(Number(await text("#kv-tokens")) > 0, `tokens in cache: ${await text("#kv-tokens")}`);
    check(/^\d+(\.\d)? (B|KiB|MiB|GiB)$/.test(await text("#kv-bytes")), `KV bytes: ${await text("#kv-bytes")}`);
    check(/^\d+(\.\d)? (B|KiB|MiB|GiB)$/.test(await text("#kv-budget")), `KV budget: ${await text("#kv-budget")}`);
    check(/^\d+ ms$/.test(await text("#kv-ttft")), `TTFT: ${await text("#kv-ttft")}`);
    check(Number(await text("#srv-sessions")) >= 1, `server sessions: ${await text("#srv-sessions")}`);
  }],
  ["the conversation list holds it across a reload", async () => {
    const before = await lastReplyText();
    await page.reload();
    checkEq(await page.locator("#conversations li").count(), 1, "conversations listed");
    checkEq(await text("#conversations li.active .title"), "Once upon a time", "its title");
    checkEq(await page.locator(".msg").count(), 2, "messages shown after the reload");
    checkEq(await lastReplyText(), before, "the reply after the reload");
  }],
  ["a second turn reuses the session (reused prompt tokens > 0)", async () => {
    await watchReply();
    await sendMessage("What did the cat do?");
    checkEq(await text("#error"), "", "#error");
    check(Number(await text("#kv-cached")) > 0, `reused prompt tokens: ${await text("#kv-cached")}`);
    checkEq(await page.locator(".msg").count(), 4, "messages");
    checkEq(await page.locator("#conversations li").count(), 1, "still one conversation");
  }],
  ["Stop ends a reply early and keeps what arrived", async () => {
    await page.fill("#max-tokens", "100000");  // the server clamps it; the story ends at Stop or EOS
    await page.fill("#temperature", "1");
    await page.click("#new-chat");
    // Stop is pressed from inside the page when the first piece of the reply shows, before the next
    // piece is read: a click from here could come after this small model has finished.
    await page.evaluate(() => {
      const observer = new MutationObserver(() => {
        const r = [...document.querySelectorAll(".msg.assistant")].pop();
        if (r && r.firstChild && r.firstChild.textContent.length > 0) { observer.disconnect(); document.getElementById("stop").click(); }
      });
      observer.observe(document.getElementById("messages"), { childList: true, subtree: true });
    });
    await sendMessage("Tell a long story");
    check(/stopped/.test(await lastReply().locator(".note").textContent()), "no 'stopped' note");
    check((await lastReplyText()).length > 0, "the text that arrived before Stop was dropped");
    checkEq(await page.locator("#conversations li").count(), 2, "conversations");
  }],
  ["user text is shown as text, not HTML", async () => {
    await page.fill("#max-tokens", "4");
    const hostile = "<img src=x onerror=\"window.__pwned=1\"><b>bold</b>";
    await sendMessage(hostile);
    checkEq(await text("#error"), "", "#error");
    checkEq(await page.locator(".msg.user").last().textContent(), hostile, "the user message");
    checkEq(await page.locator("#messages img, #messages b, #conversations img").count(), 0, "elements made from text");
    checkEq(await page.evaluate(() => window.__pwned), undefined, "the injected handler ran");
  }],
  ["no script errors on the page, no request to another origin", async () => {
    checkEq(pageErrors.length, 0, `page errors ${JSON.stringify(pageErrors)}`);
    checkEq(foreignRequests.length, 0, `requests elsewhere ${JSON.stringify(foreignRequests)}`);
  }],
];
const rc = await runSteps(steps, null);
if (browser) await browser.close();
const code = await server.stop();
if (code !== 0) console.log(`FAIL: kvedge serve exited ${code} after SIGTERM`);
if (rc !== 0 || code !== 0) console.log(`--- server output ---\n${server.log()}`);
process.exit(rc !== 0 || code !== 0 ? 1 : 0);

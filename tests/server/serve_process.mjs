// Shared by the Node client tests: the command line (--kvedge BINARY, or $KVEDGE_BIN for ASan/TSan
// builds; serve's model flags after --), `kvedge serve --port 0` started on loopback and stopped, the
// skip rule (exit 77 when npm's test packages are not installed) and small assertion helpers.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const kSkip = 77;  // ctest SKIP_RETURN_CODE
const here = dirname(fileURLToPath(import.meta.url));
export const nodeDir = join(here, "node");

if (Number(process.versions.node.split(".")[0]) < 20) {
  console.log(`SKIP: Node ${process.version} is older than 20 (the tests and playwright-core need 20)`);
  process.exit(kSkip);
}

// Loads an npm package from tests/server/node, or exits with kSkip saying how to install it.
export function requireTestPackage(name) {
  const dir = join(nodeDir, "node_modules", name);
  if (!existsSync(dir)) {
    console.log(`SKIP: ${dir} is missing; install the test packages with scripts/install-deps.sh ` +
                `(npm ci in tests/server/node)`);
    process.exit(kSkip);
  }
  return createRequire(join(nodeDir, "package.json"))(name);
}

// argv: [--kvedge BINARY] [--name value]... [-- SERVE_MODEL_ARGS...]. $KVEDGE_BIN overrides --kvedge.
export function parseArgs(argv = process.argv.slice(2)) {
  const opts = { serveArgs: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--") { opts.serveArgs = argv.slice(i + 1); break; }
    const m = /^--([a-z-]+)$/.exec(argv[i]);
    if (!m || i + 1 >= argv.length) throw new Error(`bad argument '${argv[i]}' (want --name value ... -- serve args)`);
    opts[m[1].replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = argv[++i];
  }
  if (process.env.KVEDGE_BIN) opts.kvedge = process.env.KVEDGE_BIN;
  if (!opts.kvedge) throw new Error("give the kvedge binary with --kvedge PATH or $KVEDGE_BIN");
  if (!existsSync(opts.kvedge)) throw new Error(`no kvedge binary at '${opts.kvedge}'`);
  return opts;
}

// Starts `kvedge serve ARGS --host 127.0.0.1 --port 0` and resolves once it prints its port.
// Returns {url, port, pid, log(), stop()}; stop() sends SIGTERM and resolves with the exit code.
export function startServer(kvedge, args, { timeoutMs = 120000 } = {}) {
  const full = ["serve", ...args, "--host", "127.0.0.1", "--port", "0"];
  const child = spawn(kvedge, full, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  let exited = null;
  const exit = new Promise((resolve) => child.on("exit", (code, signal) => {
    exited = code ?? 128 + (signal === "SIGKILL" ? 9 : 15);
    resolve(exited);
  }));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`kvedge serve printed no port in ${timeoutMs / 1000} s:\n${output}`));
    }, timeoutMs);
    const onData = (buf) => {
      output += buf.toString();
      const m = /(?:127\.0\.0\.1|localhost|\[::1\]):(\d{2,5})/.exec(output) ?? /\bport (\d{2,5})\b/i.exec(output);
      if (m && timer) {
        clearTimeout(timer);
        const port = Number(m[1]);
        resolve({
          port, url: `http://127.0.0.1:${port}`, pid: child.pid, log: () => output,
          exited: () => exited,
          async stop(killAfterMs = 60000) {
            if (exited !== null) return exited;
            child.kill("SIGTERM");
            const t = setTimeout(() => child.kill("SIGKILL"), killAfterMs);
            const code = await exit;
            clearTimeout(t);
            return code;
          },
        });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("error", (e) => { clearTimeout(timer); reject(e); });
    exit.then((code) => { clearTimeout(timer); reject(new Error(`kvedge ${full.join(" ")} exited (${code}):\n${output}`)); });
  });
}

export class TestFailure extends Error {}
export function check(cond, what) {
  if (!cond) throw new TestFailure(what);
}
export function checkEq(got, want, what) {
  if (got !== want) throw new TestFailure(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

// Runs named steps in order, printing ok/FAIL per step; the first failure stops the test.
export async function runSteps(steps, server) {
  let failed = false;
  for (const [name, fn] of steps) {
    const t0 = Date.now();
    try {
      await fn();
      console.log(`ok: ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      console.log(`FAIL: ${name}: ${e instanceof TestFailure ? e.message : e.stack ?? e}`);
      failed = true;
      break;
    }
  }
  if (server) {
    const code = await server.stop();
    if (code !== 0) { console.log(`FAIL: kvedge serve exited ${code} after SIGTERM`); failed = true; }
    if (failed) console.log(`--- server output ---\n${server.log()}`);
  }
  return failed ? 1 : 0;
}

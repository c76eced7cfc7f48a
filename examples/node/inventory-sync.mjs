#!/usr/bin/env node
// examples/node/inventory-sync.mjs: the inventory sync of
// shared/background/redis-lock-article.txt on the Node client
// (client/node), with fenced-kv (examples/fenced-kv) as the storage.
//
//   node inventory-sync.mjs --picket URL --kv URL [--workers N] [--rounds N] [--initial N]
//
// It sets the stock to --initial, starts --workers worker processes (this
// script with --worker I), each running --rounds jobs under
// client.withLock(): claim the grant's fence at fenced-kv, read the stock,
// work a little (stopping if lock.signal aborts: the lease was lost), write
// stock - 1 with lock.fenceHeaders() (Picket-Lock, Picket-Fence, and
// Picket-Fence-Token when picketd signs fences). The lock is released when
// the job's function returns. At the end it shows a write with an old
// fence refused (409 stale_fence). The last line is
//   final stock=N expected=M applied=K
// Exit 0 when the stock is exact, 1 otherwise. Token: $PICKET_TOKEN.
import { spawn } from "node:child_process";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { Client, lockName } from "../../client/node/dist/index.js";

// The resource, as a Node team names it. Not a valid picket lock name, so it
// is held as "h." + 32 hex of its SHA-256 (lockName), as every client maps it.
const RESOURCE = "jobs/inventory-sync";

const { values: o } = parseArgs({
  options: {
    picket: { type: "string" }, kv: { type: "string" }, workers: { type: "string", default: "3" },
    rounds: { type: "string", default: "4" }, initial: { type: "string", default: "100" }, worker: { type: "string" },
  },
});
if (!o.picket || !o.kv) {
  process.stderr.write("usage: node inventory-sync.mjs --picket URL --kv URL [--workers N] [--rounds N] [--initial N]\n");
  process.exit(2);
}
const kv = o.kv.replace(/\/+$/, "");

/** One fenced-kv call: [status, body]. */
async function call(method, path, headers = {}, body = undefined) {
  const r = await fetch(kv + path, { method, headers, body, signal: AbortSignal.timeout(10000) });
  const text = await r.text();
  let doc = null;
  try { doc = JSON.parse(text); } catch { /* not JSON */ }
  return [r.status, doc];
}

const sleep = (ms, signal) => new Promise((resolve, reject) => {
  const t = setTimeout(resolve, ms);
  signal?.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
});

if (o.worker !== undefined) {
  // --- one worker ----------------------------------------------------------
  const w = Number(o.worker);
  const client = new Client(o.picket, { owner: `inventory-sync worker ${w}` });
  for (let job = 1; job <= Number(o.rounds); job++) {
    await client.withLock(RESOURCE, async (lock) => {
      const fence = lock.fenceHeaders();
      // Claim first: from here on no older holder can write.
      const { "Picket-Lock": _, ...claim } = fence;
      const [st] = await call("POST", `/fence/${encodeURIComponent(lock.fenceLock)}/claim`, claim);
      if (st !== 200) {
        console.log(`worker ${w} job ${job}: claim refused (HTTP ${st})`);
        return;
      }
      const [rs, cur] = await call("GET", "/kv/stock");
      if (rs !== 200) throw new Error(`read: HTTP ${rs}`);
      await sleep(10 + Math.floor(Math.random() * 50), lock.signal); // the sync's own work
      const next = Number(cur.value) - 1;
      const [ps, res] = await call("PUT", "/kv/stock", fence, String(next));
      console.log(`worker ${w} job ${job} fence ${lock.fence}: stock ${cur.value} -> ${next}: ` +
        (ps === 200 ? "applied" : `REJECTED HTTP ${ps} ${res?.error?.code ?? ""}`));
    }, { ttlMs: 10000, waitMs: 30000 });
  }
  client.close();
  process.exit(0);
}

// --- the run -----------------------------------------------------------------
const workers = Number(o.workers), rounds = Number(o.rounds), initial = Number(o.initial);
const name = lockName(RESOURCE);
// Fence 1 is below every grant's fence: the first holder's claim shuts it out.
let [st] = await call("PUT", "/kv/stock", { "Picket-Lock": name, "Picket-Fence": "1" }, String(initial));
if (st !== 200) {
  process.stderr.write(`inventory-sync: could not set the initial stock (HTTP ${st})\n`);
  process.exit(1);
}
console.log(`inventory-sync: resource ${RESOURCE} is picket lock ${name}; ${workers} workers x ${rounds} jobs, stock ${initial}`);
// A holder that will be stale by the end: its fence is below every worker's.
const client = new Client(o.picket, { owner: "inventory-sync (stale holder)" });
const old = await client.lock(RESOURCE, { ttlMs: 10000, waitMs: 30000 });
const stale = old.fenceHeaders();
await old.release();

const runs = [];
for (let w = 1; w <= workers; w++) {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "--picket", o.picket, "--kv", kv,
    "--rounds", String(rounds), "--worker", String(w)], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d) => { out += d; });
  runs.push(new Promise((resolve) => child.on("close", (code) => resolve({ code, out }))));
}
let applied = 0, failed = 0;
for (const { code, out } of await Promise.all(runs)) {
  process.stdout.write(out);
  applied += (out.match(/: applied$/gm) ?? []).length;
  if (code !== 0) failed++;
}
const [ss, sres] = await call("PUT", "/kv/stock", stale, "0");
console.log(`stale fence ${stale["Picket-Fence"]} refused: HTTP ${ss} ${sres?.error?.code ?? ""}`);
const [, cur] = await call("GET", "/kv/stock");
const final = Number(cur.value);
const expected = initial - applied;
console.log(`final stock=${final} expected=${expected} applied=${applied}`);
client.close();
process.exit(failed === 0 && final === expected && ss === 409 ? 0 : 1);

#!/usr/bin/env node
// leader-scheduler.mjs: a scheduler that only the leader runs, with the
// Node client (client/node) and a fenced-kv (examples/fenced-kv).
//
// Several candidates (async tasks here; processes on several hosts in real
// life) campaign for one election, each waiting its turn. The leader runs
// the job --ticks times, every --interval-ms: the job counts its runs in
// fenced-kv at --key, each write sent with the leader's term as its fence
// (Picket-Lock: ELECTION, Picket-Fence: TERM, + Picket-Fence-Token when
// picketd signs), and stops the moment its leadership is lost
// (lead.signal). Then it resigns, and the next candidate leads with a
// higher term. At the end the first leader's write is replayed with its
// old term, as a leader paused past its TTL would send it: fenced-kv has
// seen newer terms and refuses it (409 stale_fence). The last line is
// `final runs=N expected=N leaders=L` (exit status 1 when they differ).
//
//   node examples/node/leader-scheduler.mjs --picket http://127.0.0.1:7070 --kv http://127.0.0.1:7071
import { parseArgs } from "node:util";
import { Client } from "../../client/node/dist/index.js";

const { values: o } = parseArgs({
  options: {
    picket: { type: "string", default: "http://127.0.0.1:7070" },
    kv: { type: "string", default: "http://127.0.0.1:7071" },
    election: { type: "string", default: "js-example.scheduler" },
    key: { type: "string", default: "js-example-runs" },
    candidates: { type: "string", default: "2" },
    ticks: { type: "string", default: "3" },
    "interval-ms": { type: "string", default: "100" },
    "ttl-ms": { type: "string", default: "3000" },
  },
});
const candidates = Number(o.candidates), ticks = Number(o.ticks);
const intervalMs = Number(o["interval-ms"]), ttlMs = Number(o["ttl-ms"]);

async function runs(signal) {
  const r = await fetch(`${o.kv}/kv/${o.key}`, { signal });
  if (r.status === 404) return 0;
  if (r.status !== 200) throw new Error(`GET /kv/${o.key}: HTTP ${r.status}`);
  return Number((await r.json()).value);
}

const put = (value, headers, signal) => fetch(`${o.kv}/kv/${o.key}`, { method: "PUT", headers, body: value, signal });

const c = new Client(o.picket);
let first; // the first leader's term and fence headers, for the replay
const terms = new Set();
let failed = false;

async function candidate(me) {
  const lead = await c.campaign(o.election, { ttlMs, waitMs: 60000, owner: me, value: me });
  try {
    terms.add(lead.term);
    first ??= { term: lead.term, headers: lead.fenceHeaders() };
    console.log(`${me} leads term ${lead.term}`);
    for (let tick = 1; tick <= ticks; tick++) {
      if (!lead.valid()) {
        console.log(`${me} lost the leadership (term ${lead.term}): ${lead.signal.reason?.message}`);
        return;
      }
      const n = (await runs(lead.signal)) + 1;
      const r = await put(String(n), lead.fenceHeaders(), lead.signal);
      if (r.status !== 200) {
        console.log(`${me}: write refused: ${r.status} ${await r.text()}`);
        failed = true;
        return;
      }
      console.log(`${me} term ${lead.term} tick ${tick}: runs=${n} (${r.status})`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, intervalMs);
        lead.signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
      });
    }
    console.log(`${me} resigns term ${lead.term}`);
  } finally {
    await lead.resign();
  }
}

const results = await Promise.allSettled(Array.from({ length: candidates }, (_, i) => candidate(`cand-${i}`)));
for (const r of results) {
  if (r.status === "rejected") {
    console.log(`a candidate failed: ${r.reason}`);
    failed = true;
  }
}

// a zombie leader: the first term, long resigned
const stale = await put("0", first.headers);
const body = await stale.text();
if (stale.status === 409) {
  console.log(`stale write refused: 409 ${JSON.parse(body).error?.code} (term ${first.term})`);
} else {
  console.log(`stale write NOT refused: ${stale.status} ${body}`);
}
const got = await runs();
const want = candidates * ticks;
console.log(`final runs=${got} expected=${want} leaders=${terms.size}`);
c.close();
process.exitCode = got === want && stale.status === 409 && terms.size === candidates && !failed ? 0 : 1;

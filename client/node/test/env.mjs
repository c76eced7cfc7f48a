// The picketd processes tests/integration/test_node.sh started (see there).
import { randomBytes } from "node:crypto";

export function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through tests/integration/test_node.sh`);
  return v;
}

/** A fresh lock name under prefix (the auth file's tokens cover "js.", "one.", "fast."). */
export function fresh(prefix = "js.") {
  return `${prefix}${randomBytes(6).toString("hex")}`;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Resolves with performance.now() when signal aborts; rejects if it has not within ms. */
export function aborted(signal, ms = 15000) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return resolve(performance.now());
    const t = setTimeout(() => reject(new Error(`the signal did not abort within ${ms} ms`)), ms);
    signal.addEventListener("abort", () => { clearTimeout(t); resolve(performance.now()); }, { once: true });
  });
}

/** Waits (polling) until cond() is true, or fails after ms. */
export async function until(cond, ms = 5000, what = "condition") {
  const end = performance.now() + ms;
  while (!(await cond())) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

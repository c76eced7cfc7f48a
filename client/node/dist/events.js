import { EventsUnsupported, NotFound, replyError, TransportError } from "./errors.js";
/** Bytes of one line (its end not counted), and of one event's data. */
export const LINE_MAX = 8192;
const ERROR_BODY_MAX = 65536;
/** One event of a stream (a lock's, an election's): its type, and data, the whole JSON object, for fields newer than this client. */
export class StreamEvent {
    type;
    data;
    constructor(type, data) {
        this.type = type;
        this.data = data;
    }
    /** ms since the Unix epoch. */
    get time() { return this.data.time; }
}
/** One event of a lock's stream; data is the whole JSON object, for fields newer than this client. */
export class LockEvent extends StreamEvent {
    get name() { return this.data.name; }
    get held() { return this.data.held; }
    get fence() { return this.data.fence; }
    get nextFence() { return this.data.next_fence; }
    get owner() { return this.data.owner; }
    get ttlMs() { return this.data.ttl_ms; }
    get by() { return this.data.by; }
    /**
     * True when this event says the lease granted with fence is gone: an
     * expired, broken or released event with that fence, a granted or state
     * event with another fence, or nothing held (for events after that grant).
     */
    ends(fence) {
        switch (this.type) {
            case "expired":
            case "broken":
            case "released": return this.fence === fence;
            case "granted": return this.fence !== fence;
            case "state": return !this.held || this.fence !== fence;
            default: return false;
        }
    }
}
/** The iterator of Client.watch(): opens the stream on the first next(). */
export function openWatch(client, path, opts) {
    return openStream(client, path, opts, (kind, doc) => new LockEvent(kind, doc), true);
}
/**
 * @internal An event stream (GET path) as an async generator of make(type,
 * data); lockEvents: a 404 is EventsUnsupported (a picketd without lock events).
 */
export async function* openStream(client, path, opts, make, lockEvents) {
    const signal = opts.signal;
    const idleMs = opts.idleMs ?? 60000;
    if (signal?.aborted)
        return;
    const req = client.start("GET", path, client.headers("text/event-stream"));
    let timer;
    let failure;
    const stop = (e) => {
        if (failure === undefined && e !== undefined)
            failure = e;
        req.destroy();
    };
    const onAbort = () => stop();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
        const res = await new Promise((resolve, reject) => {
            timer = setTimeout(() => stop(new TransportError(`GET ${path}: no reply within ${client.timeoutMs} ms`)), client.timeoutMs);
            req.on("response", resolve);
            req.on("error", (e) => reject(failure ?? (signal?.aborted ? undefined : new TransportError(`GET ${path}: ${e.code ?? e.message}`, undefined, {}, { cause: e }))));
            req.end();
        }).catch((e) => {
            if (e === undefined)
                return undefined;
            throw e;
        });
        clearTimeout(timer);
        if (res === undefined || signal?.aborted)
            return;
        const ctype = String(res.headers["content-type"] ?? "");
        if (res.statusCode !== 200 || !ctype.startsWith("text/event-stream")) {
            let raw = "";
            let size = 0;
            for await (const c of res) {
                size += c.length;
                if (size > ERROR_BODY_MAX)
                    break;
                raw += c.toString("utf8");
            }
            if (res.statusCode === 200)
                throw new TransportError(`GET ${path}: a reply of type '${ctype}', not an event stream`, undefined, { status: 200 });
            let doc;
            try {
                doc = JSON.parse(raw);
            }
            catch {
                doc = undefined;
            }
            const e = replyError("GET", path, res.statusCode ?? 0, doc);
            if (e instanceof NotFound && lockEvents)
                throw new EventsUnsupported(`this picketd has no lock events (${e.message})`, "not_found", { status: e.status });
            throw e;
        }
        const arm = () => {
            clearTimeout(timer);
            timer = setTimeout(() => stop(new TransportError(`GET ${path}: nothing (not even a heartbeat) for ${idleMs} ms`)), idleMs);
        };
        arm();
        let pending = Buffer.alloc(0);
        let kind = "message";
        let data = [];
        let size = 0;
        try {
            for await (const chunk of res) {
                arm();
                pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
                let nl;
                while ((nl = pending.indexOf(0x0a)) >= 0) {
                    let line = pending.subarray(0, nl);
                    pending = pending.subarray(nl + 1);
                    if (line.length && line[line.length - 1] === 0x0d)
                        line = line.subarray(0, line.length - 1);
                    if (line.length > LINE_MAX)
                        throw new TransportError(`GET ${path}: a line over ${LINE_MAX} bytes`);
                    const text = line.toString("utf8");
                    if (text === "") {
                        if (data.length) {
                            let doc;
                            try {
                                doc = JSON.parse(data.join("\n"));
                            }
                            catch {
                                doc = undefined;
                            }
                            if (typeof doc !== "object" || doc === null)
                                throw new TransportError(`GET ${path}: a ${kind} event whose data is not a JSON object`);
                            yield make(kind, doc);
                        }
                        kind = "message";
                        data = [];
                        size = 0;
                        continue;
                    }
                    if (text.startsWith(":"))
                        continue;
                    const colon = text.indexOf(":");
                    const field = colon < 0 ? text : text.slice(0, colon);
                    let value = colon < 0 ? "" : text.slice(colon + 1);
                    if (value.startsWith(" "))
                        value = value.slice(1);
                    if (field === "event")
                        kind = value;
                    else if (field === "data") {
                        size += value.length + 1;
                        if (size > LINE_MAX)
                            throw new TransportError(`GET ${path}: an event over ${LINE_MAX} bytes`);
                        data.push(value);
                    }
                }
                if (pending.length > LINE_MAX + 1)
                    throw new TransportError(`GET ${path}: a line over ${LINE_MAX} bytes`);
            }
        }
        catch (e) {
            if (signal?.aborted)
                return;
            if (failure !== undefined)
                throw failure;
            if (e instanceof TransportError)
                throw e;
            throw new TransportError(`GET ${path}: ${e.message}`, undefined, {}, { cause: e });
        }
        if (signal?.aborted)
            return;
        if (failure !== undefined)
            throw failure;
        throw new TransportError(`GET ${path}: picketd ended the event stream`);
    }
    finally {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        req.destroy();
    }
}

/* app.js: picket's web console. Plain JavaScript, no build step, no
 * dependencies: it speaks only picketd's public API (docs/api.md):
 *
 *   GET  /v1/whoami              what the token may do (Break shown only with "admin")
 *   GET  /v1/locks?prefix&limit&cursor   the held locks, page by page
 *   GET  /v1/locks/{name}        one lock's details
 *   GET  /v1/locks/{name}/events the selected lock's events (docs/events.md)
 *   POST /v1/locks/{name}/break  ends the lease and advances the fence
 *   GET  /v1/elections/{name}    an election's leader (term, value, owner), candidates
 *   GET  /v1/elections/{name}/observe  the selected election's `leader` events
 *   POST /v1/elections/{name}/break    deposes the leader and moves the term on
 *
 * The list (locks, semaphores, read/write locks and elections, whose fence
 * is the leader's term) is refreshed by polling GET /v1/locks every
 * POLL_MS. The lock or election shown in detail follows its stream
 * instead: each grant, renewal, release, expiry and break of a lock, each
 * change of an election's leader or value, goes into its history, its TTL
 * and its row as it happens. One stream at a time, for the selected one only: a browser
 * opens at most 6 HTTP/1.1 connections to a host, and picketd bounds the
 * streams of a token (--max-watchers-per-client). The stream is read with
 * fetch(), not EventSource, which cannot send the Authorization header.
 * Semaphores and read/write locks have no events: their history is what
 * changed between two polls.
 *
 * Rules kept here: the token lives in sessionStorage only (never
 * localStorage, never a URL); text from the server reaches the page only
 * through textContent (never innerHTML); no eval, no inline handlers (the
 * page's Content-Security-Policy forbids them anyway). */
'use strict';

(function () {
  const POLL_MS = 2000;        // list refresh period (the selected lock follows its events)
  const STREAM_RETRY_MS = 500; // a broken events stream is opened again after this,
  const STREAM_RETRY_MAX = 10000; // doubling up to this
  const LINE_MAX = 8192;       // an events line (or event) longer than this ends the stream
  const PAGE_LIMIT = 1000;     // locks per GET /v1/locks page (the API's maximum)
  const MAX_PAGES = 10;        // pages per refresh: the console shows at most 10,000 rows
  const HISTORY_PER_LOCK = 100;
  const HISTORY_LOCKS = 1000;  // locks whose history is kept (the oldest are dropped)
  const TOKEN_KEY = 'picket.token';
  const PATHS = { lock: '/v1/locks/', semaphore: '/v1/semaphores/', rwlock: '/v1/rwlocks/',
    election: '/v1/elections/' };
  // The kinds with a stream to follow (after their path) and a break.
  const STREAMS = { lock: '/events', election: '/observe' };

  const $ = (id) => document.getElementById(id);
  const ui = {
    status: $('status'), notice: $('notice'), tokenForm: $('token-form'), token: $('token'),
    tokenForget: $('token-forget'), tokenState: $('token-state'), prefix: $('prefix'),
    listNote: $('list-note'), body: $('locks-body'), empty: $('empty'),
    detail: $('detail'), detailHeading: $('detail-heading'), detailFields: $('detail-fields'),
    history: $('history'), detailClose: $('detail-close'), live: $('live'),
    dialog: $('break-dialog'), breakTitle: $('break-title'), breakName: $('break-name'),
    breakError: $('break-error'),
    breakCancel: $('break-cancel'), breakConfirm: $('break-confirm'),
  };

  const state = {
    canBreak: false,     // from GET /v1/whoami: the token has the admin verb
    whoKnown: false,
    locks: new Map(),    // key -> {row (the API's object), at (performance.now() of its read)}
    rows: new Map(),     // key -> <tr>
    history: new Map(),  // key -> [{t: Date, text}] (insertion order: oldest lock first)
    first: true,         // the next listing starts afresh (page opened, token or prefix changed)
    seq: 0,              // polls started, and the last one shown: an older reply never
    shown: 0,            // overwrites a newer one
    opener: null,        // the button that opened the dialog, to give focus back
    selected: null,      // key of the lock in the detail panel
    inspect: null,       // the last GET of the selected lock
    leader: null,        // the selected election's leader, from its last `leader` event
    stream: null,        // the selected lock's events stream (follow())
    ended: null,         // how the selected lock's last lease ended, from its events
    more: false,         // the last listing was cut at MAX_PAGES
    breaking: null,      // the lock the dialog asks about
    timer: null,
    stopped: 0,          // 401 or 403: polling paused, the token refused until it (or,
                         // for 403, the prefix) changes
    generation: 0,       // bumped when the token or prefix changes: stale replies are dropped
  };

  // ---- the token ------------------------------------------------------

  function token() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  }

  function setToken(value) {
    try {
      if (value) sessionStorage.setItem(TOKEN_KEY, value);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) {
      say('This browser refuses session storage; the token cannot be kept.', true);
    }
  }

  function showTokenState() {
    ui.tokenState.textContent = token()
      ? 'A token is set for this tab.'
      : 'No token set: calls are sent without Authorization.';
  }

  // ---- the API --------------------------------------------------------

  /* fetch()'s options for an API call: the token only in the header. */
  function request(method, accept) {
    const headers = { Accept: accept };
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    return { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
  }

  /* One API call. Resolves to {status, body} (body: parsed JSON, or null);
   * rejects only when picketd could not be reached. */
  async function api(method, path, body) {
    const init = request(method, 'application/json');
    const headers = init.headers;
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const r = await fetch(path, init);
    let parsed = null;
    try { parsed = await r.json(); } catch (e) { parsed = null; }
    return { status: r.status, body: parsed };
  }

  function errorText(reply) {
    const e = reply.body && reply.body.error;
    if (e && typeof e.message === 'string') return e.message + ' (' + e.code + ')';
    return 'HTTP ' + reply.status;
  }

  function lockPath(kind, name) {
    return (PATHS[kind] || PATHS.lock) + encodeURIComponent(name);
  }

  // ---- messages -------------------------------------------------------

  /* The state of the list (refreshed, unreachable, refused). */
  function say(text, isError) {
    if (ui.status.textContent !== text) ui.status.textContent = text;
    ui.status.classList.toggle('error', !!isError);
  }

  /* The outcome of the user's last action (a break); it stays until the next. */
  function tell(text, isError) {
    ui.notice.textContent = text;
    ui.notice.classList.toggle('error', !!isError);
  }

  // ---- what the token may do -------------------------------------------

  /* Asks picketd what the token may do. Returns the reply's status (0:
   * picketd unreachable, -1: the token or prefix changed meanwhile). */
  async function whoami() {
    const gen = state.generation;
    let r;
    try {
      r = await api('GET', '/v1/whoami');
    } catch (e) {
      return 0; // the listing says picketd is unreachable
    }
    if (gen !== state.generation) return -1;
    const verbs = r.status === 200 && r.body && Array.isArray(r.body.verbs) ? r.body.verbs : [];
    state.canBreak = verbs.indexOf('admin') >= 0;
    state.whoKnown = r.status === 200;
    let text;
    if (r.status === 200) {
      const who = r.body.token ? "Token '" + r.body.token + "'" : 'No token needed here';
      text = who + ': may ' + (verbs.length ? verbs.join(', ') : 'nothing') + '.';
      if (!state.canBreak) text += ' Breaking locks needs the admin verb.';
    } else if (r.status === 401) {
      text = token() ? 'picketd does not know this token: ' + errorText(r)
        : 'picketd runs with --auth-file: paste a token.';
    } else {
      text = 'picketd did not say what this token may do (' + errorText(r) + '); Break is hidden.';
    }
    ui.tokenState.textContent = (token() ? 'A token is set for this tab. ' : '') + text;
    for (const [key, tr] of state.rows) fillActions(tr, key, state.locks.get(key).row);
    return r.status;
  }

  // ---- the list -------------------------------------------------------

  const keyOf = (row) => row.kind + ' ' + row.name;
  const kindOf = (key) => key.slice(0, key.indexOf(' '));
  const nameOf = (key) => key.slice(key.indexOf(' ') + 1);
  // What a kind's fence is called: an election's is its leader's term.
  const fenceWord = (kind) => (kind === 'election' ? 'term' : 'fence');

  /* Reads every page (up to MAX_PAGES) under the prefix. */
  async function readAll(prefix) {
    const all = [];
    let cursor = null;
    for (let page = 0; page < MAX_PAGES; page++) {
      const q = new URLSearchParams({ limit: String(PAGE_LIMIT) });
      if (prefix) q.set('prefix', prefix);
      if (cursor) q.set('cursor', cursor);
      const r = await api('GET', '/v1/locks?' + q.toString());
      if (r.status !== 200 || !r.body || !Array.isArray(r.body.locks)) return { error: r };
      for (const l of r.body.locks) all.push(l);
      cursor = r.body.cursor;
      if (cursor === null || cursor === undefined) return { locks: all, more: false };
    }
    return { locks: all, more: true };
  }

  async function poll() {
    const gen = state.generation;
    const seq = ++state.seq;
    const prefix = ui.prefix.value;
    const started = performance.now();
    let res;
    try {
      res = await readAll(prefix);
    } catch (e) {
      if (gen === state.generation) say('picketd is unreachable; retrying.', true);
      return;
    }
    if (gen !== state.generation || seq < state.shown) return;
    state.shown = seq;
    if (res.error) {
      const r = res.error;
      // A refused token stays refused: poll again only once it (or the
      // prefix) changes, rather than send it every 500 ms.
      state.stopped = r.status === 401 || r.status === 403 ? r.status : 0;
      if (r.status === 401) say('picketd needs a token: paste one above. ' + errorText(r), true);
      else if (r.status === 403) say('This token may not list these locks: ' + errorText(r) +
        '. Change the prefix or the token.', true);
      else if (r.status === 404) say('This picketd cannot list locks (' + errorText(r) + ').', true);
      else say('Listing failed: ' + errorText(r), true);
      return;
    }
    const now = performance.now();
    const next = new Map();
    for (const row of res.locks) next.set(keyOf(row), { row, at: now });
    // The followed lock: an event that came after this listing was asked
    // for is newer than the listing (a release must not come back as held
    // until the next poll), so its entry stays as the events left it.
    const followed = live();
    if (followed && state.stream.lastAt > started) {
      const mine = state.locks.get(followed);
      if (mine) next.set(followed, mine);
      else next.delete(followed);
    }
    observe(next, followed);
    state.locks = next;
    state.first = false;
    state.more = res.more;
    render();
    say('Live: ' + next.size + (next.size === 1 ? ' lock' : ' locks') + ' held' +
        (prefix ? " under '" + prefix + "'" : '') + ', refreshed every ' + POLL_MS / 1000 + ' s.');
  }

  function schedule() {
    clearTimeout(state.timer);
    if (state.stopped) return;
    state.timer = setTimeout(async () => {
      await poll();
      schedule();
    }, POLL_MS);
  }

  // ---- history: what changed between two polls --------------------------

  function note(key, text) {
    let h = state.history.get(key);
    if (!h) {
      if (state.history.size >= HISTORY_LOCKS) state.history.delete(state.history.keys().next().value);
      h = [];
      state.history.set(key, h);
    }
    h.push({ t: new Date(), text });
    if (h.length > HISTORY_PER_LOCK) h.shift();
    if (key === state.selected) renderHistory();
  }

  const ownerText = (row) => (row.owner === null || row.owner === undefined ? 'no owner' : "owner '" + row.owner + "'");

  /* Notes what changed between two polls. The followed lock's grants,
   * renewals and ends come from its events instead, more exactly. */
  function observe(next, followed) {
    for (const [key, cur] of next) {
      const prev = state.locks.get(key);
      const r = cur.row;
      if (prev && prev.row.waiters !== r.waiters) note(key, 'Waiters: ' + prev.row.waiters + ' → ' + r.waiters + '.');
      if (key === followed) continue;
      const fw = fenceWord(r.kind);
      if (!prev) {
        note(key, (state.first ? 'Held when first seen' : 'Granted') + ': ' + fw + ' ' + r.fence +
          ', ' + ownerText(r) + (r.holders > 1 ? ', ' + r.holders + ' holders' : '') + '.');
        continue;
      }
      const p = prev.row;
      if (p.fence !== r.fence) {
        note(key, 'Granted anew: ' + fw + ' ' + p.fence + ' → ' + r.fence + ', ' + ownerText(r) +
          ' (the previous grant ended between two polls).');
      } else if (p.owner !== r.owner) {
        note(key, 'Owner changed to ' + ownerText(r) + '.');
      }
      if (p.holders !== r.holders && p.fence === r.fence) note(key, 'Holders: ' + p.holders + ' → ' + r.holders + '.');
      if (typeof r.renewals === 'number' && typeof p.renewals === 'number' && r.renewals > p.renewals &&
          p.fence === r.fence) note(key, 'Renewed (' + r.renewals + ' renewals so far).');
    }
    // After a change of token or prefix, a row that is gone may only be
    // out of view: say nothing of it.
    for (const [key, prev] of state.first ? [] : state.locks) {
      if (!next.has(key) && key !== followed) {
        note(key, 'No longer held (released, expired or broken); last ' + fenceWord(prev.row.kind) +
          ' ' + prev.row.fence + '.');
      }
    }
  }

  // ---- the selected lock's events -----------------------------------------

  /* The key of the lock whose events are followed, once its stream has
   * said where the lock stands (its first `state`); else null. */
  function live() {
    const s = state.stream;
    return s && s.live ? s.key : null;
  }

  function showLive(s, text, isError) {
    if (state.stream !== s) return;
    setText(ui.live, text);
    ui.live.classList.toggle('error', !!isError);
  }

  /* Follows key's events (a lock's, an election's leader events), ending
   * any other stream first. */
  function follow(key) {
    unfollow();
    state.ended = null;
    state.leader = null;
    const kind = kindOf(key);
    if (!STREAMS[kind]) {
      setText(ui.live, 'A ' + kind + ' has no events stream: this history is what changed ' +
        'between two refreshes of the list (every ' + POLL_MS / 1000 + ' s).');
      ui.live.classList.remove('error');
      return;
    }
    const s = { key, kind, name: nameOf(key), ctrl: null, live: false, seen: false, lastAt: 0,
      retry: STREAM_RETRY_MS, timer: null };
    state.stream = s;
    connect(s);
  }

  function unfollow() {
    const s = state.stream;
    if (!s) return;
    state.stream = null;
    clearTimeout(s.timer);
    if (s.ctrl) s.ctrl.abort();
  }

  /* Opens s's stream and reads it until it ends, then tries again later;
   * a refusal that a retry would only repeat (404: a picketd without
   * events; 401, 403) leaves the lock to the list's polls. */
  async function connect(s) {
    s.ctrl = new AbortController();
    const init = request('GET', 'text/event-stream');
    init.signal = s.ctrl.signal;
    let why = 'the events stream ended';
    try {
      const r = await fetch(lockPath(s.kind, s.name) + STREAMS[s.kind], init);
      const type = r.headers.get('Content-Type') || '';
      if (r.status === 200 && type.startsWith('text/event-stream')) {
        await readEvents(s, r.body.getReader());
      } else {
        let body = null;
        try { body = await r.json(); } catch (e) { body = null; }
        const reply = { status: r.status, body };
        if (r.status === 404 || r.status === 401 || r.status === 403) {
          showLive(s, (r.status === 404 ? 'This picketd has no events stream'
            : 'The events stream was refused (' + errorText(reply) + ')') +
            ': this ' + s.kind + ' is refreshed with the list, every ' + POLL_MS / 1000 + ' s.', r.status !== 404);
          s.live = false;
          return;
        }
        why = 'the events stream was refused (' + errorText(reply) + ')';
      }
    } catch (e) {
      if (state.stream !== s) return; // unfollowed: the abort ends it
      why = e && e.message === 'too long' ? 'an event over 8 KiB' : 'picketd is unreachable';
    }
    if (state.stream !== s) return;
    s.live = false;
    showLive(s, 'Not live: ' + why + '; trying again in ' + (s.retry / 1000).toFixed(1) + ' s.', true);
    s.timer = setTimeout(() => { if (state.stream === s) connect(s); }, s.retry);
    s.retry = Math.min(s.retry * 2, STREAM_RETRY_MAX);
  }

  /* Server-Sent Events: field lines up to an empty line, which ends the
   * event; ":" starts a comment; fields other than event and data mean
   * nothing here. Lines and events are bounded (LINE_MAX). */
  async function readEvents(s, reader) {
    const decoder = new TextDecoder();
    let buf = '', type = 'message', data = [], size = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (state.stream !== s) { reader.cancel(); return; }
      buf += decoder.decode(value, { stream: true });
      let end;
      while ((end = buf.indexOf('\n')) >= 0) {
        let line = buf.slice(0, end);
        buf = buf.slice(end + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (data.length) dispatch(s, type, data.join('\n'));
          type = 'message';
          data = [];
          size = 0;
          continue;
        }
        if (line[0] === ':') continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? '' : line.slice(colon + 1);
        if (v[0] === ' ') v = v.slice(1);
        if (field === 'event') type = v;
        else if (field === 'data') {
          size += v.length + 1;
          data.push(v);
        }
      }
      if (buf.length > LINE_MAX || size > LINE_MAX) {
        reader.cancel();
        throw new Error('too long');
      }
    }
  }

  function dispatch(s, type, text) {
    if (state.stream !== s) return;
    let ev;
    try { ev = JSON.parse(text); } catch (e) { return; }
    if (!ev || typeof ev !== 'object') return;
    applyEvent(s, type, ev);
  }

  const secs = (ms) => (ms / 1000).toFixed(1) + ' s';

  /* The lock as an event says it is held: its list row (added if the list
   * did not have it yet), counting its TTL down from now. */
  function setHeld(key, name, fields) {
    const prev = state.locks.get(key);
    const base = { kind: kindOf(key), name, holders: 1, waiters: 0, acquired_at: null, renewals: null };
    state.locks.set(key, { row: Object.assign(base, prev && prev.row, fields), at: performance.now() });
    state.ended = null;
  }

  /* The stream's state (its first event, or the first after a reconnect:
   * events in between may be missing, the state is the truth now): the
   * stream is live. Returns whether it was live before. */
  function nowLive(s) {
    const again = s.seen;
    s.live = s.seen = true;
    s.retry = STREAM_RETRY_MS;
    showLive(s, s.kind === 'election'
      ? 'Live: this election follows its leader events; every new leader, proclaim, ' +
        'resignation, expiry and break shows as it happens.'
      : 'Live: this lock follows its events stream; every grant, renewal, release, ' +
        'expiry and break shows as it happens.');
    return again;
  }

  const valueText = (v) => (typeof v === 'string' ? 'value ' + JSON.stringify(v) : 'no value');

  /* One `leader` event of the followed election: the first after a
   * (re)connect says where it stands; then each new term, proclaim (same
   * term, another value) and end of a leadership (leader: null, its
   * cause untold). */
  function leaderEvent(s, ev) {
    const key = s.key, cur = state.locks.get(key), l = ev.leader;
    const first = !s.live, again = first && nowLive(s);
    // The term before this event: the last event's (a listing may already
    // show the next term, or no leader); before the first, the list's.
    const prev = first ? null : state.leader;
    const was = first ? (cur ? cur.row.fence : null) : prev ? prev.term : null;
    state.leader = l && typeof l === 'object' ? l : null;
    if (state.leader) {
      setHeld(key, s.name, { fence: l.term, owner: l.owner, ttl_ms: l.ttl_ms, acquired_at: l.since,
        renewals: cur && cur.row.fence === l.term ? cur.row.renewals : null, holders: 1 });
      const term = 'term ' + l.term, what = ownerText(l) + ', ' + valueText(l.value);
      // The same leader and value told again (picketd read it anew): nothing happened.
      const same = prev && prev.term === l.term && prev.value === l.value;
      if (!same) note(key, first ? (again ? 'Following its leader again (changes may have been missed): '
        : 'Following its leader: ') + term + ', ' + what + ', ' + secs(l.ttl_ms) + ' left.'
        : was === l.term ? 'Proclaimed: ' + term + ', ' + valueText(l.value) + '.'
        : 'New leader: ' + term + ', ' + what + ', TTL ' + secs(l.ttl_ms) + '.');
    } else {
      state.locks.delete(key);
      if (was !== null) state.ended = { type: 'nolead', fence: was, at: new Date() };
      note(key, first ? (again ? 'Following its leader again: ' : 'Following its leader: ') +
        'no leader; last term issued ' + ev.term + '.'
        : 'No leader: ' + (was !== null ? 'the leadership of term ' + was + ' ended' : 'it ended') +
          ' (resigned, expired or broken).');
    }
  }

  /* One event of the followed lock: into its history, its row and its
   * details, at once. */
  function applyEvent(s, type, ev) {
    const key = s.key;
    const cur = state.locks.get(key);
    const fence = 'fence ' + ev.fence;
    switch (type) {
      case 'leader':
        if (s.kind !== 'election') return;
        leaderEvent(s, ev);
        break;
      case 'state': {
        const again = nowLive(s);
        if (ev.held) {
          const same = cur && cur.row.fence === ev.fence;
          setHeld(key, s.name, same ? { owner: ev.owner, ttl_ms: ev.ttl_ms }
            : { fence: ev.fence, owner: ev.owner, ttl_ms: ev.ttl_ms, acquired_at: null, renewals: null });
        } else {
          state.locks.delete(key);
        }
        note(key, (again ? 'Following its events again (some may have been missed): '
          : 'Following its events: ') + (ev.held ? 'held, ' + fence + ', ' + ownerText(ev) +
          ', ' + secs(ev.ttl_ms) + ' left.' : 'not held; last fence issued ' + ev.fence + '.'));
        break;
      }
      case 'granted':
        setHeld(key, s.name, { fence: ev.fence, owner: ev.owner, ttl_ms: ev.ttl_ms,
          acquired_at: ev.time, renewals: 0, holders: 1 });
        note(key, 'Granted: ' + fence + ', ' + ownerText(ev) + ', TTL ' + secs(ev.ttl_ms) + '.');
        break;
      case 'renewed':
        if (cur && cur.row.fence === ev.fence) {
          setHeld(key, s.name, { ttl_ms: ev.ttl_ms,
            renewals: typeof cur.row.renewals === 'number' ? cur.row.renewals + 1 : null });
        }
        note(key, 'Renewed: ' + fence + ', TTL ' + secs(ev.ttl_ms) + '.');
        break;
      case 'released':
      case 'expired':
      case 'broken':
        state.locks.delete(key);
        if (ev.fence) state.ended = { type, fence: ev.fence, at: new Date() };
        note(key, type === 'released' ? 'Released by its holder: ' + fence + '.'
          : type === 'expired' ? 'Expired (its TTL ran out without a release): ' + fence + '.'
          : 'Broken' + (typeof ev.by === 'string' ? ' by ' + ev.by : '') + ': ' +
            (ev.fence ? 'the lease of ' + fence + ' ended' : 'nothing was held') +
            '; every later grant has a fence above ' + ev.next_fence + '.');
        break;
      default:
        return; // heartbeat, or an event newer than this page: nothing to show
    }
    s.lastAt = performance.now();
    render();
  }

  // ---- rendering --------------------------------------------------------

  function cell(tr, cls) {
    const td = document.createElement('td');
    td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function setText(el, text) {
    if (el.textContent !== text) el.textContent = text;
  }

  function makeRow(key, row) {
    const tr = document.createElement('tr');
    tr.dataset.kind = row.kind;
    tr.dataset.name = row.name;
    cell(tr, 'kind');
    const name = cell(tr, 'name');
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'link details';
    b.textContent = row.name;
    b.setAttribute('aria-label', 'Details of ' + row.kind + ' ' + row.name);
    b.addEventListener('click', () => select(key));
    name.appendChild(b);
    cell(tr, 'owner');
    cell(tr, 'fence num');
    cell(tr, 'ttl num');
    cell(tr, 'waiters num');
    cell(tr, 'actions');
    return tr;
  }

  function fillRow(tr, key, row) {
    const c = tr.children;
    setText(c[0], row.kind);
    if (row.owner === null || row.owner === undefined) {
      setText(c[2], row.holders > 1 ? row.holders + ' holders' : '—');
      c[2].classList.add('none');
    } else {
      setText(c[2], row.owner);
      c[2].classList.remove('none');
    }
    setText(c[3], String(row.fence));
    c[3].title = fenceWord(row.kind); // the column is "Fence / term"
    setText(c[5], String(row.waiters));
    fillActions(tr, key, row);
    tr.classList.toggle('selected', key === state.selected);
  }

  /* The Break button: for locks and elections (the kinds with a break
   * endpoint), and only when the token may break. */
  function fillActions(tr, key, row) {
    const td = tr.children[6];
    const existing = td.querySelector('button.break');
    const want = state.canBreak && !!STREAMS[row.kind];
    if (want && !existing) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'break';
      b.textContent = 'Break';
      b.setAttribute('aria-label', 'Break ' + row.kind + ' ' + row.name);
      b.addEventListener('click', () => askBreak(key));
      td.appendChild(b);
    } else if (!want && existing) {
      existing.remove();
    }
  }

  function ttlText(entry, now) {
    const left = Math.max(0, entry.row.ttl_ms - (now - entry.at));
    return (left / 1000).toFixed(1) + ' s';
  }

  /* The TTL cells count down between polls, from each row's read time. */
  function tick() {
    const now = performance.now();
    for (const [key, tr] of state.rows) {
      const e = state.locks.get(key);
      const td = tr.children[4];
      setText(td, ttlText(e, now));
      td.classList.toggle('low', e.row.ttl_ms - (now - e.at) < 1000);
    }
    if (state.selected && state.locks.has(state.selected)) {
      const dd = ui.detailFields.querySelector('dd.ttl');
      if (dd) setText(dd, ttlText(state.locks.get(state.selected), now));
    }
  }

  function render() {
    const keys = [...state.locks.keys()].sort((a, b) => {
      const x = state.locks.get(a).row, y = state.locks.get(b).row;
      return x.name < y.name ? -1 : x.name > y.name ? 1 : x.kind < y.kind ? -1 : x.kind > y.kind ? 1 : 0;
    });
    for (const [key, tr] of state.rows) {
      if (!state.locks.has(key)) {
        tr.remove();
        state.rows.delete(key);
      }
    }
    // Rows stay where they are unless the order changes, so a focused
    // button keeps its focus across refreshes.
    keys.forEach((key, i) => {
      const row = state.locks.get(key).row;
      let tr = state.rows.get(key);
      if (!tr) {
        tr = makeRow(key, row);
        state.rows.set(key, tr);
      }
      fillRow(tr, key, row);
      if (ui.body.children[i] !== tr) ui.body.insertBefore(tr, ui.body.children[i] || null);
    });
    ui.empty.hidden = keys.length !== 0;
    setText(ui.listNote, state.more ? 'Showing the first ' + keys.length + ' only: narrow the prefix to see the rest.' : '');
    tick();
    if (state.selected) renderDetail();
  }

  // ---- one lock's details -------------------------------------------------

  function select(key) {
    if (state.selected !== key || !state.stream) follow(key);
    state.selected = key;
    state.inspect = null;
    for (const [k, tr] of state.rows) tr.classList.toggle('selected', k === key);
    ui.detail.hidden = false;
    renderDetail();
    renderHistory();
    inspect(key);
    ui.detailHeading.focus();
  }

  async function inspect(key) {
    let r;
    try { r = await api('GET', lockPath(kindOf(key), nameOf(key))); } catch (err) { return; }
    if (state.selected !== key) return;
    state.inspect = r;
    renderDetail();
  }

  function field(dl, label, value, cls) {
    const dt = document.createElement('dt');
    dt.textContent = label;
    const dd = document.createElement('dd');
    dd.textContent = value;
    if (cls) dd.className = cls;
    dl.appendChild(dt);
    dl.appendChild(dd);
  }

  const when = (ms) => (typeof ms === 'number' ? new Date(ms).toLocaleString() + ' (picketd\'s clock)' : '—');

  /* The selected election's leader of this term, as its last `leader`
   * event (while live) or else its last GET said; null if neither knows. */
  function leaderOf(term) {
    const i = state.inspect;
    const l = live() === state.selected && state.leader ? state.leader
      : i && i.status === 200 && i.body ? i.body.leader : null;
    return l && l.term === term ? l : null;
  }

  function renderDetail() {
    const key = state.selected;
    const kind = kindOf(key), name = nameOf(key);
    const election = kind === 'election';
    const e = state.locks.get(key);
    setText(ui.detailHeading, kind + ' ' + name);
    const dl = document.createElement('dl');
    dl.id = 'detail-fields';
    if (e) {
      const r = e.row;
      field(dl, election ? 'Leader' : 'Owner', r.owner === null || r.owner === undefined ? '—' : r.owner);
      field(dl, election ? 'Term' : 'Fence', String(r.fence));
      if (election) {
        // What the leader published: text, whatever it looks like (field() sets textContent).
        const l = leaderOf(r.fence);
        field(dl, 'Value', !l ? '—' : typeof l.value === 'string' ? l.value : 'no value', 'value');
      }
      field(dl, 'TTL left', ttlText(e, performance.now()), 'ttl');
      if (!election) field(dl, 'Holders', String(r.holders));
      field(dl, election ? 'Candidates' : 'Waiters', String(r.waiters));
      field(dl, election ? 'Leader since' : 'Acquired', when(r.acquired_at));
      field(dl, 'Renewals', typeof r.renewals === 'number' ? String(r.renewals) : '—');
    } else if (state.ended) {
      const how = { released: 'released by its holder', expired: 'expired', broken: 'broken',
        nolead: 'its leadership ended (resigned, expired or broken)' };
      field(dl, 'State', (election ? 'no leader: ' : 'not held: ') + how[state.ended.type] + ' at ' +
        state.ended.at.toLocaleTimeString() + ' (' + fenceWord(kind) + ' ' + state.ended.fence + ')', 'ended');
    } else {
      field(dl, 'State', election ? 'no leader now' : 'not held now');
    }
    const i = state.inspect;
    if (i && i.status === 200 && i.body) {
      field(dl, election ? 'Last term issued' : 'Last fence issued', String(election ? i.body.term : i.body.fence));
    } else if (i) {
      field(dl, 'Details', 'GET ' + lockPath(kind, name) + ': ' + errorText(i));
    }
    ui.detailFields.replaceWith(dl);
    ui.detailFields = dl;
  }

  function renderHistory() {
    const h = state.history.get(state.selected) || [];
    const items = [];
    for (let i = h.length - 1; i >= 0; i--) {
      const li = document.createElement('li');
      const t = document.createElement('time');
      t.dateTime = h[i].t.toISOString();
      t.textContent = h[i].t.toLocaleTimeString();
      li.appendChild(t);
      li.appendChild(document.createTextNode(h[i].text));
      items.push(li);
    }
    ui.history.replaceChildren(...items);
  }

  function closeDetail() {
    const key = state.selected;
    unfollow();
    setText(ui.live, '');
    state.selected = null;
    ui.detail.hidden = true;
    const tr = key && state.rows.get(key);
    if (tr) {
      tr.classList.remove('selected');
      tr.querySelector('button.details').focus();
    }
  }

  // ---- break ------------------------------------------------------------

  function askBreak(key) {
    const e = state.locks.get(key);
    if (!e) return;
    state.breaking = e.row;
    state.opener = document.activeElement;
    // The dialog says what breaking this kind does (its other kinds' words hidden).
    const kind = e.row.kind;
    setText(ui.breakTitle, 'Break this ' + kind + '?');
    setText(ui.breakConfirm, 'Break the ' + kind);
    for (const el of ui.dialog.querySelectorAll('[data-kind]')) el.hidden = el.dataset.kind !== kind;
    ui.breakName.textContent = e.row.name;
    ui.breakError.textContent = '';
    ui.breakConfirm.disabled = false;
    ui.dialog.showModal();
    ui.breakCancel.focus(); // the safe choice is the default one
  }

  async function doBreak() {
    const row = state.breaking;
    if (!row) return;
    ui.breakConfirm.disabled = true;
    let r;
    try {
      r = await api('POST', lockPath(row.kind, row.name) + '/break', {});
    } catch (e) {
      ui.breakError.textContent = 'picketd is unreachable; nothing was broken.';
      ui.breakConfirm.disabled = false;
      return;
    }
    const key = keyOf(row), election = row.kind === 'election';
    if (r.status === 200 && r.body) {
      const word = fenceWord(row.kind), next = election ? r.body.term : r.body.fence;
      // A followed lock's history gets the break from its events, with who
      // broke it; an election's leader events do not say why a leader went.
      if (live() !== key || election) note(key, r.body.broken
        ? 'Broken from this console: ' + ownerText(r.body) + ' lost the ' + (election ? 'leadership' : 'lease') +
          '; the ' + word + ' advanced to ' + next + '.'
        : 'Break from this console found ' + (election ? 'no leader.' : 'nothing held.'));
      ui.dialog.close();
      tell(r.body.broken ? "Broke '" + row.name + "'; its " + word + ' is now ' + next + '.'
        : "'" + row.name + "' " + (election ? 'had no leader' : 'was not held') + '; nothing was broken.');
      state.breaking = null;
      poll();
      return;
    }
    if (r.status === 403) {
      // The token may not break after all: take the buttons away and say why.
      state.canBreak = false;
      for (const [k, tr] of state.rows) fillActions(tr, k, state.locks.get(k).row);
      ui.dialog.close();
      tell('This token may not break locks: ' + errorText(r), true);
      return;
    }
    ui.breakError.textContent = 'The break failed: ' + errorText(r);
    ui.breakConfirm.disabled = false;
  }

  // ---- wiring -------------------------------------------------------------

  /* Starts afresh with the token now kept: what it may do, then the list.
   * A token picketd does not know (401) is not sent again until it changes. */
  async function restart() {
    unfollow(); // its token is the old one
    state.generation++;
    state.first = true;
    state.canBreak = false;
    state.stopped = 0;
    clearTimeout(state.timer);
    const st = await whoami();
    if (st === -1) return;
    if (st === 401) {
      state.stopped = 401;
      say(token() ? 'picketd does not know this token: paste another above.'
        : 'picketd needs a token: paste one above.', true);
      return;
    }
    await poll();
    schedule();
    // The token changed: the selected lock's stream must carry the new one.
    if (state.selected) follow(state.selected);
  }

  ui.tokenForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = ui.token.value.trim();
    ui.token.value = ''; // the token stays out of the page once kept
    if (!v) return;
    setToken(v);
    showTokenState();
    restart();
  });
  ui.tokenForget.addEventListener('click', () => {
    setToken('');
    ui.token.value = '';
    showTokenState();
    restart();
  });
  let prefixTimer = null;
  ui.prefix.addEventListener('input', () => {
    clearTimeout(prefixTimer);
    prefixTimer = setTimeout(async () => {
      if (state.stopped === 401) return; // no prefix helps a token picketd does not know
      state.generation++;
      state.first = true;
      state.stopped = 0;
      clearTimeout(state.timer);
      await poll();
      schedule();
    }, 200);
  });
  ui.detailClose.addEventListener('click', closeDetail);
  ui.breakCancel.addEventListener('click', () => ui.dialog.close());
  ui.breakConfirm.addEventListener('click', doBreak);
  ui.dialog.addEventListener('close', () => {
    state.breaking = null;
    // Focus goes back to the Break button, or (its row gone) to the list.
    if (!state.opener || !state.opener.isConnected) $('locks-heading').focus();
    else state.opener.focus();
    state.opener = null;
  });

  showTokenState();
  setInterval(tick, 100);
  restart();
})();

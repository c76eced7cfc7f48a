/* app.js: picket's web console. Plain JavaScript, no build step, no
 * dependencies: it speaks only picketd's public API (docs/api.md):
 *
 *   GET  /v1/whoami              what the token may do (Break shown only with "admin")
 *   GET  /v1/locks?prefix&limit&cursor   the held locks, page by page
 *   GET  /v1/locks/{name}        one lock's details
 *   POST /v1/locks/{name}/break  ends the lease and advances the fence
 *
 * Until picketd has an events stream, the list is refreshed by polling
 * GET /v1/locks every 500 ms (POLL_MS); the history of a lock is what
 * changed between two polls.
 *
 * Rules kept here: the token lives in sessionStorage only (never
 * localStorage, never a URL); text from the server reaches the page only
 * through textContent (never innerHTML); no eval, no inline handlers (the
 * page's Content-Security-Policy forbids them anyway). */
'use strict';

(function () {
  const POLL_MS = 500;         // list refresh period (until the events stream exists)
  const PAGE_LIMIT = 1000;     // locks per GET /v1/locks page (the API's maximum)
  const MAX_PAGES = 10;        // pages per refresh: the console shows at most 10,000 rows
  const HISTORY_PER_LOCK = 100;
  const HISTORY_LOCKS = 1000;  // locks whose history is kept (the oldest are dropped)
  const TOKEN_KEY = 'picket.token';
  const PATHS = { lock: '/v1/locks/', semaphore: '/v1/semaphores/', rwlock: '/v1/rwlocks/' };

  const $ = (id) => document.getElementById(id);
  const ui = {
    status: $('status'), notice: $('notice'), tokenForm: $('token-form'), token: $('token'),
    tokenForget: $('token-forget'), tokenState: $('token-state'), prefix: $('prefix'),
    listNote: $('list-note'), body: $('locks-body'), empty: $('empty'),
    detail: $('detail'), detailHeading: $('detail-heading'), detailFields: $('detail-fields'),
    history: $('history'), detailClose: $('detail-close'),
    dialog: $('break-dialog'), breakName: $('break-name'), breakError: $('break-error'),
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

  /* One API call. Resolves to {status, body} (body: parsed JSON, or null);
   * rejects only when picketd could not be reached. */
  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
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
    observe(next);
    state.locks = next;
    state.first = false;
    render(res.more);
    say('Live: ' + next.size + (next.size === 1 ? ' lock' : ' locks') + ' held' +
        (prefix ? " under '" + prefix + "'" : '') + ', refreshed every ' + POLL_MS + ' ms.');
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

  function observe(next) {
    for (const [key, cur] of next) {
      const prev = state.locks.get(key);
      const r = cur.row;
      if (!prev) {
        note(key, (state.first ? 'Held when first seen' : 'Granted') + ': fence ' + r.fence +
          ', ' + ownerText(r) + (r.holders > 1 ? ', ' + r.holders + ' holders' : '') + '.');
        continue;
      }
      const p = prev.row;
      if (p.fence !== r.fence) {
        note(key, 'Granted anew: fence ' + p.fence + ' → ' + r.fence + ', ' + ownerText(r) +
          ' (the previous grant ended between two polls).');
      } else if (p.owner !== r.owner) {
        note(key, 'Owner changed to ' + ownerText(r) + '.');
      }
      if (p.holders !== r.holders && p.fence === r.fence) note(key, 'Holders: ' + p.holders + ' → ' + r.holders + '.');
      if (p.waiters !== r.waiters) note(key, 'Waiters: ' + p.waiters + ' → ' + r.waiters + '.');
      if (typeof r.renewals === 'number' && typeof p.renewals === 'number' && r.renewals > p.renewals &&
          p.fence === r.fence) note(key, 'Renewed (' + r.renewals + ' renewals so far).');
    }
    // After a change of token or prefix, a row that is gone may only be
    // out of view: say nothing of it.
    for (const [key, prev] of state.first ? [] : state.locks) {
      if (!next.has(key)) note(key, 'No longer held (released, expired or broken); last fence ' + prev.row.fence + '.');
    }
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
    setText(c[5], String(row.waiters));
    fillActions(tr, key, row);
    tr.classList.toggle('selected', key === state.selected);
  }

  /* The Break button: only for locks (the break endpoint is the lock's),
   * and only when the token may break. */
  function fillActions(tr, key, row) {
    const td = tr.children[6];
    const existing = td.querySelector('button.break');
    const want = state.canBreak && row.kind === 'lock';
    if (want && !existing) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'break';
      b.textContent = 'Break';
      b.setAttribute('aria-label', 'Break lock ' + row.name);
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

  function render(more) {
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
    setText(ui.listNote, more ? 'Showing the first ' + keys.length + ' only: narrow the prefix to see the rest.' : '');
    tick();
    if (state.selected) renderDetail();
  }

  // ---- one lock's details -------------------------------------------------

  function select(key) {
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
    const e = state.locks.get(key);
    const kind = key.slice(0, key.indexOf(' ')), name = key.slice(key.indexOf(' ') + 1);
    let r;
    try { r = await api('GET', lockPath(kind, name)); } catch (err) { return; }
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

  function renderDetail() {
    const key = state.selected;
    const kind = key.slice(0, key.indexOf(' ')), name = key.slice(key.indexOf(' ') + 1);
    const e = state.locks.get(key);
    setText(ui.detailHeading, kind + ' ' + name);
    const dl = document.createElement('dl');
    dl.id = 'detail-fields';
    if (e) {
      const r = e.row;
      field(dl, 'Owner', r.owner === null || r.owner === undefined ? '—' : r.owner);
      field(dl, 'Fence', String(r.fence));
      field(dl, 'TTL left', ttlText(e, performance.now()), 'ttl');
      field(dl, 'Holders', String(r.holders));
      field(dl, 'Waiters', String(r.waiters));
      field(dl, 'Acquired', when(r.acquired_at));
      field(dl, 'Renewals', typeof r.renewals === 'number' ? String(r.renewals) : '—');
    } else {
      field(dl, 'State', 'not held now');
    }
    const i = state.inspect;
    if (i && i.status === 200 && i.body) {
      field(dl, 'Last fence issued', String(i.body.fence));
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
      r = await api('POST', lockPath('lock', row.name) + '/break', {});
    } catch (e) {
      ui.breakError.textContent = 'picketd is unreachable; nothing was broken.';
      ui.breakConfirm.disabled = false;
      return;
    }
    const key = 'lock ' + row.name;
    if (r.status === 200 && r.body) {
      note(key, r.body.broken
        ? 'Broken from this console: ' + ownerText(r.body) + ' lost the lease; the fence advanced to ' + r.body.fence + '.'
        : 'Break from this console found nothing held.');
      ui.dialog.close();
      tell(r.body.broken ? "Broke '" + row.name + "'; its fence is now " + r.body.fence + '.'
        : "'" + row.name + "' was not held; nothing was broken.");
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

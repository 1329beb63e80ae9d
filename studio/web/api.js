// The studio's JSON API (docs/studio.md): the session's CSRF token for state-changing requests,
// errors as thrown Error objects carrying the server's one-line message, and the two streams (a
// run's events over EventSource with polling as the fallback, a chat's tokens over a POST stream).

let csrf = '';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function check(res, what) {
  if (res.ok) return res;
  let message = `${what}: HTTP ${res.status}`;
  try {
    const body = await res.json();
    if (body && body.error) message = body.error;
  } catch (_) { /* not JSON: keep the status line */ }
  if (res.status === 401) message = 'not signed in: open the address loft studio printed (the one with ?token=)';
  throw new ApiError(res.status, message);
}

export function url(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v === undefined || v === null || v === '' || v === false) continue;
    q.set(k, v === true ? '1' : String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

export async function get(path, params, opts = {}) {
  const res = await fetch(url(path, params), { credentials: 'same-origin', signal: opts.signal });
  return (await check(res, path)).json();
}

function mutating(method, body, signal) {
  return {
    method,
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  };
}

export async function post(path, body) {
  const res = await check(await fetch(path, mutating('POST', body ?? {})), path);
  const text = await res.text();
  return text ? JSON.parse(text) : {};
}

export async function session() {
  const s = await get('/api/session');
  csrf = s.csrf || '';
  return s;
}

// Splits an SSE byte stream into events; calls onEvent(name, data) for each (data parsed as JSON
// when it is JSON). The format is the WHATWG "event stream": blank-line-separated blocks of
// `field: value` lines.
async function readEventStream(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let name = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const val = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') name = val;
        else if (field === 'data') data.push(val);
      }
      if (!data.length) continue;
      onEvent(name, parseMaybe(data.join('\n')));
    }
  }
}

function parseMaybe(s) {
  try { return JSON.parse(s); } catch (_) { return s; }
}

// POST whose answer is an SSE stream (chat). Resolves when the stream ends.
export async function postStream(path, body, onEvent, signal) {
  const res = await check(await fetch(path, mutating('POST', body, signal)), path);
  await readEventStream(res.body, onEvent);
}

// Follows a run: SSE `metric`, `log` and `status` events; if the stream cannot be opened or
// breaks, polls GET /api/runs/ID every second instead. The stream starts at the beginning of the
// run's metrics and log, so a metrics line may arrive twice (history, then stream: callers keep
// them by step) and onLog(text, true) replaces the log where a stream (re)opens or a poll brings
// the log's tail; onLog(text) appends. Returns stop().
export function followRun(id, { onMetric, onLog, onStatus, onDetail }) {
  let stopped = false, es = null, timer = 0;
  const base = `/api/runs/${encodeURIComponent(id)}`;
  const ended = (s) => ['finished', 'failed', 'stopped'].includes(s);
  const apply = (run, withLog) => {
    for (const m of run.metrics || []) onMetric(m);
    if (withLog) onLog(run.log_tail || '', true);
    onDetail(run);
    onStatus(run.status, run);
  };
  const poll = async () => {
    if (stopped) return;
    try {
      const run = await get(base);
      apply(run, true);
      if (ended(run.status)) return;
    } catch (_) { /* the server restarting: try again */ }
    timer = setTimeout(poll, 1000);
  };
  const start = async () => {
    try {
      const run = await get(base);
      apply(run, ended(run.status));
      if (ended(run.status)) return;  // nothing more will come
    } catch (_) { /* the poll shows it */ }
    if (stopped) return;
    if (typeof EventSource === 'undefined') { poll(); return; }
    es = new EventSource(`${base}/events`);
    es.onopen = () => onLog('', true);
    es.addEventListener('metric', (e) => onMetric(parseMaybe(e.data)));
    es.addEventListener('log', (e) => {
      const d = parseMaybe(e.data);
      onLog(typeof d === 'string' ? d : String(d.text ?? d.line ?? ''));
    });
    es.addEventListener('status', (e) => {
      const d = parseMaybe(e.data);
      const status = typeof d === 'string' ? d : d.status;
      onStatus(status, d);
      if (ended(status)) {
        // The server ends the stream with the run; EventSource would reconnect and replay it.
        es.close();
        es = null;
        get(base).then((r) => onDetail(r), () => {});
      }
    });
    es.onerror = () => {
      // EventSource reconnects by itself after a dropped stream, but not after an HTTP error:
      // then (readyState CLOSED) poll instead.
      if (es && es.readyState === EventSource.CLOSED && !stopped) { es = null; poll(); }
    };
  };
  start();
  return () => {
    stopped = true;
    clearTimeout(timer);
    if (es) es.close();
  };
}

// Polls a job (evaluate, export) every second until it ends; onUpdate(job) each time.
export function followJob(id, onUpdate) {
  let stopped = false, timer = 0;
  const tick = async () => {
    if (stopped) return;
    try {
      const job = await get(`/api/jobs/${encodeURIComponent(id)}`);
      onUpdate(job);
      if (!['queued', 'running', 'stopping'].includes(job.status)) return;
    } catch (e) {
      onUpdate({ id, status: 'failed', error: e.message });
      return;
    }
    timer = setTimeout(tick, 1000);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

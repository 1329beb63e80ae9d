// What the pages share: the session (roots, runs folder), the chosen model and data files, and
// the list of runs' adapters. Pages subscribe with on('model', fn) and see each change.
import { get } from './api.js';
import { h, fill } from './dom.js';

const listeners = new Map();

export const state = {
  session: null,   // GET /api/session
  model: '',       // the chosen Hugging Face folder (as the API names it)
  data: [],        // chosen dataset files
  run: '',         // the run the Train page follows
};

export function on(event, fn) {
  if (!listeners.has(event)) listeners.set(event, new Set());
  listeners.get(event).add(fn);
}

export function emit(event, value) {
  for (const fn of listeners.get(event) || []) fn(value);
}

export function setModel(path) {
  if (state.model === path) return;
  state.model = path;
  try { localStorage.setItem('loft.model', path); } catch (_) { /* private mode */ }
  emit('model', path);
}

export function setData(files) {
  state.data = [...files];
  emit('data', state.data);
}

export function remembered(key) {
  try { return localStorage.getItem(`loft.${key}`) || ''; } catch (_) { return ''; }
}

// A path's last component, for labels.
export function baseName(p) {
  const parts = String(p || '').replace(/\/+$/, '').split('/');
  return parts[parts.length - 1] || String(p || '');
}

export function joinPath(dir, name) {
  return `${String(dir).replace(/\/+$/, '')}/${name}`;
}

// The adapters the runs have written (a finished run's <dir>/adapter), newest first, for the
// Evaluate, Chat and Export pages' adapter choice.
export async function runAdapters() {
  const runs = await get('/api/runs');
  return runs
    .filter((r) => r.status === 'finished')
    .sort(newestFirst)
    .map((r) => ({ label: `${r.name || r.id} · ${r.method || 'adapter'} · step ${r.step ?? '?'}`, path: joinPath(r.dir, 'adapter'), model: r.model }));
}

export function sameModel(a, b) {
  const norm = (p) => String(p).replace(/\/+$/, '').replace(/^\.\//, '');
  return norm(a) === norm(b) || norm(a).endsWith(`/${norm(b)}`) || norm(b).endsWith(`/${norm(a)}`);
}

// Fills an adapter <select> with the runs' adapters trained on the chosen model, keeping the
// current choice when it is still there.
export async function fillAdapters(sel) {
  const list = (await runAdapters()).filter((a) => !state.model || !a.model || sameModel(a.model, state.model));
  const keep = sel.value;
  fill(sel, list.length ? list.map((a) => h('option', { value: a.path }, a.label)) : h('option', { value: '' }, 'no finished runs yet'));
  if (list.some((a) => a.path === keep)) sel.value = keep;
}

// Orders runs newest first by `started` (seconds since the epoch, or an ISO date).
export function newestFirst(a, b) {
  const t = (r) => (typeof r.started === 'number' ? r.started * 1000 : Date.parse(r.started) || 0);
  return t(b) - t(a);
}

// Element building for every page. Text always goes in as text nodes (never innerHTML), so a file
// name, a log line or a model's output can never become markup.

// h('div.card#id', {attr: value, onclick: fn}, child, 'text', [children]) -> element.
export function h(spec, attrs, ...children) {
  const m = /^([a-z0-9]+)?((?:[.#][\w-]+)*)$/i.exec(spec);
  const el = document.createElement((m && m[1]) || 'div');
  for (const part of ((m && m[2]) || '').match(/[.#][\w-]+/g) || []) {
    if (part[0] === '.') el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = Boolean(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Replaces an element's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const $ = (sel, root = document) => root.querySelector(sel);

// Calls fn once `ms` after the last call (the fit table and other live inputs).
export function debounce(fn, ms) {
  let t = 0;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
}

export function bytes(n) {
  if (n === undefined || n === null || !Number.isFinite(Number(n))) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Number(n), i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(i === 0 ? 0 : v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[i]}`;
}

export function num(n, digits = 4) {
  if (n === undefined || n === null || n === '') return '–';
  const v = Number(n);
  if (!Number.isFinite(v)) return String(n);
  if (Number.isInteger(v)) return v.toLocaleString('en-US');
  return Math.abs(v) >= 1000 ? Math.round(v).toLocaleString('en-US') : v.toPrecision(digits);
}

export function duration(s) {
  if (s === undefined || s === null || !Number.isFinite(Number(s)) || s < 0) return '–';
  s = Math.round(s);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

// A labelled form row: label text above the control, an optional hint below.
export function field(label, control, hint) {
  return h('label.field', h('span.label', label), control, hint ? h('span.hint', hint) : null);
}

export function select(options, value, attrs = {}) {
  return h('select', attrs,
    options.map((o) => {
      const [v, text] = Array.isArray(o) ? o : [o, o];
      return h('option', { value: v, selected: String(v) === String(value) }, text);
    }));
}

// One line of feedback in a page: an error from the API, or a quiet note.
export function notice(el, message, kind = 'error') {
  fill(el, message ? h(`div.notice.${kind}`, { role: kind === 'error' ? 'alert' : 'status' }, message) : null);
}

export function badge(status) {
  return h(`span.badge.s-${String(status || 'unknown').replace(/[^\w-]/g, '')}`, status || 'unknown');
}

// Loads a classic script (a library the studio serves under /static/) once, the first time it is
// needed; resolves with the global it defines.
const scripts = new Map();
export function loadScript(src, global) {
  if (window[global]) return Promise.resolve(window[global]);
  if (!scripts.has(src)) {
    scripts.set(src, new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = src;
      s.onload = () => (window[global] ? resolve(window[global]) : reject(new Error(`${src} did not define ${global}`)));
      s.onerror = () => { scripts.delete(src); s.remove(); reject(new Error(`cannot load ${src}`)); };
      document.head.append(s);
    }));
  }
  return scripts.get(src);
}

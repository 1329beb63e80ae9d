// A folder browser over GET /api/fs, limited (by the server) to the --root folders and the runs
// folder. mode 'model' picks Hugging Face folders (is_model), 'file' picks files, 'dir' folders.
import { get } from './api.js';
import { h, fill, bytes } from './dom.js';
import { state, joinPath } from './state.js';

export function picker({ mode, onPick, accept = null, id = '' }) {
  const crumbs = h('div.crumbs');
  const list = h('ul.entries', { role: 'listbox' });
  const msg = h('div.picker-msg');
  const root = h('div.picker', { id: id || null }, crumbs, list, msg);

  const roots = () => [...(state.session?.roots || []), state.session?.runs_dir].filter(Boolean);

  function showRoots() {
    fill(crumbs, h('span.crumb.here', 'folders'));
    fill(list, roots().map((r) => entry({ name: r, type: 'dir' }, r, true)));
    fill(msg);
  }

  async function open(dir) {
    fill(msg, h('span.muted', 'loading…'));
    try {
      const res = await get('/api/fs', { path: dir });
      renderCrumbs(res.path || dir);
      const entries = (res.entries || [])
        .filter((e) => e.type === 'dir' || (mode === 'file' && (!accept || accept.test(e.name))))
        .sort((a, b) => (a.type === b.type ? a.name.localeCompare(b.name) : a.type === 'dir' ? -1 : 1));
      fill(list, entries.length ? entries.map((e) => entry(e, joinPath(res.path || dir, e.name)))
        : h('li.empty', mode === 'file' ? 'no data files here' : 'empty folder'));
      fill(msg);
    } catch (e) {
      fill(msg, h('span.error-text', e.message));
    }
  }

  function renderCrumbs(path) {
    const top = roots().find((r) => path === r || path.startsWith(`${r.replace(/\/+$/, '')}/`));
    const parts = [h('a.crumb', { href: '#', onclick: (ev) => { ev.preventDefault(); showRoots(); } }, 'folders')];
    if (top) {
      let acc = top;
      parts.push(h('span.sep', '/'), h('a.crumb', { href: '#', onclick: (ev) => { ev.preventDefault(); open(top); } }, top));
      for (const p of path.slice(top.length).split('/').filter(Boolean)) {
        acc = joinPath(acc, p);
        const target = acc;
        parts.push(h('span.sep', '/'), h('a.crumb', { href: '#', onclick: (ev) => { ev.preventDefault(); open(target); } }, p));
      }
    } else {
      parts.push(h('span.sep', '/'), h('span.crumb.here', path));
    }
    fill(crumbs, parts);
  }

  function entry(e, path, isRoot = false) {
    const pickable = (mode === 'model' && e.is_model) || (mode === 'file' && e.type === 'file') || (mode === 'dir' && e.type === 'dir');
    const openable = e.type === 'dir' && !(mode === 'model' && e.is_model);
    const icon = e.is_model ? '◆' : e.type === 'dir' ? '▸' : '·';
    return h('li.entry', { 'data-path': path, 'data-type': e.type, class: pickable ? 'entry pickable' : 'entry' },
      h('button.entry-open', {
        type: 'button',
        title: path,
        onclick: () => (pickable && !openable ? onPick(path, e) : openable ? open(path) : null),
      }, h('span.icon', icon), h('span.name', isRoot ? path : e.name),
      e.is_model ? h('span.tag', 'model') : null,
      e.type === 'file' && e.size !== undefined ? h('span.size', bytes(e.size)) : null),
      pickable && openable ? h('button.small', { type: 'button', onclick: () => onPick(path, e) }, 'choose') : null);
  }

  showRoots();
  return { el: root, open, showRoots };
}

// loft studio's page: the session, the tabs (one per #hash) and the model chosen across them.
// Each page is fetched and built the first time it is shown, so loading does no more than the shell.
import { session } from './api.js';
import { h, fill, $ } from './dom.js';
import { state, on, setModel, remembered, baseName } from './state.js';

// Each page's module is fetched the first time the page is shown.
const PAGES = [
  ['model', 'Model', () => import('./page-model.js').then((m) => m.modelPage)],
  ['data', 'Data', () => import('./page-data.js').then((m) => m.dataPage)],
  ['train', 'Train', () => import('./page-train.js').then((m) => m.trainPage)],
  ['runs', 'Runs', () => import('./page-runs.js').then((m) => m.runsPage)],
  ['evaluate', 'Evaluate', () => import('./page-evaluate.js').then((m) => m.evaluatePage)],
  ['chat', 'Chat', () => import('./page-chat.js').then((m) => m.chatPage)],
  ['export', 'Export', () => import('./page-export.js').then((m) => m.exportPage)],
];
const built = new Map();
let current = '';

async function show(name) {
  if (!PAGES.some(([n]) => n === name)) name = 'model';
  if (name === current) return;
  const prev = built.get(current);
  if (prev) { prev.el.hidden = true; if (prev.hide) prev.hide(); }
  current = name;
  let page = built.get(name);
  if (!page) {
    try {
      const make = await PAGES.find(([n]) => n === name)[2]();
      page = built.get(name) || make();  // another show() may have built it meanwhile
    } catch (e) {
      page = { el: h('div.card', h('p.error-text', `cannot load this page: ${e.message}`)) };
    }
    page.el.dataset.page = name;
    if (!built.has(name)) { $('#pages').append(page.el); built.set(name, page); }
    page.el.hidden = true;
    if (current !== name) return;  // the user moved on while it loaded
  }
  page.el.hidden = false;
  if (page.show) page.show();
  document.body.dataset.page = name;
  for (const a of document.querySelectorAll('#tabs a')) a.setAttribute('aria-current', a.dataset.page === name ? 'page' : 'false');
  document.title = `${PAGES.find(([n]) => n === name)[1]} · loft studio`;
}

function chosenModel() {
  fill($('#chosen-model'), state.model ? [h('span.muted', 'model '), h('strong', { title: state.model }, baseName(state.model))]
    : h('span.muted', 'no model chosen'));
}

async function main() {
  fill($('#tabs'), PAGES.map(([name, label]) => h('a', { href: `#${name}`, 'data-page': name }, label)));
  try {
    state.session = await session();
  } catch (e) {
    fill($('#pages'), h('div.card.signin', h('h2', 'loft studio'), h('p', e.message)));
    return;
  }
  fill($('#version'), `loft ${state.session.version || ''}`);
  on('model', chosenModel);
  const model = remembered('model');
  if (model) setModel(model);
  chosenModel();
  window.addEventListener('hashchange', () => show(location.hash.slice(1)));
  show(location.hash.slice(1));
  document.body.dataset.ready = '1';
}

main();

// loft studio's page: the session, the tabs (one per #hash) and the model chosen across them.
// Each page is built the first time it is shown, so loading the page does no more than the shell.
import { session } from './api.js';
import { h, fill, $ } from './dom.js';
import { state, on, setModel, remembered, baseName } from './state.js';
import { modelPage } from './page-model.js';
import { dataPage } from './page-data.js';
import { trainPage } from './page-train.js';
import { runsPage } from './page-runs.js';
import { evaluatePage } from './page-evaluate.js';
import { chatPage } from './page-chat.js';
import { exportPage } from './page-export.js';

const PAGES = [
  ['model', 'Model', modelPage],
  ['data', 'Data', dataPage],
  ['train', 'Train', trainPage],
  ['runs', 'Runs', runsPage],
  ['evaluate', 'Evaluate', evaluatePage],
  ['chat', 'Chat', chatPage],
  ['export', 'Export', exportPage],
];
const built = new Map();
let current = '';

function show(name) {
  if (!PAGES.some(([n]) => n === name)) name = 'model';
  if (name === current) return;
  const prev = built.get(current);
  if (prev) { prev.el.hidden = true; if (prev.hide) prev.hide(); }
  let page = built.get(name);
  if (!page) {
    const make = PAGES.find(([n]) => n === name)[2];
    page = make();
    page.el.dataset.page = name;
    $('#pages').append(page.el);
    built.set(name, page);
  }
  page.el.hidden = false;
  if (page.show) page.show();
  current = name;
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

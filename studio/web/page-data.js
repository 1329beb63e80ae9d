// Data page: choose dataset files and see them as training will: records rendered through the
// chat template with the trained spans highlighted, a histogram of token lengths and how many
// examples --seq truncates (GET /api/data/inspect, one request per file).
import { get } from './api.js';
import { h, fill, field, select, num, notice } from './dom.js';
import { state, on, setData, baseName } from './state.js';
import { picker } from './picker.js';
import { histogram } from './charts.js';

const TEMPLATES = ['auto', 'alpaca', 'llama2', 'llama3', 'llama3.1', 'chatml', 'qwen2.5', 'qwen3', 'qwen3-no-thinking', 'mistral', 'mistral-v3', 'plain'];
const DATA_FILES = /\.(jsonl|json|txt|zst|jsonl\.zst)$/i;

export function dataPage() {
  const chosen = h('ul.chosen-files#data-files');
  const pick = picker({ mode: 'file', accept: DATA_FILES, id: 'data-picker', onPick: (p) => {
    if (!state.data.includes(p)) setData([...state.data, p]);
  } });
  const template = select(TEMPLATES, 'auto', { id: 'data-template' });
  const seq = h('input#data-seq', { type: 'number', min: 2, value: 512 });
  const examples = h('input#data-examples', { type: 'number', min: 1, max: 50, value: 3 });
  const msg = h('div');
  const results = h('div#data-results', h('p.muted', 'Choose a model and a data file.'));
  const inspect = h('button.primary#data-inspect', { type: 'button', onclick: () => run() }, 'Inspect');

  const el = h('section.page-grid',
    h('div.col-narrow',
      h('div.card', h('h2', 'Dataset files'), chosen,
        h('p.hint', 'Files chosen here are the Train page\'s datasets.')),
      h('div.card', h('h2', 'Browse'), pick.el)),
    h('div.col-wide', msg,
      h('div.card', h('h2', 'As training sees it'),
        h('div.controls', field('template', template), field('--seq', seq), field('examples shown', examples), inspect)),
      results));

  function renderChosen() {
    fill(chosen, state.data.length ? state.data.map((p) => h('li',
      h('span.name', { title: p }, baseName(p)),
      h('button.link', { type: 'button', 'aria-label': `remove ${p}`, onclick: () => setData(state.data.filter((x) => x !== p)) }, 'remove')))
      : h('li.empty', 'none yet: pick a .jsonl, .json or .txt file'));
  }

  async function run() {
    if (!state.model) { notice(msg, 'choose a model first (Model page): its tokenizer and template render the data'); return; }
    if (!state.data.length) { notice(msg, 'choose a data file'); return; }
    notice(msg, '');
    fill(results, h('p.muted', 'reading…'));
    const blocks = [];
    for (const file of state.data) {
      try {
        const r = await get('/api/data/inspect', { model: state.model, data: file, template: template.value,
                                                   seq: seq.value, examples: examples.value });
        blocks.push(...fileBlocks(r, file, Number(seq.value)));
      } catch (e) {
        blocks.push(h('div.card', h('h3', baseName(file)), h('p.error-text', e.message)));
      }
    }
    fill(results, blocks);
    for (const c of results.querySelectorAll('canvas[data-bins]')) {
      histogram(c, JSON.parse(c.dataset.bins), 'examples').then(() => { c.dataset.drawn = '1'; }, (e) => notice(msg, e.message));
    }
  }

  on('data', () => { renderChosen(); if (state.model && state.data.length) run(); });
  on('model', () => { if (state.data.length) run(); });
  renderChosen();
  return { el };
}

// One card per inspected file: summary numbers, the length histogram, the rendered examples.
function fileBlocks(r, file, seq) {
  const files = Array.isArray(r.files) ? r.files : [r];
  return files.map((f) => {
    const lengths = f.lengths || f.length_stats || {};
    const count = lengths.count;
    const truncated = f.truncated ?? 0;
    const bins = histogramBins(f.histogram ?? lengths.histogram, seq);
    const shown = Array.isArray(f.examples) ? f.examples : f.shown || [];
    return h('div.card.data-file', { 'data-file': file },
      h('h3', baseName(f.path || file), h('span.muted', ` ${f.format || ''}${f.template ? ` · template ${f.template}` : ''}` +
        `${f.template_origin ? ` (${f.template_origin})` : ''}`)),
      h('div.stats',
        stat('examples', num(count)),
        stat('tokens: median / p90 / max', `${num(lengths.p50)} / ${num(lengths.p90)} / ${num(lengths.max)}`),
        stat('trained tokens', num(f.trained_tokens)),
        stat(`truncated by --seq ${seq}`, num(truncated), truncated > 0 ? 'warn' : ''),
        f.skipped_bad ? stat('bad records skipped', num(f.skipped_bad), 'warn') : null),
      bins.length ? h('div.chart-box.short', h('canvas#data-histogram', { 'data-bins': JSON.stringify(bins), 'aria-label': 'token length histogram' })) : null,
      h('div.examples', shown.map((ex) => example(ex))));
  });
}

function stat(label, value, cls = '') {
  return h('div.stat', { class: `stat ${cls}` }, h('span.value', value), h('span.label', label));
}

// A rendered record: segments [{text, trained}] with the trained ones highlighted.
function example(ex) {
  const segs = ex.segments || [{ text: ex.text || '', trained: false }];
  return h('figure.example',
    h('figcaption', h('span', ex.where || ''), h('span.muted', ` ${num(ex.tokens)} tokens, ${num(ex.trained)} trained`)),
    h('pre.render', segs.map((s) => h(s.trained ? 'mark.trained' : 'span.context', s.text))));
}

// The server's histogram as bars: [{from, to, count}], {edges, counts}, or {length: count} (binned
// here into at most 24 bars). Bars past --seq are marked.
export function histogramBins(hist, seq) {
  if (!hist) return [];
  let bins = [];
  if (Array.isArray(hist)) {
    bins = hist.map((b) => ({ lo: b.from ?? b.lo, hi: b.to ?? b.hi, count: b.count }));
  } else if (Array.isArray(hist.counts)) {
    bins = hist.counts.map((c, i) => ({ lo: hist.edges[i], hi: hist.edges[i + 1], count: c }));
  } else {
    const pairs = Object.entries(hist).map(([k, v]) => [Number(k), Number(v)]).sort((a, b) => a[0] - b[0]);
    if (!pairs.length) return [];
    const lo = pairs[0][0], hi = pairs[pairs.length - 1][0];
    const width = Math.max(1, Math.ceil((hi - lo + 1) / 24));
    const n = Math.ceil((hi - lo + 1) / width);
    bins = Array.from({ length: n }, (_, i) => ({ lo: lo + i * width, hi: lo + (i + 1) * width - 1, count: 0 }));
    for (const [len, c] of pairs) bins[Math.floor((len - lo) / width)].count += c;
  }
  return bins.map((b) => ({ ...b, label: b.lo === b.hi ? `${b.lo}` : `${b.lo}–${b.hi}`, over: Number(b.hi) > seq }));
}

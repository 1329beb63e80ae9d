// Evaluate page: perplexity, MMLU or GSM8K of the base model or base + adapter (POST /api/evaluate,
// a job followed to its end), and the two side by side.
import { post } from './api.js';
import { h, fill, field, select, num, notice } from './dom.js';
import { state, on, fillAdapters, baseName } from './state.js';
import { JobView } from './job-view.js';
import { picker } from './picker.js';

const TASKS = [['ppl', 'perplexity (ppl)'], ['mmlu', 'MMLU'], ['gsm8k', 'GSM8K']];

export function evaluatePage() {
  const msg = h('div');
  const modelLine = h('span.static#eval-model');
  const adapter = h('select#eval-adapter');
  const task = select(TASKS, 'ppl', { id: 'eval-task' });
  const data = h('input#eval-data', { type: 'text', placeholder: 'a text/JSONL file (ppl) or a task folder' });
  const limit = h('input#eval-limit', { type: 'number', min: 1, placeholder: 'all' });
  const pick = picker({ mode: 'file', id: 'eval-picker', onPick: (p) => { data.value = p; } });
  const jobs = h('div.jobs#eval-jobs');
  const compare = h('div#eval-compare');

  const el = h('section.page-grid',
    h('div.col-narrow', h('div.card', h('h2', 'Data'), h('p.hint', 'A file for ppl; a folder (dev/ and test/, or train.jsonl and test.jsonl) for MMLU and GSM8K.'), pick.el)),
    h('div.col-wide', msg,
      h('div.card', h('h2', 'Evaluate'),
        h('div.controls',
          field('model', modelLine), field('adapter', adapter), field('task', task)),
        h('div.controls', field('data', data), field('limit', limit, 'per subject (MMLU); questions (GSM8K)')),
        h('div.actions',
          h('button#eval-base', { type: 'button', onclick: () => start(['base']) }, 'Evaluate base'),
          h('button#eval-adapter-run', { type: 'button', onclick: () => start(['adapter']) }, 'Evaluate adapter'),
          h('button.primary#eval-both', { type: 'button', onclick: () => start(['base', 'adapter']) }, 'Base vs adapter'))),
      h('div.card', h('h2', 'Side by side'), compare),
      h('div.card', h('h2', 'Jobs'), jobs)));

  async function start(which) {
    notice(msg, '');
    if (!state.model) { notice(msg, 'choose a model first (Model page)'); return; }
    if (!data.value.trim()) { notice(msg, 'give the data to evaluate on'); return; }
    if (which.includes('adapter') && !adapter.value) { notice(msg, 'choose an adapter (a finished run\'s adapter/)'); return; }
    const columns = {};
    const table = comparison(which);
    for (const side of which) {
      const body = { model: state.model, task: task.value, data: data.value.trim() };
      if (side === 'adapter') body.adapter = adapter.value;
      if (limit.value) body.limit = Number(limit.value);
      try {
        const { id } = await post('/api/evaluate', body);
        const title = `${task.value} · ${side === 'base' ? baseName(state.model) : `adapter ${adapter.selectedOptions[0]?.textContent || adapter.value}`}`;
        const view = new JobView(id, title, (job) => resultTable(summary(job.result)), (job) => {
          columns[side] = job;
          table.update(columns);
        });
        jobs.prepend(view.el);
      } catch (e) {
        notice(msg, e.message);
        return;
      }
    }
    fill(compare, table.el);
  }

  const loadAdapters = () => fillAdapters(adapter).catch((e) => notice(msg, e.message));

  function showModel() { fill(modelLine, state.model ? baseName(state.model) : 'choose one on the Model page'); }
  on('model', () => { showModel(); loadAdapters(); });
  on('runs', loadAdapters);
  showModel();
  return { el, show() { loadAdapters(); if (!data.value && state.data.length) data.value = state.data[0]; } };
}

// The numbers worth showing from a report: [[label, value]].
export function summary(r) {
  if (!r) return [];
  if (r.ppl !== undefined) return [['perplexity', num(r.ppl, 5)], ['mean NLL', num(r.nll, 5)], ['tokens', num(r.tokens)], ['documents', num(r.documents)]];
  const m = r.metrics || {};
  if (m.acc !== undefined) {
    return [['accuracy', num(m.acc, 4)], ['correct', `${num(m.correct)} / ${num(m.questions)}`],
      ...Object.entries(m.categories || {}).map(([k, v]) => [k, `${num(v.acc, 4)} (${v.correct}/${v.questions})`])];
  }
  if (m.exact_match) {
    return [...Object.entries(m.exact_match).map(([k, v]) => [`exact match, ${k}`, num(v, 4)]), ['questions', num(m.questions)]];
  }
  return Object.entries(r).filter(([, v]) => typeof v !== 'object').map(([k, v]) => [k, String(v)]);
}

function resultTable(rows) {
  return h('table.kv-table', h('tbody', rows.map(([k, v]) => h('tr', h('th', k), h('td.num', v)))));
}

// The base and adapter columns of one comparison, filled as their jobs end.
function comparison(sides) {
  const el = h('div.compare', h('p.muted', 'running…'));
  return {
    el,
    update(cols) {
      const done = sides.filter((s) => cols[s]);
      const sums = Object.fromEntries(done.map((s) => [s, summary(cols[s].result)]));
      const labels = ['status', ...new Set(done.flatMap((s) => sums[s].map(([k]) => k)))];
      fill(el, h('table.fit.compare-table#eval-compare-table',
        h('thead', h('tr', h('th', ''), sides.map((s) => h('th.num', s)))),
        h('tbody', labels.map((k) => h('tr', h('th', k), sides.map((s) => {
          const job = cols[s];
          if (!job) return h('td.num.muted', '…');
          if (k === 'status') return h('td.num', job.status);
          if (job.status !== 'finished') return h('td.num.muted', '–');
          const row = sums[s].find(([l]) => l === k);
          return h('td.num', row ? row[1] : '–');
        }))))));
    },
  };
}

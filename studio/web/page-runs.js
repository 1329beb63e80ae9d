// Runs page: every run folder under --runs with its status (GET /api/runs, refreshed while the
// page is shown), several runs' curves overlaid on one chart, and a run's report.html.
import { get } from './api.js';
import { h, fill, badge, num, notice, select } from './dom.js';
import { state, on, emit, newestFirst } from './state.js';
import { SeriesChart } from './charts.js';

const REFRESH_MS = 3000;
const OVERLAY_KEYS = [['loss', 'training loss'], ['val_loss', 'validation loss'], ['lr', 'learning rate'],
                      ['grad_norm', 'grad norm'], ['tokens_per_s', 'tokens / s']];

export function runsPage() {
  const msg = h('div');
  const table = h('div#runs-table', h('p.muted', 'loading…'));
  const curve = select(OVERLAY_KEYS, 'loss', { id: 'overlay-curve' });
  const canvas = h('canvas#overlay-chart', { 'aria-label': 'runs overlaid' });
  const overlay = new SeriesChart(canvas, { series: [], legend: true });
  const report = h('div#run-report', h('p.muted', 'Choose "report" on a run to read it here.'));
  const chosen = new Set();
  const metricsCache = new Map();  // id -> metrics of a run that has ended
  let runs = [], timer = 0, visible = false;

  const el = h('section.page-stack', msg,
    h('div.card', h('div.card-head', h('h2', 'Runs'), h('div.spacer'), h('button', { type: 'button', onclick: () => refresh() }, 'Refresh')), table),
    h('div.card', h('div.card-head', h('h2', 'Overlay'), h('div.spacer'), curve),
      h('p.hint', 'Tick runs in the table to draw them together.'),
      h('div.chart-box.tall', canvas)),
    h('div.card', h('h2', 'Report'), report));

  async function refresh() {
    clearTimeout(timer);
    try {
      runs = await get('/api/runs');
      notice(msg, '');
      render();
      await drawOverlay();
    } catch (e) {
      notice(msg, e.message);
    }
    if (visible) timer = setTimeout(refresh, REFRESH_MS);
  }

  function render() {
    const sorted = [...runs].sort(newestFirst);
    fill(table, sorted.length ? h('table.runs',
      h('thead', h('tr', ['', 'run', 'status', 'step', 'loss', 'method', 'model', 'started', ''].map((c) => h('th', c)))),
      h('tbody', sorted.map((r) => h('tr', { 'data-run': r.id },
        h('td', h('input', { type: 'checkbox', checked: chosen.has(r.id), 'aria-label': `overlay ${r.name || r.id}`,
                             onchange: (e) => { if (e.target.checked) chosen.add(r.id); else chosen.delete(r.id); drawOverlay(); } })),
        h('td', h('strong', r.name || r.id), h('div.hint', r.dir || '')),
        h('td', badge(r.status)),
        h('td.num', r.steps ? `${num(r.step)} / ${num(r.steps)}` : num(r.step)),
        h('td.num', num(r.loss, 4)),
        h('td', r.method || '–'),
        h('td', h('span', { title: r.model || '' }, shortPath(r.model))),
        h('td', when(r.started)),
        h('td.row-actions',
          h('button.small', { type: 'button', onclick: () => { state.run = r.id; emit('follow', r.id); location.hash = '#train'; } }, 'follow'),
          h('button.small', { type: 'button', onclick: () => showReport(r) }, 'report'))))))
      : h('p.muted', 'No runs yet: start one on the Train page (or with loft finetune --out inside the runs folder).'));
  }

  async function drawOverlay() {
    const ids = [...chosen].filter((id) => runs.some((r) => r.id === id));
    const data = [];
    for (const id of ids) {
      const run = runs.find((r) => r.id === id);
      let metrics = metricsCache.get(id);
      if (!metrics) {
        const detail = await get(`/api/runs/${encodeURIComponent(id)}`);
        metrics = detail.metrics || [];
        if (['finished', 'failed', 'stopped'].includes(detail.status)) metricsCache.set(id, metrics);
      }
      data.push({ run, metrics });
    }
    const k = curve.value;
    await overlay.reset(data.map((d) => ({ label: d.run.name || d.run.id })),
      data.map((d) => d.metrics.filter((m) => Number.isFinite(Number(m[k]))).map((m) => ({ x: Number(m.step), y: Number(m[k]) }))));
  }

  // The report is one static HTML file. The server forbids framing its responses, so the page
  // fetches it and shows it as the srcdoc of a frame sandboxed without scripts or an origin.
  async function showReport(r) {
    const src = `/api/runs/${encodeURIComponent(r.id)}/report`;
    fill(report, h('p.muted', 'making the report…'));
    try {
      const res = await fetch(src, { credentials: 'same-origin' });
      if (!res.ok) throw new Error((await res.json().catch(() => ({}))).error || `${src}: HTTP ${res.status}`);
      const frame = h('iframe.report#report-frame', { sandbox: '', title: `report of ${r.name || r.id}` });
      frame.srcdoc = await res.text();
      fill(report,
        h('div.card-head', h('strong', r.name || r.id), h('div.spacer'), h('a', { href: src, target: '_blank', rel: 'noopener' }, 'open in a new tab')),
        frame);
      report.scrollIntoView({ behavior: 'smooth', block: 'start' });
    } catch (e) {
      fill(report, h('p.error-text', e.message));
    }
  }

  curve.addEventListener('change', drawOverlay);
  on('runs', () => { if (visible) refresh(); });
  return {
    el,
    show() { visible = true; refresh(); },
    hide() { visible = false; clearTimeout(timer); },
  };
}

function shortPath(p) {
  const parts = String(p || '').split('/').filter(Boolean);
  return parts.length > 2 ? `…/${parts.slice(-2).join('/')}` : p || '–';
}

function when(t) {
  if (!t) return '–';
  const d = new Date(typeof t === 'number' ? t * 1000 : t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'short' });
}

// One run, live: status, progress and ETA, the six curves (loss, validation loss, learning rate,
// grad norm, tokens/s, memory) and the log tail, updated from the run's event stream (or by
// polling when the stream is unavailable) within a second of each metrics.jsonl line.
import { followRun, post } from './api.js';
import { h, fill, badge, num, duration, notice } from './dom.js';
import { SeriesChart } from './charts.js';

const CURVES = [
  { key: 'loss', title: 'training loss' },
  { key: 'val_loss', title: 'validation loss', points: true, empty: 'no validation yet (val_fraction or val_data, eval_every)' },
  { key: 'lr', title: 'learning rate' },
  { key: 'grad_norm', title: 'grad norm' },
  { key: 'tokens_per_s', title: 'tokens / s' },
  { key: 'peak_memory', title: 'peak memory (GiB)', scale: 1 / 2 ** 30 },
];
const LOG_LINES = 300;

export class RunView {
  constructor(id, { onChange } = {}) {
    this.id = id;
    this.onChange = onChange;
    this.metrics = new Map();  // step -> metrics line (a resumed run may repeat steps)
    this.logLines = [];
    this.status = '';
    this.detail = {};
    this.title = h('h2.run-title', id);
    this.badge = h('span');
    this.progress = h('progress#run-progress', { max: 1, value: 0 });
    this.facts = h('div.stats#run-facts');
    this.msg = h('div');
    this.stopBtn = h('button#run-stop', { type: 'button', onclick: () => this.#act('stop') }, 'Stop');
    this.resumeBtn = h('button#run-resume', { type: 'button', onclick: () => this.#act('resume') }, 'Resume');
    this.log = h('pre.log#run-log');
    this.charts = CURVES.map((c) => {
      const canvas = h('canvas', { 'data-curve': c.key, 'aria-label': c.title });
      const box = h('div.chart-card', h('div.chart-title', c.title, h('span.latest')), h('div.chart-box', canvas),
        c.empty ? h('div.chart-empty', c.empty) : null);
      return { ...c, canvas, box, chart: new SeriesChart(canvas, { series: [{ label: c.title, points: c.points }] }) };
    });
    this.el = h('div.card.run-view#run-view', { 'data-run': id },
      h('div.run-head', this.title, this.badge, h('div.spacer'), this.stopBtn, this.resumeBtn),
      this.progress, this.facts, this.msg,
      h('div.chart-grid', this.charts.map((c) => c.box)),
      h('details.log-box', { open: true }, h('summary', 'log'), this.log));
    this.#follow();
    this.#renderFacts();
  }

  #follow() {
    this.stop = followRun(this.id, {
      onMetric: (m) => this.#metric(m),
      onLog: (text, replace) => this.#logLine(text, replace),
      onStatus: (s) => this.#status(s),
      onDetail: (d) => this.#detail(d),
    });
  }

  #metric(m) {
    if (!m || typeof m !== 'object' || m.step === undefined) return;
    this.metrics.set(Number(m.step), { ...(this.metrics.get(Number(m.step)) || {}), ...m });
    this.#scheduleDraw();
  }

  // Several lines can arrive together (a history, a burst): draw once per frame.
  #scheduleDraw() {
    if (this.drawQueued) return;
    this.drawQueued = true;
    requestAnimationFrame(() => {
      this.drawQueued = false;
      const rows = [...this.metrics.values()].sort((a, b) => a.step - b.step);
      for (const c of this.charts) {
        const pts = rows.filter((r) => Number.isFinite(Number(r[c.key])))
          .map((r) => ({ x: Number(r.step), y: Number(r[c.key]) * (c.scale || 1) }));
        c.chart.set(0, pts);
        c.box.classList.toggle('has-data', pts.length > 0);
        fill(c.box.querySelector('.latest'), pts.length ? num(pts[pts.length - 1].y, 4) : '');
      }
      this.#renderFacts();
    });
  }

  #logLine(line, replace = false) {
    if (replace) this.logLines = [];
    this.logLines.push(...String(line).split('\n').filter((l) => l.length));
    if (this.logLines.length > LOG_LINES) this.logLines.splice(0, this.logLines.length - LOG_LINES);
    const atBottom = this.log.scrollTop + this.log.clientHeight >= this.log.scrollHeight - 4;
    this.log.textContent = this.logLines.join('\n');
    if (atBottom) this.log.scrollTop = this.log.scrollHeight;
  }

  #status(s) {
    if (!s || s === this.status) return;
    this.status = s;
    this.el.dataset.status = s;
    fill(this.badge, badge(s));
    this.stopBtn.disabled = !['queued', 'running'].includes(s);
    this.resumeBtn.disabled = !['stopped', 'failed'].includes(s);
    this.#renderFacts();
    if (this.onChange) this.onChange(s);
  }

  #detail(d) {
    this.detail = d || {};
    if (d.name) fill(this.title, d.name);
    if (d.error) notice(this.msg, d.error);
    this.#renderFacts();
  }

  #renderFacts() {
    const rows = [...this.metrics.values()];
    const last = rows.reduce((a, b) => (!a || b.step > a.step ? b : a), null);
    const d = this.detail;
    const step = last ? last.step : d.step ?? 0;
    const steps = d.steps || (d.config && (d.config.max_steps || d.config.steps)) || 0;
    this.progress.max = steps || 1;
    this.progress.value = steps ? Math.min(step, steps) : 0;
    fill(this.facts,
      fact('step', steps ? `${num(step)} / ${num(steps)}` : num(step)),
      fact('loss', last && last.loss !== undefined ? num(last.loss, 4) : d.loss !== undefined ? num(d.loss, 4) : '–'),
      fact('ETA', this.status === 'running' ? duration(this.#eta(step, steps, rows)) : '–'),
      fact('method', d.method || d.config?.method || d.config?.adapter || '–'),
      fact('folder', d.dir || '–'));
  }

  // The server's eta_s when it has one, else the remaining steps at the recent step time.
  #eta(step, steps, rows) {
    if (this.detail.eta_s !== undefined && this.detail.eta_s !== null && this.status === 'running' && rows.length < 2) return this.detail.eta_s;
    const recent = rows.sort((a, b) => a.step - b.step).slice(-10).map((r) => Number(r.step_seconds)).filter(Number.isFinite);
    if (!recent.length || !steps) return this.detail.eta_s;
    return (steps - step) * (recent.reduce((a, b) => a + b, 0) / recent.length);
  }

  async #act(what) {
    notice(this.msg, '');
    try {
      await post(`/api/runs/${encodeURIComponent(this.id)}/${what}`);
      if (what === 'resume') {  // a new child: follow its stream afresh
        this.stop();
        this.status = '';
        this.#follow();
      }
    } catch (e) {
      notice(this.msg, e.message);
    }
  }

  dispose() {
    this.stop();
    for (const c of this.charts) c.chart.destroy();
  }
}

function fact(label, value) {
  return h('div.stat', h('span.value', value), h('span.label', label));
}

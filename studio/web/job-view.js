// A background job (evaluate, export) as a card: status, the last progress line, its result when it
// ends, the log tail and a stop button (GET /api/jobs/ID every second, POST /api/jobs/ID/stop).
import { followJob, post } from './api.js';
import { h, fill, badge } from './dom.js';

export class JobView {
  // renderResult(job) -> element(s) for a finished job's result.
  constructor(id, title, renderResult, onEnd) {
    this.id = id;
    this.badge = h('span', badge('queued'));
    this.progress = h('div.progress-line', 'waiting…');
    this.result = h('div.job-result');
    this.log = h('pre.log.small');
    this.stopBtn = h('button.small', { type: 'button', onclick: () => post(`/api/jobs/${encodeURIComponent(id)}/stop`).catch(() => {}) }, 'Stop');
    this.el = h('div.job', { 'data-job': id, 'data-status': 'queued' },
      h('div.job-head', h('strong', title), this.badge, h('div.spacer'), this.stopBtn),
      this.progress, this.result, h('details', h('summary', 'log'), this.log));
    let ended = false;
    this.stop = followJob(id, (job) => {
      this.job = job;
      this.el.dataset.status = job.status;
      fill(this.badge, badge(job.status));
      const running = ['queued', 'running', 'stopping'].includes(job.status);
      this.stopBtn.hidden = !running;
      // While it runs, its last output line; once it ends, its result or error says the rest.
      fill(this.progress, job.error ? h('span.error-text', job.error) : running ? job.progress || 'running…' : '');
      if (job.log_tail) this.log.textContent = job.log_tail;
      if (!running && !ended) {
        ended = true;
        if (job.status === 'finished' && job.result) fill(this.result, renderResult(job));
        if (onEnd) onEnd(job);
      }
    });
  }
}

// Export page: every `loft export` format and option (README's `loft export`), run as a job
// (POST /api/exports) with its progress line, and where the result was written.
import { post } from './api.js';
import { h, fill, field, select, notice } from './dom.js';
import { state, on, fillAdapters, baseName, joinPath } from './state.js';
import { JobView } from './job-view.js';

const FORMATS = [
  ['gguf', 'gguf: llama.cpp model (merged)'],
  ['gguf-lora', 'gguf-lora: llama.cpp adapter'],
  ['bf16', 'bf16: merged safetensors'],
  ['fp8', 'fp8: E4M3 safetensors (vLLM, transformers)'],
  ['peft', 'peft: plain PEFT LoRA adapter'],
];
const NEEDS_ADAPTER = new Set(['peft', 'gguf-lora']);
const METHODS = [['', 'the adapter\'s recorded method'], 'lora', 'qlora', 'falqon', 'halo', 'hot'];

export function exportPage() {
  const msg = h('div');
  const adapter = h('select#export-adapter');
  const format = select(FORMATS, 'gguf', { id: 'export-format' });
  const out = h('input#export-out', { type: 'text' });
  const fp8Layout = select([['channel', 'channel (default)'], 'block', 'tensor'], 'channel', { id: 'export-fp8-layout' });
  const ggufType = select([['', 'default (f16; f32 for gguf-lora)'], 'f16', 'bf16', 'q8_0', 'f32'], '', { id: 'export-gguf-type' });
  const shard = h('input#export-shard', { type: 'text', placeholder: '5GB' });
  const method = select(METHODS, '', { id: 'export-method' });
  const overwrite = h('input#export-overwrite', { type: 'checkbox' });
  const jobs = h('div.jobs#export-jobs');
  const rows = {
    fp8: field('--fp8-layout', fp8Layout, 'channel: per output channel (FP8_DYNAMIC); tensor: one scale; block: 128×128 blocks'),
    gguf: field('--gguf-type', ggufType, 'q8_0 falls back to f16 for rows not a multiple of 32; norms stay f32'),
    shard: field('--max-shard-size', shard, 'largest safetensors shard: 5GB, 500MB, 2GiB'),
  };
  let outTouched = false;

  const el = h('section.page-stack', msg,
    h('div.card', h('h2', 'Export'),
      h('div.controls',
        field('model', h('span.static#export-model')), field('adapter', adapter), field('format', format), field('method', method)),
      h('div.controls', field('--out', out, 'under the runs folder or a root; a path ending in .gguf is the file itself'),
        rows.fp8, rows.gguf, rows.shard, h('label.check', overwrite, h('span', 'replace an existing --out'))),
      h('div.actions', h('button.primary#export-start', { type: 'button', onclick: () => start() }, 'Export'))),
    h('div.card', h('h2', 'Exports'), jobs));

  // Beside the adapter, in its run's folder (or in the runs folder for the base alone): export
  // needs the parent folder to exist.
  function defaultOut() {
    const dir = adapter.value ? adapter.value.replace(/\/adapter\/?$/, '') : state.session?.runs_dir || 'runs';
    const name = baseName(state.model) || 'model';
    const f = format.value;
    return joinPath(dir, f === 'gguf' ? `${name}.gguf` : f === 'gguf-lora' ? 'adapter.gguf' : `${name}-${f}`);
  }

  function update() {
    const f = format.value;
    rows.fp8.hidden = f !== 'fp8';
    rows.gguf.hidden = !f.startsWith('gguf');
    rows.shard.hidden = !['fp8', 'bf16'].includes(f);
    fill(el.querySelector('#export-model'), state.model ? baseName(state.model) : 'choose one on the Model page');
    if (!outTouched) out.value = defaultOut();
  }

  async function start() {
    notice(msg, '');
    if (!state.model) { notice(msg, 'choose a model first (Model page)'); return; }
    const f = format.value;
    if (NEEDS_ADAPTER.has(f) && !adapter.value) { notice(msg, `--format ${f} needs an adapter`); return; }
    const body = { model: state.model, format: f, out: out.value.trim() };
    if (adapter.value) body.adapter = adapter.value;
    if (method.value) body.method = method.value;
    if (f === 'fp8') body.fp8_layout = fp8Layout.value;
    if (f.startsWith('gguf') && ggufType.value) body.gguf_type = ggufType.value;
    if (['fp8', 'bf16'].includes(f) && shard.value.trim()) body.max_shard_size = shard.value.trim();
    if (overwrite.checked) body.overwrite = true;
    try {
      const { id } = await post('/api/exports', body);
      const view = new JobView(id, `${f} → ${body.out}`, (job) => where(job, body.out));
      jobs.prepend(view.el);
    } catch (e) {
      notice(msg, e.message);
    }
  }

  const loadAdapters = () => fillAdapters(adapter).then(() => {
    if (![...adapter.options].some((o) => o.value === '')) adapter.prepend(h('option', { value: '' }, 'none: convert the base'));
    update();
  }).catch((e) => notice(msg, e.message));

  out.addEventListener('input', () => { outTouched = out.value.trim() !== ''; });
  for (const c of [format, adapter]) c.addEventListener('change', update);
  on('model', () => { loadAdapters(); });
  on('runs', loadAdapters);
  update();
  return { el, show() { loadAdapters(); } };
}

// Where the export went, and what the job's result says about it.
function where(job, out) {
  const r = job.result || {};
  const path = r.out || r.path || out;
  const facts = Object.entries(r).filter(([k, v]) => !['out', 'path'].includes(k) && v !== null && typeof v !== 'object');
  return [h('p.where', 'written to ', h('code.export-where', path)),
    facts.length ? h('table.kv-table', h('tbody', facts.map(([k, v]) => h('tr', h('th', k), h('td', String(v)))))) : null];
}

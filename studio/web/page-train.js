// Train page: every finetune option (grouped, defaults shown), a YAML recipe in or out, check
// what the options resolve to (POST /api/runs/plan: `loft finetune --plan`), start a run
// (POST /api/runs) and follow it live; stop and resume it.
import { get, post } from './api.js';
import { h, fill, notice, bytes, num } from './dom.js';
import { state, on, emit, baseName } from './state.js';
import { OptionsForm } from './train-options.js';
import { RunView } from './run-view.js';
import { parseRecipe, dumpRecipe } from './yaml.js';

const MODEL_KEYS = ['base_model', 'model'];
const DATA_KEYS = ['datasets', 'data'];

export function trainPage() {
  const msg = h('div');
  const formBox = h('div#train-form', h('p.muted', 'loading the options…'));
  const runBox = h('div#train-run', h('div.card.empty-run', h('p.muted', 'Start a run, or open one from the Runs page, to follow it here.')));
  const fileInput = h('input#recipe-file', { type: 'file', accept: '.yaml,.yml', hidden: true, onchange: () => importRecipe() });
  const startBtn = h('button.primary#train-start', { type: 'button', onclick: () => start() }, 'Start training');
  const planBtn = h('button#train-plan', { type: 'button', onclick: () => checkPlan() }, 'Check plan');
  const planBox = h('div#train-plan-box');
  const summary = h('p.hint#train-summary');
  let form = null, view = null;

  const el = h('section.page-stack',
    msg,
    h('div.card',
      h('div.card-head', h('h2', 'Finetune options'), h('div.spacer'),
        h('button#recipe-import', { type: 'button', onclick: () => fileInput.click() }, 'Import recipe…'),
        h('button#recipe-export', { type: 'button', onclick: () => exportRecipe() }, 'Export recipe'),
        h('button.link#train-reset', { type: 'button', onclick: () => form && (form.clear(), prefill(), fill(planBox)) }, 'reset'), fileInput),
      summary, formBox, planBox,
      h('div.actions', planBtn, startBtn)),
    runBox);

  const key = (keys) => keys.find((k) => form && form.has(k)) || keys[0];

  function prefill() {
    if (!form) return;
    if (state.model) form.set(key(MODEL_KEYS), state.model);
    if (state.data.length) form.set(key(DATA_KEYS), state.data);
    summarize();
  }

  function summarize() {
    const model = form.get(key(MODEL_KEYS));
    const data = [form.get(key(DATA_KEYS)) || []].flat().map((d) => (typeof d === 'string' ? d : d.path));
    fill(summary, `model ${model ? baseName(model) : '(choose one on the Model page)'} · data ` +
      `${data.length ? data.map(baseName).join(', ') : '(choose files on the Data page)'}`);
  }

  async function load() {
    try {
      const options = await get('/api/options/finetune');
      form = new OptionsForm(options);
      fill(formBox, form.el);
      prefill();
    } catch (e) {
      fill(formBox);
      notice(msg, e.message);
    }
  }

  function body() {
    const b = form.values();
    if (!MODEL_KEYS.some((k) => k in b) && state.model) b[key(MODEL_KEYS)] = state.model;
    if (!DATA_KEYS.some((k) => k in b) && state.data.length) b[key(DATA_KEYS)] = state.data;
    return b;
  }

  async function start() {
    if (!form) return;
    notice(msg, '');
    startBtn.disabled = true;
    try {
      const r = await post('/api/runs', body());
      follow(r.id);
      emit('runs');
    } catch (e) {
      notice(msg, e.message);
    } finally {
      startBtn.disabled = false;
    }
  }

  // The plan finetune makes of these options: every default it fills in and the memory check.
  async function checkPlan() {
    if (!form) return;
    notice(msg, '');
    planBtn.disabled = true;
    try {
      showPlan(await post('/api/runs/plan', body()));
    } catch (e) {
      fill(planBox);
      notice(msg, e.message);
    } finally {
      planBtn.disabled = false;
    }
  }

  function showPlan(p) {
    const me = p.memory_estimate || {};
    const rows = [
      ['method', `${p.method} r=${p.lora_rank} alpha=${num(p.lora_alpha)} on ${p.targets.length} projection kinds` +
        (p.init_adapter ? ` from ${baseName(p.init_adapter)}` : '')],
      ['trainable', `${p.trainable_parameters.toLocaleString()} parameters`],
      ['batch', `${p.batch} rows = ${p.micro_batch} × ${p.grad_accum} accumulation, seq ${p.seq}`],
      ['schedule', `${p.schedule}, lr ${num(p.lr)}, warmup ${p.warmup}, ` +
        `${p.steps === null ? 'steps: one pass over the data' : `${p.steps} steps`}, clip ${p.max_grad_norm > 0 ? num(p.max_grad_norm) : 'off'}`],
      ['device', `${p.device}${p.gpus ? ` (each of --gpus ${p.gpus})` : ''}${p.grad_checkpointing ? ', grad checkpointing' : ''}`],
      ['memory', `~${bytes(me.total_bytes)} estimated peak: frozen ${bytes(me.frozen_weights_bytes)}, ` +
        `adapter+AdamW ${bytes(me.adapter_bytes)}, activations ${bytes(me.activations_bytes)}, working ${bytes(me.working_bytes)}`],
    ];
    fill(planBox, h('div.plan',
      h('dl.kv#train-plan-table', rows.map(([k, v]) => [h('dt', k), h('dd', v)])),
      fitsLine(p)));
  }

  // fits is null for GPUs this machine lacks (a plan for another machine): fit_error says why.
  function fitsLine(p) {
    if (p.fits === null) return h('p.plan-fits.unknown#train-plan-fits', p.fit_error);
    return h(`p.plan-fits#train-plan-fits.${p.fits ? 'yes' : 'no'}`, p.fits ? 'fits this device' : `does not fit: ${p.fit_error}`);
  }

  function follow(id) {
    if (view && view.id === id) return;
    if (view) view.dispose();
    state.run = id;
    view = new RunView(id, { onChange: () => emit('runs') });
    fill(runBox, view.el);
  }

  async function importRecipe() {
    const file = fileInput.files[0];
    fileInput.value = '';
    if (!file || !form) return;
    notice(msg, '');
    try {
      const doc = await parseRecipe(await file.text(), file.name);
      // The recipe replaces the form (not the model and data chosen on the other pages).
      form.clear();
      for (const [k, v] of Object.entries(doc)) form.set(k, v);
      summarize();
      notice(msg, `imported ${file.name} (${Object.keys(doc).length} keys)`, 'info');
    } catch (e) {
      notice(msg, e.message);
    }
  }

  async function exportRecipe() {
    if (!form) return;
    try {
      const text = `# loft finetune recipe, from loft studio: loft finetune --config recipe.yaml\n${await dumpRecipe(body())}`;
      const a = h('a', { href: URL.createObjectURL(new Blob([text], { type: 'application/yaml' })), download: 'recipe.yaml' });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 1000);
    } catch (e) {
      notice(msg, e.message);
    }
  }

  on('model', prefill);
  on('data', prefill);
  on('follow', (id) => follow(id));
  load();
  if (state.run) follow(state.run);
  return { el };
}

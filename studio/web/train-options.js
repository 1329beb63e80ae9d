// The Train page's form: every finetune option from GET /api/options/finetune (the CLI's own
// definition), grouped, each showing its default; values read back as recipe keys (the body of
// POST /api/runs and of an exported YAML recipe). Keys of an imported recipe that have no field
// (axolotl names such as lora_r, structured datasets) are kept as they are and sent along.
import { h, fill } from './dom.js';

const OPEN_GROUPS = 2;  // the first groups start expanded; the rest are one click away

export class OptionsForm {
  constructor(options) {
    this.options = options;
    this.inputs = new Map();  // recipe_key -> {input, option}
    this.extras = {};
    this.extrasEl = h('div.extras#train-extras');
    this.el = h('div.options#train-options', this.#groups(), this.extrasEl);
  }

  #groups() {
    const groups = new Map();
    for (const o of this.options) {
      const g = o.group || 'other';
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(o);
    }
    return [...groups].map(([name, opts], i) => h('details.group', { open: i < OPEN_GROUPS, 'data-group': name },
      h('summary', name, h('span.count', String(opts.length))),
      h('div.group-fields', opts.map((o) => this.#field(o)))));
  }

  #field(o) {
    const key = o.recipe_key || o.name.replace(/^--/, '').replace(/-/g, '_');
    const def = o.default === undefined || o.default === null ? '' : String(o.default);
    const kind = inputKind(o);
    let input;
    if (kind === 'flag') {
      input = h('input', { type: 'checkbox', checked: def === 'true' || def === '1' });
    } else if (kind === 'choice') {
      input = h('select', h('option', { value: '' }, def ? `${def} (default)` : '(default)'),
        o.choices.filter((c) => String(c) !== def).map((c) => h('option', { value: c }, c)));
    } else {
      input = h('input', { type: kind === 'number' ? 'number' : 'text', step: kind === 'number' ? 'any' : null,
                           placeholder: def || (kind === 'list' ? 'comma-separated' : '') });
    }
    input.dataset.key = key;
    input.id = `opt-${key}`;
    this.inputs.set(key, { input, option: o, kind, def });
    const flagName = (o.name || key).startsWith('-') ? o.name : `--${o.name || key}`;
    return h('label.opt', { class: kind === 'flag' ? 'opt flag' : 'opt', title: o.help || '' },
      kind === 'flag' ? input : null,
      h('span.opt-name', flagName),
      kind === 'flag' ? null : input,
      h('span.opt-help', o.help || ''),
      def && kind !== 'flag' ? h('span.opt-default', `default ${def}`) : null);
  }

  has(key) { return this.inputs.has(key); }

  // Sets one field; a key without a field is kept as an extra.
  set(key, value) {
    const f = this.inputs.get(key);
    if (!f || (typeof value === 'object' && value !== null && !Array.isArray(value)) ||
        (Array.isArray(value) && value.some((v) => typeof v === 'object'))) {
      this.extras[key] = value;
      this.#renderExtras();
      return;
    }
    if (f.kind === 'flag') f.input.checked = value === true || value === 'true' || value === 1;
    else f.input.value = Array.isArray(value) ? value.join(',') : String(value ?? '');
  }

  get(key) {
    const f = this.inputs.get(key);
    return f ? readField(f) : this.extras[key];
  }

  clear() {
    for (const f of this.inputs.values()) {
      if (f.kind === 'flag') f.input.checked = f.def === 'true' || f.def === '1';
      else f.input.value = '';
    }
    this.extras = {};
    this.#renderExtras();
  }

  // Every field the user set (not left at its default), plus the extras, as recipe keys.
  values() {
    const out = {};
    for (const [key, f] of this.inputs) {
      const v = readField(f);
      if (v !== undefined) out[key] = v;
    }
    for (const [k, v] of Object.entries(this.extras)) if (!(k in out)) out[k] = v;
    return out;
  }

  #renderExtras() {
    const keys = Object.keys(this.extras);
    fill(this.extrasEl, keys.length ? [h('h3', 'Other recipe keys'),
      h('p.hint', 'From the imported recipe; sent as they are (the server checks them).'),
      h('ul.chips', keys.map((k) => h('li.chip', h('code', `${k}: ${JSON.stringify(this.extras[k])}`),
        h('button.link', { type: 'button', 'aria-label': `drop ${k}`, onclick: () => { delete this.extras[k]; this.#renderExtras(); } }, '×'))))] : null);
  }
}

function inputKind(o) {
  const t = String(o.type || '').toLowerCase();
  if (t === 'flag' || t === 'bool' || t === 'boolean') return 'flag';
  if (Array.isArray(o.choices) && o.choices.length) return 'choice';
  if (['int', 'integer', 'float', 'double', 'number'].includes(t)) return 'number';
  if (t === 'list' || t === 'strings' || t.endsWith('[]') || t === 'vector') return 'list';
  return 'text';
}

function readField(f) {
  if (f.kind === 'flag') {
    const on = f.input.checked, def = f.def === 'true' || f.def === '1';
    return on === def ? undefined : on;
  }
  const raw = f.input.value.trim();
  if (raw === '') return undefined;
  if (f.kind === 'number') return Number(raw);
  if (f.kind === 'list') return raw.split(',').map((s) => s.trim()).filter(Boolean);
  return raw;
}

// Model page: choose a Hugging Face folder under the roots, see what `loft info` says about it and
// whether each method's training step fits this machine's GPU or a chosen card, live as the batch,
// sequence length, rank and checkpointing change (GET /api/info, debounced).
import { get } from './api.js';
import { h, fill, field, select, debounce, bytes, num, notice } from './dom.js';
import { state, on, setModel, baseName } from './state.js';
import { picker } from './picker.js';

// `loft info --card` values: a card's "24 GB" is 24 GiB (app/gpu_cards.cpp).
const CARDS = [['', 'this machine'], ['12GiB', '12 GB'], ['16GiB', '16 GB'], ['24GiB', '24 GB'], ['48GiB', '48 GB'], ['80GiB', '80 GB']];

export function modelPage() {
  const models = h('ul.model-list#model-list');
  const pick = picker({ mode: 'model', onPick: (p) => setModel(p), id: 'model-picker' });
  const infoBox = h('div#model-info', h('p.muted', 'Choose a model to see its architecture, tokenizer and memory needs.'));
  const msg = h('div');

  const batch = h('input#fit-batch', { type: 'number', min: 1, value: 4 });
  const seq = h('input#fit-seq', { type: 'number', min: 2, value: 512 });
  const rank = h('input#fit-rank', { type: 'number', min: 1, value: 16 });
  const ckpt = h('input#fit-ckpt', { type: 'checkbox' });
  const card = select(CARDS, '', { id: 'fit-card' });
  const fitBody = h('div#fit-table', h('p.muted', 'The estimate appears once a model is chosen.'));
  const fitNote = h('p.hint#fit-note');

  const el = h('section.page-grid',
    h('div.col-narrow',
      h('div.card', h('h2', 'Models under the roots'), models),
      h('div.card', h('h2', 'Browse'), pick.el)),
    h('div.col-wide',
      msg,
      h('div.card', h('h2', 'Model'), infoBox),
      h('div.card',
        h('h2', 'Will it fit?'),
        h('div.controls',
          field('batch', batch), field('sequence length', seq), field('LoRA rank', rank),
          h('label.check', ckpt, h('span', 'gradient checkpointing')),
          field('GPU memory', card)),
        fitBody, fitNote)));

  let pending = null;
  async function refresh() {
    if (!state.model) return;
    if (pending) pending.abort();
    pending = new AbortController();
    // A chosen card is judged by `loft info --card` (with its allowance for the CUDA context and
    // workspaces); this machine's GPU is compared here.
    const params = { model: state.model, batch: batch.value, seq: seq.value, lora_rank: rank.value,
                     grad_checkpointing: ckpt.checked, card: card.value };
    fitBody.classList.add('stale');
    try {
      const info = await get('/api/info', params, { signal: pending.signal });
      notice(msg, '');
      renderInfo(info);
      renderFit(info);
    } catch (e) {
      if (e.name === 'AbortError') return;
      notice(msg, e.message);
    } finally {
      fitBody.classList.remove('stale');
    }
  }
  const later = debounce(refresh, 250);
  for (const input of [batch, seq, rank, ckpt, card]) input.addEventListener('input', later);

  function renderInfo(j) {
    const tok = j.tokenizer || {};
    const tpl = j.chat_template || {};
    const row = (k, v) => [h('dt', k), h('dd', v)];
    fill(infoBox,
      h('div.model-title', h('strong', baseName(j.model || state.model)), h('span.muted', j.model || state.model)),
      h('dl.kv',
        row('architecture', `${j.architecture || 'Llama'} · ${j.layers} layers · hidden ${j.hidden_size} · ` +
          `${j.num_attention_heads} heads / ${j.num_key_value_heads} KV · head_dim ${j.head_dim}`),
        row('parameters', `${num(j.parameters)} (${(j.dtypes_on_disk || []).join(', ')} on disk)`),
        row('context', `${num(j.max_position_embeddings)} positions · RoPE θ ${num(j.rope_theta)} (${j.rope_type || 'default'})`),
        row('vocabulary', `${num(j.vocab_size)} · lm_head ${j.tie_word_embeddings ? 'tied to embeddings' : 'untied'}`),
        j.quantization ? row('weights', JSON.stringify(j.quantization)) : null,
        row('tokenizer', tok.error ? `cannot load: ${tok.error}` :
          `${tok.kind || '?'} · ${num(tok.vocab_size)} tokens · BOS ${tokenText(tok.bos)} · EOS ${tokenText(tok.eos)}` +
          ` · ${tok.special_tokens ? num(tok.special_tokens.count) : 0} special`),
        row('chat template', `${tpl.name || 'none'}${tpl.auto_detected ? ' (auto-detected)' : ''}${tpl.detail ? ` · ${tpl.detail}` : ''}`),
        row('stop ids', (j.stop_ids || []).length
          ? h('span.chips', j.stop_ids.map((s) => h('span.chip', { title: s.from || '' }, `${s.id} ${s.text ?? ''}`)))
          : 'none')));
  }

  function renderFit(j) {
    const me = j.memory_estimate || {};
    const cap = capacity(j);
    const methods = me.methods || [];
    const cols = ['method', 'frozen weights', 'embed / head', 'adapter', 'activations', 'working', 'total', cap ? `fits ${cap.label}?` : 'fits?'];
    fill(fitBody, h('table.fit',
      h('thead', h('tr', cols.map((c, i) => h(i === 0 ? 'th' : 'th.num', c)))),
      h('tbody', methods.map((m) => {
        const fits = m.card_fits ?? m.fits ?? (cap ? m.total_bytes <= cap.bytes : null);
        const share = cap ? Math.min(1, m.total_bytes / cap.bytes) : 0;
        return h('tr', { 'data-method': m.method },
          h('td', h('strong', m.method), h('div.hint', m.description || '')),
          [m.frozen_weights_bytes, m.embeddings_bytes, m.adapter_bytes, m.activations_bytes, m.working_bytes]
            .map((b) => h('td.num', bytes(b))),
          h('td.num.total', bytes(m.total_bytes)),
          h('td.fitcell', fits === null ? h('span.muted', '–') :
            h('div.fitbar', { class: `fitbar ${fits ? 'yes' : 'no'}`, title: cap ? `${bytes(m.total_bytes)} of ${bytes(cap.bytes)}` : '' },
              h('span.bar', { style: `width:${(share * 100).toFixed(1)}%` }),
              h('span.verdict', fits ? `yes · ${percent(m.total_bytes / cap.bytes)}` : 'no'))));
      }))));
    fill(fitNote,
      `batch ${me.batch} × seq ${me.seq}, rank ${me.lora_rank}, ${me.device === 'cpu' ? 'CPU (f32)' : 'GPU (bf16)'}, ` +
      `checkpointing ${me.activation_checkpointing ? 'on' : 'off'}${cap ? ` · compared with ${cap.label}${allowance(me)}` : ' · no GPU found here: choose a card size to compare'}. ` +
      (me.note || ''));
  }

  async function loadModels() {
    try {
      const list = await get('/api/models');
      const items = list.map((m) => (typeof m === 'string' ? { path: m } : m));
      fill(models, items.length ? items.map((m) => h('li',
        h('button.model-item', { type: 'button', 'data-path': m.path, onclick: () => setModel(m.path),
                                  class: m.path === state.model ? 'model-item chosen' : 'model-item' },
          h('strong', m.name || baseName(m.path)), h('span.muted', m.path))))
        : h('li.empty', 'No Hugging Face folders (config.json) under the roots.'));
    } catch (e) {
      fill(models, h('li.error-text', e.message));
    }
  }

  on('model', () => {
    for (const b of models.querySelectorAll('.model-item')) b.classList.toggle('chosen', b.dataset.path === state.model);
    refresh();
  });
  loadModels();
  if (state.model) refresh();
  return { el };
}

// A card's verdict (loft info --card) leaves room for the CUDA context and library workspaces.
function allowance(me) {
  const b = (me.card || {}).runtime_allowance_bytes;
  return b ? `, less ${bytes(b)} for the CUDA context and workspaces` : '';
}

function percent(share) {
  return share < 0.01 ? '<1%' : `${(100 * share).toFixed(0)}%`;
}

function tokenText(t) {
  if (!t || t.id === undefined || t.id === null) return 'none';
  return `${t.id}${t.text ? ` ${t.text}` : ''}`;
}

// The memory the estimate is compared with: the card `loft info --card` judged against, else this
// machine's first GPU when loft info lists one (`gpus`), else none.
function capacity(j) {
  const card = (j.memory_estimate || {}).card;
  if (card) return { bytes: Number(card.bytes), label: card.label };
  const gpus = j.gpus || [];
  if (gpus.length) {
    const g = gpus[0];
    return { bytes: Number(g.memory_bytes ?? g.total_bytes), label: g.name || 'this GPU' };
  }
  return null;
}

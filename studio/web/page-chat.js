// Chat page: talk to the base model, base + adapter, or both side by side with the same prompt;
// tokens appear as they are generated (POST /api/chat answers with an SSE stream), the chat
// template is the model's own unless another is chosen, sampling controls as loft generate's.
import { postStream } from './api.js';
import { h, fill, field, select, notice } from './dom.js';
import { state, on, fillAdapters, baseName } from './state.js';

const TEMPLATES = ['auto', 'llama3', 'llama3.1', 'llama2', 'chatml', 'qwen2.5', 'qwen3', 'qwen3-no-thinking', 'mistral', 'mistral-v3', 'alpaca', 'plain'];
const MODES = [['base', 'base'], ['adapter', 'base + adapter'], ['both', 'side by side']];

export function chatPage() {
  const msg = h('div');
  const mode = select(MODES, 'base', { id: 'chat-mode' });
  const adapter = h('select#chat-adapter');
  const template = select(TEMPLATES, 'auto', { id: 'chat-template' });
  const system = h('input#chat-system', { type: 'text', placeholder: 'none' });
  const temperature = h('input#chat-temperature', { type: 'number', min: 0, step: 0.05, value: 0.7 });
  const topK = h('input#chat-top-k', { type: 'number', min: 0, value: 40 });
  const topP = h('input#chat-top-p', { type: 'number', min: 0, max: 1, step: 0.05, value: 0.95 });
  const maxNew = h('input#chat-max-new', { type: 'number', min: 1, value: 128 });
  const seed = h('input#chat-seed', { type: 'number', min: 0, value: 0 });
  const prompt = h('textarea#chat-prompt', { rows: 3, placeholder: 'Say something… (Enter sends, Shift+Enter for a new line)' });
  const sendBtn = h('button.primary#chat-send', { type: 'button', onclick: () => send() }, 'Send');
  const stopBtn = h('button#chat-stop', { type: 'button', disabled: true, onclick: () => controllers.forEach((c) => c.abort()) }, 'Stop');
  const columnsEl = h('div.chat-columns#chat-columns');
  let columns = [], controllers = [];

  const el = h('section.page-stack', msg,
    h('div.card',
      h('div.controls',
        field('answer with', mode), field('adapter', adapter), field('template', template), field('system prompt', system)),
      h('div.controls.sampling',
        field('temperature', temperature, '0 = greedy'), field('top-k', topK, '0 = all'), field('top-p', topP),
        field('max new tokens', maxNew), field('seed', seed),
        h('button.link', { type: 'button', onclick: () => reset() }, 'clear conversation'))),
    columnsEl,
    h('div.card.composer', prompt, h('div.actions', stopBtn, sendBtn)));

  prompt.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); send(); }
  });

  function reset() {
    const sides = mode.value === 'both' ? ['base', 'adapter'] : [mode.value];
    columns = sides.map((side) => {
      const log = h('div.chat-log', h('p.muted.placeholder', side === 'base' ? 'base model' : 'base + adapter'));
      const head = h('div.chat-col-head', side === 'base' ? `base · ${baseName(state.model) || 'no model'}` :
        `adapter · ${adapter.selectedOptions[0]?.textContent || 'none'}`);
      return { side, messages: [], log, el: h('div.card.chat-col', { 'data-side': side }, head, log) };
    });
    fill(columnsEl, columns.map((c) => c.el));
    columnsEl.classList.toggle('two', columns.length > 1);
  }

  async function send() {
    const text = prompt.value.trim();
    if (!text) return;
    notice(msg, '');
    if (!state.model) { notice(msg, 'choose a model first (Model page)'); return; }
    if (columns.some((c) => c.side === 'adapter') && !adapter.value) { notice(msg, 'choose an adapter (a finished run\'s adapter/)'); return; }
    prompt.value = '';
    sendBtn.disabled = true;
    stopBtn.disabled = false;
    controllers = columns.map(() => new AbortController());
    await Promise.all(columns.map((c, i) => answer(c, text, controllers[i])));
    sendBtn.disabled = false;
    stopBtn.disabled = true;
    prompt.focus();
  }

  async function answer(col, text, ctl) {
    col.log.querySelector('.placeholder')?.remove();
    col.messages.push({ role: 'user', content: text });
    col.log.append(h('div.bubble.user', text));
    const out = h('span.text');
    const meta = h('div.meta', 'generating…');
    const bubble = h('div.bubble.assistant.streaming', { 'data-chunks': '0' }, out, meta);
    col.log.append(bubble);
    const body = {
      model: state.model, messages: col.messages, template: template.value,
      temperature: Number(temperature.value), top_k: Number(topK.value), top_p: Number(topP.value),
      max_new_tokens: Number(maxNew.value), seed: Number(seed.value),
    };
    if (system.value.trim()) body.system = system.value.trim();
    if (col.side === 'adapter') body.adapter = adapter.value;
    let reply = '', chunks = 0, started = 0, reason = '';
    try {
      await postStream('/api/chat', body, (event, data) => {
        if (event === 'token') {
          if (!started) started = performance.now();
          reply += typeof data === 'string' ? data : data.text ?? '';
          out.textContent = reply.trimStart();
          bubble.dataset.chunks = String(++chunks);
          col.log.scrollTop = col.log.scrollHeight;
        } else if (event === 'done') {
          reason = (data && data.stop_reason) || 'done';
        } else if (event === 'error') {
          throw new Error((data && data.error) || String(data));
        }
      }, ctl.signal);
      const secs = started ? (performance.now() - started) / 1000 : 0;
      fill(meta, `${reason || 'ended'} · ${chunks} chunks${secs > 0.05 ? ` · ${(chunks / secs).toFixed(1)}/s` : ''}`);
    } catch (e) {
      fill(meta, h('span.error-text', ctl.signal.aborted ? 'stopped' : e.message));
      reason = 'error';
    }
    bubble.classList.remove('streaming');
    bubble.dataset.done = reason || 'done';
    col.messages.push({ role: 'assistant', content: reply });
  }

  const loadAdapters = () => fillAdapters(adapter).catch((e) => notice(msg, e.message));

  mode.addEventListener('change', reset);
  adapter.addEventListener('change', reset);
  on('model', () => { reset(); loadAdapters(); });
  on('runs', loadAdapters);
  reset();
  return { el, show() { loadAdapters(); } };
}

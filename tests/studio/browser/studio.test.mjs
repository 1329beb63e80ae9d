// loft studio end to end in a real browser (issue 25): the real `loft studio` serving the real page
// to Debian's headless Chromium, on examples/stories260K on the CPU. Pick the model and read the
// fit table, inspect the data, train 30 steps while the loss chart grows, compare the adapter's
// perplexity with the base's, chat with both (streamed), export a GGUF, stop and resume a run.
// run.sh starts it (ctest: studio_browser); LOFT_STUDIO_SCREENSHOTS=DIR writes a picture of each
// page (docs/img/studio-*.png).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStudio, findBrowser, launch, until, show, screenshot, sleep } from './harness.mjs';

const loft = process.env.LOFT_BINARY;
const source = process.env.LOFT_SOURCE_DIR;
let studio, browser, page;
const pageErrors = [];
const offsite = [];

before(async () => {
  assert.ok(loft && fs.existsSync(loft), `LOFT_BINARY (${loft}) is not the loft binary`);
  studio = await startStudio({ loft, cwd: source });
  browser = await launch(findBrowser());
  page = await browser.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(`${studio.origin}/`) && !/^(data|blob):/.test(u)) offsite.push(u);
  });
});

after(async () => {
  if (browser) await browser.close();
  if (studio) {
    // Its log ends the test's output, for the failure that needs it.
    console.log(`--- the end of loft studio's output ---\n${studio.output().split('\n').slice(-30).join('\n')}`);
    await studio.stop();
  }
});

// Sets an input or select as a user would (input and change events).
async function setValue(selector, value) {
  const found = await page.evaluate((sel, v) => {
    const el = document.querySelector(sel);
    if (!el) return false;
    if (el.type === 'checkbox') el.checked = Boolean(v);
    else el.value = String(v);
    el.dispatchEvent(new Event('input', { bubbles: true }));
    el.dispatchEvent(new Event('change', { bubbles: true }));
    return true;
  }, selector, value);
  assert.ok(found, `no ${selector} on the page`);
}

// A finetune option's field: the first of these recipe keys the form has.
async function setOption(keys, value) {
  const key = await page.evaluate((ks) => ks.find((k) => document.getElementById(`opt-${k}`)), keys);
  assert.ok(key, `the finetune form has none of ${keys.join(', ')}`);
  await setValue(`#opt-${key}`, value);
}

const text = (sel) => page.evaluate((s) => document.querySelector(s)?.textContent ?? '', sel);
const runStatus = () => page.evaluate(() => document.querySelector('#run-view')?.dataset.status || '');
const lossPoints = () => page.evaluate(() => Number(document.querySelector('#run-view canvas[data-curve="loss"]')?.dataset.points || 0));

async function startRun({ steps, validate = false }) {
  await show(page, 'train');
  await until(page, 'the finetune options', () => document.querySelectorAll('#train-options [data-key]').length > 10);
  await page.click('#train-reset');
  await setOption(['max_steps', 'steps'], steps);
  await setOption(['batch', 'gradient_accumulation_steps'], 8);
  await setOption(['sequence_len', 'seq'], 128);
  await setOption(['learning_rate', 'lr'], 0.005);
  await setOption(['device'], 'cpu');
  if (validate) {  // a validation loss every 10 steps, on a fifth of the data
    await setOption(['val_fraction'], 0.2);
    await setOption(['eval_every'], 10);
  }
  // The plan first: what finetune makes of these options (POST /api/runs/plan), nothing started.
  await page.click('#train-plan');
  const fits = await until(page, 'the plan', () => document.querySelector('#train-plan-fits')?.textContent || '');
  assert.equal(fits, 'fits this device');
  const plan = await text('#train-plan-table');
  assert.match(plan, /batch8 rows = /, plan);
  assert.match(plan, /lr 0\.005/, plan);
  assert.match(plan, new RegExp(`${steps} steps`), plan);
  const before = await page.evaluate(() => document.querySelector('#run-view')?.dataset.run || '');
  await page.click('#train-start');
  return until(page, 'the new run to appear', (b) => {
    const v = document.querySelector('#run-view');
    return v && v.dataset.run !== b && v.dataset.status ? v.dataset.run : '';
  }, before);
}

test('the page signs in from the printed URL, loads in under 200 ms and fetches nothing from elsewhere', async () => {
  await page.goto(studio.url);
  await until(page, 'the session', () => document.body.dataset.ready === '1');
  assert.ok(!page.url().includes('token='), `the token should leave the address bar: ${page.url()}`);
  // What loading costs: the shell and its four modules, a few KiB, no chart library yet.
  let best = Infinity, loaded = [];
  for (let i = 0; i < 5; i++) {
    await page.reload({ waitUntil: 'load' });
    const nav = await page.evaluate(() => {
      const ms = performance.getEntriesByType('navigation')[0].loadEventEnd;
      const files = performance.getEntriesByType('resource').filter((r) => r.responseEnd <= ms);
      return { ms, files: files.map((r) => ({ name: r.name.split('/').pop(), bytes: r.decodedBodySize })) };
    });
    if (nav.ms < best) [best, loaded] = [nav.ms, nav.files];
  }
  assert.ok(loaded.length <= 6 && !loaded.some((f) => f.name.startsWith('chart')), `loaded at start: ${JSON.stringify(loaded)}`);
  assert.ok(loaded.reduce((n, f) => n + f.bytes, 0) < 96 * 1024, `loaded at start: ${JSON.stringify(loaded)}`);
  // The time, where this machine is not busy with other work (a loaded CI host's scheduler
  // would measure itself, not the page).
  const load = os.loadavg()[0] / os.cpus().length;
  console.log(`page load ${best.toFixed(0)} ms (best of the loads; load average ${load.toFixed(2)} per core)`);
  if (load < 1) assert.ok(best < 200, `the page took ${best.toFixed(0)} ms to load`);
  else console.log(`page load ${best.toFixed(0)} ms; not held to 200 ms at load average ${load.toFixed(1)} per core`);
  await until(page, 'the session', () => document.body.dataset.ready === '1');
});

test('model: choose stories260K, read its info and a fit table that follows the batch and card', async () => {
  await show(page, 'model');
  await until(page, 'the models under the roots', () => document.querySelector('#model-list .model-item[data-path$="stories260K"]'));
  await page.click('#model-list .model-item[data-path$="stories260K"]');
  await until(page, 'the fit table', () => document.querySelectorAll('#fit-table tr[data-method]').length >= 3);
  const info = await text('#model-info');
  assert.match(info, /260,032/, 'the exact parameter count');
  assert.match(info, /tokenizer/);
  const total = () => text('#fit-table tr[data-method] .total');
  const small = await total();
  await setValue('#fit-batch', 64);
  await until(page, 'the estimate for batch 64', (t) => document.querySelector('#fit-table tr[data-method] .total')?.textContent !== t, small);
  await setValue('#fit-card', '12GiB');
  // Judged by `loft info --card 12GiB`: its label names the size.
  await until(page, 'the 12 GB verdicts', () => document.querySelectorAll('#fit-table .fitbar.yes').length >= 3 &&
    /12 GiB/.test(document.querySelector('#fit-note')?.textContent || ''));
  await setValue('#fit-batch', 8);
  await sleep(600);
  await screenshot(page, 'model');
});

test('data: demo.jsonl through the template, trained spans marked, lengths and truncation', async () => {
  await show(page, 'data');
  await until(page, 'the roots', () => document.querySelector('#data-picker .entry button'));
  await page.click('#data-picker .entry button');
  await until(page, 'demo.jsonl', () => document.querySelector('#data-picker .entry[data-path$="demo.jsonl"]'));
  await page.click('#data-picker .entry[data-path$="demo.jsonl"] button');
  await until(page, 'the rendered examples', () => document.querySelector('#data-results mark.trained'));
  await until(page, 'the length histogram', () => document.querySelector('#data-histogram[data-drawn]'));
  assert.match(await text('#data-results'), /truncated by --seq/);
  await screenshot(page, 'data');
});

test('train: a YAML recipe imports into the options (its axolotl keys kept aside) and exports again', async () => {
  await show(page, 'train');
  await until(page, 'the finetune options', () => document.querySelectorAll('#train-options [data-key]').length > 10);
  const input = await page.$('#recipe-file');
  await input.uploadFile(path.join(source, 'docs/recipes/stories260k-lora.yaml'));
  await until(page, 'the imported recipe', () => document.querySelector('.notice.info')?.textContent.includes('imported'));
  // A key is a field of the form (a loft option's name) or, an axolotl name, kept aside as it is.
  const values = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll('#train-options [data-key]')]
    .map((e) => [e.dataset.key, e.type === 'checkbox' ? e.checked : e.value])));
  const extras = await text('#train-extras');
  for (const [key, value] of [['sequence_len', 128], ['max_steps', 30], ['learning_rate', 0.005], ['seed', 42]]) {
    assert.ok(key in values ? Number(values[key]) === value : extras.includes(`${key}: ${value}`),
      `${key}: ${value} in the form or beside it (${JSON.stringify(values[key])}; ${extras})`);
  }
  assert.match(extras, /lora_dropout: 0/, 'an axolotl key without a field of its own');
  // Export: the recipe the page would send, as YAML (the download's blob, read back).
  const yaml = await page.evaluate(() => new Promise((resolve) => {
    const create = URL.createObjectURL;
    URL.createObjectURL = (blob) => { blob.text().then(resolve); URL.createObjectURL = create; return create.call(URL, blob); };
    document.querySelector('#recipe-export').click();
  }));
  assert.match(yaml, /^lora_dropout: 0$/m);
  assert.match(yaml, /learning_rate: 0\.005/);
  await page.click('#train-reset');
});

test('train: a 30-step run whose loss chart gains points while it trains', async () => {
  await startRun({ steps: 30, validate: true });
  const seen = [];  // loss points counted while the run was running
  const end = Date.now() + 300000;
  for (;;) {
    const [status, points] = [await runStatus(), await lossPoints()];
    if (status === 'running' && points > 0 && points !== seen[seen.length - 1]) seen.push(points);
    if (['finished', 'failed', 'stopped'].includes(status)) break;
    assert.ok(Date.now() < end, 'the run did not end in 5 minutes');
    await sleep(100);
  }
  assert.equal(await runStatus(), 'finished', await text('#run-view'));
  assert.ok(seen.length >= 2 && seen[seen.length - 1] > seen[0], `the chart grew while running: ${seen.join(' → ')}`);
  await until(page, 'all 30 points', () => Number(document.querySelector('#run-view canvas[data-curve="loss"]').dataset.points) >= 30);
  assert.match(await text('#run-log'), /\S/, 'the log tail');
  assert.ok(await page.evaluate(() => Number(document.querySelector('#run-view canvas[data-curve="val_loss"]').dataset.points) >= 3), 'validation points');
  for (const summary of await page.$$('#train-options details[open] > summary')) await summary.click();  // the run, not the form
  await screenshot(page, 'train');
});

test('evaluate: perplexity of the base and of the adapter side by side', async () => {
  await show(page, 'evaluate');
  await until(page, "the run's adapter", () => [...document.querySelectorAll('#eval-adapter option')].some((o) => o.value.endsWith('/adapter')));
  await setValue('#eval-task', 'ppl');
  const roots = await page.evaluate(() => fetch('/api/session').then((r) => r.json()).then((s) => s.roots));
  await setValue('#eval-data', `${roots[0]}/demo.jsonl`);
  await page.click('#eval-both');
  const table = await until(page, 'both perplexities', () => {
    const rows = [...document.querySelectorAll('#eval-compare-table tbody tr')].map((r) => [...r.children].map((c) => c.textContent));
    const status = rows.find((r) => r[0] === 'status');
    return status && status.slice(1).every((s) => ['finished', 'failed'].includes(s)) ? rows : null;
  }, null, 180000);
  const ppl = table.find((r) => r[0] === 'perplexity');
  assert.ok(ppl, `a perplexity row: ${JSON.stringify(table)}`);
  const [base, adapted] = ppl.slice(1).map(Number);
  assert.ok(base > 1 && adapted > 1, `perplexities ${ppl}`);
  // demo.jsonl's lines as raw text are not what the adapter trained on (Alpaca prompts), so its
  // perplexity moves, in either direction: the adapter was applied.
  assert.notEqual(adapted, base, `the adapter changes the perplexity (${base} → ${adapted})`);
  await screenshot(page, 'evaluate');
});

test('chat: base and adapter answer side by side, tokens streamed as generated', async () => {
  await show(page, 'chat');
  await until(page, "the run's adapter", () => [...document.querySelectorAll('#chat-adapter option')].some((o) => o.value.endsWith('/adapter')));
  await setValue('#chat-mode', 'both');
  await setValue('#chat-temperature', 0);
  await setValue('#chat-max-new', 48);
  await page.type('#chat-prompt', '<b>Once</b> upon a time');
  await page.click('#chat-send');
  const answers = await until(page, 'both answers', () => {
    const bubbles = [...document.querySelectorAll('.bubble.assistant')];
    return bubbles.length === 2 && bubbles.every((b) => b.dataset.done)
      ? bubbles.map((b) => ({ chunks: Number(b.dataset.chunks), text: b.querySelector('.text').textContent, done: b.dataset.done })) : null;
  }, null, 120000);
  for (const a of answers) {
    assert.notEqual(a.done, 'error', JSON.stringify(a));
    assert.ok(a.chunks > 1, `streamed in several token events: ${JSON.stringify(a)}`);
    assert.ok(a.text.trim().length > 0, 'a non-empty answer');
  }
  assert.equal(await page.$('.bubble.user b'), null, 'the prompt is shown as text, not markup');
  assert.match(await text('.bubble.user'), /<b>Once<\/b>/);
  await screenshot(page, 'chat');
});

test('export: a llama.cpp GGUF of base + adapter, written where the page says', async () => {
  await show(page, 'export');
  await until(page, "the run's adapter", () => [...document.querySelectorAll('#export-adapter option')].some((o) => o.value.endsWith('/adapter')));
  await setValue('#export-adapter', await page.evaluate(() => [...document.querySelectorAll('#export-adapter option')].find((o) => o.value.endsWith('/adapter')).value));
  await setValue('#export-format', 'gguf');
  await page.click('#export-start');
  const status = await until(page, 'the export to end', () => {
    const s = document.querySelector('#export-jobs .job')?.dataset.status;
    return ['finished', 'failed', 'stopped'].includes(s) ? s : '';
  }, null, 180000);
  assert.equal(status, 'finished', await text('#export-jobs'));
  const where = await text('#export-jobs .export-where');
  const file = fs.statSync(where).isDirectory() ? path.join(where, 'model.gguf') : where;
  const magic = Buffer.alloc(4);
  const fd = fs.openSync(file, 'r');
  fs.readSync(fd, magic, 0, 4, 0);
  fs.closeSync(fd);
  assert.equal(magic.toString('latin1'), 'GGUF', `${file} is a GGUF file`);
  await screenshot(page, 'export');
});

test('train: stop a run (it checkpoints) and resume it from there', async () => {
  const id = await startRun({ steps: 5000 });
  await until(page, 'a few steps', () => {
    const v = document.querySelector('#run-view');
    return v.dataset.status === 'running' && Number(v.querySelector('canvas[data-curve="loss"]').dataset.points) >= 3;
  }, null, 120000);
  await page.click('#run-stop');
  await until(page, 'the run to stop', () => document.querySelector('#run-view').dataset.status === 'stopped', null, 120000);
  const api = (p) => page.evaluate((u) => fetch(u).then((r) => r.json()), p);
  const stopped = await api(`/api/runs/${encodeURIComponent(id)}`);
  const stoppedAt = Math.max(...stopped.metrics.map((m) => m.step));
  await until(page, 'Resume to be enabled', () => !document.querySelector('#run-resume').disabled);
  await page.click('#run-resume');
  await until(page, 'steps past the stop', async (s) => {
    const v = document.querySelector('#run-view');
    return v.dataset.status === 'running' && Number(v.querySelector('canvas[data-curve="loss"]').dataset.points) >= s + 2;
  }, stoppedAt, 120000);
  await page.click('#run-stop');
  await until(page, 'the resumed run to stop', () => document.querySelector('#run-view').dataset.status === 'stopped', null, 120000);
  const resumed = await api(`/api/runs/${encodeURIComponent(id)}`);
  const steps = resumed.metrics.map((m) => m.step);
  assert.ok(Math.max(...steps) >= stoppedAt + 2, `trained on after the resume: ${stoppedAt} → ${Math.max(...steps)}`);
  assert.match(resumed.log_tail || '', /resum/i, 'the resumed child says it resumed');
});

test('runs: every run with its status, two overlaid, a report', async () => {
  await show(page, 'runs');
  const rows = await until(page, 'both runs', () => {
    const r = [...document.querySelectorAll('#runs-table tr[data-run]')];
    return r.length >= 2 ? r.map((tr) => tr.querySelector('.badge').textContent) : null;
  });
  assert.ok(rows.includes('finished') && rows.includes('stopped'), `statuses ${rows}`);
  for (const box of await page.$$('#runs-table tr[data-run] input[type=checkbox]')) await box.click();
  await until(page, 'two curves overlaid', () => {
    const c = document.querySelector('#overlay-chart');
    return Number(c.dataset.points) > 30 && window.Chart.getChart(c).data.datasets.length === 2;
  });
  const finished = await page.evaluate(() => [...document.querySelectorAll('#runs-table tr[data-run]')]
    .find((tr) => tr.querySelector('.badge').textContent === 'finished').dataset.run);
  await page.click(`#runs-table tr[data-run="${finished}"] .row-actions button:last-child`);
  await until(page, 'the report frame', () => document.querySelector('#report-frame')?.srcdoc.length > 100);
  const frame = page.frames().find((f) => f.url() === 'about:srcdoc');
  assert.ok(frame, 'the report is shown in a frame');
  assert.match(await frame.evaluate(() => document.body.textContent), /loss/i, 'the report of the run');
  await screenshot(page, 'runs');
});

// A run folder's name is text the page shows: one spelled as markup appears as those characters,
// and nothing in it runs.
test('runs: a run named as HTML is shown as text', async () => {
  const name = '<img src=x onerror="window.__pwned=1">';
  const done = fs.readdirSync(studio.runs).find((d) => fs.existsSync(path.join(studio.runs, d, 'metrics.jsonl')));
  assert.ok(done, 'a run to copy');
  fs.cpSync(path.join(studio.runs, done), path.join(studio.runs, name), { recursive: true });
  fs.rmSync(path.join(studio.runs, name, '.loft.lock'), { force: true });
  await page.reload();
  await show(page, 'runs');
  await until(page, 'the run named as HTML', (n) => [...document.querySelectorAll('#runs-table tr[data-run]')]
    .some((tr) => tr.textContent.includes(n)), name);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.evaluate(() => document.querySelectorAll('#runs-table img').length), 0);
});

test('no script errors and nothing fetched from the network', () => {
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(offsite, []);
});

// The browser test's harness: the real `loft studio` on an ephemeral port, Debian's headless
// Chromium through puppeteer-core, and the waits the test repeats.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

const URL_RE = /(http:\/\/[^\s]+\?token=[A-Za-z0-9_-]+)/;

// Starts `loft studio --port 0 --root examples --runs TMP` in the checkout; resolves with the
// sign-in URL it prints. The runs folder is a fresh temporary one, removed by stop().
export async function startStudio({ loft, cwd, roots = ['examples'] }) {
  const runs = fs.mkdtempSync(path.join(os.tmpdir(), 'loft-studio-runs-'));
  const args = ['studio', '--port', '0', '--runs', runs];
  for (const r of roots) args.push('--root', r);
  const child = spawn(loft, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`loft studio printed no URL in 30 s:\n${output}`)), 30000);
    const onData = (d) => {
      output += d;
      const m = URL_RE.exec(output);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`loft studio exited (${code}):\n${output}`)); });
  });
  child.stdout.on('data', (d) => { output += d; });
  child.stderr.on('data', (d) => { output += d; });
  return {
    url,
    origin: new URL(url).origin,
    runs,
    output: () => output,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([exited, sleep(10000)]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      fs.rmSync(runs, { recursive: true, force: true });
    },
  };
}

// Debian's chromium-headless-shell (or chromium); LOFT_CHROMIUM names another.
export function findBrowser() {
  const candidates = [process.env.LOFT_CHROMIUM, '/usr/bin/chromium-headless-shell', '/usr/bin/chromium'].filter(Boolean);
  return candidates.find((p) => fs.existsSync(p)) || null;
}

export async function launch(executablePath) {
  return puppeteer.launch({
    executablePath,
    headless: path.basename(executablePath).includes('headless-shell') ? 'shell' : true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-dev-shm-usage'],
    defaultViewport: { width: 1360, height: 900 },
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls fn (in the page) until it returns a truthy value; that value, or a timeout error that
// says what was awaited and what the page shows.
export async function until(page, what, fn, arg, timeout = 60000) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    last = await page.evaluate(fn, arg);
    if (last) return last;
    await sleep(150);
  }
  const notices = await page.evaluate(() => [...document.querySelectorAll('.notice, .error-text')].map((e) => e.textContent).join(' | '));
  throw new Error(`timed out after ${timeout / 1000} s waiting for ${what}${notices ? ` (page says: ${notices})` : ''}`);
}

export async function show(page, tab) {
  await page.evaluate((t) => { location.hash = `#${t}`; }, tab);
  await until(page, `the ${tab} page`, (t) => {
    const el = document.querySelector(`[data-page="${t}"]:not(#tabs a)`);
    return el && !el.hidden;
  }, tab);
}

// Writes docs/img/studio-NAME.png when the test runs with LOFT_STUDIO_SCREENSHOTS=DIR.
export async function screenshot(page, name) {
  const dir = process.env.LOFT_STUDIO_SCREENSHOTS;
  if (!dir) return;
  fs.mkdirSync(dir, { recursive: true });
  // From the top (a smooth scroll may still run), once charts have drawn their frame.
  await page.evaluate(() => window.scrollTo({ top: 0, behavior: 'instant' }));
  await sleep(300);
  await page.evaluate(() => window.scrollTo({ top: 0, behavior: 'instant' }));
  await page.screenshot({ path: path.join(dir, `studio-${name}.png`), fullPage: true });
}

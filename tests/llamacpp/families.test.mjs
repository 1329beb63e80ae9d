// llama.cpp loads loft's GGUF files of every Llama-family architecture and scores text as loft
// does (issue 28). For each tiny model (stories260K's Llama, Qwen2 tied and untied with q/k/v
// biases, Qwen3 with q/k norms and head_dim != hidden/heads, Mistral), with stories260K's
// SentencePiece tokenizer beside its weights:
//   1. loft trains a LoRA adapter for a few steps (B != 0, so the adapter changes the scores);
//   2. `loft evaluate --task ppl` scores the documents with the base model and with the adapter;
//   3. loft exports the base model, the merged model (f32) and the adapter as a GGUF LoRA;
//   4. llama.cpp (score.mjs, node-llama-cpp's CPU build) scores the same documents with the base
//      GGUF, the merged GGUF, and the base GGUF + the LoRA GGUF: the three perplexities must
//      equal loft's to 1e-5 relative, over the same number of tokens (llama.cpp tokenizes the
//      text itself, from the vocabulary loft wrote).
//
//   node families.test.mjs LOFT_BINARY TEST_DATA_DIR
// Exits 77 (ctest: skipped) when node-llama-cpp is not installed (npm install in this folder), 1 under
// CI=true.
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {fileURLToPath} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const [loft, data] = process.argv.slice(2);
if (!loft || !data) {
  console.error("usage: node families.test.mjs LOFT_BINARY TEST_DATA_DIR");
  process.exit(2);
}
if (!fs.existsSync(path.join(here, "node_modules", "node-llama-cpp"))) {
  const how = `npm install --prefix ${here} --omit=optional --ignore-scripts`;
  if (process.env.CI === "true") {
    console.error(`llama.cpp check: node-llama-cpp is not installed (${how})`);
    process.exit(1);
  }
  console.log(`SKIP: node-llama-cpp is not installed (${how})`);
  process.exit(77);
}

const kTolerance = 1e-5;
// {name, source model, config.json changes, documents}. llama.cpp's llama architecture, which
// Mistral converts to, has no sliding window: the windowed Mistral is checked on documents that fit
// its 16-key window (and loft's export must say so), the same weights without a window on all.
const families = [
  {name: "stories260K-hf"}, {name: "qwen2-tiny"}, {name: "qwen2-tiny-tied"}, {name: "qwen3-tiny"},
  {name: "mistral-tiny", docs: "short", warns: true},
  {name: "mistral-tiny-nowindow", model: "mistral-tiny", config: {sliding_window: null}},
  // A Llama with a bias on every projection (attention_bias, mlp_bias): stories260K plus random
  // biases. llama.cpp permutes q/k rows, biases included.
  {name: "stories260K-biases", model: "stories260K-hf", config: {attention_bias: true, mlp_bias: true}, biases: true},
];

// Appends a random F32 bias [out] for every projection X.weight [out, in] of a safetensors file
// (values from a fixed LCG, uniform in ±0.5).
function addBiases(file) {
  const buf = fs.readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8"));
  let data = buf.subarray(8 + n);
  let seed = 12345;
  const chunks = [data];
  let end = data.length;
  for (const [name, info] of Object.entries(header)) {
    if (!/\.(self_attn|mlp)\.\w+_proj\.weight$/.test(name)) continue;
    const out = info.shape[0], bias = Buffer.alloc(4 * out);
    for (let i = 0; i < out; ++i) {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      bias.writeFloatLE(seed / 2147483648 - 0.5, 4 * i);
    }
    header[name.replace(/\.weight$/, ".bias")] = {dtype: "F32", shape: [out], data_offsets: [end, end + bias.length]};
    chunks.push(bias);
    end += bias.length;
  }
  const text = Buffer.from(JSON.stringify(header), "utf8");
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(text.length));
  fs.writeFileSync(file, Buffer.concat([len, text, ...chunks]));
}

// stdout, or with `both` stdout and stderr together (loft's logs).
function run(cmd, args, both = false) {
  const r = spawnSync(cmd, args, {encoding: "utf8", maxBuffer: 64 << 20});
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  return both ? r.stdout + r.stderr : r.stdout;
}
const lastJson = (out) => JSON.parse(out.trim().split("\n").pop());

const work = fs.mkdtempSync(path.join(os.tmpdir(), "loft-llamacpp-"));
// Three TinyStories lines: 60-190 tokens each, longer than Mistral's 16-key window; and their
// first four words (at most 16 tokens with BOS: checked below).
const stories = fs.readFileSync(path.join(data, "tinystories/tinystories_sample.txt"), "utf8")
  .split("\n").filter((l) => l.trim().length > 40 && !l.includes("<|endoftext|>")).slice(0, 3);
const docFiles = {long: path.join(work, "docs.txt"), short: path.join(work, "short.txt")};
fs.writeFileSync(docFiles.long, stories.join("\n") + "\n");
fs.writeFileSync(docFiles.short, stories.map((l) => l.split(" ").slice(0, 4).join(" ")).join("\n") + "\n");

let failures = 0;
const rows = [];
try {
  for (const spec of families) {
    const family = spec.name, docs = docFiles[spec.docs ?? "long"];
    const model = path.join(work, family);
    fs.mkdirSync(model);
    for (const f of ["config.json", "generation_config.json", "model.safetensors"]) {
      const src = path.join(data, "models", spec.model ?? family, f);
      if (fs.existsSync(src)) fs.copyFileSync(src, path.join(model, f));
    }
    const configFile = path.join(model, "config.json");
    fs.writeFileSync(configFile, JSON.stringify({...JSON.parse(fs.readFileSync(configFile, "utf8")), ...spec.config}));
    if (spec.biases) addBiases(path.join(model, "model.safetensors"));
    fs.copyFileSync(path.join(data, "models/stories260K-hf/tokenizer.model"), path.join(model, "tokenizer.model"));
    const runDir = path.join(work, `${family}-run`);
    run(loft, ["finetune", "--model", model, "--data", path.join(data, "alpaca/alpaca_tiny.json"), "--steps", "4",
               "--batch", "2", "--seq", "256", "--lora-rank", "8", "--lr", "2e-2", "--out", runDir, "--no-report"]);
    const adapter = path.join(runDir, "adapter");
    const ppl = (extra) => lastJson(run(loft, ["evaluate", "--model", model, ...extra, "--task", "ppl", "--data", docs, "--json"]));
    const loftBase = ppl([]), loftAdapted = ppl(["--adapter", adapter]);
    const gguf = (name, extra) => {
      const out = path.join(work, `${family}-${name}.gguf`);
      const log = run(loft, ["export", "--model", model, ...extra, "--out", out], true);
      if (/no sliding window/.test(log) !== Boolean(spec.warns)) {
        console.error(`FAIL ${family} ${name}: the export ${spec.warns ? "did not warn" : "warned"} about the sliding window:\n${log}`);
        ++failures;
      }
      return out;
    };
    const base = gguf("base", ["--format", "gguf", "--gguf-type", "f32"]);
    const merged = gguf("merged", ["--adapter", adapter, "--format", "gguf", "--gguf-type", "f32"]);
    const lora = gguf("lora", ["--adapter", adapter, "--format", "gguf-lora"]);
    const score = (...a) => lastJson(run(process.execPath, [path.join(here, "score.mjs"), "--text", docs, ...a]));
    const checks = [
      ["base", loftBase, score("--model", base)],
      ["merged", loftAdapted, score("--model", merged)],
      ["base + lora", loftAdapted, score("--model", base, "--lora", lora)],
    ];
    if (Math.abs(loftAdapted.ppl - loftBase.ppl) < 1e-3 * loftBase.ppl) {
      console.error(`FAIL ${family}: the adapter barely changed the perplexity; the LoRA checks would mean nothing`);
      ++failures;
    }
    if (spec.docs === "short") {
      const longest = Math.max(...checks[0][2].ids.map((d) => d.length));
      if (longest > 16) {
        console.error(`FAIL ${family}: a short document has ${longest} tokens, more than the 16-key window`);
        ++failures;
      }
    }
    for (const [what, want, got] of checks) {
      const rel = Math.abs(got.ppl - want.ppl) / want.ppl;
      const ok = rel <= kTolerance && got.tokens === want.tokens;
      rows.push(`| ${family} | ${what} | ${spec.docs ?? "long"} | ${want.ppl.toFixed(6)} | ${got.ppl.toFixed(6)} | ${rel.toExponential(2)} | ${got.tokens}/${want.tokens} |`);
      if (!ok) {
        console.error(`FAIL ${family} ${what}: llama.cpp ppl ${got.ppl} over ${got.tokens} tokens, ` +
                      `loft ${want.ppl} over ${want.tokens} (relative ${rel.toExponential(2)})`);
        ++failures;
      }
    }
  }
} finally {
  console.log("| model | GGUF | documents | loft ppl | llama.cpp ppl | relative | tokens |\n| --- | --- | --- | --- | --- | --- | --- |");
  for (const r of rows) console.log(r);
  fs.rmSync(work, {recursive: true, force: true});
}
process.exit(failures ? 1 : 0);

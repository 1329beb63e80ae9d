// Scores text with llama.cpp (node-llama-cpp's prebuilt CPU binaries) the way `loft evaluate
// --task ppl` does: each non-empty line of --text is a document, [BOS] + llama.cpp's own
// tokenization of it, and every token after BOS is predicted from the ones before it. Prints one
// JSON line: {"documents", "tokens" (predicted), "nll" (summed, nats), "ppl", "ids" (per document)}.
//
//   node score.mjs --model model.gguf [--lora adapter.gguf] --text docs.txt
//
// The probabilities are llama.cpp's softmax over the whole vocabulary (temperature 1, no top-k,
// top-p or min-p cut), read one position at a time from evaluateWithMetadata.
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

function args() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  if (!out.model || !out.text) throw new Error("usage: score.mjs --model FILE [--lora FILE] --text FILE");
  return out;
}

const opt = args();
const llama = await getLlama({gpu: false, build: "never", maxThreads: 1, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: opt.model});
const docs = fs.readFileSync(opt.text, "utf8").split("\n").filter((l) => l.trim().length > 0);
const bos = model.tokens.bos;
if (bos == null) throw new Error(`${opt.model}: the vocabulary has no BOS token`);
const sampling = {temperature: 1, topK: 0, topP: 1, minP: 0, seed: 1, yieldEogToken: true};
let nll = 0, count = 0;
const ids = [];
for (const doc of docs) {
  const tokens = [bos, ...model.tokenize(doc, false)];
  ids.push(tokens);
  // A context per document: nothing carries over from the one before.
  // An f32 KV cache (llama.cpp's default is f16) and no flash attention: f32 throughout, as loft's
  // CPU path. One thread: the result does not depend on how the work is split.
  const context = await model.createContext({
    contextSize: Math.max(64, tokens.length + 8), batchSize: 64, threads: 1, flashAttention: false,
    experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    lora: opt.lora ? {adapters: [{filePath: opt.lora}]} : undefined});
  const seq = context.getSequence();
  const gen = seq.evaluateWithMetadata([tokens[0]], {probabilities: true}, sampling);
  for (let i = 1; i < tokens.length; ++i) {
    const step = await gen.next(i === 1 ? undefined : tokens[i - 1]);
    if (step.done) throw new Error("llama.cpp stopped evaluating early");
    const p = step.value.probabilities.get(tokens[i]);
    if (!(p > 0)) throw new Error(`token ${tokens[i]} at position ${i} has no probability`);
    nll -= Math.log(p);
    ++count;
  }
  await gen.return();
  await context.dispose();
}
console.log(JSON.stringify({documents: docs.length, tokens: count, nll, ppl: Math.exp(nll / count), ids}));
await model.dispose();

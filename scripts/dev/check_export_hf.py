#!/usr/bin/env python3
"""Checks loft's exports with the libraries people serve them with (run on the GPU machine, which
has torch, transformers 5.17 and peft), after scripts/dev/export-hf-fixture.sh WORK:

  (a) the --fp8-layout block export, loaded by transformers with FineGrainedFP8Config(dequantize=True)
      (that machine lacks the FP8 kernel package), and, when the compressed-tensors package is
      installed, the default (channel) export;
  (b) the bf16 export, loaded by transformers;
  (c) the --format peft export, loaded by PEFT on the bf16 base;

for every method (lora, qlora, falqon, halo). For each it computes the mean NLL on the same token
ids loft scored (WORK/ids.jsonl: [BOS] + ids per document, truncated to the context, mean over the
predicted tokens, as `loft evaluate --task ppl`) and the greedy continuation of the same prompt,
and compares them with loft's numbers in WORK/loft_results.json:

  - transformers vs loft on the same folder: |nll diff| <= NLL_TOL (bf16 tolerance), greedy tokens
    equal up to the first near-tie (reported, not failed);
  - PEFT vs the trained model (loft, recorded method): |nll diff| <= PEFT_TOL, and for FALQON the
    gap the export reported is printed beside it.

Exit status 1 when a check fails. Usage:  python3 scripts/dev/check_export_hf.py WORK [--device cuda]
"""
import argparse
import json
import math
import os
import sys

import torch
from transformers import AutoModelForCausalLM

NLL_TOL = 0.02    # same weights, bf16 compute in both: loft vs transformers on one folder
PEFT_TOL = 0.05   # PEFT's merge on the bf16 base vs the trained model (FALQON: its SVD fit)
METHODS = ["lora", "qlora", "falqon", "halo"]


def load_docs(work):
    with open(os.path.join(work, "ids.jsonl")) as f:
        return [json.loads(line)["ids"] for line in f if line.strip()]


def mean_nll(model, docs, bos, max_len, device):
    total, count = 0.0, 0
    for ids in docs:
        seq = ([bos] + ids)[:max_len]
        if len(seq) < 2:
            continue
        x = torch.tensor([seq], device=device)
        with torch.no_grad():
            logits = model(input_ids=x).logits[0, :-1].float()
        lp = torch.log_softmax(logits, dim=-1)
        total += -lp.gather(1, x[0, 1:, None]).sum().item()
        count += len(seq) - 1
    return total / count


def greedy(model, prompt, n, device):
    x = torch.tensor([prompt], device=device)
    with torch.no_grad():
        out = model.generate(input_ids=x, max_new_tokens=n, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
    return out[0, len(prompt):].tolist()


def first_divergence(a, b):
    for i, (u, v) in enumerate(zip(a, b)):
        if u != v:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


class Checker:
    def __init__(self):
        self.failures = []

    def nll(self, what, got, want, tol):
        ok = abs(got - want) <= tol
        print(f"  {what:44s} nll {got:.5f} vs loft {want:.5f} (diff {got - want:+.5f}, tol {tol}) "
              f"{'ok' if ok else 'FAIL'}")
        if not ok:
            self.failures.append(what)

    def tokens(self, what, got, want):
        d = first_divergence(got, want)
        print(f"  {what:44s} greedy tokens " +
              ("identical" if d is None else f"diverge at position {d} of {len(want)} "
               "(a near-tie in bf16 is possible; nll above is the check)"))


def load(path, device, fp8=False):
    kwargs = {"dtype": torch.bfloat16}
    if fp8:
        from transformers import FineGrainedFP8Config
        kwargs["quantization_config"] = FineGrainedFP8Config(dequantize=True)
    return AutoModelForCausalLM.from_pretrained(path, **kwargs).to(device).eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    work, dev = args.work, args.device
    loft = json.load(open(os.path.join(work, "loft_results.json")))
    docs = load_docs(work)
    prompt = [int(t) for t in open(os.path.join(work, "prompt_ids.txt")).read().split()]
    cfg = json.load(open(os.path.join(work, "base", "config.json")))
    bos, max_len = cfg.get("bos_token_id", 1), cfg.get("max_position_embeddings", 2048)
    c = Checker()

    print(f"base ({work}/base)")
    base = load(os.path.join(work, "base"), dev)
    c.nll("base bf16 (transformers)", mean_nll(base, docs, bos, max_len, dev), loft["base"]["nll"], NLL_TOL)
    c.tokens("base bf16 (transformers)", greedy(base, prompt, len(loft["base"]["greedy"]), dev), loft["base"]["greedy"])

    have_ct = True
    try:
        import compressed_tensors  # noqa: F401
    except ImportError:
        have_ct = False
        print("note: the compressed-tensors package is not installed: the channel (default) FP8 "
              "exports are not loaded here")

    from peft import PeftModel
    for m in METHODS:
        if m not in loft:
            continue
        r = loft[m]
        print(f"{m} (loft: trained {r['trained']:.5f}, fp8 block {r['fp8block']:.5f}, "
              f"bf16 {r['bf16']:.5f}, peft {r['peft']:.5f}, reported PEFT gap {100 * r['peft_gap']:.2f}%)")
        model = load(os.path.join(work, f"{m}-fp8block"), dev, fp8=True)
        c.nll(f"{m} fp8 block (transformers, dequantize)", mean_nll(model, docs, bos, max_len, dev), r["fp8block"], NLL_TOL)
        c.tokens(f"{m} fp8 block (transformers, dequantize)", greedy(model, prompt, len(r["greedy_fp8block"]), dev), r["greedy_fp8block"])
        del model
        if have_ct:
            model = load(os.path.join(work, f"{m}-fp8channel"), dev)
            c.nll(f"{m} fp8 channel (compressed-tensors)", mean_nll(model, docs, bos, max_len, dev), r["fp8channel"], NLL_TOL)
            del model
        model = load(os.path.join(work, f"{m}-bf16"), dev)
        c.nll(f"{m} bf16 (transformers)", mean_nll(model, docs, bos, max_len, dev), r["bf16"], NLL_TOL)
        c.tokens(f"{m} bf16 (transformers)", greedy(model, prompt, len(r["greedy_bf16"]), dev), r["greedy_bf16"])
        del model
        peft = PeftModel.from_pretrained(load(os.path.join(work, "base"), dev), os.path.join(work, f"{m}-peft")).eval()
        got = mean_nll(peft, docs, bos, max_len, dev)
        c.nll(f"{m} peft on base (PEFT) vs loft's peft", got, r["peft"], NLL_TOL)
        c.nll(f"{m} peft on base (PEFT) vs trained model", got, r["trained"], PEFT_TOL)
        del peft
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()

    if c.failures:
        print(f"FAILED: {len(c.failures)} checks: " + ", ".join(c.failures))
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PEFT loads loft's adapters of the Llama-family cousins and reproduces loft's perplexity.

Run on the GPU machine (torch, transformers, peft; the CPU is enough) over a folder that loft made
here: per case a model folder (config.json + model.safetensors), a PEFT adapter folder as
`loft finetune` saves it (adapter-<name>/), and cases.json with loft's `evaluate --task ppl --json`
results for the base and the adapted model and each document's token ids ([BOS] + ids, as loft
and llama.cpp tokenize them). transformers scores the same ids in fp32 with eager attention
(Mistral's sliding window applies); the script prints one row per case and exits 1 when a
perplexity differs from loft's by more than 1e-4 relative.

    python3 scripts/dev/peft_family_check.py FOLDER
"""
import json
import math
import sys
from pathlib import Path

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM


def perplexity(model, docs):
    nll, count = 0.0, 0
    with torch.no_grad():
        for ids in docs:
            x = torch.tensor([ids])
            logp = torch.log_softmax(model(input_ids=x).logits[0].double(), dim=-1)
            nll -= logp[torch.arange(len(ids) - 1), x[0, 1:]].sum().item()
            count += len(ids) - 1
    return math.exp(nll / count), count


def main():
    folder = Path(sys.argv[1])
    cases = json.loads((folder / "cases.json").read_text())
    worst, failed = 0.0, False
    print("| model | loft base | PEFT base | rel | loft + adapter | PEFT + adapter | rel | tokens |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in cases:
        name = case["name"]
        base = AutoModelForCausalLM.from_pretrained(folder / name, torch_dtype=torch.float32,
                                                    attn_implementation="eager").eval()
        ppl_base, n = perplexity(base, case["ids"])
        adapted = PeftModel.from_pretrained(base, folder / f"adapter-{name}").eval()
        ppl_adapted, _ = perplexity(adapted, case["ids"])
        rel_b = abs(ppl_base - case["base"]["ppl"]) / case["base"]["ppl"]
        rel_a = abs(ppl_adapted - case["adapted"]["ppl"]) / case["adapted"]["ppl"]
        worst = max(worst, rel_b, rel_a)
        ok = rel_b <= 1e-4 and rel_a <= 1e-4 and n == case["base"]["tokens"]
        failed |= not ok
        print(f"| {name} | {case['base']['ppl']:.6f} | {ppl_base:.6f} | {rel_b:.2e} | {case['adapted']['ppl']:.6f} "
              f"| {ppl_adapted:.6f} | {rel_a:.2e} | {n}/{case['base']['tokens']} |{'' if ok else ' FAIL'}")
    print(f"worst relative difference {worst:.2e}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

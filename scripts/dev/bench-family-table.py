#!/usr/bin/env python3
"""Issue 28's bar as a table: each Llama cousin's tokens/s per method against a Llama shape of the
same size (default llama3-8b), from the JSON lines of scripts/dev/bench-round2.sh run with the
family shapes, e.g. on the GPU machine:

  SHAPES="llama3-8b:4:512: mistral-7b:4:512: qwen3-8b:4:512: qwen2.5-7b:4:512:" \\
    METHODS=lora,qlora,falqon,halo,hot STEPS=6 scripts/dev/bench-round2.sh
  scripts/dev/bench-family-table.py OUT/round2.jsonl [--reference llama3-8b] [--bar 0.95]

Prints tokens/s (ratio to the reference, ratio to PEFT where it ran) per shape and method, and
exits 1 when a ratio to the reference is under the bar.
"""
import argparse, json

ap = argparse.ArgumentParser()
ap.add_argument("jsonl")
ap.add_argument("--reference", default="llama3-8b")
ap.add_argument("--bar", type=float, default=0.95)
a = ap.parse_args()

loft, peft = {}, {}
for line in open(a.jsonl):
    line = line.strip()
    if not line.startswith("{"):
        continue
    d = json.loads(line)
    if "methods" in d:
        loft[d["shape"]] = {m["method"]: m["tokens_per_s"] for m in d["methods"] if m.get("tokens_per_s")}
    elif "tokens_per_s" in d:
        peft[d["shape"]] = d["tokens_per_s"]
if a.reference not in loft:
    raise SystemExit(f"no loft line for the reference shape {a.reference}")
ref = loft[a.reference]
methods = list(ref)
print("| shape | PEFT | " + " | ".join(methods) + " |")
print("| --- | --- |" + " --- |" * len(methods))
missed = []
for shape, got in loft.items():
    cells = []
    for m in methods:
        if m not in got:
            cells.append("—")
            continue
        r = got[m] / ref[m]
        p = f", {got[m] / peft[shape]:.2f}× PEFT" if shape in peft else ""
        cells.append(f"{got[m]:,.0f} ({r:.3f}{p})")
        if shape != a.reference and r < a.bar:
            missed.append(f"{shape} {m} {r:.3f}")
    print(f"| {shape} | {f'{peft[shape]:,.0f}' if shape in peft else '—'} | " + " | ".join(cells) + " |")
if missed:
    print(f"under the bar ({a.bar} of {a.reference}): " + "; ".join(missed))
raise SystemExit(1 if missed else 0)

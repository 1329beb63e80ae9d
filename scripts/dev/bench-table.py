#!/usr/bin/env python3
"""Markdown table from the JSON lines of scripts/dev/bench-round2.sh (or bench-vs-peft.sh): per shape,
PEFT's tokens/s and peak GiB, then each loft method's tokens/s, ratio to PEFT, measured peak GiB
and, where bench reports it, the estimated peak and its error.

  scripts/dev/bench-table.py OUT/round2.jsonl
"""
import json, sys

GiB = 1024 ** 3
peft, rows = {}, []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    d = json.loads(line)
    if "methods" in d:
        key = (d["shape"], d["batch"], d["seq"])
        for m in d["methods"]:
            rows.append((key, d.get("grad_checkpointing"), m))
    elif "tokens_per_s" in d:
        peft[(d.get("shape"), d.get("batch"), d.get("seq"))] = d
print("| shape | method | tokens/s | × PEFT | peak GiB | est. GiB | est. error |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for key, p in peft.items():
    gib = p.get("peak_gib", p.get("peak_bytes", 0) / GiB)
    print(f"| {key[0]} {key[1]}×{key[2]} | PEFT | {p['tokens_per_s']:,.0f} | 1.00 | {gib:.1f} | | |")
for key, gc, m in rows:
    base = peft.get(key, {}).get("tokens_per_s")
    ratio = f"{m['tokens_per_s'] / base:.2f}" if base and m.get("tokens_per_s") else ""
    peak = m.get("peak_bytes", 0) / GiB
    est = m.get("estimated_peak_bytes")
    est_s = f"{est / GiB:.1f}" if est else ""
    err = f"{(est / GiB - peak) / peak * 100:+.1f}%" if est and peak else ""
    tps = m.get("tokens_per_s") or 0
    print(f"| {key[0]} {key[1]}×{key[2]}{' GC' if gc else ''} | {m['method']} | {tps:,.0f} | "
          f"{ratio} | {peak:.1f} | {est_s} | {err} |")

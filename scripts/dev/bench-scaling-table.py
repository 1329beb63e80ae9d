#!/usr/bin/env python3
"""Markdown table from the JSON lines of scripts/dev/bench-scaling.sh: per shape and method, tokens/s
on one GPU (the bench without --gpus) and on N GPUs (--gpus N, the batch on every GPU), the ratio
to one GPU, issue 30's bar for that N (2 GPUs >= 1.95x, 4 GPUs >= 3.8x) and the per-GPU peak;
then where a data-parallel step goes (each rank's parts, `ranks` in bench's JSON), in ms.
Exits 1 when a bar is missed or a run that has a bar lacks its number.

  scripts/dev/bench-scaling-table.py OUT/scaling.jsonl
"""
import json, sys

GiB = 1024 ** 3
BARS = {2: 1.95, 4: 3.8}
runs = {}  # (shape, batch, seq, gc, method) -> {world_size: method entry}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    d = json.loads(line)
    if "methods" not in d:
        continue
    for m in d["methods"]:
        key = (d.get("shape") or d.get("model"), d["batch"], d["seq"], d.get("grad_checkpointing"),
               m["method"])
        runs.setdefault(key, {})[d.get("world_size", 1)] = m
missed = 0
print("| shape (per GPU) | method | GPUs | tokens/s | × one GPU | bar | peak GiB/GPU |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for key, by_n in runs.items():
    shape, batch, seq, gc, method = key
    one = by_n.get(1, {}).get("tokens_per_s")
    for n in sorted(by_n):  # the counts this machine ran (the script says which it skipped)
        m, bar = by_n[n], BARS.get(n)
        tps = m.get("tokens_per_s")
        ratio = tps / one if tps and one else None
        verdict = ""
        if bar is not None:
            ok = ratio is not None and ratio >= bar
            missed += not ok
            verdict = f"≥ {bar}× {'met' if ok else 'MISSED'}"
        cells = [f"{shape} {batch}×{seq}{' GC' if gc else ''}", method, str(n),
                 f"{tps:,.0f}" if tps else "does not fit",
                 f"{ratio:.2f}" if ratio is not None else "",
                 verdict, f"{m.get('peak_bytes', 0) / GiB:.1f}" if tps else ""]
        print("| " + " | ".join(cells) + " |")
parts = [(key, n, m) for key, by_n in runs.items() for n, m in sorted(by_n.items()) if m.get("ranks")]
if parts:
    print()
    print("| shape | method | GPUs | one GPU's step | step | per rank: GPU step = fwd+bwd + exposed sum + clip/opt | host queued fwd+bwd | host step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    ms = lambda v: f"{1e3 * v:.1f}"
    for key, n, m in parts:
        one = runs[key].get(1, {}).get("step_s")
        ranks = "; ".join(f"{ms(r['gpu_step_s'])} = {ms(r['compute_s'])} + {ms(r['exposed_sync_s'])} + "
                          f"{ms(r['after_sync_s'])}" for r in m["ranks"])
        print(f"| {key[0]} {key[1]}×{key[2]} | {key[4]} | {n} | {ms(one) if one else ''} | {ms(m['step_s'])} | "
              f"{ranks} | {', '.join(ms(r['host_until_sum_s']) for r in m['ranks'])} | "
              f"{', '.join(ms(r['host_step_s']) for r in m['ranks'])} |")
sys.exit(1 if missed else 0)

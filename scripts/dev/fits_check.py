#!/usr/bin/env python3
"""Verifies README's "What fits on your card" table on the GPU machine: every cell of one card's
column becomes a training step under --gpu-memory-limit, and a cell holds when that step completes
within the cap (bench reports an out-of-memory as "fits": false).

A cell "b0 / b1 / Nk" is three runs (r=64, all projections, one step, no warm-up):
  b0 rows of 2048 tokens without checkpointing, b1 rows with --grad-checkpointing, and 1 row of
  N·1024 tokens with it; "—" runs nothing.
Each run is `loft bench step --json` with its peak host memory (VmHWM) sampled beside it; results go
to $OUT/fits-check.jsonl, one object per run, and a summary table to stdout. Exit status 1 when a
run fails.
Usage (from the checkout root, with the staged run unpacked, scripts/dev/gpu-libpath.sh sourced):
  scripts/dev/fits_check.py [--card 24] [--models llama3-8b,...] [--methods qlora,...]
                            [--kinds plain,gc,long] [--loft .gpurun/bin/loft]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time


def readme_cells(readme, card):
    """{(model, method): (b0, b1, longest_tokens)} of the card's column; 0 where the cell says —."""
    lines = open(readme).read().split("<!-- fits-table:begin -->")[1].split("<!-- fits-table:end -->")[0]
    rows = [[c.strip() for c in l.strip().strip("|").split("|")] for l in lines.strip().splitlines()]
    col = rows[0].index(f"{card} GiB")
    cells = {}
    for r in rows[2:]:
        parts = [p.strip() for p in r[col].split("/")]
        num = lambda p: 0 if p == "—" else int(p)
        longest = 0 if parts[2] == "—" else int(parts[2].rstrip("k")) * 1024
        cells[(r[0], r[1])] = (num(parts[0]), num(parts[1]), longest)
    return cells


def run(loft, model, method, batch, seq, gc, card, log):
    args = [loft, "bench", "step", "--shape", model, "--method", method, "--batch", str(batch), "--seq", str(seq),
            "--lora-rank", "64", "--steps", "1", "--warmup", "0", "--profile-steps", "0",
            "--gpu-memory-limit", f"{card}GiB", "--json"] + (["--grad-checkpointing"] if gc else [])
    start = time.time()
    with open(log, "w") as err:
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True)
        hwm = 0
        while p.poll() is None:
            try:
                m = re.search(r"VmHWM:\s+(\d+)", open(f"/proc/{p.pid}/status").read())
                hwm = max(hwm, int(m.group(1)) * 1024) if m else hwm
            except OSError:
                pass
            time.sleep(0.5)
        out = p.stdout.read()
    result = {"model": model, "method": method, "batch": batch, "seq": seq, "grad_checkpointing": gc,
              "card_gib": card, "exit": p.returncode, "wall_s": round(time.time() - start, 1),
              "host_peak_bytes": hwm}
    try:
        m = json.loads(out)["methods"][0]
        result.update({k: m.get(k) for k in ("peak_bytes", "estimated_peak_bytes", "tokens_per_s", "fits")})
    except (ValueError, KeyError, IndexError):
        result["error"] = open(log).read().strip().splitlines()[-1:] or ["no output"]
    return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--card", type=int, default=24)
    p.add_argument("--models", default="")
    p.add_argument("--methods", default="")
    p.add_argument("--kinds", default="plain,gc,long")
    p.add_argument("--loft", default=".gpurun/bin/loft")
    p.add_argument("--readme", default="README.md")
    a = p.parse_args()
    out_dir = os.environ.get("OUT", "/tmp/loft-out")
    os.makedirs(out_dir, exist_ok=True)
    keep = lambda v, allowed: not allowed or v in allowed.split(",")
    kinds = a.kinds.split(",")
    failed = 0
    with open(os.path.join(out_dir, "fits-check.jsonl"), "a") as jsonl:
        for (model, method), (b0, b1, longest) in readme_cells(a.readme, a.card).items():
            if not keep(model, a.models) or not keep(method, a.methods):
                continue
            for kind, batch, seq, gc in (("plain", b0, 2048, False), ("gc", b1, 2048, True), ("long", 1, longest, True)):
                if kind not in kinds or batch == 0 or seq == 0:
                    continue
                log = os.path.join(out_dir, f"fits-{model}-{method.replace(':', '-')}-{kind}.log")
                r = run(a.loft, model, method, batch, seq, gc, a.card, log)
                # bench reports an out-of-memory as "fits": false and goes on (exit 0).
                r["holds"] = r["exit"] == 0 and r.get("fits") is True
                failed += not r["holds"]
                if not r["holds"] and "error" not in r:
                    r["error"] = [l.strip() for l in open(log) if "does not fit" in l or "error" in l][-1:]
                jsonl.write(json.dumps(r) + "\n")
                jsonl.flush()
                gib = lambda b: f"{b / 2**30:.2f}" if b else "-"
                print(f"{model:10} {method:9} {kind:5} {batch:3} x {seq:6}: {'holds' if r['holds'] else 'FAILS'}, "
                      f"exit {r['exit']}, "
                      f"peak {gib(r.get('peak_bytes'))} GiB (estimate {gib(r.get('estimated_peak_bytes'))}), "
                      f"host {gib(r['host_peak_bytes'])} GiB, {r['wall_s']} s {r.get('error', '')}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

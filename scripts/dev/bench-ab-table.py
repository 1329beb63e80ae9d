#!/usr/bin/env python3
"""The markdown table of bench-ab.sh's JSON lines: per item, each binary's tokens/s (every run,
in order) and the mean of its profiled parts (ms a step), the parts that moved by 0.5 ms or more."""
import json
import sys
from collections import defaultdict


def main(path):
    runs = defaultdict(lambda: defaultdict(list))  # item -> binary -> [method result]
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            d = json.loads(line)
            for m in d.get("methods", []):
                runs[d["item"]][d["binary"]].append(m)
    print("| item | A (before) tokens/s | B (after) tokens/s | B/A | parts that moved, ms: A → B |")
    print("| --- | --- | --- | --- | --- |")
    for item, by in runs.items():
        def rates(b):
            return [m["tokens_per_s"] for m in by.get(b, []) if m.get("tokens_per_s")]

        def parts(b):
            sums = defaultdict(float)
            ms = [m for m in by.get(b, []) if m.get("breakdown_s")]
            for m in ms:
                for k, v in m["breakdown_s"].items():
                    sums[k] += 1e3 * v / len(ms)
            return sums

        a, b = rates("A"), rates("B")
        ratio = f"{(sum(b) / len(b)) / (sum(a) / len(a)):.3f}" if a and b else ""
        pa, pb = parts("A"), parts("B")
        moved = [f"{k} {pa[k]:.1f} → {pb[k]:.1f}" for k in pb if k in pa and abs(pb[k] - pa[k]) >= 0.5]
        fmt = lambda xs: " / ".join(f"{x:,.0f}" for x in xs)
        print(f"| {item} | {fmt(a)} | {fmt(b)} | {ratio} | {'; '.join(moved)} |")


if __name__ == "__main__":
    main(sys.argv[1])

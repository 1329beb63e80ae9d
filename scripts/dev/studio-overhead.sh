#!/usr/bin/env bash
# What starting a run from `loft studio` costs in training speed: the same CPU finetune of
# examples/stories260K on examples/demo.jsonl, RUNS times from the shell and RUNS times as a studio
# job (POST /api/runs), alternating so machine load hits both alike. Per run: tokens/s (the median
# of metrics.jsonl after the first WARM steps) and CPU seconds (the shell run's own, from wait4;
# for the studio run, the studio process's own CPU during it, which is all it adds: the job is the
# same binary with the same options). Prints each pair, the median studio/shell tokens/s ratio and
# the studio's CPU as a share of a run's, and exits 1 when that share is 1% or more.
#   LOFT=build/loft RUNS=5 STEPS=60 WARM=5 scripts/dev/studio-overhead.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 - "${LOFT:-build/loft}" "${RUNS:-5}" "${STEPS:-60}" "${WARM:-5}" <<'PY'
import json, os, re, statistics, subprocess, sys, tempfile, time, urllib.request

loft, runs, steps, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
model, data = os.path.abspath("examples/stories260K"), os.path.abspath("examples/demo.jsonl")
tmp = tempfile.mkdtemp()
tick = os.sysconf("SC_CLK_TCK")

def tokens_per_s(run):
    rows = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if l.strip()]
    return statistics.median(r["tokens_per_s"] for r in rows[warm:])

def cpu_s(pid):  # utime + stime of a live process
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick

studio = subprocess.Popen([loft, "studio", "--port", "0", "--root", "examples", "--runs", f"{tmp}/studio-runs"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
try:
    url = re.search(r"http://\S+", studio.stdout.readline()).group(0)
    base, token = url.split("/?token=")
    def call(path, body=None, csrf=None):
        req = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json",
                                              **({"X-CSRF-Token": csrf} if csrf else {})})
        return json.load(urllib.request.urlopen(req))
    csrf = call("/api/session")["csrf"]
    ratios, shares, shell_tps, studio_tps = [], [], [], []
    for i in range(1, runs + 1):
        out = f"{tmp}/shell-{i}"
        p = subprocess.Popen([loft, "finetune", "--model", model, "--data", data, "--steps", str(steps), "--batch", "8",
                              "--seq", "128", "--lr", "5e-3", "--device", "cpu", "--seed", "1", "--no-report",
                              "--out", out], stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        assert status == 0, f"shell run {i} failed"
        shell_cpu = usage.ru_utime + usage.ru_stime
        before = cpu_s(studio.pid)
        run = call("/api/runs", {"base_model": model, "datasets": [data], "max_steps": steps, "batch": 8,
                                 "sequence_len": 128, "learning_rate": 5e-3, "device": "cpu", "seed": 1,
                                 "report": False, "output_dir": f"{tmp}/studio-runs/studio-{i}"}, csrf)
        while (status := call("/api/runs/" + run["id"])["status"]) not in ("finished", "failed", "stopped"):
            time.sleep(2)  # seldom: on a small machine the polling itself would take CPU from the run
        assert status == "finished", f"studio run {i}: {status}"
        share = (cpu_s(studio.pid) - before) / shell_cpu
        a, b = tokens_per_s(out), tokens_per_s(run["dir"])
        shell_tps.append(a), studio_tps.append(b), ratios.append(b / a), shares.append(share)
        print(f"run {i}: shell {a:.1f} tokens/s ({shell_cpu:.1f} CPU s), studio {b:.1f} tokens/s "
              f"(studio process {share * 100:.2f}% of the run's CPU)", flush=True)
    print(f"tokens/s: shell mean {statistics.mean(shell_tps):.1f} (stdev {statistics.pstdev(shell_tps):.1f}), "
          f"studio mean {statistics.mean(studio_tps):.1f} (stdev {statistics.pstdev(studio_tps):.1f}); "
          f"median studio/shell ratio {statistics.median(ratios):.3f}")
    share = statistics.mean(shares)
    print(f"the studio process's CPU during a run: {share * 100:.2f}% of the run's own (mean of {runs})")
    sys.exit(0 if share < 0.01 else 1)
finally:
    studio.terminate()
    studio.wait()
    subprocess.run(["rm", "-rf", tmp])
PY

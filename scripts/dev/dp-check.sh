#!/usr/bin/env bash
# Data-parallel finetune end to end on the GPU machine (issue 17, docs/multi-gpu.md), on
# examples/stories260K + examples/demo.jsonl:
#  - one GPU: the plain run, a second plain run (the device's own run-to-run spread: fp32 atomics),
#    `--gpus 1` (the NCCL path, one thread) and a torchrun-style process with WORLD_SIZE=1 (the
#    rendezvous + non-blocking NCCL init): their loss curves against the plain run's.
#  - two GPUs or more (skipped, and said so, on one): `--gpus 2` against one GPU with the same
#    global batch; two processes through the torchrun variables against `--gpus 2`; the same two
#    processes on NCCL's socket transport (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: as between
#    hosts) against them over NVLink, with NCCL's log showing NET/Socket; `--gpus 2
#    --shard-backbone` against `--gpus 2` for every method and backbone (the same bytes: loss curve
#    and adapter within the dQ atomics' spread);
#    `kill -9` of rank 1 while both train with --shard-backbone: rank 0 must exit with an error
#    naming the lost peer within --nccl-timeout; then `--resume` on ONE GPU, unsharded,
#    continues from the newest checkpoint to the end.
# Runs from the checkout root; binary as scripts/dev/gpu-kill-resume.sh finds it. Summary on stdout and
# in $OUT/dp-check/summary.txt, logs and metrics in $OUT/dp-check/runs.tgz. Exit 1 on a failed check.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/loft-out}
STEPS=${STEPS:-12}
if [ -z "${LOFT:-}" ]; then
  source "$(dirname "${BASH_SOURCE[0]}")/gpu-staged.sh" "$PWD/.gpurun"
  LOFT=build/loft; [ -x .gpurun/bin/loft ] && LOFT=.gpurun/bin/loft
fi
res=$OUT/dp-check
work=$(mktemp -d)
mkdir -p "$res"
: >"$res/summary.txt"
failures=0
report() { echo "$*" | tee -a "$res/summary.txt"; }
fail() { report "FAIL: $*"; failures=$((failures + 1)); }
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
base=(finetune --model examples/stories260K --data examples/demo.jsonl --batch 8 --micro-batch 2 --seq 256
      --lr 3e-3 --lora-rank 8 --seed 7 --schedule cosine --warmup 3 --nccl-timeout 20)
run() {  # name, then loft's extra arguments
  local name=$1; shift
  "$LOFT" "${base[@]}" --steps "$STEPS" --out "$work/$name" "$@" >"$work/$name.log" 2>&1 ||
    fail "$name: $(tail -1 "$work/$name.log")"
}
# Largest relative difference of the loss between two runs' metrics.jsonl, step by step; "steps
# differ" when they do not have the same steps.
cmp_loss() {
  python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f) if l.strip()] for f in sys.argv[1:3])
if [x["step"] for x in a] != [x["step"] for x in b] or not a: print("steps differ"); sys.exit()
print("%.3g" % max(abs(x["loss"] - y["loss"]) / abs(y["loss"]) for x, y in zip(a, b)))
PY
}
# Largest relative L2 difference of a tensor between two runs' adapter/adapter_model.safetensors
# (f32, bf16 and f16 tensors); "tensors differ" when the names or shapes differ.
cmp_adapter() {
  python3 - "$1/adapter/adapter_model.safetensors" "$2/adapter/adapter_model.safetensors" <<'PY'
import array, json, math, struct, sys
def load(path):  # name -> (shape, floats); small adapters, so plain Python
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head, out = json.loads(raw[8:8 + n]), {}
    for name, t in head.items():
        if name == "__metadata__": continue
        b, e = t["data_offsets"]; buf = raw[8 + n + b:8 + n + e]
        if t["dtype"] == "BF16":
            v = array.array("f", struct.pack("<%dI" % (len(buf) // 2), *(x << 16 for x in struct.unpack("<%dH" % (len(buf) // 2), buf))))
        elif t["dtype"] == "F32":
            v = array.array("f", buf)
        else:
            v = struct.unpack("<%de" % (len(buf) // 2), buf)
        out[name] = (t["shape"], v)
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
if a.keys() != b.keys() or any(a[k][0] != b[k][0] for k in a) or not a: print("tensors differ"); sys.exit()
def rel(x, y):
    return math.sqrt(sum((p - q) ** 2 for p, q in zip(x, y))) / max(math.sqrt(sum(q * q for q in y)), 1e-30)
print("%.3g" % max(rel(a[k][1], b[k][1]) for k in a))
PY
}
within() { python3 -c "import sys; sys.exit(0 if '$1' != 'steps differ' and float('$1') <= $2 else 1)"; }
torchrun_env() {  # world, rank
  echo "MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 WORLD_SIZE=$1 RANK=$2 LOCAL_RANK=$2"
}

report "dp-check: $LOFT, $gpus GPU(s), $STEPS steps of 8 rows (4 micro-batches of 2)"
run plain --device cuda
run plain2 --device cuda
run gpus1 --gpus 1
env $(torchrun_env 1 0) "$LOFT" "${base[@]}" --steps "$STEPS" --out "$work/torchrun1" >"$work/torchrun1.log" 2>&1 ||
  fail "torchrun1: $(tail -1 "$work/torchrun1.log")"
spread=$(cmp_loss "$work/plain2" "$work/plain")
report "one GPU: plain run again: max relative loss difference $spread (the device's run-to-run spread)"
for r in gpus1 torchrun1; do
  d=$(cmp_loss "$work/$r" "$work/plain")
  report "one GPU: $r against the plain run: $d"
  within "$d" 1e-4 || fail "$r: loss curve differs from the plain run by $d"
done
grep -q "ranks      1 GPU in this process" "$work/gpus1.log" || fail "gpus1: the plan does not show the data-parallel ranks"

if [ "$gpus" -lt 2 ]; then
  report "SKIPPED (one GPU): --gpus 2 against one GPU, two torchrun processes, kill -9 of a rank, resume on another GPU count"
else
  run gpus2 --gpus 2 --check-replicas-every 1
  d=$(cmp_loss "$work/gpus2" "$work/plain")
  report "two GPUs: --gpus 2 against one GPU with the same batch: $d"
  within "$d" 1e-2 || fail "gpus2: loss curve differs from one GPU by $d"
  for r in 0 1; do
    env $(torchrun_env 2 $r) "$LOFT" "${base[@]}" --steps "$STEPS" --out "$work/procs2" \
      >"$work/procs2.rank$r.log" 2>&1 &
    pids[$r]=$!
  done
  wait "${pids[0]}" || fail "procs2 rank 0: $(tail -1 "$work/procs2.rank0.log")"
  wait "${pids[1]}" || fail "procs2 rank 1: $(tail -1 "$work/procs2.rank1.log")"
  d=$(cmp_loss "$work/procs2" "$work/gpus2")
  report "two GPUs: two torchrun processes against --gpus 2: $d"
  within "$d" 1e-2 || fail "procs2: loss curve differs from --gpus 2 by $d"

  # The multi-node path on one host: no NVLink, no shared memory, NCCL's socket transport.
  for r in 0 1; do
    env $(torchrun_env 2 $r) NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO \
      "$LOFT" "${base[@]}" --steps "$STEPS" --out "$work/socket2" >"$work/socket2.rank$r.log" 2>&1 &
    pids[$r]=$!
  done
  wait "${pids[0]}" || fail "socket2 rank 0: $(tail -1 "$work/socket2.rank0.log")"
  wait "${pids[1]}" || fail "socket2 rank 1: $(tail -1 "$work/socket2.rank1.log")"
  grep -q "via NET/Socket" "$work/socket2.rank0.log" || fail "socket2: NCCL's log shows no NET/Socket channel"
  d=$(cmp_loss "$work/socket2" "$work/procs2")
  report "two GPUs: two torchrun processes over NCCL's socket transport against them over NVLink: $d"
  within "$d" 1e-2 || fail "socket2: loss curve differs from NVLink by $d"

  # Sharded against unsharded on the same two GPUs, every method and backbone: loss curve and adapter.
  i=0
  for m in lora qlora falqon halo "halo --backbone nf4" hot "hot --backbone fp8" "hot --backbone nf4"; do
    i=$((i + 1))
    if [ "$m" = lora ]; then plain=gpus2; else plain=m$i; run "$plain" --gpus 2 --method $m; fi
    run "m${i}shard" --gpus 2 --shard-backbone --method $m
    d=$(cmp_loss "$work/m${i}shard" "$work/$plain")
    a=$(cmp_adapter "$work/m${i}shard" "$work/$plain")
    report "two GPUs: --method $m --shard-backbone against unsharded: loss $d, adapter $a"
    within "$d" 1e-2 || fail "$m sharded: loss curve differs from unsharded by $d"
    within "$a" 5e-2 || fail "$m sharded: adapter differs from unsharded by $a"
  done

  # kill -9 of rank 1 mid-run (sharded): rank 0 must stop with an error, within the 20 s timeout.
  for r in 0 1; do
    env $(torchrun_env 2 $r) "$LOFT" "${base[@]}" --steps 400 --save-every 5 --shard-backbone --out "$work/kill" \
      >"$work/kill.rank$r.log" 2>&1 &
    pids[$r]=$!
  done
  for _ in $(seq 600); do
    [ "$(cat "$work/kill/metrics.jsonl" 2>/dev/null | wc -l)" -ge 12 ] && break
    sleep 0.1
  done
  [ "$(cat "$work/kill/metrics.jsonl" 2>/dev/null | wc -l)" -ge 12 ] ||
    fail "the sharded torchrun run logged no 12 steps in 60 s: rank 0: $(tail -2 "$work/kill.rank0.log" | tr '\n' ' '); rank 1: $(tail -2 "$work/kill.rank1.log" | tr '\n' ' ')"
  kill -9 "${pids[1]}"
  t0=$(date +%s.%N)
  # Rank 0 must stop by itself within --nccl-timeout (20 s); after 60 s it is killed, and failed.
  ( sleep 60; kill -9 "${pids[0]}" 2>/dev/null ) & watchdog=$!
  wait "${pids[0]}"; rc=$?
  kill "$watchdog" 2>/dev/null
  secs=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $t0))")
  report "kill -9 of rank 1: rank 0 exited with code $rc after $secs s: $(tail -1 "$work/kill.rank0.log")"
  [ "$rc" -ne 0 ] || fail "rank 0 exited 0 after its peer died"
  python3 -c "import sys; sys.exit(0 if $secs < 40 else 1)" || fail "rank 0 took $secs s to stop"
  newest=$(ls "$work/kill/checkpoints" | sed -n 's/^step-//p' | sort -n | tail -1)
  timeout 300 "$LOFT" "${base[@]}" --steps 400 --save-every 5 --out "$work/kill" --resume --gpus 1 \
    >"$work/kill.resume.log" 2>&1 || fail "resume on one GPU: $(tail -1 "$work/kill.resume.log")"
  report "resume on one GPU: $(grep -m1 'resumed at step' "$work/kill.resume.log") (newest checkpoint step-$newest); $(tail -1 "$work/kill.resume.log")"
  grep -q "resumed at step $newest" "$work/kill.resume.log" || fail "resume did not start at step $newest"
fi
tar -C "$work" -czf "$res/runs.tgz" . 2>/dev/null
report "dp-check: $failures failure(s)"
[ "$failures" -eq 0 ]

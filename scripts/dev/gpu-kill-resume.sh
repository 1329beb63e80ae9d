#!/usr/bin/env bash
# kill -9 and --resume on the GPU machine (the CPU twin is the test Finetune.KilledRunResumesTo-
# TheSameMetrics): `loft finetune` on examples/stories260K + examples/demo.jsonl, checkpointing
# every SAVE_EVERY steps, is killed with SIGKILL KILLS times and resumed each time, the moments
# spread over the run and cycling through three kinds: while a checkpoint is being written (its
# .tmp-step-* folder seen), a random delay after a checkpoint appeared, and a random time since the
# (re)start. After each
# kill: every checkpoints/step-N is complete (safetensors and trainer_state.json parse, sizes add
# up, the step matches), and the resume starts at the newest of them, so only the steps since it
# are lost. At the end: metrics.jsonl has every step once, no temporaries are left, and the
# metrics match an uninterrupted run: exactly on the CPU; on the GPU the max difference is
# reported beside that of a second uninterrupted run (the GPU step is not bit-deterministic in
# general: fp32 atomics sum flash attention's dQ and the gradient norm's partial sums).
#
# Runs from the checkout root. Binary: $LOFT, else .gpurun/bin/loft (unpacked from
# .gpurun/gpurun.tar.xz, scripts/dev/stage-gpu-run.sh), else build/loft. DEVICE=cuda (default) or cpu;
# STEPS (120), SAVE_EVERY (4), KILLS (9), SEED (1) for the random moments. Summary on stdout and
# in $OUT/gpu-kill-resume/summary.txt; metrics and logs in $OUT/gpu-kill-resume/runs.tgz. Exit 1 on
# any failed check.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/loft-out}
DEVICE=${DEVICE:-cuda} STEPS=${STEPS:-120} SAVE_EVERY=${SAVE_EVERY:-4} KILLS=${KILLS:-9}
RANDOM=${SEED:-1}
if [ -z "${LOFT:-}" ]; then
  source "$(dirname "${BASH_SOURCE[0]}")/gpu-staged.sh" "$PWD/.gpurun"
  LOFT=build/loft; [ -x .gpurun/bin/loft ] && LOFT=.gpurun/bin/loft
fi
res=$OUT/gpu-kill-resume
work=$(mktemp -d)
mkdir -p "$res"
args=(finetune --model examples/stories260K --data examples/demo.jsonl --steps "$STEPS" --batch 4 --seq 256
      --lr 3e-3 --lora-rank 8 --device "$DEVICE" --seed 7 --save-every "$SAVE_EVERY" --schedule cosine --warmup 3)
failures=0
report() { echo "$*" | tee -a "$res/summary.txt"; }
fail() { report "FAIL: $*"; failures=$((failures + 1)); }
: >"$res/summary.txt"
exec 9<> <(:)  # a pipe nothing writes to: `read -t` on it is a sleep without a fork
nap() { read -r -t "$1" -u 9 || true; }
calc() { awk "BEGIN { printf \"%.4f\", $1 }"; }  # float arithmetic without bc (the GPU image may lack it)

# Uninterrupted runs: the reference, and a second one to see whether the device is deterministic.
t0=$(date +%s.%N)
"$LOFT" "${args[@]}" --out "$work/ref" >"$work/ref.log" 2>&1 || { fail "reference run failed: $(tail -1 "$work/ref.log")"; }
ref_s=$(calc "$(date +%s.%N) - $t0")
"$LOFT" "${args[@]}" --out "$work/ref2" >"$work/ref2.log" 2>&1 || fail "second reference run failed"
report "gpu-kill-resume: $LOFT on $DEVICE, $STEPS steps, a checkpoint every $SAVE_EVERY, uninterrupted run $(printf %.2f "$ref_s")s"

# The newest complete checkpoint's step (0: none) and the last step metrics.jsonl holds.
newest() {  # bash builtins only: it is polled every millisecond
  local f n best=0
  for f in "$work/run/checkpoints"/step-*; do
    n=${f##*/step-}
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -gt "$best" ] && best=$n
  done
  echo "$best"
}
writing() {  # a checkpoint of step $1 or later is being written
  local f n
  for f in "$work/run/checkpoints"/.tmp-step-*; do
    n=${f##*/.tmp-step-}; n=${n%%-*}
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge "$1" ] && return 0
  done
  return 1
}
last_metric() { python3 -c 'import json,sys
n=0
for l in open(sys.argv[1]):
    try: n=json.loads(l)["step"]
    except Exception: pass
print(n)' "$work/run/metrics.jsonl" 2>/dev/null || echo 0; }
check_checkpoints() {  # every step-N folder complete and consistent
  python3 - "$work/run/checkpoints" <<'EOF' || return 1
import json, os, struct, sys
root, bad = sys.argv[1], []
for d in sorted(os.listdir(root)):
    if not d.startswith("step-"): continue
    p = os.path.join(root, d)
    try:
        for f in ("adapter.safetensors", "optimizer.safetensors"):
            b = open(os.path.join(p, f), "rb").read()
            n = struct.unpack("<Q", b[:8])[0]
            h = json.loads(b[8:8 + n])
            end = max([v["data_offsets"][1] for k, v in h.items() if k != "__metadata__"] + [0])
            assert len(b) == 8 + n + end, f"{f}: {len(b)} bytes, header says {8 + n + end}"
        st = json.load(open(os.path.join(p, "trainer_state.json")))
        assert st["step"] == int(d[5:]), f"trainer_state step {st['step']}"
    except Exception as e:
        bad.append(f"{d}: {e}")
if bad: print("; ".join(bad)); sys.exit(1)
EOF
}

pid=
start() {  # $1: extra option (--resume / --overwrite); the log of this start is $work/start.$n.log
  starts=$((starts + 1))
  "$LOFT" "${args[@]}" --out "$work/run" "$@" >"$work/start.$starts.log" 2>&1 &
  pid=$!
  started=$(date +%s.%N)
}
alive() { kill -0 "$pid" 2>/dev/null; }
starts=0 during_write=0 lost_max=0 resumed=0
start
for i in $(seq 1 "$KILLS"); do
  kind=$(( i % 3 ))
  goal=$(( i * STEPS / (KILLS + 1) ))  # kills spread over the run: this one near step $goal
  deadline=$(( $(date +%s) + 120 ))
  if [ $kind -eq 1 ]; then      # while a checkpoint is written
    while alive && ! writing "$goal" && [ "$(date +%s)" -lt $deadline ]; do nap 0.0005; done
  elif [ $kind -eq 2 ]; then    # a random delay (up to 2 checkpoint intervals) after a checkpoint
    have=$(newest)
    while alive && { [ "$(newest)" = "$have" ] || [ "$(newest)" -lt "$goal" ]; } && [ "$(date +%s)" -lt $deadline ]; do nap 0.001; done
    nap "$(calc "$ref_s * $SAVE_EVERY * 2 / $STEPS * $RANDOM / 32767")"
  else                          # a random moment before the run reaches the goal
    nap "$(calc "$ref_s * ($goal > $resumed + $SAVE_EVERY ? $goal - $resumed : $SAVE_EVERY) / $STEPS * $RANDOM / 32767")"
  fi
  alive || break
  kill -9 "$pid"; wait "$pid" 2>/dev/null
  at=$(last_metric); ckpt=$(newest)
  tmp=$(compgen -G "$work/run/checkpoints/.tmp-step-*" | wc -l)
  [ "$tmp" -gt 0 ] && during_write=$((during_write + 1))
  why=$(check_checkpoints) || fail "kill $i: a checkpoint is corrupt: $why"
  if [ "$ckpt" -eq 0 ]; then
    start --overwrite; resumed=0
  else
    start --resume
    while alive && ! grep -q "resumed at step" "$work/start.$starts.log"; do nap 0.005; done
    resumed=$(grep -oE "resumed at step [0-9]+" "$work/start.$starts.log" | grep -oE "[0-9]+$")
  fi
  lost=$(( at - ${resumed:-0} ))
  [ "$lost" -gt "$lost_max" ] && lost_max=$lost
  report "kill $i ($([ $kind -eq 1 ] && echo "checkpoint write" || { [ $kind -eq 2 ] && echo "after a checkpoint" || echo "random time"; })): at step $at, newest checkpoint $ckpt$([ "$tmp" -gt 0 ] && echo ", one being written"), resumed at ${resumed:-?}, $lost steps lost"
  [ "${resumed:-x}" = "$ckpt" ] || fail "kill $i: resumed at ${resumed:-?}, the newest complete checkpoint is $ckpt"
  [ "$lost" -ge 0 ] && [ "$lost" -le "$SAVE_EVERY" ] || fail "kill $i: $lost steps lost, more than the $SAVE_EVERY since the last checkpoint"
done
wait "$pid" || fail "the last resumed run failed: $(tail -1 "$work/start.$starts.log")"

leftovers=$(find "$work/run" -name '.tmp-step-*' -o -name '*.loft-tmp.*' -o -name '*.tmp.*' | wc -l)
[ "$leftovers" -eq 0 ] || fail "$leftovers temporaries left in the run folder"
# Metrics: every step once, compared field by field with the uninterrupted runs.
cmp=$(python3 - "$work/ref/metrics.jsonl" "$work/ref2/metrics.jsonl" "$work/run/metrics.jsonl" "$STEPS" <<'EOF'
import json, sys
ref, ref2, run = ([json.loads(l) for l in open(p)] for p in sys.argv[1:4])
steps = int(sys.argv[4])
def diff(a, b):
    worst, unequal = 0.0, 0
    for x, y in zip(a, b):
        for k in ("loss", "lr", "grad_norm", "tokens"):
            unequal += x[k] != y[k]
            worst = max(worst, abs(x[k] - y[k]) / max(abs(x[k]), 1e-12))
    return unequal, worst
ok = [m["step"] for m in run] == list(range(1, steps + 1))
u1, w1 = diff(ref, run)
u0, w0 = diff(ref, ref2)
print(int(ok), u1, f"{w1:.3g}", u0, f"{w0:.3g}")
EOF
)
read -r steps_ok unequal worst unequal0 worst0 <<<"$cmp"
[ "${steps_ok:-0}" = 1 ] || fail "metrics.jsonl of the killed run does not hold steps 1..$STEPS once each"
report "$((starts - 1)) kills, $during_write during a checkpoint write, at most $lost_max steps lost; metrics vs uninterrupted: $unequal values differ (max relative difference $worst); two uninterrupted runs: $unequal0 differ (max $worst0)"
if [ "$DEVICE" = cpu ] && [ "$unequal" != 0 ]; then fail "the CPU backend must resume exactly"; fi
[ "$DEVICE" != cpu ] && report "GPU step bit-deterministic on this run: $([ "$unequal0" = 0 ] && echo yes || echo no)"
tar -C "$work" -czf "$res/runs.tgz" --exclude='*.safetensors' . 2>/dev/null
rm -rf "$work"
report "gpu-kill-resume: $([ $failures -eq 0 ] && echo passed || echo "$failures checks FAILED")"
[ $failures -eq 0 ]

#!/usr/bin/env bash
# Long fuzzing on the GPU machine's CPU cores, run there from the checkout root with .fuzzrun
# carried (scripts/dev/fuzz-stage.sh made it): every target at once for SECONDS of wall time, the
# cores split by what each target still needs to reach FUZZ_GOAL executions (default 10^7) at its
# rate per core. Each core runs one libFuzzer process; a target's processes share one corpus
# (libFuzzer reloads it every second) and a process that stops early (a finding) is restarted.
#
# .fuzzwork/ (ignored, not carried) keeps the corpora, findings, totals and measured rates, so on
# a machine still warm from an earlier call the next call continues where it stopped.
#
# Results ($OUT, default /tmp/loft-out; at most 8 files come back, so per-target files are packed):
#   $OUT/fuzz/summary.txt  one line per target: executions this call, cores, exec/s per core, the
#                          total over the calls on this machine, cov, ft, findings (also on stdout)
#   $OUT/fuzz/fuzz.tgz     <target>.txt (the same line), crashes/ (every crash-/leak-/timeout-/oom-
#                          input as <target>-<file>) and logs/ (the log of every process that failed)
#   $OUT/fuzz/corpus.tgz   with FUZZ_CORPUS_OUT=1: the corpora, to merge back into build-fuzz/corpus
# usage: scripts/dev/fuzz-device.sh SECONDS   (FUZZ_CORES, default nproc; FUZZ_GOAL; FUZZ_RATES
#        "target=exec/s ..." overrides the rates per core used before this machine measured any)
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/dev/fuzz-common.sh
SECS=${1:?usage: scripts/dev/fuzz-device.sh SECONDS}
OUT=${OUT:-/tmp/loft-out}
GOAL=${FUZZ_GOAL:-10000000}
CORES=${FUZZ_CORES:-$(nproc)}
# Executions per second on one core, measured on the development machine (docs/reliability.md).
RATES="adapter_config=16666 config_json=10544 csv=22140 fp8_config=18292 fp8_weights=7585 gguf=15957
       record=7802 safetensors_header=2357 tokenizer_json=2941 trainer_state=10273 ${FUZZ_RATES:-}"
work=$PWD/.fuzzwork
stage=$work/stage
rm -rf "$stage" && mkdir -p "$stage" "$work/corpus" "$work/findings" "$work/totals" "$work/rates"
tar -C "$stage" -xzf .fuzzrun/fuzzrun.tgz || { echo "fuzz-device: no .fuzzrun/fuzzrun.tgz (scripts/dev/fuzz-stage.sh, then carry .fuzzrun)" >&2; exit 2; }
source "$(dirname "${BASH_SOURCE[0]}")/gpu-libpath.sh" "$stage"
targets=($(cd "$stage/bin" && ls fuzz_* | sed 's/^fuzz_//'))
rm -rf "$work/logs" && mkdir -p "$work/logs" "$OUT/fuzz"
for t in "${targets[@]}"; do
  mkdir -p "$work/corpus/$t" "$work/findings/$t"
  cp -rn "$stage/corpus/$t/." "$work/corpus/$t/" 2>/dev/null || true  # seeds join what is there
done

# LeakSanitizer stops the world with ptrace, which a sandboxed kernel (gVisor) may refuse: try one
# target briefly, and if LSan cannot run, fuzz without leak detection and say so.
leaks=on
t=${targets[0]}
# shellcheck disable=SC2046
if ! "$stage/bin/fuzz_$t" -runs=2000 $(fuzz_flags "$t" "$stage/dict") "$stage/corpus/$t" >"$work/logs/preflight.log" 2>&1 &&
   grep -q "LeakSanitizer" "$work/logs/preflight.log"; then
  export ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
  leaks="off (LeakSanitizer cannot run here)"
fi

# Cores per target: one each, then one at a time to the target with the most core-seconds still
# needed per core it has (all alike once every target has reached the goal).
alloc=$(for t in "${targets[@]}"; do
  rate=$(cat "$work/rates/$t" 2>/dev/null || grep -oE "(^|\s)$t=[0-9]+" <<<"$RATES" | tail -1 | cut -d= -f2)
  echo "$t ${rate:-5000} $(cat "$work/totals/$t" 2>/dev/null || echo 0)"
done | awk -v cores="$CORES" -v goal="$GOAL" '
  { t[NR] = $1; left = goal - $3; need[NR] = left > 0 ? left / $2 : 0; any += need[NR]; n = NR }
  END {
    # A target that has reached the goal gets no core while others still need some.
    used = 0
    for (i = 1; i <= n; i++) { if (!any) need[i] = 1; jobs[i] = need[i] > 0 ? 1 : 0; used += jobs[i] }
    for (c = used; c < cores; c++) {
      best = 1
      for (i = 2; i <= n; i++) if (need[i] / (jobs[i] + 1) > need[best] / (jobs[best] + 1)) best = i
      jobs[best]++
    }
    for (i = 1; i <= n; i++) print t[i], jobs[i]
  }')

deadline=$(( $(date +%s) + SECS ))
# One core's process for target $1, job $2: restarted until the deadline; its executions summed.
job() {
  local t=$1 j=$2 k=0 sum=0 rc left n
  while left=$(( deadline - $(date +%s) )); [ "$left" -gt 5 ] && [ $k -lt 20 ]; do
    k=$((k + 1))
    local log=$work/logs/$t.$j.$k.log
    # shellcheck disable=SC2046
    timeout -s INT $((left + 30)) "$stage/bin/fuzz_$t" -max_total_time="$left" $(fuzz_flags "$t" "$stage/dict") \
      -artifact_prefix="$work/findings/$t/" "$work/corpus/$t" >"$log" 2>&1
    rc=$?
    read -r n _ _ < <(fuzz_log_stats "$log")
    sum=$((sum + n))
    if [ $rc -eq 0 ]; then rm -f "$log"; else echo "$rc" >"$log.rc"; fi
    [ $rc -eq 0 ] && break
  done
  echo "$sum" >"$work/logs/$t.$j.sum"
}
echo "fuzz-device: ${SECS}s on $CORES cores, goal $GOAL per target, leak detection $leaks; cores: $(tr '\n' ' ' <<<"$alloc")" |
  tee "$OUT/fuzz/summary.txt"
start=$(date +%s)
while read -r t jobs; do
  for j in $(seq 1 "$jobs"); do job "$t" "$j" & done
done <<<"$alloc"
wait
elapsed=$(( $(date +%s) - start ))
# cov/ft of each shared corpus: libFuzzer's status line after replaying it once (-runs=0).
for t in "${targets[@]}"; do
  # shellcheck disable=SC2046
  "$stage/bin/fuzz_$t" -runs=0 $(fuzz_flags "$t" "$stage/dict") "$work/corpus/$t" >"$work/logs/$t.cov" 2>&1 &
done
wait

rm -rf "$work/report" && mkdir -p "$work/report/crashes" "$work/report/logs"
while read -r t jobs; do
  execs=0
  for f in "$work/logs/$t".*.sum; do [ -f "$f" ] && execs=$((execs + $(cat "$f"))); done
  total=$(( $(cat "$work/totals/$t" 2>/dev/null || echo 0) + execs ))
  echo "$total" >"$work/totals/$t"
  rate=$(( jobs > 0 ? execs / (jobs * (elapsed > 0 ? elapsed : 1)) : 0 ))
  [ "$rate" -gt 0 ] && echo "$rate" >"$work/rates/$t"
  read -r _ cov ft < <(fuzz_log_stats "$work/logs/$t.cov")
  found=$(fuzz_findings "$work/findings/$t" | wc -l)
  for f in $(fuzz_findings "$work/findings/$t"); do cp "$f" "$work/report/crashes/$t-$(basename "$f")"; done
  for f in "$work/logs/$t".*.log; do [ -f "$f" ] && cp "$f" "$work/report/logs/"; done
  line="target $t: executions $execs in ${elapsed}s on $jobs cores ($rate exec/s per core), total $total, cov $cov, ft $ft, findings $found"
  echo "$line" >"$work/report/$t.txt"
  echo "$line" | tee -a "$OUT/fuzz/summary.txt"
done <<<"$alloc"
tar -C "$work/report" -czf "$OUT/fuzz/fuzz.tgz" .
[ "${FUZZ_CORPUS_OUT:-0}" = 1 ] && tar -C "$work" -czf "$OUT/fuzz/corpus.tgz" corpus
grep -q "findings [1-9]" "$OUT/fuzz/summary.txt" && { echo "fuzz-device: findings, see $OUT/fuzz/fuzz.tgz (crashes/)"; exit 1; }
exit 0

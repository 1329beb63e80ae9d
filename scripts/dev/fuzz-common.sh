# Sourced by the fuzz scripts (fuzz-smoke.sh, fuzz-long.sh, fuzz-device.sh): the flags every run
# of a target uses, and how a run's log and findings are read.
#
# -max_len=131072: inputs up to 128 KiB, so JSON nested ~100k levels deep stays reachable (the
# parsers refuse 128+), while libFuzzer's growing length limit stops at half the old 256 KiB:
# every JSON target's cost per execution is linear in the input's bytes.

# fuzz_flags TARGET DICT_DIR: libFuzzer options for TARGET; DICT_DIR holds loft.dict and any
# <target>.dict of its own (gguf.dict), which replaces loft.dict for that target.
fuzz_flags() {
  local dict="$2/loft.dict"
  [ -f "$2/$1.dict" ] && dict="$2/$1.dict"
  echo "-max_len=131072 -timeout=10 -rss_limit_mb=4096 -dict=$dict -print_final_stats=1"
}

# fuzz_log_stats LOG: "EXECUTIONS COV FT" of one libFuzzer run (0 where the log lacks them).
fuzz_log_stats() {
  local n line c f
  n=$(grep -oE "stat::number_of_executed_units: [0-9]+" "$1" | tail -1 | grep -oE "[0-9]+$" || true)
  line=$(grep -E "^#[0-9]+" "$1" | tail -1 || true)
  c=$(grep -oE "cov: [0-9]+" <<<"$line" | grep -oE "[0-9]+" || true)
  f=$(grep -oE "ft: [0-9]+" <<<"$line" | grep -oE "[0-9]+" || true)
  echo "${n:-0} ${c:-0} ${f:-0}"
}

# fuzz_findings DIR: the crash-/leak-/timeout-/oom- inputs libFuzzer left in DIR, one a line.
fuzz_findings() {
  find "$1" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \)
}

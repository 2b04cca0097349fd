#!/usr/bin/env bash
# Three arms (old eec77b4, new = named-barrier turn, newb = mbarrier turn),
# kiln_bench per arm, the arm order rotating each round; rounds until the
# time budget.  AB_ONLY / AB_OPS select cases and ops.
set -u
cd "$(dirname "$0")"; here=$(pwd)
out=${OUT:-/tmp/ab}; mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
t0=$(date +%s); deadline=$((t0 + ${AB_SECONDS:-200}))
arms=(old new newb)
bench() {
  local c; c=$(mktemp -d /tmp/kc.XXXXXX)
  KILN_CACHE_DIR=$c KILN_BUNDLE_PATH=$here/$1/kiln-sm_90a.kbundle "$here/$1/kiln_bench" \
    --cases bench/cases.tsv --ops "$AB_OPS" --only "$AB_ONLY" --reps 30 --untuned > "$out/bench_$1_$2.log" 2>&1
  echo "  $1 round $2: rc=$? $(grep -c FAILED "$out/bench_$1_$2.log") FAILED"
  rm -rf "$c"
}
r=0; last=0
while :; do
  now=$(date +%s)
  [ $r -ge 1 ] && [ $((now + last * 12 / 10)) -gt $deadline ] && break
  r=$((r + 1)); s=$now
  for i in 0 1 2; do bench ${arms[$(( (i + r) % 3 ))]} $r; done
  last=$(( $(date +%s) - s )); echo "  round $r took $last s"
done
for a in "${arms[@]}"; do
  echo "== $a"
  for f in "$out"/bench_${a}_*.log; do
    awk '/With the shipped/{p=1} p && NF >= 8 && $1 != "case" {printf "%s/%s %s/%s  ", substr($1,1,8), $2, $3, $4} END {print ""}' "$f"
  done
done

#!/usr/bin/env bash
# sm90 device-layer A/B on one GPU, in one call (docs/sm90_kernel.md):
#   1. the GPU suite on the NEW build, kernels from the new bundle, no NVRTC;
#   2. every sweep kernel of the NEW templates checked against the reference
#      by kiln tune's GPU timer (three small shapes: decode, mod64_1, skew);
#   3. kiln_bench OLD (eec77b4) and NEW alternating, rounds until the time
#      budget, each with --untuned (tuned and catalog-default kernels);
#      ab_table.py prints medians over rounds, new/old.
# Layout: new/{kiln,kiln_bench,kiln-sm_90a.kbundle,tests/...,examples/...},
# old/{kiln_bench,kiln-sm_90a.kbundle}, cache/ (new kernels, for tune).
set -u
cd "$(dirname "$0")"; here=$(pwd)
out=${OUT:-/tmp/ab}; mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$here/new/tests/gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
t0=$(date +%s); deadline=$((t0 + ${AB_SECONDS:-530}))
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader

if [ -z "${AB_BENCH_ONLY:-}" ]; then
echo "== 1. GPU suite (new)"
KILN_BUNDLE_PATH=$here/new/kiln-sm_90a.kbundle KILN_TEST_EXPECT_NO_NVRTC=1 OUT=$out \
  bash scripts/gpu_suite.sh new > "$out/suite.log" 2>&1
echo "suite rc=$? ($(( $(date +%s) - t0 )) s)"
sed -n '/---- kiln GPU suite/,$p' "$out/suite.log"

echo "== 2. every sweep kernel against the reference (new)"
rm -rf /tmp/kcache; cp -r cache /tmp/kcache
KILN_CACHE_DIR=/tmp/kcache timeout 120 new/kiln tune specs/sweeps/*.yaml --shapes shapes.tsv \
  --timer gpu -o /tmp/t.tuning > "$out/tune.log" 2>&1
echo "tune rc=$? ($(( $(date +%s) - t0 )) s): $(awk -F'\t' '$4=="ok"' /tmp/t.tuning.journal | wc -l) ok," \
     "$(awk -F'\t' '$4=="bad"' /tmp/t.tuning.journal | wc -l) bad measurements"
cp /tmp/t.tuning.journal "$out/tune.journal" 2>/dev/null
awk -F'\t' '$4=="bad"' /tmp/t.tuning.journal | head

fi
echo "== 3. benchmark, old and new alternating"
bench() { # side round
  local c; c=$(mktemp -d /tmp/kc.XXXXXX)
  KILN_CACHE_DIR=$c KILN_BUNDLE_PATH=$here/$1/kiln-sm_90a.kbundle "$here/$1/kiln_bench" \
    --cases bench/cases.tsv --ops ${AB_OPS:-fprop,dgrad,wgrad,wgrad_acc} --reps 30 --untuned > "$out/bench_$1_$2.log" 2>&1
  echo "  $1 round $2: rc=$? $(grep -c FAILED "$out/bench_$1_$2.log") FAILED"
  rm -rf "$c"
}
r=0; last=0
while :; do
  now=$(date +%s)
  [ $r -ge 1 ] && [ $((now + last * 13 / 10)) -gt $deadline ] && break
  r=$((r + 1)); s=$now
  if [ $(((r + ${AB_SWAP:-0}) % 2)) -eq 1 ]; then bench old $r; bench new $r; else bench new $r; bench old $r; fi
  last=$(( $(date +%s) - s )); echo "  round $r took $last s"
  [ $r -ge 6 ] && break
done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
python3 ab_table.py "$out" | tee "$out/ab_table.txt"

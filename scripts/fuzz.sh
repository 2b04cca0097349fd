#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds kiln's libFuzzer targets with clang (ASan + UBSan) in build-fuzz
# (or $KILN_FUZZ_BUILD) and runs each for SECONDS (default 30; CI's short
# run).  Run longer by hand: scripts/fuzz.sh 3600.  The corpus grows in
# $KILN_FUZZ_CORPUS (default build-fuzz/corpus), seeded from the shipped
# specs, the spec test corpus, the shipped tuning table and binary seeds
# written by kiln's own writers.  A crash or a broken invariant leaves its
# input as build-fuzz/crash-TARGET-* and fails the script.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   targets: spec expand tuning cache_entry bundle
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
shift || true
targets=${*:-spec expand tuning cache_entry bundle}
cc=${KILN_FUZZ_CC:-clang}
if ! command -v "$cc" >/dev/null; then
  echo "fuzz: $cc not found; the fuzzers need clang (libFuzzer) — skipped" >&2
  exit 0
fi
build=${KILN_FUZZ_BUILD:-build-fuzz}
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S fuzz -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" \
  -DCUDAToolkit_ROOT="${CUDAToolkit_ROOT:-/usr/local/cuda}" \
  -DCMAKE_C_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined -Wl,--as-needed" >/dev/null
bins=""
for t in $targets; do bins="$bins fuzz_$t"; done
ninja -C "$build" $bins fuzz_make_seeds

corpus=${KILN_FUZZ_CORPUS:-$build/corpus}
for t in spec expand tuning cache_entry bundle; do mkdir -p "$corpus/$t"; done
cp specs/*.yaml specs/sweeps/*.yaml tests/data/specs/good/*.yaml "$corpus/expand/"
cp specs/*.yaml specs/sweeps/*.yaml tests/data/specs/good/*.yaml tests/data/specs/bad/*.yaml \
  "$corpus/spec/"
cp specs/tuning/*.tuning "$corpus/tuning/"
# Inputs that once broke a target (tests/data/fuzz/TARGET-*) are replayed.
for t in spec expand tuning cache_entry bundle; do
  for f in tests/data/fuzz/"$t"-*; do if [ -e "$f" ]; then cp "$f" "$corpus/$t/"; fi; done
done
"$build/fuzz_make_seeds" "$corpus" specs/tuning/sm_90a.tuning

dict() {
  case $1 in
    spec | expand) echo fuzz/spec.dict ;;
    tuning) echo fuzz/tuning.dict ;;
    *) echo fuzz/binary.dict ;;
  esac
}
failed=""
for t in $targets; do
  echo "== fuzz_$t for ${secs}s"
  # -timeout: one input may take at most 10 s (the template deadline is 10 s).
  if ! "$build/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=3072 \
      -dict="$(dict "$t")" -artifact_prefix="$build/crash-$t-" -print_final_stats=1 \
      "$corpus/$t" 2>"$build/fuzz_$t.log"; then
    tail -40 "$build/fuzz_$t.log" >&2
    failed="$failed $t"
  else
    grep -E "^stat::number_of_executed_units|^Done" "$build/fuzz_$t.log" || true
  fi
done
if [ -n "$failed" ]; then
  echo "fuzz: failed:$failed (inputs in $build/crash-*)" >&2
  exit 1
fi
echo "fuzz: all targets ran ${secs}s without a crash or a broken invariant"

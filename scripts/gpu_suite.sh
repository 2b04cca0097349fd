#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_suite.sh — runs kiln's GPU tests and the example from an existing build
# folder (built elsewhere and carried here; this script builds nothing).
#
#   scripts/gpu_suite.sh [BUILD_DIR]      (default: build-gpu)
#
# The test binaries are run directly (not through ctest, whose files hold the
# absolute paths of the machine that configured the build).  Each gets a
# fresh kernel cache.  A short pass/fail table with timings comes last.
# Logs go to $OUT/gpu_suite.log when OUT is set.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-gpu}
case $build in /*) ;; *) build=$here/$build ;; esac
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KILN_CACHE_DIR=$(mktemp -d /tmp/kiln-cache.XXXXXX)
log=${OUT:-/tmp}/gpu_suite_$(basename "$build").log
: > "$log"
cd "$here"

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'

results=()
fails=0
run() { # name, command...
    local name=$1; shift
    local t0 t1 rc
    t0=$(date +%s.%N)
    echo "=== $name" >> "$log"
    "$@" >> "$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    local status=PASS
    if [ $rc -eq 77 ]; then status=SKIP
    elif [ $rc -ne 0 ]; then status="FAIL($rc)"; fails=$((fails + 1)); fi
    results+=("$(printf '%-28s %-9s %8.2f s' "$name" "$status" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')")")
    # The failing test's tail, so it shows in a short output.
    case $status in FAIL*) tail -n 40 "$log" ;; SKIP) tail -n 3 "$log" ;; esac
}

for t in "$build"/tests/gpu/test_*; do
    [ -x "$t" ] || continue
    run "$(basename "$t")" "$t"
done
[ -x "$build/tests/unit/test_validate" ] && run test_validate "$build/tests/unit/test_validate"
[ -x "$build/examples/example_basic" ] && run example_basic "$build/examples/example_basic"

grep -E "rel (err|diff)|->|first call|last call|device:" "$log" | tail -n 60
echo
echo "---- kiln GPU suite ($build) ----"
printf '%s\n' "${results[@]}"
rm -rf "$KILN_CACHE_DIR"
[ $fails -eq 0 ]

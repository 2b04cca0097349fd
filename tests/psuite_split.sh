#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/gpu_all.sh part psuite, on stand-in test binaries (no GPU): a
# binary named in KILN_PSUITE_SPLIT runs as chains of one-test processes,
# every test of its source exactly once; a failing test fails its chain
# only; the shared deadline stops a chain that runs past it; a memcheck run
# takes the caller's filter; a binary not split runs whole, once.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d /tmp/kiln-psuite-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "psuite_split: $*" >&2; exit 1; }

# The tests of test_gpu_gemm, read here with any cmocka_unit_test* macro, so
# that a form the script's reading misses fails this test.
mapfile -t want < <(grep -oE 'cmocka_unit_test[a-z_]*\(test_[a-z0-9_]+' tests/gpu/test_gpu_gemm.c |
                    sed 's/.*(//' | sort)
[ ${#want[@]} -ge 8 ] || fail "found only ${#want[@]} tests in tests/gpu/test_gpu_gemm.c"

mkdir -p "$tmp/build/tests/gpu" "$tmp/bin"
log=$tmp/runs.log
# A stand-in test binary: logs its name and filter; fails on $FAIL_NAME,
# sleeps on $SLOW_NAME.
for b in test_gpu_gemm test_gpu_api; do
  cat > "$tmp/build/tests/gpu/$b" <<EOF
#!/usr/bin/env bash
echo "$b \${KILN_TEST_FILTER:-<all>}" >> "$log"
[ -n "\${SLOW_NAME:-}" ] && [ "\${KILN_TEST_FILTER:-}" = "\$SLOW_NAME" ] && exec sleep 30
[ -n "\${FAIL_NAME:-}" ] && [ "\${KILN_TEST_FILTER:-}" = "\$FAIL_NAME" ] && exit 1
exit 0
EOF
done
cat > "$tmp/bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
while [ "${1#--}" != "$1" ]; do shift 2; done   # --tool memcheck --error-exitcode 9
"$@"; rc=$?; echo "========= ERROR SUMMARY: 0 errors"; exit $rc
EOF
printf '#!/bin/sh\necho stand-in GPU\n' > "$tmp/bin/nvidia-smi"
chmod +x "$tmp"/build/tests/gpu/* "$tmp"/bin/*

run() { # env assignments...; prints gpu_all.sh's output (the caller's KILN_ settings left out)
  env -u KILN_TEST_FILTER -u KILN_PSUITE_MEMCHECK -u KILN_PSUITE_TESTS PATH="$tmp/bin:$PATH" \
    OUT="$tmp/out" KILN_GPU_PARTS=psuite KILN_PSUITE_SPLIT=test_gpu_gemm KILN_PSUITE_CHAINS=4 "$@" \
    bash scripts/gpu_all.sh "$tmp/build" 2>&1
}

# 1. Every test once, one failing test, a memcheck with a filter.
bad=${want[2]}
out=$(run FAIL_NAME="$bad" KILN_PSUITE_TIMEOUT=60 KILN_PSUITE_MEMCHECK="test_gpu_gemm:${want[0]}")
mapfile -t got < <(grep '^test_gpu_gemm ' "$log" | cut -d' ' -f2 | sort)
# the memcheck run adds want[0] once more
expect=$(printf '%s\n' "${want[@]}" "${want[0]}" | sort)
[ "$(printf '%s\n' "${got[@]}")" = "$expect" ] ||
  fail "test_gpu_gemm's runs differ from its tests: $(diff <(echo "$expect") <(printf '%s\n' "${got[@]}") | tr '\n' ' ')"
[ "$(grep -c '^test_gpu_api <all>$' "$log")" = 1 ] || fail "test_gpu_api did not run whole, once"
chains=$(grep -c '^psuite test_gpu_gemm_part[0-9]*: ' <<< "$out" || true)
[ "$chains" = 4 ] || fail "expected 4 chains of test_gpu_gemm, saw $chains"
[ "$(grep -c '^psuite test_gpu_gemm_part[0-9]*: FAIL(1)' <<< "$out" || true)" = 1 ] ||
  fail "the failing test $bad did not fail exactly one chain"
grep -q '^psuite test_gpu_api: PASS' <<< "$out" || fail "test_gpu_api not reported as passing"
grep -q "^psuite memcheck_test_gpu_gemm_${want[0]}: PASS in [0-9]* s; ========= ERROR SUMMARY: 0 errors" <<< "$out" ||
  fail "the memcheck run is not reported with its error summary"
[ -f "$tmp/out/psuite_logs.tgz" ] || fail "no psuite_logs.tgz"

# 2. The shared deadline: one test sleeps past it; its chain times out, the
# call ends near the deadline.
: > "$log"
t0=$(date +%s)
out=$(run SLOW_NAME="${want[1]}" KILN_PSUITE_TIMEOUT=3)
secs=$(( $(date +%s) - t0 ))
[ "$secs" -lt 20 ] || fail "the deadline of 3 s was not kept ($secs s)"
[ "$(grep -c '^psuite test_gpu_gemm_part[0-9]*: TIMEOUT' <<< "$out" || true)" = 1 ] ||
  fail "the chain past its deadline is not reported as TIMEOUT"
echo "psuite_split: ok (${#want[@]} tests in 4 chains, a failure, a memcheck, the deadline)"

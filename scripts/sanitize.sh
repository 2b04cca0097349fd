#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the CPU suite with AddressSanitizer and UndefinedBehaviorSanitizer
# in its own build folder (build-asan, or $KILN_ASAN_BUILD) and runs it.
# Any ASan report, leak or UB report fails the test it happens in.
#   scripts/sanitize.sh            build and run every CPU test
#   scripts/sanitize.sh -R spec    extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KILN_ASAN_BUILD:-build-asan}
cc=${CC:-cc}
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# --as-needed: the sanitizer runtimes are linked --no-as-needed, and so would
# be the driver stub NVRTC's CMake target drags in; no test may need libcuda.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKILN_WERROR=ON \
  -DCMAKE_C_COMPILER="$cc" -DKILN_BUILD_BUNDLE=OFF \
  -DCUDAToolkit_ROOT="${CUDAToolkit_ROOT:-/usr/local/cuda}" \
  -DCMAKE_C_FLAGS="$san -O1" \
  -DCMAKE_EXE_LINKER_FLAGS="$san -Wl,--as-needed" \
  -DCMAKE_SHARED_LINKER_FLAGS="$san -Wl,--as-needed" >/dev/null
ninja -C "$build"
# Leaks count (detect_leaks); NVRTC's own allocations that live until exit
# are suppressed by library name only (scripts/sanitize.supp).
# intercept_tls_get_addr=0: this runtime's __tls_get_addr interceptor
# (GCC 12's) takes a dynamic TLS block for glibc 2.19's layout when its
# address happens to be 16 past a page, reads a bogus range from before it,
# and the leak checker's tracer then dies at exit (google/sanitizers#1322).
# Here that hit test_wgmma_serial after its test passed, depending on where
# NVRTC's allocations fell.  Only dynamic TLS goes unscanned: kiln has none.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:intercept_tls_get_addr=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/sanitize.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# The tests that would compile shipped kernels again (test_pack, test_tune,
# test_wgmma_serial) start from the bundle's kernel cache
# (kiln_test_pack_cache); this build packs no bundle, so they are given the
# plain build's rather than running NVRTC over every shipped kernel under
# the sanitizers.
[ -d build/pack-cache ] && export KILN_TEST_PACK_CACHE="$PWD/build/pack-cache"
# The install test builds consumer projects against the installed library,
# which here would need the sanitizer runtimes, and lib_copies loads the
# library into a Python that has none (ASan must come first): both run in
# the plain build.
ctest --test-dir "$build" -L cpu -E "^(install|lib_copies)$" --output-on-failure -j "${JOBS:-$(nproc)}" "$@"

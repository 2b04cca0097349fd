#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds a diagnostic libkiln whose sm90 GEMM kernels stamp a per-CTA
# timeline (templates/sm90_gemm.cuh, KILN_TIMELINE) and print it, from a
# copy of this checkout's tracked tree with the define added to that copy's
# template.  The shipped templates never define it: a library that prints
# is for python/bench/timeline.py only.  Its kernels come from NVRTC at
# their first call (a bundle packed from the shipped templates does not
# match their source).
#   scripts/timeline_build.sh OUT_DIR      -> OUT_DIR/libkiln.so
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/timeline_build.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/kiln-timeline.XXXXXX)
trap 'rm -rf "$work"' EXIT
git ls-files -z | tar --null -T - -cf - | tar xf - -C "$work"
sed -i '1i #define KILN_TIMELINE 1' "$work/templates/sm90_gemm.cuh"
cmake -S "$work" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF \
  -DKILN_BUILD_BUNDLE=OFF > "$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/build" --target kiln_shared > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
cp -L "$work/build/runtime/libkiln.so" "$out/libkiln.so"
strip --strip-debug "$out/libkiln.so"
echo "timeline_build: $out/libkiln.so"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds a trial libkiln: this checkout's tracked tree with each NAME[=VALUE]
# defined at the top of the copy's templates/sm90_gemm.cuh, for a side of
# python/bench/context_ab.py (--libs) or for python/bench/timeline.py
# (KILN_TIMELINE: a per-CTA timeline).  Trial switches are #ifdef blocks in
# the template that no shipped build defines.  A trial library's kernels
# come from NVRTC at their first call: a bundle packed from the shipped
# templates does not match their source.
#   scripts/trial_build.sh OUT_DIR NAME[=VALUE]...   -> OUT_DIR/libkiln.so
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/trial_build.sh OUT_DIR NAME[=VALUE]...}
shift
[ $# -gt 0 ] || { echo "trial_build: no define given" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/kiln-trial.XXXXXX)
trap 'rm -rf "$work"' EXIT
git ls-files -z | tar --null -T - -cf - | tar xf - -C "$work"
for d in "$@"; do
  case $d in *[!A-Za-z0-9_=]*) echo "trial_build: $d: expected NAME or NAME=VALUE" >&2; exit 2 ;; esac
  name=${d%%=*}; value=1; [ "$name" != "$d" ] && value=${d#*=}
  sed -i "1i #define $name $value" "$work/templates/sm90_gemm.cuh"
done
cmake -S "$work" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF \
  -DKILN_BUILD_BUNDLE=OFF > "$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/build" --target kiln_shared > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
cp -L "$work/build/runtime/libkiln.so" "$out/libkiln.so"
strip --strip-debug "$out/libkiln.so"
echo "trial_build: $out/libkiln.so ($*)"

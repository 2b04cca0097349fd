#!/usr/bin/env bash
# The main job: set up and build, compile every shipped spec for sm_90a into
# the cache, and, where a GPU is present, run the GPU suite and the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/compiler/kiln compile specs/ --arch sm_90a
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  scripts/gpu_suite.sh build
else
  echo "run: no GPU here; kernels are compiled and cached (the GPU suite needs a GPU)"
fi

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: set up and build, compile every shipped spec for sm_90a into
# one bundle (build/kiln-sm_90a.kbundle; no GPU needed), and where a GPU is
# present run the GPU suite and the benchmark with kernels from that bundle.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# the build packed build/kiln-sm_90a.kbundle (cmake/KilnPackage.cmake)
build/kiln bundle verify build/kiln-sm_90a.kbundle
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  scripts/gpu_all.sh build
else
  echo "run: no GPU here; the bundle is built and verified (the suite and benchmark need a GPU)"
fi

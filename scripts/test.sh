#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sets up, builds, and runs every test.  GPU tests skip (with the reason)
# where there is no GPU; the CPU suite always runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
# ctest does not show a skipped test's output: say why the GPU tests skipped.
grep -h "^SKIP:" build/Testing/Temporary/LastTest.log 2>/dev/null | sort -u | sed 's/^/gpu tests skipped: /' || true

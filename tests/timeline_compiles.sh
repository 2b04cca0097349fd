#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The diagnostic timeline (templates/sm90_gemm.cuh, KILN_TIMELINE; a
# libkiln of it: `scripts/trial_build.sh OUT KILN_TIMELINE`) still
# compiles, without a spill in fprop and without ptxas serialising the wgmma pipeline (what a call in the kernel,
# e.g. a printf, does), so that its stamps time the kernels as shipped.
#   tests/timeline_compiles.sh KILN_CLI
set -euo pipefail
cd "$(dirname "$0")/.."
kiln=${1:?usage: tests/timeline_compiles.sh KILN_CLI}
work=$(mktemp -d /tmp/kiln-tl-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r templates "$work/templates"
sed -i '1i #define KILN_TIMELINE 1' "$work/templates/sm90_gemm.cuh"
specs="specs/default/sm90_fprop_bf16_128x256_kc4.yaml specs/default/sm90_dgrad_bf16_128x256_kc4.yaml
       specs/default/sm90_fprop_bf16_128x256.yaml"
# shellcheck disable=SC2086
"$kiln" compile --template-dir "$work/templates" --cache-dir "$work/cache" $specs > "$work/log" 2>&1 ||
  { cat "$work/log"; echo "timeline_compiles: the timeline build does not compile"; exit 1; }
if grep -q "serialized" "$work/log"; then
  cat "$work/log"; echo "timeline_compiles: ptxas serialised a timeline kernel's wgmma"; exit 1
fi
# the define took: the timeline kernel reads the globaltimer, a shipped one does not
"$kiln" emit --template-dir "$work/templates" specs/default/sm90_fprop_bf16_128x256_kc4.yaml > "$work/tl.cu"
grep -q '^#define KILN_TIMELINE 1' "$work/tl.cu" ||
  { echo "timeline_compiles: the define is not in the timeline kernel's source"; exit 1; }
awk '$1 == "sm90_fprop_bf16_128x256_kc4" && $6 != 0 { bad = 1 } END { exit bad }' "$work/log" ||
  { cat "$work/log"; echo "timeline_compiles: the timeline fprop kernel spills"; exit 1; }
echo "timeline_compiles: $(grep -c " sm_90a  *compiled " "$work/log") timeline kernels compile, wgmma not serialised"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Writes the generated source of every kernel of every shipped spec (sweeps
# expanded) to DIR/<kernel>.cu, for checking that a refactor of the templates
# or the compiler leaves the generated code byte-identical:
#   scripts/emit_all.sh /tmp/before; (change); scripts/emit_all.sh /tmp/after
#   diff -r /tmp/before /tmp/after
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/emit_all.sh DIR [KILN_BINARY]}
kiln=${2:-build/kiln}
mkdir -p "$out"
for spec in $(find specs -name '*.yaml' | sort); do
  names=$("$kiln" compile "$spec" --arch sm_90a --json --cache-dir "$out/.cache" 2>/dev/null |
          sed -n 's/.*"name": "\([^"]*\)".*/\1/p')
  for name in $names; do
    "$kiln" emit "$spec" --kernel "$name" --arch sm_90a > "$out/$name.cu"
  done
done
rm -rf "$out/.cache"
echo "emit_all: $(ls "$out" | wc -l) kernels in $out"

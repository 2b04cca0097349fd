#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# No C function of kiln's own (generated code aside) runs past 150 lines.
# kiln's style puts a function's opening and closing braces in column 0,
# which is what this counts between.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-150}
files=$(git ls-files '*.c' 2>/dev/null || find . -name '*.c' -not -path './build*')
awk -v limit="$limit" '
  FNR == 1 { start = 0 }
  /^\{/ { start = FNR; name = prev }
  /^\}/ && start {
    n = FNR - start + 1
    if (n > limit) { printf "%s:%d: %s: %d lines (limit %d)\n", FILENAME, start, name, n, limit; bad = 1 }
    start = 0
  }
  { if ($0 !~ /^[[:space:]]*$/) prev = $0 }
  END { exit bad }
' $files && echo "function length: every C function is at most $limit lines"

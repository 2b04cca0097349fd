#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The folder graph has no cycles: each layer includes headers only from the
# layers below it.  Headers are included by bare name ("cache.h"), so each
# name is first mapped to the folder that holds it.
set -euo pipefail
cd "$(dirname "$0")/.."

# layer: the folders it may include from (itself included).
declare -A allowed=(
  [include]="include"
  [common]="include common"
  [kernel]="include common kernel"
  [store]="include common kernel store"
  [compiler]="include common kernel compiler"
  [runtime]="include common kernel store runtime"
  [cli]="include common kernel store compiler runtime cli"
)

declare -A home=()
for dir in "${!allowed[@]}"; do
  for h in "$dir"/*.h; do
    [ -e "$h" ] || continue
    name=$(basename "$h")
    if [ -n "${home[$name]:-}" ]; then
      echo "layers: header $name is in both ${home[$name]}/ and $dir/" >&2; exit 1
    fi
    home[$name]=$dir
  done
done

bad=0
for dir in "${!allowed[@]}"; do
  for f in "$dir"/*.c "$dir"/*.h; do
    [ -e "$f" ] || continue
    while IFS= read -r line; do
      lineno=${line%%:*}
      name=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")
      name=$(basename "$name")
      from=${home[$name]:-}
      [ -n "$from" ] || continue   # a header of no layer (toolkit, generated)
      case " ${allowed[$dir]} " in
        *" $from "*) ;;
        *) echo "$f:$lineno: includes $name from $from/, above $dir/" >&2; bad=1 ;;
      esac
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
  done
done
[ $bad = 0 ] && echo "layers: ok (${#home[@]} headers in ${#allowed[@]} folders)"
exit $bad

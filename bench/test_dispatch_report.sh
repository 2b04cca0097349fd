#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kiln_bench --dispatch-report end to end on the CPU: the fake timer tunes
# the two plain sm90 fprop defaults and the fp8 row-wise one on two shapes
# of distinct classes, and the report, given that table, must price
# dispatch's choice at the best for each kind of call (each class's winner
# is its one shape's best) and name both cases.
#   test_dispatch_report.sh KILN KILN_BENCH
set -eu
kiln=$1 bench=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'big\t8\t2048\t4096\t14336\tuniform\ndecode\t64\t8\t4096\t2048\tuniform\n' > "$dir/shapes.tsv"
KILN_CACHE_DIR=$dir/cache "$kiln" tune specs/default/sm90_fprop_bf16_128x128.yaml \
  specs/default/sm90_fprop_bf16_64x256.yaml specs/default/sm90_fprop_e4m3_row_64x256.yaml \
  --shapes "$dir/shapes.tsv" --timer fake \
  -o "$dir/t.tuning" --csv > "$dir/t.csv"
"$bench" --dispatch-report "$dir/t.csv" --cases "$dir/shapes.tsv" --table "$dir/t.tuning" \
  > "$dir/report.txt"
cat "$dir/report.txt"
grep -q '^big  *fprop .* 1\.000 .* exact' "$dir/report.txt"
grep -q '^decode  *fprop .* 1\.000 .* exact' "$dir/report.txt"
grep -q '^dispatch (tables) *geomean 1\.000, worst 1\.000, 4 of 4 within 3%' "$dir/report.txt"
# Each kind of call is priced on its own cells: bf16 and fp8 row-wise.
grep -q '^# fprop bf16 bf16 bf16 plain$' "$dir/report.txt"
grep -q '^# fprop e4m3 e4m3 bf16 fp8_recipe=row$' "$dir/report.txt"
grep -q '^dispatch (tables) *fprop e4m3 e4m3 bf16 fp8_recipe=row geomean 1\.000, worst 1\.000, 2 of 2' \
  "$dir/report.txt"
grep -q '^model alone (defaults)' "$dir/report.txt"
# A file that is not kiln tune's CSV is refused with exit 2.
echo "not,a,csv" > "$dir/bad.csv"
rc=0; "$bench" --dispatch-report "$dir/bad.csv" --cases "$dir/shapes.tsv" 2> "$dir/err" || rc=$?
[ $rc = 2 ] && grep -q 'not kiln tune --csv output' "$dir/err"

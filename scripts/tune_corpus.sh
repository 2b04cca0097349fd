#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tune_corpus.sh — tunes fprop and dgrad (or $KILN_TUNE_OPS; bf16, plain) over the MoE corpus
# (bench/corpus.tsv) and the benchmark cases (bench/cases.tsv) with
# `kiln tune`, writes the shipped table (specs/tuning/sm_90a.tuning) and the
# measurements the dispatch report reads (docs/dispatch.md).
#
#   scripts/tune_corpus.sh [BUILD_DIR] [--fake] [--compile-only] [--no-write]
#                          [--only REGEX] [--cases-only] [--shapes FILE]
#
# The candidates are the catalog's kind of kernel, not a sweep: per op the
# plain sm90 points of specs/sweeps/{fprop,dgrad}_sm90_plain.yaml with
# 128x128 tiles at 6 stages and 64x256, 128x256, 256x128, 128x192, 64x192
# at 4, each pingpong and cooperative where they fit, rasters group and m
# (BN = 192 divides 2880 and 5760, GPT-OSS's widths; the same kernel names and
# descriptions as those sweeps, so the catalog build finds every winner
# there), plus the plain sm90 defaults of specs/default, timed so that the
# report can price whatever the dispatcher picks.
#
# Outputs in $OUT (default BUILD_DIR/tune_corpus): corpus.tuning (the new
# fprop/dgrad entries), corpus.csv (every variant on every shape),
# corpus.tuning.journal (resume: run the script again after a kill, it
# re-times nothing), sweeps/ (the reduced sweeps).  Unless --no-write or
# --fake, specs/tuning/sm_90a.tuning becomes the new entries plus every
# entry of the old table whose key the run did not produce (wgrad, other
# epilogues, fp16; the merge is scripts/table_from_csv.py --entries), and
# then: rebuild (the catalog embeds the table), and
#   BUILD_DIR/bench/kiln_bench --dispatch-report OUT/corpus.csv \
#       --cases OUT/shapes.tsv
# prints, per case and op, the dispatched kernel's time and the model
# alone's against the best measured (CPU only).
#
# Cost: ~2500 (variant, shape) cells (17 candidates per op over 73 shapes),
# a few minutes of GPU time at these
# settings, but `kiln tune` fills every shape's inputs on the host (~180 G
# bf16 values for fprop and dgrad over the corpus, several minutes on one
# core).  A run killed at a time limit resumes from the journal: run the
# script again.  --only REGEX tunes the shapes whose names match (grep -E),
# e.g. a first pass without the largest weights.
#
# KILN_TUNE_OPS (default "fprop dgrad") picks the ops; "wgrad" tunes plain
# dense wgrad with the points of specs/sweeps/wgrad_sm90_{plain,pair,raster}.yaml,
# "wgrad_single" the same without the pairs and with fewer plain points, for
# groups longer than decode-sized (below),
# "wgrad_acc" dense wgrad accumulating into fp32
# (specs/sweeps/wgrad_sm90_acc{,_rows,_raster}.yaml); "wgrad_dbias" and
# "wgrad_acc_dbias" the same with the fused bias gradient
# (specs/sweeps/wgrad_sm90_{dbias,pair_dbias,acc_dbias,acc_dbias_rows}.yaml,
# timed computing db), "wgrad_dbias_single" the dbias sweep and its raster
# twin (wgrad_sm90_dbias{,_raster}.yaml) without pairs;
# "wgrad_discrete" and "wgrad_discrete_acc" dW in a buffer per expert,
# overwritten (bf16) or accumulated into (fp32)
# (specs/sweeps/wgrad_sm90_discrete{,_acc}.yaml; overwritten, also
# wgrad_sm90_discrete_raster.yaml).
# fp8 (e4m3, no epilogue terms): "fprop_e4m3_row", "dgrad_e4m3_row",
# "fprop_e4m3_block", "dgrad_e4m3_block" tune the shipped sweeps
# specs/sweeps/{fprop,dgrad}_sm90_e4m3_{row,block}.yaml as they are (20
# and 16 kernels each) and the shipped defaults of that recipe; "fp8" is
# all four.  Each kernel is checked first against a host reference from the
# dequantized inputs (docs/tuning.md).  --cases-only times bench/cases.tsv
# alone (13 shapes): the fp8 ops over it are 1014 cells (78 kernels), a few minutes of
# GPU; the corpus would add 85 shapes.  --shapes FILE times the shapes of FILE
# instead of the corpus and the cases (e.g. bench/holdout.tsv, shapes no
# table entry was tuned on, with --no-write: what the report's columns say
# of dispatch on them).  The dispatch report prices every kind
# of call a default serves, fp8 recipes included (bench/dispatch_report.c).
#
# --fake: the fake timer (no GPU; CI and dry runs).  --compile-only: only
# compile the candidates into the cache ($KILN_CACHE_DIR), e.g. on a CPU
# machine with the same NVRTC before a GPU run.  Timing settings (each
# overridable): KILN_TUNE_RUNS=10, KILN_TUNE_WARMUP=3,
# KILN_TUNE_BUDGET_MS=300.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=build fake=0 compile_only=0 write=1 only=. cases_only=0 shapes=
while [ $# -gt 0 ]; do
  a=$1; shift
  case $a in
    --only) only=${1:?--only needs a REGEX}; shift ;;
    --fake) fake=1; write=0 ;;
    --compile-only) compile_only=1 ;;
    --no-write) write=0 ;;
    --cases-only) cases_only=1 ;;
    --shapes) shapes=${1:?--shapes needs a FILE}; shift ;;
    -*) echo "tune_corpus.sh: unknown option $a" >&2; exit 2 ;;
    *) build=$a ;;
  esac
done
case $build in /*) ;; *) build=$here/$build ;; esac
kiln=$build/kiln
[ -x "$kiln" ] || { echo "tune_corpus.sh: no $kiln (build first)" >&2; exit 2; }
out=${OUT:-$build/tune_corpus}
ops=${KILN_TUNE_OPS:-fprop dgrad}
ops=${ops//fp8/fprop_e4m3_row dgrad_e4m3_row fprop_e4m3_block dgrad_e4m3_block}
mkdir -p "$out/sweeps"
cd "$here"

# The reduced sweeps: the shipped sweep's base (everything before its
# sweep: block, so names and descriptions stay the sweep's own) and a
# smaller grid from standard input.  Expressions cannot name the schedule
# or raster, so those axes keep both values.
reduced() {
  sed '/^sweep:/,$d' "specs/sweeps/$1.yaml" > "$out/sweeps/$1.yaml"
  cat >> "$out/sweeps/$1.yaml"
}
for op in fprop dgrad; do
  reduced ${op}_sm90_plain <<'EOF'
sweep:
  tile:
    - {m: 128, n: 128, k: 64}
    - {m: 128, n: 256, k: 64}
    - {m: 64, n: 256, k: 64}
    - {m: 256, n: 128, k: 64}
    - {m: 128, n: 192, k: 64}
    - {m: 64, n: 192, k: 64}
  schedule: [pingpong, cooperative]
  stages: [4, 6]
  raster: [group, m]
constraints:
  require:
    - "(tile.m == 128 && tile.n == 128) == (stages == 6)"
EOF
done
# wgrad over groups longer than decode-sized: the plain sweep's single-CTA
# points that came within 10% of the best on some such shape in the
# fourteenth session's run (docs/results/session14-corpus-tune-wgrad-*.csv;
# no pair came within 5% there, none is timed), beside the raster sweep.
reduced wgrad_sm90_plain <<'EOF'
sweep:
  tile: [{m: 128, n: 128, k: 64}, {m: 128, n: 256, k: 64}, {m: 64, n: 256, k: 64},
         {m: 256, n: 128, k: 64}, {m: 128, n: 192, k: 64}]
  schedule: [pingpong, cooperative]
  stages: [3, 4, 6]
constraints:
  require:
    - "stages != 3 || !(tile.m == 128 && tile.n == 128)"
    - "stages != 6 || (tile.m == 128 && tile.n == 128)"
    - "tile.m != 64 || stages == 4"
EOF
# The plain dense wgrad default (and its dbias twin) and the former
# 4-stage default that the table still names: every wgrad run times both.
wgrad_defaults=(specs/default/sm90_wgrad_bf16_bf16_dense_s3.yaml
                specs/sweeps/sm90_wgrad_bf16_bf16_dense.yaml)
wgrad_dbias_defaults=(specs/default/sm90_wgrad_bf16_bf16_dense_s3_dbias.yaml
                      specs/sweeps/sm90_wgrad_bf16_bf16_dense_dbias.yaml)
specs=()
for op in $ops; do
  case $op in
    fprop|dgrad) specs+=("$out/sweeps/${op}_sm90_plain.yaml" specs/default/sm90_${op}_bf16_128x128.yaml
                         specs/default/sm90_${op}_bf16_64x256.yaml specs/default/sm90_${op}_bf16_64x128.yaml
                         specs/default/sm90_${op}_bf16_128x256.yaml) ;;
    # wgrad: the shipped sweeps as they are (their points that fit: single
    # CTAs and pairs), and the default
    wgrad) specs+=(specs/sweeps/wgrad_sm90_plain.yaml specs/sweeps/wgrad_sm90_pair.yaml
                   specs/sweeps/wgrad_sm90_raster.yaml "${wgrad_defaults[@]}") ;;
    # the same for groups longer than decode-sized, in fewer cells (above)
    wgrad_single) specs+=("$out/sweeps/wgrad_sm90_plain.yaml" specs/sweeps/wgrad_sm90_raster.yaml
                          "${wgrad_defaults[@]}") ;;
    # wgrad accumulating into fp32 (dense): its sweeps (adding boxes, and
    # rows) and its defaults
    wgrad_acc) specs+=(specs/sweeps/wgrad_sm90_acc.yaml specs/sweeps/wgrad_sm90_acc_rows.yaml
                       specs/sweeps/wgrad_sm90_acc_raster.yaml
                       specs/default/sm90_wgrad_bf16_f32_dense_acc.yaml
                       specs/default/sm90_wgrad_bf16_f32_dense_acc_rows.yaml) ;;
    # the same two with the fused bias gradient: timed computing db, their
    # keys carry the dbias term
    wgrad_dbias) specs+=(specs/sweeps/wgrad_sm90_dbias.yaml specs/sweeps/wgrad_sm90_pair_dbias.yaml
                         "${wgrad_dbias_defaults[@]}") ;;
    # the same for groups longer than decode-sized: no pairs, and the
    # raster twin
    wgrad_dbias_single) specs+=(specs/sweeps/wgrad_sm90_dbias.yaml specs/sweeps/wgrad_sm90_dbias_raster.yaml
                                "${wgrad_dbias_defaults[@]}") ;;
    wgrad_acc_dbias) specs+=(specs/sweeps/wgrad_sm90_acc_dbias.yaml
                             specs/sweeps/wgrad_sm90_acc_dbias_rows.yaml
                             specs/default/sm90_wgrad_bf16_f32_dense_acc_dbias.yaml
                             specs/default/sm90_wgrad_bf16_f32_dense_acc_rows_dbias.yaml) ;;
    # discrete dW (a buffer per expert): their sweeps and defaults
    wgrad_discrete) specs+=(specs/sweeps/wgrad_sm90_discrete.yaml
                            specs/sweeps/wgrad_sm90_discrete_raster.yaml
                            specs/default/sm90_wgrad_bf16_bf16_discrete.yaml) ;;
    wgrad_discrete_acc) specs+=(specs/sweeps/wgrad_sm90_discrete_acc.yaml
                                specs/default/sm90_wgrad_bf16_f32_discrete_acc.yaml
                                specs/default/sm90_wgrad_bf16_f32_discrete_acc_128x128.yaml) ;;
    # fp8: the shipped sweep as it is, and the defaults of the recipe (fast
    # accumulation for row: the promoted default has keys of its own)
    fprop_e4m3_row|dgrad_e4m3_row)
      specs+=(specs/sweeps/${op%_e4m3_row}_sm90_e4m3_row.yaml
              specs/default/sm90_${op%_e4m3_row}_e4m3_row_64x256.yaml
              specs/default/sm90_${op%_e4m3_row}_e4m3_row_64x128.yaml) ;;
    fprop_e4m3_block|dgrad_e4m3_block)
      specs+=(specs/sweeps/${op%_e4m3_block}_sm90_e4m3_block.yaml
              specs/default/sm90_${op%_e4m3_block}_e4m3_block_128x256.yaml
              specs/default/sm90_${op%_e4m3_block}_e4m3_block_64x128.yaml) ;;
    *) echo "tune_corpus.sh: unknown op '$op' in KILN_TUNE_OPS" >&2; exit 2 ;;
  esac
done

if [ $compile_only = 1 ]; then
  exec "$kiln" compile "${specs[@]}"
fi

# One shapes file: the corpus and the benchmark cases (their classes keep
# entries too).  Names are unique across the two.
corpus=bench/corpus.tsv cases=bench/cases.tsv
[ $cases_only = 1 ] && corpus=/dev/null
[ -n "$shapes" ] && corpus=$shapes cases=/dev/null
cat $corpus $cases | grep -v '^#' | grep -E "^[^[:space:]]*($only)" \
  > "$out/shapes.tsv" || { echo "tune_corpus.sh: no shape matches --only $only" >&2; exit 2; }

export KILN_TUNE_RUNS=${KILN_TUNE_RUNS:-10} KILN_TUNE_WARMUP=${KILN_TUNE_WARMUP:-3}
export KILN_TUNE_BUDGET_MS=${KILN_TUNE_BUDGET_MS:-300}
timer=gpu; [ $fake = 1 ] && timer=fake
start=$(date +%s)
rc=0
"$kiln" tune "${specs[@]}" --shapes "$out/shapes.tsv" --timer $timer \
  -o "$out/corpus.tuning" --csv > "$out/corpus.csv" || rc=$?
echo "kiln tune: exit $rc after $(( $(date +%s) - start )) s; $(grep -c ',timed,' "$out/corpus.csv" || true) timed cells in $out/corpus.csv"
[ $rc = 0 ] || exit $rc

if [ $write = 1 ]; then
  # The one merge (scripts/table_from_csv.py): the run's entries replace
  # the old table's of the same keys, the others stay, the integrity line is
  # recomputed.  The entries are the shipped table's rule, from the CSV: a
  # class with a shape no variant passed the check on is chosen from its
  # other shapes, and of the variants within ROBUST of kiln tune's winner
  # on every shape of a class the one of least risk wins (docs/dispatch.md;
  # tests/table_from_csv_test.py checks the shipped table was built so).
  # kiln tune's table gives the winners' ids and the timer.
  timer_id=$(sed -n 's/^# written by kiln tune .*; timer //p' "$out/corpus.tuning" | head -n 1)
  python3 scripts/table_from_csv.py --table specs/tuning/sm_90a.tuning --timer "$timer_id" \
    --skip-untimed-shapes --robust "${KILN_TABLE_ROBUST:-0.02}" --descs "$out/corpus.tuning" \
    "$out/corpus.csv"
  echo "next: rebuild ($build), then"
fi
echo "  $build/bench/kiln_bench --dispatch-report $out/corpus.csv --cases $out/shapes.tsv"

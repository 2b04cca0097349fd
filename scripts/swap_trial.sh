#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# swap_trial.sh — the swap_ab kernels (docs/sm90_kernel.md, "Swapped
# operands") against the shipped table's kernels, before any table names
# them.  Two halves:
#
#   scripts/swap_trial.sh prep DIR    (here: no GPU)
#     builds a trial table: the shipped one with one class per swap kernel
#     re-pointed to it (kiln tune --timer fake gives each entry's ids), so
#     that the trial build's catalog carries every swap kernel as a tuned
#     one; builds that tree (tests on, no bundle) and this one's staged
#     copy, packs both (DIR/cur.txz, DIR/tri.txz) and precompiles the
#     tune's kernels into DIR/tc.
#   scripts/swap_trial.sh run DIR [SHAPES]    (on the GPU machine, DIR
#     carried)
#     1. the trial build's test_gpu_gemm test_fprop_dgrad_tuned: every
#        tuned kernel (the swap ones among them) forced over the four
#        group mixes, every element and the poisoned padding checked;
#     2. kiln tune --hold 0.2 of the swap kernels beside the kernels the
#        shipped table names for the mid-sized classes, on SHAPES
#        (default bench/swap_shapes.tsv);
#     3. python/bench/context_ab.py: the trial build (as is) against this
#        build (#cur) and torch._grouped_mm, graphs of 4, one process.
#     Logs and CSVs under $OUT; python/bench/swap_summary.py prints the
#     table last.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: scripts/swap_trial.sh prep|run DIR [SHAPES]}
dir=${2:?usage: scripts/swap_trial.sh prep|run DIR [SHAPES]}
shapes=${3:-bench/swap_shapes.tsv}
# one class of the trial table per swap kernel: kernel suffix, groups,
# tokens, K, N of a shape in that class (t256: 65-256 tokens a group)
classes="m160_n128_k64_s6 160 154 5120 3072
m224_n128_k64_s4 8 200 2048 7168
m128_n256_k64_s4 128 128 2880 2880
m96_n256_k64_s4 512 80 2048 1024
m64_n256_k64_s4 20 77 5120 3072
m64_n256_k64_s5 10 204 1536 5120
m160_n128_k64_s4 10 102 6144 5120
m160_n128_k64_s5 8 200 4096 4096
m192_n128_k64_s4 8 200 8192 4096
m192_n128_k64_s5 32 200 4096 4096"
# the tune's kernels: swap candidates, then what the table names nearby
tune_kernels() { # op
  local op=$1 ks="" s
  for s in m64_n256_k64_s4 m96_n256_k64_s4 m128_n256_k64_s4 m160_n128_k64_s6 m192_n128_k64_s5 m224_n128_k64_s4; do
    ks="$ks,${op}_sm90_bf16_swap__$s"
  done
  echo "${ks#,},sm90_${op}_bf16_64x256,sm90_${op}_bf16_128x256,sm90_${op}_bf16_128x128,${op}_sm90_bf16_plain__m64_n256_k64_s4_rm_pingpong,${op}_sm90_bf16_plain__m128_n192_k64_s4_rgroup_pingpong"
}
tune_specs() { # op
  echo "specs/sweeps/$1_sm90_swap.yaml specs/sweeps/$1_sm90_plain.yaml specs/default/sm90_$1_bf16_64x256.yaml specs/default/sm90_$1_bf16_128x256.yaml specs/default/sm90_$1_bf16_128x128.yaml"
}

if [ "$mode" = prep ]; then
  # build/ is staged as this tree (#cur) and its kiln compiles the tune's
  # kernels: its templates are baked in at build time, so bring it up to
  # date first (session 105 timed a stale one's kernels)
  ninja -C build > /dev/null || { echo "swap_trial: ninja -C build failed" >&2; exit 1; }
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  work=$(mktemp -d /tmp/kiln-swap.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  cp specs/tuning/sm_90a.tuning "$work/trial.tuning"
  i=0
  while read -r suf g t k n; do
    for op in fprop dgrad; do
      i=$((i + 1))
      printf '# name\tgroups\ttokens_per_group\tK\tN\tsizes\ns%d\t%s\t%s\t%s\t%s\tuniform\n' \
        "$i" "$g" "$t" "$k" "$n" > "$work/s$i.tsv"
      build/kiln tune "specs/sweeps/${op}_sm90_swap.yaml" --kernel "${op}_sm90_bf16_swap__$suf" \
        --shapes "$work/s$i.tsv" --timer fake --cache-dir "$work/cache" -o "$work/e$i.tuning" > /dev/null
      python3 scripts/table_from_csv.py --table "$work/trial.tuning" --entries "$work/e$i.tuning" \
        -o "$work/next.tuning" > /dev/null
      mv "$work/next.tuning" "$work/trial.tuning"
    done
  done <<< "$classes"
  git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar xf - -C "$work" --one-top-level=tree
  cp "$work/trial.tuning" "$work/tree/specs/tuning/sm_90a.tuning"
  cmake -S "$work/tree" -B "$work/tree/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKILN_BUILD_BUNDLE=OFF -DCUDAToolkit_ROOT=/usr/local/cuda > /dev/null
  ninja -C "$work/tree/build" > /dev/null
  scripts/gpu_stage.sh build "$work/stage/cur" "$dir/cur.txz"
  scripts/gpu_stage.sh "$work/tree/build" "$work/stage/tri" "$dir/tri.txz"
  for op in fprop dgrad; do
    # shellcheck disable=SC2046
    build/kiln tune $(tune_specs $op) --kernel "$(tune_kernels $op)" --shapes "$shapes" --timer fake \
      --cache-dir "$dir/tc" -o "$work/fake_$op.tuning" > /dev/null
  done
  echo "swap_trial: $dir ready (cur.txz, tri.txz, tc); run: scripts/swap_trial.sh run $dir"
  exit 0
fi

[ "$mode" = run ] || { echo "swap_trial: mode prep or run, not $mode" >&2; exit 2; }
set +e
out=${OUT:-/tmp/kiln-swap}; mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tar xJf "$dir/cur.txz" -C /tmp && tar xJf "$dir/tri.txz" -C /tmp || { echo "swap_trial: unpack failed"; exit 1; }
export KILN_BUNDLE_PATH=/tmp/cur/kiln-sm_90a.kbundle KILN_CACHE_DIR=/tmp/kiln-swap-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee "$out/gpu.txt"
t0=$(date +%s)
pack() { tar czf "$out/swap_trial.tgz" -C "$out" $(cd "$out" && ls | grep -v swap_trial.tgz) 2>/dev/null; }
echo "== 1. the trial build's tuned kernels, forced and checked"
KILN_TEST_FILTER=test_fprop_dgrad_tuned timeout 150 /tmp/tri/tests/gpu/test_gpu_gemm > "$out/tuned_test.log" 2>&1
echo "rc=$? $(grep -E 'PASSED|FAILED' "$out/tuned_test.log" | tail -1) [$(( $(date +%s) - t0 )) s]"
grep -i "fail\|wrong" "$out/tuned_test.log" | head -20
pack
echo "== 2. kiln tune --hold 0.2: swap against the table's kernels"
for op in fprop dgrad; do
  # shellcheck disable=SC2046
  timeout 170 /tmp/cur/kiln tune $(tune_specs $op) --kernel "$(tune_kernels $op)" --shapes "$shapes" \
    --hold 0.2 --cache-dir "$dir/tc" --csv -o "$out/tune_$op.tuning" > "$out/tune_$op.csv" 2> "$out/tune_$op.err"
  echo "$op: rc=$? $(wc -l < "$out/tune_$op.csv") rows [$(( $(date +%s) - t0 )) s]"
done
pack
echo "== 3. trial (as is) against this build (#cur) and torch, graphs of 4"
KILN_LIBRARY=/tmp/tri/runtime/libkiln.so timeout 240 python3 python/bench/context_ab.py \
  --bench /tmp/tri/bench/kiln_bench --cases "$shapes" --ops fprop,dgrad --graph 4 --reps 5 --rounds 2 \
  --libs cur=/tmp/cur/runtime/libkiln.so --against "#cur" > "$out/ab.log" 2>&1
echo "rc=$? [$(( $(date +%s) - t0 )) s]"
pack
python3 python/bench/swap_summary.py "$out"

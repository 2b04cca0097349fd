#!/bin/bash
# One device call: build the harness, check each variant in its own process
# (a hang or a trap stays in that process), time the BENCH shapes on the
# variants that passed, dump SASS evidence.
# usage: run_gpu.sh "CHECK_VARIANTS" "BENCH_VARIANTS"
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1 | tee $OUT/gpu.txt
nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a harness.cu -o /tmp/wg_harness -lcuda -lnvrtc -lcublas \
  2>&1 | grep -v -i deprecat | tee $OUT/build.txt
[ -x /tmp/wg_harness ] || exit 1
PASSED=""
for v in $1; do
  timeout ${CHECK_TIMEOUT:-60} /tmp/wg_harness gen check $v > /tmp/check_$v.txt 2>&1; rc=$?
  cat /tmp/check_$v.txt >> $OUT/check.txt
  grep -E "FAIL|rror|\[" /tmp/check_$v.txt | head -6
  echo "CHECK $v rc=$rc $(grep -c PASS /tmp/check_$v.txt) pass $(grep -c FAIL /tmp/check_$v.txt) fail" | tee -a $OUT/check.txt
  [ $rc = 0 ] && PASSED="$PASSED $v"
done
for v in c256 p128; do
  [ -f gen/$v.cubin ] && cuobjdump -sass gen/$v.cubin > /tmp/$v.sass && \
    echo "$v: HGMMA=$(grep -c HGMMA /tmp/$v.sass) LDL/STL=$(grep -cE 'LDL|STL' /tmp/$v.sass) $(grep -m1 -o 'HGMMA[^;]*' /tmp/$v.sass)" | tee -a $OUT/sass.txt
done
B=""; for v in $2; do case " $PASSED " in *" $v "*) B="$B $v";; esac; done
echo "bench variants:$B"
[ -n "$B" ] && timeout ${BENCH_TIMEOUT:-200} /tmp/wg_harness gen bench $B > $OUT/bench.txt 2>&1
echo "bench rc=$?"
grep -E "FAIL|rror" $OUT/bench.txt | head
sed -n '/===== summary/,$p' $OUT/bench.txt
true

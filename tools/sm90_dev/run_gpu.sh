#!/bin/bash
# One device call: build the harness, check each variant in its own process,
# time the BENCH shapes on those that passed, dump SASS evidence.
# usage: run_gpu.sh "CHECK_VARIANTS" "BENCH_VARIANTS"
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1 | tee $OUT/gpu.txt
nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a harness.cu -o /tmp/harness -lcuda -lnvrtc -lcublas \
  2>&1 | grep -v -i deprecat | tee $OUT/build.txt
[ -x /tmp/harness ] || exit 1
PASSED=""
for v in $1; do
  timeout 90 /tmp/harness gen check $v > /tmp/check_$v.txt 2>&1; rc=$?
  cat /tmp/check_$v.txt >> $OUT/check.txt
  grep -E "FAIL|error|rror" /tmp/check_$v.txt | head -8
  echo "CHECK $v rc=$rc" | tee -a $OUT/check.txt
  [ $rc = 0 ] && PASSED="$PASSED $v"
done
for v in f_128x256 d_128x256 cp_128x128m2 pd_64x256; do
  [ -f gen/$v.cubin ] && cuobjdump -sass gen/$v.cubin > /tmp/$v.sass && \
    echo "$v: HGMMA=$(grep -c HGMMA /tmp/$v.sass) LDL/STL=$(grep -cE 'LDL|STL' /tmp/$v.sass) UTMALDG=$(grep -c UTMALDG /tmp/$v.sass) $(grep -m1 -o 'HGMMA[^;]*' /tmp/$v.sass)" | tee -a $OUT/sass.txt
done
B=""; for v in $2; do case " $PASSED " in *" $v "*) B="$B $v";; esac; done
echo "bench variants:$B"
[ -n "$B" ] && timeout ${BENCH_TIMEOUT:-300} /tmp/harness gen bench $B > $OUT/bench.txt 2>&1
grep -E "FAIL|rror" $OUT/bench.txt | head
sed -n '/===== summary/,$p' $OUT/bench.txt
true

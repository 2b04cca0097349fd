#!/bin/sh
# Generates the dev variants into tools/sm90_wgrad_dev/gen (run here, where lua is).
set -e
cd "$(dirname "$0")/../.."
G=tools/sm90_wgrad_dev/gen
rm -rf $G; mkdir -p $G
L="lua5.4 tools/sm90_wgrad_dev/gen.lua . $G"
#  name            out  bm  bn st wg output   acc split schedule raster
$L c256            bf16 128 256 4 2 dense    0   1   cooperative
$L p128            bf16 128 128 6 2 dense    0   1   pingpong
$L p64x256         bf16 64  256 4 2 dense    0   1   pingpong
$L p64x256n        bf16 64  256 4 2 dense    0   1   pingpong    n
$L p64x256m        bf16 64  256 4 2 dense    0   1   pingpong    m
$L c256x128        bf16 256 128 4 2 dense    0   1   cooperative
$L c256_f16d       fp16 128 256 4 2 discrete 0   1   cooperative - fp16
$L c256_f32        f32  128 256 4 2 dense    0   1   cooperative
$L c256_acc        f32  128 256 4 2 dense    1   1   cooperative
$L c256_acc_d      f32  128 256 4 2 discrete 1   1   cooperative
$L p64x256_acc     f32  64  256 4 2 dense    1   1   pingpong
$L p64x256_acc_d   f32  64  256 4 2 discrete 1   1   pingpong
$L p128_acc_s4     f32  128 128 6 2 dense    1   4   pingpong
$L p64x256_acc_ds3 f32  64  256 4 2 discrete 1   3   pingpong
$L c128w1          bf16 128 128 6 1 discrete 0   1   cooperative m
# dev switches: plain read-modify-write accumulate (discrete), and the
# MN-major descriptor with LBO/SBO swapped (must fail: proves the test bites)
{ echo "#define KILN_DEV_ACC_RMW 1"; cat $G/p64x256_acc_d.cu; } > $G/p64x256_acc_drmw.cu
cp $G/p64x256_acc_d.launch $G/p64x256_acc_drmw.launch
{ echo "#define KILN_DEV_SWAP_MN 1"; cat $G/c256.cu; } > $G/c256swap.cu
cp $G/c256.launch $G/c256swap.launch

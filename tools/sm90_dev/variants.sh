#!/bin/sh
# Generates the dev variants into tools/sm90_dev/gen (run here, where lua is).
set -e
cd "$(dirname "$0")/../.."
G=tools/sm90_dev/gen
rm -rf $G; mkdir -p $G
L="lua5.4 tools/sm90_dev/gen.lua . $G"
#  name          op    out  bm  bn st wg epi raster schedule cluster intype
$L f_128x256     fprop bf16 128 256 4 2
$L p_128x128     fprop bf16 128 128 6 2 - - pingpong
$L p_64x256      fprop bf16 64  256 4 2 - - pingpong
$L c_128x256m2   fprop bf16 128 256 4 2 - - - 2x1
$L cp_128x128m2  fprop bf16 128 128 6 2 - - pingpong 2x1
$L cp_128x128n2  fprop bf16 128 128 6 2 - - pingpong 1x2
$L cp_64x256n2   fprop bf16 64  256 4 2 - - pingpong 1x2
$L d_128x256     dgrad bf16 128 256 4 2
$L pd_128x128    dgrad bf16 128 128 6 2 - - pingpong
$L pd_64x256     dgrad bf16 64  256 4 2 - - pingpong
$L cd_128x256m2  dgrad bf16 128 256 4 2 - - - 2x1
$L cpd_128x128m2 dgrad bf16 128 128 6 2 - - pingpong 2x1
$L cpd_64x256n2  dgrad bf16 64  256 4 2 - - pingpong 1x2
# single consumer warpgroup
$L f_128x128w1   fprop bf16 128 128 6 1
$L f_64x256w1    fprop bf16 64  256 5 1
# fp16 inputs, epilogues, clusters with epilogues
$L h_p128        fprop fp16 128 128 6 2 - - pingpong - fp16
$L hd_128x256    dgrad f32  128 256 4 2 bias,row_scale - - - fp16
$L pe_f32        fprop f32  128 128 5 2 bias,row_scale,scale_bias,alpha_pg,beta - pingpong
$L pe_f16        fprop fp16 64  256 4 2 bias,row_scale,beta - pingpong
$L de_bf16       dgrad bf16 128 256 4 2 bias,alpha_pg,beta
$L cpe_f32       fprop f32  128 128 5 2 bias,row_scale,scale_bias,alpha_pg,beta - pingpong 2x1
$L cpde_d32      dgrad f32  128 128 5 2 bias,row_scale,alpha_pg - pingpong 1x2
$L ce_m          fprop bf16 128 256 4 2 bias,beta m - 1x2
$L ce_n          dgrad fp16 128 256 4 2 row_scale n - 2x1

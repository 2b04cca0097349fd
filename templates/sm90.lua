-- SPDX-License-Identifier: Apache-2.0
-- templates/sm90.lua — persistent warp-specialised grouped GEMM for sm_90a
-- (fprop, dgrad).  Called as chunk(spec, arch, mode) (see compiler/expand.h):
-- checks the spec against the family's rules (templates/sm90_common.lua and
-- the fprop/dgrad ones here); to expand, writes the preamble of compile-time
-- constants and the wgmma wrapper for the tile's N and reports how to launch
-- the kernel.  The device code is templates/sm90_gemm.cuh, sm90_gemm_cut.cuh
-- and sm90_gemm_roles.cuh, pasted in that order.

local spec, arch, mode = ...

-- The weight gradient reduces over tokens (both operands MN-major): its own
-- template.
if spec.op == "wgrad" then return include("sm90_wgrad")(spec, arch, mode) end

local common = include("sm90_common")
local fail, b = common.fail, common.b
local op = spec.op
local k = common.check(spec, arch)
local bm, bn, bk, consumers, stages = k.bm, k.bn, k.bk, k.consumers, k.stages
local cm, cn = k.cm, k.cn
-- B is K-major for fprop and for fp8 dgrad (which reads the transposed
-- weights [G,K,N]); MN-major for 16-bit dgrad.
local b_kmajor = op == "fprop" or k.esize == 1
if cm == 2 and not b_kmajor and (bn // 64) % 2 ~= 0 then
  fail("cluster.m", "dgrad with cluster m: 2 needs tile.n 128 or 256 (got %d)", bn)
end
if cn == 2 and (bm // 2) % 8 ~= 0 then
  fail("cluster.n", "cluster n: 2 needs tile.m divisible by 16 (got %d)", bm)
end
-- weights: any also takes the weights as G pointers: the producer points a
-- per-SM copy of B's tensor map at each group's weights (sm90_gemm_roles.cuh).
local wptrs = spec.weights == "any"
if wptrs and k.esize == 1 then
  fail("weights", "fp8 weights are one contiguous tensor (the quantizer writes them so, with " ..
       "their transposed copy): %s with types.a %s needs weights: contiguous", op, spec.types.a)
end
-- A pair's multicast of B through per-CTA map copies has not run on a GPU
-- yet (no shipped kernel has a cluster): not built until it has.
if wptrs and cm * cn > 1 then
  fail("weights", "pointer-array weights are built for cluster 1x1 only (cluster %dx%d): set " ..
       "weights: contiguous", cm, cn)
end

-- The cooperative schedule's epilogue stops both warp groups' tensor work:
-- it stores through TMA (tmap_d over D) from swizzled 2 KiB boxes, as many
-- per warp as fit beside the ring, up to the warp's whole share of a tile
-- (sm90_gemm_roles.cuh, kiln_epilogue_tma).  β·C is read in the staged path.
local epi = spec.epilogue
local out_t = ({bf16 = 0, fp16 = 1, f32 = 2})[spec.types.out]
-- swap_ab stores from the registers (kiln_epilogue_swap): its fragments
-- hold tokens along the columns, which the TMA boxes take along the rows.
local epi_tma = not k.pingpong and not epi.beta and not k.swap
if k.kc > 1 and not epi_tma then
  fail("k_cluster", "k_cluster %d stores through TMA, which reads no C: set epilogue.beta false", k.kc)
end
-- The block recipe's scales come beside the ring: per slot, A's for the
-- tile's rows and B's for its 128-column blocks, in bm + 4 floats
-- (sm90_gemm.cuh, SCALE_BYTES).
local scale_bytes = spec.fp8.recipe == "block" and stages * (bm + 4) * 4 or 0
-- The row recipe's TMA epilogue stages two tiles' column scales
-- (sm90_gemm.cuh, CSC_BYTES).
if spec.fp8.recipe == "row" and epi_tma then scale_bytes = 2 * bn * 4 end
-- (swap_ab stages nothing: kiln_epilogue_swap stores from the registers)
local stg_bufs, smem = 1, common.smem(k, k.swap and 0 or common.staging_warp, 2 * stages, scale_bytes)
if epi_tma then
  stg_bufs, smem = common.store_boxes(k, out_t == 2 and 4 or 2, arch, 2 * stages, scale_bytes)
end
common.check_smem(k, smem, arch)
-- The per-SM map copies need each CTA to have its SM to itself.
if wptrs then smem = common.exclusive_sm(smem, arch) end
if mode == "check" then return {smem = smem} end

local entry = common.entry(spec)

-- wgmma wrapper for m64n<bn>k16 with fp32 accumulators; dgrad reads B
-- MN-major (the weight transposed).  swap_ab: m64n<tile.m>, the weights
-- as A (MN-major for dgrad), the tokens as B (K-major); and
-- kiln_wgmma_sw<W> for the narrower widths W = tile.m - swap_step,
-- tile.m - 2 swap_step, ... (> 0) into the low W / 2 accumulators, so that
-- a tile holding fewer tokens computes only as many as the next width up
-- (sm90_gemm_roles.cuh, kiln_swap_group).  A step of 16 pads a
-- Dirichlet-routed group's last tile by 8 rows on average where a fixed
-- 160-token tile padded it by 80 (DeepSeek-V3 fc1, 256 experts of 128
-- tokens: 1.05x the real rows against 1.74x; 32 gives 1.12x).
local ity = ({bf16 = "bf16", fp16 = "f16", e4m3 = "e4m3", e5m2 = "e5m2"})[spec.types.a]
local ity_b = ({bf16 = "bf16", fp16 = "f16", e4m3 = "e4m3", e5m2 = "e5m2"})[spec.types.b]
local swap_step = 16
local swap_tn = b_kmajor and 0 or 1   -- swap_ab: the weights (A) MN-major for dgrad
local wgmma = k.swap and include("sm90_wgmma")(bm, ity, swap_tn, 0, nil, ity_b)
  or include("sm90_wgmma")(bn, ity, 0, b_kmajor and 0 or 1, nil, ity_b)
-- declared in every kernel: kiln_swap_group names it
wgmma = wgmma .. "\n" .. string.format("template <int W> __device__ void kiln_wgmma_sw(float (&d)[%d], " ..
                                       "unsigned long long da, unsigned long long db, int scale_d);",
                                       (k.swap and bm or bn) // 2)
if k.swap then
  for w = bm - swap_step, 1, -swap_step do
    wgmma = wgmma .. "\ntemplate <>\n" .. include("sm90_wgmma")(w, ity, swap_tn, 0, "kiln_wgmma_sw<" .. w .. ">",
                                                                ity_b, bm // 2)
  end
end
-- promote_split: the k-block's products half a tile wide at a time (an
-- overload of kiln_wgmma on the accumulators' width)
if k.promote_split then
  wgmma = wgmma .. "\n" .. include("sm90_wgmma")(bn // 2, ity, 0, 0, nil, ity_b)
end
-- Half tiles (sm90_gemm.cuh, HALF_TILES): in the cooperative TMA-store
-- 16-bit kernels, the tiles of a group of at most bm / 2 rows are run by
-- both warp groups, each half the columns wide (m64n<bn/2>, into the low
-- half of its accumulators).  Half a tile must be whole 64-column boxes
-- of B (MN-major dgrad's layout).  Not fp8: no table names a kernel it
-- would reach, and it has not run on a GPU there.
local half_tiles = k.esize == 2 and epi_tma and not k.promote and consumers == 2 and (bn // 2) % 64 == 0
if half_tiles then
  wgmma = wgmma .. "\n" .. include("sm90_wgmma")(bn // 2, ity, 0, b_kmajor and 0 or 1,
                                                 "kiln_wgmma_half", ity_b, bn // 2)
end
local recipe = ({none = 0, tensor = 1, row = 2, block = 3})[spec.fp8.recipe]

local pre = common.preamble("sm90", entry, k, {
  string.format("constexpr int OP = %d;  /* 0 fprop, 1 dgrad */", op == "dgrad" and 1 or 0),
  string.format("constexpr int OUT_T = %d;  /* 0 bf16, 1 fp16, 2 f32 */", out_t),
  string.format("constexpr int EPI_BIAS = %d, EPI_ROW_SCALE = %d, EPI_SCALE_BIAS = %d;",
                b(epi.bias == "per_group"), b(epi.scale == "per_row"), b(epi.scale_bias)),
  string.format("constexpr int EPI_ALPHA_PER_GROUP = %d, EPI_BETA = %d;",
                b(epi.alpha == "per_group"), b(epi.beta)),
  string.format("constexpr int RASTER = %d, MAXG = %d, MBAND = 16;", k.raster, common.max_groups),
  string.format("constexpr int PINGPONG = %d;", b(k.pingpong)),
  string.format("constexpr int FP8_RECIPE = %d, FP8_PROMOTE = %d, PROMOTE_SPLIT = %d;",
                recipe, b(k.promote), b(k.promote_split)),
  string.format("constexpr int WPTRS = %d;  /* weights may be G pointers */", b(wptrs)),
  string.format("constexpr int EPI_TMA = %d, STG_BUFS = %d;  /* TMA-store epilogue, boxes per warp */",
                b(epi_tma), stg_bufs),
  string.format("constexpr int HALF_TILES = %d;", b(half_tiles)),
  string.format("constexpr int SWAP_STEP = %d;  /* swap_ab: the tile's token widths' step */", swap_step),
}, smem, wgmma)

local source = pre .. kiln.text("sm90_common.cuh") .. kiln.text("sm90_gemm.cuh")
  .. kiln.text("sm90_gemm_cut.cuh") .. kiln.text("sm90_gemm_roles.cuh")

-- launched as a 1-D cluster of m*n CTAs along x
local launch = common.launch(entry, k, smem, {m = cm, n = cn}, {
  -- A: {inner = K (fprop) or N (dgrad), outer = capacity}; a box row is
  -- one k-block, 128 bytes
  a = {box_inner = bk, box_outer = cn == 2 and bm // 2 or bm, swizzle = 128},
  -- B K-major: W as {inner = K, outer = G*N} (fp8 dgrad: W transposed,
  -- {inner = N, outer = G*K}), {BK, BN} boxes; 16-bit dgrad: BN/64 boxes
  -- of {64 (K, the output dim), BK (N, the reduction)}.  Pointer-array
  -- weights: one group's {inner = K, outer = N}, re-pointed on the device.
  b = {box_inner = bk, box_outer = b_kmajor and (cm == 2 and bn // 2 or bn) or bk, swizzle = 128},
  -- D (EPI_TMA): {inner = n_out, outer = capacity}, row stride ldd, in the
  -- output type, boxes of {128 bytes of columns, 16 rows}
  d = epi_tma and {box_inner = out_t == 2 and 32 or 64, box_outer = 16, swizzle = 128} or nil,
})

return source, launch

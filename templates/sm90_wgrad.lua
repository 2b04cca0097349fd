-- SPDX-License-Identifier: Apache-2.0
-- templates/sm90_wgrad.lua — persistent warp-specialised k-grouped weight
-- gradient for sm_90a: dW_g[N,K] = dY_gᵀ · X_g over each group's tokens.
-- Returns a function(spec, arch, mode) -> source, launch (mode "check":
-- {smem = bytes}); templates/sm90.lua delegates to it for op wgrad.  The
-- device code is templates/sm90_wgrad.cuh; this file checks the spec (with
-- the family's rules of templates/sm90_common.lua), writes the preamble of
-- compile-time constants and the wgmma wrapper (both operands MN-major), and
-- reports how to launch the kernel.
--
-- Spec mapping: tile.m = rows of dW (the weight's N), tile.n = columns of
-- dW (K), tile.k = tokens per k-block (64).  warpgroups = consumer
-- warpgroups.  schedule: "cooperative" (both warpgroups share a tile) or
-- "pingpong" (each warpgroup owns whole tiles; epilogue overlaps the other's
-- main loop); "auto" as in sm90_common.lua.  cluster m: 2 (or n: 2): a pair
-- of CTAs on neighbouring dW tiles shares X's (or dY's) loads by TMA
-- multicast, which halves what the pair reads of that operand from L2.

local common = include("sm90_common")
local fail, b = common.fail, common.b

return function(spec, arch, mode)
  local k = common.check(spec, arch)
  local bm, bn, bk, consumers, stages = k.bm, k.bn, k.bk, k.consumers, k.stages

  local w = spec.wgrad
  local output, accumulate, split = w.output, w.accumulate, w.split
  local out_t = ({bf16 = 0, fp16 = 1, f32 = 2})[spec.types.out]
  if k.kc > 1 then
    fail("k_cluster", "k_cluster is for fprop and dgrad (wgrad's reduction runs over each " ..
         "group's tokens; its cut is wgrad.split): use 1")
  end
  if split > 1 and not accumulate then
    fail("wgrad.split", "wgrad.split > 1 adds partial sums atomically into the output: it " ..
         "needs wgrad.accumulate: true (types.out: f32)")
  end
  -- A pair of CTAs shares one operand's 64-column boxes, each loading every
  -- other one: m: 2 shares X's (tile.n / 64 boxes), n: 2 dY's (tile.m / 64).
  if k.cm == 2 and (bn // 64) % 2 ~= 0 then
    fail("cluster.m", "wgrad with cluster m: 2 shares X's 64-column boxes in halves: tile.n " ..
         "must be 128 or 256 (got %d)", bn)
  end
  if k.cn == 2 and (bm // 64) % 2 ~= 0 then
    fail("cluster.n", "wgrad with cluster n: 2 shares dY's 64-row boxes in halves: tile.m " ..
         "must be 128 or 256 (got %d)", bm)
  end

  -- 192 accumulators a thread (128x192 and 192x128 pingpong) are built
  -- where the epilogue beside them compiles with no spill at 3 and 4
  -- stages (kiln compile, seventy-fourth session): every kernel without
  -- db, and with db dense dW in 128x192 tiles.  With db, 192x128 tiles
  -- spilled 16-128 bytes and discrete dW 68-160; wgrad.rows 144-168.
  -- Their consumers also keep the item walk and the store boxes' state:
  -- at 232 registers they spilled, so they take 240 (sm90_common.lua,
  -- preamble), and the walk keeps no more than it must (kiln_turn and
  -- kiln_dmap in the .cuh: derived, not carried, since the
  -- seventy-fourth session, which let overwriting discrete dW and dense
  -- db fit).
  k.wide_regs = k.regs > 128
  if k.wide_regs and (w.rows or w.dbias and (output ~= "dense" or bm ~= 128)) then
    fail("tile", "wgrad tile %dx%d pingpong holds %d fp32 accumulators a thread: built " ..
         "without dbias, or with dbias for dense dW in 128x192 tiles, never with " ..
         "wgrad.rows (use 128x128 pingpong or a cooperative tile)", bm, bn, k.regs)
  end

  -- dW goes out through TMA from swizzled 2 KiB boxes per consumer warp:
  -- accumulate by TMA reduce-add (1 or 2 boxes, 2 where they fit), overwrite
  -- by TMA stores (as many boxes as fit, up to the warp's whole share of a
  -- tile, so that a box is waited on only when the next tile's epilogue
  -- comes round to it).  Discrete dW the same, through per-group copies of
  -- the map that the device keeps per SM (sm90_wgrad.cuh, kiln_dmap).
  local barriers = 2 * stages + 2
  local limit = common.smem_limit[arch]
  -- wgrad.dbias: a 1 KiB tile of ones in shared memory, the B operand of
  -- the wgmma that sums dY's stage rows into db on the tensor cores
  local ones = w.dbias and 1024 or 0
  local stg_bufs, smem, share
  local d_chunks = 0
  if w.rows then
    -- wgrad.rows: a warp's 16 rows of an m64 sub-tile (tile.n / 32 chunks
    -- of 128 bytes of fp32) staged whole and added in one reduce-add, 10%
    -- more bandwidth than a box per 32 columns (H200,
    -- bench/store_box_probe.cu) but a larger staging, which costs long
    -- reductions 2.5-7% (docs/sm90_wgrad.md, nineteenth session): a choice
    -- the tuner makes per shape class.
    -- (wgrad.accumulate: the language's rule, compiler/spec.c)
    if output ~= "dense" then
      fail("wgrad.rows", "wgrad.rows needs wgrad.output: dense (the rows are added through " ..
           "one map of dW as [G*N, K])")
    end
    if k.cm * k.cn ~= 1 then
      fail("wgrad.rows", "wgrad.rows is not supported in a cluster of %dx%d CTAs (use 1x1)",
           k.cm, k.cn)
    end
    stg_bufs, d_chunks = bn // 32, bn // 32
    smem = common.smem(k, 2048 * stg_bufs, barriers, ones)
    if smem > limit then
      fail("wgrad.rows", "wgrad.rows stages a warp's 16 rows of tile.n = %d fp32 columns " ..
           "(%d bytes a warp); with %d stages of tile %dx%dx%d that is %d bytes of shared " ..
           "memory, %s allows %d", bn, 2048 * stg_bufs, stages, bm, bn, bk, smem, arch, limit)
    end
  elseif accumulate then
    stg_bufs = common.smem(k, 4096, barriers, ones) <= limit and 2 or 1
    smem = common.smem(k, 2048 * stg_bufs, barriers, ones)
  else
    stg_bufs, smem, share = common.store_boxes(k, out_t == 2 and 4 or 2, arch, barriers, ones)
    -- With 192 accumulators a warp's share is not staged whole: it goes
    -- out in batches of what the staging holds, under the other warp
    -- group's main loop.  Whole fits only at 3 stages, where one batch of
    -- 6 boxes timed level with 5 then 1 (and 3 stages 1.05x 4's time;
    -- H100, docs/sm90_wgrad.md, hundred-and-tenth session).
    if k.wide_regs and stg_bufs >= share then
      stg_bufs = share - 1
      smem = common.smem(k, 2048 * stg_bufs, barriers, ones)
    end
  end
  common.check_smem(k, smem, arch)
  -- 16-bit dW whose warp share fits the staging whole: each warp's 16
  -- rows of an m64 sub-tile go out in one store of tile.n / 64 chunks of
  -- 128 bytes (a 3-D map, launch.c), so that each row's bytes are written
  -- together: 3.5% more write bandwidth than a box per 64 columns (H200,
  -- bench/store_box_probe.cu; docs/sm90_wgrad.md, eighteenth session);
  -- discrete dW too since the forty-third session (its 128x192 kernels then
  -- lose on tiles of one k-block as the dense ones do).  Not in pairs of
  -- CTAs: there the second epilogue path spilled (32 bytes at 3 stages).
  if not accumulate and out_t ~= 2 and stg_bufs >= share and k.cm * k.cn == 1 then
    d_chunks = bn // 64
  end
  if output == "discrete" then smem = common.exclusive_sm(smem, arch) end
  if mode == "check" then return {smem = smem} end

  local entry = common.entry(spec)

  -- wgmma m64n<bn>k16, fp32 accumulators, A and B both MN-major.
  local ity = spec.types.a == "bf16" and "bf16" or "f16"
  -- And m64n8k16 of dY's A boxes (MN-major) against the ones tile, for
  -- wgrad.dbias (emitted always: the device code names it in a discarded
  -- `if constexpr` branch).
  local wgmma = include("sm90_wgmma")(bn, ity, 1, 1) .. "\n" ..
                include("sm90_wgmma")(8, ity, 1, 0, "kiln_wgmma_n8")

  local pre = common.preamble("sm90_wgrad", entry, k, {
    string.format("constexpr int PINGPONG = %d;", b(k.pingpong)),
    string.format("constexpr int OUT_T = %d;  /* 0 bf16, 1 fp16, 2 f32 */", out_t),
    string.format("constexpr int DISCRETE = %d, ACCUMULATE = %d, SPLIT = %d;",
                  b(output == "discrete"), b(accumulate), split),
    string.format("constexpr int STG_BUFS = %d;", stg_bufs),
    -- > 0: dW rows stored (or, wgrad.rows, added) tile.n wide through a
    -- 3-D map where K allows
    string.format("constexpr int D_CHUNKS = %d;", d_chunks),
    string.format("constexpr int RASTER = %d, MAXG = %d, MBAND = 8;", k.raster, common.max_groups),
    -- wgrad.dbias: the k0 = 0 items also sum dY's stage rows into db
    string.format("constexpr int DBIAS = %d, IN_F16 = %d;", b(w.dbias), b(ity == "f16")),
  }, smem, wgmma)

  local source = pre .. kiln.text("sm90_common.cuh") .. kiln.text("sm90_wgrad.cuh")

  -- launched as a 1-D cluster of m*n CTAs along x
  local launch = common.launch(entry, k, smem, {m = k.cm, n = k.cn}, {
    -- A: dY as {inner = N, outer = capacity}, boxes of {64 n, 64 tokens}
    a = {box_inner = 64, box_outer = bk, swizzle = 128},
    -- B: X as {inner = K, outer = capacity}, boxes of {64 k, 64 tokens}
    b = {box_inner = 64, box_outer = bk, swizzle = 128},
    -- D: dW as {inner = K, outer = G*N} (discrete: one group's N), row
    -- stride ldd, in the output type, boxes of {128 bytes of k, 16 n} for
    -- TMA reduce-add (accumulate, fp32) or TMA store (overwrite)
    -- (d_chunks > 0: a 3-D map of rows d_chunks boxes wide where K is a
    -- multiple of the box, launch.c)
    d = {box_inner = out_t == 2 and 32 or 64, box_outer = 16, swizzle = 128,
         chunks = d_chunks > 0 and d_chunks or nil},
  })

  return source, launch
end

-- SPDX-License-Identifier: Apache-2.0
-- templates/sm90_common.lua — what the two sm90 templates (sm90.lua for
-- fprop/dgrad, sm90_wgrad.lua for wgrad) share: the family's rules, the
-- shared-memory budget and the preamble of compile-time constants.
--
-- Rules refuse a spec with kiln.refuse(key, message), naming the spec key at
-- fault, so that `kiln` reports it at that key's line:col as bad input.

local M = {}

-- Dynamic shared memory per block the family may use, by arch.
M.smem_limit = { sm_90a = 232448 }
-- Shared memory of one SM (the per-block limit above, plus the 1 KiB the
-- hardware reserves per block): two blocks asking for more than half of it
-- cannot share the SM.
M.smem_per_sm = { sm_90a = 233472 }

-- The shared memory a kernel asks for so that no other CTA can share its
-- SM: more than half of the SM's (2 x (smem + 1 KiB reserved) must exceed
-- it).  Kernels that keep per-SM copies of tensor maps in global memory
-- (kiln_tmap_repoint, sm90_common.cuh) need it; every shipped sm90 kernel
-- asks for that much anyway.
function M.exclusive_sm(smem, arch)
  return math.max(smem, M.smem_per_sm[arch] // 2)
end

-- Groups the tile schedule holds in shared memory (MAXG of the device code);
-- the kernels trap on more, so the launch table reports it.
M.max_groups = 1024

-- Refuses the spec because of `key`; the error names the caller's caller
-- (the rule), not this helper.
function M.fail(key, fmt, ...)
  kiln.refuse(key, string.format(fmt, ...), 2)
end
local fail = M.fail

local fp8_types = { e4m3 = true, e5m2 = true }

-- Input types and the fp8 knobs.  8-bit inputs (fprop, dgrad): wgmma takes
-- e4m3 or e5m2 for either operand, K-major only, k32 per instruction; the
-- scales come with a recipe.  Returns the input element size in bytes.
function M.check_types(spec)
  local types, f = spec.types, spec.fp8
  local a8, b8 = fp8_types[types.a], fp8_types[types.b]
  if not a8 and not b8 then
    if types.a ~= types.b then
      fail("types.b", "types.a and types.b must be the same 16-bit type (got %s and %s)",
           types.a, types.b)
    end
    if f.recipe ~= "none" then
      fail("fp8.recipe", "fp8.recipe %s needs e4m3 or e5m2 inputs (types.a is %s)", f.recipe, types.a)
    end
    if f.accumulate ~= "fast" then
      fail("fp8.accumulate", "fp8.accumulate %s needs e4m3 or e5m2 inputs (types.a is %s)",
           f.accumulate, types.a)
    end
    return 2
  end
  if not (a8 and b8) then
    fail("types.b", "types %s x %s: wgmma has no product of an 8-bit and a 16-bit operand " ..
         "(give both as e4m3/e5m2, or both as %s)", types.a, types.b, a8 and types.b or types.a)
  end
  if spec.op == "wgrad" then
    fail("types.a", "fp8 wgrad is not built: wgrad reads both operands MN-major, and 8-bit " ..
         "wgmma takes K-major operands only (take wgrad in bf16 or fp16)")
  end
  if f.recipe == "none" then
    fail("fp8.recipe", "types %s x %s need fp8.recipe: tensor, row or block", types.a, types.b)
  end
  if f.recipe == "block" and f.accumulate ~= "promote" then
    fail("fp8.accumulate", "fp8.recipe block scales every 128 of k in the main loop, so it " ..
         "promotes: set fp8.accumulate: promote")
  end
  return 1
end

-- The rules both templates share.  Returns the checked shape:
-- {bm, bn, bk, consumers, stages, schedule, pingpong, raster, esize,
-- promote, cm, cn}.
function M.check(spec, arch, what)
  if M.smem_limit[arch] == nil then
    fail("family", "family sm90 (TMA + wgmma) needs sm_90a, not %s; use family: simple",
         tostring(arch))
  end
  local types = spec.types
  local esize = M.check_types(spec)
  local tile = spec.tile
  local bm, bn, bk = tile.m, tile.n, tile.k
  local consumers, stages = spec.warpgroups, spec.stages
  -- swap_ab (fprop/dgrad): the weights are wgmma's A operand (64 of a
  -- tile's tile.n output columns a warp group's m64) and the tokens its B,
  -- tile.m wide, which wgmma takes in any multiple of 8: a group of 154
  -- tokens is one 160-token tile, where 64-row tiles pad it to 192 and read
  -- its weights three times, 128-row ones to 256 (docs/sm90_kernel.md,
  -- "Swapped operands").
  local swap = spec.swap_ab
  if swap then
    if spec.op == "wgrad" then
      fail("swap_ab", "swap_ab is for fprop and dgrad (wgrad's operands are both the tokens')")
    end
    if esize ~= 2 then
      fail("swap_ab", "swap_ab needs 16-bit inputs (8-bit wgmma takes K-major operands only, " ..
           "and dgrad's weights are MN-major as A): types.a is %s", types.a)
    end
    if bm % 8 ~= 0 or bm < 8 or bm > 256 then
      fail("tile.m", "tile.m must be a multiple of 8 from 8 to 256 with swap_ab (the tokens " ..
           "are wgmma's N; got %d)", bm)
    end
    if spec.schedule == "pingpong" then
      fail("schedule", "swap_ab is built for schedule cooperative (the warp groups split a " ..
           "tile's tile.n weight columns)")
    end
    if bn % (64 * consumers) ~= 0 or bn > 256 then
      fail("tile.n", "tile.n must be a multiple of 64 x warpgroups (%d) up to 256 with " ..
           "swap_ab: each warp group takes whole m64 blocks of weight columns (got %d)",
           64 * consumers, bn)
    end
    if spec.cluster.m * spec.cluster.n ~= 1 or spec.k_cluster ~= 1 then
      fail("swap_ab", "swap_ab is built for cluster 1x1 and k_cluster 1 (got cluster %dx%d, " ..
           "k_cluster %d)", spec.cluster.m, spec.cluster.n, spec.k_cluster)
    end
  elseif bm % 64 ~= 0 or bm < 64 or bm > 256 then
    fail("tile.m", "tile.m must be a multiple of 64 from 64 to 256 for family sm90 (wgmma " ..
         "works on 64 rows per warp group; got %d)", bm)
  end
  -- Pingpong gives each warp group a whole tile of its own; cooperative
  -- splits a tile's rows among the warp groups.  Left at "auto": pingpong
  -- where one warp group can hold the whole tile's accumulators (two warp
  -- groups, tile.m x tile.n <= 16384), which measured faster than
  -- cooperative at 128x128 on every benchmark shape; cooperative otherwise.
  local schedule = spec.schedule
  if swap then
    schedule = "cooperative"
  elseif schedule == "auto" then
    schedule = (consumers == 2 and bm * bn <= 16384) and "pingpong" or "cooperative"
  end
  local pingpong = schedule == "pingpong"
  if pingpong and consumers ~= 2 then
    fail("schedule", "schedule pingpong needs warpgroups: 2 (got %d)", consumers)
  end
  if not pingpong and not swap and (bm // 64) % consumers ~= 0 then
    fail("warpgroups", "tile.m %d cannot be split across %d warp groups (each needs a " ..
         "multiple of 64 rows)", bm, consumers)
  end
  -- wgmma takes any multiple of 8, but the epilogue and the MN-major loads
  -- work in 64-column (128-byte) chunks.
  if bn % 64 ~= 0 or bn < 64 or bn > 256 then
    fail("tile.n", "tile.n must be 64, 128, 192 or 256 for family sm90 (its epilogue and " ..
         "loads work in 64-column chunks; got %d)", bn)
  end
  if bk * esize ~= 128 then
    fail("tile.k", "tile.k must be %d for %s with family sm90: one 128-byte swizzled row " ..
         "(got %d)", 128 // esize, types.a, bk)
  end
  local rows = pingpong and bm or bm // consumers
  local regs = rows * bn // 128
  if swap then regs = bn // consumers * bm // 128 end
  -- A pingpong warp group may hold 192 (128x192, 192x128): its 232
  -- registers (wgrad's 240, below) keep the rest of the loop and the
  -- epilogue without a spill, and the tile reads a third fewer operand
  -- bytes a FLOP than 64x256 or 128x128 (sm90_gemm.cuh, docs/sm90_kernel.md,
  -- docs/sm90_wgrad.md).
  local max_regs = pingpong and 192 or 128
  if regs > max_regs then
    fail("tile", "tile %dx%d with %d warp group%s needs %d fp32 accumulator registers per " ..
         "thread; at most %d (use more warp groups or a smaller tile)",
         bm, bn, consumers, consumers > 1 and "s" or "", regs, max_regs)
  end
  local promote = spec.fp8.accumulate == "promote"
  -- Promotion keeps the sums and two k-blocks' products (3 x 64 registers
  -- at most), or, for 128 sums, one half-width product (promote_split:
  -- sm90_gemm_roles.cuh, kiln_mainloop_promote_split).
  if promote and regs > 64 and not (regs == 128 and bn == 256 and not pingpong) then
    fail("fp8.accumulate", "fp8.accumulate promote keeps the sums and two k-blocks' products " ..
         "(3 x %d registers per thread for tile %dx%d with %d warp group%s; at most 3 x 64), " ..
         "or 128 sums and a half-width product (cooperative, tile.n 256, 64 rows per warp " ..
         "group): use a cooperative 128x128 or 128x256 tile",
         regs, bm, bn, consumers, consumers > 1 and "s" or "")
  end
  if spec.fp8.recipe == "block" and bn % 128 ~= 0 then
    fail("tile.n", "fp8.recipe block scales the weights in 128x128 blocks: tile.n must be 128 " ..
         "or 256 (got %d)", bn)
  end
  if stages < 2 then
    fail("stages", "stages must be from 2 to 8 for family sm90 (got %d)", stages)
  end
  local raster = ({group = 0, m = 1, n = 2})[spec.raster]
  -- A cluster is a pair of CTAs sharing one operand's loads (multicast):
  -- m: 2 pairs tiles along m (they share B), n: 2 along n (they share A).
  local cm, cn = spec.cluster.m, spec.cluster.n
  if cm * cn > 2 then
    fail("cluster", "cluster %dx%d has %d CTAs; at most 2 for now", cm, cn, cm * cn)
  end
  -- k_cluster: a cluster of that many CTAs cuts each tile's reduction
  -- along k and sums the pieces in distributed shared memory (sm90_gemm_cut.cuh,
  -- KCUT): the cooperative schedule's partial tile fits its ring.
  local kc = spec.k_cluster
  if kc ~= 1 and kc ~= 2 and kc ~= 4 and kc ~= 8 then
    fail("k_cluster", "k_cluster must be 1, 2, 4 or 8 (got %d)", kc)
  end
  if kc > 1 and (cm * cn > 1 or pingpong or promote) then
    fail("k_cluster", "k_cluster %d needs cluster 1x1, schedule cooperative and no fp8 " ..
         "promotion (got cluster %dx%d, schedule %s, fp8.accumulate %s)", kc, cm, cn, schedule,
         spec.fp8.accumulate)
  end
  return {bm = bm, bn = bn, bk = bk, consumers = consumers, stages = stages, swap = swap,
          schedule = schedule, pingpong = pingpong, raster = raster, esize = esize,
          promote = promote, promote_split = promote and regs > 64, cm = cm, cn = cn,
          kc = kc, regs = regs}
end

-- Shared memory of a kernel: the ring of A and B stages, per-warp staging
-- of the epilogue (stg_warp bytes for each of a consumer warp group's 4
-- warps), the group schedule (2*(MAXG+1)+64 ints), `barriers` 8-byte
-- barriers, and 1024 bytes to align the ring to the 128-byte swizzle atom.
function M.smem(k, stg_warp, barriers, extra)
  local ring = k.stages * (k.bm + k.bn) * k.bk * k.esize
  local sched = (2 * (M.max_groups + 1) + 64) * 4
  local off_bar = (ring + k.consumers * 4 * stg_warp + (extra or 0) + sched + 7) & ~7
  return 1024 + off_bar + barriers * 8
end

-- fp32 epilogue staging per warp: 16 rows x 40 floats.
M.staging_warp = 16 * 40 * 4

-- TMA-store epilogues (sm90_gemm's cooperative one, sm90_wgrad's dense
-- overwrite): per consumer warp, boxes of 16 rows x 128 bytes, as many as
-- fit beside the ring up to the warp's share of a tile (out_bytes per
-- output element), so that a box waits only when it comes round again.
-- Returns the box count, the kernel's shared memory and the warp's share
-- in boxes.
function M.store_boxes(k, out_bytes, arch, barriers, extra)
  local share = (k.pingpong and k.bm or k.bm // k.consumers) // 64 * k.bn * out_bytes // 128
  local bufs = 1
  while bufs < share and M.smem(k, 2048 * (bufs + 1), barriers, extra) <= M.smem_limit[arch] do
    bufs = bufs + 1
  end
  return bufs, M.smem(k, 2048 * bufs, barriers, extra), share
end

-- Refuses a kernel that needs more shared memory than arch allows.
function M.check_smem(k, smem, arch)
  local limit = M.smem_limit[arch]
  if smem > limit then
    fail("stages", "%d stages of tile %dx%dx%d need %d bytes of shared memory, %s allows %d",
         k.stages, k.bm, k.bn, k.bk, smem, arch, limit)
  end
end

-- The preamble of compile-time constants: `name` heads it, `lines` are the
-- template's own constants (after the tile's), then the register split, the
-- launch's shared memory and the wgmma wrapper.
function M.preamble(name, entry, k, lines, smem, wgmma)
  local pre = {
    kiln.abi,
    "",
    "/* ---- kiln " .. name .. " preamble ---- */",
    "#define KILN_ENTRY " .. entry,
    string.format("constexpr int BM = %d, BN = %d, BK = %d, STAGES = %d, CONSUMERS = %d;",
                  k.bm, k.bn, k.bk, k.stages, k.consumers),
    string.format("constexpr int IN_ESZ = %d;  /* bytes per input element */", k.esize),
    string.format("constexpr int CM = %d, CN = %d, CS = %d;  /* cluster shape, CTAs in it */",
                  k.cm, k.cn, k.cm * k.cn),
    string.format("constexpr int KC = %d;  /* CTAs cutting a tile along k (k_cluster) */", k.kc),
    string.format("constexpr int SWAP_AB = %d;  /* weights as wgmma's A, tokens as its B */",
                  M.b(k.swap)),
  }
  for _, l in ipairs(lines) do pre[#pre + 1] = l end
  -- setmaxnreg: 128 x producer + 256 x consumers <= 64K registers.  The
  -- half-width promotion and the kernels a template marks wide_regs need
  -- 240 (they spilled at 232); their producers fit 24.
  local wide = k.promote_split or k.wide_regs
  local consumer_regs = (wide or k.consumers ~= 2) and 240 or 232
  pre[#pre + 1] = string.format("constexpr int CONSUMER_REGS = %d, PRODUCER_REGS = %d;",
                                consumer_regs, wide and 24 or 40)
  pre[#pre + 1] = string.format("constexpr int SMEM_BYTES = %d;  /* dynamic shared memory of the launch */", smem)
  pre[#pre + 1] = wgmma
  pre[#pre + 1] = ""
  return table.concat(pre, "\n")
end

-- The kernel's entry point.
function M.entry(spec)
  return "kiln_" .. spec.name:gsub("[^%w_]", "_")
end

-- What the dispatcher reads from every sm90 launch table.
M.launch_limits = { max_groups = M.max_groups, preference = 2 }

-- The launch table of an sm90 kernel: persistent, one CTA per SM, a
-- producer warp group and k.consumers consumer warp groups; cluster {m, n}
-- and the tensor-map boxes tmap are the template's.  scale_bias is
-- compiled in or not: a kernel with it always scales the bias.
function M.launch(entry, k, smem, cluster, tmap)
  return {
    entry = entry,
    threads = 128 * (k.consumers + 1),
    smem = smem,
    persistent = true,
    ctas_per_sm = 1,
    cluster = cluster,
    tmap = tmap,
    max_groups = M.launch_limits.max_groups,
    preference = M.launch_limits.preference,
    scale_bias_switch = false,
  }
end

function M.b(x) return x and 1 or 0 end

return M

-- templates/sm90.lua — persistent warp-specialised grouped GEMM for sm_90a
-- (fprop, dgrad).  Called as chunk(spec, arch); returns source, launch.
-- The device code is templates/sm90_gemm.cuh; this file checks the spec,
-- writes the preamble of compile-time constants and the wgmma wrapper for
-- the tile's N, and reports how to launch the kernel.

local spec, arch = ...

local function fail(msg)
  error(string.format("%s:%s: sm90: %s", tostring(spec.spec_path or "?"),
                      tostring(spec.spec_line or "?"), msg), 0)
end

local op = spec.op
-- The weight gradient reduces over tokens (both operands MN-major): its own
-- template.
if op == "wgrad" then return include("sm90_wgrad")(spec, arch) end
if op ~= "fprop" and op ~= "dgrad" then
  fail("op '" .. tostring(op) .. "' is not supported by family sm90 (fprop, dgrad)")
end

local types = spec.types or {}
if types.a ~= types.b or (types.a ~= "bf16" and types.a ~= "fp16") then
  fail("types.a and types.b must both be bf16 or both fp16")
end
if (types.accum or "f32") ~= "f32" then fail("types.accum must be f32") end
local out_t = ({bf16 = 0, fp16 = 1, f32 = 2})[types.out]
if not out_t then fail("types.out must be bf16, fp16 or f32") end

local tile = spec.tile or {}
local bm, bn, bk = tile.m or 128, tile.n or 256, tile.k or 64
local consumers = spec.warpgroups or 2
local stages = spec.stages or 4
if bk ~= 64 then fail("tile.k must be 64 (one 128-byte swizzled row of 16-bit elements)") end
if consumers ~= 1 and consumers ~= 2 then fail("warpgroups must be 1 or 2") end
if bm % 64 ~= 0 or bm > 256 then fail(string.format("tile.m (%d) must be 64, 128, 192 or 256", bm)) end
if bn % 64 ~= 0 or bn < 64 or bn > 256 then
  fail(string.format("tile.n (%d) must be 64, 128, 192 or 256 (epilogue and dgrad work in 64-column chunks)", bn))
end
-- schedule: "cooperative" (both consumer warpgroups split each tile's rows)
-- or "pingpong" (each consumer warpgroup owns whole tiles, alternating, so
-- one's epilogue overlaps the other's main loop).  Left out ("auto"):
-- pingpong where one warpgroup can hold the whole tile's accumulators (two
-- warpgroups, tile.m x tile.n <= 16384), which measured faster than
-- cooperative at 128x128 on every BENCH.md shape; cooperative otherwise.
local schedule = spec.schedule
if schedule == nil or schedule == "auto" then
  schedule = (consumers == 2 and bm * bn <= 16384) and "pingpong" or "cooperative"
end
if schedule ~= "cooperative" and schedule ~= "pingpong" then
  fail("schedule must be cooperative or pingpong")
end
local pingpong = schedule == "pingpong"
if pingpong and consumers ~= 2 then fail("schedule pingpong needs warpgroups: 2") end
if not pingpong and bm % (64 * consumers) ~= 0 then
  fail(string.format("tile.m (%d) cannot be split across %d warp groups of 64-row multiples",
                     bm, consumers))
end
local mi = pingpong and bm // 64 or bm // consumers // 64
if mi * bn // 2 > 128 then
  fail(string.format("tile %dx%d with %d warpgroup(s) needs %d accumulators per thread (max 128)",
                     bm, bn, consumers, mi * bn // 2))
end
if stages < 2 then fail("stages must be at least 2") end
local cl = spec.cluster or {m = 1, n = 1}
local cm, cn = cl.m or 1, cl.n or 1
if not ((cm == 1 and cn == 1) or (cm == 2 and cn == 1) or (cm == 1 and cn == 2)) then
  fail("cluster must be {m: 1, n: 1}, {m: 2, n: 1} or {m: 1, n: 2}")
end
if cm == 2 and op == "dgrad" and (bn // 64) % 2 ~= 0 then
  fail("dgrad with cluster m: 2 needs tile.n 128 or 256")
end
if cn == 2 and (bm // 2) % 8 ~= 0 then fail("cluster n: 2 needs tile.m divisible by 16") end
if spec.weights ~= nil and spec.weights ~= "contiguous" then
  fail("family sm90 reads weights through one TMA map: set weights: contiguous")
end

local epi = spec.epilogue or {}
local raster = ({group = 0, m = 1, n = 2})[spec.raster or "group"]
if not raster then fail("raster must be group, m or n") end

-- Shared memory: the ring, per-warp fp32 staging, the schedule arrays, the
-- barriers, plus 1024 bytes to align the ring to the 128-byte swizzle atom.
local maxg = 1024
local esz = 2
local ring = stages * (bm + bn) * bk * esz
local staging = consumers * 4 * 16 * 40 * 4
local sched = (2 * (maxg + 1) + 64) * 4
local off_bar = (ring + staging + sched + 7) & ~7
local smem = 1024 + off_bar + 2 * stages * 8
if smem > 232448 then
  fail(string.format("needs %d bytes of shared memory (limit 232448): fewer stages or a smaller tile",
                     smem))
end

local entry = "kiln_" .. (spec.name or "sm90"):gsub("[^%w_]", "_")

-- wgmma wrapper for m64n<bn>k16 with fp32 accumulators; dgrad reads B
-- MN-major (the weight transposed).
local ity = types.a == "bf16" and "bf16" or "f16"
local wgmma = include("sm90_wgmma")(bn, ity, 0, op == "dgrad" and 1 or 0)

local function b(x) return x and 1 or 0 end
local pre = {
  kiln.abi,
  "",
  "/* ---- kiln sm90 preamble ---- */",
  "#define KILN_ENTRY " .. entry,
  string.format("constexpr int BM = %d, BN = %d, BK = %d, STAGES = %d, CONSUMERS = %d;",
                bm, bn, bk, stages, consumers),
  string.format("constexpr int OP = %d;  /* 0 fprop, 1 dgrad */", op == "dgrad" and 1 or 0),
  string.format("constexpr int OUT_T = %d;  /* 0 bf16, 1 fp16, 2 f32 */", out_t),
  string.format("constexpr int EPI_BIAS = %d, EPI_ROW_SCALE = %d, EPI_SCALE_BIAS = %d;",
                b(epi.bias == "per_group"), b(epi.row_scale), b(epi.scale_bias)),
  string.format("constexpr int EPI_ALPHA_PER_GROUP = %d, EPI_BETA = %d;",
                b(epi.alpha == "per_group"), b(epi.beta)),
  string.format("constexpr int RASTER = %d, MAXG = %d, MBAND = 16;", raster, maxg),
  string.format("constexpr int PINGPONG = %d;", pingpong and 1 or 0),
  string.format("constexpr int CM = %d, CN = %d;", cm, cn),
  string.format("constexpr int CONSUMER_REGS = %d;", consumers == 2 and 232 or 240),
  string.format("constexpr int SMEM_BYTES = %d;  /* dynamic shared memory of the launch */", smem),
  wgmma,
  "",
}

local source = table.concat(pre, "\n") .. kiln.text("sm90_common.cuh") .. kiln.text("sm90_gemm.cuh")

local launch = {
  entry = entry,
  threads = 128 * (consumers + 1),
  smem = smem,
  persistent = true,
  ctas_per_sm = 1,
  cluster = {m = cm, n = cn},   -- launched as a 1-D cluster of m*n CTAs along x
  tmap = {
    -- A: {inner = K (fprop) or N (dgrad), outer = capacity}
    a = {box_inner = 64, box_outer = cn == 2 and bm // 2 or bm, swizzle = 128},
    -- B: W as {inner = K, outer = G*N}; fprop loads {64, BN} boxes,
    -- dgrad BN/64 boxes of {64 (K, the output dim), BK (N, the reduction)}
    b = {box_inner = 64, box_outer = op == "fprop" and (cm == 2 and bn // 2 or bn) or bk, swizzle = 128},
    d = nil,
  },
}

return source, launch

-- templates/sm90_wgrad.lua — persistent warp-specialised k-grouped weight
-- gradient for sm_90a: dW_g[N,K] = dY_gᵀ · X_g over each group's tokens.
-- Returns a function(spec, arch) -> source, launch; templates/sm90.lua
-- delegates to it for op wgrad.  The device code is
-- templates/sm90_wgrad.cuh; this file checks the spec, writes the preamble
-- of compile-time constants and the wgmma wrapper (both operands MN-major),
-- and reports how to launch the kernel.
--
-- Spec mapping: tile.m = rows of dW (the weight's N), tile.n = columns of
-- dW (K), tile.k = tokens per k-block (64).  warpgroups = consumer
-- warpgroups.  schedule: "cooperative" (both warpgroups share a tile) or
-- "pingpong" (each warpgroup owns whole tiles; epilogue overlaps the other's
-- main loop); default: pingpong when warpgroups is 2 and one warpgroup can
-- hold the whole tile's accumulators (tile.m * tile.n <= 16384), else
-- cooperative.

return function(spec, arch)
  local function fail(msg)
    error(string.format("%s:%s: sm90_wgrad: %s", tostring(spec.spec_path or "?"),
                        tostring(spec.spec_line or "?"), msg), 0)
  end

  if spec.op ~= "wgrad" then
    fail("op '" .. tostring(spec.op) .. "' is not wgrad")
  end
  if arch ~= nil and arch ~= "sm_90a" then
    fail("arch '" .. tostring(arch) .. "' is not supported (sm_90a only: wgmma, setmaxnreg)")
  end

  local types = spec.types or {}
  if types.a ~= types.b or (types.a ~= "bf16" and types.a ~= "fp16") then
    fail("types.a and types.b must both be bf16 or both fp16")
  end
  if (types.accum or "f32") ~= "f32" then fail("types.accum must be f32") end
  local out_t = ({bf16 = 0, fp16 = 1, f32 = 2})[types.out]
  if not out_t then fail("types.out must be bf16, fp16 or f32") end

  local w = spec.wgrad or {}
  local output = w.output or "dense"
  if output ~= "dense" and output ~= "discrete" then
    fail("wgrad.output must be dense or discrete")
  end
  local accumulate = w.accumulate and true or false
  local split = w.split or 1
  if accumulate and out_t ~= 2 then fail("wgrad.accumulate needs types.out: f32") end
  if split < 1 or split > 16 then fail("wgrad.split must be from 1 to 16") end
  if split > 1 and not accumulate then
    fail("wgrad.split > 1 adds partial sums atomically into the output: it needs " ..
         "wgrad.accumulate: true (types.out: f32)")
  end
  if w.dbias then fail("wgrad.dbias is not supported by sm90_wgrad yet") end

  local tile = spec.tile or {}
  local bm, bn, bk = tile.m or 128, tile.n or 256, tile.k or 64
  local consumers = spec.warpgroups or 2
  local stages = spec.stages or 4
  if bk ~= 64 then fail("tile.k must be 64 (tokens per k-block)") end
  if consumers ~= 1 and consumers ~= 2 then fail("warpgroups must be 1 or 2") end
  if bn % 64 ~= 0 or bn < 64 or bn > 256 then fail("tile.n must be 64, 128, 192 or 256") end
  if bm % 64 ~= 0 or bm < 64 or bm > 256 then fail("tile.m must be 64, 128, 192 or 256") end

  local schedule = spec.schedule
  if schedule == nil then
    schedule = (consumers == 2 and bm * bn <= 16384) and "pingpong" or "cooperative"
  end
  if schedule ~= "pingpong" and schedule ~= "cooperative" then
    fail("schedule must be pingpong or cooperative")
  end
  local pingpong = schedule == "pingpong"
  if pingpong and consumers ~= 2 then fail("schedule pingpong needs warpgroups: 2") end
  local wg_m = pingpong and bm or bm // consumers
  if wg_m % 64 ~= 0 then
    fail(string.format("tile.m (%d) must be a multiple of 64 x warpgroups (%d)", bm, 64 * consumers))
  end
  local mi = wg_m // 64
  if mi * bn // 2 > 128 then
    fail(string.format("tile %dx%d (%s) needs %d accumulators per thread (max 128)",
                       bm, bn, schedule, mi * bn // 2))
  end
  if stages < 2 then fail("stages must be at least 2") end
  local cl = spec.cluster or {m = 1, n = 1}
  if (cl.m or 1) ~= 1 or (cl.n or 1) ~= 1 then
    fail("clusters are not supported yet (cluster must be 1x1)")
  end
  local raster = ({group = 0, m = 1, n = 2})[spec.raster or "group"]
  if not raster then fail("raster must be group, m or n") end

  -- Shared memory: the ring, per-warp fp32 staging, the schedule arrays, the
  -- barriers, plus 1024 bytes to align the ring to the swizzle atom.
  -- Dense accumulate goes through TMA reduce-add (tmap_d over dW); staging
  -- per warp is then 1 or 2 swizzled 2 KiB boxes (2 where they fit).
  local maxg = 1024
  local tma_red = accumulate and output == "dense"
  local ring = stages * (bm + bn) * bk * 2
  local sched = (2 * (maxg + 1) + 64) * 4
  local function smem_for(stg_warp)
    local off_bar = (ring + consumers * 4 * stg_warp + sched + 7) & ~7
    return 1024 + off_bar + (2 * stages + 2) * 8
  end
  local stg_bufs = 0
  local smem = smem_for(16 * 40 * 4)
  if tma_red then
    stg_bufs = smem_for(4096) <= 232448 and 2 or 1
    smem = smem_for(2048 * stg_bufs)
  end
  if smem > 232448 then
    fail(string.format("needs %d bytes of shared memory (limit 232448): fewer stages or a " ..
                       "smaller tile", smem))
  end

  local entry = "kiln_" .. (spec.name or "sm90_wgrad"):gsub("[^%w_]", "_")

  -- wgmma m64n<bn>k16, fp32 accumulators, A and B both MN-major.
  local ity = types.a == "bf16" and "bf16" or "f16"
  local wgmma = include("sm90_wgmma")(bn, ity, 1, 1)

  local function b(x) return x and 1 or 0 end
  local pre = {
    kiln.abi,
    "",
    "/* ---- kiln sm90_wgrad preamble ---- */",
    "#define KILN_ENTRY " .. entry,
    string.format("constexpr int BM = %d, BN = %d, BK = %d, STAGES = %d, CONSUMERS = %d;",
                  bm, bn, bk, stages, consumers),
    string.format("constexpr int PINGPONG = %d;", b(pingpong)),
    string.format("constexpr int OUT_T = %d;  /* 0 bf16, 1 fp16, 2 f32 */", out_t),
    string.format("constexpr int DISCRETE = %d, ACCUMULATE = %d, SPLIT = %d;",
                  b(output == "discrete"), b(accumulate), split),
    string.format("constexpr int TMA_RED = %d, STG_BUFS = %d;", b(tma_red), stg_bufs > 0 and stg_bufs or 1),
    string.format("constexpr int RASTER = %d, MAXG = %d, MBAND = 8;", raster, maxg),
    string.format("constexpr int CONSUMER_REGS = %d;", consumers == 2 and 232 or 240),
    string.format("constexpr int SMEM_BYTES = %d;  /* dynamic shared memory of the launch */", smem),
    wgmma,
    "",
  }

  local source = table.concat(pre, "\n") .. kiln.text("sm90_common.cuh") .. kiln.text("sm90_wgrad.cuh")

  local launch = {
    entry = entry,
    threads = 128 * (consumers + 1),
    smem = smem,
    persistent = true,
    ctas_per_sm = 1,
    cluster = {m = 1, n = 1},
    tmap = {
      -- A: dY as {inner = N, outer = capacity}, boxes of {64 n, 64 tokens}
      a = {box_inner = 64, box_outer = bk, swizzle = 128},
      -- B: X as {inner = K, outer = capacity}, boxes of {64 k, 64 tokens}
      b = {box_inner = 64, box_outer = bk, swizzle = 128},
      -- D (dense accumulate only): dW as {inner = K, outer = G*N}, row
      -- stride ldd, fp32, boxes of {32 k, 16 n} for TMA reduce-add
      d = tma_red and {box_inner = 32, box_outer = 16, swizzle = 128} or nil,
    },
  }

  return source, launch
end

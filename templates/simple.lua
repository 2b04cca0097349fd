-- SPDX-License-Identifier: Apache-2.0
-- simple.lua — a plain, portable grouped GEMM for every op (fprop, dgrad,
-- wgrad), any architecture from sm_80 on.  Shared-memory tiles, fp32
-- accumulation, tensor cores through mma.sync for bf16/fp16 (FMA for other
-- types or tiny tiles); the device code is templates/simple_gemm.cuh.
--
-- Launch contract (persistent = true): the kernel loops over its tiles with a
-- grid-stride loop, so any grid size is correct.  The runtime launches
--   min(ctas_per_sm * SMs, TILES)
-- CTAs, where TILES is this upper bound of the tile count (the real count
-- depends on the group sizes, which stay on the device):
--   fprop, dgrad:  TILES = (ceil(capacity / tile.m) + G) * ceil(n_out / tile.n)
--                  n_out = N for fprop, K for dgrad
--   wgrad:         TILES = G * ceil(N / tile.m) * ceil(K / tile.n)
--
-- Spec fields used: op, types, tile.m / tile.n (16, 32, 64 or 128 each),
-- tile.k (the kernel uses min(tile.k, 32), a multiple of 8), weights,
-- epilogue, wgrad.output / wgrad.accumulate / wgrad.dbias.  stages, warpgroups, schedule
-- and raster do not apply to this kernel and are ignored (its shared memory
-- is static and does not depend on stages).
--
-- Called as chunk(spec, arch, mode) (see compiler/expand.h); a spec this
-- kernel cannot build is refused with kiln.refuse, naming the spec key.
local spec, arch, mode = ...

local function fail(key, fmt, ...)
  kiln.refuse(key, string.format("simple: " .. fmt, ...), 2)
end

local type_struct = { bf16 = "ks_bf16", fp16 = "ks_fp16", f32 = "ks_f32" }

local function element(which)
  local t = spec.types[which]
  local s = type_struct[t]
  if not s then
    fail("types." .. which, "types.%s = %s is not supported by family simple (bf16, fp16 or " ..
         "f32; fp8 is built by family sm90)", which, tostring(t))
  end
  return s
end

local op_enum = { fprop = "KS_OP_FPROP", dgrad = "KS_OP_DGRAD", wgrad = "KS_OP_WGRAD" }
local op = op_enum[spec.op]
local ta, tb, to = element("a"), element("b"), element("out")
if spec.fp8.recipe ~= "none" or spec.fp8.accumulate ~= "fast" then
  fail(spec.fp8.recipe ~= "none" and "fp8.recipe" or "fp8.accumulate",
       "family simple has no fp8 inputs, so no fp8 knobs (fp8 is built by family sm90)")
end
if spec.types.a ~= spec.types.b then
  fail("types.b", "types.a and types.b must be the same 16-bit type (got %s and %s)",
       spec.types.a, spec.types.b)
end

local function tile_dim(key)
  local v = spec.tile[key]
  if v ~= 16 and v ~= 32 and v ~= 64 and v ~= 128 then
    fail("tile." .. key, "tile.%s must be 16, 32, 64 or 128 for family simple (got %d)", key, v)
  end
  return v
end
local bm, bn = tile_dim("m"), tile_dim("n")
local bk = math.min(spec.tile.k, 32)
if bk < 8 or bk % 8 ~= 0 then
  fail("tile.k", "tile.k must be a multiple of 8 for family simple (got %d)", spec.tile.k)
end
if spec.cluster.m * spec.cluster.n ~= 1 then
  fail("cluster", "cluster %dx%d needs family sm90 (the simple family has no clusters)",
       spec.cluster.m, spec.cluster.n)
end
if spec.k_cluster ~= 1 then
  fail("k_cluster", "k_cluster %d needs family sm90 (the simple family has no clusters)", spec.k_cluster)
end
if spec.swap_ab then
  fail("swap_ab", "swap_ab needs family sm90 (it swaps wgmma's operands)")
end

local flags = {}
if spec.op == "wgrad" then
  local w = spec.wgrad
  if w.dbias then flags[#flags + 1] = "KS_DBIAS" end
  if w.split ~= 1 then fail("wgrad.split", "wgrad.split = %d is not supported by this kernel (use 1)", w.split) end
  if w.rows then fail("wgrad.rows", "wgrad.rows needs family sm90 (this kernel adds dW an element at a time)") end
  if w.accumulate then flags[#flags + 1] = "KS_ACCUMULATE" end
  if w.output == "discrete" then flags[#flags + 1] = "KS_DISCRETE" end
else
  local e = spec.epilogue
  if e.bias == "per_group" then flags[#flags + 1] = "KS_BIAS" end
  if e.scale == "per_row" then flags[#flags + 1] = "KS_ROW_SCALE" end
  if e.scale_bias then flags[#flags + 1] = "KS_SCALE_BIAS" end
  if e.alpha == "per_group" then flags[#flags + 1] = "KS_ALPHA_PER_GROUP" end
  if e.beta then flags[#flags + 1] = "KS_BETA" end
  if spec.weights ~= "contiguous" then flags[#flags + 1] = "KS_B_PTRS" end
end
if mode == "check" then return {smem = 0} end
-- Tensor cores (mma.sync m16n8k16, sm_80 and later) when A and B are the same
-- 16-bit type and the tile splits over 2x4 warps; FMA otherwise.
local use_mma = spec.types.a == spec.types.b and (spec.types.a == "bf16" or spec.types.a == "fp16")
  and bm >= 32 and bn >= 32 and bk % 16 == 0
if use_mma then flags[#flags + 1] = "KS_MMA" end
local flag_expr = #flags > 0 and table.concat(flags, " | ") or "0"

-- Kernel name: the spec's name as a C identifier.
local entry = tostring(spec.name):gsub("[^%w_]", "_")
if entry == "" or entry:match("^%d") then entry = "k_" .. entry end

-- Static shared memory: 4*bk*(bm+1) + 4*bk*(bn+1) + 8256 bytes, at most
-- 41.3 KB (128x128), under the 48 KB static limit.
-- 256 threads of up to 128 registers each: two CTAs fill an SM's register
-- file; 128x128 tiles need more registers (64 accumulators a thread) and run
-- one CTA per SM.  The kernel's __launch_bounds__ says the same.
local ctas_per_sm = bm * bn >= 128 * 128 and 1 or 2
local src = {
  string.format("// kernel %s: op=%s a=%s b=%s out=%s tile=%dx%dx%d arch=%s",
                spec.name, spec.op, spec.types.a, spec.types.b, spec.types.out, bm, bn, bk, arch),
  kiln.abi,
  kiln.text("simple_gemm.cuh"),
  string.format([[
extern "C" __global__ void __launch_bounds__(KS_THREADS, %d)
%s(const __grid_constant__ kiln_kernel_args args,
   const __grid_constant__ kiln_tmap tmap_a,
   const __grid_constant__ kiln_tmap tmap_b,
   const __grid_constant__ kiln_tmap tmap_d)
{
    ks_gemm<%s, %s, %s, %s, %d, %d, %d, %s>(args);
}
]], ctas_per_sm, entry, op, ta, tb, to, bm, bn, bk, flag_expr),
}

return table.concat(src, "\n"), {
  entry = entry,
  threads = 256,
  smem = 0,               -- static shared memory only
  persistent = true,
  ctas_per_sm = ctas_per_sm,
  max_groups = 0,         -- no limit: groups are scanned, not held in shared memory
  preference = 1,         -- below sm90 where both serve a call
  scale_bias_switch = true, -- args.scale_bias switches a compiled-in scale_bias
}

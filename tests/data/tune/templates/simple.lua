-- simple.lua (test override for tests/test_tune.c): stands in for the real
-- family "simple" so that `kiln tune` sees the three fates of a variant
-- quickly.  The kernels only need to compile (the fake timer never runs them):
--   tile 32x32   emits CUDA that NVRTC rejects   -> "failed to compile"
--   tile 128x32  emits a kernel that spills      -> "spills"
--   tile.n 16    emits a wgmma whose accumulators are read while it is in
--                flight: ptxas injects waits     -> "serialized its wgmma"
--   otherwise    emits an empty kernel           -> timed
-- and, like the real family, refuses tile.m 256: with --template-dir the
-- override's rules are the ones that drop sweep points.
local spec, arch = ...
local entry = tostring(spec.name):gsub("[^%w_]", "_")
local m, n = spec.tile.m, spec.tile.n
if m > 128 then
  kiln.refuse("tile.m", string.format("tile.m must be 16, 32, 64 or 128 (got %d)", m), 2)
end
local body
if m == 32 and n == 32 then
  body = "this is not CUDA;"
elseif m == 128 and n == 32 then
  -- 32 registers per thread at most (1024 threads, 2 blocks per SM) and
  -- 128 live values: ptxas must spill.
  body = [[
__device__ float sink[1 << 16];
extern "C" __global__ void __launch_bounds__(1024, 2) ENTRY(const __grid_constant__ kiln_kernel_args args,
   const __grid_constant__ kiln_tmap ta, const __grid_constant__ kiln_tmap tb,
   const __grid_constant__ kiln_tmap td)
{
    float v[128];
    const float *p = (const float *)args.a;
#pragma unroll
    for (int i = 0; i < 128; i++) v[i] = p[threadIdx.x * 131 + i * 7];
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int i = 0; i < 128; i++) v[i] = v[i] * v[(i + 37) & 127] + v[(i + r) & 127];
    float s = 0;
#pragma unroll
    for (int i = 0; i < 128; i++) s += v[i] * (float)(i + 1);
    sink[threadIdx.x] = s;
}
]]
elseif n == 16 then
  -- m64n16k16: 8 accumulators; one of them is stored after each issue,
  -- before the wait, so ptxas must wait for the wgmma there (C7517).
  local regs, cons = {}, {}
  for i = 0, 7 do
    regs[#regs + 1] = "%" .. i
    cons[#cons + 1] = string.format('"+f"(d[%d])', i)
  end
  body = [[
extern "C" __global__ void __launch_bounds__(128, 1) ENTRY(const __grid_constant__ kiln_kernel_args args,
   const __grid_constant__ kiln_tmap ta, const __grid_constant__ kiln_tmap tb,
   const __grid_constant__ kiln_tmap td)
{
    float d[8];
    float *out = (float *)args.d;
    unsigned long long da = (unsigned long long)args.a, db = (unsigned long long)args.b;
#pragma unroll
    for (int i = 0; i < 8; i++) d[i] = 0.f;
    for (int kb = 0; kb < args.k; kb++) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        asm volatile("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {REGS}, %8, %9, 1, 1, 1, 0, 0;"
                     : CONS : "l"(da + kb), "l"(db + kb));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        out[kb] = d[kb & 7];
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
    for (int i = 0; i < 8; i++) out[threadIdx.x * 8 + i] = d[i];
}
]]
  body = body:gsub("REGS", function() return table.concat(regs, ", ") end, 1)
  body = body:gsub("CONS", function() return table.concat(cons, ", ") end, 1)
else
  body = [[
extern "C" __global__ void ENTRY(const __grid_constant__ kiln_kernel_args args,
   const __grid_constant__ kiln_tmap ta, const __grid_constant__ kiln_tmap tb,
   const __grid_constant__ kiln_tmap td)
{
    if (args.d && threadIdx.x == 0) ((float *)args.d)[blockIdx.x] = args.alpha;
}
]]
end
body = body:gsub("ENTRY", entry)
return "// test kernel " .. spec.name .. " for " .. arch .. "\n" .. kiln.abi .. "\n" .. body, {
  entry = entry,
  threads = 128,
  smem = 0,
  persistent = true,
  ctas_per_sm = 2,
}

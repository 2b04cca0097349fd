-- a valid template exercising kiln.*, include and every launch field
local spec, arch = ...
local h1 = include("helper")
local h2 = include("helper.lua")
assert(h1 == h2, "include must return the cached value")
local parts = {
  "// runs=" .. h1.runs() .. " value=" .. h1.value,
  "// version=" .. kiln.version .. " arch=" .. arch .. " op=" .. spec.op,
  "// spec=" .. spec.spec_path .. ":" .. spec.spec_line .. " tile=" .. spec.tile.m .. "x" .. spec.tile.n,
  "// types=" .. spec.types.a .. "," .. spec.types.out .. " bias=" .. spec.epilogue.bias
    .. " scale=" .. spec.epilogue.scale .. " output=" .. spec.wgrad.output,
  "// abi_has_args=" .. tostring(kiln.abi:find("kiln_kernel_args", 1, true) ~= nil),
  kiln.text("snippet.cuh"),
  "// embedded_cuh_has_ks_gemm=" .. tostring(kiln.text("simple_gemm.cuh"):find("ks_gemm", 1, true) ~= nil),
  'extern "C" __global__ void good_kernel() {}',
}
return table.concat(parts, "\n"), {
  entry = "good_kernel", threads = 384, smem = 1000, persistent = true, ctas_per_sm = 1,
  cluster = {m = 2, n = 1}, max_groups = 512, preference = 3, scale_bias_switch = true,
  tmap = {a = {box_inner = 64, box_outer = 128, swizzle = 128}, d = {box_inner = 32, box_outer = 64, swizzle = 0}},
}

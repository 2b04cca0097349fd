-- Test template module (tests/unit/test_kernel.c): accepts every spec and
-- writes every value it is given as a comment line "// key=value", keys
-- sorted, so the test can see that each knob of kernel/knobs.c reaches Lua.
return function(spec, arch, mode)
if mode == "check" then return {smem = 0} end
local lines = {}
local function walk(t, prefix)
  for k, v in pairs(t) do
    local key = prefix .. k
    if type(v) == "table" and k ~= "arch" then
      walk(v, key .. ".")
    else
      lines[#lines + 1] = "// " .. key .. "=" .. (type(v) == "table" and table.concat(v, ",") or tostring(v))
    end
  end
end
walk(spec, "")
table.sort(lines)
lines[#lines + 1] = 'extern "C" __global__ void knobs_kernel() {}'
return table.concat(lines, "\n"), {
  entry = "knobs_kernel", threads = 32, smem = 0, persistent = false, ctas_per_sm = 1,
}
end

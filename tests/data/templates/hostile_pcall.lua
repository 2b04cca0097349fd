-- issue 13: pcall recursion, each level failing at the stack limit and trying again
local spec = ...
local function f() pcall(f) pcall(f) end
f()
return "extern \"C\" __global__ void k() {}", {entry = "k", threads = 32, smem = 0, persistent = false, ctas_per_sm = 1}

-- issue 13: 64 MiB strings built in a loop, a handful of VM instructions each
local spec = ...
for i = 1, 1000000000 do local s = string.rep("x", 64 << 20) end
return "extern \"C\" __global__ void k() {}", {entry = "k", threads = 32, smem = 0, persistent = false, ctas_per_sm = 1}

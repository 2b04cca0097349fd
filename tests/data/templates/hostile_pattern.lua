-- issue 13: backtracking inside one string.find call, where no instruction is counted
local spec = ...
local s = ("a"):rep(40)
s:find(("a*"):rep(30) .. "b")
return "extern \"C\" __global__ void k() {}", {entry = "k", threads = 32, smem = 0, persistent = false, ctas_per_sm = 1}

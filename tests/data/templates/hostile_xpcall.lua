-- issue 13: the message handler ran with the count hook off, so it looped forever
local spec = ...
xpcall(function() while true do end end, function() while true do end end)
return "extern \"C\" __global__ void k() {}", {entry = "k", threads = 32, smem = 0, persistent = false, ctas_per_sm = 1}

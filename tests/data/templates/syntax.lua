-- a syntax error on line 3
local spec, arch = ...
local x = = 1
return "x", {}

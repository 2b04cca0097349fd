-- a runtime error on line 4
local spec, arch = ...
local missing = nil
local y = missing.field
return "x", {}

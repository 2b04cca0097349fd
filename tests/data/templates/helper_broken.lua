-- helper with a runtime error on line 3
local t = {}
return t.a.b

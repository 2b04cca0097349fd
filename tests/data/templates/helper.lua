-- counts how many times it ran; include() must run it once per expansion
include_runs = (include_runs or 0) + 1
return {value = 42, runs = function() return include_runs end}

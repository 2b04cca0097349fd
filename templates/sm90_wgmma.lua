-- SPDX-License-Identifier: Apache-2.0
-- templates/sm90_wgmma.lua — the wgmma wrapper both sm90 templates emit:
-- kiln_wgmma(acc, desc_a, desc_b, scale_d) issuing one
-- wgmma.mma_async m64n<bn>k16 with fp32 accumulators in registers.
-- tnsp_a / tnsp_b (0 or 1): the operand is MN-major in shared memory (dgrad's
-- B; both of wgrad's operands).  Returns a function (bn, ity, tnsp_a, tnsp_b,
-- name, ity_b, width): name (default kiln_wgmma) lets a template emit a
-- second shape; width (default bn / 2), the accumulator array it takes,
-- of which the wgmma uses the first bn / 2 (a narrower wgmma into the low
-- columns of a tile's accumulators).  8-bit types (ity e4m3/e5m2, ity_b
-- the B operand's, default ity) give m64n<bn>k32, which has no transpose
-- operands (K-major only).

local fp8 = { e4m3 = true, e5m2 = true }

return function(bn, ity, tnsp_a, tnsp_b, name, ity_b, width)
  local nacc = bn // 2
  local regs, cons = {}, {}
  for i = 0, nacc - 1 do
    regs[#regs + 1] = "%" .. i
    cons[#cons + 1] = string.format('"+f"(d[%d])', i)
  end
  return table.concat({
    "__device__ __forceinline__ void " .. (name or "kiln_wgmma") .. "(float (&d)[" .. (width or nacc) ..
      "], unsigned long long da,",
    "                                           unsigned long long db, int scale_d)",
    "{",
    "    asm volatile(\"{ .reg .pred p;\\n\"",
    string.format("                 \"setp.ne.b32 p, %%%d, 0;\\n\"", nacc + 2),
    string.format("                 \"wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s \"", bn,
                  fp8[ity] and 32 or 16, ity, ity_b or ity),
    "                 \"{" .. table.concat(regs, ", ") .. "}, \"",
    fp8[ity] and string.format("                 \"%%%d, %%%d, p, 1, 1;\\n}\"", nacc, nacc + 1)
      or string.format("                 \"%%%d, %%%d, p, 1, 1, %d, %d;\\n}\"", nacc, nacc + 1,
                       tnsp_a, tnsp_b),
    "                 : " .. table.concat(cons, ", "),
    "                 : \"l\"(da), \"l\"(db), \"r\"(scale_d));",
    "}",
  }, "\n")
end

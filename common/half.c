/* SPDX-License-Identifier: Apache-2.0 */
/* half.c — bf16/fp16/fp8 <-> float by bit manipulation (no libm, no FPU
 * rounding mode dependence), round to nearest even. */
#include <string.h>

#include "half.h"

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t kiln_f32_to_bf16(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float kiln_bf16_to_f32(uint16_t h) { return float_of((uint32_t)h << 16); }

/* Shifts man right by shift (>= 1) rounding to nearest even. */
static uint32_t shift_rne(uint32_t man, uint32_t shift)
{
    uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return h;
}

uint16_t kiln_f32_to_f16(float f)
{
    uint32_t u = bits_of(f);
    uint32_t sign = (u >> 16) & 0x8000u, man = u & 0x7fffffu;
    int32_t fexp = (int32_t)((u >> 23) & 0xff), exp = fexp - 127 + 15;
    if (fexp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) { /* fp16 subnormal (or zero): multiples of 2^-24 */
        if (exp < -10) return (uint16_t)sign;
        return (uint16_t)(sign | shift_rne(man | 0x800000u, (uint32_t)(14 - exp)));
    }
    /* A carry out of the mantissa bumps the exponent, up to infinity: right. */
    return (uint16_t)(sign | shift_rne(((uint32_t)exp << 23) | man, 13));
}

float kiln_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, man = h & 0x3ffu;
    int exp = (h >> 10) & 0x1f;
    if (exp == 31) return float_of(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (!man) return float_of(sign);
        int e = 0; /* normalise the subnormal */
        while (!(man & 0x400u)) {
            man <<= 1;
            e++;
        }
        return float_of(sign | ((uint32_t)(127 - 15 + 1 - e) << 23) | ((man & 0x3ffu) << 13));
    }
    return float_of(sign | ((uint32_t)(exp - 15 + 127) << 23) | (man << 13));
}

/* fp8 with man_bits mantissa bits and exponent bias `bias`; max_pat is the
 * largest finite pattern without its sign (saturation). */
static uint8_t f32_to_fp8(float f, uint32_t man_bits, int32_t bias, uint8_t max_pat)
{
    uint32_t u = bits_of(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint8_t)(sign | 0x7fu); /* NaN in both */
    uint32_t man = u & 0x7fffffu, r;
    int32_t fexp = (int32_t)((u >> 23) & 0xff), exp = fexp - 127 + bias;
    if (fexp == 0xff) return (uint8_t)(sign | max_pat); /* satfinite: ±inf → ±largest */
    if (exp <= 0) { /* fp8 subnormal (or zero): multiples of 2^(1 - bias - man_bits) */
        uint32_t shift = (uint32_t)(23 - (int32_t)man_bits + 1 - exp);
        r = fexp == 0 || shift > 25 ? 0 : shift_rne(man | 0x800000u, shift);
    } else {
        r = shift_rne(((uint32_t)exp << 23) | man, 23 - man_bits);
    }
    return (uint8_t)(sign | (r > max_pat ? max_pat : r));
}

static float fp8_to_f32(uint8_t h, uint32_t man_bits, int32_t bias)
{
    uint32_t sign = (uint32_t)(h & 0x80u) << 24, m = h & ((1u << man_bits) - 1);
    int32_t e = (h & 0x7f) >> man_bits;
    if (e == 0) /* m · 2^(1 - bias - man_bits): exact in float */
        return float_of(sign | bits_of((float)m * float_of((uint32_t)(1 - bias - (int32_t)man_bits + 127) << 23)));
    return float_of(sign | ((uint32_t)(e - bias + 127) << 23) | (m << (23 - man_bits)));
}

uint8_t kiln_f32_to_e4m3(float f) { return f32_to_fp8(f, 3, 7, 0x7e); }

float kiln_e4m3_to_f32(uint8_t h)
{
    if ((h & 0x7f) == 0x7f) return float_of(((uint32_t)(h & 0x80u) << 24) | 0x7fc00000u);
    return fp8_to_f32(h, 3, 7);
}

uint8_t kiln_f32_to_e5m2(float f) { return f32_to_fp8(f, 2, 15, 0x7b); }

float kiln_e5m2_to_f32(uint8_t h)
{
    if ((h & 0x7c) == 0x7c) /* exponent 31: infinity or NaN, as in IEEE */
        return float_of(((uint32_t)(h & 0x80u) << 24) | 0x7f800000u | ((uint32_t)(h & 3u) << 21));
    return fp8_to_f32(h, 2, 15);
}

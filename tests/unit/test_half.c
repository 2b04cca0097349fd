/* SPDX-License-Identifier: Apache-2.0 */
/* test_half.c — common/half.c against a reference built from ldexp, over
 * every one of the 65536 bit patterns of bf16 and of fp16: widening gives
 * the exact value; narrowing gives the pattern back; the midpoint between
 * two neighbours goes to the even one, and one float ulp either side of it
 * to the nearer; past the largest finite value, infinity; NaN stays NaN. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "half.h"

typedef struct fmt {
    const char *name;
    int man_bits, bias;
    uint16_t (*narrow)(float);
    float (*widen)(uint16_t);
} fmt;

static const fmt formats[] = {
    {"bf16", 7, 127, kiln_f32_to_bf16, kiln_bf16_to_f32},
    {"fp16", 10, 15, kiln_f32_to_f16, kiln_f16_to_f32},
};

/* The value of pattern h, from its fields (the reference). */
static double ref_value(const fmt *f, uint32_t h)
{
    int exp_bits = 15 - f->man_bits, emax = (1 << exp_bits) - 1;
    int e = (int)(h >> f->man_bits) & emax;
    uint32_t m = h & ((1u << f->man_bits) - 1);
    double v;
    if (e == emax) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, 1 - f->bias - f->man_bits);
    else v = ldexp((double)(m | (1u << f->man_bits)), e - f->bias - f->man_bits);
    return (h & 0x8000u) ? -v : v;
}

static void check_format(const fmt *f)
{
    const uint16_t inf = (uint16_t)(((1u << (15 - f->man_bits)) - 1) << f->man_bits);
    for (uint32_t h = 0; h < 0x10000u; h++) {
        double v = ref_value(f, h);
        float w = f->widen((uint16_t)h);
        if (isnan(v)) {
            if (!isnan(w)) fail_msg("%s 0x%04x: widened to %g, not NaN", f->name, h, w);
            uint16_t back = f->narrow(w);
            if ((back & 0x7fffu) <= inf) fail_msg("%s 0x%04x: NaN narrowed to 0x%04x", f->name, h, back);
            continue;
        }
        if ((double)w != v || !signbit(w) != !signbit(v))
            fail_msg("%s 0x%04x: widened to %.9g, wanted %.9g", f->name, h, w, v);
        if (f->narrow(w) != h) fail_msg("%s 0x%04x: round trip gave 0x%04x", f->name, h, f->narrow(w));
        if ((h & 0x7fffu) >= inf) continue;
        /* Between h and the next pattern away from zero (infinity after the
         * largest finite value: then the midpoint is where overflow starts). */
        uint32_t up = h + 1;
        double vu = (h & 0x7fffu) + 1 == inf ? ((h & 0x8000u) ? -1 : 1) * ldexp(1.0, f->bias + 1)
                                              : ref_value(f, up);
        float mid = (float)((v + vu) / 2); /* exact: one bit more than the format */
        if ((double)mid != (v + vu) / 2) fail_msg("%s 0x%04x: midpoint not exact", f->name, h);
        uint32_t even = (h & 1u) ? up : h;
        if (f->narrow(mid) != even)
            fail_msg("%s 0x%04x: midpoint %.9g narrowed to 0x%04x, wanted 0x%04x", f->name, h, mid,
                     f->narrow(mid), even);
        float below = nextafterf(mid, (float)v), above = nextafterf(mid, (float)vu * 2);
        if (f->narrow(below) != h)
            fail_msg("%s 0x%04x: %.9g narrowed to 0x%04x, wanted 0x%04x", f->name, h, below,
                     f->narrow(below), h);
        if (f->narrow(above) != up)
            fail_msg("%s 0x%04x: %.9g narrowed to 0x%04x, wanted 0x%04x", f->name, h, above,
                     f->narrow(above), up);
    }
    assert_int_equal(f->narrow(INFINITY), inf);
    assert_int_equal(f->narrow(-INFINITY), inf | 0x8000u);
}

static void test_bf16_every_pattern(void **state)
{
    (void)state;
    check_format(&formats[0]);
}

static void test_fp16_every_pattern(void **state)
{
    (void)state;
    check_format(&formats[1]);
    /* Below half the smallest subnormal: zero, sign kept. */
    assert_int_equal(kiln_f32_to_f16(1e-9f), 0);
    assert_int_equal(kiln_f32_to_f16(-1e-9f), 0x8000);
    assert_int_equal(kiln_f32_to_f16(1.0e5f), 0x7c00);
}

/* fp8: every one of the 256 patterns of e4m3 and e5m2 widens to its value
 * from the fields; narrowing gives it back; midpoints go to the even
 * neighbour, one float ulp either side to the nearer; past the largest
 * finite value (and infinity) saturates; NaN stays NaN. */
typedef struct fmt8 {
    const char *name;
    int man_bits, bias;
    uint8_t max_pat; /* largest finite, no sign */
    uint8_t (*narrow)(float);
    float (*widen)(uint8_t);
} fmt8;

static double ref8(const fmt8 *f, uint32_t h)
{
    int e = (int)((h & 0x7f) >> f->man_bits);
    uint32_t m = h & ((1u << f->man_bits) - 1);
    if ((h & 0x7f) > f->max_pat) return (f->man_bits == 2 && m == 0) ? ((h & 0x80) ? -INFINITY : INFINITY) : NAN;
    double v = e == 0 ? ldexp((double)m, 1 - f->bias - f->man_bits)
                      : ldexp((double)(m | (1u << f->man_bits)), e - f->bias - f->man_bits);
    return (h & 0x80u) ? -v : v;
}

static void check_fp8(const fmt8 *f)
{
    for (uint32_t h = 0; h < 256; h++) {
        double v = ref8(f, h);
        float w = f->widen((uint8_t)h);
        if (isnan(v)) {
            if (!isnan(w)) fail_msg("%s 0x%02x: widened to %g, not NaN", f->name, h, w);
            if ((f->narrow(w) & 0x7f) <= f->max_pat) fail_msg("%s 0x%02x: NaN narrowed to 0x%02x", f->name, h, f->narrow(w));
            continue;
        }
        if (isinf(v)) {
            if (w != (float)v) fail_msg("%s 0x%02x: widened to %g, not %g", f->name, h, w, v);
            if (f->narrow(w) != ((h & 0x80) | f->max_pat)) fail_msg("%s 0x%02x: infinity did not saturate", f->name, h);
            continue;
        }
        if ((double)w != v || !signbit(w) != !signbit(v))
            fail_msg("%s 0x%02x: widened to %.9g, wanted %.9g", f->name, h, w, v);
        if (f->narrow(w) != h) fail_msg("%s 0x%02x: round trip gave 0x%02x", f->name, h, f->narrow(w));
        if ((h & 0x7f) == f->max_pat) {
            /* past the largest finite value: saturate */
            if (f->narrow((float)(v * 1.5)) != h || f->narrow((float)(v * 1e6)) != h)
                fail_msg("%s 0x%02x: no saturation above %g", f->name, h, v);
            continue;
        }
        double vu = ref8(f, h + 1);
        float mid = (float)((v + vu) / 2);
        uint32_t even = (h & 1u) ? h + 1 : h;
        if (f->narrow(mid) != even)
            fail_msg("%s 0x%02x: midpoint %.9g narrowed to 0x%02x, wanted 0x%02x", f->name, h, mid, f->narrow(mid), even);
        if (f->narrow(nextafterf(mid, (float)v)) != h) fail_msg("%s 0x%02x: below midpoint", f->name, h);
        if (f->narrow(nextafterf(mid, (float)vu * 2)) != h + 1) fail_msg("%s 0x%02x: above midpoint", f->name, h);
    }
}

static void test_fp8_every_pattern(void **state)
{
    (void)state;
    static const fmt8 e4m3 = {"e4m3", 3, 7, 0x7e, kiln_f32_to_e4m3, kiln_e4m3_to_f32};
    static const fmt8 e5m2 = {"e5m2", 2, 15, 0x7b, kiln_f32_to_e5m2, kiln_e5m2_to_f32};
    check_fp8(&e4m3);
    check_fp8(&e5m2);
    assert_true(kiln_e4m3_to_f32(0x7e) == 448.0f);
    assert_true(kiln_e5m2_to_f32(0x7b) == 57344.0f);
}

KILN_TEST_MAIN(cmocka_unit_test(test_fp8_every_pattern),
    cmocka_unit_test(test_bf16_every_pattern),
    cmocka_unit_test(test_fp16_every_pattern))

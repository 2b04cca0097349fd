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

KILN_TEST_MAIN(
    cmocka_unit_test(test_bf16_every_pattern),
    cmocka_unit_test(test_fp16_every_pattern))

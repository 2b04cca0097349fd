/* SPDX-License-Identifier: Apache-2.0 */
/* test_tune_fp8_ref.c — the host fp8 reference of `kiln tune`'s GPU timer
 * (kiln_tune_fp8_reference, cli/tuner.c) against a plain per-element sum
 * written from kiln.h's recipe definitions: every recipe, sizes off every
 * block (n_out 320, k_red 400), an empty group, rows past Σm, input chunks
 * shorter than a row (the timer repeats a host chunk over each buffer), the
 * whole epilogue.  The timer's correctness check rests on it, and it only
 * runs for real on a GPU machine: a wrong index here would mark every fp8
 * variant wrong there.
 *
 * The tuner is part of the kiln binary, not of a library the tests link
 * (cli/CMakeLists.txt), so this test compiles it in. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "../../cli/tuner.c"

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static uint64_t next(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* n random values of t (8-bit: any finite byte; f32: in [0.5, 1.5)). */
static void *random_chunk(kiln_dtype t, size_t n)
{
    void *p = malloc(n * (size_t)kiln_dtype_size(t));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        if (t == KILN_DTYPE_E4M3) {
            uint8_t b;
            do b = (uint8_t)next(); while ((b & 0x7f) == 0x7f); /* not NaN */
            ((uint8_t *)p)[i] = b;
        } else if (t == KILN_DTYPE_F32) {
            ((float *)p)[i] = 0.5f + (float)(next() % 1024) / 1024.0f;
        } else { /* bf16 */
            ((uint16_t *)p)[i] = kiln_f32_to_bf16((float)((int)(next() % 511) - 255) / 256.0f);
        }
    }
    return p;
}

static double at(const kiln_tune_chunk *c, int64_t i)
{
    size_t j = (size_t)i % c->n;
    if (c->type == KILN_DTYPE_E4M3) return kiln_e4m3_to_f32(((const uint8_t *)c->data)[j]);
    if (c->type == KILN_DTYPE_F32) return ((const float *)c->data)[j];
    return kiln_bf16_to_f32(((const uint16_t *)c->data)[j]);
}

/* kiln.h's definition, element by element, in double. */
static double plain(const kiln_tune_fp8_call *f, int64_t r, int64_t col)
{
    int64_t start = 0;
    int g = 0;
    for (; g < f->groups; g++) {
        int64_t m = f->sizes[g] > 0 ? f->sizes[g] : 0;
        if (r < start + m) break;
        start += m;
    }
    if (g == f->groups) return 0; /* past Σm */
    const int64_t nkb = (f->k_red + 127) / 128, nbn = (f->n_out + 127) / 128;
    double sum = 0;
    for (int64_t k = 0; k < f->k_red; k++) {
        double x = at(&f->a, r * f->k_red + k) * at(&f->b, ((int64_t)g * f->n_out + col) * f->k_red + k);
        double s;
        if (f->recipe == KILN_FP8_TENSOR) s = at(&f->scale_a, 0) * at(&f->scale_b, g);
        else if (f->recipe == KILN_FP8_ROW) s = at(&f->scale_a, r) * at(&f->scale_b, g * f->n_out + col);
        else s = at(&f->scale_a, (k / 128) * f->capacity + r) *
                 at(&f->scale_b, ((int64_t)g * nbn + col / 128) * nkb + k / 128);
        sum += s * x;
    }
    double rs = f->row_scale.data ? at(&f->row_scale, r) : 1;
    double y = rs * (f->alpha.data ? at(&f->alpha, g) : 1) * sum;
    if (f->bias.data) y += (f->scale_bias && f->row_scale.data ? rs : 1) * at(&f->bias, g * f->n_out + col);
    if (f->c.data) y += f->beta * at(&f->c, r * f->n_out + col);
    return y;
}

static void check_recipe(kiln_fp8_recipe recipe, int epilogue)
{
    static const int32_t sizes[5] = {3, 0, 7, 1, 5}; /* Σ 16 of capacity 20 */
    kiln_tune_fp8_call f = {.recipe = recipe, .groups = 5, .capacity = 20, .n_out = 320,
                            .k_red = 400, .sizes = sizes, .beta = 0.5f, .scale_bias = 1};
    /* Chunks shorter than what they stand for, and not multiples of a row. */
    void *mem[8];
    int n_mem = 0;
#define CHUNK(field, t, n) (f.field = (kiln_tune_chunk){mem[n_mem++] = random_chunk(t, n), n, t})
    CHUNK(a, KILN_DTYPE_E4M3, 1000);
    CHUNK(b, KILN_DTYPE_E4M3, 70001);
    CHUNK(scale_a, KILN_DTYPE_F32, 37);
    CHUNK(scale_b, KILN_DTYPE_F32, 1001);
    if (epilogue) {
        CHUNK(bias, KILN_DTYPE_BF16, 999);
        CHUNK(row_scale, KILN_DTYPE_F32, 13);
        CHUNK(alpha, KILN_DTYPE_F32, 5);
        CHUNK(c, KILN_DTYPE_BF16, 3001);
    }
#undef CHUNK
    int64_t rows[] = {0, 2, 3, 4, 9, 10, 11, 15, 16, 19}, cols[] = {0, 1, 127, 128, 200, 255, 256, 319};
    size_t nr = sizeof rows / sizeof rows[0], nc = sizeof cols / sizeof cols[0];
    double ref[10 * 8], mag[10 * 8];
    kiln_error err;
    kiln_error_clear(&err);
    assert_int_equal(kiln_tune_fp8_reference(&f, rows, nr, cols, nc, ref, mag, &err), KILN_OK);
    for (size_t i = 0; i < nr; i++)
        for (size_t j = 0; j < nc; j++) {
            double want = plain(&f, rows[i], cols[j]), got = ref[i * nc + j], m = mag[i * nc + j];
            /* float sums of 128 products: exact to ~2^-24 of their magnitude */
            if (fabs(got - want) > 1e-6 * (m + fabs(want)) + 1e-30)
                fail_msg("recipe %d epilogue %d row %lld col %lld: %.9g, want %.9g", (int)recipe,
                         epilogue, (long long)rows[i], (long long)cols[j], got, want);
            if (rows[i] >= 16) assert_true(got == 0 && m == 0);
            else if (!epilogue) assert_true(m >= fabs(got) && m > 0);
        }
    while (n_mem) free(mem[--n_mem]);
}

static void test_recipes(void **state)
{
    (void)state;
    for (int r = KILN_FP8_TENSOR; r <= KILN_FP8_BLOCK; r++)
        for (int e = 0; e < 2; e++) check_recipe((kiln_fp8_recipe)r, e);
}

KILN_TEST_MAIN(cmocka_unit_test(test_recipes))

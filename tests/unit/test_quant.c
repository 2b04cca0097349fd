/* SPDX-License-Identifier: Apache-2.0 */
/* test_quant.c — kiln_quantize's checks (runtime/quant.c) on the CPU: every
 * bad field of a kiln_quant is KILN_ERROR_INVALID_ARGUMENT with a message
 * naming it, through kiln_validate_quant and through kiln_quantize itself,
 * which checks before it needs the driver.  Fake, well-aligned addresses
 * stand in for device pointers: nothing is read or launched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "quant.h"

#define FAKE(addr) ((void *)(uintptr_t)(addr))

static void base(kiln_quant *q, kiln_quant_kind kind)
{
    kiln_quant_init(q, kind);
    q->cols = 272;
    q->d_in = FAKE(0x100000);
    q->d_out = FAKE(0x200000);
    q->d_scale = FAKE(0x300000);
    if (kind == KILN_QUANT_ROWS || kind == KILN_QUANT_ROWS_1X128) {
        q->rows = 1000;
        q->groups = 8;
        q->d_sizes = FAKE(0x400000);
    } else {
        q->rows = 208;
        q->groups = 3;
        q->d_out_t = FAKE(0x500000);
        if (kind == KILN_QUANT_WEIGHTS_TENSOR_DELAYED) q->d_amax = FAKE(0x700000);
        else q->d_scale_t = FAKE(0x600000);
    }
}

static void expect_bad(const kiln_quant *q, const char *needle)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln_validate_quant(q, &err);
    if (st != KILN_ERROR_INVALID_ARGUMENT || !strstr(err.msg, needle))
        fail_msg("expected INVALID_ARGUMENT containing '%s', got %d '%s'", needle, (int)st, err.msg);
}

static void expect_ok(const kiln_quant *q)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln_validate_quant(q, &err);
    if (st != KILN_OK) fail_msg("expected OK, got %d '%s'", (int)st, err.msg);
}

static void test_init(void **state)
{
    (void)state;
    kiln_quant q;
    memset(&q, 0x5a, sizeof q);
    kiln_quant_init(&q, KILN_QUANT_WEIGHTS_TENSOR);
    assert_int_equal(q.struct_size, sizeof q);
    assert_int_equal(q.kind, KILN_QUANT_WEIGHTS_TENSOR);
    assert_int_equal(q.in_type, KILN_DTYPE_BF16);
    assert_int_equal(q.out_type, KILN_DTYPE_E4M3);
    assert_null(q.d_in);
    assert_null(q.d_out_t);
    assert_int_equal(q.ld_scale, 0);
    kiln_quant_init(NULL, KILN_QUANT_ROWS); /* no crash */
}

static void test_valid(void **state)
{
    (void)state;
    kiln_quant q;
    for (int k = 0; k <= KILN_QUANT_WEIGHTS_TENSOR_DELAYED; k++) {
        base(&q, (kiln_quant_kind)k);
        expect_ok(&q);
    }
    base(&q, KILN_QUANT_ROWS);
    q.d_sizes = NULL;
    q.groups = 0; /* all rows */
    q.in_type = KILN_DTYPE_F16;
    q.out_type = KILN_DTYPE_E5M2;
    q.ld_in = 280;
    q.ld_out = 288;
    expect_ok(&q);
    q.rows = 0; /* no capacity: nothing to do, not an error */
    expect_ok(&q);
    base(&q, KILN_QUANT_ROWS_1X128);
    q.ld_scale = 1004;
    q.sizes_kind = KILN_SIZES_OFFSETS;
    expect_ok(&q);
    base(&q, KILN_QUANT_WEIGHTS_128X128);
    q.d_out_t = NULL;
    q.d_scale_t = NULL;
    q.rows = 200; /* any N without the transposed copy */
    expect_ok(&q);
    base(&q, KILN_QUANT_WEIGHTS_TENSOR_DELAYED);
    q.d_out_t = NULL; /* q only */
    q.rows = 200;
    expect_ok(&q);
}

/* One mutation of a valid kiln_quant of `kind` and the words its message
 * must hold. */
typedef struct bad_case {
    kiln_quant_kind kind;
    void (*mutate)(kiln_quant *q);
    const char *needle;
} bad_case;

#define MUT(name, body)                                                                            \
    static void name(kiln_quant *q) { body; }
MUT(m_size, q->struct_size -= 8)
MUT(m_kind, q->kind = (kiln_quant_kind)7)
MUT(m_sizes_kind, q->sizes_kind = (kiln_sizes_kind)5)
MUT(m_in_enum, q->in_type = (kiln_dtype)9)
MUT(m_out_enum, q->out_type = (kiln_dtype)-1)
MUT(m_in_f32, q->in_type = KILN_DTYPE_F32)
MUT(m_in_fp8, q->in_type = KILN_DTYPE_E4M3)
MUT(m_out_bf16, q->out_type = KILN_DTYPE_BF16)
MUT(m_cols0, q->cols = 0)
MUT(m_cols8, q->cols = 264)
MUT(m_cols_big, q->cols = (int64_t)1 << 32)
MUT(m_rows_neg, q->rows = -1)
MUT(m_rows0, q->rows = 0)
MUT(m_rows_big, q->rows = (int64_t)1 << 31)
MUT(m_groups0, q->groups = 0)
MUT(m_groups_big, q->groups = KILN_MAX_GROUPS + 1)
MUT(m_huge, { q->groups = KILN_MAX_GROUPS; q->rows = INT32_MAX - 15; q->cols = 1 << 30; })
MUT(m_in_null, q->d_in = NULL)
MUT(m_in_align, q->d_in = FAKE(0x100008))
MUT(m_ld_in_neg, q->ld_in = -8)
MUT(m_ld_in_small, q->ld_in = 256)
MUT(m_ld_in_odd, q->ld_in = 276)
MUT(m_out_null, q->d_out = NULL)
MUT(m_out_align, q->d_out = FAKE(0x200004))
MUT(m_ld_out_odd, q->ld_out = 280)
MUT(m_scale_null, q->d_scale = NULL)
MUT(m_scale_align, q->d_scale = FAKE(0x300002))
MUT(m_sizes_align, q->d_sizes = FAKE(0x400002))
MUT(m_sizes_groups0, q->groups = 0)
MUT(m_no_sizes_groups, q->d_sizes = NULL)
MUT(m_rows_out_t, q->d_out_t = FAKE(0x500000))
MUT(m_rows_scale_t, q->d_scale_t = FAKE(0x600000))
MUT(m_rows_ld_scale, q->ld_scale = 1000)
MUT(m_ld_scale_neg, q->ld_scale = -1)
MUT(m_ld_scale_small, q->ld_scale = 999)
MUT(m_w_sizes, q->d_sizes = FAKE(0x400000))
MUT(m_w_ld_scale, q->ld_scale = 4)
MUT(m_out_t_no_scale_t, q->d_scale_t = NULL)
MUT(m_scale_t_no_out_t, q->d_out_t = NULL)
MUT(m_out_t_align, q->d_out_t = FAKE(0x500008))
MUT(m_scale_t_align, q->d_scale_t = FAKE(0x600001))
MUT(m_out_t_rows, q->rows = 200)
MUT(m_amax_other, q->d_amax = FAKE(0x700000))
MUT(m_amax_null, q->d_amax = NULL)
MUT(m_amax_align, q->d_amax = FAKE(0x700002))
MUT(m_amax_is_scale, q->d_amax = q->d_scale)
MUT(m_delayed_scale_t, q->d_scale_t = FAKE(0x600000))

static const bad_case k_bad[] = {
    {KILN_QUANT_ROWS, m_size, "kiln_quant.struct_size"},
    {KILN_QUANT_ROWS, m_kind, "q->kind = 7"},
    {KILN_QUANT_ROWS, m_sizes_kind, "q->sizes_kind = 5"},
    {KILN_QUANT_ROWS, m_in_enum, "q->in_type = 9 is not a kiln_dtype"},
    {KILN_QUANT_ROWS, m_out_enum, "q->out_type = -1 is not a kiln_dtype"},
    {KILN_QUANT_ROWS, m_in_f32, "q->in_type f32 is not supported"},
    {KILN_QUANT_ROWS_1X128, m_in_fp8, "q->in_type e4m3 is not supported"},
    {KILN_QUANT_WEIGHTS_128X128, m_out_bf16, "q->out_type bf16 is not supported"},
    {KILN_QUANT_ROWS, m_cols0, "q->cols = 0 must be positive"},
    {KILN_QUANT_ROWS_1X128, m_cols8, "q->cols = 264 is not a multiple of 16"},
    {KILN_QUANT_WEIGHTS_TENSOR, m_cols8, "q->cols = 264 is not a multiple of 16"},
    {KILN_QUANT_ROWS, m_cols_big, "q->cols = 4294967296 exceeds"},
    {KILN_QUANT_ROWS, m_rows_neg, "q->rows = -1 (the capacity) is negative"},
    {KILN_QUANT_WEIGHTS_128X128, m_rows0, "q->rows = 0 (N, a group's rows) must be positive"},
    {KILN_QUANT_ROWS_1X128, m_rows_big, "q->rows = 2147483648 exceeds"},
    {KILN_QUANT_WEIGHTS_128X128, m_groups0, "q->groups = 0 is out of range"},
    {KILN_QUANT_WEIGHTS_TENSOR, m_groups_big, "q->groups = 65537 is out of range"},
    {KILN_QUANT_WEIGHTS_TENSOR, m_huge, "exceeds 2^62 bytes"},
    {KILN_QUANT_ROWS, m_in_null, "q->d_in is NULL"},
    {KILN_QUANT_WEIGHTS_128X128, m_in_align, "q->d_in (0x100008) is not 16-byte aligned"},
    {KILN_QUANT_ROWS, m_ld_in_neg, "q->ld_in is negative"},
    {KILN_QUANT_ROWS, m_ld_in_small, "q->ld_in = 256 is smaller than the row"},
    {KILN_QUANT_WEIGHTS_TENSOR, m_ld_in_odd, "q->ld_in = 276 is not a multiple of 8"},
    {KILN_QUANT_ROWS_1X128, m_out_null, "q->d_out is NULL"},
    {KILN_QUANT_ROWS, m_out_align, "q->d_out (0x200004) is not 16-byte aligned"},
    {KILN_QUANT_WEIGHTS_128X128, m_ld_out_odd, "q->ld_out = 280 is not a multiple of 16"},
    {KILN_QUANT_ROWS, m_scale_null, "q->d_scale is NULL"},
    {KILN_QUANT_WEIGHTS_TENSOR, m_scale_align, "q->d_scale (0x300002) is not 4-byte aligned"},
    {KILN_QUANT_ROWS, m_sizes_align, "q->d_sizes (0x400002) is not 4-byte aligned"},
    {KILN_QUANT_ROWS_1X128, m_sizes_groups0, "q->groups = 0 is out of range (1 .. 65536 entries"},
    {KILN_QUANT_ROWS, m_groups_big, "q->groups = 65537 is out of range"},
    {KILN_QUANT_ROWS, m_no_sizes_groups, "q->groups = 8 is set, but q->d_sizes is NULL"},
    {KILN_QUANT_ROWS, m_rows_out_t, "q->d_out_t is set, but KILN_QUANT_ROWS has no transposed"},
    {KILN_QUANT_ROWS_1X128, m_rows_scale_t,
     "q->d_scale_t is set, but KILN_QUANT_ROWS_1X128 has no transposed"},
    {KILN_QUANT_ROWS, m_rows_ld_scale, "q->ld_scale = 1000 is set, but KILN_QUANT_ROWS"},
    {KILN_QUANT_ROWS_1X128, m_ld_scale_neg, "q->ld_scale is negative"},
    {KILN_QUANT_ROWS_1X128, m_ld_scale_small, "q->ld_scale = 999 is smaller than the capacity"},
    {KILN_QUANT_WEIGHTS_128X128, m_w_sizes, "q->d_sizes is set, but KILN_QUANT_WEIGHTS_128X128"},
    {KILN_QUANT_WEIGHTS_TENSOR, m_w_ld_scale, "q->ld_scale = 4 is set, but KILN_QUANT_WEIGHTS_TENSOR"},
    {KILN_QUANT_WEIGHTS_128X128, m_out_t_no_scale_t, "q->d_out_t is set, but q->d_scale_t is NULL"},
    {KILN_QUANT_WEIGHTS_TENSOR, m_scale_t_no_out_t, "q->d_scale_t is set, but q->d_out_t is NULL"},
    {KILN_QUANT_WEIGHTS_128X128, m_out_t_align, "q->d_out_t (0x500008) is not 16-byte aligned"},
    {KILN_QUANT_WEIGHTS_TENSOR, m_scale_t_align, "q->d_scale_t (0x600001) is not 4-byte aligned"},
    {KILN_QUANT_WEIGHTS_128X128, m_out_t_rows, "q->rows = 200 is not a multiple of 16, but q->d_out_t"},
    {KILN_QUANT_ROWS, m_amax_other, "q->d_amax is set, but KILN_QUANT_ROWS finds its scales"},
    {KILN_QUANT_WEIGHTS_TENSOR, m_amax_other, "q->d_amax is set, but KILN_QUANT_WEIGHTS_TENSOR "},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_amax_null, "q->d_amax is NULL"},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_amax_align, "q->d_amax (0x700002) is not 4-byte aligned"},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_amax_is_scale, "q->d_amax is q->d_scale"},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_delayed_scale_t,
     "q->d_scale_t is set, but KILN_QUANT_WEIGHTS_TENSOR_DELAYED writes no scales"},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_scale_null, "q->d_scale is NULL"},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_scale_align, "q->d_scale (0x300002) is not 4-byte aligned"},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_out_t_align, "q->d_out_t (0x500008) is not 16-byte aligned"},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_out_t_rows, "q->rows = 200 is not a multiple of 16, but q->d_out_t"},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_w_sizes, "q->d_sizes is set, but KILN_QUANT_WEIGHTS_TENSOR_DELAYED"},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_w_ld_scale, "q->ld_scale = 4 is set"},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_groups0, "q->groups = 0 is out of range"},
    {KILN_QUANT_WEIGHTS_TENSOR_DELAYED, m_in_null, "q->d_in is NULL"},
};

static void test_bad_fields(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        kiln_quant q;
        base(&q, k_bad[i].kind);
        k_bad[i].mutate(&q);
        expect_bad(&q, k_bad[i].needle);
    }
    expect_bad(NULL, "q is NULL");
}

/* Through the public call: a bad field is refused before the driver is
 * needed (here there is none, so the context's creation failed and a good
 * call ends at the driver).  On a machine with a GPU the context works,
 * and the good call with fake pointers is not made. */
static void test_public_call(void **state)
{
    (void)state;
    assert_int_equal(kiln_quantize(NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_context *ctx = NULL;
    kiln_status created = kiln_context_create(NULL, &ctx);
    assert_non_null(ctx);
    kiln_quant q;
    base(&q, KILN_QUANT_ROWS_1X128);
    q.cols = 100;
    assert_int_equal(kiln_quantize(ctx, &q, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_last_error(ctx), "q->cols = 100 is not a multiple of 16"));
    assert_int_equal(kiln_quantize(ctx, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(kiln_last_error(ctx), "q is NULL");
    if (created != KILN_OK) {
        base(&q, KILN_QUANT_ROWS_1X128);
        assert_int_equal(kiln_quantize(ctx, &q, NULL), KILN_ERROR_DRIVER);
        assert_non_null(strstr(kiln_last_error(ctx), "no CUDA device"));
    }
    kiln_context_destroy(ctx);
}

KILN_TEST_MAIN(
    cmocka_unit_test(test_init),
    cmocka_unit_test(test_valid),
    cmocka_unit_test(test_bad_fields),
    cmocka_unit_test(test_public_call))

/* SPDX-License-Identifier: Apache-2.0 */
/* test_validate.c — the pure parts of the runtime, on the CPU: the contract
 * checks of kiln_gemm (runtime/problem.c), the struct_size checks of the
 * public structs, and the backend cascade (runtime/dispatch.c), tuned step
 * included.  None reads device memory, so fake, well-aligned addresses
 * stand in for device pointers.  Linked against the runtime, through its
 * internal headers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "checked.h"
#include "cublaslt.h"
#include "dispatch.h"
#include "env.h"
#include "kernels.h"
#include "problem.h"
#include "tuning.h"

#define FAKE(addr) ((void *)(uintptr_t)(addr))

static void base_problem(kiln_problem *p, kiln_op op)
{
    kiln_problem_init(p, op);
    p->groups = 4;
    p->n = 64;
    p->k = 32;
    p->capacity = 100;
    p->d_sizes = FAKE(0x100000);
    p->d_a = FAKE(0x200000);
    p->d_b = FAKE(0x300000);
    p->d_out = FAKE(0x400000);
}

/* Validates p, expecting failure with a message containing `needle`. */
static void expect_bad(const kiln_problem *p, const char *needle)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln_validate_problem(p, &err);
    if (st != KILN_ERROR_INVALID_ARGUMENT || !strstr(err.msg, needle))
        fail_msg("expected INVALID_ARGUMENT containing '%s', got %d '%s'", needle, (int)st, err.msg);
}

static void expect_ok(const kiln_problem *p)
{
    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st = kiln_validate_problem(p, &err);
    if (st != KILN_OK) fail_msg("expected OK, got %d '%s'", (int)st, err.msg);
}

/* One case a line: a fresh problem from `make`, then the edits (assignments
 * to p, comma-separated), then expect_bad.  p is the caller's kiln_problem,
 * left edited for any check after it. */
#define expect_bad_after(p, make, needle, ...)                                                     \
    do {                                                                                           \
        make;                                                                                      \
        __VA_ARGS__;                                                                               \
        expect_bad(&(p), (needle));                                                                \
    } while (0)
/* The same on base_problem(op), and on fp8_problem(op, KILN_FP8_ROW). */
#define expect_bad_edit(p, op, needle, ...)                                                        \
    expect_bad_after(p, base_problem(&(p), (op)), needle, __VA_ARGS__)
#define expect_bad_fp8_edit(p, op, needle, ...)                                                    \
    expect_bad_after(p, fp8_problem(&(p), (op), KILN_FP8_ROW), needle, __VA_ARGS__)

static void test_valid_problems(void **state)
{
    (void)state;
    kiln_problem p;
    for (int op = 0; op < 3; op++) {
        base_problem(&p, (kiln_op)op);
        expect_ok(&p);
    }
    base_problem(&p, KILN_OP_WGRAD);
    p.wgrad_output = KILN_WGRAD_DISCRETE;
    p.d_out = NULL;
    p.d_out_ptrs = FAKE(0x500000);
    p.out_type = KILN_DTYPE_F32;
    p.accumulate = 1;
    expect_ok(&p);

    base_problem(&p, KILN_OP_FPROP);
    p.d_b = NULL;
    p.d_b_ptrs = FAKE(0x600008);
    p.epilogue.d_bias = FAKE(0x700000);
    p.epilogue.d_row_scale = FAKE(0x800004);
    p.epilogue.d_alpha = FAKE(0x900004);
    p.epilogue.beta = 0.5f;
    p.epilogue.d_c = FAKE(0xa00000);
    p.lda = 40; /* >= K = 32, multiple of 8 */
    p.ldd = 72;
    int32_t hs[4] = {10, 0, 50, 40};
    p.host_sizes = hs;
    expect_ok(&p);
    p.sizes_kind = KILN_SIZES_OFFSETS;
    int32_t ho[4] = {10, 10, 60, 100};
    p.host_sizes = ho;
    expect_ok(&p);
}

static void test_null_pointers(void **state)
{
    (void)state;
    kiln_problem p;
    kiln_error err;
    assert_int_equal(kiln_validate_problem(NULL, &err), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "problem is NULL"));
    expect_bad_edit(p, KILN_OP_FPROP, "problem->d_a is NULL", p.d_a = NULL);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->d_b is NULL", p.d_b = NULL);
    expect_bad_edit(p, KILN_OP_DGRAD, "problem->d_out is NULL", p.d_out = NULL);
    expect_bad_edit(p, KILN_OP_WGRAD, "problem->d_sizes is NULL", p.d_sizes = NULL);
    expect_bad_edit(p, KILN_OP_WGRAD, "problem->d_out_ptrs is NULL",
                    p.wgrad_output = KILN_WGRAD_DISCRETE, p.d_out = NULL);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->epilogue.d_c is NULL", p.epilogue.beta = 1.0f);
}

static void test_alignment(void **state)
{
    (void)state;
    kiln_problem p;
    expect_bad_edit(p, KILN_OP_FPROP, "problem->d_a (", p.d_a = FAKE(0x200002));
    expect_bad(&p, "16-byte aligned");
    expect_bad_edit(p, KILN_OP_DGRAD, "problem->d_b (", p.d_b = FAKE(0x300008));
    expect_bad_edit(p, KILN_OP_FPROP, "problem->d_out (", p.d_out = FAKE(0x400004));
    expect_bad_edit(p, KILN_OP_FPROP, "problem->d_sizes (", p.d_sizes = FAKE(0x100002));
    expect_bad_edit(p, KILN_OP_FPROP, "problem->d_b_ptrs (",
                    p.d_b = NULL, p.d_b_ptrs = FAKE(0x600004));
    expect_bad_edit(p, KILN_OP_FPROP, "problem->epilogue.d_bias (",
                    p.epilogue.d_bias = FAKE(0x700002));
}

static void test_shapes(void **state)
{
    (void)state;
    kiln_problem p;
    expect_bad_edit(p, KILN_OP_FPROP, "problem->groups = 0 is out of range", p.groups = 0);
    p.groups = KILN_MAX_GROUPS + 1;
    expect_bad(&p, "problem->groups = 65537 is out of range");
    p.groups = KILN_MAX_GROUPS;
    expect_ok(&p);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->n = 60 is not a multiple of 8", p.n = 60);
    expect_bad_edit(p, KILN_OP_WGRAD, "problem->k = 12 is not a multiple of 8", p.k = 12);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->n = -8 must be positive", p.n = -8);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->capacity = -1 is negative", p.capacity = -1);
    base_problem(&p, KILN_OP_FPROP);
    p.n = 8;
    p.k = 8;
    expect_ok(&p); /* the minimum alignment */
}

static void test_leading_dims(void **state)
{
    (void)state;
    kiln_problem p;
    /* fprop: A = X [cap, K=32] */
    expect_bad_edit(p, KILN_OP_FPROP, "problem->lda = 24 is smaller than the row (K = 32)",
                    p.lda = 24);
    p.lda = 36;
    expect_bad(&p, "problem->lda = 36 is not a multiple of 8");
    /* dgrad: A = dY [cap, N=64] */
    expect_bad_edit(p, KILN_OP_DGRAD, "problem->lda = 32 is smaller than the row (N = 64)",
                    p.lda = 32);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->ldb = 16 is smaller than the row (K = 32)",
                    p.ldb = 16);
    /* fprop: D = Y [cap, N=64] */
    expect_bad_edit(p, KILN_OP_FPROP, "problem->ldd = 32 is smaller than the row (N = 64)",
                    p.ldd = 32);
    base_problem(&p, KILN_OP_FPROP);
    p.out_type = KILN_DTYPE_F32;
    p.ldd = 68; /* f32 rows: multiples of 4 are 16-byte aligned */
    expect_ok(&p);
    p.ldd = 66;
    expect_bad(&p, "problem->ldd = 66 is not a multiple of 4");
    expect_bad_edit(p, KILN_OP_FPROP, "problem->lda is negative", p.lda = -8);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->epilogue.ldc = 8 is smaller than the row",
                    p.epilogue.beta = 1.0f, p.epilogue.d_c = FAKE(0xa00000), p.epilogue.ldc = 8);
}

/* An fp8 problem that validates: row-wise scales; dgrad reads fp8.d_bt. */
static void fp8_problem(kiln_problem *p, kiln_op op, kiln_fp8_recipe recipe)
{
    base_problem(p, op);
    p->a_type = p->b_type = KILN_DTYPE_E4M3;
    p->fp8.recipe = recipe;
    p->fp8.d_scale_a = FAKE(0x500000);
    p->fp8.d_scale_b = FAKE(0x600000);
    if (op == KILN_OP_DGRAD) p->fp8.d_bt = FAKE(0x700000);
}

/* Every fp8 field is named when it is missing, misplaced or misaligned. */
static void test_fp8(void **state)
{
    (void)state;
    kiln_problem p;
    for (int r = KILN_FP8_TENSOR; r <= KILN_FP8_BLOCK; r++) {
        fp8_problem(&p, KILN_OP_FPROP, (kiln_fp8_recipe)r);
        expect_ok(&p);
        fp8_problem(&p, KILN_OP_DGRAD, (kiln_fp8_recipe)r);
        expect_ok(&p);
    }
    fp8_problem(&p, KILN_OP_DGRAD, KILN_FP8_ROW);
    p.b_type = KILN_DTYPE_E5M2; /* e4m3 x e5m2 is a wgmma product */
    expect_ok(&p);
    p.d_b = NULL; /* dgrad reads only the transposed copy */
    expect_ok(&p);
    p.fp8.d_bt = NULL;
    expect_bad(&p, "problem->fp8.d_bt is NULL");
    expect_bad_fp8_edit(p, KILN_OP_DGRAD, "problem->fp8.d_bt (0x700008) is not 16-byte aligned",
                        p.fp8.d_bt = FAKE(0x700008));
    /* rows of d_bt hold N = 64 */
    expect_bad_fp8_edit(p, KILN_OP_DGRAD,
                        "problem->ldb = 48 is smaller than the row (N, the rows of fp8.d_bt = 64)",
                        p.ldb = 48);
    expect_bad_fp8_edit(p, KILN_OP_FPROP, "problem->fp8.d_bt is set, but op is fprop",
                        p.fp8.d_bt = FAKE(0x700000));
    expect_bad_fp8_edit(p, KILN_OP_FPROP, "problem->fp8.d_scale_a is NULL",
                        p.fp8.d_scale_a = NULL);
    expect_bad_fp8_edit(p, KILN_OP_FPROP,
                        "problem->fp8.d_scale_b (0x600004) is not 16-byte aligned",
                        p.fp8.d_scale_b = FAKE(0x600004));
    fp8_problem(&p, KILN_OP_FPROP, KILN_FP8_TENSOR);
    p.fp8.d_scale_b = FAKE(0x600004); /* scalar reads: 4-byte alignment is enough */
    expect_ok(&p);
    p.fp8.ld_scale_a = 128;
    expect_bad(&p, "problem->fp8.ld_scale_a = 128 is set, but only the block recipe reads it");
    fp8_problem(&p, KILN_OP_FPROP, KILN_FP8_BLOCK);
    p.fp8.ld_scale_a = 99;
    expect_bad(&p, "problem->fp8.ld_scale_a = 99 is smaller than problem->capacity = 100");
    p.fp8.ld_scale_a = 128;
    expect_ok(&p);
    expect_bad_fp8_edit(p, KILN_OP_FPROP, "problem->fp8.recipe = 7 is not a kiln_fp8_recipe",
                        p.fp8.recipe = (kiln_fp8_recipe)7);
    /* 16-byte rows need multiples of 16 one-byte elements */
    expect_bad_fp8_edit(p, KILN_OP_FPROP,
                        "problem->k = 40 is not a multiple of 16 (16-byte rows for e4m3)",
                        p.k = 40);
    expect_bad_fp8_edit(p, KILN_OP_FPROP, "fp8 weights must be one contiguous tensor",
                        p.d_b = NULL, p.d_b_ptrs = FAKE(0x800000));
    expect_bad_fp8_edit(p, KILN_OP_WGRAD, "fp8 wgrad is not built", p.out_type = KILN_DTYPE_F32);
    /* fp8 fields on 16-bit problems */
    expect_bad_edit(p, KILN_OP_FPROP, "problem->fp8.recipe is set, but the inputs are bf16",
                    p.fp8.recipe = KILN_FP8_ROW);
    expect_bad_edit(p, KILN_OP_DGRAD, "problem->fp8 has d_bt set, but the inputs are bf16",
                    p.fp8.d_bt = FAKE(0x700000));
    expect_bad_edit(p, KILN_OP_FPROP, "problem->fp8 has promote set", p.fp8.promote = 1);
}

static void test_types(void **state)
{
    (void)state;
    kiln_problem p;
    expect_bad_edit(p, KILN_OP_FPROP,
                    "problem->fp8.recipe is KILN_FP8_NONE, but the inputs are e4m3",
                    p.a_type = p.b_type = KILN_DTYPE_E4M3);
    expect_bad_edit(p, KILN_OP_FPROP, "mixed inputs", p.b_type = KILN_DTYPE_F16);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->a_type bf16 and problem->b_type e4m3 differ",
                    p.b_type = KILN_DTYPE_E4M3);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->a_type f32 is not supported",
                    p.a_type = p.b_type = KILN_DTYPE_F32);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->out_type e5m2 is not supported",
                    p.out_type = KILN_DTYPE_E5M2);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->out_type = 42", p.out_type = (kiln_dtype)42);
    expect_bad_edit(p, KILN_OP_FPROP, "problem->op = 7", p.op = (kiln_op)7);
}

static void test_wgrad_rules(void **state)
{
    (void)state;
    kiln_problem p;
    expect_bad_edit(p, KILN_OP_WGRAD, "accumulate needs f32", p.accumulate = 1);
    expect_bad_edit(p, KILN_OP_FPROP, "accumulate is for wgrad",
                    p.out_type = KILN_DTYPE_F32, p.accumulate = 1);
    expect_bad_edit(p, KILN_OP_WGRAD, "problem->epilogue.d_bias is set, but wgrad has no epilogue",
                    p.epilogue.d_bias = FAKE(0x700000));
    expect_bad_edit(p, KILN_OP_WGRAD, "problem->epilogue.beta is 1, but wgrad has no epilogue",
                    p.epilogue.beta = 1.0f);
    expect_bad_edit(p, KILN_OP_WGRAD, "problem->epilogue.alpha is 2", p.epilogue.alpha = 2.0f);
    expect_bad_edit(p, KILN_OP_WGRAD, "problem->epilogue.d_row_scale is set",
                    p.epilogue.d_row_scale = FAKE(0x800000));
    expect_bad_edit(p, KILN_OP_WGRAD, "problem->d_b_ptrs is set, but wgrad",
                    p.d_b_ptrs = FAKE(0x600000));
    expect_bad_edit(p, KILN_OP_FPROP, "both set", p.d_b_ptrs = FAKE(0x600000));
    expect_bad_edit(p, KILN_OP_FPROP, "wgrad only", p.wgrad_output = KILN_WGRAD_DISCRETE);
    expect_bad_edit(p, KILN_OP_WGRAD,
                    "problem->d_out is set, but wgrad_output is KILN_WGRAD_DISCRETE",
                    p.wgrad_output = KILN_WGRAD_DISCRETE, p.d_out_ptrs = FAKE(0x500000));
}

/* The fused bias gradient: wgrad only, one layout, f32 or the output type,
 * element alignment, ld_dbias >= N (dense only). */
static void test_dbias_rules(void **state)
{
    (void)state;
    kiln_problem p;
    base_problem(&p, KILN_OP_WGRAD);
    p.d_dbias = FAKE(0x900000);
    expect_ok(&p);                        /* f32 db: kiln_problem_init's default */
    assert_int_equal(p.dbias_type, KILN_DTYPE_F32);
    p.dbias_type = KILN_DTYPE_BF16;       /* the output type */
    expect_ok(&p);
    p.dbias_type = KILN_DTYPE_F16;
    expect_bad(&p, "problem->dbias_type fp16 is not supported (f32 or the output type, bf16)");
    p.dbias_type = (kiln_dtype)99;
    expect_bad(&p, "problem->dbias_type = 99 is not a kiln_dtype");
    p.dbias_type = KILN_DTYPE_F32;
    p.d_dbias = FAKE(0x900002);
    expect_bad(&p, "problem->d_dbias (0x900002) is not 4-byte aligned (elements of dbias_type)");
    p.dbias_type = KILN_DTYPE_BF16;       /* 2-byte elements: 2-byte aligned is enough */
    expect_ok(&p);
    p.d_dbias = FAKE(0x900001);
    expect_bad(&p, "is not 2-byte aligned");
    p.d_dbias = FAKE(0x900000);
    p.ld_dbias = 63;
    expect_bad(&p, "problem->ld_dbias = 63 is smaller than the row (N = 64)");
    p.ld_dbias = -1;
    expect_bad(&p, "problem->ld_dbias is negative (-1)");
    p.ld_dbias = 65;                      /* any padding: db is written element-wise */
    expect_ok(&p);
    p.d_dbias_ptrs = FAKE(0xa00000);
    expect_bad(&p, "problem->d_dbias and problem->d_dbias_ptrs are both set");
    p.d_dbias = NULL;
    expect_bad(&p, "problem->ld_dbias = 65 is set, but the bias gradient goes through "
                   "problem->d_dbias_ptrs");
    p.ld_dbias = 0;
    expect_ok(&p);
    p.d_dbias_ptrs = FAKE(0xa00004);
    expect_bad(&p, "problem->d_dbias_ptrs (0xa00004) is not 8-byte aligned (device pointers)");
    p.d_dbias_ptrs = NULL;
    p.ld_dbias = 64;
    expect_bad(&p, "problem->ld_dbias = 64 is set, but no bias gradient is asked for");

    /* accumulate (f32 dW): f32 db */
    base_problem(&p, KILN_OP_WGRAD);
    p.out_type = KILN_DTYPE_F32;
    p.accumulate = 1;
    p.d_dbias = FAKE(0x900000);
    expect_ok(&p);
    p.dbias_type = KILN_DTYPE_BF16;
    expect_bad(&p, "problem->dbias_type bf16 is not supported (f32 or the output type, f32)");

    /* other ops */
    expect_bad_edit(p, KILN_OP_FPROP,
                    "problem->d_dbias is set, but op is fprop (the bias gradient is computed by "
                    "wgrad)",
                    p.d_dbias = FAKE(0x900000));
    expect_bad_edit(p, KILN_OP_DGRAD, "problem->d_dbias_ptrs is set, but op is dgrad",
                    p.d_dbias_ptrs = FAKE(0xa00000));
}

static void test_host_sizes(void **state)
{
    (void)state;
    kiln_problem p;
    base_problem(&p, KILN_OP_FPROP);
    int32_t over[4] = {50, 30, 20, 1}; /* 101 > 100 */
    p.host_sizes = over;
    expect_bad(&p, "add up to 101 rows, more than problem->capacity = 100");
    int32_t neg[4] = {5, -1, 0, 0};
    p.host_sizes = neg;
    expect_bad(&p, "problem->host_sizes[1] is negative (-1)");
    p.sizes_kind = KILN_SIZES_OFFSETS;
    int32_t dec[4] = {10, 20, 15, 30};
    p.host_sizes = dec;
    expect_bad(&p, "problem->host_sizes[2] = 15 is smaller than host_sizes[1] = 20");
    int32_t off_over[4] = {10, 20, 30, 101};
    p.host_sizes = off_over;
    expect_bad(&p, "add up to 101 rows");
    int32_t off_ok[4] = {0, 0, 0, 100};
    p.host_sizes = off_ok;
    expect_ok(&p);
    /* Without host sizes, Σm > capacity is the device's business (overflow). */
    p.host_sizes = NULL;
    expect_ok(&p);
}

/* ---- dispatch --------------------------------------------------------- */

typedef struct fake_catalog {
    kiln_kernel_desc d[8];
    kiln_launch_desc l[8];
    kiln_dispatch_kernel k[8];
    size_t n;
} fake_catalog;

static kiln_kernel_desc *add_kernel(fake_catalog *c, const char *name, kiln_op op,
                                    const char *family, int tm, int tn)
{
    size_t i = c->n++;
    kiln_desc_init(&c->d[i]);
    memset(&c->l[i], 0, sizeof c->l[i]);
    snprintf(c->d[i].name, sizeof c->d[i].name, "%s", name);
    snprintf(c->d[i].family, sizeof c->d[i].family, "%s", family);
    c->d[i].op = op;
    c->d[i].tile_m = tm;
    c->d[i].tile_n = tn;
    /* As the spec parser defaults: family simple takes any weights. */
    c->d[i].weights = strcmp(family, "simple") ? KILN_WEIGHTS_CONTIGUOUS : KILN_WEIGHTS_ANY;
    /* The limits each family's template reports in its launch table
     * (templates/simple.lua, templates/sm90_common.lua). */
    int simple = !strcmp(family, "simple");
    c->l[i].max_groups = simple ? 0 : 1024;
    c->l[i].preference = simple ? 1 : 2;
    c->l[i].scale_bias_switch = simple;
    c->k[i].arch = "sm_90a";
    c->k[i].desc = &c->d[i];
    c->k[i].launch = &c->l[i];
    return &c->d[i];
}

static kiln_status run_dispatch(fake_catalog *c, const kiln_problem *p, unsigned allowed,
                                kiln_dispatch_choice *out, kiln_error *err)
{
    kiln_dispatch_input in = {p, "sm_90a", c->k, c->n, allowed, NULL, NULL, NULL, NULL};
    kiln_error_clear(err);
    return kiln_dispatch(&in, out, err);
}

/* Dispatches p over c: the generated kernel `name` must serve it.  The
 * choice comes back for further checks. */
static kiln_dispatch_choice expect_kernel(fake_catalog *c, const kiln_problem *p, unsigned allowed,
                                          const char *name)
{
    kiln_dispatch_choice ch;
    kiln_error err;
    kiln_status st = run_dispatch(c, p, allowed, &ch, &err);
    if (st != KILN_OK || ch.kernel < 0 || strcmp(c->d[ch.kernel].name, name))
        fail_msg("expected kernel %s, got %d (kernel %d): %s", name, (int)st,
                 st == KILN_OK ? ch.kernel : -1, st == KILN_OK ? ch.reason : err.msg);
    return ch;
}

/* Dispatches p over c: refused (KILN_ERROR_UNSUPPORTED), the message holding
 * each string after `allowed`; a miss names the string and the caller's line. */
#define expect_refused(c, p, allowed, ...)                                                         \
    expect_refused_at(__LINE__, (c), (p), (allowed), (const char *const[]){__VA_ARGS__, NULL})
static void expect_refused_at(int line, fake_catalog *c, const kiln_problem *p, unsigned allowed,
                              const char *const *needles)
{
    kiln_dispatch_choice ch;
    kiln_error err;
    kiln_status st = run_dispatch(c, p, allowed, &ch, &err);
    if (st != KILN_ERROR_UNSUPPORTED)
        fail_msg("line %d: expected a refusal, got %d: %s", line, (int)st, err.msg);
    kiln_test_has_all(__FILE__, line, err.msg, needles);
}

/* fp8 calls reach the kernel of their recipe; promotion when asked (and
 * always for blocks); KILN_KERNEL's name limits the choice to one kernel. */
static void test_dispatch_fp8_and_only_kernel(void **state)
{
    (void)state;
    fake_catalog c = {0};
    add_kernel(&c, "bf16", KILN_OP_FPROP, "sm90", 128, 128);
    static const struct { const char *name; kiln_fp8_recipe r; int promote; } f8[] = {
        {"row", KILN_FP8_ROW, 0}, {"row_promote", KILN_FP8_ROW, 1},
        {"tensor", KILN_FP8_TENSOR, 0}, {"block", KILN_FP8_BLOCK, 1}};
    for (int i = 0; i < 4; i++) {
        kiln_kernel_desc *d = add_kernel(&c, f8[i].name, KILN_OP_FPROP, "sm90", 128, 128);
        d->a_type = d->b_type = KILN_DTYPE_E4M3;
        d->fp8_recipe = f8[i].r;
        d->fp8_promote = f8[i].promote;
    }
    kiln_problem p;
    kiln_dispatch_choice ch;
    kiln_error err;
    const char *want[] = {"row", "row_promote", "tensor", "block"};
    for (int i = 0; i < 4; i++) {
        fp8_problem(&p, KILN_OP_FPROP, f8[i].r);
        p.fp8.promote = f8[i].promote && f8[i].r != KILN_FP8_BLOCK;
        ch = expect_kernel(&c, &p, KILN_ALLOW_ALL, want[i]);
        kiln_test_has(ch.reason, want[i]);
    }
    /* a 16-bit call never reaches an fp8 kernel, nor the reverse */
    base_problem(&p, KILN_OP_FPROP);
    expect_kernel(&c, &p, KILN_ALLOW_ALL, "bf16");
    c.n = 1;
    fp8_problem(&p, KILN_OP_FPROP, KILN_FP8_ROW);
    const int32_t hs[4] = {1, 2, 3, 4};
    p.host_sizes = hs; /* else cuBLASLt is out for want of host sizes */
    expect_refused(&c, &p, KILN_ALLOW_ALL, "bf16 takes bf16",
                   "cuBLASLt path serves the fp8 per-tensor recipe only (the call's is row-wise)");
    c.n = 5;

    /* only_kernel: the row call may take row_promote when named, and
     * nothing else */
    fp8_problem(&p, KILN_OP_FPROP, KILN_FP8_ROW);
    kiln_dispatch_input in = {&p, "sm_90a", c.k, c.n, KILN_ALLOW_ALL, NULL, NULL, NULL,
                              "row_promote"};
    assert_int_equal(kiln_dispatch(&in, &ch, &err), KILN_OK);
    assert_string_equal(c.d[ch.kernel].name, "row_promote");
    in.only_kernel = "block";
    assert_int_equal(kiln_dispatch(&in, &ch, &err), KILN_ERROR_UNSUPPORTED);
    kiln_test_has(err.msg, "takes fp8 recipe block");
    in.only_kernel = "nonesuch";
    assert_int_equal(kiln_dispatch(&in, &ch, &err), KILN_ERROR_UNSUPPORTED);
    kiln_test_has(err.msg, "none is named KILN_KERNEL=nonesuch");
}

/* The cuBLASLt fallback for fp8 (runtime/cublaslt.c): the per-tensor
 * recipe when no generated kernel serves, in the forms cuBLASLt's fp8
 * matmul takes; every other call refused with its reason, by dispatch and
 * by the backend itself when called directly. */
static void test_dispatch_fp8_cublaslt(void **state)
{
    (void)state;
    fake_catalog c = {0};
    add_kernel(&c, "bf16", KILN_OP_FPROP, "sm90", 128, 128);
    kiln_kernel_desc *d = add_kernel(&c, "e4m3_tensor", KILN_OP_FPROP, "sm90", 128, 128);
    d->a_type = d->b_type = KILN_DTYPE_E4M3;
    d->fp8_recipe = KILN_FP8_TENSOR;
    const int32_t hs[4] = {1, 0, 3, 4};
    kiln_problem p;
    kiln_dispatch_choice ch;
    kiln_error err;

    /* A generated kernel comes first; cuBLASLt when only it is allowed, or
     * when no kernel serves. */
    fp8_problem(&p, KILN_OP_FPROP, KILN_FP8_TENSOR);
    p.host_sizes = hs;
    ch = expect_kernel(&c, &p, KILN_ALLOW_ALL, "e4m3_tensor");
    assert_int_equal(ch.backend, KILN_BACKEND_GENERATED);
    assert_int_equal(run_dispatch(&c, &p, KILN_ALLOW_CUBLASLT, &ch, &err), KILN_OK);
    assert_int_equal(ch.backend, KILN_BACKEND_CUBLASLT);
    assert_int_equal(ch.rule, KILN_DISPATCH_BY_CUBLASLT);
    c.n = 1;
    assert_int_equal(run_dispatch(&c, &p, KILN_ALLOW_ALL, &ch, &err), KILN_OK);
    assert_int_equal(ch.backend, KILN_BACKEND_CUBLASLT);
    kiln_test_has(ch.reason, "cuBLASLt with host sizes", "no generated kernel for e4m3→bf16 fprop");

    /* What cuBLASLt's fp8 matmul takes: dgrad on the transposed weights,
     * e5m2 with e4m3 either way, bf16/fp16/f32 out, promotion, padded
     * rows of 16 bytes, sm_89 and later. */
    static const struct {
        kiln_op op;
        kiln_dtype a, b, out;
        int promote;
        int64_t lda, ldb, ldd;
        const char *arch;
    } ok[] = {
        {KILN_OP_FPROP, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, KILN_DTYPE_BF16, 0, 0, 0, 0, "sm_90a"},
        {KILN_OP_DGRAD, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, KILN_DTYPE_BF16, 0, 0, 0, 0, "sm_90a"},
        {KILN_OP_DGRAD, KILN_DTYPE_E5M2, KILN_DTYPE_E4M3, KILN_DTYPE_BF16, 0, 0, 0, 0, "sm_90a"},
        {KILN_OP_FPROP, KILN_DTYPE_E4M3, KILN_DTYPE_E5M2, KILN_DTYPE_F16, 1, 0, 0, 0, "sm_90a"},
        {KILN_OP_FPROP, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, KILN_DTYPE_F32, 1, 48, 64, 68, "sm_89"},
        {KILN_OP_DGRAD, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, KILN_DTYPE_BF16, 0, 80, 96, 40, "sm_100a"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        fp8_problem(&p, ok[i].op, KILN_FP8_TENSOR);
        p.host_sizes = hs;
        p.a_type = ok[i].a;
        p.b_type = ok[i].b;
        p.out_type = ok[i].out;
        p.fp8.promote = ok[i].promote;
        p.lda = ok[i].lda;
        p.ldb = ok[i].ldb;
        p.ldd = ok[i].ldd;
        expect_ok(&p);
        kiln_dispatch_input in = {&p, ok[i].arch, c.k, c.n, KILN_ALLOW_ALL, NULL, NULL, NULL, NULL};
        kiln_error_clear(&err);
        if (kiln_dispatch(&in, &ch, &err) != KILN_OK || ch.backend != KILN_BACKEND_CUBLASLT)
            fail_msg("case %zu: not sent to cuBLASLt: %s", i, err.msg);
    }

    /* Refused, each with its reason. */
    static const struct {
        kiln_fp8_recipe recipe;
        kiln_dtype a, b;
        int64_t k, lda, ldd;
        const char *arch, *why;
    } no[] = {
        {KILN_FP8_ROW, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, 32, 0, 0, "sm_90a",
         "kiln's cuBLASLt path serves the fp8 per-tensor recipe only (the call's is row-wise)"},
        {KILN_FP8_BLOCK, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, 32, 0, 0, "sm_90a",
         "per-tensor recipe only (the call's is 1x128/128x128 block)"},
        {KILN_FP8_TENSOR, KILN_DTYPE_E5M2, KILN_DTYPE_E5M2, 32, 0, 0, "sm_90a",
         "cuBLASLt has no e5m2 x e5m2 product"},
        {KILN_FP8_TENSOR, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, 32, 0, 0, "sm_80",
         "cuBLASLt runs fp8 on sm_89 and later (the device is sm_80)"},
        {KILN_FP8_TENSOR, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, 32, 0, 0, "sm_86",
         "the device is sm_86"},
        /* what validation refuses too (16-byte rows): never sent on */
        {KILN_FP8_TENSOR, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, 40, 0, 0, "sm_90a",
         "need 16-byte aligned dimensions and rows (problem->k is 40 bytes)"},
        {KILN_FP8_TENSOR, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, 32, 40, 0, "sm_90a",
         "(problem->lda is 40 bytes)"},
        {KILN_FP8_TENSOR, KILN_DTYPE_E4M3, KILN_DTYPE_E4M3, 32, 0, 68, "sm_90a",
         "(problem->ldd is 136 bytes)"},
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        fp8_problem(&p, KILN_OP_FPROP, no[i].recipe);
        p.host_sizes = hs;
        p.a_type = no[i].a;
        p.b_type = no[i].b;
        p.k = no[i].k;
        p.lda = no[i].lda;
        p.ldd = no[i].ldd;
        kiln_dispatch_input in = {&p, no[i].arch, c.k, c.n, KILN_ALLOW_ALL, NULL, NULL, NULL, NULL};
        kiln_error_clear(&err);
        if (kiln_dispatch(&in, &ch, &err) != KILN_ERROR_UNSUPPORTED || !strstr(err.msg, no[i].why))
            fail_msg("case %zu: wanted a refusal with '%s', got '%s'", i, no[i].why, err.msg);
        /* the backend refuses it too when called directly, before it
         * touches the driver or loads cuBLASLt */
        kiln_device_limits dev = {9, 0, 132, "", {0}};
        snprintf(dev.arch, sizeof dev.arch, "%s", no[i].arch);
        kiln_rt_env env = {NULL, NULL, &dev};
        kiln_cublaslt *lt = NULL;
        kiln_error_clear(&err);
        assert_int_equal(kiln_cublaslt_run(&lt, &env, NULL, &p, NULL, &err), KILN_ERROR_UNSUPPORTED);
        kiln_test_has(err.msg, no[i].why);
        assert_null(lt);
    }
    /* Host sizes are still needed. */
    fp8_problem(&p, KILN_OP_DGRAD, KILN_FP8_TENSOR);
    expect_refused(&c, &p, KILN_ALLOW_ALL, "no host sizes for cuBLASLt");
}

static void full_epilogue(kiln_kernel_desc *d)
{
    d->epilogue.bias = KILN_BIAS_PER_GROUP;
    d->epilogue.row_scale = 1;
    d->epilogue.scale_bias = 1;
    d->epilogue.alpha = KILN_ALPHA_PER_GROUP;
    d->epilogue.beta = 1;
}

static void test_dispatch_prefers_sm90_and_tiles(void **state)
{
    (void)state;
    fake_catalog c = {0};
    kiln_kernel_desc *s = add_kernel(&c, "simple_fprop", KILN_OP_FPROP, "simple", 64, 64);
    full_epilogue(s);
    kiln_kernel_desc *big = add_kernel(&c, "sm90_big", KILN_OP_FPROP, "sm90", 128, 256);
    big->weights = KILN_WEIGHTS_CONTIGUOUS;
    kiln_kernel_desc *small = add_kernel(&c, "sm90_small", KILN_OP_FPROP, "sm90", 64, 128);
    small->weights = KILN_WEIGHTS_CONTIGUOUS;
    add_kernel(&c, "sm90_dgrad", KILN_OP_DGRAD, "sm90", 128, 128);

    kiln_problem p;
    base_problem(&p, KILN_OP_FPROP);
    kiln_dispatch_choice ch;
    /* The tile choice is the cost model's (runtime/dispatch_model.h), so
     * the shapes are real ones: at N = K = 4096, 1024 rows a group fill
     * 128x256 tiles (4 waves against 16 of 64x128 at a lower L2 rate);
     * one group of 64 rows (decode after expert parallelism) takes the
     * 16-bit 64x128 tile first (runtime/dispatch.c, decode_tile_suits),
     * and so do four groups of 64 rows a group (decode_tile_first); four
     * groups of 128 rank it by the model, which puts 128x256 ahead, and
     * four groups of 129 do not rank it. */
    p.n = p.k = 4096;
    p.capacity = 4 * 1024; /* 1024 rows per group: large */
    ch = expect_kernel(&c, &p, KILN_ALLOW_ALL, "sm90_big");
    assert_int_equal(ch.backend, KILN_BACKEND_GENERATED);
    p.groups = 1;
    p.capacity = 64;
    ch = expect_kernel(&c, &p, KILN_ALLOW_ALL, "sm90_small");
    assert_non_null(strstr(ch.reason, "model score"));
    p.groups = 4;
    p.capacity = 4 * 64;
    expect_kernel(&c, &p, KILN_ALLOW_ALL, "sm90_small");
    p.capacity = 4 * 128;
    expect_kernel(&c, &p, KILN_ALLOW_ALL, "sm90_big");
    p.capacity = 4 * 129;
    expect_kernel(&c, &p, KILN_ALLOW_ALL, "sm90_big");
    p.capacity = 4 * 100;

    /* Pointer-array weights: only the simple kernel takes them. */
    p.d_b = NULL;
    p.d_b_ptrs = FAKE(0x600000);
    expect_kernel(&c, &p, KILN_ALLOW_ALL, "simple_fprop");

    /* An epilogue the sm90 kernels lack goes to simple too. */
    base_problem(&p, KILN_OP_FPROP);
    p.epilogue.d_bias = FAKE(0x700000);
    expect_kernel(&c, &p, KILN_ALLOW_ALL, "simple_fprop");

    /* More groups than sm90's schedule holds. */
    base_problem(&p, KILN_OP_FPROP);
    p.groups = 2048;
    p.capacity = 2048 * 512;
    expect_kernel(&c, &p, KILN_ALLOW_ALL, "simple_fprop");
}

static void test_dispatch_scale_bias_and_family(void **state)
{
    (void)state;
    fake_catalog c = {0};
    kiln_kernel_desc *sm = add_kernel(&c, "sm90_epi", KILN_OP_FPROP, "sm90", 128, 128);
    full_epilogue(sm);
    kiln_problem p;
    base_problem(&p, KILN_OP_FPROP);
    p.epilogue.d_bias = FAKE(0x700000);
    p.epilogue.d_row_scale = FAKE(0x800000);
    p.epilogue.scale_bias = 0;
    /* sm90 always scales the bias when compiled with scale_bias. */
    expect_refused(&c, &p, KILN_ALLOW_GENERATED, "always scales the bias");
    /* simple switches it at run time. */
    kiln_kernel_desc *s = add_kernel(&c, "simple_epi", KILN_OP_FPROP, "simple", 64, 64);
    full_epilogue(s);
    expect_kernel(&c, &p, KILN_ALLOW_GENERATED, "simple_epi");
    p.epilogue.scale_bias = 1;
    expect_kernel(&c, &p, KILN_ALLOW_GENERATED, "sm90_epi");
}

static void test_dispatch_refusals(void **state)
{
    (void)state;
    fake_catalog c = {0};
    kiln_kernel_desc *w = add_kernel(&c, "simple_wgrad_dense", KILN_OP_WGRAD, "simple", 64, 64);
    w->a_type = w->b_type = KILN_DTYPE_F16;
    w->out_type = KILN_DTYPE_F32;
    kiln_problem p;
    base_problem(&p, KILN_OP_WGRAD);
    p.a_type = p.b_type = KILN_DTYPE_F16;
    p.out_type = KILN_DTYPE_F32;
    p.wgrad_output = KILN_WGRAD_DISCRETE;
    p.d_out = NULL;
    p.d_out_ptrs = FAKE(0x500000);
    kiln_dispatch_choice ch;
    kiln_error err;
    expect_refused(&c, &p, KILN_ALLOW_ALL,
                   "no generated kernel for fp16→f32 wgrad (discrete) on sm_90a",
                   "simple_wgrad_dense writes dense output", "no host sizes for cuBLASLt");

    /* With host sizes, cuBLASLt takes it. */
    int32_t hs[4] = {1, 2, 3, 4};
    p.host_sizes = hs;
    assert_int_equal(run_dispatch(&c, &p, KILN_ALLOW_ALL, &ch, &err), KILN_OK);
    assert_int_equal(ch.backend, KILN_BACKEND_CUBLASLT);
    assert_int_equal(ch.kernel, -1);
    /* ... unless only generated kernels are allowed. */
    expect_refused(&c, &p, KILN_ALLOW_GENERATED, "cuBLASLt is not allowed");

    /* Forcing cuBLASLt skips a kernel that would serve the call. */
    p.wgrad_output = KILN_WGRAD_DENSE;
    p.d_out = FAKE(0x400000);
    p.d_out_ptrs = NULL;
    assert_int_equal(run_dispatch(&c, &p, KILN_ALLOW_ALL, &ch, &err), KILN_OK);
    assert_int_equal(ch.backend, KILN_BACKEND_GENERATED);
    assert_int_equal(run_dispatch(&c, &p, KILN_ALLOW_CUBLASLT, &ch, &err), KILN_OK);
    assert_int_equal(ch.backend, KILN_BACKEND_CUBLASLT);

    /* Other arch. */
    kiln_dispatch_input in = {&p, "sm_80", c.k, c.n, KILN_ALLOW_GENERATED, "KILN_BACKEND=generated",
                              NULL, NULL, NULL};
    assert_int_equal(kiln_dispatch(&in, &ch, &err), KILN_ERROR_UNSUPPORTED);
    kiln_test_has(err.msg, "built for sm_90a", "not allowed by KILN_BACKEND=generated");

    /* cuBLASLt has no bf16→fp16 product. */
    base_problem(&p, KILN_OP_FPROP);
    p.out_type = KILN_DTYPE_F16;
    p.host_sizes = hs;
    expect_refused(&c, &p, KILN_ALLOW_ALL, "cuBLASLt has no bf16→fp16 product");

    /* Accumulate must match. */
    base_problem(&p, KILN_OP_WGRAD);
    p.a_type = p.b_type = KILN_DTYPE_F16;
    p.out_type = KILN_DTYPE_F32;
    p.accumulate = 1;
    expect_refused(&c, &p, KILN_ALLOW_ALL, "does not accumulate");
}

/* A call with dbias needs a dbias kernel (cuBLASLt cannot compute it); a
 * call without it prefers a plain kernel but may run a dbias one. */
static void test_dispatch_dbias(void **state)
{
    (void)state;
    fake_catalog c = {0};
    add_kernel(&c, "sm90_wgrad", KILN_OP_WGRAD, "sm90", 128, 256);
    kiln_problem p;
    base_problem(&p, KILN_OP_WGRAD);
    int32_t hs[4] = {1, 2, 3, 4};
    p.host_sizes = hs;
    p.d_dbias = FAKE(0x900000);
    expect_refused(&c, &p, KILN_ALLOW_ALL,
                   "no generated kernel for bf16→bf16 wgrad (dense, dbias) on sm_90a",
                   "sm90_wgrad does not compute the bias gradient",
                   "cuBLASLt cannot compute the bias gradient");
    /* a smaller tile: the better one for this small shape class, all else equal */
    kiln_kernel_desc *db = add_kernel(&c, "sm90_wgrad_dbias", KILN_OP_WGRAD, "sm90", 64, 128);
    db->dbias = 1;
    expect_kernel(&c, &p, KILN_ALLOW_ALL, "sm90_wgrad_dbias");
    p.d_dbias = NULL;
    p.d_dbias_ptrs = FAKE(0xa00000);
    expect_kernel(&c, &p, KILN_ALLOW_ALL, "sm90_wgrad_dbias");
    /* forced to cuBLASLt: refused, saying why */
    expect_refused(&c, &p, KILN_ALLOW_CUBLASLT, "generated kernels are not allowed",
                   "cuBLASLt cannot compute the bias gradient");
    /* the per-expert layout is named in the call's description */
    c.d[1].dbias = 0;
    expect_refused(&c, &p, KILN_ALLOW_GENERATED, "bf16→bf16 wgrad (dense, dbias per expert)");
    c.d[1].dbias = 1;
    /* without dbias: the plain kernel first (fewer unused features beats
     * the tile), the dbias one when it is all there is */
    p.d_dbias_ptrs = NULL;
    expect_kernel(&c, &p, KILN_ALLOW_GENERATED, "sm90_wgrad");
    c.d[0].op = KILN_OP_FPROP;
    expect_kernel(&c, &p, KILN_ALLOW_GENERATED, "sm90_wgrad_dbias");
}

static void test_arch_and_shape(void **state)
{
    (void)state;
    char a[16];
    kiln_dispatch_arch_name(9, 0, a, sizeof a);
    assert_string_equal(a, "sm_90a");
    kiln_dispatch_arch_name(8, 6, a, sizeof a);
    assert_string_equal(a, "sm_86");
    /* Small below 128 tokens a group; wgrad, whose reduction the tokens
     * are, below 512 into dense dW and below 1024 into discrete. */
    const struct { kiln_op op; kiln_wgrad_output out; int64_t small; } split[] = {
        {KILN_OP_FPROP, KILN_WGRAD_DENSE, 128},
        {KILN_OP_WGRAD, KILN_WGRAD_DENSE, 512},
        {KILN_OP_WGRAD, KILN_WGRAD_DISCRETE, 1024}};
    for (size_t i = 0; i < sizeof split / sizeof split[0]; i++) {
        kiln_problem p;
        base_problem(&p, split[i].op);
        p.wgrad_output = split[i].out;
        p.groups = 8;
        p.capacity = 8 * (split[i].small - 1);
        assert_int_equal(kiln_dispatch_shape_class(&p), 0);
        p.capacity = 8 * split[i].small;
        assert_int_equal(kiln_dispatch_shape_class(&p), 1);
    }
    /* fp8 row-wise with promotion: below 192 (docs/dispatch.md) */
    kiln_problem p;
    base_problem(&p, KILN_OP_FPROP);
    p.fp8.recipe = KILN_FP8_ROW;
    p.fp8.promote = 1;
    p.groups = 8;
    p.capacity = 8 * 191;
    assert_int_equal(kiln_dispatch_shape_class(&p), 0);
    p.capacity = 8 * 192;
    assert_int_equal(kiln_dispatch_shape_class(&p), 1);
    p.fp8.promote = 0;
    p.capacity = 8 * 128;
    assert_int_equal(kiln_dispatch_shape_class(&p), 1);
}

/* A problem made for another kiln.h (struct_size stale) is refused by name
 * before any other member is read; so are stale context options. */
static void test_struct_size(void **state)
{
    (void)state;
    kiln_problem p;
    base_problem(&p, KILN_OP_FPROP);
    assert_int_equal(p.struct_size, sizeof p);
    p.struct_size = sizeof p - 8; /* a mirror missing one member */
    expect_bad(&p, "kiln_problem.struct_size");
    p.struct_size = 0;            /* memset, never initialised */
    expect_bad(&p, "set it with kiln_problem_init");

    kiln_context_options o;
    kiln_context_options_init(&o);
    assert_int_equal(o.struct_size, sizeof o);
    o.struct_size += 8;
    kiln_context *ctx = NULL;
    /* Refused before the driver is loaded, so this runs on the CPU. */
    assert_int_equal(kiln_context_create(&o, &ctx), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(ctx);
    assert_non_null(strstr(kiln_last_error(ctx), "kiln_context_options.struct_size"));
    /* A stale problem through the public call names the struct too. */
    assert_int_equal(kiln_gemm(ctx, &p, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_last_error(ctx), "kiln_problem.struct_size"));
    assert_int_equal(kiln_prepare(ctx, &p), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_last_error(ctx), "kiln_problem.struct_size"));
    kiln_context_destroy(ctx);
}

/* KILN_LOG: with no hook, a level sends the log to stderr; a hook given
 * wins; anything else is refused naming the variable. */
static void test_log_env(void **state)
{
    (void)state;
    kiln_rt_log log;
    kiln_error err;
    setenv("KILN_LOG", "info", 1);
    assert_int_equal(kiln_rt_log_init(&log, NULL, NULL, KILN_LOG_WARNING, &err), KILN_OK);
    assert_non_null(log.fn);
    assert_int_equal(log.level, KILN_LOG_INFO);
    kiln_log_fn hook = (kiln_log_fn)(uintptr_t)0x1000;
    assert_int_equal(kiln_rt_log_init(&log, hook, NULL, KILN_LOG_ERROR, &err), KILN_OK);
    assert_ptr_equal(log.fn, hook);
    assert_int_equal(log.level, KILN_LOG_ERROR);
    setenv("KILN_LOG", "loud", 1);
    kiln_context *ctx = NULL;
    assert_int_equal(kiln_context_create(NULL, &ctx), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_last_error(ctx), "KILN_LOG=loud"));
    kiln_context_destroy(ctx);
    unsetenv("KILN_LOG");
    assert_int_equal(kiln_rt_log_init(&log, NULL, NULL, KILN_LOG_WARNING, &err), KILN_OK);
    assert_null(log.fn);
}

/* The default bundle is looked for beside the library, in share/kiln. */
static void test_default_bundle_path(void **state)
{
    (void)state;
    char path[256];
    kiln_default_bundle_path("/opt/kiln/lib/libkiln.so.0", "sm_90a", path, sizeof path);
    assert_string_equal(path, "/opt/kiln/lib/../share/kiln/kiln-sm_90a.kbundle");
    kiln_default_bundle_path("libkiln.so", "sm_100a", path, sizeof path);
    assert_string_equal(path, "./../share/kiln/kiln-sm_100a.kbundle");
}

/* The tuned step of the cascade: the table's entry for the call's key
 * serves it, unless it failed to load or does not fit the call. */
static void test_dispatch_tuned_step(void **state)
{
    (void)state;
    fake_catalog c = {0};
    add_kernel(&c, "k_default", KILN_OP_FPROP, "sm90", 64, 256);
    fake_catalog w = {0};
    kiln_kernel_desc *td = add_kernel(&w, "k_tuned", KILN_OP_FPROP, "sm90", 128, 256);
    snprintf(w.l[0].entry, sizeof w.l[0].entry, "k_tuned");
    w.l[0].threads = 384;
    w.l[0].cluster_m = w.l[0].cluster_n = 1;
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_desc_format(td, &w.l[0], &sb);

    kiln_problem p;
    base_problem(&p, KILN_OP_FPROP);
    kiln_tuning_table *t = NULL;
    kiln_error err;
    assert_int_equal(kiln_tuning_table_create(&t, &err), KILN_OK);
    kiln_tuning_entry e;
    memset(&e, 0, sizeof e);
    kiln_tuning_key_from_problem(&p, "sm_90a", &e.key);
    snprintf(e.kernel, sizeof e.kernel, "k_tuned");
    memset(e.bundle_id, 'a', 64);
    memset(e.cache_key, 'b', 64);
    e.median_ms = 0.5;
    e.desc = sb.data;
    if (kiln_tuning_table_add(t, &e, &err) != KILN_OK) fail_msg("%s", err.msg);

    unsigned char unavailable[1] = {0};
    kiln_dispatch_input in = {&p, "sm_90a", c.k, c.n, KILN_ALLOW_ALL, NULL, t, unavailable, NULL};
    kiln_dispatch_choice ch;
    assert_int_equal(kiln_dispatch(&in, &ch, &err), KILN_OK);
    assert_int_equal(ch.backend, KILN_BACKEND_GENERATED);
    assert_int_equal(ch.tuned, 0);
    assert_int_equal(ch.kernel, -1);
    assert_non_null(strstr(ch.reason, "tuned kernel k_tuned"));

    /* Once it failed to load, the heuristic serves the key. */
    unavailable[0] = 1;
    assert_int_equal(kiln_dispatch(&in, &ch, &err), KILN_OK);
    assert_int_equal(ch.tuned, -1);
    assert_int_equal(ch.kernel, 0);
    unavailable[0] = 0;

    /* Generated kernels not allowed: no tuned kernel either. */
    in.allowed = KILN_ALLOW_CUBLASLT;
    p.host_sizes = (const int32_t[]){1, 2, 3, 4};
    assert_int_equal(kiln_dispatch(&in, &ch, &err), KILN_OK);
    assert_int_equal(ch.backend, KILN_BACKEND_CUBLASLT);
    assert_int_equal(ch.tuned, -1);
    in.allowed = KILN_ALLOW_ALL;
    p.host_sizes = NULL;

    /* Another key (a bias the entry's kernel lacks): the heuristic. */
    full_epilogue(&c.d[0]);
    p.epilogue.d_bias = FAKE(0x500000);
    assert_int_equal(kiln_dispatch(&in, &ch, &err), KILN_OK);
    assert_int_equal(ch.tuned, -1);
    assert_int_equal(ch.kernel, 0);

    kiln_tuning_table_destroy(t);
    kiln_strbuf_free(&sb);
}

/* ---- checked mode (issue 13, finding 10): device pointers asked of a fake
 * driver whose allocations are a table. */

typedef struct fake_alloc {
    uintptr_t start;
    size_t size;                 /* 0: the driver does not tell the range */
    unsigned type;               /* CU_MEMORYTYPE_* */
} fake_alloc;

static fake_alloc g_allocs[8];
static CUresult g_query_result;

static CUresult CUDAAPI fake_pointer_attributes(unsigned int n, CUpointer_attribute *attrs,
                                                void **data, CUdeviceptr ptr)
{
    if (g_query_result != CUDA_SUCCESS) return g_query_result;
    const fake_alloc *a = NULL;
    for (int i = 0; i < 8; i++)
        if (g_allocs[i].type && ptr >= g_allocs[i].start &&
            ptr < g_allocs[i].start + (g_allocs[i].size ? g_allocs[i].size : 1))
            a = &g_allocs[i];
    /* Like the driver: an unknown pointer is no error, its attributes are 0. */
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data[i] = a ? a->type : 0; break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned char *)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(CUdeviceptr *)data[i] = a && a->size ? a->start : 0;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data[i] = a ? a->size : 0; break;
        default: return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

/* base_problem's pointers as allocations just large enough for fprop
 * (bf16; G 4, N 64, K 32, capacity 100). */
static void fake_allocations(void)
{
    memset(g_allocs, 0, sizeof g_allocs);
    g_query_result = CUDA_SUCCESS;
    g_allocs[0] = (fake_alloc){0x100000, 4 * 4, CU_MEMORYTYPE_DEVICE};      /* sizes */
    g_allocs[1] = (fake_alloc){0x200000, 100 * 32 * 2, CU_MEMORYTYPE_DEVICE}; /* X */
    g_allocs[2] = (fake_alloc){0x300000, 4 * 64 * 32 * 2, CU_MEMORYTYPE_DEVICE}; /* W */
    g_allocs[3] = (fake_alloc){0x400000, 100 * 64 * 2, CU_MEMORYTYPE_DEVICE}; /* Y */
    g_allocs[4] = (fake_alloc){0x500000, 4096, CU_MEMORYTYPE_HOST};         /* pinned host */
}

static kiln_status check_memory(const kiln_problem *p, kiln_error *err)
{
    kiln_driver d;
    memset(&d, 0, sizeof d);
    d.cuPointerGetAttributes = fake_pointer_attributes;
    kiln_error_clear(err);
    assert_int_equal(kiln_validate_problem(p, err), KILN_OK);
    return kiln_check_problem_memory(&d, p, err);
}

static void expect_memory_refused(const kiln_problem *p, const char *a, const char *b)
{
    kiln_error err;
    kiln_status st = check_memory(p, &err);
    if (st != KILN_ERROR_INVALID_ARGUMENT || !strstr(err.msg, a) || (b && !strstr(err.msg, b)))
        fail_msg("expected INVALID_ARGUMENT naming '%s' and '%s', got %d '%s'", a, b ? b : "",
                 (int)st, err.msg);
}

static void expect_memory_ok(const kiln_problem *p)
{
    kiln_error err;
    kiln_status st = check_memory(p, &err);
    if (st != KILN_OK) fail_msg("expected OK, got %d '%s'", (int)st, err.msg);
}

static void test_checked_mode_pointers(void **state)
{
    (void)state;
    kiln_problem p;
    fake_allocations();
    base_problem(&p, KILN_OP_FPROP);
    expect_memory_ok(&p);
    /* Host memory the driver does not know (malloc), and pinned host memory. */
    int64_t host[64];
    p.d_a = (void *)(((uintptr_t)host + 15) & ~(uintptr_t)15);
    expect_memory_refused(&p, "problem->d_a", "not device memory");
    p.d_a = FAKE(0x500000);
    expect_memory_refused(&p, "problem->d_a", "host memory");
    /* An allocation too small: one byte short, or a pointer into the middle. */
    base_problem(&p, KILN_OP_FPROP);
    g_allocs[3].size--;
    expect_memory_refused(&p, "problem->d_out", "12800 bytes");
    g_allocs[3].size++;
    p.d_a = FAKE(0x200000 + 16);
    expect_memory_refused(&p, "problem->d_a", "capacity 100 rows");
    p.d_a = FAKE(0x200000);
    p.lda = 40; /* rows further apart: (99*40+32)*2 bytes */
    expect_memory_refused(&p, "problem->d_a", "7984");
    p.lda = 0;
    p.groups = 5; /* W and the sizes are read for 5 groups */
    expect_memory_refused(&p, "problem->d_sizes", "5 int32");
    p.groups = 4;
    /* Range not told: only the type is checked. */
    g_allocs[3].size = 0;
    expect_memory_ok(&p);
    g_allocs[3].size = 100 * 64 * 2;
    /* C is checked only when it is read (beta != 0). */
    p.epilogue.d_c = FAKE(0x900000);
    expect_memory_ok(&p);
    p.epilogue.beta = 1.0f;
    expect_memory_refused(&p, "problem->epilogue.d_c", "not device memory");
    /* wgrad writes dW [G,N,K]: more than Y's allocation holds. */
    base_problem(&p, KILN_OP_WGRAD);
    g_allocs[1].size = 100 * 64 * 2; /* dY [capacity, N] */
    expect_memory_refused(&p, "problem->d_out", "groups*n 256 rows");
    g_allocs[3].size = 4 * 64 * 32 * 2;
    expect_memory_ok(&p);
    /* A driver failure is a driver error naming the pointer. */
    base_problem(&p, KILN_OP_FPROP);
    g_query_result = CUDA_ERROR_INVALID_CONTEXT;
    kiln_error err;
    assert_int_equal(check_memory(&p, &err), KILN_ERROR_DRIVER);
    assert_non_null(strstr(err.msg, "problem->d_sizes"));
    g_query_result = CUDA_SUCCESS;
}

static void test_checked_mode_env(void **state)
{
    (void)state;
    kiln_error err;
    kiln_error_clear(&err);
    int on = 0;
    unsetenv("KILN_CHECK");
    assert_int_equal(kiln_checked_from_env(&on, &err), KILN_OK);
    assert_int_equal(on, 0);
    setenv("KILN_CHECK", "1", 1);
    assert_int_equal(kiln_checked_from_env(&on, &err), KILN_OK);
    assert_int_equal(on, 1);
    setenv("KILN_CHECK", "0", 1);
    assert_int_equal(kiln_checked_from_env(&on, &err), KILN_OK);
    assert_int_equal(on, 0);
    setenv("KILN_CHECK", "yes", 1);
    assert_int_equal(kiln_checked_from_env(&on, &err), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "KILN_CHECK=yes"));
    unsetenv("KILN_CHECK");
    /* Off unless asked for. */
    kiln_context_options o;
    kiln_context_options_init(&o);
    assert_int_equal(o.checked, 0);
}

KILN_TEST_MAIN(
    cmocka_unit_test(test_valid_problems),
    cmocka_unit_test(test_null_pointers),
    cmocka_unit_test(test_alignment),
    cmocka_unit_test(test_shapes),
    cmocka_unit_test(test_leading_dims),
    cmocka_unit_test(test_types),
    cmocka_unit_test(test_wgrad_rules),
    cmocka_unit_test(test_dbias_rules),
    cmocka_unit_test(test_host_sizes),
    cmocka_unit_test(test_dispatch_prefers_sm90_and_tiles),
    cmocka_unit_test(test_dispatch_scale_bias_and_family),
    cmocka_unit_test(test_dispatch_refusals),
    cmocka_unit_test(test_dispatch_dbias),
    cmocka_unit_test(test_arch_and_shape),
    cmocka_unit_test(test_struct_size),
    cmocka_unit_test(test_log_env),
    cmocka_unit_test(test_default_bundle_path),
    cmocka_unit_test(test_dispatch_tuned_step),
    cmocka_unit_test(test_checked_mode_pointers),
    cmocka_unit_test(test_checked_mode_env),
    cmocka_unit_test(test_fp8),
    cmocka_unit_test(test_dispatch_fp8_and_only_kernel),
    cmocka_unit_test(test_dispatch_fp8_cublaslt))

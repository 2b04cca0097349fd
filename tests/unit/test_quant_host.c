/* SPDX-License-Identifier: Apache-2.0 */
/* test_quant_host.c — kiln_quantize's host path on the CPU, with a fake
 * driver table: which kernels it launches for each kind and type pair, in
 * what order (WEIGHTS_TENSOR: the memset of the amax slots, the amax pass,
 * the quantization walking its tiles last first, the finalize;
 * WEIGHTS_TENSOR_DELAYED: the memset of d_amax, the one pass), with what
 * grid (one wave: 132 SMs x 2 CTAs for the kernels that write, x the
 * CTAs the registers allow for the amax pass; fewer when the registers
 * allow fewer) and
 * what arguments (the layout templates/quant.cu reads, leading dimensions
 * 0 made dense).  The module is really compiled (NVRTC, no cache) and
 * loaded once, into a fake module.  The context is
 * tests/support/fake_driver.c's bare one with this test's module fakes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "fake_driver.h"

/* What the driver was asked, in order. */
typedef struct op_record {
    char what[48];           /* a kernel's name, or "memset" */
    unsigned grid, threads, smem;
    kiln_quant_args args;
    CUdeviceptr mem;         /* memset */
    size_t bytes;
} op_record;

static op_record ops[16];
static int n_ops, module_loads;
static char fn_names[32][48];
static int n_fns;

static CUresult fake_load(CUmodule *m, const void *image)
{
    assert_memory_equal(image, "\x7f" "ELF", 4); /* a real cubin came through the store */
    module_loads++;
    *m = (CUmodule)(uintptr_t)0x11;
    return CUDA_SUCCESS;
}

static CUresult fake_unload(CUmodule m)
{
    (void)m;
    return CUDA_SUCCESS;
}

/* A function handle is its name's index + 1. */
static CUresult fake_get_function(CUfunction *f, CUmodule m, const char *name)
{
    assert_true(m == (CUmodule)(uintptr_t)0x11);
    assert_true(n_fns < 32);
    snprintf(fn_names[n_fns], sizeof fn_names[0], "%s", name);
    *f = (CUfunction)(uintptr_t)++n_fns;
    return CUDA_SUCCESS;
}

static int fake_regs = 60; /* allocated as 64: 4 CTAs of 256 threads per SM */

static CUresult fake_attribute(int *v, CUfunction_attribute a, CUfunction f)
{
    (void)f;
    assert_int_equal(a, CU_FUNC_ATTRIBUTE_NUM_REGS);
    *v = fake_regs;
    return CUDA_SUCCESS;
}

static CUresult fake_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                            void **extra)
{
    (void)s;
    assert_true(n_ops < 16);
    assert_true(gy == 1 && gz == 1 && by == 1 && bz == 1 && !extra);
    op_record *r = &ops[n_ops++];
    memset(r, 0, sizeof *r);
    snprintf(r->what, sizeof r->what, "%s", fn_names[(uintptr_t)f - 1]);
    r->grid = gx;
    r->threads = bx;
    r->smem = smem;
    memcpy(&r->args, params[0], sizeof r->args);
    return CUDA_SUCCESS;
}

static CUresult fake_memset(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
    (void)s;
    assert_int_equal(v, 0);
    op_record *r = &ops[n_ops++];
    memset(r, 0, sizeof *r);
    snprintf(r->what, sizeof r->what, "memset");
    r->mem = p;
    r->bytes = n;
    return CUDA_SUCCESS;
}

static kiln_context *quant_context(int cc_minor)
{
    kiln_device_limits dev = {cc_minor == 0 ? 9 : 8, cc_minor, 132, "sm_90a", {0}};
    if (cc_minor) snprintf(dev.arch, sizeof dev.arch, "sm_8%d", cc_minor);
    kiln_context *ctx = fake_context_bare(dev);
    assert_non_null(ctx);
    ctx->drv.cuModuleLoadData = fake_load;
    ctx->drv.cuModuleUnload = fake_unload;
    ctx->drv.cuModuleGetFunction = fake_get_function;
    ctx->drv.cuFuncGetAttribute = fake_attribute;
    ctx->drv.cuLaunchKernel = fake_launch;
    ctx->drv.cuMemsetD8Async = fake_memset;
    return ctx;
}

static void free_context(kiln_context *ctx)
{
    kiln_quant_rt_destroy(ctx->quant, &ctx->env);
    fake_context_free(ctx);
}

static void quantize(kiln_context *ctx, const kiln_quant *q)
{
    n_ops = 0;
    kiln_status st = kiln_quantize(ctx, q, NULL);
    if (st != KILN_OK) fail_msg("kiln_quantize: %s", kiln_last_error(ctx));
}

/* The shape of a call: groups (0: kiln_quant_init's), rows and columns. */
static void set_shape(kiln_quant *q, int groups, int64_t rows, int64_t cols)
{
    q->groups = groups;
    q->rows = rows;
    q->cols = cols;
}

static kiln_quant base(kiln_quant_kind kind, int groups, int64_t rows, int64_t cols)
{
    kiln_quant q;
    kiln_quant_init(&q, kind);
    q.d_in = FAKE(0x100000);
    q.d_out = FAKE(0x200000);
    q.d_scale = FAKE(0x300000);
    set_shape(&q, groups, rows, cols);
    return q;
}

static void expect_op(int i, const char *what, unsigned grid)
{
    if (i >= n_ops) fail_msg("op %d: none (%d ops), expected %s", i, n_ops, what);
    if (strcmp(ops[i].what, what) || (grid && ops[i].grid != grid))
        fail_msg("op %d: %s on %u CTAs, expected %s on %u", i, ops[i].what, ops[i].grid, what, grid);
    if (strcmp(what, "memset")) assert_int_equal(ops[i].threads, 256);
}

/* Op i zeroes `bytes` bytes at `mem` (the amax slots). */
static void expect_memset(int i, uintptr_t mem, size_t bytes)
{
    expect_op(i, "memset", 0);
    assert_int_equal(ops[i].mem, mem);
    assert_int_equal(ops[i].bytes, bytes);
}

static void test_rows_kinds(void **state)
{
    (void)state;
    kiln_context *ctx = quant_context(0);
    kiln_quant q = base(KILN_QUANT_ROWS, 32, 32768, 7168);
    q.d_sizes = FAKE(0x400000);
    quantize(ctx, &q);
    assert_int_equal(module_loads, 1);
    assert_int_equal(ctx->stats.nvrtc_compiles, 1);
    assert_int_equal(n_ops, 1);
    expect_op(0, "kiln_quant_rows_bf16_e4m3", 132 * 2);
    const kiln_quant_args *a = &ops[0].args;
    assert_ptr_equal(a->in, q.d_in);
    assert_ptr_equal(a->out, q.d_out);
    assert_ptr_equal(a->scale, q.d_scale);
    assert_ptr_equal(a->sizes, q.d_sizes);
    assert_null(a->out_t);
    assert_int_equal(a->rows, 32768);
    assert_int_equal(a->cols, 7168);
    assert_int_equal(a->ld_in, 7168);
    assert_int_equal(a->ld_out, 7168);
    assert_int_equal(a->groups, 32);
    assert_int_equal(a->sizes_are_offsets, 0);
    assert_int_equal(a->tpr, 128); /* 448 units: 128 threads of 3.5 */

    /* A small row: one warp a row, 8 rows a CTA, 10 CTAs for 77 rows. */
    q.rows = 77;
    q.cols = 400;
    q.in_type = KILN_DTYPE_F16;
    q.out_type = KILN_DTYPE_E5M2;
    q.ld_in = 408;
    q.ld_out = 416;
    q.sizes_kind = KILN_SIZES_OFFSETS;
    quantize(ctx, &q);
    expect_op(0, "kiln_quant_rows_fp16_e5m2", 10);
    assert_int_equal(ops[0].args.tpr, 32);
    assert_int_equal(ops[0].args.ld_in, 408);
    assert_int_equal(ops[0].args.ld_out, 416);
    assert_int_equal(ops[0].args.sizes_are_offsets, 1);

    /* 1x128: a CTA per tile of 32 rows x 512 columns (4 k-blocks), at most
     * one wave; ld_scale 0 is the capacity. */
    q = base(KILN_QUANT_ROWS_1X128, 0, 300, 272);
    quantize(ctx, &q);
    expect_op(0, "kiln_quant_rows_1x128_bf16_e4m3", 10); /* 10 row blocks x 1 */
    assert_int_equal(ops[0].args.ld_scale, 300);
    assert_null(ops[0].args.sizes);
    assert_int_equal(ops[0].args.groups, 0);
    q.ld_scale = 304;
    quantize(ctx, &q);
    assert_int_equal(ops[0].args.ld_scale, 304);
    q.ld_scale = 0;
    q.rows = 1000;
    q.cols = 1040; /* 32 row blocks x 3 (1040 columns: 9 k-blocks) */
    quantize(ctx, &q);
    expect_op(0, "kiln_quant_rows_1x128_bf16_e4m3", 96);
    q.rows = 32768;
    q.cols = 7168; /* 1024 x 14 tiles: one wave */
    quantize(ctx, &q);
    expect_op(0, "kiln_quant_rows_1x128_bf16_e4m3", 132 * 2);

    /* No capacity: nothing launched. */
    q.rows = 0;
    q.ld_scale = 0;
    quantize(ctx, &q);
    assert_int_equal(n_ops, 0);
    /* One module for every kind: loaded once. */
    assert_int_equal(module_loads, 1);
    assert_int_equal(ctx->stats.nvrtc_compiles, 1);
    free_context(ctx);
}

static void test_weights_kinds(void **state)
{
    (void)state;
    module_loads = 0;
    kiln_context *ctx = quant_context(0);
    kiln_quant q = base(KILN_QUANT_WEIGHTS_128X128, 32, 4096, 7168);
    q.d_out_t = FAKE(0x500000);
    q.d_scale_t = FAKE(0x600000);
    quantize(ctx, &q);
    assert_int_equal(n_ops, 1);
    expect_op(0, "kiln_quant_tiles_bf16_e4m3", 132 * 2);
    assert_ptr_equal(ops[0].args.out_t, q.d_out_t);
    assert_ptr_equal(ops[0].args.scale_t, q.d_scale_t);
    assert_int_equal(ops[0].args.reverse, 0);
    set_shape(&q, 2, 200, 400); /* 2 x 2 x 4 tiles */
    q.d_out_t = NULL;
    q.d_scale_t = NULL;
    quantize(ctx, &q);
    expect_op(0, "kiln_quant_tiles_bf16_e4m3", 16);

    /* Per tensor: zero the amax slots, amax, quantize (last tile first),
     * finalize. */
    q = base(KILN_QUANT_WEIGHTS_TENSOR, 300, 208, 272);
    q.in_type = KILN_DTYPE_F16;
    q.out_type = KILN_DTYPE_E5M2;
    q.d_out_t = FAKE(0x500000);
    q.d_scale_t = FAKE(0x600000);
    quantize(ctx, &q);
    assert_int_equal(n_ops, 4);
    expect_memset(0, 0x300000, 300 * 4);
    expect_op(1, "kiln_quant_amax_fp16", 132 * 4); /* 62400 rows / 64 a CTA step */
    assert_int_equal(ops[1].args.reverse, 0);
    expect_op(2, "kiln_quant_tensor_fp16_e5m2", 132 * 2);
    assert_int_equal(ops[2].args.reverse, 1);
    expect_op(3, "kiln_quant_finalize_e5m2", 2);  /* 300 groups / 256 a CTA */
    for (int i = 1; i < 4; i++) {
        assert_ptr_equal(ops[i].args.scale, q.d_scale);
        assert_ptr_equal(ops[i].args.scale_t, q.d_scale_t);
        assert_int_equal(ops[i].args.groups, 300);
    }
    assert_int_equal(module_loads, 1);

    /* Delayed: zero the amax slots, then one pass in order with the given
     * scales. */
    q = base(KILN_QUANT_WEIGHTS_TENSOR_DELAYED, 32, 4096, 7168);
    q.d_out_t = FAKE(0x500000);
    q.d_amax = FAKE(0x700000);
    quantize(ctx, &q);
    assert_int_equal(n_ops, 2);
    expect_memset(0, 0x700000, 32 * 4);
    expect_op(1, "kiln_quant_delayed_bf16_e4m3", 132 * 2);
    assert_ptr_equal(ops[1].args.scale, q.d_scale);
    assert_ptr_equal(ops[1].args.amax, q.d_amax);
    assert_ptr_equal(ops[1].args.out_t, q.d_out_t);
    assert_null(ops[1].args.scale_t);
    assert_int_equal(ops[1].args.reverse, 0);
    assert_int_equal(ops[1].args.groups, 32);
    set_shape(&q, 2, 200, 400); /* 2 x 2 x 4 tiles */
    q.d_out_t = NULL;
    q.in_type = KILN_DTYPE_F16;
    quantize(ctx, &q);
    expect_memset(0, 0x700000, 2 * 4);
    expect_op(1, "kiln_quant_delayed_fp16_e4m3", 16);
    assert_int_equal(module_loads, 1);
    free_context(ctx);

    /* Registers for one CTA per SM (168, allocated as 168): a wave is 132,
     * below the 2 the writers would take. */
    fake_regs = 168;
    ctx = quant_context(0);
    q = base(KILN_QUANT_WEIGHTS_128X128, 32, 4096, 7168);
    quantize(ctx, &q);
    expect_op(0, "kiln_quant_tiles_bf16_e4m3", 132);
    free_context(ctx);
    fake_regs = 60;
}

/* Before sm_89 (no fp8 conversions): refused, nothing compiled or run. */
static void test_old_device(void **state)
{
    (void)state;
    module_loads = 0;
    kiln_context *ctx = quant_context(6);
    kiln_quant q = base(KILN_QUANT_ROWS, 0, 10, 16);
    n_ops = 0;
    assert_int_equal(kiln_quantize(ctx, &q, NULL), KILN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(kiln_last_error(ctx), "needs sm_89 or later"));
    assert_non_null(strstr(kiln_last_error(ctx), "sm_86"));
    assert_int_equal(n_ops, 0);
    assert_int_equal(module_loads, 0);
    free_context(ctx);
}

KILN_TEST_MAIN(
    cmocka_unit_test(test_rows_kinds),
    cmocka_unit_test(test_weights_kinds),
    cmocka_unit_test(test_old_device))

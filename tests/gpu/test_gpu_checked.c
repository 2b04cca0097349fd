/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_checked.c — the checked mode (kiln_context_options.checked,
 * KILN_CHECK=1) on a GPU: a host pointer as d_a and an allocation too small
 * for the call are refused with a message naming the argument, before any
 * launch (the output stays poison, the CUDA context stays usable); a good
 * call passes.  Exits 77 without a GPU. */
#include "testutil.h"

#include "gpu_util.h"

enum { G = 4, N = 64, K = 64, CAP = 256 };

typedef struct fx {
    CUdeviceptr dX, dW, dY, dsz;
    size_t ybytes;
    kiln_problem p;
} fx;

static void fx_init(fx *f)
{
    memset(f, 0, sizeof *f);
    int32_t counts[G] = {50, 0, 100, 70};
    f->dX = dev_alloc((size_t)CAP * K * 2);
    f->dW = dev_alloc((size_t)G * N * K * 2);
    CU(g_drv.cuMemsetD8(f->dX, 0, (size_t)CAP * K * 2));
    CU(g_drv.cuMemsetD8(f->dW, 0, (size_t)G * N * K * 2));
    f->ybytes = (size_t)CAP * N * 2;
    f->dY = dev_alloc(f->ybytes);
    poison(f->dY, f->ybytes);
    f->dsz = dev_alloc(sizeof counts);
    upload(f->dsz, counts, sizeof counts);
    kts_problem_init(&f->p, KILN_OP_FPROP, G, N, K, CAP, f->dsz, f->dX, f->dW, f->dY);
}

static void fx_free(fx *f) { DEV_FREE_ALL(f->dX, f->dW, f->dY, f->dsz); }

static kiln_context *make_ctx(int checked)
{
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.checked = checked;
    kiln_context *ctx = NULL;
    if (kiln_context_create(&o, &ctx) != KILN_OK)
        fail_msg("kiln_context_create: %s", kiln_last_error(ctx));
    return ctx;
}

/* Each test's checked context and fixture: made before it (env_setup),
 * freed after it (env_teardown). */
typedef struct env {
    kiln_context *ctx;
    fx f;
} env;

static int env_setup(void **state)
{
    env *e = xmalloc(sizeof *e);
    *state = e;
    e->ctx = make_ctx(1);
    fx_init(&e->f);
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    fx_free(&e->f);
    kiln_context_destroy(e->ctx);
    free(e);
    return 0;
}

#define checked_test(f) cmocka_unit_test_setup_teardown(f, env_setup, env_teardown)

/* A refused call: the status, the message naming `arg`, no launch, Y poison. */
static void expect_refused(kiln_context *ctx, const fx *f, const kiln_problem *p, const char *arg)
{
    kiln_context_stats before, after;
    kiln_context_stats_get(ctx, &before);
    kiln_status st = kiln_gemm(ctx, p, NULL);
    const char *msg = kiln_last_error(ctx);
    printf("  refused: %s\n", msg);
    if (st != KILN_ERROR_INVALID_ARGUMENT || !strstr(msg, arg))
        fail_msg("expected KILN_ERROR_INVALID_ARGUMENT naming %s, got %d: %s", arg, (int)st, msg);
    kiln_context_stats_get(ctx, &after);
    assert_int_equal(after.launches, before.launches);
    CU(g_drv.cuCtxSynchronize());
    uint8_t *y = xmalloc(f->ybytes);
    download(y, f->dY, f->ybytes);
    for (size_t i = 0; i < f->ybytes; i++)
        if (y[i] != KTS_POISON) fail_msg("Y byte %zu written by a refused call", i);
    free(y);
}

static void test_host_pointer_refused(void **state)
{
    env *e = *state;
    kiln_context *ctx = e->ctx;
    const fx f = e->f;
    void *host = NULL;
    assert_int_equal(posix_memalign(&host, 256, (size_t)CAP * K * 2), 0);
    memset(host, 0, (size_t)CAP * K * 2);
    kiln_problem p = f.p;
    p.d_a = host;
    expect_refused(ctx, &f, &p, "problem->d_a");
    assert_non_null(strstr(kiln_last_error(ctx), "not device memory"));
    free(host);
    /* KILN_CHECK=1 turns it on for a context whose options do not. */
    setenv("KILN_CHECK", "1", 1);
    kiln_context *env_ctx = make_ctx(0);
    unsetenv("KILN_CHECK");
    void *h2 = NULL;
    assert_int_equal(posix_memalign(&h2, 256, f.ybytes), 0);
    p = f.p;
    p.d_out = h2;
    expect_refused(env_ctx, &f, &p, "problem->d_out");
    free(h2);
    kiln_context_destroy(env_ctx);
}

static void test_too_small_refused(void **state)
{
    env *e = *state;
    kiln_context *ctx = e->ctx;
    const fx f = e->f;
    /* Weights for half the groups only. */
    CUdeviceptr half_w = dev_alloc((size_t)G / 2 * N * K * 2);
    kiln_problem p = f.p;
    p.d_b = (const void *)(uintptr_t)half_w;
    expect_refused(ctx, &f, &p, "problem->d_b");
    /* X for half the capacity. */
    CUdeviceptr half_x = dev_alloc((size_t)CAP / 2 * K * 2);
    p = f.p;
    p.d_a = (const void *)(uintptr_t)half_x;
    expect_refused(ctx, &f, &p, "problem->d_a");
    /* A pointer into the middle of a right-sized allocation. */
    p = f.p;
    p.d_a = (const void *)(uintptr_t)(f.dX + 4096);
    expect_refused(ctx, &f, &p, "problem->d_a");
    dev_free(half_w);
    dev_free(half_x);
}

static void test_good_call_passes(void **state)
{
    env *e = *state;
    kiln_context *ctx = e->ctx;
    const fx f = e->f;
    kiln_status st = kiln_gemm(ctx, &f.p, NULL);
    if (st != KILN_OK) fail_msg("checked good call: %s", kiln_last_error(ctx));
    CU(g_drv.cuCtxSynchronize());
    kiln_context_stats s;
    kiln_context_stats_get(ctx, &s);
    assert_int_equal(s.launches, 1);
    /* Zero inputs: the rows of the groups are zero now (Σm = 220 rows). */
    uint16_t *y = xmalloc(f.ybytes);
    download(y, f.dY, f.ybytes);
    for (size_t i = 0; i < (size_t)220 * N; i++)
        if (y[i] != 0) fail_msg("Y element %zu is 0x%04x, expected 0", i, y[i]);
    free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        checked_test(test_host_pointer_refused),
        checked_test(test_too_small_refused),
        checked_test(test_good_call_passes),
    };
    return gpu_run_group_tests(tests);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_api.c — the runtime API around the GEMMs, on a GPU: bad input is
 * refused with a message naming the argument and nothing written; CUDA-graph
 * capture and replay after the sizes changed in place; kernels load once
 * (stats, cache); backend forcing and refusals; the per-call caches
 * following changed buffers and capacity.  Exits 77 without a GPU. */
#include <pthread.h>
#include <unistd.h>

#include "testutil.h"

#include "gpu_util.h"

/* A small bf16 fprop problem with device buffers and a host reference. */
typedef struct fx {
    int G;
    int64_t N, K, cap;
    float *X, *W;
    CUdeviceptr dX, dW, dY, dsz;
    size_t ybytes;
    kiln_problem p;
} fx;

static void fx_init(fx *f, int G, int64_t N, int64_t K, int64_t cap, const int32_t *counts)
{
    memset(f, 0, sizeof *f);
    f->G = G;
    f->N = N;
    f->K = K;
    f->cap = cap;
    void *ex, *ew;
    f->X = rand_matrix(cap, K, K, KILN_DTYPE_BF16, &ex);
    f->W = rand_matrix((int64_t)G * N, K, K, KILN_DTYPE_BF16, &ew);
    f->dX = dev_alloc((size_t)(cap * K * 2));
    f->dW = dev_alloc((size_t)(G * N * K * 2));
    upload(f->dX, ex, (size_t)(cap * K * 2));
    upload(f->dW, ew, (size_t)(G * N * K * 2));
    free(ex);
    free(ew);
    f->ybytes = (size_t)(cap * N * 2);
    f->dY = dev_alloc(f->ybytes);
    poison(f->dY, f->ybytes);
    f->dsz = dev_alloc(sizeof(int32_t) * (size_t)G);
    upload(f->dsz, counts, sizeof(int32_t) * (size_t)G);
    kts_problem_init(&f->p, KILN_OP_FPROP, G, N, K, cap, f->dsz, f->dX, f->dW, f->dY);
}

static void fx_free(fx *f)
{
    FREE_ALL(f->X, f->W);
    DEV_FREE_ALL(f->dX, f->dW, f->dY, f->dsz);
}

/* bf16 outputs: within 1e-2 of the reference. */
static void check_rel(const kts_err *err, const char *what)
{
    double rel = kts_err_rel(err);
    printf("  %-50s rel err %.2e\n", what, rel);
    if (!(rel <= 1e-2)) fail_msg("%s: relative error %.3e", what, rel);
}

/* Checks Y against the reference for these counts; rows past Σm must still
 * be poison. */
static void fx_check(const fx *f, const int32_t *counts, const char *what)
{
    uint16_t *y = xmalloc(f->ybytes);
    download(y, f->dY, f->ybytes);
    int64_t *start = xmalloc(sizeof(int64_t) * (size_t)f->G), *rows = xmalloc(sizeof(int64_t) * (size_t)f->G);
    int64_t row = kts_group_rows(counts, f->G, f->cap, start, rows);
    kts_problem ref = {.op = KILN_OP_FPROP, .n = f->N, .k = f->K, .a = f->X, .b = f->W,
                       .start = start, .rows = rows, .alpha = 1.0f};
    kts_err err = {0};
    for (int g = 0; g < f->G; g++)
        for (int64_t i = 0; i < rows[g]; i++)
            for (int64_t n = 0; n < f->N; n++) {
                double got = kiln_bf16_to_f32(y[(start[g] + i) * f->N + n]);
                if (got != got)
                    fail_msg("%s: Y[%lld,%lld] not written", what, (long long)(start[g] + i), (long long)n);
                kts_err_add(&err, got, kts_reference(&ref, g, i, n));
            }
    int64_t bad = kts_first_unpoisoned(y, (size_t)(row * f->N) * 2, f->ybytes);
    if (bad >= 0) fail_msg("%s: Y element %lld past the valid rows was written", what, (long long)(bad / 2));
    check_rel(&err, what);
    free(y);
    free(start);
    free(rows);
}

static kiln_context *make_ctx(unsigned allowed, const char *cache_dir)
{
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.allowed_backends = allowed;
    o.cache_dir = cache_dir;
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&o, &ctx);
    if (st != KILN_OK) fail_msg("kiln_context_create: %s", kiln_last_error(ctx));
    return ctx;
}

/* Each bad problem: the status, a message naming the argument, Y untouched. */
static void test_bad_inputs(void **state)
{
    (void)state;
    kiln_context *ctx = make_ctx(KILN_ALLOW_ALL, NULL);
    int32_t counts[4] = {10, 20, 0, 30};
    fx f;
    fx_init(&f, 4, 64, 64, 64, counts);
    struct {
        const char *what;
        kiln_status want;
        const char *needle;
    } cases[] = {
        {"null d_a", KILN_ERROR_INVALID_ARGUMENT, "problem->d_a is NULL"},
        {"misaligned d_out", KILN_ERROR_INVALID_ARGUMENT, "problem->d_out ("},
        {"N not a multiple of 8", KILN_ERROR_INVALID_ARGUMENT, "problem->n = 60 is not a multiple of 8"},
        {"groups 0", KILN_ERROR_INVALID_ARGUMENT, "problem->groups = 0"},
        {"host sizes over capacity", KILN_ERROR_INVALID_ARGUMENT, "more than problem->capacity = 64"},
        {"accumulate into bf16", KILN_ERROR_INVALID_ARGUMENT, "accumulate is for wgrad"},
        {"no kernel and no host sizes", KILN_ERROR_UNSUPPORTED, "no host sizes for cuBLASLt"},
        {"bf16->fp16, no cuBLASLt product", KILN_ERROR_UNSUPPORTED, "cuBLASLt has no bf16→fp16 product"},
        {"ldd smaller than N", KILN_ERROR_INVALID_ARGUMENT, "problem->ldd = 32 is smaller than the row"},
        {"epilogue beta without C", KILN_ERROR_INVALID_ARGUMENT, "problem->epilogue.d_c is NULL"},
    };
    int32_t big[4] = {30, 30, 30, 30};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kiln_problem p = f.p;
        switch (i) {
        case 0: p.d_a = NULL; break;
        case 1: p.d_out = (char *)p.d_out + 2; break;
        case 2: p.n = 60; break;
        case 3: p.groups = 0; break;
        case 4: p.host_sizes = big; break;
        case 5: p.accumulate = 1; break;
        case 6: p.out_type = KILN_DTYPE_F16; break;
        case 7: p.out_type = KILN_DTYPE_F16; p.host_sizes = counts; break;
        case 8: p.ldd = 32; break;
        case 9: p.epilogue.beta = 1.0f; break;
        }
        kiln_status st = kiln_gemm(ctx, &p, NULL);
        const char *msg = kiln_last_error(ctx);
        printf("  %-34s -> %s: %s\n", cases[i].what, kiln_status_name(st), msg);
        if (st != cases[i].want || !strstr(msg, cases[i].needle))
            fail_msg("%s: got %s '%s', wanted %s containing '%s'", cases[i].what, kiln_status_name(st),
                     msg, kiln_status_name(cases[i].want), cases[i].needle);
    }
    CU(g_drv.cuCtxSynchronize());
    uint16_t *y = xmalloc(f.ybytes);
    download(y, f.dY, f.ybytes);
    int64_t bad = kts_first_unpoisoned(y, 0, f.ybytes);
    if (bad >= 0) fail_msg("a refused call wrote Y element %lld", (long long)(bad / 2));
    free(y);
    /* Shorthands check the op. */
    assert_int_equal(kiln_wgrad(ctx, &f.p, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_last_error(ctx), "kiln_wgrad: problem->op is fprop"));
    /* A good call clears the error. */
    assert_int_equal(kiln_fprop(ctx, &f.p, NULL), KILN_OK);
    assert_string_equal(kiln_last_error(ctx), "");
    CU(g_drv.cuCtxSynchronize());
    fx_check(&f, counts, "good call after refusals");
    fx_free(&f);
    kiln_context_destroy(ctx);
}

/* Capture once, replay after the sizes changed in place. */
static void test_graph_replay(void **state)
{
    (void)state;
    kiln_context *ctx = make_ctx(KILN_ALLOW_ALL, NULL);
    int32_t s1[4] = {10, 50, 0, 100}, s2[4] = {70, 0, 120, 30};
    fx f;
    fx_init(&f, 4, 128, 64, 256, s1);
    CUstream stream;
    CU(g_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    /* The stream does not wait for the legacy stream the setup used. */
    CU(g_drv.cuCtxSynchronize());
    /* Load the kernel outside the capture (first use compiles). */
    assert_int_equal(kiln_gemm(ctx, &f.p, stream), KILN_OK);
    CU(g_drv.cuStreamSynchronize(stream));
    poison(f.dY, f.ybytes);
    CU(g_drv.cuCtxSynchronize());

    CU(g_drv.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    kiln_status st = kiln_gemm(ctx, &f.p, stream);
    CUgraphExec exec;
    CUgraph graph = graph_end_capture(stream, st, ctx, "kiln_gemm", &exec);
    graph_replay(exec, stream);
    fx_check(&f, s1, "graph replay, sizes 10,50,0,100");

    upload(f.dsz, s2, sizeof s2); /* the sizes change in place */
    poison(f.dY, f.ybytes);
    CU(g_drv.cuCtxSynchronize());
    graph_replay(exec, stream);
    fx_check(&f, s2, "graph replay, sizes changed to 70,0,120,30");

    /* cuBLASLt is refused under capture (it reads host sizes). */
    kiln_context *lt = make_ctx(KILN_ALLOW_CUBLASLT, NULL);
    kiln_problem p = f.p;
    p.host_sizes = s2;
    CU(g_drv.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    st = kiln_gemm(lt, &p, stream);
    CUgraph g2;
    g_drv.cuStreamEndCapture(stream, &g2);
    if (g2) g_drv.cuGraphDestroy(g2);
    assert_int_equal(st, KILN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(kiln_last_error(lt), "capturing"));
    kiln_context_destroy(lt);

    graph_destroy(exec, graph, stream);
    fx_free(&f);
    kiln_context_destroy(ctx);
}


/* wgrad captured in a graph, replayed after the group sizes changed in
 * place: dW_g = dY_gᵀ·X_g for the new sizes, and an emptied group gets
 * exact zeros. */
static void check_wgrad(const float *dy, const float *x, CUdeviceptr ddw, const int32_t *m, int G,
                        int N, int K, const char *what)
{
    uint16_t *dw = xmalloc((size_t)G * N * K * 2);
    download(dw, ddw, (size_t)G * N * K * 2);
    int64_t *start = xmalloc(sizeof(int64_t) * (size_t)G), *rows = xmalloc(sizeof(int64_t) * (size_t)G);
    kts_group_rows(m, G, INT64_MAX, start, rows);
    kts_problem ref = {.op = KILN_OP_WGRAD, .n = N, .k = K, .a = dy, .b = x, .start = start,
                       .rows = rows};
    kts_err err = {0};
    for (int g = 0; g < G; g++)
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++) {
                uint16_t bits = dw[((size_t)g * N + n) * K + k];
                if (m[g] == 0 && bits != 0)
                    fail_msg("%s: group %d is empty but dW[%d,%d] = 0x%04x, not zero", what, g, n, k, bits);
                double got = kiln_bf16_to_f32(bits);
                if (got != got) fail_msg("%s: dW[%d,%d,%d] not written", what, g, n, k);
                kts_err_add(&err, got, kts_reference(&ref, g, n, k));
            }
    check_rel(&err, what);
    free(dw);
    free(start);
    free(rows);
}

static void test_graph_replay_wgrad(void **state)
{
    (void)state;
    enum { G = 4, N = 128, K = 64, CAP = 256 };
    kiln_context *ctx = make_ctx(KILN_ALLOW_GENERATED, NULL);
    int32_t s1[G] = {10, 50, 0, 100}, s2[G] = {70, 0, 120, 30};
    void *edy, *ex;
    float *dy = rand_matrix(CAP, N, N, KILN_DTYPE_BF16, &edy);
    float *x = rand_matrix(CAP, K, K, KILN_DTYPE_BF16, &ex);
    CUdeviceptr ddy = dev_alloc(CAP * N * 2), dx = dev_alloc(CAP * K * 2);
    CUdeviceptr ddw = dev_alloc(G * N * K * 2), dsz = dev_alloc(sizeof s1);
    upload(ddy, edy, CAP * N * 2);
    upload(dx, ex, CAP * K * 2);
    upload(dsz, s1, sizeof s1);
    kiln_problem p;
    kts_problem_init(&p, KILN_OP_WGRAD, G, N, K, CAP, dsz, ddy, dx, ddw);
    CUstream stream;
    CU(g_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CU(g_drv.cuCtxSynchronize());
    assert_int_equal(kiln_gemm(ctx, &p, stream), KILN_OK); /* load outside the capture */
    CU(g_drv.cuStreamSynchronize(stream));
    kiln_call_report rep;
    kiln_last_call(ctx, &rep);
    printf("  wgrad served by %s\n", rep.kernel);

    CU(g_drv.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    kiln_status st = kiln_gemm(ctx, &p, stream);
    CUgraphExec exec;
    CUgraph graph = graph_end_capture(stream, st, ctx, "kiln_gemm", &exec);
    poison(ddw, G * N * K * 2);
    CU(g_drv.cuCtxSynchronize());
    graph_replay(exec, stream);
    check_wgrad(dy, x, ddw, s1, G, N, K, "wgrad graph replay, sizes 10,50,0,100");

    upload(dsz, s2, sizeof s2);
    poison(ddw, G * N * K * 2);
    CU(g_drv.cuCtxSynchronize());
    graph_replay(exec, stream);
    check_wgrad(dy, x, ddw, s2, G, N, K, "wgrad graph replay, sizes changed to 70,0,120,30");

    graph_destroy(exec, graph, stream);
    FREE_ALL(dy, x, edy, ex);
    DEV_FREE_ALL(ddy, dx, ddw, dsz);
    kiln_context_destroy(ctx);
}

static char g_log[4096];

static void log_hook(void *user, kiln_log_level level, const char *message)
{
    (void)user;
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "[%d] %s\n", (int)level, message);
}

/* Compiled once, then served from memory; a second context hits the cache. */
static void test_stats_and_cache(void **state)
{
    const char *dir = *state;
    /* This test is about the compile-then-cache path: a bundle named in the
     * environment (the suite runs once with one) would serve the kernel. */
    char *bundles = getenv("KILN_BUNDLE_PATH") ? strdup(getenv("KILN_BUNDLE_PATH")) : NULL;
    unsetenv("KILN_BUNDLE_PATH");
    int32_t counts[2] = {33, 17};
    fx f;
    fx_init(&f, 2, 64, 64, 64, counts);
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.allowed_backends = KILN_ALLOW_GENERATED;
    o.cache_dir = dir;
    o.log = log_hook;
    o.log_level = KILN_LOG_INFO;
    g_log[0] = '\0';
    kiln_context *a = NULL;
    if (kiln_context_create(&o, &a) != KILN_OK) fail_msg("kiln_context_create: %s", kiln_last_error(a));
    kiln_context_stats s;
    double t0 = kiln_now();
    assert_int_equal(kiln_gemm(a, &f.p, NULL), KILN_OK);
    double t1 = kiln_now();
    assert_int_equal(kiln_gemm(a, &f.p, NULL), KILN_OK);
    double t2 = kiln_now();
    assert_int_equal(kiln_context_stats_get(a, &s), KILN_OK);
    printf("  first call %.3f s (compile), second %.6f s; compiles %llu, hits %llu, launches %llu\n",
           t1 - t0, t2 - t1, (unsigned long long)s.nvrtc_compiles, (unsigned long long)s.cache_hits,
           (unsigned long long)s.launches);
    assert_int_equal(s.nvrtc_compiles, 1);
    assert_int_equal(s.cache_hits, 0);
    assert_int_equal(s.bundle_hits, 0);
    assert_int_equal(s.launches, 2);
    /* Host cost of a warm call: no file I/O, no hashing, no allocation. */
    const int calls = 2000;
    double t3 = kiln_now();
    for (int i = 0; i < calls; i++) assert_int_equal(kiln_gemm(a, &f.p, NULL), KILN_OK);
    double t4 = kiln_now();
    CU(g_drv.cuCtxSynchronize());
    printf("  warm kiln_gemm: %.2f us of host time per call (%d calls)\n", (t4 - t3) / calls * 1e6, calls);
    kiln_call_report rep;
    assert_int_equal(kiln_last_call(a, &rep), KILN_OK);
    assert_int_equal(rep.backend, KILN_BACKEND_GENERATED);
    printf("  last call: %s — %s\n", rep.kernel, rep.reason);
    /* The log hook saw the compile of the kernel that served the call (which
     * one depends on the catalog: simple, or sm90 where it has one). */
    printf("  log: %s", g_log);
    char want[192];
    snprintf(want, sizeof want, "compiled %s for ", rep.kernel);
    assert_non_null(strstr(g_log, want));
    CU(g_drv.cuCtxSynchronize());
    fx_check(&f, counts, "after repeated calls");

    kiln_context *b = make_ctx(KILN_ALLOW_GENERATED, dir);
    assert_int_equal(kiln_gemm(b, &f.p, NULL), KILN_OK);
    assert_int_equal(kiln_context_stats_get(b, &s), KILN_OK);
    assert_int_equal(s.nvrtc_compiles, 0);
    assert_int_equal(s.cache_hits, 1);
    kiln_context_destroy(b);
    kiln_context_destroy(a);
    fx_free(&f);
    if (bundles) setenv("KILN_BUNDLE_PATH", bundles, 1);
    free(bundles);
}

typedef struct worker {
    kiln_context *ctx;
    kiln_problem p;
    CUstream stream;
    int failures;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 50; i++)
        if (kiln_gemm(w->ctx, &w->p, w->stream) != KILN_OK) w->failures++;
    return NULL;
}

/* One context used from several threads at once (the lock serialises). */
static void test_threads(void **state)
{
    (void)state;
    enum { T = 4 };
    kiln_context *ctx = make_ctx(KILN_ALLOW_GENERATED, NULL);
    fx f[T];
    worker w[T];
    int32_t counts[T][3];
    for (int t = 0; t < T; t++) {
        for (int g = 0; g < 3; g++) counts[t][g] = rng_int(0, 60);
        fx_init(&f[t], 3, 64 + 64 * (t & 1), 64, 200, counts[t]);
        w[t].ctx = ctx;
        w[t].p = f[t].p;
        w[t].failures = 0;
        CU(g_drv.cuStreamCreate(&w[t].stream, CU_STREAM_NON_BLOCKING));
    }
    CU(g_drv.cuCtxSynchronize());
    pthread_t th[T];
    for (int t = 0; t < T; t++) pthread_create(&th[t], NULL, worker_main, &w[t]);
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    CU(g_drv.cuCtxSynchronize());
    kiln_context_stats s;
    kiln_context_stats_get(ctx, &s);
    uint64_t loads = s.nvrtc_compiles + s.cache_hits + s.bundle_hits;
    printf("  %d threads x 50 calls: launches %llu, kernel loads %llu\n", T,
           (unsigned long long)s.launches, (unsigned long long)loads);
    assert_int_equal(s.launches, T * 50);
    assert_int_equal(loads, 1); /* one kernel, loaded once (compiled, cache or bundle) */
    for (int t = 0; t < T; t++) {
        assert_int_equal(w[t].failures, 0);
        char what[64];
        snprintf(what, sizeof what, "thread %d", t);
        fx_check(&f[t], counts[t], what);
        g_drv.cuStreamDestroy(w[t].stream);
        fx_free(&f[t]);
    }
    kiln_context_destroy(ctx);
}

/* KILN_BACKEND forces a path; a bad value is an error at creation. */
static void test_backend_env(void **state)
{
    (void)state;
    int32_t counts[2] = {5, 7};
    fx f;
    fx_init(&f, 2, 64, 64, 16, counts);
    f.p.host_sizes = counts;
    setenv("KILN_BACKEND", "cublaslt", 1);
    kiln_context *ctx = make_ctx(KILN_ALLOW_ALL, NULL);
    assert_int_equal(kiln_gemm(ctx, &f.p, NULL), KILN_OK);
    kiln_call_report rep;
    assert_int_equal(kiln_last_call(ctx, &rep), KILN_OK);
    assert_int_equal(rep.backend, KILN_BACKEND_CUBLASLT);
    assert_string_equal(rep.kernel, "cublasLt");
    CU(g_drv.cuCtxSynchronize());
    fx_check(&f, counts, "KILN_BACKEND=cublaslt");
    kiln_context_destroy(ctx);

    setenv("KILN_BACKEND", "generated", 1);
    ctx = make_ctx(KILN_ALLOW_ALL, NULL);
    f.p.out_type = KILN_DTYPE_F16; /* no generated kernel: cuBLASLt would not be allowed either */
    assert_int_equal(kiln_gemm(ctx, &f.p, NULL), KILN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(kiln_last_error(ctx), "KILN_BACKEND=generated"));
    kiln_context_destroy(ctx);

    setenv("KILN_BACKEND", "magic", 1);
    kiln_context *bad = NULL;
    assert_int_equal(kiln_context_create(NULL, &bad), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_last_error(bad), "KILN_BACKEND=magic"));
    kiln_context_destroy(bad);
    unsetenv("KILN_BACKEND");

    kiln_context_options o;
    kiln_context_options_init(&o);
    o.device = 99;
    assert_int_equal(kiln_context_create(&o, &bad), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_last_error(bad), "options->device = 99"));
    kiln_context_destroy(bad);
    fx_free(&f);
}

/* Poisons v's output, runs v->p on ctx with these counts, and checks it
 * against v's reference. */
static void call_and_check(kiln_context *ctx, fx *v, const int32_t *counts, const char *what)
{
    upload(v->dsz, counts, sizeof(int32_t) * (size_t)v->G);
    poison(v->dY, v->ybytes);
    CU(g_drv.cuCtxSynchronize());
    if (kiln_gemm(ctx, &v->p, NULL) != KILN_OK) fail_msg("%s: %s", what, kiln_last_error(ctx));
    CU(g_drv.cuCtxSynchronize());
    fx_check(v, counts, what);
}

/* The per-call caches (dispatch memo, tensor maps: docs/architecture.md
 * "Host time") follow the buffers and the capacity: one problem called
 * again with another d_a, another d_b, a smaller and then a larger
 * capacity over the same buffers, and back to earlier ones.  A stale map
 * would read the old buffer, or clip rows past the old capacity. */
static void test_host_caches_follow_buffers(void **state)
{
    (void)state;
    kiln_context *ctx = make_ctx(KILN_ALLOW_GENERATED, NULL);
    int32_t c1[4] = {60, 0, 100, 90}, c2[4] = {100, 90, 0, 170}; /* 250 and 360 rows */
    fx a, b, other;
    fx_init(&a, 4, 128, 64, 256, c1);
    fx_init(&b, 4, 128, 64, 384, c2);
    fx_init(&other, 4, 128, 64, 256, c1);
    call_and_check(ctx, &a, c1, "first problem (capacity 256)");
    kiln_call_report rep;
    kiln_last_call(ctx, &rep);
    printf("  served by %s\n", rep.kernel);
    call_and_check(ctx, &a, c1, "first problem again");
    /* The first problem with another X (d_a) ... */
    fx v = a;
    v.X = other.X;
    v.p.d_a = (const void *)(uintptr_t)other.dX;
    call_and_check(ctx, &v, c1, "same problem, other d_a");
    /* ... and another W (d_b). */
    v = a;
    v.W = other.W;
    v.p.d_b = (const void *)(uintptr_t)other.dW;
    call_and_check(ctx, &v, c1, "same problem, other d_b");
    call_and_check(ctx, &a, c1, "first problem, third time");
    /* b's 384-row buffers, first called with capacity 256, then 384 (a map
     * kept from the first would clip rows 256..359), then 256 again. */
    v = b;
    v.cap = 256;
    v.p.capacity = 256;
    call_and_check(ctx, &v, c1, "other buffers, capacity 256");
    call_and_check(ctx, &b, c2, "same buffers, capacity 256 -> 384");
    call_and_check(ctx, &v, c1, "same buffers, capacity 384 -> 256");
    fx_free(&a);
    fx_free(&b);
    fx_free(&other);
    kiln_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_graph_replay),
        cmocka_unit_test(test_graph_replay_wgrad),
        kiln_test_with_dir(test_stats_and_cache),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_backend_env),
        cmocka_unit_test(test_host_caches_follow_buffers),
    };
    return gpu_run_group_tests(tests);
}

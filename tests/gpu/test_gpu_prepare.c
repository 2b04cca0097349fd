/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_prepare.c — kiln_prepare before CUDA-graph capture, on a GPU:
 * prepare loads the kernels fprop, dgrad and wgrad will use and launches
 * nothing; the captured calls then compile and load nothing (the context's
 * stats prove it), and the replayed graph computes the right products.
 * Also KILN_LOG=info with no hook: one dispatch line per call on stderr.
 * Exits 77 without a GPU. */
#include <fcntl.h>
#include <unistd.h>

#include "testutil.h"

#include "gpu_util.h"
#include "half.h"

enum { G = 2, N = 64, K = 64, CAP = 64 };
static const int32_t k_counts[G] = {40, 24};

/* One op's problem with its device buffers and host inputs. */
typedef struct op_case {
    kiln_op op;
    float *a, *b;              /* host copies of the inputs */
    int64_t a_cols, b_rows, out_elems;
    CUdeviceptr da, db, dout, dsz;
    kiln_problem p;
} op_case;

static void case_init(op_case *c, kiln_op op)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->a_cols = op == KILN_OP_FPROP ? K : N;
    c->b_rows = op == KILN_OP_WGRAD ? CAP : (int64_t)G * N;
    c->out_elems = op == KILN_OP_WGRAD ? (int64_t)G * N * K : CAP * (op == KILN_OP_FPROP ? N : K);
    void *ea, *eb;
    c->a = rand_matrix(CAP, c->a_cols, c->a_cols, KILN_DTYPE_BF16, &ea);
    c->b = rand_matrix(c->b_rows, K, K, KILN_DTYPE_BF16, &eb);
    c->da = dev_alloc((size_t)(CAP * c->a_cols * 2));
    c->db = dev_alloc((size_t)(c->b_rows * K * 2));
    c->dout = dev_alloc((size_t)c->out_elems * 2);
    c->dsz = dev_alloc(sizeof k_counts);
    upload(c->da, ea, (size_t)(CAP * c->a_cols * 2));
    upload(c->db, eb, (size_t)(c->b_rows * K * 2));
    upload(c->dsz, k_counts, sizeof k_counts);
    free(ea);
    free(eb);
    kiln_problem_init(&c->p, op);
    c->p.groups = G;
    c->p.n = N;
    c->p.k = K;
    c->p.capacity = CAP;
    c->p.d_sizes = (const int32_t *)(uintptr_t)c->dsz;
    c->p.d_a = (const void *)(uintptr_t)c->da;
    c->p.d_b = (const void *)(uintptr_t)c->db;
    c->p.d_out = (void *)(uintptr_t)c->dout;
}

static void case_free(op_case *c)
{
    free(c->a);
    free(c->b);
    dev_free(c->da);
    dev_free(c->db);
    dev_free(c->dout);
    dev_free(c->dsz);
}

/* The product of output element (group g, row r of the output, column j). */
static double reference(const op_case *c, int g, int64_t r, int64_t j, int64_t row0)
{
    double acc = 0;
    if (c->op == KILN_OP_FPROP) /* Y[r,n] = Σk X[r,k] W[g,n,k] */
        for (int64_t k = 0; k < K; k++) acc += (double)c->a[r * K + k] * c->b[((int64_t)g * N + j) * K + k];
    else if (c->op == KILN_OP_DGRAD) /* dX[r,k] = Σn dY[r,n] W[g,n,k] */
        for (int64_t n = 0; n < N; n++) acc += (double)c->a[r * N + n] * c->b[((int64_t)g * N + n) * K + j];
    else /* dW[g,n,k] = Σ rows of g dY[r,n] X[r,k]; r is n here, j is k */
        for (int64_t t = row0; t < row0 + k_counts[g]; t++)
            acc += (double)c->a[t * N + r] * c->b[t * K + j];
    return acc;
}

static void case_check(const op_case *c)
{
    uint16_t *out = xmalloc((size_t)c->out_elems * 2);
    download(out, c->dout, (size_t)c->out_elems * 2);
    double num = 0, den = 0;
    int64_t row0 = 0;
    for (int g = 0; g < G; g++) {
        int64_t rows = c->op == KILN_OP_WGRAD ? N : k_counts[g];
        int64_t cols = c->op == KILN_OP_FPROP ? N : K;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                int64_t r = c->op == KILN_OP_WGRAD ? i : row0 + i;
                int64_t at = c->op == KILN_OP_WGRAD ? ((int64_t)g * N + i) * K + j : r * cols + j;
                double want = reference(c, g, r, j, row0);
                double got = kiln_bf16_to_f32(out[at]);
                if (got != got) fail_msg("%s: output element %lld not written", kiln_op_name(c->op), (long long)at);
                num += (got - want) * (got - want);
                den += want * want;
            }
        row0 += k_counts[g];
    }
    double rel = sqrt(num / den);
    printf("  %-8s replayed from the graph: rel err %.2e\n", kiln_op_name(c->op), rel);
    if (!(rel <= 1e-2)) fail_msg("%s: relative error %.3e", kiln_op_name(c->op), rel);
    free(out);
}

static kiln_context *make_ctx(const char *cache_dir)
{
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.allowed_backends = KILN_ALLOW_GENERATED; /* cuBLASLt cannot be captured */
    o.cache_dir = cache_dir;
    kiln_context *ctx = NULL;
    if (kiln_context_create(&o, &ctx) != KILN_OK) fail_msg("kiln_context_create: %s", kiln_last_error(ctx));
    return ctx;
}

static uint64_t loads(const kiln_context_stats *s)
{
    return s->nvrtc_compiles + s->cache_hits + s->bundle_hits;
}

static void test_prepare_then_capture(void **state)
{
    (void)state;
    char *dir = kiln_test_mkdtemp("prepare"); /* an empty cache: prepare must compile */
    kiln_context *ctx = make_ctx(dir);
    op_case c[3];
    for (int i = 0; i < 3; i++) case_init(&c[i], (kiln_op)i);
    CU(g_drv.cuCtxSynchronize());

    for (int i = 0; i < 3; i++)
        if (kiln_prepare(ctx, &c[i].p) != KILN_OK)
            fail_msg("kiln_prepare(%s): %s", kiln_op_name(c[i].op), kiln_last_error(ctx));
    kiln_context_stats before;
    assert_int_equal(kiln_context_stats_get(ctx, &before), KILN_OK);
    printf("  after prepare: %llu compiled, %llu from the cache, %llu from bundles, %llu launches\n",
           (unsigned long long)before.nvrtc_compiles, (unsigned long long)before.cache_hits,
           (unsigned long long)before.bundle_hits, (unsigned long long)before.launches);
    assert_true(loads(&before) >= 3); /* one kernel per op at least */
    assert_int_equal(before.launches, 0); /* prepare launches nothing */
    /* Preparing again loads nothing more. */
    for (int i = 0; i < 3; i++) assert_int_equal(kiln_prepare(ctx, &c[i].p), KILN_OK);
    kiln_context_stats again;
    kiln_context_stats_get(ctx, &again);
    assert_int_equal(loads(&again), loads(&before));

    CUstream stream;
    CU(g_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CU(g_drv.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    kiln_status st[3];
    for (int i = 0; i < 3; i++) st[i] = kiln_gemm(ctx, &c[i].p, stream);
    CUgraph graph;
    CU(g_drv.cuStreamEndCapture(stream, &graph));
    for (int i = 0; i < 3; i++)
        if (st[i] != KILN_OK) fail_msg("kiln_gemm(%s) under capture: %s", kiln_op_name(c[i].op), kiln_last_error(ctx));
    kiln_context_stats after;
    kiln_context_stats_get(ctx, &after);
    /* The proof: nothing compiled or loaded during the capture. */
    assert_int_equal(after.nvrtc_compiles, before.nvrtc_compiles);
    assert_int_equal(after.cache_hits, before.cache_hits);
    assert_int_equal(after.bundle_hits, before.bundle_hits);
    assert_int_equal(after.launches, 3);

    CUgraphExec exec;
    CU(g_drv.cuGraphInstantiateWithFlags(&exec, graph, 0));
    for (int i = 0; i < 3; i++) poison(c[i].dout, (size_t)c[i].out_elems * 2);
    CU(g_drv.cuCtxSynchronize());
    CU(g_drv.cuGraphLaunch(exec, stream));
    CU(g_drv.cuStreamSynchronize(stream));
    for (int i = 0; i < 3; i++) case_check(&c[i]);

    g_drv.cuGraphExecDestroy(exec);
    g_drv.cuGraphDestroy(graph);
    g_drv.cuStreamDestroy(stream);
    for (int i = 0; i < 3; i++) case_free(&c[i]);
    kiln_context_destroy(ctx);
    kiln_test_rmtree(dir);
    free(dir);
}

/* KILN_LOG=info and no hook: the runtime writes to stderr, one dispatch
 * line per call. */
static void test_log_env(void **state)
{
    (void)state;
    char *dir = kiln_test_mkdtemp("prepare-log");
    char path[4096];
    snprintf(path, sizeof path, "%s/stderr.txt", dir);
    op_case c[3];
    for (int i = 0; i < 3; i++) case_init(&c[i], (kiln_op)i);
    CU(g_drv.cuCtxSynchronize());

    fflush(stderr);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    setenv("KILN_LOG", "info", 1);
    kiln_context *ctx = make_ctx(dir);
    kiln_status st[3];
    for (int i = 0; i < 3; i++) st[i] = kiln_gemm(ctx, &c[i].p, NULL);
    unsetenv("KILN_LOG");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    for (int i = 0; i < 3; i++) assert_int_equal(st[i], KILN_OK);
    CU(g_drv.cuCtxSynchronize());

    char *text;
    size_t len;
    assert_int_equal(kiln_file_read(path, &text, &len, NULL), KILN_OK);
    printf("%s", text);
    for (int i = 0; i < 3; i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "kiln info: %s: ", kiln_op_name(c[i].op));
        int lines = 0;
        for (const char *s = text; (s = strstr(s, needle)) != NULL; s++) lines++;
        if (lines != 1) fail_msg("%d dispatch lines for %s, expected 1", lines, kiln_op_name(c[i].op));
    }
    free(text);
    kiln_context_destroy(ctx);
    for (int i = 0; i < 3; i++) case_free(&c[i]);
    kiln_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    int rc = gpu_setup();
    if (rc) return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prepare_then_capture),
        cmocka_unit_test(test_log_env),
    };
    kiln_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_tuned.c — dispatch through a tuning table on a GPU: an entry for
 * the call's key is obeyed (the kernel named runs, the result is right),
 * and a damaged table is refused with a logged reason while the default
 * heuristic serves the call.  Exits 77 without a GPU. */
#include "testutil.h"

#include "catalog.h"
#include "gpu_util.h"
#include "tuning.h"

enum { G = 4, M = 300, N = 256, K = 256 };
static char g_log[8192];

static void log_hook(void *user, kiln_log_level level, const char *message)
{
    (void)user;
    (void)level;
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s\n", message);
}

/* Runs one bf16 fprop through ctx, checks it against the CPU, returns the
 * kernel that served it. */
static void run_fprop(kiln_context *ctx, char *kernel, size_t size)
{
    void *ex, *ew;
    float *X = rand_matrix(G * M, K, K, KILN_DTYPE_BF16, &ex);
    float *W = rand_matrix(G * N, K, K, KILN_DTYPE_BF16, &ew);
    CUdeviceptr dx = dev_alloc(G * M * K * 2), dw = dev_alloc(G * N * K * 2);
    CUdeviceptr dy = dev_alloc(G * M * N * 2), ds = dev_alloc(G * 4);
    upload(dx, ex, G * M * K * 2);
    upload(dw, ew, G * N * K * 2);
    int32_t m[G] = {M, M, M, M};
    upload(ds, m, sizeof m);
    poison(dy, G * M * N * 2);
    kiln_problem p;
    kts_problem_init(&p, KILN_OP_FPROP, G, N, K, G * M, ds, dx, dw, dy);
    if (kiln_gemm(ctx, &p, NULL) != KILN_OK) fail_msg("kiln_gemm: %s", kiln_last_error(ctx));
    CU(g_drv.cuCtxSynchronize());
    uint16_t *y = xmalloc(G * M * N * 2);
    download(y, dy, G * M * N * 2);
    int64_t start[G], rows[G];
    kts_group_rows(m, G, G * M, start, rows);
    kts_problem ref = {.op = KILN_OP_FPROP, .n = N, .k = K, .a = X, .b = W, .start = start,
                       .rows = rows, .alpha = 1.0f};
    kts_err err = {0};
    for (int r = 0; r < G * M; r++)
        for (int n = 0; n < N; n++)
            kts_err_add(&err, kiln_bf16_to_f32(y[r * N + n]), kts_reference(&ref, r / M, r % M, n));
    double rel = kts_err_rel(&err);
    if (!(rel < 1e-2)) fail_msg("relative error %.3e", rel);
    kiln_call_report rep;
    assert_int_equal(kiln_last_call(ctx, &rep), KILN_OK);
    snprintf(kernel, size, "%s", rep.kernel);
    printf("  served by %s (rel err %.2e): %s\n", rep.kernel, rel, rep.reason);
    free(X);
    free(W);
    free(ex);
    free(ew);
    free(y);
    dev_free(dx);
    dev_free(dw);
    dev_free(dy);
    dev_free(ds);
}

static kiln_context *make(const char *table)
{
    kiln_context_options o;
    kiln_context_options_init(&o);
    const char *tables[2] = {table, NULL};
    o.tuning_tables = tables;
    o.allowed_backends = KILN_ALLOW_GENERATED;
    o.log = log_hook;
    o.log_level = KILN_LOG_INFO;
    kiln_context *ctx = NULL;
    if (kiln_context_create(&o, &ctx) != KILN_OK) fail_msg("create: %s", kiln_last_error(ctx));
    return ctx;
}

/* A table whose only entry sends this call's key to catalog kernel `name`. */
static void write_table(const char *path, const char *name)
{
    const kiln_catalog_entry *ce = NULL;
    for (size_t i = 0; i < kiln_catalog_count; i++)
        if (!strcmp(kiln_catalog[i].name, name) && !strcmp(kiln_catalog[i].arch, "sm_90a"))
            ce = &kiln_catalog[i];
    assert_non_null(ce);
    kiln_problem p; /* the call run_fprop makes, without buffers */
    kts_problem_init(&p, KILN_OP_FPROP, G, N, K, G * M, 0, 0, 0, 0);
    kiln_tuning_entry e;
    memset(&e, 0, sizeof e);
    kiln_tuning_key_from_problem(&p, "sm_90a", &e.key);
    snprintf(e.kernel, sizeof e.kernel, "%s", name);
    /* Ids that no bundle or cache holds: the kernel must come from the
     * catalog by its description. */
    memset(e.bundle_id, 'a', 64);
    memset(e.cache_key, 'b', 64);
    e.median_ms = 0.5;
    e.desc = (char *)ce->desc;
    kiln_tuning_table *t;
    kiln_error err;
    assert_int_equal(kiln_tuning_table_create(&t, &err), KILN_OK);
    if (kiln_tuning_table_add(t, &e, &err) != KILN_OK) fail_msg("add: %s", err.msg);
    assert_int_equal(kiln_tuning_table_save(t, NULL, path, &err), KILN_OK);
    kiln_tuning_table_destroy(t);
}

static void test_table_is_obeyed(void **state)
{
    const char *dir = *state;
    char path[4200], kernel[128];
    snprintf(path, sizeof path, "%s/t.tuning", dir);
    /* First without a table: the heuristic's choice. */
    kiln_context *plain = make(NULL);
    run_fprop(plain, kernel, sizeof kernel);
    kiln_context_destroy(plain);
    const char *other = strcmp(kernel, "sm90_fprop_bf16_64x256") ? "sm90_fprop_bf16_64x256"
                                                                 : "sm90_fprop_bf16_128x128";
    write_table(path, other);
    g_log[0] = '\0';
    kiln_context *ctx = make(path);
    run_fprop(ctx, kernel, sizeof kernel);
    assert_string_equal(kernel, other);
    kiln_call_report rep;
    kiln_last_call(ctx, &rep);
    assert_non_null(strstr(rep.reason, "tuned kernel"));
    kiln_context_destroy(ctx);
}

static void test_damaged_table_falls_back(void **state)
{
    const char *dir = *state;
    char path[4200], kernel[128];
    snprintf(path, sizeof path, "%s/t.tuning", dir);
    write_table(path, "sm90_fprop_bf16_64x256");
    /* Damage the only entry: a time that is no number. */
    char *text;
    size_t len;
    assert_int_equal(kiln_file_read(path, &text, &len, NULL), KILN_OK);
    char *ms = strstr(text, " 0.5");
    assert_non_null(ms);
    memcpy(ms, " x.5", 4);
    assert_int_equal(kiln_file_write_atomic(path, text, len, NULL), KILN_OK);
    free(text);
    g_log[0] = '\0';
    kiln_context *ctx = make(path);
    if (!strstr(g_log, "tuning table refused") || !strstr(g_log, "t.tuning:"))
        fail_msg("no refusal naming file:line in the log:\n%s", g_log);
    run_fprop(ctx, kernel, sizeof kernel);
    kiln_call_report rep;
    kiln_last_call(ctx, &rep);
    assert_null(strstr(rep.reason, "tuned kernel"));
    kiln_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        kiln_test_with_dir(test_table_is_obeyed),
        kiln_test_with_dir(test_damaged_table_falls_back),
    };
    return gpu_run_group_tests(tests);
}

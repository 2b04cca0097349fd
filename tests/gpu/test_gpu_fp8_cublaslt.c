/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_fp8_cublaslt.c — the cuBLASLt fallback for the fp8 per-tensor
 * recipe (runtime/cublaslt.c) against a reference computed in double from
 * the dequantized inputs.
 *
 * A context that may use cuBLASLt only, so every call goes there (and the
 * report must say so).  fprop on X and W, dgrad on dY and the transposed
 * weights fp8.d_bt; e4m3, e5m2 x e4m3 dgrad and e4m3 x e5m2 fprop; scale_a
 * and a scale_b per group all random in [0.5, 2) (a scale taken from the
 * wrong group, or left at 1, is an error of the order of the sum); fast
 * and promoted accumulation; the epilogue kiln runs after cuBLASLt's
 * product (bias, scalar and per-group alpha, row scale of the product and
 * of the bias, beta*C); empty groups, one-row and odd groups, counts and
 * offsets; sizes off every tile but in 16-byte rows (cuBLASLt's fp8 rule),
 * leading dimensions past the rows (whose padding holds 448s, so reading
 * it shows).  Every valid element is checked; every other byte of the
 * output (rows past Σm, padding columns) must keep its poison.  Then the
 * refusals: the row recipe and e5m2 x e5m2, each with its reason.
 *
 * Tolerance, per element: |got - ref| <= 2^-8 (|ref| + |P|) + 2^-10 S,
 * where P is the product term s·α·Σ (before bias and C) and S the same
 * sum over |terms|.  cuBLASLt writes the product rounded to bf16 (2^-9 |P|)
 * and the epilogue rounds its result again (2^-9 |ref|); 2^-8 leaves room
 * for the fp32 epilogue.  2^-10 S is the tensor cores' fast accumulation
 * (fewer bits than fp32 in the running sum, as in test_gpu_fp8.c), kept
 * for promotion too: cuBLASLt does not say how often it promotes.
 * Exits 77 (skipped) without a driver or GPU. */
#include "testutil.h"

#include "gpu_util.h"

static kiln_context *g_ctx;
static int g_failures;

#define FAIL_CASE(...) GPU_CASE_FAIL(g_failures, __VA_ARGS__)

/* One call: op and types, groups, sizes (n_out: the output's columns,
 * k_red: the reduction), the padding of each leading dimension (elements),
 * and the epilogue. */
typedef struct lcase {
    const char *label;
    kiln_op op;
    kiln_dtype a, b;
    int groups;
    const int32_t *counts;
    int offsets;
    int64_t cap, n_out, k_red;
    int64_t lda_pad, ldb_pad, ldd_pad;
    int promote;
    float alpha;
    int alpha_pg, bias, row_scale, scale_bias;
    float beta;
} lcase;

/* Past the rows: a value a product would notice (e4m3 448, e5m2 NaN). */
#define PAD_BYTE 0x7e

static float rand_scale(void) { return 0.5f + (float)rng_int(0, 1023) * (1.5f / 1024.0f); }

/* rows x ld bytes of type t: random values of (-4, 4) in the first cols
 * columns, rounded to t by common/half.c (kts_store), PAD_BYTE past them.
 * Dequantized (kts_load, times a scale of rand_scale) they are exact in
 * float: q has at most 4 significant bits, the scale 12. */
static uint8_t *rand_fp8(kiln_dtype t, int64_t rows, int64_t cols, int64_t ld)
{
    uint8_t *q = xmalloc((size_t)(rows * ld));
    memset(q, PAD_BYTE, (size_t)(rows * ld));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) kts_store(q, (size_t)(r * ld + c), t, 4.0f * rng_val());
    return q;
}

/* The host side of a case: inputs as the device gets them, and the same
 * dequantized for kts_reference (full problem, product alone, magnitudes). */
typedef struct lhost {
    int64_t lda, ldb, ldd, n, k;
    int64_t *start, *rows;
    int32_t *sizes;
    uint8_t *qa, *qb;
    float sa, *sb, *fa, *fb, *abs_a, *abs_b;
    float *alphas, *row_scale, *bias, *c;
    void *ebias, *ec;
    kts_problem full, prod, mag;
} lhost;

static void lhost_make(lhost *h, const lcase *c)
{
    const int G = c->groups, dgrad = c->op == KILN_OP_DGRAD;
    h->n = dgrad ? c->k_red : c->n_out; /* the weights' [N, K] */
    h->k = dgrad ? c->n_out : c->k_red;
    h->lda = c->k_red + c->lda_pad;
    h->ldb = c->k_red + c->ldb_pad; /* rows of W (fprop) or of d_bt (dgrad): k_red long */
    h->ldd = c->n_out + c->ldd_pad;
    h->start = xmalloc(sizeof(int64_t) * (size_t)G);
    h->rows = xmalloc(sizeof(int64_t) * (size_t)G);
    h->sizes = xmalloc(sizeof(int32_t) * (size_t)G);
    kts_group_rows(c->counts, G, c->cap, h->start, h->rows);
    for (int g = 0; g < G; g++)
        h->sizes[g] = c->offsets ? (int32_t)(h->start[g] + c->counts[g]) : c->counts[g];

    h->sa = rand_scale();
    h->sb = xmalloc(sizeof(float) * (size_t)G);
    for (int g = 0; g < G; g++) h->sb[g] = rand_scale();
    h->qa = rand_fp8(c->a, c->cap, c->k_red, h->lda);
    h->fa = xmalloc(sizeof(float) * (size_t)(c->cap * h->lda));
    h->abs_a = xmalloc(sizeof(float) * (size_t)(c->cap * h->lda));
    for (int64_t i = 0; i < c->cap * h->lda; i++) {
        h->fa[i] = i % h->lda < c->k_red ? kts_load(h->qa, (size_t)i, c->a) * h->sa : 0.0f;
        h->abs_a[i] = fabsf(h->fa[i]);
    }
    /* W as the device reads it: [G, n_out, ldb] for fprop, [G, n_out = K,
     * ldb] = W transposed for dgrad; the reference wants W [G·N, K]. */
    h->qb = rand_fp8(c->b, (int64_t)G * c->n_out, c->k_red, h->ldb);
    h->fb = xmalloc(sizeof(float) * (size_t)(G * h->n * h->k));
    h->abs_b = xmalloc(sizeof(float) * (size_t)(G * h->n * h->k));
    for (int g = 0; g < G; g++)
        for (int64_t nn = 0; nn < h->n; nn++)
            for (int64_t kk = 0; kk < h->k; kk++) {
                const int64_t row = dgrad ? kk : nn, col = dgrad ? nn : kk;
                const int64_t q = ((int64_t)g * c->n_out + row) * h->ldb + col;
                const int64_t f = ((int64_t)g * h->n + nn) * h->k + kk;
                h->fb[f] = kts_load(h->qb, (size_t)q, c->b) * h->sb[g];
                h->abs_b[f] = fabsf(h->fb[f]);
            }

    h->alphas = xmalloc(sizeof(float) * (size_t)G);
    for (int g = 0; g < G; g++) h->alphas[g] = rand_scale();
    h->row_scale = xmalloc(sizeof(float) * (size_t)c->cap);
    for (int64_t r = 0; r < c->cap; r++) h->row_scale[r] = rand_scale();
    h->bias = rand_matrix(G, c->n_out, c->n_out, KILN_DTYPE_BF16, &h->ebias);
    h->c = rand_matrix(c->cap, c->n_out, c->n_out, KILN_DTYPE_BF16, &h->ec);

    kts_problem full = {.op = c->op, .n = h->n, .k = h->k, .lda = h->lda, .a = h->fa,
                        .b = h->fb, .start = h->start, .rows = h->rows, .alpha = c->alpha,
                        .alphas = c->alpha_pg ? h->alphas : NULL,
                        .row_scale = c->row_scale ? h->row_scale : NULL,
                        .bias = c->bias ? h->bias : NULL, .scale_bias = c->scale_bias,
                        .beta = c->beta, .c = c->beta != 0.0f ? h->c : NULL};
    h->full = full;
    h->prod = full;
    h->prod.bias = h->prod.c = NULL;
    h->mag = h->prod;
    h->mag.a = h->abs_a;
    h->mag.b = h->abs_b;
    h->mag.alpha = fabsf(c->alpha);
}

static void lhost_free(lhost *h)
{
    FREE_ALL(h->start, h->rows, h->sizes, h->qa, h->qb, h->sb, h->fa, h->fb, h->abs_a, h->abs_b,
             h->alphas, h->row_scale, h->bias, h->c, h->ebias, h->ec);
}

/* Device copies; the problem that points at them. */
typedef struct ldev {
    CUdeviceptr a, b, sa, sb, out, sizes, alphas, row_scale, bias, c;
    size_t obytes;
} ldev;

static void ldev_make(ldev *x, const lhost *h, const lcase *c, kiln_problem *p)
{
    const int G = c->groups;
    x->a = dev_copy(h->qa, (size_t)(c->cap * h->lda));
    x->b = dev_copy(h->qb, (size_t)((int64_t)G * c->n_out * h->ldb));
    x->sa = dev_copy(&h->sa, sizeof(float));
    x->sb = dev_copy(h->sb, sizeof(float) * (size_t)G);
    x->sizes = dev_copy(h->sizes, sizeof(int32_t) * (size_t)G);
    x->alphas = dev_copy(h->alphas, sizeof(float) * (size_t)G);
    x->row_scale = dev_copy(h->row_scale, sizeof(float) * (size_t)c->cap);
    x->bias = dev_copy(h->ebias, (size_t)(G * c->n_out * 2));
    x->c = dev_copy(h->ec, (size_t)(c->cap * c->n_out * 2));
    x->obytes = (size_t)(c->cap * h->ldd * 2);
    x->out = dev_alloc(x->obytes);
    poison(x->out, x->obytes);

    const int dgrad = c->op == KILN_OP_DGRAD;
    kts_problem_init(p, c->op, G, h->n, h->k, c->cap, x->sizes, x->a, dgrad ? 0 : x->b, x->out);
    p->a_type = c->a;
    p->b_type = c->b;
    p->out_type = KILN_DTYPE_BF16;
    p->lda = h->lda;
    p->ldb = h->ldb;
    p->ldd = h->ldd;
    p->host_sizes = h->sizes;
    p->sizes_kind = c->offsets ? KILN_SIZES_OFFSETS : KILN_SIZES_COUNTS;
    p->fp8.recipe = KILN_FP8_TENSOR;
    p->fp8.promote = c->promote;
    p->fp8.d_scale_a = (const float *)(uintptr_t)x->sa;
    p->fp8.d_scale_b = (const float *)(uintptr_t)x->sb;
    if (dgrad) p->fp8.d_bt = (const void *)(uintptr_t)x->b;
    kiln_epilogue *e = &p->epilogue;
    e->alpha = c->alpha;
    if (c->alpha_pg) e->d_alpha = (const float *)(uintptr_t)x->alphas;
    if (c->row_scale) e->d_row_scale = (const float *)(uintptr_t)x->row_scale;
    if (c->bias) e->d_bias = (const void *)(uintptr_t)x->bias;
    e->scale_bias = c->scale_bias;
    e->beta = c->beta;
    if (c->beta != 0.0f) e->d_c = (const void *)(uintptr_t)x->c;
}

static void ldev_free(ldev *x)
{
    DEV_FREE_ALL(x->a, x->b, x->sa, x->sb, x->out, x->sizes, x->alphas, x->row_scale, x->bias,
                 x->c);
}

/* Every valid element against the reference; every other element of the
 * output still poison. */
static void lcheck(const lcase *c, const lhost *h, const ldev *x)
{
    uint16_t *out = xmalloc(x->obytes), *before = xmalloc(x->obytes);
    download(out, x->out, x->obytes);
    memset(before, KTS_POISON, x->obytes);
    const size_t n_el = x->obytes / 2;
    unsigned char *valid = calloc(n_el, 1);
    size_t bad = 0;
    double worst = 0;
    for (int g = 0; g < c->groups; g++)
        for (int64_t i = 0; i < h->rows[g]; i++) {
            const int64_t r = h->start[g] + i;
            for (int64_t j = 0; j < c->n_out; j++) {
                const double ref = kts_reference(&h->full, g, i, j);
                const double prod = kts_reference(&h->prod, g, i, j);
                const double mag = kts_reference(&h->mag, g, i, j);
                const double got = kiln_bf16_to_f32(out[r * h->ldd + j]);
                const double err = fabs(got - ref);
                const double tol = 0x1p-8 * (fabs(ref) + fabs(prod)) + 0x1p-10 * mag;
                valid[r * h->ldd + j] = 1;
                if (!(err <= tol) && bad++ < 3)
                    FAIL_CASE("%s: group %d row %lld col %lld: got %.6g, want %.6g (tol %.3g)",
                              c->label, g, (long long)r, (long long)j, got, ref, tol);
                if (mag > 0 && err / mag > worst) worst = err / mag;
            }
        }
    if (bad > 3) FAIL_CASE("%s: %zu elements out of tolerance in all", c->label, bad);
    const size_t changed = kts_changed_outside(before, out, valid, n_el, 2);
    if (changed)
        FAIL_CASE("%s: %zu elements outside the valid rows and columns were written", c->label,
                  changed);
    printf("  %-66s ok=%d  worst |err|/S %.2e\n", c->label, bad == 0 && changed == 0, worst);
    free(valid);
    free(before);
    free(out);
}

static void run_case(const lcase *c)
{
    lhost h;
    lhost_make(&h, c);
    ldev x;
    kiln_problem p;
    ldev_make(&x, &h, c, &p);
    kiln_call_report rep;
    if (gpu_gemm_case(g_ctx, &p, c->label, &g_failures, &rep)) {
        if (rep.backend != KILN_BACKEND_CUBLASLT || strcmp(rep.kernel, "cublasLt") ||
            !strstr(rep.reason, "cuBLASLt"))
            FAIL_CASE("%s: served by %s (%s), wanted cuBLASLt", c->label, rep.kernel, rep.reason);
        lcheck(c, &h, &x);
    }
    ldev_free(&x);
    lhost_free(&h);
}

/* run_case on each of the n cases; asserts that none failed. */
static void run_cases(const lcase *cases, size_t n)
{
    const int before = g_failures;
    for (size_t i = 0; i < n; i++) run_case(&cases[i]);
    assert_int_equal(g_failures, before);
}

static const int32_t counts5[5] = {0, 1, 77, 300, 133}; /* Σ 511 of 600 */
static const int32_t counts7[7] = {5, 0, 0, 129, 1, 0, 63}; /* Σ 198 of 256 */

/* n_out 208 and k_red 400 (off 64- and 128-wide tiles, 16-byte rows). */
static void test_fprop(void **state)
{
    (void)state;
    const lcase cases[] = {
        {.label = "fprop e4m3: scalar alpha 0.5, bias", .op = KILN_OP_FPROP,
         .a = KILN_DTYPE_E4M3, .b = KILN_DTYPE_E4M3, .groups = 5, .counts = counts5, .cap = 600,
         .n_out = 208, .k_red = 400, .alpha = 0.5f, .bias = 1},
        {.label = "fprop e4m3 promote: alpha per group, row scale of acc and bias, beta*C, "
                  "padded rows",
         .op = KILN_OP_FPROP, .a = KILN_DTYPE_E4M3, .b = KILN_DTYPE_E4M3, .groups = 5,
         .counts = counts5, .cap = 600, .n_out = 208, .k_red = 400, .lda_pad = 32,
         .ldb_pad = 16, .ldd_pad = 8, .promote = 1, .alpha = 1.0f, .alpha_pg = 1, .bias = 1,
         .row_scale = 1, .scale_bias = 1, .beta = 0.75f},
        {.label = "fprop e4m3 x e5m2: offsets, no epilogue", .op = KILN_OP_FPROP,
         .a = KILN_DTYPE_E4M3, .b = KILN_DTYPE_E5M2, .groups = 7, .counts = counts7,
         .offsets = 1, .cap = 256, .n_out = 144, .k_red = 272, .alpha = 1.0f},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* dgrad reads the transposed weights (d_bt [G, K, N], ldb its pitch). */
static void test_dgrad(void **state)
{
    (void)state;
    const lcase cases[] = {
        {.label = "dgrad e4m3: alpha per group, bias, padded d_bt rows", .op = KILN_OP_DGRAD,
         .a = KILN_DTYPE_E4M3, .b = KILN_DTYPE_E4M3, .groups = 7, .counts = counts7,
         .cap = 256, .n_out = 144, .k_red = 400, .ldb_pad = 48, .alpha = 1.0f, .alpha_pg = 1,
         .bias = 1},
        {.label = "dgrad e5m2 x e4m3: offsets, alpha 2, bias, beta*C, padded rows",
         .op = KILN_OP_DGRAD, .a = KILN_DTYPE_E5M2, .b = KILN_DTYPE_E4M3, .groups = 5,
         .counts = counts5, .offsets = 1, .cap = 600, .n_out = 208, .k_red = 400,
         .lda_pad = 16, .ldb_pad = 16, .ldd_pad = 16, .alpha = 2.0f, .bias = 1, .beta = -0.5f},
        {.label = "dgrad e5m2 x e4m3 promote: row scale", .op = KILN_OP_DGRAD,
         .a = KILN_DTYPE_E5M2, .b = KILN_DTYPE_E4M3, .groups = 7, .counts = counts7,
         .cap = 256, .n_out = 208, .k_red = 144, .promote = 1, .alpha = 1.0f,
         .row_scale = 1},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* What cuBLASLt cannot run is refused with its reason (no kernel may
 * serve: the context allows cuBLASLt only). */
static void test_refusals(void **state)
{
    (void)state;
    const lcase c = {.label = "refusal", .op = KILN_OP_FPROP, .a = KILN_DTYPE_E4M3,
                     .b = KILN_DTYPE_E4M3, .groups = 5, .counts = counts5, .cap = 600,
                     .n_out = 208, .k_red = 400, .alpha = 1.0f};
    lhost h;
    lhost_make(&h, &c);
    ldev x;
    kiln_problem p;
    ldev_make(&x, &h, &c, &p);
    p.fp8.recipe = KILN_FP8_ROW; /* scale_b is then [G, N]: larger than given, never read */
    assert_int_equal(kiln_gemm(g_ctx, &p, NULL), KILN_ERROR_UNSUPPORTED);
    kiln_test_has(kiln_last_error(g_ctx),
                  "cuBLASLt path serves the fp8 per-tensor recipe only (the call's is row-wise)");
    p.fp8.recipe = KILN_FP8_TENSOR;
    p.a_type = p.b_type = KILN_DTYPE_E5M2;
    assert_int_equal(kiln_gemm(g_ctx, &p, NULL), KILN_ERROR_UNSUPPORTED);
    kiln_test_has(kiln_last_error(g_ctx), "cuBLASLt has no e5m2 x e5m2 product");
    CU(g_drv.cuCtxSynchronize());
    uint8_t *out = xmalloc(x.obytes);
    download(out, x.out, x.obytes);
    assert_int_equal(kts_first_unpoisoned(out, 0, x.obytes), -1);
    free(out);
    ldev_free(&x);
    lhost_free(&h);
}

GPU_CONTEXT_MAIN(KILN_ALLOW_CUBLASLT, &g_ctx, cmocka_unit_test(test_fprop),
                 cmocka_unit_test(test_dgrad), cmocka_unit_test(test_refusals))

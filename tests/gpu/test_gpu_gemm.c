/* test_gpu_gemm.c — every op, weight layout, wgrad output mode, accumulate
 * setting, epilogue term and type combination through kiln_gemm, checked
 * against a CPU double-precision reference (and, for large shapes, the
 * generated path against cuBLASLt).
 *
 * Error measure: ‖out − ref‖ / ‖ref‖ over the valid elements.  Tolerances:
 * bf16 output 1e-2, fp16 output 2e-3, f32 output 1e-4 (inputs are exact,
 * accumulation is fp32).  Every output is poisoned with 0xFF bytes (NaN)
 * first; every valid element must be written, and every other byte of the
 * buffer (rows past Σm, padding columns) must be unchanged.
 * Exits 77 (skipped) without a driver or GPU. */
#include "testutil.h"

#include "gpu_util.h"

static kiln_context *g_gen; /* generated kernels only */
static int g_failures;      /* failing cases so far; each test asserts none of its own */

#define CASE_FAIL(...)                                                                             \
    do {                                                                                           \
        printf("  FAIL: ");                                                                        \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        g_failures++;                                                                              \
    } while (0)
static kiln_context *g_lt;  /* cuBLASLt only */

typedef struct gcase {
    const char *label;
    kiln_op op;
    kiln_dtype in, out;
    int groups;
    int64_t n, k, capacity;
    const int32_t *counts; /* host counts (sum may exceed capacity: overflow case) */
    int offsets, ptr_weights, discrete, accumulate;
    int bias, row_scale, scale_bias, alpha_pg, beta_c;
    float alpha;           /* 0: 1 */
    int lda_pad, ldd_pad;
    int host_sizes;
    int expect_overflow;
} gcase;

typedef struct gresult {
    float *out;      /* valid outputs (host floats), for comparisons between backends */
    size_t n_out;
    double rel_err;
} gresult;

static double tol_for(kiln_dtype t)
{
    return t == KILN_DTYPE_BF16 ? 1e-2 : t == KILN_DTYPE_F16 ? 2e-3 : 1e-4;
}

static const char *backend_name(kiln_backend b)
{
    return b == KILN_BACKEND_GENERATED ? "generated" : b == KILN_BACKEND_CUBLASLT ? "cublaslt" : "none";
}

/* Runs c on ctx; checks the backend, written/untouched bytes and (unless
 * no_ref) the CPU reference.  Fills r->out with the valid outputs. */
static void run_case(const gcase *c, kiln_context *ctx, kiln_backend want, int no_ref, gresult *r)
{
    const int G = c->groups;
    const int isz = kiln_dtype_size(c->in), osz = kiln_dtype_size(c->out);
    const int64_t N = c->n, K = c->k, cap = c->capacity;
    const int wg = c->op == KILN_OP_WGRAD;
    const int64_t acols = c->op == KILN_OP_FPROP ? K : N;
    const int64_t ocols = c->op == KILN_OP_FPROP ? N : K;
    const int64_t lda = acols + c->lda_pad, ldd = ocols + c->ldd_pad;

    /* Group rows: start and rows below capacity. */
    int64_t *start = xmalloc(sizeof(int64_t) * (size_t)G), *rows = xmalloc(sizeof(int64_t) * (size_t)G);
    int32_t *dsizes = xmalloc(sizeof(int32_t) * (size_t)G);
    const int64_t total = kts_group_rows(c->counts, G, cap, start, rows);
    for (int g = 0; g < G; g++) dsizes[g] = c->offsets ? (int32_t)(start[g] + c->counts[g]) : c->counts[g];
    const int64_t valid_rows = total < cap ? total : cap;

    void *ea, *eb, *ebias = NULL, *ec = NULL;
    float *A = rand_matrix(cap, acols, lda, c->in, &ea);
    float *B = wg ? rand_matrix(cap, K, K, c->in, &eb) : rand_matrix((int64_t)G * N, K, K, c->in, &eb);
    CUdeviceptr dA = dev_alloc((size_t)(cap * lda * isz));
    upload(dA, ea, (size_t)(cap * lda * isz));
    size_t bbytes = (size_t)((wg ? cap : (int64_t)G * N) * K * isz);
    CUdeviceptr dB = 0, dBptrs = 0;
    CUdeviceptr *wbufs = NULL;
    if (c->ptr_weights) {
        wbufs = xmalloc(sizeof(CUdeviceptr) * (size_t)G);
        for (int g = 0; g < G; g++) {
            wbufs[g] = dev_alloc((size_t)(N * K * isz));
            upload(wbufs[g], (char *)eb + (size_t)g * (size_t)(N * K * isz), (size_t)(N * K * isz));
        }
        dBptrs = dev_alloc(sizeof(CUdeviceptr) * (size_t)G);
        upload(dBptrs, wbufs, sizeof(CUdeviceptr) * (size_t)G);
    } else {
        dB = dev_alloc(bbytes);
        upload(dB, eb, bbytes);
    }

    /* Output buffer(s) and their bytes before the call. */
    int64_t orows = wg ? (int64_t)G * N : cap;
    size_t obytes = (size_t)(orows * ldd * osz);
    unsigned char *before = xmalloc(obytes), *after = xmalloc(obytes);
    float *init = NULL;
    if (wg && c->accumulate) {
        void *enc;
        init = rand_matrix(orows, K, ldd, c->out, &enc);
        memcpy(before, enc, obytes);
        /* padding columns keep the poison, so an overwrite shows */
        for (int64_t i = 0; i < orows; i++)
            memset(before + (size_t)(i * ldd + K) * (size_t)osz, 0xFF, (size_t)(c->ldd_pad * osz));
        free(enc);
    } else {
        memset(before, 0xFF, obytes);
    }
    CUdeviceptr dD = 0, dDptrs = 0;
    CUdeviceptr *obufs = NULL;
    size_t gbytes = (size_t)(N * ldd * osz);
    if (wg && c->discrete) {
        obufs = xmalloc(sizeof(CUdeviceptr) * (size_t)G);
        for (int g = 0; g < G; g++) {
            obufs[g] = dev_alloc(gbytes);
            upload(obufs[g], before + (size_t)g * gbytes, gbytes);
        }
        dDptrs = dev_alloc(sizeof(CUdeviceptr) * (size_t)G);
        upload(dDptrs, obufs, sizeof(CUdeviceptr) * (size_t)G);
    } else {
        dD = dev_alloc(obytes);
        upload(dD, before, obytes);
    }

    /* Epilogue operands. */
    float *bias = NULL, *scale = NULL, *alphas = NULL, *C = NULL;
    CUdeviceptr dbias = 0, dscale = 0, dalpha = 0, dC = 0;
    if (c->bias) {
        bias = rand_matrix(G, ocols, ocols, c->out, &ebias);
        dbias = dev_alloc((size_t)(G * ocols * osz));
        upload(dbias, ebias, (size_t)(G * ocols * osz));
    }
    if (c->row_scale) {
        scale = xmalloc(sizeof(float) * (size_t)(cap ? cap : 1));
        for (int64_t i = 0; i < cap; i++) scale[i] = rng_val() * 2.0f;
        dscale = dev_alloc(sizeof(float) * (size_t)cap);
        upload(dscale, scale, sizeof(float) * (size_t)cap);
    }
    if (c->alpha_pg) {
        alphas = xmalloc(sizeof(float) * (size_t)G);
        for (int g = 0; g < G; g++) alphas[g] = rng_val() * 2.0f;
        dalpha = dev_alloc(sizeof(float) * (size_t)G);
        upload(dalpha, alphas, sizeof(float) * (size_t)G);
    }
    if (c->beta_c) {
        C = rand_matrix(cap, ocols, ocols, c->out, &ec);
        dC = dev_alloc((size_t)(cap * ocols * osz));
        upload(dC, ec, (size_t)(cap * ocols * osz));
    }
    CUdeviceptr dsz = dev_alloc(sizeof(int32_t) * (size_t)G);
    upload(dsz, dsizes, sizeof(int32_t) * (size_t)G);
    CUdeviceptr dovf = dev_alloc(sizeof(int32_t));
    int32_t zero = 0;
    upload(dovf, &zero, sizeof zero);

    kiln_problem p;
    kiln_problem_init(&p, c->op);
    p.a_type = p.b_type = c->in;
    p.out_type = c->out;
    p.groups = G;
    p.n = N;
    p.k = K;
    p.capacity = cap;
    p.d_sizes = (const int32_t *)(uintptr_t)dsz;
    p.sizes_kind = c->offsets ? KILN_SIZES_OFFSETS : KILN_SIZES_COUNTS;
    p.host_sizes = c->host_sizes ? dsizes : NULL;
    p.d_a = (const void *)(uintptr_t)dA;
    p.lda = c->lda_pad ? lda : 0;
    p.d_b = c->ptr_weights ? NULL : (const void *)(uintptr_t)dB;
    p.d_b_ptrs = c->ptr_weights ? (const void *const *)(uintptr_t)dBptrs : NULL;
    p.d_out = dD ? (void *)(uintptr_t)dD : NULL;
    p.d_out_ptrs = dDptrs ? (void *const *)(uintptr_t)dDptrs : NULL;
    p.ldd = c->ldd_pad ? ldd : 0;
    p.wgrad_output = c->discrete ? KILN_WGRAD_DISCRETE : KILN_WGRAD_DENSE;
    p.accumulate = c->accumulate;
    p.d_overflow = (int32_t *)(uintptr_t)dovf;
    float alpha = c->alpha != 0.0f ? c->alpha : 1.0f;
    p.epilogue.alpha = alpha;
    p.epilogue.d_bias = (const void *)(uintptr_t)dbias;
    p.epilogue.d_row_scale = (const float *)(uintptr_t)dscale;
    p.epilogue.scale_bias = c->scale_bias;
    p.epilogue.d_alpha = (const float *)(uintptr_t)dalpha;
    p.epilogue.beta = c->beta_c ? 0.75f : 0.0f;
    p.epilogue.d_c = (const void *)(uintptr_t)dC;

    kiln_status st = kiln_gemm(ctx, &p, NULL);
    r->out = NULL;
    r->n_out = 0;
    r->rel_err = -1;
    unsigned char *is_valid = NULL;
    if (st != KILN_OK) {
        CASE_FAIL("%s: kiln_gemm: %s: %s", c->label, kiln_status_name(st), kiln_last_error(ctx));
        goto cleanup;
    }
    CU(g_drv.cuCtxSynchronize());
    kiln_call_report rep;
    assert_int_equal(kiln_last_call(ctx, &rep), KILN_OK);
    if (rep.backend != want)
        CASE_FAIL("%s: ran on %s (%s), wanted %s", c->label, backend_name(rep.backend), rep.kernel,
                 backend_name(want));

    if (obufs)
        for (int g = 0; g < G; g++) download(after + (size_t)g * gbytes, obufs[g], gbytes);
    else
        download(after, dD, obytes);
    int32_t ovf = -1;
    download(&ovf, dovf, sizeof ovf);
    if (c->expect_overflow) {
        if (ovf != 1) CASE_FAIL("%s: overflow flag is %d, wanted 1", c->label, ovf);
    } else if (ovf != 0) {
        CASE_FAIL("%s: overflow flag is %d, wanted 0", c->label, ovf);
    }

    /* Valid region and reference. */
    kts_problem ref = {.op = c->op, .n = N, .k = K, .lda = lda, .a = A, .b = B, .start = start,
                       .rows = rows, .alpha = alpha, .alphas = alphas, .row_scale = scale,
                       .bias = bias, .scale_bias = c->scale_bias, .beta = 0.75f, .c = C,
                       .init = init, .ldd = ldd};
    size_t nvalid = wg ? (size_t)(G * N * K) : (size_t)(valid_rows * ocols);
    r->out = xmalloc(sizeof(float) * (nvalid ? nvalid : 1));
    r->n_out = nvalid;
    is_valid = calloc((size_t)(orows * ldd), 1);
    kts_err err = {0};
    size_t vi = 0;
    for (int g = 0; g < G; g++) {
        int64_t r0 = wg ? (int64_t)g * N : start[g], nr = wg ? N : rows[g];
        for (int64_t i = 0; i < nr; i++)
            for (int64_t j = 0; j < ocols; j++) {
                size_t e = (size_t)((r0 + i) * ldd + j);
                is_valid[e] = 1;
                float got = kts_load(after, e, c->out);
                r->out[vi++] = got;
                if (no_ref) err.nan += got != got;
                else kts_err_add(&err, got, kts_reference(&ref, g, i, j));
            }
    }
    if (err.nan) CASE_FAIL("%s: %zu of %zu valid elements were not written (NaN)", c->label, err.nan, nvalid);
    size_t touched = kts_changed_outside(before, after, is_valid, (size_t)(orows * ldd), (size_t)osz);
    if (touched)
        CASE_FAIL("%s: %zu elements outside the valid rows/columns were changed", c->label, touched);
    r->rel_err = no_ref ? 0 : kts_err_rel(&err);
    if (!no_ref) {
        printf("  %-58s %-9s %-36s rel err %.2e\n", c->label, backend_name(rep.backend), rep.kernel, r->rel_err);
        if (!(r->rel_err <= tol_for(c->out)))
            CASE_FAIL("%s: relative error %.3e exceeds %.1e", c->label, r->rel_err, tol_for(c->out));
    }

cleanup:
    free(is_valid);
    free(A); free(B); free(ea); free(eb); free(bias); free(ebias); free(scale); free(alphas);
    free(C); free(ec); free(init); free(before); free(after); free(start); free(rows); free(dsizes);
    if (wbufs) { for (int g = 0; g < G; g++) dev_free(wbufs[g]); free(wbufs); }
    if (obufs) { for (int g = 0; g < G; g++) dev_free(obufs[g]); free(obufs); }
    dev_free(dA); dev_free(dB); dev_free(dBptrs); dev_free(dD); dev_free(dDptrs); dev_free(dbias);
    dev_free(dscale); dev_free(dalpha); dev_free(dC); dev_free(dsz); dev_free(dovf);
}

static void run_checked(const gcase *c, kiln_context *ctx, kiln_backend want)
{
    gresult r;
    run_case(c, ctx, want, 0, &r);
    free(r.out);
}

static int32_t *random_counts(int G, int lo, int hi)
{
    int32_t *m = xmalloc(sizeof(int32_t) * (size_t)G);
    for (int g = 0; g < G; g++) m[g] = rng_int(lo, hi);
    return m;
}

static int64_t sum_counts(const int32_t *m, int G)
{
    int64_t s = 0;
    for (int g = 0; g < G; g++) s += m[g];
    return s;
}

static const kiln_dtype in_types[2] = {KILN_DTYPE_BF16, KILN_DTYPE_F16};

/* fprop and dgrad: every type combination × weight layout × epilogue term. */
static void test_fprop_dgrad_matrix(void **state)
{
    (void)state;
    int failures_before = g_failures;
    char label[128];
    for (int op = 0; op < 2; op++)
        for (int ti = 0; ti < 2; ti++)
            for (int oi = 0; oi < 2; oi++) {
                kiln_dtype in = in_types[ti], out = oi ? KILN_DTYPE_F32 : in;
                for (int v = 0; v < 9; v++) {
                    int32_t *m = random_counts(8, 0, 70);
                    gcase c = {0};
                    c.op = (kiln_op)op;
                    c.in = in;
                    c.out = out;
                    c.groups = 8;
                    c.n = 96;
                    c.k = 80;
                    c.counts = m;
                    c.capacity = sum_counts(m, 8) + 17;
                    const char *what = "plain";
                    switch (v) {
                    case 1: c.ptr_weights = 1; what = "pointer-array weights"; break;
                    case 2: c.bias = 1; what = "bias"; break;
                    case 3: c.row_scale = 1; what = "row scale"; break;
                    case 4: c.row_scale = c.bias = c.scale_bias = 1; what = "row scale + scaled bias"; break;
                    case 5: c.alpha = 0.5f; what = "scalar alpha"; break;
                    case 6: c.alpha_pg = 1; what = "per-group alpha"; break;
                    case 7: c.beta_c = 1; what = "beta*C"; break;
                    case 8:
                        c.ptr_weights = c.bias = c.row_scale = c.alpha_pg = c.beta_c = 1;
                        c.lda_pad = 8;
                        c.ldd_pad = 16;
                        what = "everything, padded lda/ldd";
                        break;
                    }
                    snprintf(label, sizeof label, "%s %s->%s %s", kiln_op_name(c.op),
                             kiln_dtype_name(in), kiln_dtype_name(out), what);
                    c.label = label;
                    run_checked(&c, g_gen, KILN_BACKEND_GENERATED);
                    free(m);
                }
            }
    assert_int_equal(g_failures, failures_before);
}

/* wgrad: type combinations × dense/discrete × accumulate. */
static void test_wgrad_matrix(void **state)
{
    (void)state;
    int failures_before = g_failures;
    char label[128];
    for (int ti = 0; ti < 2; ti++)
        for (int oi = 0; oi < 2; oi++)
            for (int disc = 0; disc < 2; disc++)
                for (int acc = 0; acc < 2; acc++) {
                    kiln_dtype in = in_types[ti], out = oi ? KILN_DTYPE_F32 : in;
                    if (acc && out != KILN_DTYPE_F32) continue;
                    int32_t *m = random_counts(6, 0, 90);
                    m[2] = 0; /* an empty group: zeros, or untouched when accumulating */
                    gcase c = {0};
                    c.op = KILN_OP_WGRAD;
                    c.in = in;
                    c.out = out;
                    c.groups = 6;
                    c.n = 72;
                    c.k = 88;
                    c.counts = m;
                    c.capacity = sum_counts(m, 6) + 5;
                    c.discrete = disc;
                    c.accumulate = acc;
                    c.ldd_pad = disc ? 8 : 0;
                    snprintf(label, sizeof label, "wgrad %s->%s %s%s", kiln_dtype_name(in),
                             kiln_dtype_name(out), disc ? "discrete" : "dense", acc ? " accumulate" : "");
                    c.label = label;
                    run_checked(&c, g_gen, KILN_BACKEND_GENERATED);
                    free(m);
                }
    assert_int_equal(g_failures, failures_before);
}

/* Group counts and size patterns, each op. */
static void test_group_patterns(void **state)
{
    (void)state;
    int failures_before = g_failures;
    char label[128];
    for (int pat = 0; pat < 9; pat++) {
        int G;
        int32_t *m;
        int64_t n = 64, k = 64, extra = 9;
        const char *what;
        int offsets = 0;
        switch (pat) {
        case 0: G = 1; m = random_counts(1, 250, 300); what = "1 group"; break;
        case 1: G = 8; m = random_counts(8, 1, 200); what = "8 groups"; break;
        case 2: G = 128; m = random_counts(128, 0, 40); what = "128 groups"; break;
        case 3: G = 1024; m = random_counts(1024, 0, 6); n = k = 32; what = "1024 groups"; break;
        case 4:
            G = 16;
            m = random_counts(16, 0, 0);
            m[3] = 1; m[7] = 333; m[8] = 2; m[15] = 65; /* skewed, many empty */
            what = "skewed, 12 of 16 groups empty";
            break;
        case 5: G = 8; m = random_counts(8, 0, 0); what = "all groups empty"; break;
        case 6:
            G = 5;
            m = random_counts(5, 0, 0);
            m[0] = 1; m[1] = 63; m[2] = 65; m[3] = 127; m[4] = 129;
            n = 40; k = 56; what = "sizes off every tile, N=40 K=56"; break;
        case 7: G = 4; m = random_counts(4, 1, 50); n = k = 8; what = "N = K = 8"; break;
        default: G = 12; m = random_counts(12, 0, 60); offsets = 1; extra = 0; what = "sizes as offsets"; break;
        }
        /* wgrad three ways: bf16 and fp32 overwrite, fp32 accumulate (the
         * first and last are the sm90 defaults, the middle the simple one). */
        for (int v = 0; v < 5; v++) {
            int op = v < 3 ? v : KILN_OP_WGRAD;
            gcase c = {0};
            c.op = (kiln_op)op;
            c.in = KILN_DTYPE_BF16;
            c.out = v == 2 || v == 4 ? KILN_DTYPE_F32 : KILN_DTYPE_BF16;
            c.accumulate = v == 4;
            c.groups = G;
            c.n = n;
            c.k = k;
            c.counts = m;
            c.capacity = sum_counts(m, G) + extra;
            c.offsets = offsets;
            snprintf(label, sizeof label, "%s%s %s", kiln_op_name(c.op),
                     v == 3 ? " bf16" : v == 4 ? " acc" : "", what);
            c.label = label;
            run_checked(&c, g_gen, KILN_BACKEND_GENERATED);
        }
        free(m);
    }
    assert_int_equal(g_failures, failures_before);
}

/* Σm > capacity: rows past capacity are not computed, the flag is set. */
static void test_overflow(void **state)
{
    (void)state;
    int failures_before = g_failures;
    int32_t m[4] = {100, 120, 90, 60}; /* 370 */
    for (int op = 0; op < 2; op++) {
        gcase c = {0};
        c.label = op ? "dgrad overflow (370 rows, capacity 256)" : "fprop overflow (370 rows, capacity 256)";
        c.op = (kiln_op)op;
        c.in = c.out = KILN_DTYPE_BF16;
        c.groups = 4;
        c.n = 64;
        c.k = 64;
        c.counts = m;
        c.capacity = 256;
        c.expect_overflow = 1;
        run_checked(&c, g_gen, KILN_BACKEND_GENERATED);
    }
    assert_int_equal(g_failures, failures_before);
}

/* The cuBLASLt backend against the CPU reference. */
static void test_cublaslt_small(void **state)
{
    (void)state;
    int failures_before = g_failures;
    char label[128];
    for (int op = 0; op < 3; op++)
        for (int v = 0; v < 4; v++) {
            int32_t *m = random_counts(6, 0, 80);
            m[1] = 0;
            gcase c = {0};
            c.op = (kiln_op)op;
            c.in = v & 1 ? KILN_DTYPE_F16 : KILN_DTYPE_BF16;
            c.out = v & 2 ? KILN_DTYPE_F32 : c.in;
            c.groups = 6;
            c.n = 64;
            c.k = 48;
            c.counts = m;
            c.capacity = sum_counts(m, 6) + 3;
            c.host_sizes = 1;
            c.offsets = v == 3;
            const char *what = "plain";
            if (op == KILN_OP_WGRAD) {
                c.discrete = v >= 2;
                c.accumulate = v == 3;
                what = c.discrete ? (c.accumulate ? "discrete accumulate" : "discrete") : "dense";
            } else if (v == 1) {
                c.ptr_weights = 1;
                what = "pointer-array weights";
            } else if (v == 2) {
                c.bias = c.row_scale = c.scale_bias = c.alpha_pg = c.beta_c = 1;
                what = "full epilogue";
            } else if (v == 3) {
                c.alpha = 0.5f;
                c.bias = 1;
                what = "scalar alpha + bias, offsets";
            }
            snprintf(label, sizeof label, "%s %s->%s %s", kiln_op_name(c.op), kiln_dtype_name(c.in),
                     kiln_dtype_name(c.out), what);
            c.label = label;
            run_checked(&c, g_lt, KILN_BACKEND_CUBLASLT);
            free(m);
        }
    assert_int_equal(g_failures, failures_before);
}

/* Large shapes: generated path against cuBLASLt. */
static void test_generated_vs_cublaslt(void **state)
{
    (void)state;
    int failures_before = g_failures;
    for (int op = 0; op < 3; op++) {
        int32_t *m = random_counts(8, 200, 800);
        m[5] = 0;
        gcase c = {0};
        c.op = (kiln_op)op;
        c.in = KILN_DTYPE_BF16;
        c.out = op == KILN_OP_WGRAD ? KILN_DTYPE_F32 : KILN_DTYPE_BF16;
        c.groups = 8;
        c.n = 1024;
        c.k = 512;
        c.counts = m;
        c.capacity = sum_counts(m, 8) + 100;
        c.host_sizes = 1;
        c.bias = op != KILN_OP_WGRAD;
        c.label = kiln_op_name(c.op);
        gresult a, b;
        uint64_t seed = g_rng;
        run_case(&c, g_gen, KILN_BACKEND_GENERATED, 1, &a);
        g_rng = seed; /* the same inputs again */
        run_case(&c, g_lt, KILN_BACKEND_CUBLASLT, 1, &b);
        if (!a.out || !b.out || a.n_out != b.n_out) {
            CASE_FAIL("%s: generated vs cuBLASLt not compared (a run failed)", kiln_op_name(c.op));
            free(a.out);
            free(b.out);
            free(m);
            continue;
        }
        double num = 0, den = 0;
        for (size_t i = 0; i < a.n_out; i++) {
            double d = (double)a.out[i] - b.out[i];
            num += d * d;
            den += (double)b.out[i] * b.out[i];
        }
        double rel = sqrt(num / den);
        printf("  %-58s generated vs cublaslt: rel diff %.2e (%zu elements)\n",
               kiln_op_name(c.op), rel, a.n_out);
        if (!(rel <= tol_for(c.out)))
            CASE_FAIL("%s: generated and cuBLASLt differ by %.3e", kiln_op_name(c.op), rel);
        free(a.out);
        free(b.out);
        free(m);
    }
    assert_int_equal(g_failures, failures_before);
}

int main(void)
{
    int rc = gpu_setup();
    if (rc) return rc;
    kiln_context **ctxs[2] = {&g_gen, &g_lt};
    const unsigned allowed[2] = {KILN_ALLOW_GENERATED, KILN_ALLOW_CUBLASLT};
    for (int i = 0; i < 2; i++) {
        kiln_context_options o;
        kiln_context_options_init(&o);
        o.allowed_backends = allowed[i];
        if (kiln_context_create(&o, ctxs[i]) != KILN_OK) {
            printf("FAIL: kiln_context_create: %s\n", kiln_last_error(*ctxs[i]));
            return 1;
        }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fprop_dgrad_matrix),
        cmocka_unit_test(test_wgrad_matrix),
        cmocka_unit_test(test_group_patterns),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_cublaslt_small),
        cmocka_unit_test(test_generated_vs_cublaslt),
    };
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    /* Run with a bundle ($KILN_BUNDLE_PATH) and an empty cache, the
     * generated path must do no NVRTC work at all: every kernel comes from
     * the bundle. */
    kiln_context_stats st;
    kiln_context_stats_get(g_gen, &st);
    printf("generated path: %llu NVRTC compiles, %llu cache hits, %llu bundle hits, %llu launches\n",
           (unsigned long long)st.nvrtc_compiles, (unsigned long long)st.cache_hits,
           (unsigned long long)st.bundle_hits, (unsigned long long)st.launches);
    const char *expect = getenv("KILN_TEST_EXPECT_NO_NVRTC");
    if (expect && *expect == '1' && (st.nvrtc_compiles != 0 || st.bundle_hits == 0)) {
        printf("FAIL: KILN_TEST_EXPECT_NO_NVRTC=1 but NVRTC compiled %llu kernels "
               "(%llu from bundles)\n", (unsigned long long)st.nvrtc_compiles,
               (unsigned long long)st.bundle_hits);
        rc = 1;
    }
    kiln_context_destroy(g_gen);
    kiln_context_destroy(g_lt);
    return rc;
}

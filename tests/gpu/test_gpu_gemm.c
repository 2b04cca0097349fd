/* SPDX-License-Identifier: Apache-2.0 */
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
#include <pthread.h>
#include <time.h>

#include "testutil.h"

#include "catalog.h"
#include "gpu_util.h"

static kiln_context *g_gen; /* generated kernels only */
static int g_failures;      /* failing cases so far; each test asserts none of its own */

#define CASE_FAIL(...) GPU_CASE_FAIL(g_failures, __VA_ARGS__)
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
    /* wgrad's fused bias gradient: off unless dbias; dense [G, N + dbias_pad]
     * or (dbias_ptrs) one buffer of N + dbias_pad elements per group, the
     * padding poisoned and checked untouched */
    int dbias, dbias_ptrs, dbias_pad;
    kiln_dtype dbias_type;
    const char *want_kernel;   /* a substring of rep.kernel, or NULL */
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

/* The host and device buffers of one case. */
typedef struct gbuf {
    int64_t lda, ldd, ocols, orows, valid_rows;
    int64_t *start, *rows;       /* per group: first row, rows below capacity */
    int32_t *dsizes;             /* what d_sizes holds: counts or offsets */
    float *A, *B, *bias, *scale, *alphas, *C, *init, alpha;
    void *ea, *eb, *ebias, *ec;  /* A, B, bias, C encoded as their types */
    unsigned char *before, *after; /* the output's bytes around the call */
    size_t obytes, gbytes;       /* the output; one group's slice (discrete wgrad) */
    CUdeviceptr dA, dB, dBptrs, dD, dDptrs, dbias, dscale, dalpha, dC, dsz, dovf;
    CUdeviceptr *wbufs, *obufs;  /* per-group buffers behind dBptrs, dDptrs */
    /* the bias gradient (gcase.dbias): its bytes around the call */
    int64_t ld_db;
    size_t db_bytes, db_gbytes;  /* all of it; one group's slice */
    unsigned char *db_before, *db_after;
    CUdeviceptr ddb, ddbptrs, *dbbufs;
} gbuf;

/* G device buffers of `each` bytes holding host's consecutive slices, and
 * the array of their addresses on the device in *ptrs. */
static CUdeviceptr *dev_slices(const void *host, int G, size_t each, CUdeviceptr *ptrs)
{
    CUdeviceptr *bufs = xmalloc(sizeof(CUdeviceptr) * (size_t)G);
    for (int g = 0; g < G; g++) {
        bufs[g] = dev_alloc(each);
        upload(bufs[g], (const char *)host + (size_t)g * each, each);
    }
    *ptrs = dev_alloc(sizeof(CUdeviceptr) * (size_t)G);
    upload(*ptrs, bufs, sizeof(CUdeviceptr) * (size_t)G);
    return bufs;
}

/* Group rows, A and B (contiguous or one buffer per group). */
static void case_inputs(const gcase *c, gbuf *b)
{
    const int G = c->groups, isz = kiln_dtype_size(c->in);
    const int64_t N = c->n, K = c->k, cap = c->capacity;
    const int wg = c->op == KILN_OP_WGRAD;
    b->ocols = c->op == KILN_OP_FPROP ? N : K;
    b->lda = (c->op == KILN_OP_FPROP ? K : N) + c->lda_pad;
    b->ldd = b->ocols + c->ldd_pad;
    b->start = xmalloc(sizeof(int64_t) * (size_t)G);
    b->rows = xmalloc(sizeof(int64_t) * (size_t)G);
    b->dsizes = xmalloc(sizeof(int32_t) * (size_t)G);
    const int64_t total = kts_group_rows(c->counts, G, cap, b->start, b->rows);
    for (int g = 0; g < G; g++)
        b->dsizes[g] = c->offsets ? (int32_t)(b->start[g] + c->counts[g]) : c->counts[g];
    b->valid_rows = total < cap ? total : cap;
    b->A = rand_matrix(cap, c->op == KILN_OP_FPROP ? K : N, b->lda, c->in, &b->ea);
    b->B = rand_matrix(wg ? cap : (int64_t)G * N, K, K, c->in, &b->eb);
    b->dA = dev_copy(b->ea, (size_t)(cap * b->lda * isz));
    if (c->ptr_weights) b->wbufs = dev_slices(b->eb, G, (size_t)(N * K * isz), &b->dBptrs);
    else b->dB = dev_copy(b->eb, (size_t)((wg ? cap : (int64_t)G * N) * K * isz));
}

/* The output buffer(s) and their bytes before the call: poison, or when
 * accumulating random old values with poison in the padding columns. */
static void case_outputs(const gcase *c, gbuf *b)
{
    const int G = c->groups, osz = kiln_dtype_size(c->out);
    const int64_t N = c->n, K = c->k;
    const int wg = c->op == KILN_OP_WGRAD;
    b->orows = wg ? (int64_t)G * N : c->capacity;
    b->obytes = (size_t)(b->orows * b->ldd * osz);
    b->before = xmalloc(b->obytes);
    b->after = xmalloc(b->obytes);
    if (wg && c->accumulate) {
        void *enc;
        b->init = rand_matrix(b->orows, K, b->ldd, c->out, &enc);
        memcpy(b->before, enc, b->obytes);
        /* padding columns keep the poison, so an overwrite shows */
        for (int64_t i = 0; i < b->orows; i++)
            memset(b->before + (size_t)(i * b->ldd + K) * (size_t)osz, KTS_POISON,
                   (size_t)(c->ldd_pad * osz));
        free(enc);
    } else {
        memset(b->before, KTS_POISON, b->obytes);
    }
    b->gbytes = (size_t)(N * b->ldd * osz);
    if (wg && c->discrete) b->obufs = dev_slices(b->before, G, b->gbytes, &b->dDptrs);
    else b->dD = dev_copy(b->before, b->obytes);
}

/* Epilogue operands, the sizes and the overflow flag. */
static void case_epilogue(const gcase *c, gbuf *b)
{
    const int G = c->groups, osz = kiln_dtype_size(c->out);
    const int64_t cap = c->capacity, ocols = b->ocols;
    if (c->bias) {
        b->bias = rand_matrix(G, ocols, ocols, c->out, &b->ebias);
        b->dbias = dev_copy(b->ebias, (size_t)(G * ocols * osz));
    }
    if (c->row_scale) {
        b->scale = xmalloc(sizeof(float) * (size_t)(cap ? cap : 1));
        for (int64_t i = 0; i < cap; i++) b->scale[i] = rng_val() * 2.0f;
        b->dscale = dev_copy(b->scale, sizeof(float) * (size_t)cap);
    }
    if (c->alpha_pg) {
        b->alphas = xmalloc(sizeof(float) * (size_t)G);
        for (int g = 0; g < G; g++) b->alphas[g] = rng_val() * 2.0f;
        b->dalpha = dev_copy(b->alphas, sizeof(float) * (size_t)G);
    }
    if (c->beta_c) {
        b->C = rand_matrix(cap, ocols, ocols, c->out, &b->ec);
        b->dC = dev_copy(b->ec, (size_t)(cap * ocols * osz));
    }
    b->alpha = c->alpha != 0.0f ? c->alpha : 1.0f;
    b->dsz = dev_copy(b->dsizes, sizeof(int32_t) * (size_t)G);
    int32_t zero = 0;
    b->dovf = dev_copy(&zero, sizeof zero);
}

/* The bias gradient's buffer(s): poison, or when accumulating random old
 * values in the N valid elements of each group (poison in the padding). */
static void case_dbias(const gcase *c, gbuf *b)
{
    if (!c->dbias) return;
    const int G = c->groups;
    const int64_t N = c->n;
    b->ld_db = N + c->dbias_pad;
    b->db_gbytes = (size_t)(b->ld_db * kiln_dtype_size(c->dbias_type));
    b->db_bytes = (size_t)G * b->db_gbytes;
    b->db_before = xmalloc(b->db_bytes);
    b->db_after = xmalloc(b->db_bytes);
    memset(b->db_before, KTS_POISON, b->db_bytes);
    if (c->accumulate)
        for (int g = 0; g < G; g++)
            for (int64_t n = 0; n < N; n++)
                kts_store(b->db_before, (size_t)(g * b->ld_db + n), c->dbias_type, rng_val());
    if (c->dbias_ptrs) b->dbbufs = dev_slices(b->db_before, G, b->db_gbytes, &b->ddbptrs);
    else b->ddb = dev_copy(b->db_before, b->db_bytes);
}

static void case_problem(const gcase *c, const gbuf *b, kiln_problem *p)
{
    kts_problem_init(p, c->op, c->groups, c->n, c->k, c->capacity, b->dsz, b->dA, b->dB, b->dD);
    p->a_type = p->b_type = c->in;
    p->out_type = c->out;
    p->sizes_kind = c->offsets ? KILN_SIZES_OFFSETS : KILN_SIZES_COUNTS;
    p->host_sizes = c->host_sizes ? b->dsizes : NULL;
    p->lda = c->lda_pad ? b->lda : 0;
    p->d_b_ptrs = c->ptr_weights ? (const void *const *)(uintptr_t)b->dBptrs : NULL;
    p->d_out_ptrs = b->dDptrs ? (void *const *)(uintptr_t)b->dDptrs : NULL;
    p->ldd = c->ldd_pad ? b->ldd : 0;
    p->wgrad_output = c->discrete ? KILN_WGRAD_DISCRETE : KILN_WGRAD_DENSE;
    p->accumulate = c->accumulate;
    p->d_overflow = (int32_t *)(uintptr_t)b->dovf;
    p->epilogue.alpha = b->alpha;
    p->epilogue.d_bias = (const void *)(uintptr_t)b->dbias;
    p->epilogue.d_row_scale = (const float *)(uintptr_t)b->dscale;
    p->epilogue.scale_bias = c->scale_bias;
    p->epilogue.d_alpha = (const float *)(uintptr_t)b->dalpha;
    p->epilogue.beta = c->beta_c ? 0.75f : 0.0f;
    p->epilogue.d_c = (const void *)(uintptr_t)b->dC;
    if (c->dbias) {
        p->dbias_type = c->dbias_type;
        p->d_dbias = (void *)(uintptr_t)b->ddb;
        p->d_dbias_ptrs = c->dbias_ptrs ? (void *const *)(uintptr_t)b->ddbptrs : NULL;
        p->ld_dbias = !c->dbias_ptrs && c->dbias_pad ? b->ld_db : 0;
    }
}

/* After the call: the overflow flag; every valid element written and (unless
 * no_ref) near the reference; every other byte unchanged. */
static void case_check(const gcase *c, gbuf *b, const kiln_call_report *rep, int no_ref, gresult *r)
{
    const int G = c->groups, osz = kiln_dtype_size(c->out);
    const int64_t N = c->n, K = c->k, ldd = b->ldd;
    const int wg = c->op == KILN_OP_WGRAD;
    if (b->obufs)
        for (int g = 0; g < G; g++) download(b->after + (size_t)g * b->gbytes, b->obufs[g], b->gbytes);
    else
        download(b->after, b->dD, b->obytes);
    int32_t ovf = -1;
    download(&ovf, b->dovf, sizeof ovf);
    if (c->expect_overflow) {
        if (ovf != 1) CASE_FAIL("%s: overflow flag is %d, wanted 1", c->label, ovf);
    } else if (ovf != 0) {
        CASE_FAIL("%s: overflow flag is %d, wanted 0", c->label, ovf);
    }

    kts_problem ref = {.op = c->op, .n = N, .k = K, .lda = b->lda, .a = b->A, .b = b->B,
                       .start = b->start, .rows = b->rows, .alpha = b->alpha, .alphas = b->alphas,
                       .row_scale = b->scale, .bias = b->bias, .scale_bias = c->scale_bias,
                       .beta = 0.75f, .c = b->C, .init = b->init, .ldd = ldd};
    /* dgrad's reference reads whole rows of B transposed (deep cases) */
    float *bt = c->op == KILN_OP_DGRAD && !no_ref ? kts_transpose_b(b->B, G, N, K) : NULL;
    ref.bt = bt;
    size_t nvalid = wg ? (size_t)(G * N * K) : (size_t)(b->valid_rows * b->ocols);
    r->out = xmalloc(sizeof(float) * (nvalid ? nvalid : 1));
    r->n_out = nvalid;
    unsigned char *is_valid = calloc((size_t)(b->orows * ldd), 1);
    assert_non_null(is_valid);
    kts_err err = {0};
    size_t vi = 0;
    for (int g = 0; g < G; g++) {
        int64_t r0 = wg ? (int64_t)g * N : b->start[g], nr = wg ? N : b->rows[g];
        for (int64_t i = 0; i < nr; i++)
            for (int64_t j = 0; j < b->ocols; j++) {
                size_t e = (size_t)((r0 + i) * ldd + j);
                is_valid[e] = 1;
                float got = kts_load(b->after, e, c->out);
                r->out[vi++] = got;
                if (no_ref) err.nan += got != got;
                else kts_err_add(&err, got, kts_reference(&ref, g, i, j));
            }
    }
    free(bt);
    if (err.nan) CASE_FAIL("%s: %zu of %zu valid elements were not written (NaN)", c->label, err.nan, nvalid);
    size_t touched = kts_changed_outside(b->before, b->after, is_valid, (size_t)(b->orows * ldd), (size_t)osz);
    free(is_valid);
    if (touched)
        CASE_FAIL("%s: %zu elements outside the valid rows/columns were changed", c->label, touched);
    r->rel_err = no_ref ? 0 : kts_err_rel(&err);
    if (!no_ref) {
        printf("  %-58s %-9s %-36s rel err %.2e\n", c->label, backend_name(rep->backend), rep->kernel, r->rel_err);
        if (!(r->rel_err <= tol_for(c->out)))
            CASE_FAIL("%s: relative error %.3e exceeds %.1e", c->label, r->rel_err, tol_for(c->out));
    }
}

/* The bias gradient against the double reference Σ_t dY[t, n] over the
 * group's tokens below the capacity (plus the old value when accumulating):
 * an empty group gives exact zeros (or keeps its old bytes when
 * accumulating); every byte outside the N valid elements is unchanged. */
static void case_check_dbias(const gcase *c, gbuf *b, const kiln_call_report *rep)
{
    const int G = c->groups, esz = kiln_dtype_size(c->dbias_type);
    const int64_t N = c->n, ld = b->ld_db;
    if (b->dbbufs)
        for (int g = 0; g < G; g++)
            download(b->db_after + (size_t)g * b->db_gbytes, b->dbbufs[g], b->db_gbytes);
    else
        download(b->db_after, b->ddb, b->db_bytes);
    unsigned char *is_valid = calloc((size_t)(G * ld), 1);
    assert_non_null(is_valid);
    kts_err err = {0};
    size_t empty_bad = 0;
    for (int g = 0; g < G; g++)
        for (int64_t n = 0; n < N; n++) {
            size_t e = (size_t)(g * ld + n);
            is_valid[e] = 1;
            float got = kts_load(b->db_after, e, c->dbias_type);
            double ref = c->accumulate ? kts_load(b->db_before, e, c->dbias_type) : 0.0;
            for (int64_t t = 0; t < b->rows[g]; t++) ref += b->A[(b->start[g] + t) * b->lda + n];
            kts_err_add(&err, got, ref);
            if (b->rows[g] == 0 &&
                (c->accumulate ? memcmp(b->db_after + e * (size_t)esz, b->db_before + e * (size_t)esz,
                                        (size_t)esz) != 0
                               : got != 0.0f))
                empty_bad++;
        }
    size_t touched = kts_changed_outside(b->db_before, b->db_after, is_valid, (size_t)(G * ld),
                                         (size_t)esz);
    free(is_valid);
    double rel = kts_err_rel(&err);
    printf("  %-58s %-9s %-36s dbias %s rel err %.2e\n", c->label, backend_name(rep->backend),
           rep->kernel, kiln_dtype_name(c->dbias_type), rel);
    if (err.nan) CASE_FAIL("%s: %zu of %zu dbias elements were not written (NaN)", c->label, err.nan,
                           (size_t)(G * N));
    if (empty_bad)
        CASE_FAIL("%s: %zu dbias elements of empty groups are not %s", c->label, empty_bad,
                  c->accumulate ? "their old values" : "zero");
    if (touched) CASE_FAIL("%s: %zu dbias elements outside the N valid ones were changed", c->label, touched);
    if (!(rel <= tol_for(c->dbias_type)))
        CASE_FAIL("%s: dbias relative error %.3e exceeds %.1e", c->label, rel, tol_for(c->dbias_type));
}

static void case_free(const gcase *c, gbuf *b)
{
    FREE_ALL(b->A, b->B, b->ea, b->eb, b->bias, b->ebias, b->scale, b->alphas, b->C, b->ec, b->init,
             b->before, b->after, b->start, b->rows, b->dsizes);
    for (int g = 0; b->wbufs && g < c->groups; g++) dev_free(b->wbufs[g]);
    for (int g = 0; b->obufs && g < c->groups; g++) dev_free(b->obufs[g]);
    for (int g = 0; b->dbbufs && g < c->groups; g++) dev_free(b->dbbufs[g]);
    FREE_ALL(b->wbufs, b->obufs, b->dbbufs, b->db_before, b->db_after);
    DEV_FREE_ALL(b->ddb, b->ddbptrs, b->dA, b->dB, b->dBptrs, b->dD, b->dDptrs, b->dbias, b->dscale,
                 b->dalpha, b->dC, b->dsz, b->dovf);
}

/* A zeroed b holding c's buffers, and the problem p that points at them. */
static void case_setup(const gcase *c, gbuf *b, kiln_problem *p)
{
    memset(b, 0, sizeof *b);
    case_inputs(c, b);
    case_outputs(c, b);
    case_epilogue(c, b);
    case_dbias(c, b);
    case_problem(c, b, p);
}

/* Runs c on ctx; checks the backend, written/untouched bytes and (unless
 * no_ref) the CPU reference.  Fills r->out with the valid outputs. */
static void run_case(const gcase *c, kiln_context *ctx, kiln_backend want, int no_ref, gresult *r)
{
    gbuf b;
    kiln_problem p;
    case_setup(c, &b, &p);
    r->out = NULL;
    r->n_out = 0;
    r->rel_err = -1;
    kiln_call_report rep;
    if (gpu_gemm_case(ctx, &p, c->label, &g_failures, &rep)) {
        if (rep.backend != want)
            CASE_FAIL("%s: ran on %s (%s), wanted %s", c->label, backend_name(rep.backend),
                      rep.kernel, backend_name(want));
        if (c->want_kernel && !strstr(rep.kernel, c->want_kernel))
            CASE_FAIL("%s: ran kernel %s, wanted a %s one", c->label, rep.kernel, c->want_kernel);
        case_check(c, &b, &rep, no_ref, r);
        if (c->dbias) case_check_dbias(c, &b, &rep);
    }
    case_free(c, &b);
}

static void run_checked(const gcase *c, kiln_context *ctx, kiln_backend want)
{
    gresult r;
    run_case(c, ctx, want, 0, &r);
    free(r.out);
}

/* run_case (the valid outputs dropped) on c under the label that fmt and
 * what follows it make. */
static void run_named(gcase *c, kiln_context *ctx, kiln_backend want, int no_ref, const char *fmt,
                      ...) __attribute__((format(printf, 5, 6)));
static void run_named(gcase *c, kiln_context *ctx, kiln_backend want, int no_ref, const char *fmt,
                      ...)
{
    char label[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(label, sizeof label, fmt, ap);
    va_end(ap);
    c->label = label;
    gresult r;
    run_case(c, ctx, want, no_ref, &r);
    free(r.out);
    c->label = NULL;
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

/* A case of op, in -> out, on `groups` groups of the host counts, N n and
 * K k, with room for spare rows past Σcounts; every option off. */
static gcase make_case(kiln_op op, kiln_dtype in, kiln_dtype out, int groups, int64_t n, int64_t k,
                       const int32_t *counts, int64_t spare)
{
    return (gcase){.op = op, .in = in, .out = out, .groups = groups, .n = n, .k = k,
                   .counts = counts, .capacity = sum_counts(counts, groups) + spare};
}

/* The four group mixes the forced-kernel tests run, into *groups and the
 * returned counts (the caller frees them); *what names the mix. */
enum { MIX_RAGGED, MIX_LARGE, MIX_DECODE, MIX_TAILS, MIXES };
static int32_t *group_mix(int mix, int *groups, const char **what)
{
    int32_t *m;
    if (mix == MIX_RAGGED) {
        *groups = 40;
        m = random_counts(40, 0, 300);
        m[3] = m[17] = 0;
        *what = "40 groups of 0..300 (2 empty)";
    } else if (mix == MIX_LARGE) {
        *groups = 3;
        m = random_counts(3, 500, 700);
        *what = "3 groups of 500..700";
    } else if (mix == MIX_DECODE) {
        *groups = 130;
        m = random_counts(130, 0, 9);
        *what = "130 decode groups of 0..9";
    } else {
        /* every length of a group's last 64-token block, 1..64, half of
         * them after a whole block: each tail wgrad masks, and each partial
         * last row tile of fprop/dgrad */
        *groups = 64;
        m = xmalloc(sizeof(int32_t) * 64);
        for (int g = 0; g < 64; g++) m[g] = g + 1 + (g & 1) * 64;
        *what = "64 groups of 1..128 (every last-block length)";
    }
    return m;
}

static const kiln_dtype in_types[2] = {KILN_DTYPE_BF16, KILN_DTYPE_F16};

/* fprop and dgrad: every type combination × weight layout × epilogue term. */
static void test_fprop_dgrad_matrix(void **state)
{
    (void)state;
    int failures_before = g_failures;
    for (int op = 0; op < 2; op++)
        for (int ti = 0; ti < 2; ti++)
            for (int oi = 0; oi < 2; oi++) {
                kiln_dtype in = in_types[ti], out = oi ? KILN_DTYPE_F32 : in;
                for (int v = 0; v < 9; v++) {
                    int32_t *m = random_counts(8, 0, 70);
                    gcase c = make_case((kiln_op)op, in, out, 8, 96, 80, m, 17);
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
                    run_named(&c, g_gen, KILN_BACKEND_GENERATED, 0, "%s %s->%s %s",
                              kiln_op_name(c.op), kiln_dtype_name(in), kiln_dtype_name(out), what);
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
    for (int ti = 0; ti < 2; ti++)
        for (int oi = 0; oi < 2; oi++)
            for (int disc = 0; disc < 2; disc++)
                for (int acc = 0; acc < 2; acc++) {
                    kiln_dtype in = in_types[ti], out = oi ? KILN_DTYPE_F32 : in;
                    if (acc && out != KILN_DTYPE_F32) continue;
                    int32_t *m = random_counts(6, 0, 90);
                    m[2] = 0; /* an empty group: zeros, or untouched when accumulating */
                    gcase c = make_case(KILN_OP_WGRAD, in, out, 6, 72, 88, m, 5);
                    c.discrete = disc;
                    c.accumulate = acc;
                    c.ldd_pad = disc ? 8 : 0;
                    run_named(&c, g_gen, KILN_BACKEND_GENERATED, 0, "wgrad %s->%s %s%s",
                              kiln_dtype_name(in), kiln_dtype_name(out), disc ? "discrete" : "dense",
                              acc ? " accumulate" : "");
                    free(m);
                }
    assert_int_equal(g_failures, failures_before);
}

/* The kernel family a wgrad call with dbias should reach: the shipped sm90
 * dbias specs cover 16-bit → same type and f32 accumulate (dense and
 * discrete); f32 overwrite goes to the simple family. */
static const char *dbias_family(kiln_dtype in, kiln_dtype out, int acc)
{
    return out == in || acc ? "sm90_wgrad" : "simple_wgrad";
}

/* wgrad with the fused bias gradient: types × dW output × accumulate ×
 * dbias type (f32 or the output type) × db layout (dense with ld_dbias > N,
 * or per-expert pointers), with a 0- and a 1-token group, N and K off every
 * tile. */
static void test_wgrad_dbias_matrix(void **state)
{
    (void)state;
    int failures_before = g_failures;
    for (int ti = 0; ti < 2; ti++)
        for (int oi = 0; oi < 2; oi++)
            for (int disc = 0; disc < 2; disc++)
                for (int acc = 0; acc < 2; acc++)
                    for (int dt = 0; dt < 2; dt++)
                        for (int ptrs = 0; ptrs < 2; ptrs++) {
                            kiln_dtype in = in_types[ti], out = oi ? KILN_DTYPE_F32 : in;
                            kiln_dtype dbt = dt ? out : KILN_DTYPE_F32;
                            if (acc && out != KILN_DTYPE_F32) continue;
                            if (dt && out == KILN_DTYPE_F32) continue; /* the same as f32 */
                            int32_t *m = random_counts(6, 0, 90);
                            m[2] = 0; /* empty: zeros, or untouched when accumulating */
                            m[4] = 1;
                            gcase c = make_case(KILN_OP_WGRAD, in, out, 6, 200, 88, m, 5);
                            c.discrete = disc;
                            c.accumulate = acc;
                            c.ldd_pad = disc ? 8 : 0;
                            c.dbias = 1;
                            c.dbias_type = dbt;
                            c.dbias_ptrs = ptrs;
                            c.dbias_pad = ptrs ? 3 : 24;
                            c.want_kernel = dbias_family(in, out, acc);
                            run_named(&c, g_gen, KILN_BACKEND_GENERATED, 0,
                                      "wgrad+dbias %s->%s %s%s, db %s %s", kiln_dtype_name(in),
                                      kiln_dtype_name(out), disc ? "discrete" : "dense",
                                      acc ? " acc" : "", kiln_dtype_name(dbt),
                                      ptrs ? "ptrs" : "dense ld+24");
                            free(m);
                        }
    assert_int_equal(g_failures, failures_before);
}

/* dbias on the edges of the schedule: sizes off every tile, 1024 groups
 * (most empty or tiny), one group holding every token, several k tiles (only
 * the first column tile sums db), many k-blocks; each as bf16 overwrite
 * (bf16 db, dense padded) and f32 accumulate (f32 db, per-expert). */
static void test_wgrad_dbias_patterns(void **state)
{
    (void)state;
    int failures_before = g_failures;
    for (int pat = 0; pat < 5; pat++) {
        int G;
        int32_t *m;
        int64_t n = 200, k = 72, extra = 9;
        int no_ref = 0;
        const char *what;
        switch (pat) {
        case 0:
            G = 7;
            m = random_counts(7, 0, 0);
            m[1] = 1; m[2] = 63; m[3] = 65; m[4] = 127; m[5] = 129; m[6] = 64;
            what = "sizes off every tile, 0 and 1 token";
            break;
        case 1: G = 1024; m = random_counts(1024, 0, 6); n = 32; k = 32; what = "1024 groups"; break;
        case 2:
            G = 8;
            m = random_counts(8, 0, 0);
            m[3] = 777;
            n = 136; k = 64; what = "one group holds all 777 tokens"; break;
        case 3: G = 4; m = random_counts(4, 1, 150); n = 72; k = 600; what = "K = 600 (several k tiles)"; break;
        default:
            G = 8;
            m = random_counts(8, 200, 800);
            m[5] = 0;
            n = 1024; k = 512; no_ref = 1; /* dW: written and untouched only (too big for the CPU) */
            what = "8 x 200..800 tokens, N=1024 K=512";
            break;
        }
        for (int v = 0; v < 2; v++) {
            gcase c = make_case(KILN_OP_WGRAD, KILN_DTYPE_BF16, v ? KILN_DTYPE_F32 : KILN_DTYPE_BF16,
                                G, n, k, m, extra);
            c.accumulate = v;
            c.dbias = 1;
            c.dbias_type = v ? KILN_DTYPE_F32 : KILN_DTYPE_BF16;
            c.dbias_ptrs = v;
            c.dbias_pad = v ? 5 : 8;
            c.want_kernel = "sm90_wgrad";
            run_named(&c, g_gen, KILN_BACKEND_GENERATED, no_ref, "wgrad+dbias %s %s",
                      v ? "acc f32" : "bf16", what);
        }
        free(m);
    }
    assert_int_equal(g_failures, failures_before);
}

/* Group counts and size patterns, each op. */
static void test_group_patterns(void **state)
{
    (void)state;
    int failures_before = g_failures;
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
            gcase c = make_case((kiln_op)op, KILN_DTYPE_BF16,
                                v == 2 || v == 4 ? KILN_DTYPE_F32 : KILN_DTYPE_BF16, G, n, k, m, extra);
            c.accumulate = v == 4;
            c.offsets = offsets;
            run_named(&c, g_gen, KILN_BACKEND_GENERATED, 0, "%s%s %s", kiln_op_name(c.op),
                      v == 3 ? " bf16" : v == 4 ? " acc" : "", what);
        }
        free(m);
    }
    assert_int_equal(g_failures, failures_before);
}

/* A context whose dispatch serves every call with kernel `name`
 * (KILN_KERNEL, read when a context is made), made with options o (NULL:
 * the defaults); NULL, the case failed, when none can be made. */
static kiln_context *forced_context(const char *name, const kiln_context_options *o)
{
    setenv("KILN_KERNEL", name, 1);
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(o, &ctx);
    unsetenv("KILN_KERNEL");
    if (st != KILN_OK) {
        CASE_FAIL("kiln_context_create(KILN_KERNEL=%s): %s", name, kiln_last_error(ctx));
        kiln_context_destroy(ctx);
        return NULL;
    }
    return ctx;
}

/* Kernel `name`, forced, over the four group mixes (mix i with N, K =
 * nk[i]), bf16 in; every element checked (run_checked), and with dbias
 * (wgrad) every element of an f32 db too.  discrete (wgrad): dW in a
 * buffer per group, each row padded by 8 poisoned columns. */
static void run_forced_mixes(const char *name, kiln_op op, kiln_dtype out, int accumulate,
                             int dbias, int discrete, const int64_t nk[MIXES][2], int64_t spare)
{
    kiln_context *ctx = forced_context(name, NULL);
    if (!ctx) return;
    for (int mix = 0; mix < MIXES; mix++) {
        int groups;
        const char *what;
        int32_t *m = group_mix(mix, &groups, &what);
        gcase c = make_case(op, KILN_DTYPE_BF16, out, groups, nk[mix][0], nk[mix][1], m, spare);
        c.accumulate = accumulate;
        c.dbias = dbias;
        c.dbias_type = KILN_DTYPE_F32;
        c.discrete = discrete;
        c.ldd_pad = discrete ? 8 : 0;
        c.want_kernel = name;
        run_named(&c, ctx, KILN_BACKEND_GENERATED, 0, "%s: %s, N=%lld K=%lld", name, what,
                  (long long)c.n, (long long)c.k);
        free(m);
    }
    kiln_context_destroy(ctx);
}

/* 1 if catalog entry ce is a tuned (the table's winner, not a default)
 * bf16 fprop or dgrad kernel; *op gets its op. */
static int tuned_bf16_fwd(const kiln_catalog_entry *ce, kiln_op *op)
{
    if (!ce->tuned_only || !strstr(ce->desc, " a=bf16 ") || !strstr(ce->desc, " out=bf16 ") ||
        !strstr(ce->desc, " fp8_recipe=none"))
        return 0;
    *op = strstr(ce->desc, "op=dgrad") ? KILN_OP_DGRAD : KILN_OP_FPROP;
    return *op == KILN_OP_DGRAD || strstr(ce->desc, "op=fprop") != NULL;
}

/* Kernel `name`, forced, on 12 groups of 0..200 tokens with pointer-array
 * weights (N 136, K 200: partial tiles); every element checked. */
static void forced_pointer_weights(const char *name, kiln_op op)
{
    kiln_context *ctx = forced_context(name, NULL);
    if (!ctx) return;
    int32_t *m = random_counts(12, 0, 200);
    gcase c = make_case(op, KILN_DTYPE_BF16, KILN_DTYPE_BF16, 12, 136, 200, m, 5);
    c.ptr_weights = 1;
    c.want_kernel = name;
    run_named(&c, ctx, KILN_BACKEND_GENERATED, 0, "%s, pointer weights", name);
    free(m);
    kiln_context_destroy(ctx);
}

/* Pointer-array weights on sm90 (weights: any, every shipped 16-bit
 * kernel): the producer re-points a per-SM copy of B's map at each group's
 * weights.  Many groups of 0..300 tokens make every CTA change groups many
 * times (more changes than map slots), sizes off every tile; each case has
 * its own weight buffers, so a map left from the case before would show.
 * Then the cooperative 128x256 defaults, whose epilogue stores through
 * TMA from boxes staged partly in the ring slot of the tile's last k-block
 * (sm90_gemm.cuh, HOLD_BOXES), the 64x128 pingpong defaults, and every
 * tuned bf16 fprop/dgrad kernel of the catalog (the table's
 * winners from the sweeps, which take either weights layout), forced
 * through KILN_KERNEL; finding no tuned one fails. */
static void test_sm90_pointer_weights(void **state)
{
    (void)state;
    int failures_before = g_failures;
    static const int64_t nk[MIXES][2] = {{200, 136}, {256, 512}, {64, 1024}, {136, 200}};
    for (int mix = 0; mix < MIXES; mix++)
        for (int op = 0; op < 2; op++)
            for (int ti = 0; ti < 2; ti++) {
                kiln_dtype in = in_types[ti];
                int groups;
                const char *what;
                int32_t *m = group_mix(mix, &groups, &what);
                gcase c = make_case((kiln_op)op, in, in, groups, nk[mix][0], nk[mix][1], m, 11);
                c.ptr_weights = 1;
                c.bias = mix == MIX_LARGE && in == KILN_DTYPE_BF16; /* the bf16 _epilogue kernels */
                c.want_kernel = "sm90_";
                run_named(&c, g_gen, KILN_BACKEND_GENERATED, 0,
                          "sm90 pointer weights %s %s %s, N=%lld K=%lld%s", kiln_op_name(c.op),
                          kiln_dtype_name(in), what, (long long)c.n, (long long)c.k,
                          c.bias ? " + bias" : "");
                free(m);
            }
    /* the cooperative defaults, then the table's winners (the catalog
     * builds them) */
    forced_pointer_weights("sm90_fprop_bf16_128x256", KILN_OP_FPROP);
    forced_pointer_weights("sm90_dgrad_bf16_128x256", KILN_OP_DGRAD);
    forced_pointer_weights("sm90_fprop_bf16_64x128", KILN_OP_FPROP);
    forced_pointer_weights("sm90_dgrad_bf16_64x128", KILN_OP_DGRAD);
    int tuned = 0;
    kiln_op op;
    for (size_t e = 0; e < kiln_catalog_count; e++)
        if (tuned_bf16_fwd(&kiln_catalog[e], &op) && strstr(kiln_catalog[e].desc, " weights=any ")) {
            tuned++;
            forced_pointer_weights(kiln_catalog[e].name, op);
        }
    if (!tuned) CASE_FAIL("the catalog carries no tuned bf16 fprop/dgrad kernel with weights: any");
    assert_int_equal(g_failures, failures_before);
}

/* Every 16-bit fprop/dgrad default with epilogue terms compiled in
 * (specs/default/sm90_*_bf16_*_epilogue: 128x128 and 64x256 pingpong, for
 * fprop and dgrad), forced through KILN_KERNEL over the four
 * mixes with every term at once (bias scaled by the row scale, per-group
 * alpha, beta*C) and padded lda/ldd: N and K off every tile width, empty
 * and decode-sized groups; every element checked and the poisoned padding
 * untouched.  Dispatch alone would reach only the tile the model picks for
 * the matrix test's one shape; finding fewer than four fails. */
static void test_epilogue_defaults(void **state)
{
    (void)state;
    int failures_before = g_failures, found = 0;
    static const int64_t nk[MIXES][2] = {{328, 264}, {200, 136}, {136, 328}, {264, 200}};
    for (size_t e = 0; e < kiln_catalog_count; e++) {
        const kiln_catalog_entry *ce = &kiln_catalog[e];
        const size_t len = strlen(ce->name);
        if (ce->tuned_only || len < 9 || strcmp(ce->name + len - 9, "_epilogue") ||
            !strstr(ce->desc, " a=bf16 "))
            continue;
        const kiln_op op = strstr(ce->desc, "op=dgrad") ? KILN_OP_DGRAD : KILN_OP_FPROP;
        found++;
        kiln_context *ctx = forced_context(ce->name, NULL);
        if (!ctx) continue;
        for (int mix = 0; mix < MIXES; mix++) {
            int groups;
            const char *what;
            int32_t *m = group_mix(mix, &groups, &what);
            gcase c = make_case(op, KILN_DTYPE_BF16, KILN_DTYPE_BF16, groups, nk[mix][0],
                                nk[mix][1], m, 9);
            c.bias = c.row_scale = c.scale_bias = c.alpha_pg = c.beta_c = 1;
            c.lda_pad = 8;
            c.ldd_pad = 16;
            c.want_kernel = ce->name;
            run_named(&c, ctx, KILN_BACKEND_GENERATED, 0, "%s: every term, %s, N=%lld K=%lld",
                      ce->name, what, (long long)c.n, (long long)c.k);
            free(m);
        }
        kiln_context_destroy(ctx);
    }
    if (found < 4) CASE_FAIL("the catalog carries %d bf16 _epilogue defaults (want 4 or more)", found);
    assert_int_equal(g_failures, failures_before);
}

/* The tuned bf16 fprop and dgrad kernels (the table's winners from the
 * sweeps: 128x192 and 64x192 tiles among them since the fourteenth
 * session), each forced through KILN_KERNEL over the four mixes, with N
 * and K off every tile width (328 = 192 + 136 = 2.5 x 128 + 8, 264, 200,
 * 136): partial column tiles of each width, partial row tiles, empty and
 * decode-sized groups; every element checked and the poisoned padding
 * untouched (run_checked).  The shipped table names some, so finding none
 * fails, and so does a table without a 192-wide one. */
static void test_fprop_dgrad_tuned(void **state)
{
    (void)state;
    int failures_before = g_failures;
    int kernels = 0, wide192 = 0;
    static const int64_t nk[MIXES][2] = {{328, 264}, {200, 328}, {328, 136}, {136, 200}};
    kiln_op op;
    for (size_t e = 0; e < kiln_catalog_count; e++) {
        const kiln_catalog_entry *ce = &kiln_catalog[e];
        if (!tuned_bf16_fwd(ce, &op)) continue;
        kernels++;
        wide192 += strstr(ce->desc, " tile=128x192x64 ") || strstr(ce->desc, " tile=64x192x64 ");
        run_forced_mixes(ce->name, op, KILN_DTYPE_BF16, 0, 0, 0, nk, 9);
    }
    /* the 192-wide defaults, which the model serves on output widths that
     * 192 divides and 256 does not (runtime/dispatch.c, width_suits) */
    run_forced_mixes("sm90_fprop_bf16_128x192", KILN_OP_FPROP, KILN_DTYPE_BF16, 0, 0, 0, nk, 9);
    run_forced_mixes("sm90_dgrad_bf16_128x192", KILN_OP_DGRAD, KILN_DTYPE_BF16, 0, 0, 0, nk, 9);
    /* the cooperative 128x256 defaults, which run the tiles of a group of
     * at most 64 rows as half tiles, each warp group on 128 of the columns
     * (sm90_gemm.cuh, HALF_TILES): the tails mix has groups of every size
     * 1..64 beside groups of 65..128, the decode mix only such groups; the
     * output widths leave a last column tile whose second half lies wholly
     * past the output (fprop's N = 328, dgrad's K = 264) or partly past it
     * (N = 200 and 136, K = 136 and 200) */
    run_forced_mixes("sm90_fprop_bf16_128x256", KILN_OP_FPROP, KILN_DTYPE_BF16, 0, 0, 0, nk, 9);
    run_forced_mixes("sm90_dgrad_bf16_128x256", KILN_OP_DGRAD, KILN_DTYPE_BF16, 0, 0, 0, nk, 9);
    /* the 64x128 pingpong defaults (decode-sized groups on twice the SMs
     * of 64x256) */
    run_forced_mixes("sm90_fprop_bf16_64x128", KILN_OP_FPROP, KILN_DTYPE_BF16, 0, 0, 0, nk, 9);
    run_forced_mixes("sm90_dgrad_bf16_64x128", KILN_OP_DGRAD, KILN_DTYPE_BF16, 0, 0, 0, nk, 9);
    if (!kernels) CASE_FAIL("the catalog carries no tuned bf16 fprop/dgrad kernel (the table's winners)");
    if (!wide192) CASE_FAIL("the catalog carries no 192-wide tuned fprop/dgrad kernel (the GPT-OSS winners)");
    assert_int_equal(g_failures, failures_before);
}

/* Fewer work items than CTAs on reductions of SPREAD_MIN_DEPTH (4096) or
 * more: the unsplit kernels give the items to the even CTAs first
 * (templates/sm90_gemm_cut.cuh, kiln_walk_start).  The pingpong defaults
 * and the cooperative 128x256 ones (unsplit: KILN_SPLIT=0), forced, where
 * the capacity's 512 spare rows size the grid past the items: 8 groups of
 * 1..64 rows on a narrow output (64x128 fprop: 32 items on 84 CTAs); 5
 * groups of 0..100 rows, a reduction of 4160 (a partial last k-block) and
 * an output of 520; one group of 30 rows on N = K = 4096.  Every element
 * and the untouched spare rows are checked: an item no CTA took, or one
 * written into another's rows, fails. */
static void test_few_items(void **state)
{
    (void)state;
    int failures_before = g_failures;
    static const char *const kernels[] = {"sm90_fprop_bf16_64x128", "sm90_dgrad_bf16_64x128",
                                          "sm90_fprop_bf16_64x256", "sm90_dgrad_bf16_64x256",
                                          "sm90_fprop_bf16_128x128", "sm90_dgrad_bf16_128x128",
                                          "sm90_fprop_bf16_128x256", "sm90_dgrad_bf16_128x256"};
    static const int64_t red[3] = {4096, 4160, 4096}, wide[3] = {512, 520, 4096};
    setenv("KILN_SPLIT", "0", 1);
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++) {
        kiln_context *ctx = forced_context(kernels[i], NULL);
        if (!ctx) continue;
        const kiln_op op = strstr(kernels[i], "dgrad") ? KILN_OP_DGRAD : KILN_OP_FPROP;
        for (int v = 0; v < 3; v++) {
            const int groups = v == 0 ? 8 : v == 1 ? 5 : 1;
            int32_t *m = v == 0 ? random_counts(8, 1, 64) : v == 1 ? random_counts(5, 0, 100)
                                                                   : random_counts(1, 30, 30);
            /* the reduction is fprop's K and dgrad's N */
            const int64_t n = op == KILN_OP_FPROP ? wide[v] : red[v];
            const int64_t k = op == KILN_OP_FPROP ? red[v] : wide[v];
            gcase c = make_case(op, KILN_DTYPE_BF16, KILN_DTYPE_BF16, groups, n, k, m, 512);
            c.want_kernel = kernels[i];
            run_named(&c, ctx, KILN_BACKEND_GENERATED, 0, "%s: %d groups, N=%lld K=%lld, few items",
                      kernels[i], groups, (long long)n, (long long)k);
            free(m);
        }
        kiln_context_destroy(ctx);
    }
    unsetenv("KILN_SPLIT");
    assert_int_equal(g_failures, failures_before);
}

/* The tuned wgrad kernels (the table's winners from the sweeps) and the
 * bf16 sm90 wgrad defaults (what the model serves where no table class is
 * near), each forced through KILN_KERNEL: pairs of CTAs where the table
 * names any (clusters: each CTA loads half of the shared operand's boxes,
 * multicast to both, and a pair's second tile past N or K loads and
 * computes but must write nothing) and accumulating ones (the old dW
 * prefetched into L2 before the adds).  N and
 * K leave such tiles for every tile shape (N = 328: 3 row tiles of 128,
 * the last 16-row box half past N; K = 328 and 640: 3 column tiles of 128
 * or 256), with empty groups, decode-sized ones and groups of several
 * k-blocks.  K = 640 and 384 are multiples of 64, where the dense
 * overwrite kernels that stage a warp's whole share store its rows a tile
 * wide (tmap_d in chunks, sm90_wgrad.cuh kiln_rowbox_*: a last column tile
 * of 1 or 2 chunks, a row box half past N written by hand); K = 328 and
 * 264 are not, and take the 16x64 boxes; the same for the accumulate
 * kernels that add rows (wgrad.rows, kiln_rowbox_*_f32: K a multiple of
 * 32, a row box half past N added by hand).  The table's dbias winners
 * (specs/sweeps/wgrad_sm90_dbias.yaml, _acc_dbias) run with an f32 db,
 * checked too.  The shipped table names accumulate, dbias, row-storing
 * and row-adding kernels, so finding none of any fails.  Pairs run where
 * the table names one; since the thirty-sixth session's re-tune it names
 * none (the dynamic work order, which pairs do not have, won their decode
 * classes), and kiln tune checks every pair of the sweeps before timing. */
static void test_wgrad_tuned(void **state)
{
    (void)state;
    int failures_before = g_failures;
    int accs = 0, dbiases = 0, rows = 0, acc_rows = 0;
    static const int64_t nk[MIXES][2] = {{328, 328}, {328, 640}, {256, 384}, {200, 264}};
    for (size_t e = 0; e < kiln_catalog_count; e++) {
        const kiln_catalog_entry *ce = &kiln_catalog[e];
        const int sm90_bf16 = strstr(ce->desc, " family=sm90") && strstr(ce->desc, " a=bf16 ");
        if (!strstr(ce->desc, "op=wgrad") || !(ce->tuned_only || sm90_bf16)) continue;
        const int acc = strstr(ce->desc, " accumulate=1") != NULL;
        const int dbias = strstr(ce->desc, " dbias=1") != NULL;
        /* What the table's winners must include (the defaults aside). */
        const int tuned = ce->tuned_only;
        accs += tuned && acc;
        dbiases += tuned && dbias;
        rows += tuned && strstr(ce->desc, " tmap_d=1:64:16:128:") != NULL;
        acc_rows += tuned && strstr(ce->desc, " rows=1 ") != NULL;
        run_forced_mixes(ce->name, KILN_OP_WGRAD,
                         strstr(ce->desc, " out=f32") ? KILN_DTYPE_F32 : KILN_DTYPE_BF16, acc, dbias,
                         strstr(ce->desc, " wgrad_output=discrete") != NULL, nk, 7);
    }
    if (!accs) CASE_FAIL("the catalog carries no tuned accumulating wgrad kernel (the table's winners)");
    if (!dbiases) CASE_FAIL("the catalog carries no tuned dbias wgrad kernel (the table's winners)");
    if (!rows) CASE_FAIL("the catalog carries no tuned wgrad kernel storing rows a tile wide");
    if (!acc_rows) CASE_FAIL("the catalog carries no tuned wgrad kernel adding rows (wgrad.rows)");
    assert_int_equal(g_failures, failures_before);
}

/* The dynamic work order's counters (runtime/sched_slots.h): two wgrad
 * calls of the default kernel, which hands out its items from them, on
 * two streams, launched 40 times each with no wait between, so that
 * launches run side by side (each from the tail of the other).  Two
 * launches sharing counters would take each other's items, leaving tiles
 * of both outputs unwritten (poison) or wrong; every element of both is
 * checked.  The kernel's load must report the counters, or the test
 * checks nothing.  Two ways to get two streams: two created streams,
 * launched in turn from this thread (test_wgrad_streams), and
 * CU_STREAM_PER_THREAD from two threads at once, one handle that names a
 * different stream in each (test_wgrad_per_thread_streams). */
static int g_saw_dynamic;

static void dyn_log(void *user, kiln_log_level level, const char *message)
{
    (void)user, (void)level;
    if (strstr(message, "sm90_wgrad_bf16_bf16_dense_s3: dynamic work order")) g_saw_dynamic = 1;
}

typedef struct wgrad_launcher {
    kiln_context *ctx;
    const kiln_problem *p;
    kiln_status st;
} wgrad_launcher;

/* 40 calls on the calling thread's own default stream. */
static void *wgrad_per_thread_main(void *arg)
{
    wgrad_launcher *w = arg;
    for (int rep = 0; rep < 40 && !w->st; rep++) w->st = kiln_gemm(w->ctx, w->p, CU_STREAM_PER_THREAD);
    return NULL;
}

/* After two streams' calls (st: the first failure), once they are done:
 * each case checked against the reference (unless a call failed) and
 * freed, each stream (when not NULL) destroyed. */
static void check_streams(kiln_context *ctx, kiln_status st, gcase *c, gbuf *b, CUstream *s)
{
    if (st) CASE_FAIL("kiln_gemm on two streams: %s", kiln_last_error(ctx));
    CU(g_drv.cuCtxSynchronize());
    kiln_call_report rep;
    assert_int_equal(kiln_last_call(ctx, &rep), KILN_OK);
    for (int i = 0; i < 2; i++) {
        gresult r;
        if (!st) {
            case_check(&c[i], &b[i], &rep, 0, &r);
            free(r.out);
        }
        case_free(&c[i], &b[i]);
        if (s[i]) CU(g_drv.cuStreamDestroy(s[i]));
    }
}

static void wgrad_two_streams(int per_thread)
{
    int failures_before = g_failures;
    g_saw_dynamic = 0;
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.log = dyn_log;
    o.log_level = KILN_LOG_DEBUG;
    kiln_context *ctx = forced_context("sm90_wgrad_bf16_bf16_dense_s3", &o);
    assert_non_null(ctx);
    kiln_status st = KILN_OK;
    gcase c[2];
    gbuf b[2];
    kiln_problem p[2];
    int32_t *m[2];
    CUstream s[2] = {NULL, NULL};
    static const char *const labels[2][2] = {{"wgrad on stream 1", "wgrad on stream 2"},
                                             {"wgrad on thread 1's stream", "wgrad on thread 2's stream"}};
    for (int i = 0; i < 2; i++) {
        const int groups = i ? 40 : 64;
        m[i] = random_counts(groups, 0, 300);
        c[i] = make_case(KILN_OP_WGRAD, KILN_DTYPE_BF16, KILN_DTYPE_BF16, groups, i ? 640 : 512,
                         i ? 384 : 520, m[i], 5);
        c[i].label = labels[per_thread][i];
        c[i].want_kernel = "sm90_wgrad_bf16_bf16_dense_s3";
        case_setup(&c[i], &b[i], &p[i]);
        if (!per_thread) CU(g_drv.cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    }
    CU(g_drv.cuCtxSynchronize());   /* the inputs, before either launcher starts */
    if (per_thread) {
        wgrad_launcher w[2];
        pthread_t th[2];
        for (int i = 0; i < 2; i++) {
            w[i] = (wgrad_launcher){ctx, &p[i], KILN_OK};
            assert_int_equal(pthread_create(&th[i], NULL, wgrad_per_thread_main, &w[i]), 0);
        }
        for (int i = 0; i < 2; i++) {
            pthread_join(th[i], NULL);
            if (w[i].st && !st) st = w[i].st;
        }
    } else {
        for (int rep = 0; rep < 40 && !st; rep++)
            for (int i = 0; i < 2 && !st; i++) st = kiln_gemm(ctx, &p[i], s[i]);
    }
    check_streams(ctx, st, c, b, s);
    if (!g_saw_dynamic) CASE_FAIL("the default wgrad kernel loaded without its work-order counters");
    for (int i = 0; i < 2; i++) free(m[i]);
    kiln_context_destroy(ctx);
    assert_int_equal(g_failures, failures_before);
}

static void test_wgrad_streams(void **state)
{
    (void)state;
    wgrad_two_streams(0);
}

static void test_wgrad_per_thread_streams(void **state)
{
    (void)state;
    wgrad_two_streams(1);
}

/* Discrete dW (a buffer per expert, as TransformerEngine and Megatron keep
 * them) on sm90, where a group has few tiles: written from the registers
 * (sm90_wgrad.cuh, P.dregs).  Every bf16-input sm90 discrete kernel of the
 * catalog (the defaults: overwrite, accumulate, with and without dbias),
 * forced over the four mixes: 40 and 130 groups, each group's buffer its
 * own allocation with poisoned padding, N = 328 and 200 leave 8 rows of a
 * 16-row band past a group's N, K = 328 and 264 a partial column tile,
 * empty groups (zeros, or untouched when accumulating).  Finding none
 * fails. */
static void test_wgrad_discrete(void **state)
{
    (void)state;
    int failures_before = g_failures;
    int kernels = 0;
    static const int64_t nk[MIXES][2] = {{328, 328}, {328, 640}, {256, 328}, {200, 264}};
    for (size_t e = 0; e < kiln_catalog_count; e++) {
        const kiln_catalog_entry *ce = &kiln_catalog[e];
        const char *d = ce->desc;
        if (!strstr(d, "op=wgrad") || !strstr(d, " family=sm90 ") || !strstr(d, " a=bf16 ") ||
            !strstr(d, " wgrad_output=discrete"))
            continue;
        kernels++;
        run_forced_mixes(ce->name, KILN_OP_WGRAD, strstr(d, " out=f32") ? KILN_DTYPE_F32 : KILN_DTYPE_BF16,
                         strstr(d, " accumulate=1") != NULL, strstr(d, " dbias=1") != NULL, 1, nk, 7);
    }
    if (!kernels) CASE_FAIL("the catalog carries no sm90 discrete wgrad kernel");
    assert_int_equal(g_failures, failures_before);
}

/* One group mix of a discrete dW test. */
typedef struct {
    int groups;
    int32_t *counts;
    int64_t n, k;
} discrete_mix;

/* Every bf16-input sm90 discrete wgrad kernel of the catalog without dbias
 * (its epilogue is the same), forced, on each of the mixes (`what` names
 * their groups in the labels), poisoned padding, every element checked.
 * Finding no kernel fails. */
static void run_discrete_mixes(const discrete_mix *mixes, int nmix, const char *what)
{
    int failures_before = g_failures;
    int kernels = 0;
    for (size_t e = 0; e < kiln_catalog_count; e++) {
        const kiln_catalog_entry *ce = &kiln_catalog[e];
        const char *d = ce->desc;
        if (!strstr(d, "op=wgrad") || !strstr(d, " family=sm90 ") || !strstr(d, " a=bf16 ") ||
            !strstr(d, " wgrad_output=discrete") || !strstr(d, " dbias=0"))
            continue;
        kiln_context *ctx = forced_context(ce->name, NULL);
        if (!ctx) continue;
        kernels++;
        for (int x = 0; x < nmix; x++) {
            gcase c = make_case(KILN_OP_WGRAD, KILN_DTYPE_BF16,
                                strstr(d, " out=f32") ? KILN_DTYPE_F32 : KILN_DTYPE_BF16,
                                mixes[x].groups, mixes[x].n, mixes[x].k, mixes[x].counts, 7);
            c.accumulate = strstr(d, " accumulate=1") != NULL;
            c.discrete = 1;
            c.ldd_pad = 8;
            c.want_kernel = ce->name;
            run_named(&c, ctx, KILN_BACKEND_GENERATED, 0, "%s: %d %s, N=%lld K=%lld", ce->name,
                      c.groups, what, (long long)c.n, (long long)c.k);
        }
        kiln_context_destroy(ctx);
    }
    if (!kernels) CASE_FAIL("the catalog carries no sm90 discrete wgrad kernel without dbias");
    assert_int_equal(g_failures, failures_before);
}

/* Discrete dW where a group has more tiles than twice the grid: there each
 * consumer warp re-points a per-SM copy of the dW map at each group's
 * buffer and stores or reduce-adds through it.  Two mixes
 * (run_discrete_mixes):
 * - N 4360, K 4352 (289 tiles a group or more for every sm90 tile, more
 *   than twice the SMs of any Hopper; K a multiple of 64: 16-bit dW goes
 *   out in rows of a tile, a 3-D map): 5 groups of 0..12 tokens;
 * - N 2056, K 4328 (still 289 or more; K % 64 = 40: 16x64 boxes, the last
 *   one cut by the map): 12 groups of 0..12 tokens, three of them empty,
 *   so that a warp's tiles change group many more times than there are
 *   map slots, also across empty groups (whose zeros are written by hand,
 *   through no map).
 * N % 16 == 8 leaves 8 rows of a 16-row box past each group's N (written
 * by hand). */
static void test_wgrad_discrete_many_tiles(void **state)
{
    (void)state;
    static int32_t m5[5] = {5, 0, 9, 3, 12};
    static int32_t m12[12] = {3, 0, 7, 1, 0, 12, 5, 2, 9, 0, 4, 6};
    const discrete_mix mixes[2] = {{5, m5, 4360, 4352}, {12, m12, 2056, 4328}};
    run_discrete_mixes(mixes, 2, "groups of 0..12 tokens");
}

/* Discrete dW where groups are decode-sized (one k-block on average) and
 * have at most twice the grid's tiles: there the kernels that store a
 * warp's share of a tile whole walk their items in runs of consecutive
 * ones up to the last whole round of runs over the grid, then one at a
 * time (sm90_wgrad.cuh, WRUN; the dynamic order's kernels through their
 * counters, the others in the static order).  Two mixes with enough items
 * for both phases on 132 SMs (64 x 35 and 64 x 21 tiles of 128x256;
 * run_discrete_mixes):
 * - N 520, K 1600 (K % 64 == 0: rows of a tile): 64 groups of 0..20
 *   tokens, two empty;
 * - N 264, K 1576 (K % 64 = 40: boxes, the last cut by the map): 64
 *   groups, every fourth of 100..119 tokens (two k-blocks), the others
 *   0..29: 37 on average.
 * N % 16 == 8 leaves 8 rows of a 16-row box past each group's N. */
static void test_wgrad_discrete_runs(void **state)
{
    (void)state;
    int32_t *m64 = random_counts(64, 0, 20);
    m64[5] = m64[6] = 0;
    int32_t mb[64];
    for (int g = 0; g < 64; g++) mb[g] = g % 4 == 0 ? 100 + g % 20 : g % 30;
    const discrete_mix mixes[2] = {{64, m64, 520, 1600}, {64, mb, 264, 1576}};
    run_discrete_mixes(mixes, 2, "decode-sized groups");
    free(m64);
}

/* Σm > capacity: rows past capacity are not computed, the flag is set. */
/* ---- the last wave split along k (templates/sm90_gemm_cut.cuh, SPLIT) ------ */

/* Calls whose last wave is short, on the cooperative 128x256 kernels that
 * split it: every element against the reference and the bytes outside
 * untouched (case_check), and the same bits from a second call (the pieces
 * are added in k order, whoever arrives last).  test_gpu_split.c shows
 * that the cut happens. */
static void split_case(const char *kernel, kiln_op op, int groups, const int32_t *counts,
                       int64_t n, int64_t k, const char *what)
{
    struct timespec t0, t1;   /* the case's time, printed: where a slow run's goes */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kiln_context *ctx = forced_context(kernel, NULL);
    if (!ctx) return;
    char label[160];
    snprintf(label, sizeof label, "%s: %s, N=%lld K=%lld", kernel, what, (long long)n, (long long)k);
    gcase c = make_case(op, KILN_DTYPE_BF16, KILN_DTYPE_BF16, groups, n, k, counts, 5);
    c.label = label;
    c.want_kernel = kernel;
    gbuf b;
    kiln_problem p;
    case_setup(&c, &b, &p);
    gresult r[2] = {{0}, {0}};
    kiln_call_report rep;
    int runs = 0;
    for (; runs < 2; runs++) {
        if (runs) upload(b.dD, b.before, b.obytes);
        if (!gpu_gemm_case(ctx, &p, label, &g_failures, &rep)) break;
        /* the second call against the first's bits, not the reference
         * again: the reference of a 14336-deep case took most of the
         * test's time (every byte outside is still checked) */
        case_check(&c, &b, &rep, runs, &r[runs]);
    }
    if (runs == 2 && memcmp(r[0].out, r[1].out, sizeof(float) * r[0].n_out))
        CASE_FAIL("%s: a second call gave other bits", label);
    FREE_ALL(r[0].out, r[1].out);
    case_free(&c, &b);
    kiln_context_destroy(ctx);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("    %.1f s\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
}

static void test_split_last_wave(void **state)
{
    (void)state;
    int failures_before = g_failures;
    /* 3 groups in 9 row tiles of 128 and tn column tiles: a few tiles more
     * than the SMs, a last wave of 1 to 9 tiles in pieces (two rounds of 64
     * k-blocks: a walk of KILN_SPLIT_MIN_WALK, the shortest that is cut) */
    static const int32_t over[3] = {300, 212, 500};
    const int64_t tn = gpu_num_sms() / 9 + 1;
    /* 2 row tiles (an empty group) and 2 column tiles: 4 tiles in all, in
     * 8 pieces (128 k-blocks) */
    static const int32_t few[3] = {100, 0, 37};
    /* only half tiles (groups of at most 64 rows), whose pieces move half
     * a partial: 8 tiles */
    static const int32_t halves[3] = {64, 1, 0};
    split_case("sm90_fprop_bf16_128x256", KILN_OP_FPROP, 3, over, 256 * tn, 4096,
               "a few tiles past the SMs");
    split_case("sm90_fprop_bf16_128x256", KILN_OP_FPROP, 3, few, 512, 8192, "4 tiles");
    split_case("sm90_dgrad_bf16_128x256", KILN_OP_DGRAD, 3, few, 8192, 512, "4 tiles");
    split_case("sm90_fprop_bf16_128x256", KILN_OP_FPROP, 3, halves, 1024, 8192, "8 half tiles");
    split_case("sm90_dgrad_bf16_128x256", KILN_OP_DGRAD, 3, halves, 8192, 1024, "8 half tiles");
    assert_int_equal(g_failures, failures_before);
}

/* Split calls on two streams at once: one holds the workspace's lease at a
 * time, the other walks whole tiles; both right. */
static void test_split_two_streams(void **state)
{
    (void)state;
    int failures_before = g_failures;
    kiln_context *ctx = forced_context("sm90_fprop_bf16_128x256", NULL);
    assert_non_null(ctx);
    static const int32_t counts[2][2] = {{100, 37}, {120, 60}};
    gcase c[2];
    gbuf b[2];
    kiln_problem p[2];
    CUstream s[2];
    for (int i = 0; i < 2; i++) {
        c[i] = make_case(KILN_OP_FPROP, KILN_DTYPE_BF16, KILN_DTYPE_BF16, 2, 512, 8192, counts[i], 3);
        c[i].label = i ? "split on stream 2" : "split on stream 1";
        case_setup(&c[i], &b[i], &p[i]);
        CU(g_drv.cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    }
    CU(g_drv.cuCtxSynchronize());
    kiln_status st = KILN_OK;
    for (int rep = 0; rep < 40 && !st; rep++)
        for (int i = 0; i < 2 && !st; i++) st = kiln_gemm(ctx, &p[i], s[i]);
    check_streams(ctx, st, c, b, s);
    kiln_context_destroy(ctx);
    assert_int_equal(g_failures, failures_before);
}

/* ---- tiles cut along k across a cluster (sm90_gemm_cut.cuh, KCUT) -------- */

/* The k-cut kernels, forced: every tile's reduction in pieces, one per CTA
 * of a cluster (8, 4 or 2), summed in distributed shared memory.
 * split_case checks every element against the reference, the bytes
 * outside untouched and the same bits from a second call (the pieces are
 * added in k order).  Whole and half tiles; more tiles than the clusters
 * that fit (15 of 8 on an H100's 132 SMs: walks of several tiles, the
 * ring handed back between them), among them Mixtral's fc2 at EP8 in
 * decode, whose A/B process faulted in the eighty-seventh session with
 * cuts of other sizes beside (docs/benchmarks.md: which side faulted is
 * not known); fewer k-blocks than pieces (empty pieces add zeros) and a
 * partial last k-block. */
static void test_k_cluster(void **state)
{
    (void)state;
    int failures_before = g_failures;
    static const int32_t few[3] = {100, 0, 37}, halves[3] = {64, 1, 0};
    static const int32_t over[3] = {300, 212, 500}, decode[1] = {64};
    static const char *const kernels[6] = {"sm90_fprop_bf16_128x256_kc8", "sm90_dgrad_bf16_128x256_kc8",
                                           "sm90_fprop_bf16_128x256_kc4", "sm90_dgrad_bf16_128x256_kc4",
                                           "sm90_fprop_bf16_128x256_kc2", "sm90_dgrad_bf16_128x256_kc2"};
    for (int i = 0; i < 6; i++) {
        const int dgrad = i % 2;
        const kiln_op op = dgrad ? KILN_OP_DGRAD : KILN_OP_FPROP;
        /* (n, k) of fprop; dgrad reduces over n, so the two swap */
#define KC_CASE(groups, counts, n, k, what)                                                        \
        split_case(kernels[i], op, groups, counts, dgrad ? (k) : (n), dgrad ? (n) : (k), what)
        KC_CASE(3, few, 512, 8192, "4 tiles, 16 k-blocks a piece");
        KC_CASE(3, halves, 1024, 8192, "8 half tiles");
        KC_CASE(1, decode, 2048, 14336, "one group of 64 tokens, 14336 deep");
        KC_CASE(1, decode, 4096, 14336, "Mixtral fc2 at EP8, decode: 16 half tiles");
        KC_CASE(3, over, 2048, 1024, "72 tiles: walks of several");
        KC_CASE(3, few, 512, 128, "2 k-blocks: empty pieces");
        KC_CASE(3, halves, 1024, 200, "a partial last k-block");
#undef KC_CASE
    }
    assert_int_equal(g_failures, failures_before);
}

static void test_overflow(void **state)
{
    (void)state;
    int failures_before = g_failures;
    int32_t m[4] = {100, 120, 90, 60}; /* 370 */
    for (int op = 0; op < 2; op++) {
        gcase c = make_case((kiln_op)op, KILN_DTYPE_BF16, KILN_DTYPE_BF16, 4, 64, 64, m, 0);
        c.label = op ? "dgrad overflow (370 rows, capacity 256)" : "fprop overflow (370 rows, capacity 256)";
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
    for (int op = 0; op < 3; op++)
        for (int v = 0; v < 4; v++) {
            int32_t *m = random_counts(6, 0, 80);
            m[1] = 0;
            const kiln_dtype in = v & 1 ? KILN_DTYPE_F16 : KILN_DTYPE_BF16;
            gcase c = make_case((kiln_op)op, in, v & 2 ? KILN_DTYPE_F32 : in, 6, 64, 48, m, 3);
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
            run_named(&c, g_lt, KILN_BACKEND_CUBLASLT, 0, "%s %s->%s %s", kiln_op_name(c.op),
                      kiln_dtype_name(c.in), kiln_dtype_name(c.out), what);
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
        gcase c = make_case((kiln_op)op, KILN_DTYPE_BF16,
                            op == KILN_OP_WGRAD ? KILN_DTYPE_F32 : KILN_DTYPE_BF16, 8, 1024, 512, m, 100);
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
    /* a line at a time, so that a run cut by a time limit shows its last case */
    setvbuf(stdout, NULL, _IOLBF, 0);
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
        cmocka_unit_test(test_wgrad_dbias_matrix),
        cmocka_unit_test(test_wgrad_dbias_patterns),
        cmocka_unit_test(test_group_patterns),
        cmocka_unit_test(test_sm90_pointer_weights),
        cmocka_unit_test(test_fprop_dgrad_tuned),
        cmocka_unit_test(test_few_items),
        cmocka_unit_test(test_epilogue_defaults),
        cmocka_unit_test(test_wgrad_tuned),
        cmocka_unit_test(test_wgrad_streams),
        cmocka_unit_test(test_wgrad_per_thread_streams),
        cmocka_unit_test(test_wgrad_discrete),
        cmocka_unit_test(test_wgrad_discrete_many_tiles),
        cmocka_unit_test(test_wgrad_discrete_runs),
        cmocka_unit_test(test_split_last_wave),
        cmocka_unit_test(test_split_two_streams),
        cmocka_unit_test(test_k_cluster),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_cublaslt_small),
        cmocka_unit_test(test_generated_vs_cublaslt),
    };
    const char *only = kiln_test_filter();
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    /* Run with a bundle ($KILN_BUNDLE_PATH) and an empty cache, the
     * generated path must do no NVRTC work at all: every kernel comes from
     * the bundle (and some must, unless a filter left out the tests that
     * use this context). */
    kiln_context_stats st;
    kiln_context_stats_get(g_gen, &st);
    printf("generated path: %llu NVRTC compiles, %llu cache hits, %llu bundle hits, %llu launches\n",
           (unsigned long long)st.nvrtc_compiles, (unsigned long long)st.cache_hits,
           (unsigned long long)st.bundle_hits, (unsigned long long)st.launches);
    const char *expect = getenv("KILN_TEST_EXPECT_NO_NVRTC");
    const int vacuous = st.bundle_hits == 0 && !only;
    if (expect && *expect == '1' && (st.nvrtc_compiles != 0 || vacuous)) {
        printf("FAIL: KILN_TEST_EXPECT_NO_NVRTC=1 but NVRTC compiled %llu kernels "
               "(%llu from bundles)\n", (unsigned long long)st.nvrtc_compiles,
               (unsigned long long)st.bundle_hits);
        rc = 1;
    }
    kiln_context_destroy(g_gen);
    kiln_context_destroy(g_lt);
    return rc;
}

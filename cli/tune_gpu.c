/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tune_gpu.c — the GPU timer of `kiln tune`, on the runtime's own pieces:
 * the dlopen'd driver (runtime/driver.h), a kiln_context per device, the
 * launcher (runtime/launch.h: arguments, grid, clusters, tensor maps) and
 * kiln_gemm for the reference.
 *
 * Per (config, shape): several sets of inputs and outputs (enough that
 * together they exceed the L2 a few times, so small problems are not timed
 * from a warm cache), random data, and the reference result.  Per variant:
 * load its cubin, run once and compare with the reference (relative
 * Frobenius error over sampled rows; unwritten outputs show as NaN), then
 * warm up (with --hold, run back to back for that long) and time each
 * launch with CUDA events, rotating the sets; the median is the result.
 *
 * The reference is kiln_gemm on a context allowed only cuBLASLt (host sizes
 * are given), which is independent of every generated kernel; for fp8
 * inputs, which cuBLASLt serves only per tensor, a host computation from
 * the dequantized inputs (kiln_tune_fp8_reference, tuner.c).  Data,
 * problem set-up and the error measure are the GPU tests' own
 * (tests/support/gpu_support.h, library kiln_testsupport).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "gpu_support.h"
#include "launch.h"
#include "tune.h"

#define MAX_SETS 8
#define MAX_RUNS 200
#define SAMPLE_ROWS 2048

typedef struct gpu_set {
    CUdeviceptr a, b, d, c, bias, row_scale, alpha, d_ptrs;
    CUdeviceptr scale_a, scale_b; /* fp8: the recipe's dequantization scales */
    CUdeviceptr dbias;            /* wgrad with dbias: db, f32 [G, N] */
} gpu_set;

/* The host chunks set 0's inputs repeat (alloc_fill), kept for the fp8
 * reference, which is computed on the host. */
enum { KEPT_A, KEPT_B, KEPT_SCALE_A, KEPT_SCALE_B, KEPT_BIAS, KEPT_ROW_SCALE, KEPT_ALPHA,
       KEPT_C, KEPT_N };

typedef struct gpu_state {
    kiln_context *ctx;
    CUstream stream;
    int l2_bytes;
    int warmup, runs;
    double budget_ms;            /* time one measurement may take, roughly */
    double hold_ms;              /* --hold: back-to-back runs before timing */
    CUevent ev[2 * MAX_RUNS];
    int n_ev;

    /* Prepared for one (config, shape). */
    int prepared;
    kiln_tune_config cfg;
    const kiln_tune_shape *shape;
    int64_t total;
    int32_t *host_sizes;
    CUdeviceptr sizes;
    gpu_set sets[MAX_SETS];
    int n_sets;
    int64_t out_rows, out_cols;
    size_t out_bytes;
    void *host_out;              /* the sampled rows of an output, read back */
    float *ref;                  /* the reference at the sampled rows x columns */
    int64_t *rows;               /* which rows */
    size_t n_rows;
    int64_t *cols;               /* which columns (all, but for fp8: see sample) */
    size_t n_cols;
    int fp8;                     /* 8-bit inputs: scales, a host reference */
    kiln_tune_chunk kept[KEPT_N];
    int have_ref;
    char ref_note[200];
    double tol;
} gpu_state;

/* ---- helpers ------------------------------------------------------------ */

#define DRV(st) (&(st)->ctx->drv)

static kiln_status check(gpu_state *g, CUresult r, const char *what, kiln_error *err)
{
    return kiln_driver_check(DRV(g), r, what, err);
}

static int push(gpu_state *g)
{
    return DRV(g)->cuCtxPushCurrent(g->ctx->cu) == CUDA_SUCCESS;
}

static void pop(gpu_state *g)
{
    CUcontext dummy;
    DRV(g)->cuCtxPopCurrent(&dummy);
}

static void free_ptr(gpu_state *g, CUdeviceptr *p)
{
    if (*p) DRV(g)->cuMemFree(*p);
    *p = 0;
}

static void free_buffers(gpu_state *g)
{
    for (int s = 0; s < MAX_SETS; s++) {
        gpu_set *x = &g->sets[s];
        CUdeviceptr *all[] = {&x->a,         &x->b,     &x->d,      &x->c,       &x->bias,
                              &x->row_scale, &x->alpha, &x->d_ptrs, &x->scale_a, &x->scale_b,
                              &x->dbias};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free_ptr(g, all[i]);
    }
    free_ptr(g, &g->sizes);
    g->n_sets = 0;
    free(g->host_sizes);
    free(g->host_out);
    free(g->ref);
    free(g->rows);
    free(g->cols);
    for (int i = 0; i < KEPT_N; i++) free((void *)g->kept[i].data);
    memset(g->kept, 0, sizeof g->kept);
    g->host_sizes = NULL;
    g->host_out = NULL;
    g->ref = NULL;
    g->rows = NULL;
    g->cols = NULL;
    g->have_ref = 0;
    g->prepared = 0;
}

/* The problem on set s, every term of the config in use. */
static void problem_on(const gpu_state *g, int s, kiln_problem *p)
{
    const gpu_set *x = &g->sets[s];
    kts_problem_init(p, g->cfg.op, g->shape->groups, g->shape->n, g->shape->k, g->total, g->sizes,
                     x->a, x->b, x->d);
    p->a_type = g->cfg.a_type;
    p->b_type = g->cfg.b_type;
    p->out_type = g->cfg.out_type;
    p->sizes_kind = KILN_SIZES_COUNTS;
    p->host_sizes = g->host_sizes;
    if (g->cfg.op == KILN_OP_WGRAD) {
        p->wgrad_output = g->cfg.wgrad_output;
        p->accumulate = g->cfg.accumulate;
        if (g->cfg.wgrad_output == KILN_WGRAD_DISCRETE) { /* into slices of d, by pointer */
            p->d_out = NULL;
            p->d_out_ptrs = (void *const *)(uintptr_t)x->d_ptrs;
        }
        if (g->cfg.dbias) p->d_dbias = (void *)(uintptr_t)x->dbias; /* f32, dense [G, N] */
        return;
    }
    if (g->fp8) {
        p->fp8.recipe = g->cfg.fp8_recipe;
        p->fp8.promote = g->cfg.fp8_promote;
        p->fp8.d_scale_a = (const float *)(uintptr_t)x->scale_a;
        p->fp8.d_scale_b = (const float *)(uintptr_t)x->scale_b;
        if (g->cfg.op == KILN_OP_DGRAD) { /* the transposed weights [G,K,N] */
            p->fp8.d_bt = (const void *)(uintptr_t)x->b;
            p->d_b = NULL;
        }
    }
    const kiln_epilogue_desc *e = &g->cfg.epilogue;
    if (e->bias == KILN_BIAS_PER_GROUP) p->epilogue.d_bias = (const void *)(uintptr_t)x->bias;
    if (e->row_scale) p->epilogue.d_row_scale = (const float *)(uintptr_t)x->row_scale;
    p->epilogue.scale_bias = e->scale_bias && e->row_scale && e->bias == KILN_BIAS_PER_GROUP;
    if (e->alpha == KILN_ALPHA_PER_GROUP) p->epilogue.d_alpha = (const float *)(uintptr_t)x->alpha;
    else p->epilogue.alpha = 1.0f;
    if (e->beta) {
        p->epilogue.beta = 0.5f;
        p->epilogue.d_c = (const void *)(uintptr_t)x->c;
    }
}

static kiln_status alloc_upload(gpu_state *g, CUdeviceptr *dst, const void *host, size_t bytes,
                                const char *what, kiln_error *err)
{
    kiln_status st = check(g, DRV(g)->cuMemAlloc(dst, bytes ? bytes : 16), what, err);
    if (st) return st;
    if (host && bytes)
        st = check(g, DRV(g)->cuMemcpyHtoD(*dst, host, bytes), what, err);
    return st;
}

/* Random data past this many bytes is the same bytes again: filling
 * hundreds of GB of the corpus's large shapes on the host took minutes per
 * shape, while the timing only needs data that is not zeros. */
#define FILL_HOST_MAX ((size_t)16 << 20)

/* Allocates bytes at *dst and fills them with random values of type t in
 * [lo, hi]: FILL_HOST_MAX (at most) made on the host, then repeated on the
 * device, each copy doubling what is there.  With keep, a copy of the host
 * part goes there (element i of the buffer is element i % keep->n). */
static kiln_status alloc_fill(gpu_state *g, CUdeviceptr *dst, void *host, kiln_dtype t,
                              size_t bytes, float lo, float hi, uint64_t *seed, const char *what,
                              kiln_tune_chunk *keep, kiln_error *err)
{
    const size_t esz = (size_t)kiln_dtype_size(t);
    size_t first = bytes < FILL_HOST_MAX ? bytes : FILL_HOST_MAX / esz * esz;
    kts_fill(seed, host, t, first / esz, lo, hi);
    if (keep && first) {
        void *copy = malloc(first);
        if (!copy) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "host memory (%s)", what);
        memcpy(copy, host, first);
        *keep = (kiln_tune_chunk){copy, first / esz, t};
    }
    kiln_status st = check(g, DRV(g)->cuMemAlloc(dst, bytes ? bytes : 16), what, err);
    if (st || !bytes) return st;
    if ((st = check(g, DRV(g)->cuMemcpyHtoD(*dst, host, first), what, err))) return st;
    for (size_t have = first; have < bytes && !st; have *= 2) {
        size_t n = bytes - have < have ? bytes - have : have;
        st = check(g, DRV(g)->cuMemcpyDtoD(*dst + have, *dst, n), what, err);
    }
    return st;
}

/* Resets the output of set s before a checked run: NaN bytes (so rows a
 * kernel forgets stand out), zeros when accumulating. */
static kiln_status reset_out(gpu_state *g, int s, kiln_error *err)
{
    unsigned char v = g->cfg.op == KILN_OP_WGRAD && g->cfg.accumulate ? 0 : 0xff;
    /* on the timing stream: it does not wait for the legacy stream */
    return check(g, DRV(g)->cuMemsetD8Async(g->sets[s].d, v, g->out_bytes, g->stream),
                 "cuMemsetD8Async(output)", err);
}

/* Copies the sampled rows of set 0's output to host_out, row i of the
 * sample at i · out_cols.  Only these rows are ever read: reading the whole
 * output back moved up to 30 GB a variant (the corpus's largest fp32 dW)
 * for a check of 2048 rows.  Runs of consecutive rows go
 * in one copy (every row, when the output has no more than the sample). */
static kiln_status read_rows(gpu_state *g, const char *what, kiln_error *err)
{
    const size_t row_bytes = (size_t)g->out_cols * (size_t)kiln_dtype_size(g->cfg.out_type);
    kiln_status st = KILN_OK;
    for (size_t i = 0; i < g->n_rows && !st;) {
        size_t run = 1;
        while (i + run < g->n_rows && g->rows[i + run] == g->rows[i] + (int64_t)run) run++;
        st = check(g,
                   DRV(g)->cuMemcpyDtoH((char *)g->host_out + i * row_bytes,
                                        g->sets[0].d + (CUdeviceptr)((size_t)g->rows[i] * row_bytes),
                                        run * row_bytes),
                   what, err);
        i += run;
    }
    return st;
}

/* Relative Frobenius error of the output of set 0 against the reference,
 * over the sampled rows: every column of them must be written (a NaN
 * fails), the sampled columns are compared. */
static double compare(gpu_state *g, kiln_error *err, kiln_status *st)
{
    *st = read_rows(g, "cuMemcpyDtoH(output)", err);
    if (*st) return INFINITY;
    kts_err e = {0};
    for (size_t i = 0; i < g->n_rows; i++) {
        size_t at = i * (size_t)g->out_cols;
        for (int64_t c = 0; c < g->out_cols; c++)
            if (!isfinite(kts_load(g->host_out, at + (size_t)c, g->cfg.out_type))) return NAN;
        for (size_t j = 0; j < g->n_cols; j++)
            kts_err_add(&e, kts_load(g->host_out, at + (size_t)g->cols[j], g->cfg.out_type),
                        g->ref[i * g->n_cols + j]);
    }
    return kts_err_rel(&e);
}

/* The bytes of each input of a set. */
typedef struct part_bytes {
    size_t a, b, bias, scale, alpha, c, scale_a, scale_b, dbias;
} part_bytes;

/* Sets 1 .. want-1: copies of set 0 on the device, while memory lasts;
 * then, for discrete wgrad, each set's G output pointers. */
static kiln_status more_sets(gpu_state *g, const part_bytes *pb, int want, kiln_error *err)
{
    const gpu_set *x = &g->sets[0];
    const int64_t G = g->shape->groups, N = g->shape->n, K = g->shape->k;
    const int so = kiln_dtype_size(g->cfg.out_type);
    kiln_status st = KILN_OK;
    for (int s = 1; s < want; s++) {
        gpu_set *y = &g->sets[s];
        struct { CUdeviceptr *dst, src; size_t bytes; } parts[] = {
            {&y->a, x->a, pb->a}, {&y->b, x->b, pb->b}, {&y->d, 0, g->out_bytes},
            {&y->bias, x->bias, pb->bias}, {&y->row_scale, x->row_scale, pb->scale},
            {&y->alpha, x->alpha, pb->alpha}, {&y->c, x->c, pb->c},
            {&y->scale_a, x->scale_a, pb->scale_a}, {&y->scale_b, x->scale_b, pb->scale_b},
            {&y->dbias, 0, pb->dbias}};
        int ok = 1;
        for (size_t i = 0; i < sizeof parts / sizeof parts[0] && ok; i++) {
            if (!parts[i].bytes) continue;
            if (DRV(g)->cuMemAlloc(parts[i].dst, parts[i].bytes) != CUDA_SUCCESS) ok = 0;
            else if (parts[i].src &&
                     DRV(g)->cuMemcpyDtoD(*parts[i].dst, parts[i].src, parts[i].bytes) != CUDA_SUCCESS)
                ok = 0;
        }
        if (!ok) { /* out of memory: time with the sets we have */
            CUdeviceptr *all[] = {&y->a,     &y->b, &y->d,       &y->bias,    &y->row_scale,
                                  &y->alpha, &y->c, &y->scale_a, &y->scale_b, &y->dbias};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free_ptr(g, all[i]);
            break;
        }
        g->n_sets++;
    }
    /* Discrete wgrad outputs: G pointers into each set's dense buffer. */
    if (g->cfg.op == KILN_OP_WGRAD && g->cfg.wgrad_output == KILN_WGRAD_DISCRETE) {
        CUdeviceptr *ptrs = malloc((size_t)G * sizeof *ptrs);
        if (!ptrs) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "host memory");
        for (int s = 0; s < g->n_sets && !st; s++) {
            for (int64_t gi = 0; gi < G; gi++)
                ptrs[gi] = g->sets[s].d + (CUdeviceptr)(gi * N * K * so);
            st = alloc_upload(g, &g->sets[s].d_ptrs, ptrs, (size_t)G * sizeof *ptrs,
                              "cuMemAlloc(output pointers)", err);
        }
        free(ptrs);
    }
    return st;

}

/* What the fp8 reference computes: it runs on the host (no reference on
 * the device serves row-wise or block-scaled grouped fp8: kiln's cuBLASLt
 * path takes the per-tensor recipe only), so it samples columns as well as
 * rows, about FP8_REF_MACS multiply-adds per (config, shape) (a second or
 * less of one core).  Columns: every 64th or so (one in each 64-column
 * chunk of the epilogue, at drifting offsets), at least 128 or all; rows:
 * what the budget leaves, from 64 to SAMPLE_ROWS, evenly spaced. */
#define FP8_REF_MACS ((double)(1 << 28))

/* n evenly spaced indices of [0, total), always the first and the last
 * (all of them when n == total). */
static void spread(int64_t *out, size_t n, int64_t total)
{
    for (size_t i = 0; i < n; i++)
        out[i] = n == (size_t)total || n < 2
                     ? (int64_t)i
                     : (int64_t)((double)i * (double)(total - 1) / (double)(n - 1));
}

/* The rows and columns the check compares. */
static kiln_status sample(gpu_state *g, kiln_error *err)
{
    size_t max_rows = SAMPLE_ROWS;
    g->n_cols = (size_t)g->out_cols;
    if (g->fp8) {
        int64_t k_red = g->cfg.op == KILN_OP_FPROP ? g->shape->k : g->shape->n;
        int64_t want = (g->out_cols + 63) / 64 > 128 ? (g->out_cols + 63) / 64 : 128;
        g->n_cols = (size_t)(want < g->out_cols ? want : g->out_cols);
        double fit = FP8_REF_MACS / ((double)g->n_cols * (double)k_red);
        max_rows = fit < 64 ? 64 : fit > SAMPLE_ROWS ? SAMPLE_ROWS : (size_t)fit;
    }
    g->n_rows = g->out_rows <= (int64_t)max_rows ? (size_t)g->out_rows : max_rows;
    g->rows = malloc((g->n_rows ? g->n_rows : 1) * sizeof *g->rows);
    g->cols = malloc((g->n_cols ? g->n_cols : 1) * sizeof *g->cols);
    g->ref = malloc((g->n_rows ? g->n_rows : 1) * (g->n_cols ? g->n_cols : 1) * sizeof *g->ref);
    if (!g->rows || !g->cols || !g->ref)
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "host memory");
    spread(g->rows, g->n_rows, g->out_rows);
    spread(g->cols, g->n_cols, g->out_cols);
    return KILN_OK;
}

/* The reference through the runtime (cuBLASLt only: see
 * kiln_tune_gpu_create), which is independent of every generated kernel. */
static kiln_status cublaslt_reference(gpu_state *g, kiln_error *err)
{
    kiln_status st;
    kiln_problem p;
    problem_on(g, 0, &p);
    p.d_dbias = NULL; /* cuBLASLt cannot compute db: the check is dW's (the GPU tests check db) */
    if ((st = check(g, DRV(g)->cuMemsetD8Async(g->sets[0].d, 0, g->out_bytes, g->stream),
                    "cuMemsetD8Async(output)", err)))
        return st;
    if (kiln_gemm(g->ctx, &p, g->stream) != KILN_OK) {
        snprintf(g->ref_note, sizeof g->ref_note, "not checked: no reference (%s)",
                 kiln_last_error(g->ctx));
        return KILN_OK;
    }
    if ((st = check(g, DRV(g)->cuStreamSynchronize(g->stream), "reference run", err)) ||
        (st = read_rows(g, "cuMemcpyDtoH(reference)", err)))
        return st;
    for (size_t i = 0; i < g->n_rows; i++)
        for (size_t j = 0; j < g->n_cols; j++)
            g->ref[i * g->n_cols + j] =
                kts_load(g->host_out, i * (size_t)g->out_cols + (size_t)g->cols[j], g->cfg.out_type);
    g->have_ref = 1;
    return KILN_OK;
}

/* The fp8 reference on the host (kiln_tune_fp8_reference, from the chunks
 * set 0 repeats) and its tolerance: the GPU fp8 tests' per-element bound
 * |err| <= 2^-8 |ref| + t·S (tests/gpu/test_gpu_fp8.c: 2^-8 the bf16
 * output's rounding with room, S the sum of the terms' magnitudes, t =
 * 2^-10 for fast accumulation, 2^-12 promoted) taken over the sampled
 * elements, so for the relative Frobenius error
 *   ‖err‖ / ‖ref‖ <= 2^-8 + t ‖S‖ / ‖ref‖.
 * S grows like K and ref like √K, so a fixed tolerance would either fail
 * long-K shapes or pass anything on short ones; this one is about 0.05 at
 * K 7168 (fast), while a wrong scale, row, group or a missed k-block
 * gives 0.1 and more, an unwritten element NaN. */
static kiln_status fp8_reference(gpu_state *g, double *tol, kiln_error *err)
{
    const kiln_tune_shape *sh = g->shape;
    kiln_tune_fp8_call f = {
        .recipe = g->cfg.fp8_recipe, .groups = sh->groups, .capacity = g->total,
        .n_out = g->out_cols, .k_red = g->cfg.op == KILN_OP_FPROP ? sh->k : sh->n,
        .sizes = g->host_sizes, .a = g->kept[KEPT_A], .b = g->kept[KEPT_B],
        .scale_a = g->kept[KEPT_SCALE_A], .scale_b = g->kept[KEPT_SCALE_B],
        .bias = g->kept[KEPT_BIAS], .row_scale = g->kept[KEPT_ROW_SCALE],
        .alpha = g->kept[KEPT_ALPHA], .c = g->kept[KEPT_C], .beta = 0.5f,
        .scale_bias = g->cfg.epilogue.scale_bias};
    size_t n = g->n_rows * g->n_cols;
    double *ref = malloc((n ? n : 1) * sizeof *ref), *mag = malloc((n ? n : 1) * sizeof *mag);
    kiln_status st = ref && mag ? kiln_tune_fp8_reference(&f, g->rows, g->n_rows, g->cols,
                                                          g->n_cols, ref, mag, err)
                                : kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "host memory");
    if (!st) {
        double ss = 0, rr = 0;
        for (size_t i = 0; i < n; i++) {
            g->ref[i] = (float)ref[i];
            ss += mag[i] * mag[i];
            rr += ref[i] * ref[i];
        }
        double t = g->cfg.fp8_promote ? 1.0 / 4096 : 1.0 / 1024;
        *tol = 1.0 / 256 + (rr > 0 ? t * sqrt(ss / rr) : 0);
        g->have_ref = 1;
    }
    free(ref);
    free(mag);
    return st;
}

/* The sampled rows and columns of the reference result (set 0's inputs)
 * and the tolerance. */
static kiln_status make_reference(gpu_state *g, kiln_error *err)
{
    const kiln_tune_config *cfg = &g->cfg;
    g->ref_note[0] = '\0';
    double fp8_tol = 0;
    kiln_status st = sample(g, err);
    if (!st) st = g->fp8 ? fp8_reference(g, &fp8_tol, err) : cublaslt_reference(g, err);
    if (st) return st;
    const char *tol = getenv("KILN_TUNE_TOL");
    g->tol = tol && *tol ? atof(tol)
             : g->fp8 ? fp8_tol
             : cfg->out_type == KILN_DTYPE_F32 ? 1e-3
             : cfg->out_type == KILN_DTYPE_F16 ? 5e-3
                                               : 1e-2;
    return KILN_OK;
}

/* ---- the timer ---------------------------------------------------------- */

/* The elements of the recipe's scale tensors (kiln.h, kiln_fp8) for an
 * output of n_out columns reducing over k_red, T rows, G groups. */
static void fp8_scale_counts(kiln_fp8_recipe r, int64_t G, int64_t T, int64_t n_out,
                             int64_t k_red, size_t *sa, size_t *sb)
{
    int64_t nkb = (k_red + 127) / 128, nbn = (n_out + 127) / 128;
    *sa = r == KILN_FP8_TENSOR ? 1 : r == KILN_FP8_ROW ? (size_t)T : (size_t)(nkb * T);
    *sb = r == KILN_FP8_TENSOR ? (size_t)G : r == KILN_FP8_ROW ? (size_t)(G * n_out)
                                                              : (size_t)(G * nbn * nkb);
}

/* Set 0's inputs, random, from the host (fp8: also the recipe's scales, and
 * each host chunk kept for the reference).  8-bit values in [-2, 2] (the
 * e4m3 and e5m2 roundings of multiples of 1/256: many exponents), scales,
 * row scales and α in [0.5, 1.5], the rest in [-1, 1]. */
static kiln_status fill_first_set(gpu_state *g, const part_bytes *pb, void *host, uint64_t *seed,
                                  kiln_error *err)
{
    const kiln_tune_config *cfg = &g->cfg;
    gpu_set *x = &g->sets[0];
    const float in = g->fp8 ? 2.0f : 1.0f;
#define KEEP(i) (g->fp8 ? &g->kept[i] : NULL)
    struct {
        CUdeviceptr *dst;
        kiln_dtype t;
        size_t bytes;
        float lo, hi;
        const char *what;
        int keep;
    } parts[] = {
        {&x->a, cfg->a_type, pb->a, -in, in, "cuMemAlloc(A)", KEPT_A},
        {&x->b, cfg->b_type, pb->b, -in, in, "cuMemAlloc(B)", KEPT_B},
        {&x->scale_a, KILN_DTYPE_F32, pb->scale_a, 0.5f, 1.5f, "cuMemAlloc(fp8 scale_a)", KEPT_SCALE_A},
        {&x->scale_b, KILN_DTYPE_F32, pb->scale_b, 0.5f, 1.5f, "cuMemAlloc(fp8 scale_b)", KEPT_SCALE_B},
        {&x->bias, cfg->out_type, pb->bias, -1.0f, 1.0f, "cuMemAlloc(bias)", KEPT_BIAS},
        {&x->row_scale, KILN_DTYPE_F32, pb->scale, 0.5f, 1.5f, "cuMemAlloc(row_scale)", KEPT_ROW_SCALE},
        {&x->alpha, KILN_DTYPE_F32, pb->alpha, 0.5f, 1.5f, "cuMemAlloc(alpha)", KEPT_ALPHA},
        {&x->c, cfg->out_type, pb->c, -1.0f, 1.0f, "cuMemAlloc(C)", KEPT_C},
    };
    kiln_status st = KILN_OK;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0] && !st; i++)
        if (i < 2 || parts[i].bytes)
            st = alloc_fill(g, parts[i].dst, host, parts[i].t, parts[i].bytes, parts[i].lo,
                            parts[i].hi, seed, parts[i].what, KEEP(parts[i].keep), err);
#undef KEEP
    if (!st) st = alloc_upload(g, &x->d, NULL, g->out_bytes, "cuMemAlloc(D)", err);
    if (!st && pb->dbias) st = alloc_upload(g, &x->dbias, NULL, pb->dbias, "cuMemAlloc(db)", err);
    return st;
}

static kiln_status gpu_prepare(kiln_tune_timer *t, const kiln_tune_config *cfg,
                               const kiln_tune_shape *shape, const int32_t *sizes, int64_t total,
                               kiln_error *err)
{
    gpu_state *g = t->self;
    if (!push(g)) return kiln_error_set(err, KILN_ERROR_DRIVER, "cuCtxPushCurrent failed");
    free_buffers(g);
    g->cfg = *cfg;
    g->shape = shape;
    g->total = total;
    g->fp8 = cfg->op != KILN_OP_WGRAD && kiln_dtype_size(cfg->a_type) == 1;
    kiln_status st = KILN_OK;
    const int64_t G = shape->groups, N = shape->n, K = shape->k, T = total;
    int sa = kiln_dtype_size(cfg->a_type), sb = kiln_dtype_size(cfg->b_type),
        so = kiln_dtype_size(cfg->out_type);
    int64_t a_cols = cfg->op == KILN_OP_FPROP ? K : N;
    /* B: W [G,N,K] (fp8 dgrad: W transposed, [G,K,N], the same bytes) */
    size_t a_bytes = (size_t)(T * a_cols * sa);
    size_t b_bytes = cfg->op == KILN_OP_WGRAD ? (size_t)(T * K * sb) : (size_t)(G * N * K * sb);
    if (cfg->op == KILN_OP_WGRAD) {
        g->out_rows = G * N;
        g->out_cols = K;
    } else {
        g->out_rows = T;
        g->out_cols = cfg->op == KILN_OP_FPROP ? N : K;
    }
    g->out_bytes = (size_t)(g->out_rows * g->out_cols * so);
    int fwd = cfg->op != KILN_OP_WGRAD;
    const kiln_epilogue_desc *e = &cfg->epilogue;
    size_t n_sa = 0, n_sb = 0;
    if (g->fp8) fp8_scale_counts(cfg->fp8_recipe, G, T, g->out_cols, a_cols, &n_sa, &n_sb);
    const part_bytes bytes = {
        .a = a_bytes, .b = b_bytes,
        .bias = fwd && e->bias == KILN_BIAS_PER_GROUP ? (size_t)(G * g->out_cols * so) : 0,
        .scale = fwd && e->row_scale ? (size_t)T * 4 : 0,
        .alpha = fwd && e->alpha == KILN_ALPHA_PER_GROUP ? (size_t)G * 4 : 0,
        .c = fwd && e->beta ? g->out_bytes : 0, .scale_a = n_sa * 4, .scale_b = n_sb * 4,
        .dbias = !fwd && cfg->dbias ? (size_t)(G * N * 4) : 0};
    size_t set_bytes = a_bytes + b_bytes + g->out_bytes + bytes.bias + bytes.scale + bytes.alpha +
                       bytes.c + bytes.scale_a + bytes.scale_b + bytes.dbias;
    int want = (int)((3.0 * g->l2_bytes) / (double)(set_bytes ? set_bytes : 1)) + 1;
    if (want > MAX_SETS) want = MAX_SETS;
    if (want < 1) want = 1;

    g->host_sizes = malloc((size_t)G * sizeof *g->host_sizes);
    /* the sampled rows (sample: at most SAMPLE_ROWS of them) */
    int64_t kept_rows = g->out_rows < SAMPLE_ROWS ? g->out_rows : SAMPLE_ROWS;
    size_t host_out_bytes = (size_t)(kept_rows * g->out_cols * so);
    g->host_out = malloc(host_out_bytes ? host_out_bytes : 16);
    void *host = malloc(FILL_HOST_MAX);
    if (!g->host_sizes || !g->host_out || !host) {
        free(host);
        pop(g);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "host memory for %s", shape->name);
    }
    memcpy(g->host_sizes, sizes, (size_t)G * sizeof *sizes);
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(T * 31 + N * 7 + K);
    if ((st = alloc_upload(g, &g->sizes, sizes, (size_t)G * 4, "cuMemAlloc(sizes)", err)) ||
        (st = fill_first_set(g, &bytes, host, &seed, err)))
        goto out;
    g->n_sets = 1;
    if ((st = more_sets(g, &bytes, want, err))) goto out;
    /* The fills and copies above run on the legacy stream, and a
     * device-to-device copy returns before it is done; the timing stream is
     * non-blocking, so without this the reference could read inputs still
     * being filled (the fourth session's corpus run: every variant "wrong"
     * by the same 0.06-1.3 on 59 of 146 shapes). */
    if ((st = check(g, DRV(g)->cuCtxSynchronize(), "filling the inputs", err))) goto out;

    if ((st = make_reference(g, err))) goto out;
    g->prepared = 1;
out:
    free(host);
    if (st) free_buffers(g);
    pop(g);
    return st;
}

/* 1 if the context still works after a failure (errors like an illegal
 * address are sticky: every later call fails). */
static int context_alive(gpu_state *g)
{
    return DRV(g)->cuCtxSynchronize() == CUDA_SUCCESS;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --hold: launches k back to back, rotating the sets, until g->hold_ms have
 * passed on the stream.  Run long enough at the power limit, a kernel's
 * clock settles to what its own energy a FLOP allows (the held-alone runs
 * of docs/tuning.md hold each side 1.5-2 s); a burst is timed at
 * whatever clock the variant before left, which favors the tiles of more
 * work a cycle over those of less energy (docs/tuning.md, "Held alone").
 * The stream is waited on every ~50 ms of work, which leaves it idle for
 * microseconds only. */
static kiln_status hold_clock(gpu_state *g, kiln_rt_kernel *k, float first_ms, kiln_error *e)
{
    const kiln_driver *d = DRV(g);
    int chunk = first_ms > 0 && first_ms < 50 ? (int)(50 / first_ms) : 1;
    kiln_problem p;
    kiln_status st;
    if ((st = kiln_driver_check(d, d->cuEventRecord(g->ev[0], g->stream), "cuEventRecord", e)))
        return st;
    for (long i = 0;;) {
        for (int c = 0; c < chunk; c++, i++) {
            problem_on(g, (int)(i % g->n_sets), &p);
            if ((st = kiln_launch_generated(g->ctx, k, &p, g->stream, e))) return st;
        }
        float held = 0;
        if ((st = kiln_driver_check(d, d->cuEventRecord(g->ev[1], g->stream), "cuEventRecord", e)) ||
            (st = kiln_driver_check(d, d->cuEventSynchronize(g->ev[1]), "held runs", e)) ||
            (st = kiln_driver_check(d, d->cuEventElapsedTime(&held, g->ev[0], g->ev[1]),
                                    "cuEventElapsedTime", e)))
            return st;
        if (held >= g->hold_ms) return KILN_OK;
    }
}

static kiln_status gpu_time(kiln_tune_timer *t, const kiln_tune_variant *v, kiln_tune_measure *m,
                            kiln_error *err)
{
    gpu_state *g = t->self;
    memset(m, 0, sizeof *m);
    if (!g->prepared) return kiln_error_set(err, KILN_ERROR_INTERNAL, "gpu timer: not prepared");
    if (!push(g)) return kiln_error_set(err, KILN_ERROR_DRIVER, "cuCtxPushCurrent failed");
    const kiln_driver *d = DRV(g);
    kiln_rt_kernel k;
    memset(&k, 0, sizeof k);
    k.desc = *v->desc;
    k.launch = *v->launch;
    kiln_error e;
    kiln_error_clear(&e);
    CUresult r = d->cuModuleLoadData(&k.module, v->cubin);
    if (r == CUDA_SUCCESS) r = d->cuModuleGetFunction(&k.function, k.module, k.launch.entry);
    if (r != CUDA_SUCCESS) {
        kiln_driver_check(d, r, "loading the cubin", &e);
        goto failed;
    }
    k.loaded = 1;
    if (kiln_launch_prepare(g->ctx, &k, v->cubin, v->cubin_size, &e) != KILN_OK) goto failed;

    /* Correctness on set 0. */
    kiln_problem p;
    problem_on(g, 0, &p);
    kiln_status st;
    if ((st = reset_out(g, 0, &e)) ||
        (st = kiln_driver_check(d, d->cuEventRecord(g->ev[0], g->stream), "cuEventRecord", &e)) ||
        (st = kiln_launch_generated(g->ctx, &k, &p, g->stream, &e)) ||
        (st = kiln_driver_check(d, d->cuEventRecord(g->ev[1], g->stream), "cuEventRecord", &e)) ||
        (st = kiln_driver_check(d, d->cuStreamSynchronize(g->stream), "checked run", &e)))
        goto failed;
    float first_ms = 0;
    d->cuEventElapsedTime(&first_ms, g->ev[0], g->ev[1]);
    if (g->have_ref) {
        double rel = compare(g, &e, &st);
        if (st) goto failed;
        m->rel_err = rel;
        if (!(rel <= g->tol)) {
            snprintf(m->note, sizeof m->note, "wrong result: relative error %.3g vs the "
                                              "reference (tolerance %.3g)%s",
                     rel, g->tol, isnan(rel) ? "; outputs left unwritten or NaN" : "");
            goto done;
        }
    } else {
        m->rel_err = -1;
        snprintf(m->note, sizeof m->note, "%s", g->ref_note);
    }

    /* Warm-up, then one event pair per launch, rotating the sets.  Slow
     * variants get fewer runs (at least 5) so that one measurement takes
     * about $KILN_TUNE_BUDGET_MS (2000) at most. */
    int runs = g->runs, warmup = g->warmup;
    if (first_ms > 0) {
        double fit = g->budget_ms / first_ms;
        if (fit < runs) runs = fit < 5 ? 5 : (int)fit;
        if (runs > g->runs) runs = g->runs;
        if (warmup > 1 && first_ms * warmup > 0.25 * g->budget_ms)
            warmup = (int)(0.25 * g->budget_ms / first_ms) > 1 ? (int)(0.25 * g->budget_ms / first_ms) : 1;
    }
    for (int i = 0; i < warmup; i++) {
        problem_on(g, i % g->n_sets, &p);
        if ((st = kiln_launch_generated(g->ctx, &k, &p, g->stream, &e))) goto failed;
    }
    if (g->hold_ms > 0 && (st = hold_clock(g, &k, first_ms, &e))) goto failed;
    for (int i = 0; i < runs; i++) {
        problem_on(g, (i + 1) % g->n_sets, &p);
        if ((r = d->cuEventRecord(g->ev[2 * i], g->stream)) != CUDA_SUCCESS) {
            kiln_driver_check(d, r, "cuEventRecord", &e);
            goto failed;
        }
        if ((st = kiln_launch_generated(g->ctx, &k, &p, g->stream, &e))) goto failed;
        if ((r = d->cuEventRecord(g->ev[2 * i + 1], g->stream)) != CUDA_SUCCESS) {
            kiln_driver_check(d, r, "cuEventRecord", &e);
            goto failed;
        }
    }
    if ((st = kiln_driver_check(d, d->cuStreamSynchronize(g->stream), "timed runs", &e)))
        goto failed;
    double ms[MAX_RUNS];
    for (int i = 0; i < runs; i++) {
        float f = 0;
        if ((r = d->cuEventElapsedTime(&f, g->ev[2 * i], g->ev[2 * i + 1])) != CUDA_SUCCESS) {
            kiln_driver_check(d, r, "cuEventElapsedTime", &e);
            goto failed;
        }
        ms[i] = f;
    }
    qsort(ms, (size_t)runs, sizeof *ms, cmp_double);
    m->runs = runs;
    m->min_ms = ms[0];
    m->max_ms = ms[runs - 1];
    m->median_ms = runs % 2 ? ms[runs / 2] : 0.5 * (ms[runs / 2 - 1] + ms[runs / 2]);
    if (!(m->median_ms > 0)) {
        snprintf(m->note, sizeof m->note, "timer read %g ms", m->median_ms);
        goto done;
    }
    m->ok = 1;
    goto done;
failed:
    snprintf(m->note, sizeof m->note, "%s", e.msg);
    m->ok = 0;
    if (!context_alive(g)) m->fatal = 1;
done:
    if (k.module) d->cuModuleUnload(k.module);
    pop(g);
    return KILN_OK;
}

static void gpu_cleanup(kiln_tune_timer *t)
{
    gpu_state *g = t->self;
    if (!push(g)) return;
    free_buffers(g);
    pop(g);
}

static void gpu_destroy(kiln_tune_timer *t)
{
    gpu_state *g = t->self;
    if (g) {
        if (g->ctx && g->ctx->driver_ok && g->ctx->cu && push(g)) {
            free_buffers(g);
            for (int i = 0; i < g->n_ev; i++) DRV(g)->cuEventDestroy(g->ev[i]);
            if (g->stream) DRV(g)->cuStreamDestroy(g->stream);
            pop(g);
        }
        kiln_context_destroy(g->ctx);
        free(g);
    }
    free(t);
}

static const kiln_tune_timer_ops gpu_ops = {gpu_prepare, gpu_time, gpu_cleanup, gpu_destroy};

kiln_status kiln_tune_gpu_count(int *devices, kiln_error *err)
{
    kiln_driver d;
    memset(&d, 0, sizeof d);
    *devices = 0;
    kiln_status st = kiln_driver_load(&d, err);
    if (st) return st;
    int n = 0;
    st = kiln_driver_check(&d, d.cuDeviceGetCount(&n), "cuDeviceGetCount", err);
    kiln_driver_unload(&d);
    if (st) return st;
    if (n < 1) return kiln_error_set(err, KILN_ERROR_DRIVER, "no CUDA device found");
    *devices = n;
    return KILN_OK;
}

static int env_int(const char *name, int def, int lo, int hi)
{
    const char *v = getenv(name);
    if (!v || !*v) return def;
    int x = atoi(v);
    return x < lo ? lo : x > hi ? hi : x;
}

kiln_status kiln_tune_gpu_create(int device_index, const char *cache_dir, double hold_s,
                                 kiln_tune_timer **out, kiln_error *err)
{
    *out = NULL;
    kiln_tune_timer *t = calloc(1, sizeof *t);
    gpu_state *g = t ? calloc(1, sizeof *g) : NULL;
    if (!g) {
        free(t);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "gpu timer: out of memory");
    }
    t->ops = &gpu_ops;
    t->self = g;
    t->device_index = device_index;
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.device = device_index;
    o.cache_dir = cache_dir;
    o.allowed_backends = KILN_ALLOW_CUBLASLT;
    kiln_status st = kiln_context_create(&o, &g->ctx);
    if (st) {
        kiln_error_set(err, st, "%s", kiln_last_error(g->ctx));
        gpu_destroy(t);
        return st;
    }
    g->warmup = env_int("KILN_TUNE_WARMUP", 5, 0, 1000);
    g->runs = env_int("KILN_TUNE_RUNS", 30, 1, MAX_RUNS);
    g->budget_ms = env_int("KILN_TUNE_BUDGET_MS", 2000, 10, 600000);
    g->hold_ms = hold_s > 0 ? 1000 * hold_s : 0;
    if (!push(g)) {
        gpu_destroy(t);
        return kiln_error_set(err, KILN_ERROR_DRIVER, "cuCtxPushCurrent failed");
    }
    const kiln_driver *d = DRV(g);
    char name[100] = "";
    d->cuDeviceGetName(name, (int)sizeof name, g->ctx->device);
    st = check(g, d->cuDeviceGetAttribute(&g->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
                                          g->ctx->device), "cuDeviceGetAttribute(L2_CACHE_SIZE)", err);
    if (!st) st = check(g, d->cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", err);
    for (int i = 0; !st && i < 2 * g->runs; i++) {
        st = check(g, d->cuEventCreate(&g->ev[i], CU_EVENT_DEFAULT), "cuEventCreate", err);
        if (!st) g->n_ev++;
    }
    pop(g);
    if (st) {
        gpu_destroy(t);
        return st;
    }
    snprintf(t->arch, sizeof t->arch, "%s", g->ctx->arch);
    snprintf(t->device, sizeof t->device, "GPU %d (%s, %s, %d SMs)", device_index, name,
             g->ctx->arch, g->ctx->num_sms);
    /* The id names the model, not the ordinal: measurements of one H200 are
     * as good as another's, so a resumed run may land on any of them. */
    snprintf(t->id, sizeof t->id, "gpu:%s", name);
    for (char *p = t->id; *p; p++)
        if (*p == ' ' || *p == '\t') *p = '_';
    if (hold_s > 0) {
        size_t n = strlen(t->id);
        snprintf(t->id + n, sizeof t->id - n, "@held%gs", hold_s);
    }
    *out = t;
    return KILN_OK;
}

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
 * warm up and time each launch with CUDA events, rotating the sets; the
 * median is the result.
 *
 * The reference is kiln_gemm on a context allowed only cuBLASLt (host sizes
 * are given), which is independent of every generated kernel.  Data,
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
} gpu_set;

typedef struct gpu_state {
    kiln_context *ctx;
    CUstream stream;
    int l2_bytes;
    int warmup, runs;
    double budget_ms;            /* time one measurement may take, roughly */
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
    void *host_out;              /* out_bytes, for read-back */
    float *ref;                  /* sampled rows of the reference */
    int64_t *rows;               /* which rows */
    size_t n_rows;
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
        CUdeviceptr *all[] = {&x->a, &x->b, &x->d, &x->c, &x->bias, &x->row_scale, &x->alpha,
                              &x->d_ptrs};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free_ptr(g, all[i]);
    }
    free_ptr(g, &g->sizes);
    g->n_sets = 0;
    free(g->host_sizes);
    free(g->host_out);
    free(g->ref);
    free(g->rows);
    g->host_sizes = NULL;
    g->host_out = NULL;
    g->ref = NULL;
    g->rows = NULL;
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
        return;
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
 * device, each copy doubling what is there. */
static kiln_status alloc_fill(gpu_state *g, CUdeviceptr *dst, void *host, kiln_dtype t,
                              size_t bytes, float lo, float hi, uint64_t *seed, const char *what,
                              kiln_error *err)
{
    const size_t esz = (size_t)kiln_dtype_size(t);
    size_t first = bytes < FILL_HOST_MAX ? bytes : FILL_HOST_MAX / esz * esz;
    kts_fill(seed, host, t, first / esz, lo, hi);
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

/* Relative Frobenius error of the output of set 0 against the reference. */
static double compare(gpu_state *g, kiln_error *err, kiln_status *st)
{
    *st = check(g, DRV(g)->cuMemcpyDtoH(g->host_out, g->sets[0].d, g->out_bytes),
                "cuMemcpyDtoH(output)", err);
    if (*st) return INFINITY;
    kts_err e = {0};
    for (size_t i = 0; i < g->n_rows; i++)
        for (int64_t c = 0; c < g->out_cols; c++) {
            float y = kts_load(g->host_out, (size_t)(g->rows[i] * g->out_cols + c), g->cfg.out_type);
            if (!isfinite(y)) return NAN;
            kts_err_add(&e, y, g->ref[i * (size_t)g->out_cols + (size_t)c]);
        }
    return kts_err_rel(&e);
}

/* The bytes of each input of a set. */
typedef struct part_bytes {
    size_t a, b, bias, scale, alpha, c;
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
            {&y->alpha, x->alpha, pb->alpha}, {&y->c, x->c, pb->c}};
        int ok = 1;
        for (size_t i = 0; i < sizeof parts / sizeof parts[0] && ok; i++) {
            if (!parts[i].bytes) continue;
            if (DRV(g)->cuMemAlloc(parts[i].dst, parts[i].bytes) != CUDA_SUCCESS) ok = 0;
            else if (parts[i].src &&
                     DRV(g)->cuMemcpyDtoD(*parts[i].dst, parts[i].src, parts[i].bytes) != CUDA_SUCCESS)
                ok = 0;
        }
        if (!ok) { /* out of memory: time with the sets we have */
            CUdeviceptr *all[] = {&y->a, &y->b, &y->d, &y->bias, &y->row_scale, &y->alpha, &y->c};
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

/* The sampled rows of the reference result (set 0's inputs) and the
 * tolerance. */
static kiln_status make_reference(gpu_state *g, kiln_error *err)
{
    const kiln_tune_config *cfg = &g->cfg;
    kiln_status st;
    /* Sampled rows: all of them for small outputs, evenly spaced otherwise
     * (always the first and the last). */
    g->n_rows = g->out_rows <= SAMPLE_ROWS ? (size_t)g->out_rows : SAMPLE_ROWS;
    g->rows = malloc((g->n_rows ? g->n_rows : 1) * sizeof *g->rows);
    g->ref = malloc((g->n_rows ? g->n_rows : 1) * (size_t)g->out_cols * sizeof *g->ref);
    if (!g->rows || !g->ref) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "host memory");
    for (size_t i = 0; i < g->n_rows; i++)
        g->rows[i] = g->n_rows == (size_t)g->out_rows || g->n_rows < 2
                         ? (int64_t)i
                         : (int64_t)((double)i * (double)(g->out_rows - 1) / (double)(g->n_rows - 1));

    /* The reference, through the runtime (cuBLASLt only: see kiln_tune_gpu_create). */
    g->ref_note[0] = '\0';
    kiln_problem p;
    problem_on(g, 0, &p);
    if ((st = check(g, DRV(g)->cuMemsetD8Async(g->sets[0].d, 0, g->out_bytes, g->stream),
                    "cuMemsetD8Async(output)", err)))
        return st;
    if (kiln_gemm(g->ctx, &p, g->stream) != KILN_OK) {
        snprintf(g->ref_note, sizeof g->ref_note, "not checked: no reference (%s)",
                 kiln_last_error(g->ctx));
    } else if ((st = check(g, DRV(g)->cuStreamSynchronize(g->stream), "reference run", err)) ||
               (st = check(g, DRV(g)->cuMemcpyDtoH(g->host_out, g->sets[0].d, g->out_bytes),
                           "cuMemcpyDtoH(reference)", err))) {
        return st;
    } else {
        for (size_t i = 0; i < g->n_rows; i++)
            for (int64_t c = 0; c < g->out_cols; c++)
                g->ref[i * (size_t)g->out_cols + (size_t)c] =
                    kts_load(g->host_out, (size_t)(g->rows[i] * g->out_cols + c), cfg->out_type);
        g->have_ref = 1;
    }
    const char *tol = getenv("KILN_TUNE_TOL");
    g->tol = tol && *tol ? atof(tol)
             : cfg->out_type == KILN_DTYPE_F32 ? 1e-3
             : cfg->out_type == KILN_DTYPE_F16 ? 5e-3
                                               : 1e-2;
    return KILN_OK;
}

/* ---- the timer ---------------------------------------------------------- */

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
    kiln_status st = KILN_OK;
    const int64_t G = shape->groups, N = shape->n, K = shape->k, T = total;
    int sa = kiln_dtype_size(cfg->a_type), sb = kiln_dtype_size(cfg->b_type),
        so = kiln_dtype_size(cfg->out_type);
    int64_t a_cols = cfg->op == KILN_OP_FPROP ? K : N;
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
    size_t bias_bytes = fwd && e->bias == KILN_BIAS_PER_GROUP ? (size_t)(G * g->out_cols * so) : 0;
    size_t scale_bytes = fwd && e->row_scale ? (size_t)T * 4 : 0;
    size_t alpha_bytes = fwd && e->alpha == KILN_ALPHA_PER_GROUP ? (size_t)G * 4 : 0;
    size_t c_bytes = fwd && e->beta ? g->out_bytes : 0;
    size_t set_bytes = a_bytes + b_bytes + g->out_bytes + bias_bytes + scale_bytes + alpha_bytes +
                       c_bytes;
    const part_bytes bytes = {a_bytes, b_bytes, bias_bytes, scale_bytes, alpha_bytes, c_bytes};
    int want = (int)((3.0 * g->l2_bytes) / (double)(set_bytes ? set_bytes : 1)) + 1;
    if (want > MAX_SETS) want = MAX_SETS;
    if (want < 1) want = 1;

    g->host_sizes = malloc((size_t)G * sizeof *g->host_sizes);
    g->host_out = malloc(g->out_bytes ? g->out_bytes : 16);
    void *host = malloc(FILL_HOST_MAX);
    if (!g->host_sizes || !g->host_out || !host) {
        free(host);
        pop(g);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "host memory for %s", shape->name);
    }
    memcpy(g->host_sizes, sizes, (size_t)G * sizeof *sizes);
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(T * 31 + N * 7 + K);
    if ((st = alloc_upload(g, &g->sizes, sizes, (size_t)G * 4, "cuMemAlloc(sizes)", err))) goto out;

    /* Set 0 from the host. */
    gpu_set *x = &g->sets[0];
    if ((st = alloc_fill(g, &x->a, host, cfg->a_type, a_bytes, -1.0f, 1.0f, &seed,
                         "cuMemAlloc(A)", err)) ||
        (st = alloc_fill(g, &x->b, host, cfg->b_type, b_bytes, -1.0f, 1.0f, &seed,
                         "cuMemAlloc(B)", err)) ||
        (st = alloc_upload(g, &x->d, NULL, g->out_bytes, "cuMemAlloc(D)", err)))
        goto out;
    if (bias_bytes && (st = alloc_fill(g, &x->bias, host, cfg->out_type, bias_bytes, -1.0f, 1.0f,
                                       &seed, "cuMemAlloc(bias)", err)))
        goto out;
    if (scale_bytes && (st = alloc_fill(g, &x->row_scale, host, KILN_DTYPE_F32, scale_bytes, 0.5f,
                                        1.5f, &seed, "cuMemAlloc(row_scale)", err)))
        goto out;
    if (alpha_bytes && (st = alloc_fill(g, &x->alpha, host, KILN_DTYPE_F32, alpha_bytes, 0.5f,
                                        1.5f, &seed, "cuMemAlloc(alpha)", err)))
        goto out;
    if (c_bytes && (st = alloc_fill(g, &x->c, host, cfg->out_type, c_bytes, -1.0f, 1.0f, &seed,
                                    "cuMemAlloc(C)", err)))
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
    if (kiln_launch_prepare(g->ctx, &k, &e) != KILN_OK) goto failed;

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

kiln_status kiln_tune_gpu_create(int device_index, const char *cache_dir, kiln_tune_timer **out,
                                 kiln_error *err)
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
    *out = t;
    return KILN_OK;
}
